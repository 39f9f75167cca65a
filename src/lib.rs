//! larder: a content-addressed, deduplicating, compressed and encrypted
//! backup store. The library holds all logic; the `larder` binary only parses
//! arguments, calls in here and prints.
//!
//! Data flows one way: walk → read → chunk → hash → dedup → compress →
//! encrypt → pack → backend. Modules, from the bottom up:
//! [`backend`] (storage), [`crypto`] and [`keys`] (keys and sealing),
//! [`object`] (sealed objects), [`chunker`], [`pack`], [`index`],
//! [`repository`] (the door to a repository), [`lock`], [`tree`] and
//! [`snapshot`], [`archiver`] (backup), [`restorer`], [`diff`], [`check`].

pub mod archiver;
pub mod backend;
pub mod check;
pub mod chunker;
pub mod cli;
pub mod crypto;
pub mod diff;
pub mod error;
pub mod id;
pub mod index;
pub mod keys;
pub mod lock;
pub mod object;
pub mod pack;
pub mod packer;
pub mod repository;
pub mod restorer;
pub mod schedule;
pub mod snapshot;
pub mod tree;

pub use error::{Error, Result};
pub use id::Id;
pub use repository::Repository;

/// The version recorded in snapshots.
pub const PROGRAM_VERSION: &str = concat!("larder ", env!("CARGO_PKG_VERSION"));
