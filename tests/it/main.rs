//! Integration tests, one binary: each module covers one capability.

mod common;
mod daily;
mod fidelity;
mod repo_core;
mod untrusted;
mod vectors;
