//! Integration tests, one binary: each module covers one capability.

mod bench_table;
mod check_rotation;
mod common;
mod daily;
mod dump_copy;
mod faults;
mod fidelity;
mod find_tag_rewrite;
mod forget;
mod forget_policy;
mod hostile;
mod json_docs;
mod locks;
mod mount;
mod progress;
mod prune;
mod remote;
mod remote_sftp;
mod repair_snapshots;
mod repo_core;
mod safety;
mod schedule;
mod stats;
mod support;
mod untrusted;
mod vectors;
