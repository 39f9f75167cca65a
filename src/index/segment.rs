//! Index segments (`index/<id>`): the repository's record of which blobs
//! each pack holds. A segment is a sealed object listing packs with their
//! sizes and header entries; it is named by the BLAKE3 of its bytes.
//!
//! A reader that absorbs many segments takes their packs one at a time
//! ([`for_each_pack`]) rather than as a whole [`IndexSegment`]: a segment
//! written by an older prune lists a quarter million blobs, and decoding it
//! whole held about 14 MB more per segment in flight.

use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use crate::pack::PackEntry;
use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// A writer starts a new segment once the one it fills lists this many
/// blobs (or at the end of its run): about 3 MB stored, which bounds what
/// the writer holds until it writes the segment and what a reader that
/// decodes a segment whole holds. Only a pack of more blobs than this
/// makes a larger segment, and a pack is bounded by its own size. Every
/// writer keeps to it: a backup's packer, a prune's compaction and
/// `repair index`. Readers accept larger segments (older writers made
/// them), up to the object size limit.
pub const SEGMENT_BLOBS: usize = 65_536;

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
    object::decode(&what, &read_segment_body(backend, keys, name)?)
}

/// Reads, verifies and decrypts one segment, and returns its body
/// undecoded, for [`for_each_pack`].
pub fn read_segment_body(backend: &dyn Backend, keys: &Keys, name: &str) -> Result<Vec<u8>> {
    let what = Kind::Index.path(name);
    let bytes = backend.read_bounded(Kind::Index, name, object::MAX_OBJECT_STORED)?;
    if Id::of_object(&bytes).to_hex() != name {
        return Err(Error::corrupt(
            &what,
            "contents do not hash to the object's name",
        ));
    }
    object::open_body_owned(keys, ObjectType::Index, &what, bytes)
}

/// Decodes a segment's body (as [`read_segment_body`] returns it) one pack
/// at a time, handing each to `f`, and accepts and rejects exactly the
/// bodies `object::decode::<IndexSegment>` does. An error of `f` stops the
/// decoding and is returned; packs handed over before a decoding error
/// stay handed over (decode once with a callback that keeps nothing to
/// learn first whether the whole body decodes).
pub fn for_each_pack(
    what: &str,
    body: &[u8],
    mut f: impl FnMut(IndexPack) -> Result<()>,
) -> Result<()> {
    let mut stopped = None;
    let seed = SegmentSeed {
        f: &mut f,
        stopped: &mut stopped,
    };
    let decoded = object::decode_seed(what, body, seed);
    match stopped {
        Some(e) => Err(e),
        None => decoded,
    }
}

/// The segment as serde sees it (a struct of one field, `packs`), with
/// the packs passed to `f` instead of collected; `f`'s error is kept in
/// `stopped`.
struct SegmentSeed<'a, F> {
    f: &'a mut F,
    stopped: &'a mut Option<Error>,
}

impl<'de, F: FnMut(IndexPack) -> Result<()>> DeserializeSeed<'de> for SegmentSeed<'_, F> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_struct("IndexSegment", &["packs"], self)
    }
}

impl<'de, F: FnMut(IndexPack) -> Result<()>> Visitor<'de> for SegmentSeed<'_, F> {
    type Value = ();

    fn expecting(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        out.write_str("an index segment")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        match seq.next_element_seed(PacksSeed {
            f: self.f,
            stopped: self.stopped,
        })? {
            Some(()) => Ok(()),
            None => Err(de::Error::invalid_length(0, &self)),
        }
    }
}

/// The `packs` field: a sequence whose elements go to `f` one by one.
struct PacksSeed<'a, F> {
    f: &'a mut F,
    stopped: &'a mut Option<Error>,
}

impl<'de, F: FnMut(IndexPack) -> Result<()>> DeserializeSeed<'de> for PacksSeed<'_, F> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(IndexPack) -> Result<()>> Visitor<'de> for PacksSeed<'_, F> {
    type Value = ();

    fn expecting(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        out.write_str("a sequence of packs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(pack) = seq.next_element::<IndexPack>()? {
            if let Err(e) = (self.f)(pack) {
                *self.stopped = Some(e);
                return Err(de::Error::custom("stopped by its reader"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::BlobType;

    fn segment() -> IndexSegment {
        let entry = |n: u32| PackEntry {
            ty: if n.is_multiple_of(3) {
                BlobType::Tree
            } else {
                BlobType::Data
            },
            id: Id(*blake3::hash(&n.to_le_bytes()).as_bytes()),
            offset: u64::from(n) * 1000,
            stored_len: n + 40,
            plain_len: n * 300,
            compression: (n % 2) as u8,
        };
        IndexSegment {
            packs: (0..4u32)
                .map(|p| IndexPack {
                    id: Id(*blake3::hash(&[p as u8; 3]).as_bytes()),
                    size: u64::from(p) << 33,
                    blobs: (0..p * 2).map(|b| entry(p * 100 + b)).collect(),
                })
                .collect(),
        }
    }

    /// What `for_each_pack` makes of `body`: the packs, or the error text.
    fn streamed(body: &[u8]) -> std::result::Result<Vec<IndexPack>, String> {
        let mut got = Vec::new();
        for_each_pack("index/x", body, |p| {
            got.push(p);
            Ok(())
        })
        .map(|()| got)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn packs_one_at_a_time_are_the_whole_decode() {
        let seg = segment();
        let body = object::encode(&seg).unwrap();
        assert_eq!(streamed(&body).unwrap(), seg.packs);
        let empty = object::encode(&IndexSegment::default()).unwrap();
        assert_eq!(streamed(&empty).unwrap(), Vec::new());
    }

    #[test]
    fn bodies_are_rejected_exactly_as_the_whole_decode_rejects_them() {
        let body = object::encode(&segment()).unwrap();
        let mut cases: Vec<Vec<u8>> = (0..body.len()).map(|n| body[..n].to_vec()).collect();
        for at in 0..body.len() {
            for bit in [0x01, 0x80] {
                let mut b = body.clone();
                b[at] ^= bit;
                cases.push(b);
            }
        }
        let mut longer = body.clone();
        longer.extend_from_slice(&[0, 0]);
        cases.push(longer);
        let mut rejected = 0;
        for b in &cases {
            let whole = object::decode::<IndexSegment>("index/x", b);
            match (streamed(b), whole) {
                (Ok(packs), Ok(seg)) => assert_eq!(packs, seg.packs),
                (Err(a), Err(w)) => {
                    assert_eq!(a, w.to_string());
                    assert!(a.contains("index/x"), "{a}");
                    rejected += 1;
                }
                (a, w) => panic!("streamed {a:?}, whole {w:?} for {b:?}"),
            }
        }
        assert!(
            rejected > body.len(),
            "{rejected} of {} rejected",
            cases.len()
        );
    }

    #[test]
    fn the_readers_error_stops_the_decoding() {
        let body = object::encode(&segment()).unwrap();
        let mut seen = 0;
        let r = for_each_pack("index/x", &body, |_| {
            seen += 1;
            if seen == 2 {
                return Err(Error::internal("full up"));
            }
            Ok(())
        });
        assert_eq!(seen, 2);
        assert!(r.unwrap_err().to_string().contains("full up"));
    }
}
