//! Maintenance: the operations that delete or rewrite repository contents
//! (forget, prune, recover, repair packs and snapshots, rewrite, tag, stats), as opposed to the ones that
//! only add to it (backup) or only read it (restore, check, diff); and what
//! they share: [`usage`] (which blobs the snapshots use, in an on-disk set).

pub mod forget;
pub mod prune;
pub mod recover;
pub mod repair_packs;
pub mod repair_snapshots;
pub mod rewrite;
pub mod stats;
pub mod tag;
pub mod usage;
