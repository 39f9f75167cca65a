//! larder: a content-addressed, deduplicating, compressed and encrypted
//! backup store. The library holds all logic; the `larder` binary only parses
//! arguments, calls in here and prints.
//!
//! Data flows one way: walk → read → chunk → hash → dedup → compress →
//! encrypt → pack → backend. The modules, from the bottom up (a module
//! imports only from its own row or the rows above it, never from below,
//! and there are no import loops):
//!
//! | layer | modules |
//! |---|---|
//! | basics | [`error`], [`id`], [`host`] (host, user, clock), [`interrupt`] (stopping cleanly) |
//! | storage | [`backend`] (the object-store trait; `local`) |
//! | cryptography and formats | [`crypto`] (keys, sealing, blob ids), [`object`] (sealed objects), [`keys`] (key files), [`chunker`], [`pack`] (format, blobs, writer), [`tree`] (nodes and tree blobs), [`index`] (segments and the SQLite cache) |
//! | the repository | [`lock`], [`repository`] (init, open, config, blob and tree reads, repair, the local cache directories), [`snapshot`] (objects, listing, `latest`), [`packer`] (writing new blobs into packs and segments), [`list`] (object ids) |
//! | shared by the operations | [`walker`] (tree walks), [`localfs`] (local files: descriptors, long paths, `O_NOATIME`, metadata), [`progress`] (the progress trait), [`pattern`] (restic's path patterns for excludes and includes) |
//! | operations | [`archiver`] (backup), [`restorer`] (restore), [`dump`] (a path as bytes or an archive), [`diff`], [`diff_live`] (a snapshot against the disk), [`find`], [`copy`] (snapshots between repositories), [`check`], [`schedule`] (profiles and periodic runs), `mount` (the read-only FUSE view; cargo feature `mount`) |
//! | maintenance | [`maintenance`] (the operations that delete or rewrite repository contents: `forget` with the policies of [`retention`], `prune`, `repair snapshots`, `recover`, `stats`; the used-blob set they share) |
//! | scheduled runs' repository work | [`repo_steps`] (the schedule's steps over archiver, maintenance and check; [`repo_steps::open`] is where other backends plug in) |
//! | the command line | [`cli`] (one handler per command; terminal output) |
//!
//! Where new work lands: object stores as implementations of
//! [`backend::Backend`]; operations as modules beside `check` or in
//! [`maintenance`] (walking trees with [`walker`], counting blobs with
//! `maintenance::usage`); commands as `cli/cmd_*.rs` files over library
//! functions.

pub mod archiver;
pub mod backend;
pub mod check;
pub mod chunker;
pub mod cli;
pub mod copy;
pub mod crypto;
pub mod dictionary;
pub mod diff;
pub mod diff_live;
pub mod dump;
pub mod error;
pub mod find;
pub mod host;
pub mod id;
pub mod index;
pub mod interrupt;
pub mod keys;
pub mod list;
pub mod localfs;
pub mod lock;
pub mod maintenance;
#[cfg(feature = "mount")]
pub mod mount;
pub mod object;
pub mod pack;
pub mod packer;
pub mod pattern;
pub mod progress;
pub mod repo_steps;
pub mod repository;
pub mod restorer;
pub mod retention;
pub mod schedule;
pub mod snapshot;
pub mod tree;
pub mod walker;

pub use error::{Error, Result};
pub use id::Id;
pub use repository::Repository;

/// The version recorded in snapshots.
pub const PROGRAM_VERSION: &str = concat!("larder ", env!("CARGO_PKG_VERSION"));
