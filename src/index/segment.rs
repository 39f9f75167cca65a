//! Index segments (`index/<id>`): the repository's record of which blobs
//! each pack holds. A segment is a sealed object listing packs with their
//! sizes and header entries; it is named by the BLAKE3 of its bytes.

use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use crate::pack::PackEntry;
use serde::{Deserialize, Serialize};

/// One pack as listed in an index segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPack {
    pub id: Id,
    pub size: u64,
    pub blobs: Vec<PackEntry>,
}

/// The plaintext of an index segment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexSegment {
    pub packs: Vec<IndexPack>,
}

/// Writes a segment to the repository and returns its id.
pub fn write_segment(backend: &dyn Backend, keys: &Keys, seg: &IndexSegment) -> Result<Id> {
    let bytes = object::seal(keys, ObjectType::Index, seg)?;
    let id = Id::of_object(&bytes);
    backend.write(Kind::Index, &id.to_hex(), &bytes)?;
    Ok(id)
}

/// Reads, verifies (name = hash of bytes) and decrypts one segment.
pub fn read_segment(backend: &dyn Backend, keys: &Keys, name: &str) -> Result<IndexSegment> {
    let what = Kind::Index.path(name);
    let bytes = backend.read_bounded(Kind::Index, name, object::MAX_OBJECT_STORED)?;
    if Id::of_object(&bytes).to_hex() != name {
        return Err(Error::corrupt(
            &what,
            "contents do not hash to the object's name",
        ));
    }
    object::open_owned(keys, ObjectType::Index, &what, bytes)
}
