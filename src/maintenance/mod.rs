//! Maintenance: the operations that delete or rewrite repository contents
//! (forget, prune, repair snapshots, stats), as opposed to the ones that
//! only add to it (backup) or only read it (restore, check, diff).

pub mod forget;
