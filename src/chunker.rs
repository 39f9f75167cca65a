//! Content-defined chunking: FastCDC (`fastcdc::v2020::cut_gear`) driven by a
//! gear table derived from the master key, so cut points reveal nothing to
//! someone without the key. Owns the chunk-size parameters and their checks
//! (fastcdc checks them only in debug builds), and a streaming cut loop that
//! reads into one reused buffer.

use crate::error::{Error, Result};
use fastcdc::v2020::{Normalization, cut_gear, select_masks};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::ops::ControlFlow;

/// The size a fresh [`Chunker::stream`] buffer starts at (or twice the max
/// chunk size, if smaller). A reading worker that starts at the full size
/// (2 MiB by default) keeps it all for the rest of the backup even when it
/// reads only small files: on an incremental backup that is most of them.
pub const FIRST_BUFFER: usize = 64 << 10;

/// Chunk-size parameters, fixed at `init` and stored in the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkerParams {
    pub min: u32,
    pub avg: u32,
    pub max: u32,
    /// FastCDC normalization level (0-3).
    pub level: u8,
}

impl Default for ChunkerParams {
    fn default() -> Self {
        ChunkerParams {
            min: 64 << 10,
            avg: 256 << 10,
            max: 1 << 20,
            level: 1,
        }
    }
}

impl ChunkerParams {
    /// Rejects sizes that fastcdc would silently mishandle in release builds.
    pub fn validate(&self) -> Result<()> {
        use fastcdc::v2020::{
            AVERAGE_MAX, AVERAGE_MIN, MAXIMUM_MAX, MAXIMUM_MIN, MINIMUM_MAX, MINIMUM_MIN,
        };
        let (min, avg, max) = (self.min as usize, self.avg as usize, self.max as usize);
        let bad = |m: String| Err(Error::Usage(format!("invalid chunker parameters: {m}")));
        if !(MINIMUM_MIN..=MINIMUM_MAX).contains(&min) {
            return bad(format!("min {min} outside {MINIMUM_MIN}..={MINIMUM_MAX}"));
        }
        if !(AVERAGE_MIN..=AVERAGE_MAX).contains(&avg) {
            return bad(format!("avg {avg} outside {AVERAGE_MIN}..={AVERAGE_MAX}"));
        }
        if !(MAXIMUM_MIN..=MAXIMUM_MAX).contains(&max) {
            return bad(format!("max {max} outside {MAXIMUM_MIN}..={MAXIMUM_MAX}"));
        }
        if min % 2 != 0 || avg % 2 != 0 || max % 2 != 0 {
            return bad("sizes must be even".into());
        }
        if !(min < avg && avg < max) {
            return bad("need min < avg < max".into());
        }
        if self.level > 3 {
            return bad(format!("normalization level {} above 3", self.level));
        }
        Ok(())
    }

    fn normalization(&self) -> Normalization {
        match self.level {
            0 => Normalization::Level0,
            1 => Normalization::Level1,
            2 => Normalization::Level2,
            _ => Normalization::Level3,
        }
    }
}

/// A chunker bound to one repository's parameters and gear table.
#[derive(Clone)]
pub struct Chunker {
    params: ChunkerParams,
    gear: Box<[u64; 256]>,
    gear_ls: Box<[u64; 256]>,
    masks: (u64, u64),
    /// Where a window of `max` zero bytes is cut (computed once).
    zero_cut: usize,
}

impl Chunker {
    /// Builds a chunker; `params` must have passed [`ChunkerParams::validate`].
    pub fn new(params: ChunkerParams, gear: &[u64; 256]) -> Result<Self> {
        params.validate()?;
        let mut gear_ls = Box::new([0u64; 256]);
        for (l, g) in gear_ls.iter_mut().zip(gear.iter()) {
            *l = g << 1;
        }
        let mut c = Chunker {
            params,
            gear: Box::new(*gear),
            gear_ls,
            masks: select_masks(params.avg as usize, params.normalization()),
            zero_cut: 0,
        };
        c.zero_cut = c.cut(&vec![0u8; params.max as usize]).max(1);
        Ok(c)
    }

    /// The parameters in force.
    pub fn params(&self) -> ChunkerParams {
        self.params
    }

    /// Length of the first chunk of `data`. Call with at least `max` bytes
    /// unless `data` is the end of the stream.
    pub fn cut(&self, data: &[u8]) -> usize {
        let (ms, ml) = self.masks;
        let (_, len) = cut_gear(
            data,
            self.params.min as usize,
            self.params.avg as usize,
            self.params.max as usize,
            ms,
            ml,
            ms << 1,
            ml << 1,
            &self.gear[..],
            &self.gear_ls[..],
        );
        len
    }

    /// Cuts a whole in-memory buffer into chunk lengths.
    pub fn cut_all(&self, data: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < data.len() {
            let n = self.cut(&data[pos..]).max(1);
            out.push(n);
            pos += n;
        }
        out
    }

    /// Streams `reader` through the chunker, calling `f` with each chunk.
    /// `buf` is reused between calls: it grows only as far as the data
    /// needs, from [`FIRST_BUFFER`] by doubling to twice the max chunk size,
    /// and keeps what it grew to. Returns the total number of bytes read.
    pub fn stream<R: Read + ?Sized>(
        &self,
        reader: &mut R,
        buf: &mut Vec<u8>,
        mut f: impl FnMut(&[u8]) -> Result<()>,
        on_err: impl FnMut(std::io::Error) -> Error,
    ) -> Result<u64> {
        self.stream_while(
            reader,
            buf,
            |c| f(c).map(|()| ControlFlow::Continue(())),
            on_err,
        )
    }

    /// [`Chunker::stream`], stopping after the chunk for which `f` says
    /// [`ControlFlow::Break`]. Returns the number of bytes read, which then
    /// includes bytes read ahead past that chunk.
    pub fn stream_while<R: Read + ?Sized>(
        &self,
        reader: &mut R,
        buf: &mut Vec<u8>,
        f: impl FnMut(&[u8]) -> Result<ControlFlow<()>>,
        on_err: impl FnMut(std::io::Error) -> Error,
    ) -> Result<u64> {
        self.stream_hinted(reader, buf, |_, _| None, f, on_err)
    }

    /// [`Chunker::stream_while`], asking `hint` first at each chunk's start
    /// (its offset in the stream and the bytes from there: at least `max`
    /// of them unless the stream ends) for the chunk's length. A length it
    /// gives (from 1 to `max`, within the window) is taken without
    /// scanning; the caller vouches that [`Chunker::cut`] would cut there.
    pub fn stream_hinted<R: Read + ?Sized>(
        &self,
        reader: &mut R,
        buf: &mut Vec<u8>,
        mut hint: impl FnMut(u64, &[u8]) -> Option<usize>,
        mut f: impl FnMut(&[u8]) -> Result<ControlFlow<()>>,
        mut on_err: impl FnMut(std::io::Error) -> Error,
    ) -> Result<u64> {
        let max = self.params.max as usize;
        let cap = max * 2;
        // Never cleared between files (zeroing it per file would cost more
        // than reading a small one), and never grown for a small file: each
        // byte of it that was ever written stays in the process's memory.
        buf.truncate(cap);
        let (mut start, mut end) = (0usize, 0usize);
        let mut eof = false;
        let mut total = 0u64;
        // Stream offset of `buf[start]`.
        let mut at = 0u64;
        loop {
            // Refill until max bytes are available or the stream ends.
            while !eof && end - start < max {
                if end == buf.len() {
                    if buf.len() < cap {
                        let grown = (buf.len() * 2).clamp(FIRST_BUFFER.min(cap), cap);
                        buf.resize(grown, 0);
                    } else {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                    }
                }
                match reader.read(&mut buf[end..]) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        end += n;
                        total += n as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(on_err(e)),
                }
            }
            if start == end {
                return Ok(total);
            }
            let window = &buf[start..end];
            let hinted = hint(at, window).filter(|&n| n >= 1 && n <= max && n <= window.len());
            // `cut` looks at no more than `max` bytes, so a window that
            // starts with `max` zeros (a hole) is always cut at `zero_cut`.
            let n = if let Some(n) = hinted {
                n
            } else if window.len() >= max && window[..max].iter().all(|&b| b == 0) {
                self.zero_cut
            } else {
                self.cut(window).max(1)
            };
            if f(&buf[start..start + n])?.is_break() {
                return Ok(total);
            }
            start += n;
            at += n as u64;
        }
    }
}

/// A chunker with small chunks (1, 4 and 16 KiB) for tests.
#[cfg(test)]
pub(crate) fn test_chunker() -> Chunker {
    tests::chunker()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn chunker() -> Chunker {
        let mut gear = [0u64; 256];
        let mut x = blake3::Hasher::new().update(b"t").finalize_xof();
        for g in gear.iter_mut() {
            let mut b = [0u8; 8];
            x.fill(&mut b);
            *g = u64::from_le_bytes(b);
        }
        Chunker::new(
            ChunkerParams {
                min: 1024,
                avg: 4096,
                max: 16384,
                level: 1,
            },
            &gear,
        )
        .unwrap()
    }

    /// The chunk lengths and byte count that `c.stream` gives for `r`.
    fn stream_lens(c: &Chunker, r: &mut dyn Read, buf: &mut Vec<u8>) -> (u64, Vec<usize>) {
        let mut got = Vec::new();
        let total = c
            .stream(
                r,
                buf,
                |ch| {
                    got.push(ch.len());
                    Ok(())
                },
                |e| Error::io("x", e),
            )
            .unwrap();
        (total, got)
    }

    #[test]
    fn stream_matches_cut_all_and_bounds() {
        let c = chunker();
        let mut data = vec![0u8; 300_000];
        blake3::Hasher::new()
            .update(b"d")
            .finalize_xof()
            .fill(&mut data);
        let lens = c.cut_all(&data);
        assert_eq!(lens.iter().sum::<usize>(), data.len());
        for l in &lens[..lens.len() - 1] {
            assert!((1024..=16384).contains(l), "{l}");
        }
        let mut buf = Vec::new();
        // A reader that returns small, odd-sized reads.
        struct Dribble<'a>(&'a [u8]);
        impl Read for Dribble<'_> {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(b.len()).min(777);
                b[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let (total, got) = stream_lens(&c, &mut Dribble(&data), &mut buf);
        assert_eq!(total, data.len() as u64);
        assert_eq!(got, lens);
    }

    #[test]
    fn the_buffer_grows_only_as_far_as_the_data_needs() {
        let c = Chunker::new(ChunkerParams::default(), &[7u64; 256]).unwrap();
        let cap = 2 * ChunkerParams::default().max as usize;
        let mut data = vec![0u8; cap + 300_000];
        blake3::Hasher::new()
            .update(b"g")
            .finalize_xof()
            .fill(&mut data);
        let run = |buf: &mut Vec<u8>, d: &[u8]| {
            let (total, got) = stream_lens(&c, &mut &d[..], buf);
            assert_eq!(total, d.len() as u64);
            assert_eq!(got, c.cut_all(d), "{} bytes", d.len());
        };
        let mut buf = Vec::new();
        // Small files: the buffer stays at its first size.
        for len in [0, 1, 13_000, FIRST_BUFFER - 1] {
            run(&mut buf, &data[..len]);
            assert!(buf.len() <= FIRST_BUFFER, "{} after {len}", buf.len());
        }
        // One exactly the first size needs one step more to see its end.
        run(&mut buf, &data[..FIRST_BUFFER]);
        assert_eq!(buf.len(), 2 * FIRST_BUFFER);
        run(&mut buf, &data[..300_000]);
        assert_eq!(buf.len(), 512 << 10);
        // A large one grows it to the full size, and it stays there.
        run(&mut buf, &data);
        assert_eq!(buf.len(), cap);
        for len in [5_000, 700_000, cap, cap + 1] {
            run(&mut buf, &data[..len]);
            assert_eq!(buf.len(), cap);
        }
    }

    #[test]
    fn zero_fast_path_matches_the_scan() {
        let c = chunker();
        let mut data = vec![0u8; 200_000];
        blake3::Hasher::new()
            .update(b"z")
            .finalize_xof()
            .fill(&mut data[..30_000]);
        blake3::Hasher::new()
            .update(b"y")
            .finalize_xof()
            .fill(&mut data[150_000..]);
        let (_, got) = stream_lens(&c, &mut &data[..], &mut Vec::new());
        assert_eq!(got, c.cut_all(&data));
    }

    #[test]
    fn invalid_params_rejected() {
        for p in [
            ChunkerParams {
                min: 1023,
                avg: 4096,
                max: 16384,
                level: 1,
            },
            ChunkerParams {
                min: 8192,
                avg: 4096,
                max: 16384,
                level: 1,
            },
            ChunkerParams {
                min: 1024,
                avg: 4096,
                max: 64 << 20,
                level: 1,
            },
            ChunkerParams {
                min: 1024,
                avg: 4096,
                max: 16384,
                level: 4,
            },
        ] {
            assert!(p.validate().is_err(), "{p:?}");
        }
        assert!(ChunkerParams::default().validate().is_ok());
    }
}
