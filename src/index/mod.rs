//! The blob index: [`segment`] is the repository's record (encrypted index
//! segments under `index/`), [`marks`] prune's deletion marks (which packs
//! are on their way out), [`cache`] the local SQLite database built from
//! both that answers lookups, and `bulk` how many segments enter that
//! database at once (a new client's first open: sorted, and kept as a base
//! of sorted blocks until a command needs every blob as a row), and
//! `reader` a backup's own read connection for its dedup questions. The
//! record and the cache are kept apart: the format of what is stored never
//! depends on how the cache is laid out.

mod bulk;
pub mod cache;
pub mod marks;
pub(crate) mod reader;
pub mod segment;

pub use cache::{BlobLocation, Index, SyncReport};
pub use reader::ReadView;
pub use segment::{
    IndexPack, IndexSegment, SEGMENT_BLOBS, for_each_pack, read_segment, read_segment_body,
    write_segment,
};
