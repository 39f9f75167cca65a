//! Integration tests, one binary: each module covers one capability.

mod common;
mod repo_core;
mod untrusted;
mod vectors;
