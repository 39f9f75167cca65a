//! Compression dictionaries: the repository's zstd dictionaries
//! (`dicts/<id>`, sealed objects of type `D`), training one from a
//! backup's first data blobs, and finding the one a stored blob names.
//!
//! Small files compress badly on their own: each zstd frame starts with
//! an empty history. A dictionary trained from the repository's own data
//! gives every frame that history back, which made the benchmark tree's
//! data 27 % smaller and its compression cheaper (repo-format/SPEC.md,
//! "Dictionaries"). A blob compressed with one has `compression = 2`, and
//! its zstd frame header carries the dictionary's ID; dictionaries are
//! never deleted, since a repacked blob keeps its stored bytes.

use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::Mutex;

/// Largest dictionary a reader accepts (a writer makes [`DICT_SIZE`]).
pub const MAX_DICT_LEN: usize = 1 << 20;
/// Largest stored dictionary object read (the dictionary plus framing).
pub const MAX_DICT_STORED: u64 = MAX_DICT_LEN as u64 + 1024;
/// Most dictionary objects a reader loads from one repository.
pub const MAX_DICTIONARIES: usize = 256;
/// Size of the dictionaries larder trains.
pub const DICT_SIZE: usize = 64 << 10;
/// Bytes of samples collected before training (see [`Sampler`]). On the
/// benchmark tree (two cold backups each into a fresh repository), 2 MiB
/// stored 149-150 MB at the peak RSS of a backup that trains nothing
/// (46-47 MiB); 8 MiB stored 144-148 MB but peaked at 50-53 MiB, and
/// training took about three times as long.
pub const SAMPLE_BUDGET: usize = 2 << 20;
/// Bytes taken from the start of each sampled blob.
pub const SAMPLE_CAP: usize = 16 << 10;
/// Bytes at the start of a blob looked at by [`suits`].
pub const BINARY_PROBE: usize = 8 << 10;
/// zstd's dictionary magic number (little-endian at offset 0).
const ZSTD_DICT_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

/// Whether a data blob is one a repository dictionary is for: text, not
/// binary data, told apart as git does (a NUL byte in the first
/// [`BINARY_PROBE`] bytes is binary). Binary blobs are neither sampled nor
/// compressed with the dictionary. On compiled libraries cut in blocks of
/// 16, 64 and 256 KiB, a dictionary attached to zstd (trained on Rust
/// sources) made it 10-19 % slower at level 1 and 21-41 % at level 3, and
/// its output 1.6-5 % larger at 16 and 256 KiB (0.4 % smaller at 64 KiB);
/// HTML in blocks of 32-512 KiB came out 4.5-22.5 % smaller with one
/// (`bench/results/2026-12-05-dict-binary`).
pub fn suits(plain: &[u8]) -> bool {
    !plain[..plain.len().min(BINARY_PROBE)].contains(&0)
}

/// The body of a dictionary object.
#[derive(Serialize, Deserialize)]
struct DictionaryObject {
    /// A zstd dictionary in zstd's own format.
    zstd: Vec<u8>,
}

/// One repository dictionary, ready to decompress with.
pub struct Dictionary {
    name: Id,
    zstd_id: u32,
    bytes: Vec<u8>,
    ddict: zstd::zstd_safe::DDict<'static>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("name", &self.name)
            .field("zstd_id", &self.zstd_id)
            .field("len", &self.bytes.len())
            .finish()
    }
}

impl Dictionary {
    /// Checks zstd dictionary bytes (size, magic, a non-zero ID, and that
    /// zstd accepts them) and prepares them for decompression.
    pub fn from_zstd(what: &str, name: Id, zstd: Vec<u8>) -> Result<Dictionary> {
        if zstd.len() < 8 || zstd.len() > MAX_DICT_LEN {
            return Err(Error::corrupt(
                what,
                format!(
                    "dictionary of {} bytes (8 ..= {MAX_DICT_LEN} allowed)",
                    zstd.len()
                ),
            ));
        }
        if zstd[..4] != ZSTD_DICT_MAGIC {
            return Err(Error::corrupt(what, "not a zstd dictionary (bad magic)"));
        }
        let zstd_id = u32::from_le_bytes([zstd[4], zstd[5], zstd[6], zstd[7]]);
        if zstd_id == 0 {
            return Err(Error::corrupt(what, "dictionary ID 0"));
        }
        let ddict = zstd::zstd_safe::DDict::try_create(&zstd)
            .ok_or_else(|| Error::corrupt(what, "zstd rejects the dictionary"))?;
        Ok(Dictionary {
            name,
            zstd_id,
            bytes: zstd,
            ddict,
        })
    }

    /// Opens a stored dictionary object named `name` (its object id).
    pub fn open(keys: &Keys, what: &str, name: Id, stored: &[u8]) -> Result<Dictionary> {
        let body: DictionaryObject = object::open(keys, ObjectType::Dict, what, stored)?;
        Self::from_zstd(what, name, body.zstd)
    }

    /// Seals zstd dictionary bytes as an object; returns its id and bytes.
    pub fn seal(keys: &Keys, zstd: &[u8]) -> Result<(Id, Vec<u8>)> {
        let bytes = object::seal(
            keys,
            ObjectType::Dict,
            &DictionaryObject {
                zstd: zstd.to_vec(),
            },
        )?;
        Ok((Id::of_object(&bytes), bytes))
    }

    /// The object id (`dicts/<name>`).
    pub fn name(&self) -> Id {
        self.name
    }

    /// The ID zstd writes into the header of every frame made with it.
    pub fn zstd_id(&self) -> u32 {
        self.zstd_id
    }

    /// The zstd dictionary bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Decompresses one frame made with this dictionary into exactly `len`
    /// bytes, into `out` (see [`object::decompress_exact_into`]).
    pub fn decompress_exact_into<W: std::fmt::Display + ?Sized>(
        &self,
        what: &W,
        frame: &[u8],
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        object::decompress_exact_into(what, frame, len, Some(&self.ddict), out)
    }
}

/// zstd's fastCover parameters [`train`] uses: segments of 1,024 bytes
/// (`k`), made of 8-byte pieces (`d`), counted in a table of 2^16 entries
/// (`f`). zstd's own default (`ZDICT_trainFromBuffer`) searches five
/// values of `k` with a table of 2^20 entries, trains on three quarters
/// of the samples and keeps the dictionary that compresses the last
/// quarter best. On 2 MiB samples (file heads) of three trees (the
/// benchmark's, `/usr/include`, `/usr/lib/python3`), one pass with these
/// took 15-24 ms instead of 83-134 ms, its tables take 384 KiB instead of
/// 6 MiB per pass, and the dictionary compressed up to 300 MiB of each
/// tree's files at level 1 to 3.0 % and 2.2 % fewer bytes than the
/// default's, and to 0.2 % more on the third.
const FASTCOVER_K: u32 = 1024;
const FASTCOVER_D: u32 = 8;
const FASTCOVER_F: u32 = 16;

/// Trains a dictionary of at most [`DICT_SIZE`] bytes from samples laid end
/// to end in `data` (`sizes` gives each one's length; they must add up to
/// its length). `None` when zstd finds too little to learn from.
pub fn train(data: &[u8], sizes: &[usize]) -> Option<Vec<u8>> {
    use zstd::zstd_safe::zstd_sys::{
        ZDICT_fastCover_params_t, ZDICT_params_t, ZDICT_trainFromBuffer_fastCover,
    };
    let count = u32::try_from(sizes.len()).ok()?;
    if count == 0 || sizes.iter().try_fold(0usize, |a, &n| a.checked_add(n)) != Some(data.len()) {
        return None;
    }
    let params = ZDICT_fastCover_params_t {
        k: FASTCOVER_K,
        d: FASTCOVER_D,
        f: FASTCOVER_F,
        steps: 0,
        nbThreads: 0,
        splitPoint: 1.0,
        accel: 1,
        shrinkDict: 0,
        shrinkDictMaxRegression: 0,
        zParams: ZDICT_params_t {
            compressionLevel: 0,
            notificationLevel: 0,
            dictID: 0,
        },
    };
    let mut dict = vec![0u8; DICT_SIZE];
    // SAFETY: zstd's safe wrapper has no call that takes these parameters.
    // `dict` is writable for `dict.len()` bytes; `data` is readable for the
    // sum of `sizes` bytes (checked above), and `sizes` holds `count`
    // entries. zstd reads and writes nothing else, keeps no pointer after
    // it returns, and reports every failure as an error code.
    let len = unsafe {
        ZDICT_trainFromBuffer_fastCover(
            dict.as_mut_ptr().cast(),
            dict.len(),
            data.as_ptr().cast(),
            sizes.as_ptr(),
            count,
            params,
        )
    };
    // An error code is larger than any size that fits the buffer.
    if len < 8 || len > dict.len() {
        return None;
    }
    dict.truncate(len);
    (dict[..4] == ZSTD_DICT_MAGIC).then_some(dict)
}

/// The zstd dictionary ID named in a frame's header, if any.
pub fn frame_dict_id(frame: &[u8]) -> Option<u32> {
    zstd::zstd_safe::get_dict_id_from_frame(frame).map(|n| n.get())
}

/// A repository's dictionaries, sorted by name.
#[derive(Default, Debug)]
pub struct Dictionaries {
    list: Vec<Arc<Dictionary>>,
}

impl Dictionaries {
    /// A set of the given dictionaries.
    pub fn new(mut list: Vec<Arc<Dictionary>>) -> Dictionaries {
        list.sort_by_key(|d| d.name);
        list.dedup_by_key(|d| d.name);
        Dictionaries { list }
    }

    /// Every dictionary, by name.
    pub fn all(&self) -> &[Arc<Dictionary>] {
        &self.list
    }

    /// The dictionaries whose zstd ID is `zstd_id` (normally one).
    pub fn by_zstd_id(&self, zstd_id: u32) -> impl Iterator<Item = &Arc<Dictionary>> {
        self.list.iter().filter(move |d| d.zstd_id == zstd_id)
    }
}

/// Where a blob reader finds dictionaries.
pub trait DictSource: Sync {
    /// The dictionaries known now.
    fn dictionaries(&self) -> Result<Arc<Dictionaries>>;
    /// Looks again for a dictionary with zstd ID `zstd_id` that was not
    /// found (a concurrent writer may have added it); the default has
    /// nothing more to find.
    fn refresh_for(&self, zstd_id: u32) -> Result<Arc<Dictionaries>> {
        let _ = zstd_id;
        self.dictionaries()
    }
}

/// No dictionaries at all (a blob with `compression = 2` fails to open).
pub struct NoDictionaries;

impl DictSource for NoDictionaries {
    fn dictionaries(&self) -> Result<Arc<Dictionaries>> {
        Ok(Arc::new(Dictionaries::default()))
    }
}

impl DictSource for Dictionaries {
    fn dictionaries(&self) -> Result<Arc<Dictionaries>> {
        Ok(Arc::new(Dictionaries {
            list: self.list.clone(),
        }))
    }
}

/// Collects samples from the first data blobs of a backup that the
/// dictionary [`suits`], for training: the first [`SAMPLE_CAP`] bytes of
/// each until [`SAMPLE_BUDGET`] bytes (or `budget`) are held; then hands
/// them out once.
pub struct Sampler {
    budget: usize,
    state: Mutex<Option<(Vec<u8>, Vec<usize>)>>,
}

impl Sampler {
    /// A sampler that gives its samples once `budget` bytes are held
    /// (`0`: never samples; at most 64 MiB, whatever is asked).
    pub fn new(budget: usize) -> Sampler {
        let budget = budget.min(64 << 20);
        let state = (budget > 0).then(|| (Vec::new(), Vec::new()));
        Sampler {
            budget,
            state: Mutex::new(state),
        }
    }

    /// Offers one data blob; returns the samples (data, sizes) exactly once,
    /// to the caller whose blob filled the budget. A binary blob is not
    /// taken.
    pub fn offer(&self, blob: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
        if blob.is_empty() || !suits(blob) {
            return None;
        }
        let mut st = self.state.lock().ok()?;
        let (data, sizes) = st.as_mut()?;
        if data.capacity() == 0 {
            // All at once: growing by doubling would copy, and hold two buffers.
            data.reserve_exact(self.budget.saturating_add(SAMPLE_CAP));
        }
        let take = blob.len().min(SAMPLE_CAP);
        data.extend_from_slice(&blob[..take]);
        sizes.push(take);
        if data.len() >= self.budget {
            return st.take();
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::crypto::MasterKey;

    /// Text that shares words across samples, as documentation does.
    pub(crate) fn corpus(n: usize) -> Vec<Vec<u8>> {
        let words = [
            "<html>",
            "<head>",
            "<title>",
            "larder",
            "backup",
            "restore",
            "snapshot",
            "</div>",
            "<div class=\"section\">",
            "the",
            "repository",
            "dictionary",
            "chunk",
            "pack",
        ];
        (0..n)
            .map(|i| {
                let mut s = String::new();
                let mut x = i as u64 * 2_654_435_761 + 1;
                for _ in 0..400 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    s.push_str(words[(x % words.len() as u64) as usize]);
                    s.push(' ');
                }
                s.into_bytes()
            })
            .collect()
    }

    #[test]
    fn training_refuses_sizes_that_do_not_add_up_to_the_samples() {
        let c = corpus(200);
        let sizes: Vec<usize> = c.iter().map(Vec::len).collect();
        let data = c.concat();
        assert!(train(&data, &sizes).is_some());
        let mut long = sizes.clone();
        long[0] += 1;
        assert!(train(&data, &long).is_none(), "one byte past the samples");
        assert!(train(&data, &sizes[1..]).is_none(), "one sample short");
        assert!(train(&data, &[]).is_none());
        let huge = [usize::MAX, data.len().wrapping_add(1)];
        assert!(train(&data, &huge).is_none(), "a sum that overflows");
    }

    #[test]
    fn trains_seals_opens_and_decompresses() {
        let k = Keys::derive(&MasterKey::from_bytes([5; 32]));
        let files = corpus(400);
        let sampler = Sampler::new(256 << 10);
        let mut got = None;
        for f in &files {
            if let Some(s) = sampler.offer(f) {
                assert!(got.is_none(), "samples are handed out once");
                got = Some(s);
            }
        }
        assert!(
            sampler.offer(&files[0]).is_none(),
            "nothing is collected after the handout"
        );
        let (data, sizes) = got.expect("the budget was reached");
        assert_eq!(sizes.iter().sum::<usize>(), data.len());
        let zd = train(&data, &sizes).expect("trains");
        assert!(zd.len() <= DICT_SIZE);
        let (name, stored) = Dictionary::seal(&k, &zd).unwrap();
        assert_eq!(name, Id::of_object(&stored));
        let d = Dictionary::open(&k, "d", name, &stored).unwrap();
        assert_eq!(d.bytes(), &zd[..]);
        let mut c = zstd::bulk::Compressor::with_dictionary(3, &zd).unwrap();
        let frame = c.compress(&files[7]).unwrap();
        assert_eq!(frame_dict_id(&frame), Some(d.zstd_id()));
        let plain_frame = zstd::bulk::compress(&files[7], 3).unwrap();
        assert!(frame.len() < plain_frame.len(), "the dictionary helps");
        assert_eq!(frame_dict_id(&plain_frame), None);
        let mut out = Vec::new();
        d.decompress_exact_into("b", &frame, files[7].len(), &mut out)
            .unwrap();
        assert_eq!(out, files[7]);
        // One byte too few declared: refused, not truncated.
        assert!(
            d.decompress_exact_into("b", &frame, files[7].len() - 1, &mut out)
                .is_err()
        );
        // Another type byte, or another key: refused.
        let mut t = stored.clone();
        t[4] = ObjectType::Mark as u8;
        assert!(Dictionary::open(&k, "d", name, &t).is_err());
        let k2 = Keys::derive(&MasterKey::from_bytes([6; 32]));
        assert!(Dictionary::open(&k2, "d", name, &stored).is_err());
    }

    #[test]
    fn bad_dictionary_bytes_are_refused_by_name() {
        let name = Id([1; 32]);
        let e = Dictionary::from_zstd("dicts/x", name, vec![0; 4]).unwrap_err();
        assert!(e.to_string().contains("dicts/x"), "{e}");
        let e = Dictionary::from_zstd("dicts/x", name, vec![0; 64]).unwrap_err();
        assert!(e.to_string().contains("bad magic"), "{e}");
        let mut zero_id = ZSTD_DICT_MAGIC.to_vec();
        zero_id.extend_from_slice(&[0; 60]);
        let e = Dictionary::from_zstd("dicts/x", name, zero_id).unwrap_err();
        assert!(e.to_string().contains("ID 0"), "{e}");
        // The magic and an ID, then entropy tables that are garbage.
        let mut junk = ZSTD_DICT_MAGIC.to_vec();
        junk.extend_from_slice(&7u32.to_le_bytes());
        junk.extend_from_slice(&[0xff; 200]);
        let e = Dictionary::from_zstd("dicts/x", name, junk).unwrap_err();
        assert!(e.to_string().contains("rejects"), "{e}");
        let e = Dictionary::from_zstd("dicts/x", name, vec![0; MAX_DICT_LEN + 1]).unwrap_err();
        assert!(e.to_string().contains("allowed"), "{e}");
    }

    #[test]
    fn binary_blobs_are_not_sampled() {
        let s = Sampler::new(100);
        let mut bin = vec![b'x'; 200];
        bin[BINARY_PROBE.min(150)] = 0;
        assert!(s.offer(&bin).is_none(), "a binary blob is not taken");
        let mut late = vec![b'y'; BINARY_PROBE + 10];
        late[BINARY_PROBE] = 0;
        let (data, sizes) = s.offer(&late).expect("a NUL past the probe is text");
        assert_eq!(sizes, [late.len().min(SAMPLE_CAP)]);
        assert!(
            !data.contains(&b'x'),
            "the binary blob's bytes are not in the samples"
        );
        assert!(suits(b"plain text") && suits(b"") && !suits(b"a\0b"));
    }

    #[test]
    fn sampler_with_no_budget_never_samples() {
        let s = Sampler::new(0);
        assert!(s.offer(&[1; 20]).is_none());
        let s = Sampler::new(10);
        assert!(s.offer(b"").is_none(), "empty blobs are not samples");
        let (data, sizes) = s.offer(&[1; 20]).expect("20 bytes fill a 10-byte budget");
        assert_eq!((data.len(), sizes), (20, vec![20]));
    }
}
