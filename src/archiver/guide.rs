//! The parent snapshot's chunks of a changed file, as a guide to cutting
//! it again. A file edited in place (a disk image, a database, a mailbox)
//! keeps most of its bytes where they were. A cut point depends only on
//! the bytes from the chunk's start to the cut (see [`super::split`]), so
//! where the new file holds, from one of its cut points, the same bytes as
//! one of the parent's chunks, the chunker would cut exactly where that
//! chunk ends. Hashing those bytes and finding the parent chunk's ID proves
//! they are the same, and the chunk is taken without the chunker's scan,
//! which costs about as much as the hash. The file's chunk list is the one
//! the chunker alone makes; only the scans of unchanged stretches are saved.
//!
//! - The parent's last chunk ended where its file ended, not where the
//!   chunker would cut, so it is taken only where the new file ends right
//!   after it.
//! - Where a chunk does not match (its bytes changed), the chunker scans
//!   on. A later cut that lands on one of the parent's cut points (shifted
//!   by what was inserted or removed before it) is tried again; a scanned
//!   chunk whose ID is one of the parent's (looked for among the next few,
//!   then among all) says where the parent's chunks go on after an
//!   insertion or a removal.
//! - Chunks of zeros are left to the chunker and the zero IDs' cache.
//!
//! Whatever the guide proposes, a chunk's ID is the hash of its bytes: a
//! wrong guide (a parent cut by another chunker, a length the index has
//! wrong) costs a hash, never a wrong chunk.

use super::blobs::SharedSink;
use super::parent::OldNode;
use crate::id::Id;
use crate::tree::NodeKind;
use std::sync::{Arc, OnceLock};

/// Files whose parent had fewer chunks are cut by the chunker alone: a
/// changed small file is usually changed throughout.
const MIN_CHUNKS: usize = 4;
/// Nor is a guide built for more chunks than this (its tables hold 16
/// bytes a chunk: 4 MiB at most, for files of about 64 GiB).
const MAX_CHUNKS: usize = 1 << 18;
/// After a scanned chunk, how many of the parent's next chunks are looked
/// for by its ID before all of them are.
const RESYNC: usize = 16;

/// The parent's node of a changed file, and its guide once built.
pub(super) struct Prior {
    node: OldNode,
    built: OnceLock<Option<Guide>>,
}

/// Where the parent's chunks started: `starts[k]` is chunk `k`'s offset,
/// the last entry the end of the last chunk whose length is known. And
/// those chunks by ID: the first 4 bytes of each ID with its chunk's
/// number, sorted.
pub(super) struct Guide {
    starts: Vec<u64>,
    by_id: Vec<(u32, u32)>,
}

impl Prior {
    /// For a file whose parent node is `node`: `None` unless that node is
    /// a file with a chunk count worth a guide.
    pub(super) fn new(node: &OldNode) -> Option<Arc<Prior>> {
        let n = node.content.len();
        (node.kind == NodeKind::File && (MIN_CHUNKS..=MAX_CHUNKS).contains(&n)).then(|| {
            Arc::new(Prior {
                node: node.clone(),
                built: OnceLock::new(),
            })
        })
    }

    /// The guide, built by the first reader to ask (the chunks' lengths
    /// come from the index). `None` if the index cannot tell the first
    /// chunk's length.
    pub(super) fn guide(&self, sink: &SharedSink<'_>) -> Option<&Guide> {
        self.built
            .get_or_init(|| {
                // An index that cannot be read leaves the file to the
                // chunker; the dedup checks will meet and report it.
                let lens = sink.plain_lens(&self.node.content).ok()?;
                Guide::new(&self.node.content, &lens)
            })
            .as_ref()
    }

    /// A reader's guide, for a file read to `size` bytes whose first
    /// stored chunk starts at or after offset `from`, by a chunker of
    /// chunks of at most `max` bytes, proving chunks with `hash`. `None`
    /// if the guide cannot be built (see [`Prior::guide`]).
    pub(super) fn guided<'a>(
        &'a self,
        sink: &SharedSink<'_>,
        hash: &'a (dyn Fn(&[u8]) -> Id + Sync),
        size: u64,
        from: u64,
        max: usize,
    ) -> Option<Guided<'a>> {
        let guide = self.guide(sink)?;
        Some(Guided {
            follow: Follow::new(&self.node.content, guide, size, from, max),
            hash,
        })
    }
}

impl Guide {
    /// From the parent's chunk IDs and lengths, up to the first length
    /// unknown.
    pub(super) fn new(ids: &[Id], lens: &[Option<u32>]) -> Option<Guide> {
        let mut starts = Vec::with_capacity(lens.len() + 1);
        let mut at = 0u64;
        starts.push(at);
        for len in lens.iter().take(ids.len()).map_while(|l| *l) {
            at += u64::from(len);
            starts.push(at);
        }
        let known = starts.len() - 1;
        let mut by_id: Vec<(u32, u32)> = (0..known).map(|k| (prefix(&ids[k]), k as u32)).collect();
        by_id.sort_unstable();
        (known > 0).then_some(Guide { starts, by_id })
    }

    /// The first of the parent's chunks whose ID is `id` (of `ids`).
    fn find(&self, ids: &[Id], id: &Id) -> Option<usize> {
        let p = prefix(id);
        let from = self.by_id.partition_point(|e| e.0 < p);
        self.by_id[from..]
            .iter()
            .take_while(|e| e.0 == p)
            .map(|e| e.1 as usize)
            .find(|&k| ids.get(k) == Some(id))
    }
}

/// The first 4 bytes of `id`, the key of [`Guide`]'s table by ID.
fn prefix(id: &Id) -> u32 {
    u32::from_le_bytes([id.0[0], id.0[1], id.0[2], id.0[3]])
}

/// One reader's position on a guide.
pub(super) struct Follow<'a> {
    /// The parent's chunk IDs with a known start (a prefix of its list).
    ids: &'a [Id],
    /// The parent's last chunk (cut by its file's end), if known.
    last: Option<usize>,
    /// Bytes the file is read to.
    size: u64,
    /// The chunker's max chunk size.
    max: usize,
    /// The parent chunk expected at a file offset (after a match).
    next: Option<(u64, usize)>,
    /// New offset minus the parent's, as of the last match.
    shift: i64,
    /// The parent chunk after the last one matched.
    ahead: usize,
    /// Where the parent's chunks start, and its table by ID.
    guide: &'a Guide,
    /// A chunk proved by its hash: its file offset, length and ID.
    proved: Option<(u64, usize, Id)>,
    /// Chunks taken on the guide's word, hashes that did not match,
    /// chunks the chunker cut, and chunks of zeros left to it.
    pub(super) taken: u64,
    pub(super) missed: u64,
    pub(super) scans: u64,
    pub(super) zeros: u64,
}

impl<'a> Follow<'a> {
    /// On the parent's chunks `content` whose starts `guide` has, for a
    /// file read to `size` bytes whose first chunk hashed starts at or
    /// after offset `from`, by a chunker of chunks of at most `max` bytes.
    /// A reader that starts inside the file (a split file's helper) looks
    /// for its first matches among the parent's chunks around that offset
    /// first: what was inserted or removed before it is not known yet.
    pub(super) fn new(
        content: &'a [Id],
        guide: &'a Guide,
        size: u64,
        from: u64,
        max: usize,
    ) -> Follow<'a> {
        let known = (guide.starts.len() - 1).min(content.len());
        let near = guide.starts[..known].partition_point(|&s| s < from);
        Follow {
            ids: &content[..known],
            last: (known == content.len()).then(|| known - 1),
            size,
            max,
            next: None,
            shift: 0,
            ahead: near.saturating_sub(RESYNC / 2),
            guide,
            proved: None,
            taken: 0,
            missed: 0,
            scans: 0,
            zeros: 0,
        }
    }

    /// The parent chunk to try at file offset `pos`, if one started there.
    fn candidate(&self, pos: u64) -> Option<usize> {
        let j = match self.next {
            Some((p, j)) if p == pos => j,
            _ => {
                let q = u64::try_from(pos as i64 - self.shift).ok()?;
                self.guide.starts.binary_search(&q).ok()?
            }
        };
        // Past the last chunk whose start is known: nothing to try.
        (j < self.ids.len()).then_some(j)
    }

    /// The chunker's hint ([`crate::chunker::Chunker::stream_hinted`]) at
    /// file offset `pos`, whose bytes from there are `window`: the length
    /// of the parent's chunk that starts here, if `hash` proves the bytes
    /// the same.
    pub(super) fn hint(
        &mut self,
        pos: u64,
        window: &[u8],
        hash: &dyn Fn(&[u8]) -> Id,
    ) -> Option<usize> {
        let j = self.candidate(pos)?;
        self.next = None;
        let starts = &self.guide.starts;
        let len = usize::try_from(starts[j + 1] - starts[j]).ok()?;
        if len == 0 || len > self.max || len > window.len() {
            return None;
        }
        if self.last == Some(j) && pos + len as u64 != self.size {
            return None;
        }
        let bytes = &window[..len];
        if len >= 4096 && bytes.iter().all(|&b| b == 0) {
            self.zeros += 1;
            return None;
        }
        let id = hash(bytes);
        if id != self.ids[j] {
            self.missed += 1;
            return None;
        }
        self.matched(pos + len as u64, j);
        self.proved = Some((pos, len, id));
        self.taken += 1;
        Some(len)
    }

    /// Parent chunk `j` ends at file offset `end`.
    fn matched(&mut self, end: u64, j: usize) {
        self.next = Some((end, j + 1));
        self.shift = end as i64 - self.guide.starts[j + 1] as i64;
        self.ahead = j + 1;
    }

    /// The ID of the chunk at file offset `pos` of `len` bytes, if the
    /// guide proved it (the hint just given).
    pub(super) fn proved(&mut self, pos: u64, len: usize) -> Option<Id> {
        match self.proved.take() {
            Some((p, l, id)) if p == pos && l == len => Some(id),
            _ => None,
        }
    }

    /// A chunk the chunker cut itself, at file offset `pos`, of `len`
    /// bytes and ID `id`: if it is one of the parent's next chunks, the
    /// parent's chunks after it are expected next.
    pub(super) fn scanned(&mut self, pos: u64, len: usize, id: &Id) {
        self.scans += 1;
        let from = self.ahead.min(self.ids.len());
        let to = (from + RESYNC).min(self.ids.len());
        let near = self.ids[from..to]
            .iter()
            .position(|x| x == id)
            .map(|k| from + k);
        let found = near.or_else(|| self.guide.find(self.ids, id));
        if let Some(k) = found {
            self.matched(pos + len as u64, k);
        }
    }
}

/// A reader's guide and the hash that proves its chunks.
pub(super) struct Guided<'a> {
    pub(super) follow: Follow<'a>,
    pub(super) hash: &'a (dyn Fn(&[u8]) -> Id + Sync),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archiver::split::tests::{id, random};
    use crate::archiver::split::{self, Helper, Split, SplitAt};
    use crate::chunker::Chunker;
    use crate::error::{Error, Result};

    fn chunker() -> Chunker {
        crate::chunker::test_chunker()
    }

    fn max() -> usize {
        chunker().params().max as usize
    }

    /// The chunks the chunker alone makes of `data`: IDs and lengths.
    fn cut(data: &[u8]) -> (Vec<Id>, Vec<Option<u32>>) {
        let mut pos = 0;
        chunker()
            .cut_all(data)
            .into_iter()
            .map(|n| {
                pos += n;
                (id(&data[pos - n..pos]), Some(n as u32))
            })
            .unzip()
    }

    fn on_err(e: std::io::Error) -> Error {
        Error::io("test", e)
    }

    /// What one guided reader (the lead, no split) makes of `data` with
    /// `parent`'s chunks as its guide: the chunk IDs, and the chunks it
    /// took on the guide's word and the hashes that missed. Every chunk
    /// stored is checked to be its bytes' hash and the chunks to make up
    /// `data`.
    fn guided(data: &[u8], parent: &(Vec<Id>, Vec<Option<u32>>)) -> (Vec<Id>, u64, u64) {
        let (ids, f) = guided_counts(data, parent);
        (ids, f[0], f[1])
    }

    /// [`guided`], with the counts `[taken, missed, scans, zeros]`.
    fn guided_counts(data: &[u8], parent: &(Vec<Id>, Vec<Option<u32>>)) -> (Vec<Id>, [u64; 4]) {
        let guide = Guide::new(&parent.0, &parent.1).unwrap();
        let hash = |d: &[u8]| id(d);
        let mut g = Guided {
            follow: Follow::new(&parent.0, &guide, data.len() as u64, 0, max()),
            hash: &hash,
        };
        let mut joined = Vec::new();
        let mut store = |c: &[u8], proved: Option<Id>| -> Result<Id> {
            if let Some(p) = proved {
                assert_eq!(p, id(c), "a proved chunk's ID is its hash");
            }
            joined.extend_from_slice(c);
            Ok(id(c))
        };
        let (ids, end) = split::read_lead(
            &chunker(),
            &mut Vec::new(),
            &mut &data[..],
            |pos| &data[pos as usize..],
            None,
            Some(&mut g),
            &mut store,
            &mut on_err,
        )
        .unwrap();
        assert_eq!(end, data.len() as u64);
        assert!(joined == data, "the chunks make up the file");
        let f = &g.follow;
        assert_eq!(
            f.taken + f.scans,
            ids.len() as u64,
            "each chunk taken or scanned"
        );
        (ids, [f.taken, f.missed, f.scans, f.zeros])
    }

    /// `data` with 1 KiB overwritten at each of `offsets`.
    fn overwrite(data: &[u8], offsets: &[usize]) -> Vec<u8> {
        let mut d = data.to_vec();
        for (i, &o) in offsets.iter().enumerate() {
            d[o..o + 1024].copy_from_slice(&random(1024, &[i as u8, 1]));
        }
        d
    }

    /// `data` with 1 KiB inserted at each of `offsets` (ascending) and
    /// 3 KiB removed after each.
    fn shift(data: &[u8], offsets: &[usize]) -> Vec<u8> {
        let mut d = Vec::new();
        let mut at = 0;
        for (i, &o) in offsets.iter().enumerate() {
            d.extend_from_slice(&data[at..o]);
            d.extend_from_slice(&random(1024, &[i as u8, 2]));
            at = o + 3072 * (i % 2);
        }
        d.extend_from_slice(&data[at..]);
        d
    }

    #[test]
    fn guided_cuts_are_the_ones_the_chunker_makes() {
        let old = random(3_000_000, b"old");
        let parent = cut(&old);
        let n = parent.0.len();
        assert!(n > 300, "{n} chunks");
        let edits = [10_000, 700_000, 1_500_000, 2_900_000];
        let mut longer = old.clone();
        longer.extend_from_slice(&random(5000, b"tail"));
        let cases: [(&str, Vec<u8>, usize); 6] = [
            ("unchanged", old.clone(), n),
            ("overwritten", overwrite(&old, &edits), n * 9 / 10),
            ("shifted", shift(&old, &edits), n * 9 / 10),
            ("truncated", old[..2_000_000].to_vec(), n * 6 / 10),
            ("grown", longer, n * 9 / 10),
            (
                "zeros inside",
                overwrite_zeros(&old, 1_000_000, 100_000),
                n * 8 / 10,
            ),
        ];
        for (what, new, min_taken) in cases {
            let (ids, taken, missed) = guided(&new, &parent);
            assert_eq!(ids, cut(&new).0, "{what}: the chunker's own cuts");
            assert!(taken as usize >= min_taken, "{what}: {taken} of {n} taken");
            assert!(missed <= 8, "{what}: {missed} hashes missed");
        }
        // The parent's last chunk ended with its file: where the file
        // grew, it is not taken as a chunk of its own.
        let (ids, taken, _) = guided(&old, &parent);
        assert_eq!(
            (ids.len(), taken as usize),
            (n, n),
            "unchanged: every chunk"
        );
    }

    fn overwrite_zeros(data: &[u8], at: usize, len: usize) -> Vec<u8> {
        let mut d = data.to_vec();
        d[at..at + len].fill(0);
        d
    }

    #[test]
    fn a_file_changed_throughout_costs_at_most_one_hash() {
        let parent = cut(&random(1_000_000, b"before"));
        let new = random(1_000_000, b"after");
        let (ids, [taken, missed, scans, _]) = guided_counts(&new, &parent);
        assert_eq!(ids, cut(&new).0);
        assert_eq!((taken, scans), (0, ids.len() as u64));
        assert!(missed <= 1, "{missed}");
    }

    #[test]
    fn a_wrong_guide_costs_hashes_never_a_wrong_chunk() {
        let data = random(400_000, b"wrong");
        // A parent cut by another chunker (fixed 5,000-byte pieces): its
        // chunks match the bytes, so they are taken, and each stored
        // chunk is still its bytes' hash (checked in `guided`).
        let mut ids = Vec::new();
        let mut lens = Vec::new();
        for c in data.chunks(5000) {
            ids.push(id(c));
            lens.push(Some(c.len() as u32));
        }
        let (got, taken, _) = guided(&data, &(ids.clone(), lens.clone()));
        assert!(taken > 0);
        assert_eq!(got.len(), ids.len());
        // Lengths the index has wrong: nothing matches, and the chunker
        // cuts the file as it would alone.
        let wrong: Vec<Option<u32>> = lens.iter().map(|l| l.map(|l| l + 1)).collect();
        let (got, taken, _) = guided(&data, &(ids, wrong));
        assert_eq!((got, taken), (cut(&data).0, 0));
        // Lengths the index does not have: the guide ends there.
        let mut parent = cut(&data);
        parent.1[3] = None;
        let guide = Guide::new(&parent.0, &parent.1).unwrap();
        assert_eq!(guide.starts.len(), 4);
        let (got, taken, _) = guided(&data, &parent);
        assert_eq!((got, taken), (cut(&data).0, 3));
    }

    #[test]
    fn a_split_file_is_guided_on_both_halves() {
        let old = random(3_000_000, b"split");
        let parent = cut(&old);
        let guide = Guide::new(&parent.0, &parent.1).unwrap();
        let edits = [200_000, 900_000, 1_700_000, 2_400_000];
        // 100 KB removed near the start: at halfway the helper's chunks
        // are some 20 of the parent's past where they were.
        let mut far = old.clone();
        far.drain(100_000..200_000);
        for (what, new) in [
            ("overwritten", overwrite(&old, &edits)),
            ("shifted", shift(&old, &edits)),
            ("shifted far", far),
        ] {
            let size = new.len() as u64;
            let at = SplitAt {
                min: Some(0),
                warm: 2 * max() as u64,
            };
            let split = Split::new(size, &at);
            let helper = Helper::claim(&split).unwrap();
            let hash = |d: &[u8]| id(d);
            let c = chunker();
            let mut lead = Guided {
                follow: Follow::new(&parent.0, &guide, size, 0, max()),
                hash: &hash,
            };
            let mut help = Guided {
                follow: Follow::new(&parent.0, &guide, size, split.stored_from, max()),
                hash: &hash,
            };
            let (ids, end) = std::thread::scope(|s| {
                let (c, new, help) = (&c, &new, &mut help);
                s.spawn(move || {
                    let mut store = |ch: &[u8], _: Option<Id>| Ok(id(ch));
                    let r = &mut &new[new.len() / 2..];
                    split::read_helper(c, &mut Vec::new(), r, size, helper, Some(help), &mut store);
                });
                let mut store = |ch: &[u8], _: Option<Id>| Ok(id(ch));
                split::read_lead(
                    c,
                    &mut Vec::new(),
                    &mut &new[..],
                    |pos| &new[pos as usize..],
                    Some(&split),
                    Some(&mut lead),
                    &mut store,
                    &mut on_err,
                )
                .unwrap()
            });
            assert_eq!((ids, end), (cut(&new).0, size), "{what}");
            let n = parent.0.len() as u64;
            assert!(
                lead.follow.taken > n / 3,
                "{what}: lead took {}",
                lead.follow.taken
            );
            assert!(
                help.follow.taken > n / 3,
                "{what}: helper took {}",
                help.follow.taken
            );
        }
    }
}
