//! Integration tests, one binary: each module covers one capability.

mod bench_table;
mod common;
mod daily;
mod faults;
mod fidelity;
mod hostile;
mod repo_core;
mod support;
mod untrusted;
mod vectors;
