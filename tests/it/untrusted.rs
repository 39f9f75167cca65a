//! Repository bytes are untrusted input. Every parser of them must bound
//! every length it reads, return an error that names the object (never
//! panic, never allocate without bound), and reject every modification of an
//! authenticated object.
//!
//! Three groups of tests on repository bytes, and a fourth on what an SFTP
//! server sends (the packets that carry them from an `sftp:` repository):
//! - arbitrary (and structured-arbitrary) bytes fed to every parser: no
//!   panic, an `Ok` or an error naming the object, allocations bounded;
//! - valid objects (sealed config, index segment, snapshot and lock objects,
//!   a pack, a key file, a tree blob) truncated at every position, with every
//!   single bit flipped, and with random overwrites, insertions and
//!   deletions: authenticated objects must reject every one of them;
//! - the specific bounds: huge pack header length, 2^32-1 pack entries,
//!   declared object size above `MAX_OBJECT_PLAIN`, a decompression bomb,
//!   scrypt parameters and passphrase-key bodies out of bounds;
//! - SFTP reply bodies, arbitrary and structured, and valid ones truncated:
//!   no panic, bounded allocations, nothing accepted beyond its packet.
//!
//! A tracking global allocator (below) measures the peak bytes a parser
//! holds on this thread, so "without allocating" is asserted, not assumed.
//! The fuzz targets in `fuzz/` cover the same parsers.

use larder::Error;
use larder::chunker::ChunkerParams;
use larder::crypto::{Keys, MasterKey, SEAL_OVERHEAD};
use larder::id::Id;
use larder::index::{IndexPack, IndexSegment};
use larder::keys::{self, Credential, KeyHeader, KeyKind, NewKey};
use larder::lock::LockInfo;
use larder::object::{self, FORMAT_VERSION, HEADER_LEN, MAX_OBJECT_PLAIN, ObjectType};
use larder::pack::{
    self, BlobType, ENTRY_LEN, MAX_BLOB_PLAIN, MAX_ENTRIES, PACK_MAGIC, PackEntry, PackWriter,
    TRAILER_LEN,
};
use larder::repository::Config;
use larder::snapshot::{Snapshot, Summary};
use larder::tree::{Node, NodeKind, TREE_VERSION, Tree, Xattr};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index as Pos;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::LazyLock;

// ---------------------------------------------------------------------------
// Allocation tracking

/// Counts the bytes allocated on each thread while tracking is on, and the
/// peak, so a test can assert that parsing some input held at most N bytes.
mod alloc_track {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Tracking;

    thread_local! {
        static ON: Cell<bool> = const { Cell::new(false) };
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
        static LARGEST: Cell<usize> = const { Cell::new(0) };
    }

    fn grew(n: usize) {
        let _ = ON.try_with(|on| {
            if on.get() {
                let live = LIVE.get() + n as isize;
                LIVE.set(live);
                PEAK.set(PEAK.get().max(live));
                LARGEST.set(LARGEST.get().max(n));
            }
        });
    }

    fn shrank(n: usize) {
        let _ = ON.try_with(|on| {
            if on.get() {
                LIVE.set(LIVE.get() - n as isize);
            }
        });
    }

    unsafe impl GlobalAlloc for Tracking {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            grew(l.size());
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            grew(l.size());
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            shrank(l.size());
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            shrank(l.size());
            grew(new);
            unsafe { System.realloc(p, l, new) }
        }
    }

    #[global_allocator]
    static GLOBAL: Tracking = Tracking;

    /// What one measured call allocated (Rust heap only: zstd's C workspace
    /// is not counted).
    #[derive(Clone, Copy, Debug)]
    pub struct Usage {
        /// Peak bytes held at once by allocations made during the call.
        pub peak: usize,
        /// The largest single allocation request.
        pub largest: usize,
    }

    /// Runs `f` with tracking on for this thread.
    pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Usage) {
        LIVE.set(0);
        PEAK.set(0);
        LARGEST.set(0);
        ON.set(true);
        let r = f();
        ON.set(false);
        let u = Usage {
            peak: PEAK.get().max(0) as usize,
            largest: LARGEST.get(),
        };
        (r, u)
    }
}

use alloc_track::measure;

// ---------------------------------------------------------------------------
// Checking helpers: a check returns `Err(description)` for a violation.

type Check = Result<(), String>;

/// The memory a parser that does not decompress may hold for an input of
/// `len` bytes: serde's cautious preallocation (1 MiB per sequence) allows a
/// few MiB whatever the input, beyond that it must be proportional.
fn small_bound(len: usize) -> usize {
    (4 << 20) + 8 * len
}

/// Runs one parser call: a panic or more than `limit` bytes held is a
/// violation; otherwise returns its result.
fn run<T>(
    limit: usize,
    f: impl FnOnce() -> larder::Result<T>,
) -> Result<larder::Result<T>, String> {
    run_measured(limit, f).map(|(r, _)| r)
}

/// [`run`], also returning what the call allocated.
fn run_measured<T>(
    limit: usize,
    f: impl FnOnce() -> larder::Result<T>,
) -> Result<(larder::Result<T>, alloc_track::Usage), String> {
    let (r, usage) = measure(|| catch_unwind(AssertUnwindSafe(f)));
    let r = r.map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("panicked: {msg}")
    })?;
    if usage.peak > limit {
        return Err(format!(
            "held {} bytes (largest allocation {}), over the bound of {limit}",
            usage.peak, usage.largest
        ));
    }
    Ok((r, usage))
}

/// An error must name the object it is about.
fn names(what: &str, e: &Error) -> Check {
    let msg = e.to_string();
    if msg.contains(what) {
        Ok(())
    } else {
        Err(format!("error does not name {what:?}: {msg}"))
    }
}

/// `Ok`, or an error naming `what`.
fn ok_or_named<T>(what: &str, r: &larder::Result<T>) -> Check {
    match r {
        Ok(_) => Ok(()),
        Err(e) => names(what, e),
    }
}

/// Must be an error naming `what`.
fn rejected<T>(what: &str, r: &larder::Result<T>) -> Check {
    match r {
        Ok(_) => Err("accepted".into()),
        Err(e) => names(what, e),
    }
}

/// Runs `f` under [`run`] with `limit` and requires `ok_or_named`.
fn tolerant<T>(
    what: &str,
    limit: usize,
    f: impl FnOnce() -> larder::Result<T>,
) -> Result<Option<T>, String> {
    let r = run(limit, f)?;
    ok_or_named(what, &r)?;
    Ok(r.ok())
}

/// Runs `f` under [`run`] with `limit` and requires `rejected`.
fn strict<T>(what: &str, limit: usize, f: impl FnOnce() -> larder::Result<T>) -> Check {
    let r = run(limit, f)?;
    rejected(what, &r)
}

/// Turns a violation into a proptest failure.
fn pt(c: Check) -> Result<(), TestCaseError> {
    c.map_err(TestCaseError::fail)
}

/// Fails the test listing every violation found by an exhaustive sweep.
fn assert_none(label: &str, violations: &[String]) {
    if violations.is_empty() {
        return;
    }
    let shown: Vec<&str> = violations.iter().take(40).map(String::as_str).collect();
    panic!(
        "{label}: {} violation(s){}:\n  {}",
        violations.len(),
        if violations.len() > shown.len() {
            " (first 40 shown)"
        } else {
            ""
        },
        shown.join("\n  ")
    );
}

/// Calls `f` on every strict truncation and every single-bit flip of
/// `orig`; `label` names a position for messages. Returns the violations.
fn sweep(
    orig: &[u8],
    label: impl Fn(usize) -> String,
    mut f: impl FnMut(&[u8], Option<usize>) -> Check,
) -> Vec<String> {
    let mut out = Vec::new();
    for n in 0..orig.len() {
        if let Err(e) = f(&orig[..n], None) {
            out.push(format!("truncated to {n} bytes: {e}"));
        }
    }
    let mut v = orig.to_vec();
    for i in 0..orig.len() {
        for bit in 0..8 {
            v[i] ^= 1 << bit;
            if let Err(e) = f(&v, Some(i)) {
                out.push(format!("bit {bit} of byte {i} ({}) flipped: {e}", label(i)));
            }
            v[i] ^= 1 << bit;
        }
    }
    out
}

/// A random modification of a valid object.
#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite one byte with a different value.
    Set(Pos, u8),
    /// Insert bytes at a position.
    Insert(Pos, Vec<u8>),
    /// Remove 1..=16 bytes at a position.
    Remove(Pos, usize),
    /// Append bytes.
    Append(Vec<u8>),
    /// Overwrite a run of bytes with random ones.
    Splice(Pos, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Pos>(), 1u8..=255).prop_map(|(p, x)| Mutation::Set(p, x)),
        1 => (any::<Pos>(), vec(any::<u8>(), 1..8)).prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => (any::<Pos>(), 1usize..=16).prop_map(|(p, n)| Mutation::Remove(p, n)),
        1 => vec(any::<u8>(), 1..8).prop_map(Mutation::Append),
        1 => (any::<Pos>(), vec(any::<u8>(), 2..24)).prop_map(|(p, b)| Mutation::Splice(p, b)),
    ]
}

impl Mutation {
    /// Applies the mutation; returns the bytes and the changed positions,
    /// first to last (through the end when the length changed; `None` when
    /// nothing changed, e.g. a splice equal to the input).
    fn apply(&self, orig: &[u8]) -> (Vec<u8>, Option<(usize, usize)>) {
        let mut v = orig.to_vec();
        let first_diff = |v: &[u8]| {
            let n = v.len().max(orig.len());
            let first = (0..n).find(|&i| v.get(i) != orig.get(i))?;
            let last = if v.len() != orig.len() {
                n - 1
            } else {
                (0..n).rev().find(|&i| v[i] != orig[i]).unwrap_or(first)
            };
            Some((first, last))
        };
        match self {
            Mutation::Set(p, x) => {
                if v.is_empty() {
                    return (v, None);
                }
                let i = p.index(v.len());
                v[i] ^= x; // x != 0: always a different byte
            }
            Mutation::Insert(p, b) => {
                let i = p.index(v.len() + 1);
                v.splice(i..i, b.iter().copied());
            }
            Mutation::Remove(p, n) => {
                if v.is_empty() {
                    return (v, None);
                }
                let i = p.index(v.len());
                let end = (i + n).min(v.len());
                v.drain(i..end);
            }
            Mutation::Append(b) => v.extend_from_slice(b),
            Mutation::Splice(p, b) => {
                if v.is_empty() {
                    return (v, None);
                }
                let i = p.index(v.len());
                let end = (i + b.len()).min(v.len());
                v[i..end].copy_from_slice(&b[..end - i]);
            }
        }
        let d = first_diff(&v);
        (v, d)
    }
}

/// Proptest settings: `cases` cases, no regression files written.
fn cfg(cases: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases)
    }
}

// ---------------------------------------------------------------------------
// Fixtures

const MASTER: [u8; 32] = [0x5a; 32];
const PASS: &str = "untrusted input passphrase";

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys::derive(&MasterKey::from_bytes(MASTER)));
static OTHER_KEYS: LazyLock<Keys> =
    LazyLock::new(|| Keys::derive(&MasterKey::from_bytes([0xa5; 32])));

fn k() -> &'static Keys {
    &KEYS
}

fn id(b: u8) -> Id {
    Id([b; 32])
}

fn entry(ty: BlobType, i: u8, offset: u64) -> PackEntry {
    PackEntry {
        ty,
        id: id(i),
        offset,
        stored_len: 100 + i as u32,
        plain_len: 1000 + i as u32,
        compression: i % 2,
    }
}

fn config_value() -> Config {
    Config {
        id: id(1),
        chunker: ChunkerParams {
            min: 4096,
            avg: 16384,
            max: 65536,
            level: 1,
        },
        compression_level: 3,
        pack_size: 1 << 20,
        created: 1_760_000_000,
    }
}

fn segment_value() -> IndexSegment {
    IndexSegment {
        packs: vec![
            IndexPack {
                id: id(2),
                size: 40_000,
                blobs: vec![
                    entry(BlobType::Data, 3, 0),
                    entry(BlobType::Tree, 4, 103),
                    entry(BlobType::Data, 5, 207),
                ],
            },
            IndexPack {
                id: id(6),
                size: 52,
                blobs: vec![],
            },
        ],
    }
}

fn snapshot_value() -> Snapshot {
    Snapshot {
        time_ns: 1_760_000_000_123_456_789,
        hostname: "host.example".into(),
        username: "alice".into(),
        uid: 1000,
        gid: 1000,
        paths: vec!["/home/alice".into(), "/etc".into()],
        tags: vec!["daily".into()],
        tree: id(7),
        parent: Some(id(8)),
        program_version: "larder 0.1.0".into(),
        summary: Summary {
            files_new: 3,
            total_bytes: 123_456,
            duration_ms: 42,
            ..Summary::default()
        },
        original: None,
    }
}

fn lock_value() -> LockInfo {
    LockInfo {
        hostname: "host.example".into(),
        username: "alice".into(),
        machine_id: [0x11; 16],
        boot_id: [0x22; 16],
        pid_ns: 4_026_531_836,
        pid: 4242,
        start_time: 123_456,
        created: 1_760_000_000,
        lifetime_secs: 1800,
        mode: larder::lock::LockMode::Shared,
        nonce: [9; 16],
    }
}

/// The sealed object kinds under test.
#[derive(Clone, Copy, Debug)]
enum Obj {
    Config,
    Index,
    Snapshot,
    Lock,
}

impl Obj {
    const ALL: [Obj; 4] = [Obj::Config, Obj::Index, Obj::Snapshot, Obj::Lock];

    fn ty(self) -> ObjectType {
        match self {
            Obj::Config => ObjectType::Config,
            Obj::Index => ObjectType::Index,
            Obj::Snapshot => ObjectType::Snapshot,
            Obj::Lock => ObjectType::Lock,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Obj::Config => "test-config",
            Obj::Index => "index/test-segment",
            Obj::Snapshot => "snapshots/test-snapshot",
            Obj::Lock => "locks/test-lock",
        }
    }

    fn seal(self) -> Vec<u8> {
        let ty = self.ty();
        match self {
            Obj::Config => object::seal(k(), ty, &config_value()),
            Obj::Index => object::seal(k(), ty, &segment_value()),
            Obj::Snapshot => object::seal(k(), ty, &snapshot_value()),
            Obj::Lock => object::seal(k(), ty, &lock_value()),
        }
        .unwrap()
    }

    /// Opens `bytes` as this kind with `keys`; `Ok(true)` when the value is
    /// the fixture's.
    fn open_with(self, keys: &Keys, bytes: &[u8]) -> larder::Result<bool> {
        let (ty, what) = (self.ty(), self.what());
        Ok(match self {
            Obj::Config => object::open::<Config>(keys, ty, what, bytes)? == config_value(),
            Obj::Index => object::open::<IndexSegment>(keys, ty, what, bytes)? == segment_value(),
            Obj::Snapshot => object::open::<Snapshot>(keys, ty, what, bytes)? == snapshot_value(),
            Obj::Lock => object::open::<LockInfo>(keys, ty, what, bytes)? == lock_value(),
        })
    }

    fn open(self, bytes: &[u8]) -> larder::Result<bool> {
        self.open_with(k(), bytes)
    }

    /// Decodes a postcard body as this kind.
    fn decode(self, body: &[u8]) -> larder::Result<()> {
        let what = self.what();
        match self {
            Obj::Config => object::decode::<Config>(what, body).map(drop),
            Obj::Index => object::decode::<IndexSegment>(what, body).map(drop),
            Obj::Snapshot => object::decode::<Snapshot>(what, body).map(drop),
            Obj::Lock => object::decode::<LockInfo>(what, body).map(drop),
        }
    }

    fn sealed(self) -> &'static [u8] {
        static S: LazyLock<Vec<Vec<u8>>> =
            LazyLock::new(|| Obj::ALL.iter().map(|o| o.seal()).collect());
        &S[self as usize]
    }
}

/// Region names of a sealed object, for messages.
fn object_region(i: usize, len: usize) -> String {
    match i {
        0..4 => "magic".into(),
        4 => "type".into(),
        5 => "version".into(),
        _ if i < HEADER_LEN + 24 => "nonce".into(),
        _ if i >= len - 16 => "tag".into(),
        _ => "ciphertext".into(),
    }
}

const PACK_WHAT: &str = "packs/test-pack";

/// A pack of three blobs: compressed, stored raw, and empty.
struct TestPack {
    bytes: Vec<u8>,
    blobs: Vec<Vec<u8>>,
    /// Where the sealed header starts.
    header_at: usize,
}

static PACK: LazyLock<TestPack> = LazyLock::new(|| {
    let k = k();
    let mut c = zstd::bulk::Compressor::new(3).unwrap();
    let blobs: Vec<Vec<u8>> = vec![
        b"compressible ".repeat(40),
        blake3::hash(b"incompressible").as_bytes().to_vec(),
        Vec::new(),
    ];
    let mut w = PackWriter::default();
    for (i, b) in blobs.iter().enumerate() {
        let ty = if i == 1 {
            BlobType::Tree
        } else {
            BlobType::Data
        };
        w.add(pack::prepare_blob(k, Some(&mut c), ty, k.blob_id(b), b).unwrap())
            .unwrap();
    }
    let header_at = w.size();
    let p = w.finish(k).unwrap();
    assert_eq!(
        p.entries[0].compression, 1,
        "fixture must hold a compressed blob"
    );
    assert_eq!(p.entries[1].compression, 0, "fixture must hold a raw blob");
    TestPack {
        bytes: p.bytes().to_vec(),
        blobs,
        header_at,
    }
});

fn pack_region(i: usize) -> String {
    let p = &*PACK;
    let len = p.bytes.len();
    if i < p.header_at {
        "blob area".into()
    } else if i < len - TRAILER_LEN {
        "sealed header".into()
    } else {
        let t = i - (len - TRAILER_LEN);
        let part = match t {
            0..4 => "header length",
            4..10 => "magic",
            10 => "version",
            _ => "reserved byte",
        };
        format!("trailer byte {t}: {part}")
    }
}

/// Reads a whole pack: its entries, then every blob. What a reader that
/// trusts nothing but the key would do.
fn read_whole_pack(keys: &Keys, what: &str, bytes: &[u8]) -> larder::Result<Vec<Vec<u8>>> {
    let entries = pack::read_entries(keys, what, bytes)?;
    let mut out = Vec::with_capacity(entries.len());
    for e in &entries {
        // decode_header bounded every entry by the header offset.
        let stored = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
        out.push(pack::open_blob(
            keys,
            &larder::dictionary::NoDictionaries,
            what,
            e,
            stored,
        )?);
    }
    Ok(out)
}

/// The associated data of a pack header (private in `pack`; the format is
/// `"LRDRPK" | version`).
fn pack_header_ad() -> [u8; 7] {
    let mut ad = [0u8; 7];
    ad[..6].copy_from_slice(PACK_MAGIC);
    ad[6] = FORMAT_VERSION;
    ad
}

/// A pack made of `blob_area`, a header sealed (with the right key) around
/// `header_plain`, and a valid trailer.
fn pack_around(blob_area: &[u8], header_plain: &[u8]) -> Vec<u8> {
    let mut pk = blob_area.to_vec();
    let before = pk.len();
    k().seal_into(&pack_header_ad(), header_plain, &mut pk)
        .unwrap();
    let hlen = (pk.len() - before) as u32;
    pk.extend_from_slice(&trailer(hlen, FORMAT_VERSION, 0));
    pk
}

fn trailer(hlen: u32, version: u8, reserved: u8) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[..4].copy_from_slice(&hlen.to_le_bytes());
    t[4..10].copy_from_slice(PACK_MAGIC);
    t[10] = version;
    t[11] = reserved;
    t
}

const KEY_WHAT: &str = "keys/test-key";

// What a key-file reader accepts (SPEC.md section 7), written out: a
// passphrase key's body is exactly 104 bytes, and its scrypt parameters have
// 1 <= log2 N <= 40, r >= 1, p >= 1, memory 128 * r * N <= 256 MiB and work
// N * r * p <= 2^26.
const SPEC_PASS_BODY_LEN: usize = 104;
const SPEC_MAX_SCRYPT_MEMORY: u64 = 256 << 20;
const SPEC_MAX_SCRYPT_WORK: u64 = 1 << 26;

/// Whether a reader may accept these scrypt parameters.
fn scrypt_in_bounds(n: u8, r: u8, p: u8) -> bool {
    (1..=40).contains(&n)
        && r >= 1
        && p >= 1
        && 128 * r as u64 * (1u64 << n) <= SPEC_MAX_SCRYPT_MEMORY
        && (1u64 << n) * r as u64 * p as u64 <= SPEC_MAX_SCRYPT_WORK
}

/// What the `scrypt` crate allocates for these parameters (its `V` table of
/// 128 * r * N bytes, `B` of 128 * r * p and one 128 * r block), plus a
/// little for the rest of `try_open`.
fn scrypt_heap(n: u8, r: u8, p: u8) -> usize {
    128 * r as usize * ((1usize << n) + p as usize + 1) + (64 << 10)
}

/// N * r * p of a header, for deciding whether a test can afford to run it.
fn scrypt_work(h: &KeyHeader) -> u64 {
    (1u64 << h.work_factor.min(63)) * h.scrypt_r as u64 * h.scrypt_p as u64
}

/// Tests run scrypt only on accepted headers at most this costly (N * r * p;
/// the default key is 2^20, the test key 2^15); beyond it they assert what
/// bounds any accepted header's cost, the parameters' bounds.
const AFFORDABLE_WORK: u64 = 1 << 19;

/// The memory `try_open` may hold for a key file of `len` bytes whose
/// header is `h` (when the header parsed).
fn key_open_bound(len: usize, h: Option<&KeyHeader>) -> usize {
    small_bound(len)
        + match h {
            Some(h) if h.kind == KeyKind::Passphrase => {
                scrypt_heap(h.work_factor, h.scrypt_r, h.scrypt_p)
            }
            _ => 0,
        }
}

/// Checks what `parse_key_file` accepted: scrypt parameters within the
/// bounds and a 104-byte body for a passphrase key; X25519 keys are not
/// bounded here (age is).
fn check_accepted_key(h: &KeyHeader, body: &[u8], len: usize) -> Check {
    if body.len() >= len {
        return Err(format!("body of {} bytes in a file of {len}", body.len()));
    }
    if h.kind != KeyKind::Passphrase {
        return Ok(());
    }
    let (n, r, p) = (h.work_factor, h.scrypt_r, h.scrypt_p);
    if !scrypt_in_bounds(n, r, p) {
        return Err(format!("accepted N = 2^{n}, r = {r}, p = {p}"));
    }
    if 128 * r as u64 * (1u64 << n) > SPEC_MAX_SCRYPT_MEMORY {
        return Err(format!(
            "accepted a {} byte scrypt table",
            128 * r as u64 * (1u64 << n)
        ));
    }
    if body.len() != SPEC_PASS_BODY_LEN {
        return Err(format!(
            "accepted a passphrase body of {} bytes",
            body.len()
        ));
    }
    Ok(())
}

struct TestKey {
    bytes: Vec<u8>,
    /// End of the clear part (the associated data): `6 + 4 + header_len`.
    clear_end: usize,
}

static KEY_FILE: LazyLock<TestKey> = LazyLock::new(|| {
    let bytes = keys::make_key_file(
        &MasterKey::from_bytes(MASTER),
        &NewKey::Passphrase {
            pass: PASS.to_string().into(),
            work_factor: keys::MIN_WORK_FACTOR,
        },
    )
    .unwrap();
    let hl = u32::from_le_bytes(bytes[6..10].try_into().unwrap()) as usize;
    TestKey {
        clear_end: HEADER_LEN + 4 + hl,
        bytes,
    }
});

static PASS_CRED: LazyLock<Credential> = LazyLock::new(|| Credential::passphrase(PASS));
static WRONG_CRED: LazyLock<Credential> = LazyLock::new(|| Credential::passphrase("not it"));
static X25519_CRED: LazyLock<Credential> =
    LazyLock::new(|| Credential::Identity(Box::new(age::x25519::Identity::generate())));

fn key_region(i: usize) -> String {
    let clear_end = KEY_FILE.clear_end;
    match i {
        0..4 => "magic".into(),
        4 => "type".into(),
        5 => "version".into(),
        6..10 => "header length".into(),
        _ if i < clear_end => "clear header".into(),
        _ if i < clear_end + 32 => "salt".into(),
        _ if i < clear_end + 56 => "nonce".into(),
        _ => "sealed master key".into(),
    }
}

/// A key file: a valid clear part around `header`, then `body`.
fn key_file_with(header: &KeyHeader, body: &[u8]) -> Vec<u8> {
    let h = object::encode(header).unwrap();
    let mut v = object::header(ObjectType::Key).to_vec();
    v.extend_from_slice(&(h.len() as u32).to_le_bytes());
    v.extend_from_slice(&h);
    v.extend_from_slice(body);
    v
}

/// The test key's header and body.
fn test_key_parts() -> (KeyHeader, Vec<u8>) {
    let (h, body) = keys::parse_key_file(KEY_WHAT, &KEY_FILE.bytes).unwrap();
    (h, body.to_vec())
}

/// Checks one modified key file. `changed` is the first and last changed
/// byte (`None` for a truncation). Every byte is authenticated (the clear
/// part as associated data), so with the right passphrase a modified key
/// file never opens; what parses must be within the bounds, and opening it
/// holds no more than scrypt needs for the declared parameters.
fn check_key_variant(bytes: &[u8], changed: Option<(usize, usize)>) -> Check {
    let parsed = run(small_bound(bytes.len()), || {
        keys::parse_key_file(KEY_WHAT, bytes)
    })?;
    ok_or_named(KEY_WHAT, &parsed)?;
    let header = match &parsed {
        Ok((h, body)) => {
            check_accepted_key(h, body, bytes.len())?;
            if h.kind == KeyKind::Passphrase && scrypt_work(h) > AFFORDABLE_WORK {
                return Ok(());
            }
            Some(h.clone())
        }
        Err(_) => None,
    };
    let (r, usage) = run_measured(key_open_bound(bytes.len(), header.as_ref()), || {
        keys::try_open(KEY_WHAT, bytes, &PASS_CRED)
    })?;
    if usage.largest as u64 > SPEC_MAX_SCRYPT_MEMORY {
        return Err(format!("allocated {} bytes at once", usage.largest));
    }
    match r {
        Err(e) => names(KEY_WHAT, &e),
        Ok(None) => Ok(()),
        Ok(Some(m)) if m.as_bytes() != &MASTER => Err("opened to a different master key".into()),
        Ok(Some(_)) => match changed {
            Some((a, b)) => Err(format!(
                "opened although bytes {a}..={b} ({} .. {}) changed",
                key_region(a),
                key_region(b)
            )),
            None => Err("a truncated key file opened".into()),
        },
    }
}

const TREE_WHAT: &str = "trees/test-tree";

fn node(name: &[u8], kind: NodeKind) -> Node {
    Node {
        name: name.to_vec(),
        kind,
        mode: 0o644,
        uid: 1000,
        gid: 100,
        user: "alice".into(),
        group: "users".into(),
        mtime_ns: 1_760_000_000_000_000_000,
        ctime_ns: 1_760_000_000_000_000_001,
        atime_ns: None,
        size: 0,
        inode: 77,
        device: 2049,
        links: 1,
        rdev: 0,
        link_target: vec![],
        content: vec![],
        subtree: None,
        xattrs: vec![],
    }
}

static TREE: LazyLock<(Tree, Vec<u8>)> = LazyLock::new(|| {
    let mut file = node(b"file.txt", NodeKind::File);
    file.size = 70_000;
    file.content = vec![id(10), id(11)];
    file.atime_ns = Some(5);
    file.xattrs = vec![Xattr {
        name: b"user.a".to_vec(),
        value: b"1".to_vec(),
    }];
    let mut dir = node(b"dir", NodeKind::Dir);
    dir.subtree = Some(id(12));
    let mut link = node(b"link\xff", NodeKind::Symlink);
    link.link_target = b"../elsewhere".to_vec();
    let mut t = Tree {
        nodes: vec![file, dir, link],
    };
    t.canonicalize();
    let b = t.encode().unwrap();
    (t, b)
});

/// Tree blobs are not authenticated by their own format (the blob ID check
/// is the pack's job): decoding may accept a change, but must never panic,
/// must name the object when it fails, and what it accepts is canonical.
fn check_tree_variant(bytes: &[u8], truncated: bool) -> Check {
    let r = run(small_bound(bytes.len()), || Tree::decode(TREE_WHAT, bytes))?;
    if truncated {
        return rejected(TREE_WHAT, &r);
    }
    match r {
        Err(e) => names(TREE_WHAT, &e),
        Ok(t) => {
            if t.nodes.windows(2).any(|w| w[0].name >= w[1].name) {
                return Err("accepted unsorted nodes".into());
            }
            let again = t
                .encode()
                .map_err(|e| format!("accepted tree does not re-encode: {e}"))?;
            match Tree::decode(TREE_WHAT, &again) {
                Ok(back) if back == t => Ok(()),
                other => Err(format!("accepted tree does not round-trip: {other:?}")),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Fixtures are valid (so rejections below mean something)

/// The allocation bounds asserted below are only worth something if the
/// tracker sees allocations.
#[test]
fn allocation_tracker_sees_allocations() {
    let (_, u) = measure(|| std::hint::black_box(vec![1u8; 3 << 20]));
    assert!(u.peak >= 3 << 20 && u.largest >= 3 << 20, "{u:?}");
    let r = run(1 << 20, || {
        Ok::<_, Error>(std::hint::black_box(vec![0u8; 2 << 20]).len())
    });
    assert!(r.is_err(), "a 2 MiB allocation passed a 1 MiB bound");
    let r = run(1 << 20, || {
        Ok::<_, Error>(std::hint::black_box(Vec::<u8>::with_capacity(2 << 20)).capacity())
    });
    assert!(
        r.is_err(),
        "an unused 2 MiB reservation passed a 1 MiB bound"
    );
}

#[test]
fn fixtures_open_and_wrong_keys_are_rejected() {
    for o in Obj::ALL {
        assert!(o.open(o.sealed()).unwrap(), "{o:?} round trip");
        let r = o.open_with(&OTHER_KEYS, o.sealed());
        rejected(o.what(), &r).unwrap();
    }
    let p = &*PACK;
    assert_eq!(read_whole_pack(k(), PACK_WHAT, &p.bytes).unwrap(), p.blobs);
    rejected(
        PACK_WHAT,
        &read_whole_pack(&OTHER_KEYS, PACK_WHAT, &p.bytes),
    )
    .unwrap();

    let kf = &KEY_FILE.bytes;
    let m = keys::try_open(KEY_WHAT, kf, &PASS_CRED)
        .unwrap()
        .expect("the passphrase opens it");
    assert_eq!(m.as_bytes(), &MASTER);
    assert!(keys::try_open(KEY_WHAT, kf, &WRONG_CRED).unwrap().is_none());
    assert!(
        keys::try_open(KEY_WHAT, kf, &X25519_CRED)
            .unwrap()
            .is_none()
    );

    let (t, b) = &*TREE;
    assert_eq!(&Tree::decode(TREE_WHAT, b).unwrap(), t);
}

// ---------------------------------------------------------------------------
// (a) Arbitrary bytes to every parser

/// Bytes that are random, or random behind a valid clear header of `ty`.
fn object_bytes() -> impl Strategy<Value = (usize, Vec<u8>)> {
    (0usize..4, any::<bool>(), vec(any::<u8>(), 0..300)).prop_map(|(o, with_header, rest)| {
        if with_header {
            let mut v = object::header(Obj::ALL[o].ty()).to_vec();
            v.extend_from_slice(&rest);
            (o, v)
        } else {
            (o, rest)
        }
    })
}

/// A declared length: small, at and around the limits, or anything.
fn declared_len(limit: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => 0u32..2048,
        1 => Just(limit),
        1 => Just(limit + 1),
        1 => Just(u32::MAX),
        1 => any::<u32>(),
    ]
}

proptest! {
    #![proptest_config(cfg(1024))]

    /// check_header, open, unframe, decompress_exact and decode on arbitrary
    /// bytes; Keys::open too.
    #[test]
    fn arbitrary_bytes_to_object_parsers(
        (o, bytes) in object_bytes(),
        declared in 0usize..(1 << 20),
    ) {
        let obj = Obj::ALL[o];
        let what = obj.what();
        let small = small_bound(bytes.len());
        for ty in [ObjectType::Config, ObjectType::Key, ObjectType::Index, ObjectType::Snapshot, ObjectType::Lock] {
            pt(tolerant(what, small, || object::check_header(what, ty, &bytes)).map(drop))?;
        }
        for o in Obj::ALL {
            pt(strict(o.what(), small, || o.open(&bytes)))?;
        }
        pt(tolerant(what, MAX_OBJECT_PLAIN + small, || object::unframe(what, &bytes)).map(drop))?;
        let r = pt_val(tolerant(what, declared + small, || object::decompress_exact(what, &bytes, declared)))?;
        if let Some(out) = r {
            prop_assert_eq!(out.len(), declared);
        }
        for o in Obj::ALL {
            pt(tolerant(o.what(), small, || o.decode(&bytes)).map(drop))?;
        }
        pt(tolerant(what, small, || object::decode::<KeyHeader>(what, &bytes)).map(drop))?;
        pt(strict(what, small, || k().open(what, b"ad", &bytes)))?;
    }

    /// Arbitrary frames sealed with the right key (what a key holder could
    /// write): unframe, decompression and decode run behind authentication.
    #[test]
    fn authenticated_garbage_objects(
        o in 0usize..4,
        declared in declared_len(MAX_OBJECT_PLAIN as u32),
        compression in 0u8..3,
        body in vec(any::<u8>(), 0..300),
        compress_body in any::<bool>(),
        exact in any::<bool>(),
    ) {
        let obj = Obj::ALL[o];
        let body = if compress_body { zstd::bulk::compress(&body, 1).unwrap() } else { body };
        let declared = if exact { body.len() as u32 } else { declared };
        let mut plain = declared.to_le_bytes().to_vec();
        plain.push(compression);
        plain.extend_from_slice(&body);
        let hdr = object::header(obj.ty());
        let mut sealed = hdr.to_vec();
        k().seal_into(&hdr, &plain, &mut sealed).unwrap();
        let limit = MAX_OBJECT_PLAIN + small_bound(sealed.len());
        pt(tolerant(obj.what(), limit, || obj.open(&sealed)).map(drop))?;
    }

    /// parse_trailer with any pack length and any trailer.
    #[test]
    fn arbitrary_pack_trailers(
        pack_len in prop_oneof![0u64..4096, any::<u64>()],
        raw in vec(any::<u8>(), 0..16),
        structured in any::<bool>(),
        hlen in prop_oneof![0u32..4096, any::<u32>()],
        version in 0u8..3,
        reserved in any::<u8>(),
    ) {
        let t = if structured { trailer(hlen, version, reserved).to_vec() } else { raw };
        let r = pt_val(tolerant(PACK_WHAT, 4096, || pack::parse_trailer(PACK_WHAT, pack_len, &t)))?;
        if let Some((off, hlen)) = r {
            prop_assert_eq!(off as u128 + hlen as u128 + TRAILER_LEN as u128, pack_len as u128);
            prop_assert!(hlen as usize >= SEAL_OVERHEAD + 4);
            prop_assert!(hlen as usize <= MAX_ENTRIES * ENTRY_LEN + 4 + SEAL_OVERHEAD);
        }
    }

    /// decode_header on arbitrary and structured plaintexts (entries that
    /// tile the blob area, as a valid pack's do, or arbitrary offsets);
    /// open_header on raw bytes; read_entries and every open_blob on a pack
    /// whose header is the same plaintext sealed with the right key.
    #[test]
    fn arbitrary_pack_headers(
        data_len in prop_oneof![0u64..2048, any::<u64>()],
        raw in vec(any::<u8>(), 0..400),
        structured in any::<bool>(),
        tiled in any::<bool>(),
        count in prop_oneof![3 => Just(None), 1 => Just(Some(u32::MAX)), 1 => Just(Some(MAX_ENTRIES as u32 + 1)), 1 => (0u32..8).prop_map(Some)],
        entries in vec((0u8..3, any::<u64>(), 0u64..2048, any::<u32>(), 0u32..300, declared_len(MAX_BLOB_PLAIN), 0u8..3), 0..6),
        blob_area in vec(any::<u8>(), 0..512),
    ) {
        let (plain, data_len, blob_area) = if structured {
            let n = count.unwrap_or(entries.len() as u32);
            let mut p = n.to_le_bytes().to_vec();
            let mut next = 0u64;
            for &(ty, idb, off_small, off_any, stored, plain_len, comp) in &entries {
                p.push(ty);
                p.extend_from_slice(&blake3::hash(&idb.to_le_bytes()).as_bytes()[..]);
                let off = if tiled { next } else if off_any % 4 == 0 { off_any as u64 } else { off_small };
                next = off.saturating_add(stored as u64);
                p.extend_from_slice(&off.to_le_bytes());
                p.extend_from_slice(&stored.to_le_bytes());
                p.extend_from_slice(&plain_len.to_le_bytes());
                p.push(comp);
            }
            if tiled {
                let area: Vec<u8> = (0..next as usize).map(|i| blob_area.get(i % blob_area.len().max(1)).copied().unwrap_or(0)).collect();
                (p, next, area)
            } else {
                (p, data_len, blob_area)
            }
        } else {
            (raw, data_len, blob_area)
        };
        let small = small_bound(plain.len());
        let r = pt_val(tolerant(PACK_WHAT, small, || pack::decode_header(PACK_WHAT, &plain, data_len)))?;
        if let Some(es) = r {
            prop_assert!(es.len() <= MAX_ENTRIES);
            for e in es {
                prop_assert!(e.offset.checked_add(e.stored_len as u64).is_some_and(|end| end <= data_len));
                prop_assert!(e.stored_len as usize >= SEAL_OVERHEAD);
                prop_assert!(e.plain_len <= MAX_BLOB_PLAIN && e.compression <= 2);
            }
        }
        pt(strict(PACK_WHAT, small, || pack::open_header(k(), PACK_WHAT, &plain, data_len)))?;
        let pk = pack_around(&blob_area, &plain);
        let limit = MAX_BLOB_PLAIN as usize + small_bound(pk.len());
        // The blobs are random bytes: if the header is accepted, opening
        // them must fail (authentication), naming the pack.
        pt(strict(PACK_WHAT, limit, || {
            let blobs = read_whole_pack(k(), PACK_WHAT, &pk)?;
            if blobs.is_empty() {
                Err(Error::corrupt(PACK_WHAT, "(test) no blob to open"))
            } else {
                Ok(blobs)
            }
        }))?;
        pt(tolerant(PACK_WHAT, small_bound(pk.len()), || pack::read_entries(k(), PACK_WHAT, &pk)).map(drop))?;
        pt(tolerant(PACK_WHAT, small_bound(pk.len()), || pack::read_entries(k(), PACK_WHAT, &blob_area)).map(drop))?;
    }

    /// open_blob with any entry on any stored bytes, and on stored bytes
    /// sealed under the entry's own type and ID (decompression and the hash
    /// check then run on garbage).
    #[test]
    fn arbitrary_blobs(
        ty in prop_oneof![Just(BlobType::Data), Just(BlobType::Tree)],
        idb in any::<[u8; 32]>(),
        plain_len in declared_len(MAX_BLOB_PLAIN),
        compression in 0u8..3,
        stored in vec(any::<u8>(), 0..300),
        compress in any::<bool>(),
    ) {
        let e = PackEntry { ty, id: Id(idb), offset: 0, stored_len: stored.len() as u32, plain_len, compression };
        let limit = MAX_BLOB_PLAIN as usize + small_bound(stored.len());
        pt(strict(PACK_WHAT, limit, || pack::open_blob(k(), &larder::dictionary::NoDictionaries, PACK_WHAT, &e, &stored)))?;
        let inner = if compress { zstd::bulk::compress(&stored, 1).unwrap() } else { stored.clone() };
        let sealed = k().seal(&pack::blob_ad(ty, &e.id), &inner).unwrap();
        let r = pt_val(tolerant(PACK_WHAT, limit, || pack::open_blob(k(), &larder::dictionary::NoDictionaries, PACK_WHAT, &e, &sealed)))?;
        if let Some(p) = r {
            // Only possible if the random ID is the keyed hash: never, in practice.
            prop_assert_eq!(k().blob_id(&p), e.id);
        }
    }

    /// Dictionary objects: arbitrary bytes (refused: they do not
    /// authenticate), and sealed bodies holding arbitrary "dictionaries"
    /// (often with zstd's magic and an ID, so zstd's own parser of the
    /// entropy tables runs on them): an error naming the object or a
    /// dictionary that passed every check, never a panic, within bounds.
    #[test]
    fn arbitrary_dictionary_objects(
        raw in vec(any::<u8>(), 0..400),
        magic in any::<bool>(),
        zid in prop_oneof![Just(0u32), any::<u32>()],
        tail in vec(any::<u8>(), 0..600),
    ) {
        use larder::dictionary::{Dictionary, MAX_DICT_LEN};
        const WHAT: &str = "dicts/test-dictionary";
        let name = Id::of_object(&raw);
        let small = small_bound(raw.len() + tail.len());
        pt(strict(WHAT, small, || Dictionary::open(k(), WHAT, name, &raw)))?;
        let mut zstd = if magic { vec![0x37, 0xa4, 0x30, 0xec] } else { Vec::new() };
        zstd.extend_from_slice(&zid.to_le_bytes());
        zstd.extend_from_slice(&tail);
        #[derive(serde::Serialize)]
        struct Body<'a> {
            zstd: &'a [u8],
        }
        let sealed = object::seal(k(), ObjectType::Dict, &Body { zstd: &zstd }).unwrap();
        let r = pt_val(tolerant(WHAT, small, || Dictionary::open(k(), WHAT, name, &sealed)))?;
        let direct = pt_val(tolerant(WHAT, small, || Dictionary::from_zstd(WHAT, name, zstd.clone())))?;
        prop_assert_eq!(r.is_some(), direct.is_some());
        if let Some(d) = r {
            prop_assert!(magic && zid != 0);
            prop_assert_eq!(d.zstd_id(), zid);
            prop_assert!(d.bytes().len() <= MAX_DICT_LEN);
        }
    }

    /// parse_key_file and try_open (passphrase and X25519) on arbitrary key
    /// files, raw and behind a valid clear header with an arbitrary
    /// `KeyHeader` (any byte for log2 N, r and p) and an arbitrary body
    /// (often exactly a passphrase body's 104 bytes, or age-looking).
    /// Accepted parameters must be within the reader's bounds, so scrypt
    /// never gets a table over 256 MiB; opening runs scrypt (on the
    /// affordable ones) within that memory and never opens random bytes.
    #[test]
    fn arbitrary_key_files(
        raw in vec(any::<u8>(), 0..300),
        shape in 0u8..3,
        x25519 in any::<bool>(),
        work_factor in prop_oneof![any::<u8>(), 1u8..=20],
        scrypt_r in prop_oneof![any::<u8>(), 1u8..=16],
        scrypt_p in prop_oneof![any::<u8>(), 1u8..=8],
        created in any::<i64>(),
        hostname in "[a-z.]{0,12}",
        recipient in "[a-z0-9]{0,8}",
        hl_delta in prop_oneof![4 => Just(0i64), 1 => -3i64..4, 1 => Just(i64::from(u32::MAX))],
        body_shape in prop_oneof![3 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    ) {
        let bytes = match shape {
            0 => raw,
            1 => {
                let mut v = object::header(ObjectType::Key).to_vec();
                v.extend_from_slice(&raw);
                v
            }
            _ => {
                let h = KeyHeader {
                    kind: if x25519 { KeyKind::X25519 } else { KeyKind::Passphrase },
                    work_factor,
                    scrypt_r,
                    scrypt_p,
                    created,
                    hostname,
                    username: "u".into(),
                    recipient,
                };
                let h = object::encode(&h).unwrap();
                let hl = (h.len() as i64 + hl_delta).clamp(0, u32::MAX as i64) as u32;
                let mut v = object::header(ObjectType::Key).to_vec();
                v.extend_from_slice(&hl.to_le_bytes());
                v.extend_from_slice(&h);
                match body_shape {
                    0 => v.extend((0..SPEC_PASS_BODY_LEN).map(|i| raw.get(i).copied().unwrap_or(i as u8))),
                    1 => {
                        v.extend_from_slice(b"age-encryption.org/v1\n-> X25519 ");
                        v.extend_from_slice(&raw);
                    }
                    _ => v.extend_from_slice(&raw),
                }
                v
            }
        };
        let small = small_bound(bytes.len());
        let r = pt_val(tolerant(KEY_WHAT, small, || keys::parse_key_file(KEY_WHAT, &bytes)))?;
        let mut header = None;
        if let Some((h, body)) = r {
            pt(check_accepted_key(&h, body, bytes.len()))?;
            header = Some(h);
        }
        let affordable = header.as_ref().is_none_or(|h| h.kind != KeyKind::Passphrase || scrypt_work(h) <= AFFORDABLE_WORK);
        for c in [&*PASS_CRED, &*X25519_CRED] {
            if matches!(c, Credential::Passphrase(_)) && !affordable {
                continue;
            }
            let limit = key_open_bound(bytes.len(), header.as_ref());
            let (r, usage) = pt_val(run_measured(limit, || keys::try_open(KEY_WHAT, &bytes, c)))?;
            pt(ok_or_named(KEY_WHAT, &r))?;
            prop_assert!(usage.largest as u64 <= SPEC_MAX_SCRYPT_MEMORY, "allocated {} bytes at once", usage.largest);
            prop_assert!(r.ok().flatten().is_none(), "random bytes opened as a key file");
        }
    }

    /// Tree::decode on arbitrary bytes, with and without the version byte.
    #[test]
    fn arbitrary_tree_blobs(raw in vec(any::<u8>(), 0..400), versioned in any::<bool>()) {
        let bytes = if versioned {
            let mut v = vec![TREE_VERSION];
            v.extend_from_slice(&raw);
            v
        } else {
            raw
        };
        pt(check_tree_variant(&bytes, false))?;
    }
}

/// Like [`pt`] for checks that carry a value.
fn pt_val<T>(r: Result<T, String>) -> Result<T, TestCaseError> {
    r.map_err(TestCaseError::fail)
}

// ---------------------------------------------------------------------------
// (b) Valid objects, modified

#[test]
fn sealed_objects_reject_every_truncation_and_bit_flip() {
    let mut all = Vec::new();
    for o in Obj::ALL {
        let orig = o.sealed();
        let len = orig.len();
        let v = sweep(
            orig,
            |i| object_region(i, len),
            |b, _| strict(o.what(), small_bound(b.len()), || o.open(b)),
        );
        all.extend(v.into_iter().map(|s| format!("{o:?}: {s}")));
        // One more byte at the end.
        let mut longer = orig.to_vec();
        longer.push(0);
        if let Err(e) = strict(o.what(), small_bound(longer.len()), || o.open(&longer)) {
            all.push(format!("{o:?}: one byte appended: {e}"));
        }
        // The right bytes under another object type.
        for other in Obj::ALL {
            if other.ty() != o.ty()
                && let Err(e) = strict(other.what(), small_bound(len), || other.open(orig))
            {
                all.push(format!("{o:?} opened as {other:?}: {e}"));
            }
        }
    }
    assert_none("sealed objects", &all);
}

#[test]
fn pack_rejects_every_truncation_and_bit_flip() {
    let p = &*PACK;
    let limit = MAX_BLOB_PLAIN as usize + small_bound(p.bytes.len());
    let mut v = sweep(&p.bytes, pack_region, |b, _| {
        strict(PACK_WHAT, limit, || read_whole_pack(k(), PACK_WHAT, b))
    });
    // Trailer and header parsers each reject every truncation of their own
    // input, too.
    let (off, hlen) = pack::parse_trailer(
        PACK_WHAT,
        p.bytes.len() as u64,
        &p.bytes[p.bytes.len() - TRAILER_LEN..],
    )
    .unwrap();
    let sealed = &p.bytes[off as usize..off as usize + hlen as usize];
    for n in 0..sealed.len() {
        if let Err(e) = strict(PACK_WHAT, small_bound(n), || {
            pack::open_header(k(), PACK_WHAT, &sealed[..n], off)
        }) {
            v.push(format!("sealed header truncated to {n}: {e}"));
        }
    }
    for n in 0..TRAILER_LEN {
        let t = &p.bytes[p.bytes.len() - TRAILER_LEN..][..n];
        if let Err(e) = strict(PACK_WHAT, 4096, || {
            pack::parse_trailer(PACK_WHAT, p.bytes.len() as u64, t)
        }) {
            v.push(format!("trailer truncated to {n}: {e}"));
        }
    }
    assert_none("pack", &v);
}

#[test]
fn key_file_rejects_truncations_and_bit_flips() {
    let kf = &KEY_FILE.bytes;
    let mut v = Vec::new();
    // Every truncation (rejected by the body length); every bit flip in the
    // clear part (rejected by the bounds, or by authentication after an
    // scrypt run with the flipped parameters); a sample of bit flips in the
    // body (each costs an scrypt run, the proptest below covers the rest at
    // random).
    for n in 0..kf.len() {
        if let Err(e) = check_key_variant(&kf[..n], None) {
            v.push(format!("truncated to {n} bytes: {e}"));
        }
    }
    let mut b = kf.clone();
    for i in (0..KEY_FILE.clear_end).chain((KEY_FILE.clear_end..kf.len()).step_by(7)) {
        for bit in 0..8 {
            b[i] ^= 1 << bit;
            if let Err(e) = check_key_variant(&b, Some((i, i))) {
                v.push(format!(
                    "bit {bit} of byte {i} ({}) flipped: {e}",
                    key_region(i)
                ));
            }
            b[i] ^= 1 << bit;
        }
    }
    assert_none("key file", &v);
}

#[test]
fn tree_blob_survives_every_truncation_and_bit_flip() {
    let (_, b) = &*TREE;
    let v = sweep(
        b,
        |i| format!("tree byte {i}"),
        |x, changed| check_tree_variant(x, changed.is_none()),
    );
    assert_none("tree blob", &v);
}

proptest! {
    #![proptest_config(cfg(512))]

    /// Any random modification of a sealed object is rejected.
    #[test]
    fn sealed_objects_reject_random_modifications(o in 0usize..4, m in mutation()) {
        let obj = Obj::ALL[o];
        let (bytes, changed) = m.apply(obj.sealed());
        prop_assume!(changed.is_some());
        pt(strict(obj.what(), small_bound(bytes.len()), || obj.open(&bytes)))?;
    }

    /// Any random modification of a pack makes reading it (entries, then
    /// every blob) fail.
    #[test]
    fn pack_rejects_random_modifications(m in mutation()) {
        let (bytes, changed) = m.apply(&PACK.bytes);
        prop_assume!(changed.is_some());
        let limit = MAX_BLOB_PLAIN as usize + small_bound(bytes.len());
        pt(strict(PACK_WHAT, limit, || read_whole_pack(k(), PACK_WHAT, &bytes)))?;
    }

    /// A tree blob under random modification never panics.
    #[test]
    fn tree_blob_survives_random_modifications(m in mutation()) {
        let (bytes, changed) = m.apply(&TREE.1);
        prop_assume!(changed.is_some());
        // A removal at the end is a truncation.
        let truncated = bytes.len() < TREE.1.len() && TREE.1.starts_with(&bytes);
        pt(check_tree_variant(&bytes, truncated))?;
    }
}

proptest! {
    // Each case may cost an scrypt run (N = 2^10, r = 8, p = 4 unless the
    // modification changed them).
    #![proptest_config(cfg(64))]

    /// A randomly modified key file never opens to a master key: the clear
    /// part is the seal's associated data.
    #[test]
    fn key_file_rejects_random_modifications(m in mutation()) {
        let (bytes, changed) = m.apply(&KEY_FILE.bytes);
        prop_assume!(changed.is_some());
        let truncated = bytes.len() < KEY_FILE.bytes.len() && KEY_FILE.bytes.starts_with(&bytes);
        pt(check_key_variant(&bytes, if truncated { None } else { changed }))?;
    }
}

// ---------------------------------------------------------------------------
// (c) Specific bounds

/// A passphrase key whose scrypt parameters are out of the reader's bounds,
/// or whose body is not exactly 104 bytes, is refused as corrupt, naming the
/// key file, before scrypt runs: the memory bound of each call (4 MiB and a
/// little) has no room for the 32 MiB table that N = 2^15, r = 8 would need.
#[test]
fn key_files_out_of_bounds_are_refused_before_scrypt() {
    let (h, body) = test_key_parts();
    let with = |n: u8, r: u8, p: u8| KeyHeader {
        work_factor: n,
        scrypt_r: r,
        scrypt_p: p,
        ..h.clone()
    };
    let default = with(15, 8, 4);
    let longer = [&body[..], &[0u8]].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("work factor 0", key_file_with(&with(0, 8, 4), &body)),
        ("work factor 41", key_file_with(&with(41, 8, 4), &body)),
        ("work factor 255", key_file_with(&with(255, 8, 4), &body)),
        ("r = 0", key_file_with(&with(15, 0, 4), &body)),
        ("p = 0", key_file_with(&with(15, 8, 0), &body)),
        (
            "memory 512 MiB (N = 2^18, r = 16)",
            key_file_with(&with(18, 16, 1), &body),
        ),
        (
            "memory 512 MiB (N = 2^21, r = 2)",
            key_file_with(&with(21, 2, 1), &body),
        ),
        (
            "work 2^27 (N = 2^16, r = 8, p = 255)",
            key_file_with(&with(16, 8, 255), &body),
        ),
        (
            "work 2^26 + 2^21 (N = 2^18, r = 8, p = 33)",
            key_file_with(&with(18, 8, 33), &body),
        ),
        ("body of 103 bytes", key_file_with(&default, &body[..103])),
        ("body of 105 bytes", key_file_with(&default, &longer)),
        ("empty body", key_file_with(&default, &[])),
        (
            "an age file as body",
            key_file_with(&default, b"age-encryption.org/v1\n-> scrypt "),
        ),
    ];
    let mut v = Vec::new();
    for (label, bytes) in &cases {
        let limit = small_bound(bytes.len());
        let parsed = run(limit, || keys::parse_key_file(KEY_WHAT, bytes));
        let opened = run(limit, || keys::try_open(KEY_WHAT, bytes, &PASS_CRED));
        for (what, r) in [
            ("parse_key_file", parsed.map(|r| r.map(drop))),
            ("try_open", opened.map(|r| r.map(drop))),
        ] {
            match r {
                Err(e) => v.push(format!("{label}: {what}: {e}")),
                Ok(Err(e @ Error::Corrupt { .. })) => {
                    if let Err(e) = names(KEY_WHAT, &e) {
                        v.push(format!("{label}: {what}: {e}"));
                    }
                }
                Ok(other) => v.push(format!("{label}: {what}: not Corrupt: {other:?}")),
            }
        }
    }
    // Within the bounds but not valid scrypt (RFC 7914 needs N < 2^(16 r)):
    // parsed, then refused as corrupt before scrypt runs.
    let bytes = key_file_with(&with(16, 1, 1), &body);
    keys::parse_key_file(KEY_WHAT, &bytes).unwrap();
    match run(small_bound(bytes.len()), || {
        keys::try_open(KEY_WHAT, &bytes, &PASS_CRED).map(|m| m.is_some())
    }) {
        Ok(Err(e @ Error::Corrupt { .. })) => names(KEY_WHAT, &e).unwrap(),
        other => v.push(format!("N = 2^16, r = 1: {other:?}")),
    }
    assert_none("out-of-bounds key files", &v);
}

/// The largest parameters a reader accepts, at each bound: parsed (scrypt
/// is not run on them here, it would take tens of seconds).
#[test]
fn key_file_bounds_are_inclusive() {
    let (h, body) = test_key_parts();
    for (n, r, p) in [
        (18, 8, 32),  // memory 256 MiB and work 2^26, both exactly
        (21, 1, 32),  // memory 256 MiB, work 2^26
        (15, 8, 255), // work 2^18 * 255, just under 2^26
        (1, 255, 255),
    ] {
        assert!(scrypt_in_bounds(n, r, p));
        let kh = KeyHeader {
            work_factor: n,
            scrypt_r: r,
            scrypt_p: p,
            ..h.clone()
        };
        let bytes = key_file_with(&kh, &body);
        let (got, _) = keys::parse_key_file(KEY_WHAT, &bytes)
            .unwrap_or_else(|e| panic!("N = 2^{n}, r = {r}, p = {p}: {e}"));
        assert_eq!(got, kh);
    }
}

/// The largest table a reader lets scrypt allocate is 256 MiB (N = 2^18,
/// r = 8, p = 1; about two seconds in a release build), and opening holds
/// no more than that and a little.
#[test]
fn largest_accepted_scrypt_table_is_256_mib() {
    let (h, body) = test_key_parts();
    let kh = KeyHeader {
        work_factor: 18,
        scrypt_r: 8,
        scrypt_p: 1,
        ..h
    };
    let bytes = key_file_with(&kh, &body);
    let limit = SPEC_MAX_SCRYPT_MEMORY as usize + small_bound(bytes.len());
    let (r, usage) = run_measured(limit, || keys::try_open(KEY_WHAT, &bytes, &PASS_CRED)).unwrap();
    // The parameters changed, so the seal does not authenticate.
    assert!(r.unwrap().is_none());
    assert_eq!(usage.largest as u64, SPEC_MAX_SCRYPT_MEMORY, "{usage:?}");
}

/// The clear header of a passphrase key is the seal's associated data: a
/// key file whose header says anything else (another host, user, time or
/// recipient, other scrypt parameters) does not open with the right
/// passphrase, nor does one with any byte of the clear part changed.
#[test]
fn passphrase_key_header_is_authenticated() {
    let (h, body) = test_key_parts();
    assert_eq!(key_file_with(&h, &body), KEY_FILE.bytes);
    let variants = [
        KeyHeader {
            hostname: format!("{}x", h.hostname),
            ..h.clone()
        },
        KeyHeader {
            hostname: "attacker".into(),
            ..h.clone()
        },
        KeyHeader {
            username: format!("{}x", h.username),
            ..h.clone()
        },
        KeyHeader {
            created: h.created + 1,
            ..h.clone()
        },
        KeyHeader {
            recipient: "age1attacker".into(),
            ..h.clone()
        },
        KeyHeader {
            work_factor: h.work_factor + 1,
            ..h.clone()
        },
        KeyHeader {
            scrypt_r: h.scrypt_r + 1,
            ..h.clone()
        },
        KeyHeader {
            scrypt_p: h.scrypt_p + 1,
            ..h.clone()
        },
    ];
    for kh in &variants {
        let bytes = key_file_with(kh, &body);
        assert_eq!(keys::parse_key_file(KEY_WHAT, &bytes).unwrap().0, *kh);
        assert!(
            keys::try_open(KEY_WHAT, &bytes, &PASS_CRED)
                .unwrap()
                .is_none(),
            "{kh:?} opened"
        );
    }
    let mut v = Vec::new();
    let mut b = KEY_FILE.bytes.clone();
    for i in 0..KEY_FILE.clear_end {
        b[i] ^= 0xff;
        if let Err(e) = check_key_variant(&b, Some((i, i))) {
            v.push(format!("byte {i} ({}) inverted: {e}", key_region(i)));
        }
        b[i] ^= 0xff;
    }
    assert_none("key file clear part", &v);
}

#[test]
fn huge_pack_header_length_is_rejected_without_allocating() {
    let max_header = (MAX_ENTRIES * ENTRY_LEN + 4 + SEAL_OVERHEAD) as u32;
    for (pack_len, hlen) in [
        (1u64 << 40, u32::MAX),
        (1u64 << 40, max_header + 1),
        (u64::MAX, u32::MAX),
        (200, 189), // larger than the pack before the trailer
        (200, SEAL_OVERHEAD as u32 + 3),
    ] {
        let t = trailer(hlen, FORMAT_VERSION, 0);
        strict(PACK_WHAT, 1024, || {
            pack::parse_trailer(PACK_WHAT, pack_len, &t)
        })
        .unwrap_or_else(|e| panic!("pack_len {pack_len}, hlen {hlen}: {e}"));
    }
    // The largest legal header length is accepted (without reading anything).
    let t = trailer(max_header, FORMAT_VERSION, 0);
    let r = run(1024, || pack::parse_trailer(PACK_WHAT, 1 << 40, &t)).unwrap();
    assert_eq!(
        r.unwrap(),
        (
            (1u64 << 40) - TRAILER_LEN as u64 - max_header as u64,
            max_header
        )
    );

    // A whole small pack whose trailer claims a huge header.
    let mut pk = PACK.bytes.clone();
    let n = pk.len();
    pk[n - TRAILER_LEN..n - TRAILER_LEN + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    strict(PACK_WHAT, 4096, || pack::read_entries(k(), PACK_WHAT, &pk)).unwrap();
}

#[test]
fn pack_header_with_u32_max_entries_is_rejected() {
    // The count alone, then followed by one real entry's worth of bytes.
    let mut plain = u32::MAX.to_le_bytes().to_vec();
    strict(PACK_WHAT, 4096, || {
        pack::decode_header(PACK_WHAT, &plain, 1 << 40)
    })
    .unwrap();
    plain.extend_from_slice(&[0u8; ENTRY_LEN]);
    strict(PACK_WHAT, 4096, || {
        pack::decode_header(PACK_WHAT, &plain, 1 << 40)
    })
    .unwrap();
    // Sealed with the right key inside a pack: still rejected, still small.
    let pk = pack_around(&[0u8; 64], &plain);
    strict(PACK_WHAT, 4096 + 2 * pk.len(), || {
        pack::read_entries(k(), PACK_WHAT, &pk)
    })
    .unwrap();
    // One past MAX_ENTRIES with a plaintext of exactly the matching length:
    // the count limit holds on its own, before any entry is allocated.
    let n = MAX_ENTRIES + 1;
    let mut big = vec![0u8; 4 + n * ENTRY_LEN];
    big[..4].copy_from_slice(&(n as u32).to_le_bytes());
    strict(PACK_WHAT, 4096, || {
        pack::decode_header(PACK_WHAT, &big, u64::MAX)
    })
    .unwrap();
}

#[test]
fn unframe_rejects_declared_size_above_the_limit() {
    let what = "index/oversized";
    for declared in [MAX_OBJECT_PLAIN as u64 + 1, u32::MAX as u64] {
        for compression in [0u8, 1] {
            let mut plain = (declared as u32).to_le_bytes().to_vec();
            plain.push(compression);
            plain.extend_from_slice(&zstd::bulk::compress(b"tiny", 1).unwrap());
            strict(what, 4096, || object::unframe(what, &plain))
                .unwrap_or_else(|e| panic!("declared {declared}, compression {compression}: {e}"));
            strict(what, 4096, || object::unframe_owned(what, plain.clone()))
                .unwrap_or_else(|e| panic!("owned, declared {declared}: {e}"));
            // The same frame sealed with the right key, through object::open.
            let hdr = object::header(ObjectType::Index);
            let mut sealed = hdr.to_vec();
            k().seal_into(&hdr, &plain, &mut sealed).unwrap();
            strict(what, 4096, || {
                object::open::<IndexSegment>(k(), ObjectType::Index, what, &sealed)
            })
            .unwrap_or_else(|e| {
                panic!("sealed, declared {declared}, compression {compression}: {e}")
            });
        }
    }
    // A stored body must match its declared size exactly, either way.
    for declared in [0u32, 3, 5, MAX_OBJECT_PLAIN as u32] {
        let mut plain = declared.to_le_bytes().to_vec();
        plain.push(0);
        plain.extend_from_slice(b"four");
        strict(what, 4096, || object::unframe(what, &plain)).unwrap();
        strict(what, 4096, || object::unframe_owned(what, plain.clone())).unwrap();
    }
    // Shorter than the frame itself.
    for n in 0..5 {
        strict(what, 4096, || object::unframe(what, &[0u8; 5][..n])).unwrap();
        strict(what, 4096, || object::unframe_owned(what, vec![0u8; n])).unwrap();
    }
    // A stored body that matches comes back whole, in place or copied.
    let mut plain = 4u32.to_le_bytes().to_vec();
    plain.push(0);
    plain.extend_from_slice(b"four");
    assert_eq!(object::unframe(what, &plain).unwrap(), b"four");
    assert_eq!(object::unframe_owned(what, plain).unwrap(), b"four");
}

#[test]
fn decompression_bomb_is_rejected() {
    let what = "snapshots/bomb";
    let bomb = zstd::bulk::compress(&vec![0u8; 10 << 20], 3).unwrap();
    assert!(bomb.len() < 4096, "a good bomb is small: {}", bomb.len());
    // decompress_exact never writes past the declared length.
    strict(what, 64 << 10, || {
        object::decompress_exact(what, &bomb, 100)
    })
    .unwrap();
    // Through unframe, and through a sealed object.
    let mut plain = 100u32.to_le_bytes().to_vec();
    plain.push(1);
    plain.extend_from_slice(&bomb);
    strict(what, 64 << 10, || object::unframe(what, &plain)).unwrap();
    let hdr = object::header(ObjectType::Snapshot);
    let mut sealed = hdr.to_vec();
    k().seal_into(&hdr, &plain, &mut sealed).unwrap();
    strict(what, 64 << 10, || {
        object::open::<Snapshot>(k(), ObjectType::Snapshot, what, &sealed)
    })
    .unwrap();
    // Through a pack blob that declares 100 plaintext bytes.
    let e = PackEntry {
        ty: BlobType::Data,
        id: id(0xb0),
        offset: 0,
        stored_len: (bomb.len() + SEAL_OVERHEAD) as u32,
        plain_len: 100,
        compression: 1,
    };
    let stored = k().seal(&pack::blob_ad(e.ty, &e.id), &bomb).unwrap();
    strict(what, 64 << 10, || {
        pack::open_blob(k(), &larder::dictionary::NoDictionaries, what, &e, &stored)
    })
    .unwrap();

    // A frame of 100 bytes declared as 50, and one of 50 declared as 100.
    let hundred = zstd::bulk::compress(&[7u8; 100], 3).unwrap();
    strict(what, 64 << 10, || {
        object::decompress_exact(what, &hundred, 50)
    })
    .unwrap();
    let fifty = zstd::bulk::compress(&[7u8; 50], 3).unwrap();
    strict(what, 64 << 10, || {
        object::decompress_exact(what, &fifty, 100)
    })
    .unwrap();
    assert_eq!(
        object::decompress_exact(what, &fifty, 50).unwrap(),
        vec![7u8; 50]
    );
}

/// A newer (or unknown) format version is reported as such, and the error
/// still says which object it is about.
#[test]
fn unsupported_version_errors_name_the_object() {
    let mut v = Vec::new();
    for o in Obj::ALL {
        let mut b = o.sealed().to_vec();
        // 6 is a migrated repository's config: 7 is newer than any object.
        b[5] = object::MIGRATED_VERSION + 1;
        let r = o.open(&b);
        if !matches!(r, Err(Error::UnsupportedVersion { .. })) {
            v.push(format!("{o:?}: not UnsupportedVersion: {r:?}"));
        }
        if let Err(e) = rejected(o.what(), &r) {
            v.push(format!("{o:?}: {e}"));
        }
    }
    let mut kf = KEY_FILE.bytes.clone();
    kf[5] = FORMAT_VERSION + 1;
    if let Err(e) = rejected(KEY_WHAT, &keys::parse_key_file(KEY_WHAT, &kf)) {
        v.push(format!("key file: {e}"));
    }
    let t = trailer(100, FORMAT_VERSION + 1, 0);
    if let Err(e) = rejected(PACK_WHAT, &pack::parse_trailer(PACK_WHAT, 1000, &t)) {
        v.push(format!("pack trailer: {e}"));
    }
    let mut tb = TREE.1.clone();
    tb[0] = TREE_VERSION + 1;
    if let Err(e) = rejected(TREE_WHAT, &Tree::decode(TREE_WHAT, &tb)) {
        v.push(format!("tree: {e}"));
    }
    assert_none("version errors", &v);
}

// ---------------------------------------------------------------------------
// (d) SFTP replies: a server's packets are untrusted too. The client reads a
// packet's length and refuses one over `MAX_PACKET` before reading it; these
// check the parsers of the body it then holds.

use larder::backend::sftp::proto::{self as sftp, Attrs, Reply};

/// One field of a made-up packet body, in the shapes the parsers read.
fn sftp_field() -> impl Strategy<Value = Vec<u8>> {
    let flags = [0x1u32, 0x2, 0x4, 0x8, 0xf, 0x8000_0000, 0x8000_000f];
    prop_oneof![
        // a uint32: a small count or length, attribute flags, anything
        4 => (0u32..8).prop_map(|v| v.to_be_bytes().to_vec()),
        2 => prop::sample::select(flags.to_vec()).prop_map(|v| v.to_be_bytes().to_vec()),
        2 => any::<u32>().prop_map(|v| v.to_be_bytes().to_vec()),
        // a string carrying its true length
        4 => vec(any::<u8>(), 0..24).prop_map(|b| {
            let mut v = (b.len() as u32).to_be_bytes().to_vec();
            v.extend(b);
            v
        }),
        1 => vec(any::<u8>(), 0..8),
    ]
}

/// A packet body: a type byte (mostly one a server sends), a request id,
/// then fields.
fn sftp_body() -> impl Strategy<Value = Vec<u8>> {
    let types = vec![
        sftp::FXP_VERSION,
        sftp::FXP_STATUS,
        sftp::FXP_HANDLE,
        sftp::FXP_DATA,
        sftp::FXP_NAME,
        sftp::FXP_ATTRS,
        sftp::FXP_EXTENDED_REPLY,
    ];
    (
        prop_oneof![6 => prop::sample::select(types), 1 => any::<u8>()],
        any::<u32>(),
        vec(sftp_field(), 0..24),
    )
        .prop_map(|(ty, id, fields)| {
            let mut v = vec![ty];
            v.extend(id.to_be_bytes());
            for f in fields {
                v.extend(f);
            }
            v
        })
}

/// What parsing a body of `len` bytes may hold: each entry of a NAME reply
/// takes at least 12 bytes of the packet and one slot of its vector (which
/// at most doubles), its name at most three bytes per byte read (invalid
/// UTF-8 becomes U+FFFD). A count read from the packet must allocate nothing.
fn sftp_bound(len: usize) -> usize {
    let slot = std::mem::size_of::<(String, Attrs)>();
    2 * (len / 12 + 4) * slot + 3 * len + 1024
}

/// parse_reply's contract on `body`: no panic, bounded memory, and what it
/// accepts fits in the packet.
fn check_sftp_reply(body: &[u8]) -> Check {
    let r = run(sftp_bound(body.len()), || Ok(sftp::parse_reply(body)))?
        .map_err(|e| format!("parse_reply returned a larder error: {e}"))?;
    let (id, reply) = match r {
        Err(e) if e.0.is_empty() => return Err("an error with no message".into()),
        Err(_) => return Ok(()),
        Ok(v) => v,
    };
    if body.len() < 5 || id != u32::from_be_bytes([body[1], body[2], body[3], body[4]]) {
        return Err(format!("accepted with request id {id} from {body:?}"));
    }
    // A string of n bytes needs n + 4 bytes of the packet after type and id.
    let room = body.len() - 5;
    // Each reply must come from its own packet type and fit in the packet.
    let (ty, fits) = match reply {
        Reply::Handle(h) => (sftp::FXP_HANDLE, h.len() <= 256 && h.len() + 4 <= room),
        Reply::Data(d) => (sftp::FXP_DATA, d.len() + 4 <= room),
        Reply::Name(v) => (sftp::FXP_NAME, room >= 4 && v.len() <= (room - 4) / 12),
        Reply::Status { .. } => (sftp::FXP_STATUS, room >= 4),
        Reply::Attrs(_) => (sftp::FXP_ATTRS, room >= 4),
        Reply::Extended => (sftp::FXP_EXTENDED_REPLY, true),
    };
    if fits && body[0] == ty {
        Ok(())
    } else {
        Err(format!(
            "accepted a reply that does not fit its packet: {body:?}"
        ))
    }
}

/// parse_version's contract on `body`, as [`check_sftp_reply`].
fn check_sftp_version(body: &[u8]) -> Check {
    let r = run(sftp_bound(body.len()), || Ok(sftp::parse_version(body)))?
        .map_err(|e| format!("parse_version returned a larder error: {e}"))?;
    match r {
        Err(e) if e.0.is_empty() => Err("an error with no message".into()),
        Err(_) => Ok(()),
        // Each extension is two strings: at least 8 bytes.
        Ok((_, ext)) if body[0] == sftp::FXP_VERSION && ext.len() <= (body.len() - 5) / 8 => Ok(()),
        Ok(_) => Err(format!(
            "accepted a version packet that does not fit: {body:?}"
        )),
    }
}

proptest! {
    #![proptest_config(cfg(2048))]

    /// Both parsers on structured and on arbitrary bodies.
    #[test]
    fn arbitrary_sftp_packets(body in sftp_body(), raw in vec(any::<u8>(), 0..64)) {
        for b in [&body, &raw] {
            pt(check_sftp_reply(b))?;
            pt(check_sftp_version(b))?;
        }
    }
}

/// Valid replies of each kind the client reads, cut at every position: a
/// shorter packet is never taken for a shorter reply (the STATUS reply,
/// whose message servers may leave out, is cut only inside its message).
#[test]
fn sftp_replies_reject_every_truncation() {
    let s = |b: &[u8]| {
        let mut v = (b.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(b);
        v
    };
    let head = |ty: u8| vec![ty, 0, 0, 0, 7];
    // flags (size, permissions, times), size as two halves, mode, atime, mtime
    let attrs = [0x0000_000du32, 0, 42, 0o100_644, 1, 1000]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect::<Vec<u8>>();
    let mut name = head(sftp::FXP_NAME);
    name.extend(2u32.to_be_bytes());
    for n in [&b"data"[..], b"index"] {
        name.extend(s(n));
        name.extend(s(b"drwx------ long name"));
        name.extend(&attrs);
    }
    let mut handle = head(sftp::FXP_HANDLE);
    handle.extend(s(b"h1"));
    let mut data = head(sftp::FXP_DATA);
    data.extend(s(b"some bytes"));
    let mut at = head(sftp::FXP_ATTRS);
    at.extend(&attrs);
    let mut status = head(sftp::FXP_STATUS);
    status.extend(2u32.to_be_bytes());
    let keep = status.len() + 1;
    status.extend(s(b"No such file"));
    let mut version = vec![sftp::FXP_VERSION, 0, 0, 0, 3];
    version.extend(s(b"fsync@openssh.com"));
    version.extend(s(b"1"));

    let mut v = Vec::new();
    for (label, body, from) in [
        ("NAME", &name, 0),
        ("HANDLE", &handle, 0),
        ("DATA", &data, 0),
        ("ATTRS", &at, 0),
        ("STATUS", &status, keep),
    ] {
        if let Err(e) = sftp::parse_reply(body) {
            v.push(format!("{label}: the whole reply refused: {e}"));
        }
        for n in from..body.len() {
            if sftp::parse_reply(&body[..n]).is_ok() {
                v.push(format!(
                    "{label} cut to {n} of {} bytes: accepted",
                    body.len()
                ));
            }
        }
    }
    match sftp::parse_version(&version) {
        Ok((3, ext)) if ext == ["fsync@openssh.com"] => {}
        r => v.push(format!("VERSION: {r:?}")),
    }
    for n in 0..version.len() {
        if let Ok(r) = sftp::parse_version(&version[..n]) {
            // Cut between extensions, the packet offers fewer of them;
            // anywhere else it must be refused.
            if n != 5 {
                v.push(format!("VERSION cut to {n}: accepted as {r:?}"));
            }
        }
    }
    match sftp::parse_reply(&name) {
        Ok((7, Reply::Name(e))) if e.len() == 2 && e[1].0 == "index" && e[1].1.size == Some(42) => {
        }
        r => v.push(format!("NAME parsed as {r:?}")),
    }
    // A handle is at most 256 bytes (the protocol's limit).
    let mut long = head(sftp::FXP_HANDLE);
    long.extend(s(&[7u8; 257]));
    if let Ok(r) = sftp::parse_reply(&long) {
        v.push(format!("a 257-byte handle accepted: {r:?}"));
    }
    assert_none("SFTP truncations", &v);
}
