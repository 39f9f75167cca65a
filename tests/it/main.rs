//! Integration tests, one binary: each module covers one capability.

mod bench_table;
mod common;
mod daily;
mod fidelity;
mod forget_policy;
mod repo_core;
mod untrusted;
mod vectors;
