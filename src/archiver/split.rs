//! One large file read by two workers. A file of at least [`SplitAt`]'s
//! size is queued twice: once whole (the lead, [`super::file::read_file`])
//! and once as a help job ([`super::file::help`]) that starts halfway. Whichever worker
//! takes the help job first chunks the second half while the lead reads
//! the first, so that the one large file an incremental backup meets
//! late does not leave a core idle.
//!
//! The file's chunk list is the one a single reader makes. A cut point
//! depends only on the bytes from the chunk's start to at most the max
//! chunk size after it, so two chains of cuts that share one cut share
//! every cut after it. The helper chunks from halfway, stores nothing for
//! its first [`SplitAt::warm`] bytes (by then its cuts have usually met
//! the lead's), and publishes each chunk it stores from
//! there on. The lead reads on past halfway until one of its cuts is the
//! start of a published chunk: it keeps its own chunks up to that cut and
//! the helper's from it. If the chains never meet (a run of data that
//! repeats with a period other than a chunk's), the lead reads to the end
//! alone and the helper's chunks are not used. They were stored: blobs no
//! snapshot references, which `prune` removes. A helper that takes its
//! job only after the lead has passed halfway does nothing; one that
//! stops early (a read error, an interrupt) leaves the lead to go on alone
//! from the end of the last chunk it published.
//!
//! Sparse files are read whole by one worker: their holes cost no read.

use super::guide::Guided;
use crate::chunker::Chunker;
use crate::error::{Error, Result};
use crate::id::Id;
use std::cell::RefCell;
use std::io::Read;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Files from this size up are read by two workers (unless
/// `LARDER_SPLIT_MIN` names another size in bytes).
const SPLIT_MIN: u64 = 32 << 20;

/// When a file is split, and how far the helper chunks before storing.
#[derive(Clone, Copy, Debug)]
pub(super) struct SplitAt {
    /// The smallest file split; `None` with a single reading worker.
    pub(super) min: Option<u64>,
    /// Bytes the helper only chunks before its first stored chunk.
    pub(super) warm: u64,
}

impl SplitAt {
    /// For `workers` reading workers and chunks of at most `max_chunk`
    /// bytes: the helper warms up for two max-size chunks.
    pub(super) fn new(workers: usize, max_chunk: u32) -> SplitAt {
        let min = std::env::var("LARDER_SPLIT_MIN")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(SPLIT_MIN);
        SplitAt {
            min: (workers >= 2).then_some(min),
            warm: 2 * u64::from(max_chunk),
        }
    }

    /// Whether a file of `size` bytes, `sparse` or not, is split.
    pub(super) fn splits(&self, size: u64, sparse: bool) -> bool {
        !sparse && self.min.is_some_and(|m| size >= m.max(2 * self.warm))
    }
}

/// Who reads the second half: no one yet, the helper, or the lead alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    Free,
    Helper,
    Lead,
}

/// A chunk the helper stored: where it starts, its length and its ID.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub(super) start: u64,
    pub(super) len: u64,
    pub(super) id: Id,
}

struct Half {
    claim: Claim,
    /// The helper's stored chunks, in file order.
    pieces: Vec<Piece>,
    /// The helper has stopped (its job is over, however it ended).
    finished: bool,
    /// It read to the end of the file: `pieces` reach it.
    complete: bool,
    /// The lead has returned: the helper's chunks are no longer wanted.
    abandoned: bool,
}

/// What the lead and the helper of one file share.
pub(super) struct Split {
    /// Where the helper starts: halfway.
    pub(super) from: u64,
    /// Where its stored chunks may start (`from` plus the warm-up).
    pub(super) stored_from: u64,
    half: Mutex<Half>,
    moved: Condvar,
}

impl Split {
    /// A split of a file of `size` bytes under `at`.
    pub(super) fn new(size: u64, at: &SplitAt) -> Arc<Split> {
        let from = size / 2;
        Arc::new(Split {
            from,
            stored_from: from.saturating_add(at.warm),
            half: Mutex::new(Half {
                claim: Claim::Free,
                pieces: Vec::new(),
                finished: false,
                complete: false,
                abandoned: false,
            }),
            moved: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Half> {
        // A panicking holder leaves consistent fields (each is one store).
        self.half.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The lead's side of a split: asked at the end of each chunk it read
/// whether the helper's chunks take over there.
pub(super) struct Lead<'a> {
    split: &'a Split,
    /// The lead reads the rest alone.
    alone: bool,
}

impl<'a> Lead<'a> {
    pub(super) fn new(split: &'a Split) -> Lead<'a> {
        Lead {
            split,
            alone: false,
        }
    }

    /// At `end`, the end of the lead's chunks so far: `Break(k)` when the
    /// helper's `k`-th stored chunk starts there (the lead then stops and
    /// takes the helper's chunks from it, [`Lead::take_from`]). Waits when
    /// the helper has not yet got that far.
    pub(super) fn at(&mut self, end: u64) -> ControlFlow<usize> {
        if self.alone || end < self.split.from {
            return ControlFlow::Continue(());
        }
        let mut h = self.split.lock();
        if h.claim == Claim::Free {
            // The helper has not started: the rest is the lead's.
            h.claim = Claim::Lead;
            self.alone = true;
            return ControlFlow::Continue(());
        }
        if end < self.split.stored_from {
            return ControlFlow::Continue(());
        }
        loop {
            match h.pieces.binary_search_by_key(&end, |p| p.start) {
                Ok(k) => return ControlFlow::Break(k),
                Err(i) if i < h.pieces.len() => return ControlFlow::Continue(()),
                Err(_) => {}
            }
            if h.pieces.last().is_some_and(|p| p.start + p.len > end) {
                // Inside the helper's last chunk: its next one starts after.
                return ControlFlow::Continue(());
            }
            if h.finished {
                self.alone = true;
                return ControlFlow::Continue(());
            }
            h = self.split.moved.wait(h).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The helper's chunks from its `k`-th, once it has stopped, and
    /// whether they reach the end of the file (if not, the lead reads on
    /// alone from where they end).
    pub(super) fn take_from(&self, k: usize) -> (Vec<Piece>, bool) {
        let mut h = self.split.lock();
        while !h.finished {
            h = self.split.moved.wait(h).unwrap_or_else(|e| e.into_inner());
        }
        (h.pieces.get(k..).unwrap_or_default().to_vec(), h.complete)
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut h = self.split.lock();
        h.abandoned = true;
        if h.claim == Claim::Free {
            h.claim = Claim::Lead;
        }
    }
}

/// The helper's side: claims the second half and publishes its chunks.
pub(super) struct Helper<'a> {
    split: &'a Split,
    complete: bool,
}

impl<'a> Helper<'a> {
    /// The second half, unless the lead has taken it.
    pub(super) fn claim(split: &'a Split) -> Option<Helper<'a>> {
        let mut h = split.lock();
        if h.claim != Claim::Free {
            return None;
        }
        h.claim = Claim::Helper;
        Some(Helper {
            split,
            complete: false,
        })
    }

    /// Where the chunk starting at `start` stands: `None` in the warm-up
    /// (only cut, not hashed or stored), else whether the lead still
    /// wants the helper's chunks.
    pub(super) fn wanted(&self, start: u64) -> Option<bool> {
        if start < self.split.stored_from {
            return None;
        }
        Some(!self.split.lock().abandoned)
    }

    /// One more chunk stored.
    pub(super) fn publish(&self, piece: Piece) {
        self.split.lock().pieces.push(piece);
        self.split.moved.notify_all();
    }

    /// The helper read to the end of the file.
    pub(super) fn completed(&mut self) {
        self.complete = true;
    }
}

impl Drop for Helper<'_> {
    fn drop(&mut self) {
        {
            let mut h = self.split.lock();
            h.finished = true;
            h.complete = self.complete;
        }
        self.split.moved.notify_all();
    }
}

/// The help job of one split file: the file opened again (its own file
/// description, so the kernel's read-ahead follows each reader on its
/// own), its size as the walk saw it, and the split.
pub(super) struct HelpJob {
    pub(super) file: std::fs::File,
    pub(super) size: u64,
    pub(super) split: Arc<Split>,
    /// The parent's chunks of the file, shared with the lead.
    pub(super) prior: Option<Arc<super::guide::Prior>>,
}

/// The file open as `f`, opened again by its descriptor (same inode,
/// whatever its path has become), or its descriptor duplicated.
pub(super) fn reopen(f: &std::fs::File) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let proc = format!("/proc/self/fd/{}", f.as_raw_fd());
    let open = |flags| {
        std::fs::File::options()
            .read(true)
            .custom_flags(flags)
            .open(&proc)
    };
    match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
        r => r,
    }
    .or_else(|_| f.try_clone())
}

/// Reads `file` from `pos` up to `end` with positioned reads.
pub(super) struct RangeReader<'a> {
    pub(super) file: &'a std::fs::File,
    pub(super) pos: u64,
    pub(super) end: u64,
}

impl std::io::Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = usize::try_from(self.end.saturating_sub(self.pos))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Stores one chunk, given its ID when a guide proved it; returns the ID.
pub(super) type StoreFn<'a> = dyn FnMut(&[u8], Option<Id>) -> Result<Id> + 'a;

/// A chunk list in the making: each chunk stored with `store` (given its
/// ID when a guide proved it), and the guide told what the chunker cut.
struct Storing<'s, 'g> {
    store: RefCell<&'s mut StoreFn<'s>>,
    guided: RefCell<Option<&'s mut Guided<'g>>>,
}

impl Storing<'_, '_> {
    /// The chunker's hint at file offset `pos` (see [`super::guide::Follow::hint`]).
    fn hint(&self, pos: u64, window: &[u8]) -> Option<usize> {
        let mut g = self.guided.borrow_mut();
        let g = g.as_deref_mut()?;
        g.follow.hint(pos, window, g.hash)
    }

    /// Stores chunk `c`, which starts at file offset `pos`.
    fn store(&self, pos: u64, c: &[u8]) -> Result<Id> {
        let mut g = self.guided.borrow_mut();
        let proved = g.as_deref_mut().and_then(|g| g.follow.proved(pos, c.len()));
        let id = (self.store.borrow_mut())(c, proved)?;
        if let (None, Some(g)) = (proved, g.as_deref_mut()) {
            g.follow.scanned(pos, c.len(), &id);
        }
        Ok(id)
    }
}

/// Reads a file as its lead: chunks what `reader` gives (the file from
/// its start), storing each chunk with `store` (with its ID when `guided`
/// proved it, see [`super::guide`]); with `split`, stops where
/// the helper's chunks take over and then, if the helper stopped before
/// the end, reads on alone from where its chunks end through
/// `reader_at(offset)`. Returns the file's chunk IDs and the bytes they
/// hold. A read error goes through `on_err`.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_lead<R: Read>(
    chunker: &Chunker,
    buf: &mut Vec<u8>,
    reader: &mut dyn Read,
    mut reader_at: impl FnMut(u64) -> R,
    split: Option<&Split>,
    guided: Option<&mut Guided<'_>>,
    store: &mut StoreFn<'_>,
    on_err: &mut dyn FnMut(std::io::Error) -> Error,
) -> Result<(Vec<Id>, u64)> {
    let mut content = Vec::new();
    let mut end = 0u64;
    let mut lead = split.map(Lead::new);
    let mut met = None;
    let st = Storing {
        store: RefCell::new(store),
        guided: RefCell::new(guided),
    };
    chunker.stream_hinted(
        reader,
        buf,
        |at, w| st.hint(at, w),
        |c| {
            content.push(st.store(end, c)?);
            end += c.len() as u64;
            match lead.as_mut().map(|l| l.at(end)) {
                Some(ControlFlow::Break(k)) => {
                    met = Some(k);
                    Ok(ControlFlow::Break(()))
                }
                _ => Ok(ControlFlow::Continue(())),
            }
        },
        &mut *on_err,
    )?;
    let (Some(k), Some(lead)) = (met, lead.as_ref()) else {
        return Ok((content, end));
    };
    let (rest, complete) = lead.take_from(k);
    for p in rest {
        content.push(p.id);
        end = p.start + p.len;
    }
    if !complete {
        let base = end;
        chunker.stream_hinted(
            &mut reader_at(end),
            buf,
            |at, w| st.hint(base + at, w),
            |c| {
                content.push(st.store(end, c)?);
                end += c.len() as u64;
                Ok(ControlFlow::Continue(()))
            },
            on_err,
        )?;
    }
    Ok((content, end))
}

/// Chunks the second half of a split file as its `helper` (claimed, see
/// [`Helper::claim`]): `reader` gives the file from [`Split::from`] to the
/// end (`size` bytes in all). Each chunk past the warm-up is stored with
/// `store` (with its ID when `guided` proved it) and published. Its errors
/// are the lead's to meet and report: a helper that stops early only
/// leaves more to the lead.
pub(super) fn read_helper(
    chunker: &Chunker,
    buf: &mut Vec<u8>,
    reader: &mut dyn Read,
    size: u64,
    mut helper: Helper<'_>,
    guided: Option<&mut Guided<'_>>,
    store: &mut StoreFn<'_>,
) {
    let from = helper.split.from;
    let mut start = from;
    let mut given_up = false;
    let st = Storing {
        store: RefCell::new(store),
        guided: RefCell::new(guided),
    };
    let read = chunker.stream_hinted(
        reader,
        buf,
        |at, w| st.hint(from + at, w),
        |c| {
            let here = start;
            start += c.len() as u64;
            match helper.wanted(here) {
                // The warm-up: cut only. A chunk the guide proved here has
                // already moved it on (a proof left unused is never taken:
                // it names this offset).
                None => return Ok(ControlFlow::Continue(())),
                Some(false) => {
                    given_up = true;
                    return Ok(ControlFlow::Break(()));
                }
                Some(true) => {}
            }
            let id = st.store(here, c)?;
            helper.publish(Piece {
                start: here,
                len: c.len() as u64,
                id,
            });
            Ok(ControlFlow::Continue(()))
        },
        // Not reported: the lead reads what the helper could not.
        |e| Error::io("(second half of a split file)", e),
    );
    if read.is_ok() && !given_up && start == size {
        helper.completed();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn chunker() -> Chunker {
        crate::chunker::test_chunker()
    }

    fn at() -> SplitAt {
        SplitAt {
            min: Some(0),
            warm: 2 * 16384,
        }
    }

    /// `len` pseudo-random bytes drawn from `seed`.
    pub(in crate::archiver) fn random(len: usize, seed: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; len];
        blake3::Hasher::new()
            .update(seed)
            .finalize_xof()
            .fill(&mut d);
        d
    }

    /// A test's chunk ID: `c`'s unkeyed hash.
    pub(in crate::archiver) fn id(c: &[u8]) -> Id {
        Id(*blake3::hash(c).as_bytes())
    }

    /// The chunk IDs one reader makes of `data`.
    fn one_reader(c: &Chunker, data: &[u8]) -> Vec<Id> {
        let mut pos = 0;
        c.cut_all(data)
            .into_iter()
            .map(|n| {
                pos += n;
                id(&data[pos - n..pos])
            })
            .collect()
    }

    /// A reader that fails once it has given `left` bytes.
    struct FailAfter<'a>(&'a [u8], usize);

    impl Read for FailAfter<'_> {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            if self.1 == 0 {
                return Err(std::io::Error::other("disk on fire"));
            }
            let n = self.0.len().min(b.len()).min(self.1);
            b[..n].copy_from_slice(&self.0[..n]);
            (self.0, self.1) = (&self.0[n..], self.1 - n);
            Ok(n)
        }
    }

    fn on_err(e: std::io::Error) -> Error {
        Error::io("test", e)
    }

    /// Runs the lead on this thread and, if `helper_reader` gives one, a
    /// claimed helper on another. Returns the lead's result and the
    /// chunks each stored.
    fn run(
        data: &[u8],
        lead_reader: &mut dyn Read,
        helper_reader: Option<&mut (dyn Read + Send)>,
    ) -> (Result<(Vec<Id>, u64)>, usize, usize) {
        let c = chunker();
        let split = Split::new(data.len() as u64, &at());
        let (by_lead, by_helper) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let helper = helper_reader.map(|r| (r, Helper::claim(&split).unwrap()));
        let got = std::thread::scope(|s| {
            if let Some((r, h)) = helper {
                let (c, by_helper) = (&c, &by_helper);
                s.spawn(move || {
                    let mut store = |ch: &[u8], _: Option<Id>| {
                        by_helper.fetch_add(1, Ordering::Relaxed);
                        Ok(id(ch))
                    };
                    read_helper(
                        c,
                        &mut Vec::new(),
                        r,
                        data.len() as u64,
                        h,
                        None,
                        &mut store,
                    );
                });
            }
            let mut store = |ch: &[u8], _: Option<Id>| {
                by_lead.fetch_add(1, Ordering::Relaxed);
                Ok(id(ch))
            };
            read_lead(
                &c,
                &mut Vec::new(),
                lead_reader,
                |pos| &data[pos as usize..],
                Some(&split),
                None,
                &mut store,
                &mut on_err,
            )
        });
        (got, by_lead.into_inner(), by_helper.into_inner())
    }

    #[test]
    fn two_workers_make_the_chunks_one_makes() {
        let c = chunker();
        for (len, seed) in [(1 << 20, "a"), (3_000_001, "b"), (200_000, "c")] {
            let data = random(len, seed.as_bytes());
            let want = one_reader(&c, &data);
            let (got, by_lead, by_helper) = run(&data, &mut &data[..], Some(&mut &data[len / 2..]));
            let (ids, end) = got.unwrap();
            assert_eq!(end, len as u64, "{len}");
            assert_eq!(ids, want, "{len}");
            // The work was shared: the lead stopped past halfway, and
            // the helper stored only chunks that were used.
            assert!(by_lead < want.len() * 3 / 4, "{len}: lead {by_lead}");
            assert!(by_helper > 0, "{len}");
            assert_eq!(
                by_lead + by_helper,
                want.len(),
                "{len}: nothing stored twice"
            );
        }
    }

    #[test]
    fn a_helper_that_comes_late_does_nothing() {
        let c = chunker();
        let data = random(1 << 20, b"late");
        let split = Split::new(data.len() as u64, &at());
        let mut store = |ch: &[u8], _: Option<Id>| Ok(id(ch));
        let (ids, end) = read_lead(
            &c,
            &mut Vec::new(),
            &mut &data[..],
            |pos| &data[pos as usize..],
            Some(&split),
            None,
            &mut store,
            &mut on_err,
        )
        .unwrap();
        assert_eq!((ids, end), (one_reader(&c, &data), data.len() as u64));
        assert!(Helper::claim(&split).is_none());
    }

    #[test]
    fn cuts_that_never_meet_leave_the_file_to_the_lead() {
        // Zeros are cut every `zero_cut` bytes from wherever a chain
        // starts: from halfway, off that grid, the chains never meet.
        let c = chunker();
        let zero_cut = c.cut(&[0u8; 16384]);
        let len = 101 * zero_cut + 7;
        assert_ne!((len / 2) % zero_cut, 0);
        let data = vec![0u8; len];
        let want = one_reader(&c, &data);
        let (got, by_lead, _) = run(&data, &mut &data[..], Some(&mut &data[len / 2..]));
        let (ids, end) = got.unwrap();
        assert_eq!((ids, end), (want.clone(), len as u64));
        assert_eq!(by_lead, want.len());
    }

    #[test]
    fn a_helper_that_stops_early_leaves_the_rest_to_the_lead() {
        let c = chunker();
        let len = 2_000_000;
        let data = random(len, b"early");
        let want = one_reader(&c, &data);
        // The helper fails a quarter of the way into its half.
        let mut failing = FailAfter(&data[len / 2..], len / 8);
        let (got, by_lead, by_helper) = run(&data, &mut &data[..], Some(&mut failing));
        let (ids, end) = got.unwrap();
        assert_eq!((ids, end), (want.clone(), len as u64));
        assert!(by_helper > 0);
        assert!(by_lead < want.len(), "the lead used the helper's chunks");
    }

    #[test]
    fn a_lead_that_fails_stops_its_helper() {
        let c = chunker();
        let data = random(1 << 20, b"fail");
        let split = Split::new(data.len() as u64, &at());
        let helper = Helper::claim(&split).unwrap();
        let mut store = |ch: &[u8], _: Option<Id>| Ok(id(ch));
        let got = read_lead(
            &c,
            &mut Vec::new(),
            &mut FailAfter(&data, 100_000),
            |pos| &data[pos as usize..],
            Some(&split),
            None,
            &mut store,
            &mut on_err,
        );
        assert!(got.is_err());
        let mut stored = 0;
        let mut count = |ch: &[u8], _: Option<Id>| {
            stored += 1;
            Ok(id(ch))
        };
        let n = data.len() as u64;
        read_helper(
            &c,
            &mut Vec::new(),
            &mut &data[data.len() / 2..],
            n,
            helper,
            None,
            &mut count,
        );
        assert_eq!(stored, 0, "the helper stored chunks no one wants");
        assert!(split.lock().finished && !split.lock().complete);
    }

    #[test]
    fn small_and_sparse_files_are_not_split() {
        let at = SplitAt {
            min: Some(1 << 20),
            warm: 64 << 10,
        };
        assert!(at.splits(1 << 20, false));
        assert!(!at.splits((1 << 20) - 1, false));
        assert!(!at.splits(1 << 30, true));
        let one = SplitAt { min: None, ..at };
        assert!(!one.splits(1 << 30, false));
        // Never below two warm-ups: the helper's half must hold one.
        let tiny = SplitAt { min: Some(0), ..at };
        assert!(!tiny.splits(100 << 10, false));
    }
}
