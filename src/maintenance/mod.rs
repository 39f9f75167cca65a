//! The operations that delete or rewrite repository contents, and what they
//! share: [`usage`] (which blobs the snapshots use, in an on-disk set).
//! `forget` (removing snapshots by policy), `prune` (two-phase deletion of
//! unused data, repacking, index compaction), `repair snapshots` and `stats`
//! live here too.

pub mod prune;
pub mod usage;
