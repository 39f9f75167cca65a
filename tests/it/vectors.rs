//! Format test vectors (`repo-format/vectors/`).
//!
//! The committed repository under `repo-format/vectors/repo` was written by
//! larder itself; `vectors.json` records the passphrase, the master key and
//! what every object must decode to. The tests below check two things:
//!
//! 1. the library still reads those bytes to the recorded values, and
//! 2. an independent reader written here from `repo-format/SPEC.md` alone
//!    (BLAKE3, XChaCha20-Poly1305, scrypt, zstd, age for X25519 keys and a
//!    hand-written postcard encoder, with the context strings, layouts and
//!    parameters spelled out literally) agrees with both the bytes and the
//!    library, on read and on write.
//!
//! Any change to what larder writes (a derive_key context, a header layout, a
//! field order, the encoding) makes these tests fail. That is the point: bump
//! the format version, update the spec, and regenerate with
//! `cargo test --release --test it vectors::generate_vectors -- --ignored`
//! (the generator is [`generate_vectors`]).

use larder::Error;
use larder::backend::{Backend, Kind, LocalBackend};
use larder::chunker::{Chunker, ChunkerParams};
use larder::crypto::{Keys, MasterKey};
use larder::id::Id;
use larder::index::marks::{self, DeletionPlan, Holder, Mark, MarkedPack, PlanHolders};
use larder::index::{IndexPack, IndexSegment};
use larder::keys::{Credential, KeyHeader, KeyKind, NewKey};
use larder::lock::LockInfo;
use larder::object::{self, ObjectType};
use larder::pack::{self, BlobType, PackEntry, PackWriter};
use larder::repository::{Config, InitOptions, Repository};
use larder::snapshot::{Snapshot, Summary};
use larder::tree::{Node, NodeKind, Tree, Xattr};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

// ---------------------------------------------------------------------------
// Constants of the vector set (inputs, not outputs).

/// The passphrase of the vector repository's passphrase key.
const PASSPHRASE: &str = "larder test vectors v1";
/// scrypt work factor of the vector key (the minimum larder accepts).
const WORK_FACTOR: u8 = 10;
/// 2026-01-01T00:00:00Z, the time used in every constructed object.
const T0: i64 = 1_767_225_600;
/// Input of the chunker vector: the BLAKE3 XOF of this label.
const CHUNKER_LABEL: &[u8] = b"larder format v1 chunker vector";
const CHUNKER_INPUT_LEN: usize = 256 << 10;
/// The parameters of the vector repository.
const PARAMS: ChunkerParams = ChunkerParams {
    min: 4096,
    avg: 16384,
    max: 65536,
    level: 1,
};

// The spec, spelled out literally (deliberately not taken from the library).
const SPEC_CTX_ENCRYPT: &str = "larder 2026-11 v1 object encryption key";
const SPEC_CTX_BLOB_ID: &str = "larder 2026-11 v1 blob id key";
const SPEC_CTX_GEAR: &str = "larder 2026-11 v1 fastcdc gear table";
const SPEC_VERSION: u8 = 5;
const SPEC_ENTRY_LEN: usize = 50;
const SPEC_TRAILER_LEN: usize = 12;
/// A passphrase key's body: `salt (32) | nonce (24) | sealed master key (48)`.
const SPEC_SALT_LEN: usize = 32;
const SPEC_NONCE_LEN: usize = 24;
const SPEC_PASS_BODY_LEN: usize = 104;
/// scrypt r and p of new passphrase keys.
const SPEC_SCRYPT_R: u8 = 8;
const SPEC_SCRYPT_P: u8 = 4;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("repo-format")
        .join("vectors")
}

// ---------------------------------------------------------------------------
// The recorded vectors (vectors.json).

#[derive(Debug, Serialize, Deserialize)]
struct Vectors {
    comment: Vec<String>,
    format_version: u8,
    passphrase: String,
    x25519_identity: String,
    x25519_recipient: String,
    /// 32 bytes, hex.
    master_key: String,
    derived: Derived,
    blob_ids: Vec<BlobIdVector>,
    chunker: ChunkerVector,
    config: ConfigVector,
    keys: Vec<KeyVector>,
    packs: Vec<PackVector>,
    blobs: Vec<BlobVector>,
    index: Vec<ObjectVector>,
    snapshots: Vec<ObjectVector>,
    locks: Vec<ObjectVector>,
    /// A deletion plan, then its holders object (SPEC.md, "Deletion marks").
    marks: Vec<ObjectVector>,
    /// One compression dictionary (`dicts/`, type `D`).
    dicts: Vec<ObjectVector>,
    /// Every file of the repository, sorted by path.
    files: Vec<FileVector>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Derived {
    encryption_key: String,
    blob_id_key: String,
    /// gear[0..8] as 16-digit hex numbers.
    gear_first: Vec<String>,
    /// gear[248..256].
    gear_last: Vec<String>,
    /// BLAKE3 of the 2048 bytes of the table (256 little-endian u64s).
    gear_table_blake3: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct BlobIdVector {
    plaintext_hex: String,
    id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChunkerVector {
    input: String,
    input_len: usize,
    min: u32,
    avg: u32,
    max: u32,
    level: u8,
    mask_s: String,
    mask_l: String,
    lengths: Vec<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ConfigVector {
    id: String,
    min: u32,
    avg: u32,
    max: u32,
    level: u8,
    compression_level: i32,
    pack_size: u32,
    created: i64,
    compression: u8,
    body_hex: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeyVector {
    id: String,
    kind: String,
    /// scrypt log2(N); 0 for X25519 keys.
    work_factor: u8,
    /// scrypt r; 0 for X25519 keys.
    scrypt_r: u8,
    /// scrypt p; 0 for X25519 keys.
    scrypt_p: u8,
    created: i64,
    hostname: String,
    username: String,
    recipient: String,
    /// The postcard `KeyHeader` (not the whole clear part).
    header_hex: String,
    /// Everything before the body: the associated data of a passphrase
    /// key's seal.
    clear_hex: String,
    body_len: usize,
    /// Passphrase keys only: the body's salt and nonce, and
    /// scrypt(passphrase, salt, N, r, p) (the XChaCha20-Poly1305 key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    salt_hex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nonce_hex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scrypt_key_hex: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct PackVector {
    id: String,
    size: u64,
    header_offset: u64,
    header_len: u32,
    entries: Vec<EntryVector>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct EntryVector {
    #[serde(rename = "type")]
    ty: u8,
    id: String,
    offset: u64,
    stored_len: u32,
    plain_len: u32,
    compression: u8,
}

#[derive(Debug, Serialize, Deserialize)]
struct BlobVector {
    id: String,
    #[serde(rename = "type")]
    ty: u8,
    what: String,
    plaintext_hex: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ObjectVector {
    id: String,
    compression: u8,
    body_hex: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct FileVector {
    path: String,
    size: u64,
    blake3: String,
}

fn load_vectors() -> Vectors {
    let text = std::fs::read_to_string(vectors_dir().join("vectors.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

fn id(s: &str) -> Id {
    Id::from_hex(s).unwrap()
}

fn master_of(v: &Vectors) -> [u8; 32] {
    unhex(&v.master_key).try_into().unwrap()
}

fn entry_vector(e: &PackEntry) -> EntryVector {
    EntryVector {
        ty: e.ty as u8,
        id: e.id.to_hex(),
        offset: e.offset,
        stored_len: e.stored_len,
        plain_len: e.plain_len,
        compression: e.compression,
    }
}

fn entry_of(e: &EntryVector) -> PackEntry {
    PackEntry {
        ty: BlobType::from_u8(e.ty).unwrap(),
        id: id(&e.id),
        offset: e.offset,
        stored_len: e.stored_len,
        plain_len: e.plain_len,
        compression: e.compression,
    }
}

// ---------------------------------------------------------------------------
// The fixed contents of the vector repository.

/// Content of `hello.txt` (compressible: stored with compression 1).
fn hello_txt() -> Vec<u8> {
    b"Hello from the larder format test vectors.\n".repeat(40)
}

/// A made-up page: shared boilerplate around words picked by `i`.
fn dictionary_sample(i: u64) -> Vec<u8> {
    const WORDS: [&str; 8] = [
        "larder",
        "format",
        "vector",
        "dictionary",
        "snapshot",
        "restore",
        "pack",
        "the",
    ];
    let pick = xof(format!("larder format v5 page {i}").as_bytes(), 200);
    let mut s = String::from("<html><head><title>larder test vectors</title></head><body><p>");
    for b in pick {
        s.push_str(WORDS[b as usize % WORDS.len()]);
        s.push(' ');
    }
    s.push_str("</p></body></html>\n");
    s.into_bytes()
}

/// Content of `page.html` (stored with compression 2, the dictionary's).
fn page_html() -> Vec<u8> {
    dictionary_sample(1000)
}

/// Content of `random.bin` (incompressible: stored with compression 0).
fn random_bin() -> Vec<u8> {
    xof(b"larder format v1 random.bin", 100)
}

fn xof(label: &[u8], n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    blake3::Hasher::new()
        .update(label)
        .finalize_xof()
        .fill(&mut out);
    out
}

fn chunker_input() -> Vec<u8> {
    xof(CHUNKER_LABEL, CHUNKER_INPUT_LEN)
}

fn node(name: &[u8], kind: NodeKind, inode: u64) -> Node {
    Node {
        name: name.to_vec(),
        kind,
        mode: 0o644,
        uid: 1000,
        gid: 1000,
        user: "vector".into(),
        group: "vector".into(),
        mtime_ns: T0 * 1_000_000_000 + 1,
        ctime_ns: T0 * 1_000_000_000 + 2,
        atime_ns: None,
        size: 0,
        inode,
        device: 0x801,
        links: 1,
        rdev: 0,
        link_target: Vec::new(),
        content: Vec::new(),
        subtree: None,
        xattrs: Vec::new(),
    }
}

/// The `docs` directory: a symlink and an empty file with a non-UTF-8 name.
fn docs_tree() -> Tree {
    let mut link = node(b"link", NodeKind::Symlink, 13);
    link.mode = 0o777;
    link.link_target = b"../hello.txt".to_vec();
    let empty = node(b"na\xefve", NodeKind::File, 14);
    let mut t = Tree {
        nodes: vec![empty, link],
    };
    t.canonicalize();
    t
}

/// The root directory: `docs/`, `hello.txt` (with an xattr and an atime) and
/// `random.bin`.
fn root_tree(docs: Id, hello: Id, random: Id) -> Tree {
    let mut d = node(b"docs", NodeKind::Dir, 10);
    d.mode = 0o755;
    d.links = 2;
    d.subtree = Some(docs);
    let mut h = node(b"hello.txt", NodeKind::File, 11);
    h.size = hello_txt().len() as u64;
    h.content = vec![hello];
    h.atime_ns = Some(T0 * 1_000_000_000 + 3);
    h.xattrs = vec![Xattr {
        name: b"user.vector".to_vec(),
        value: b"yes".to_vec(),
    }];
    let mut r = node(b"random.bin", NodeKind::File, 12);
    r.mode = 0o600;
    r.size = random_bin().len() as u64;
    r.content = vec![random];
    let mut t = Tree {
        nodes: vec![r, h, d],
    };
    t.canonicalize();
    t
}

fn snapshot(tree: Id) -> Snapshot {
    Snapshot {
        time_ns: T0 * 1_000_000_000 + 123_456_789,
        hostname: "vector-host".into(),
        username: "vector".into(),
        uid: 1000,
        gid: 1000,
        paths: vec!["/home/vector".into()],
        tags: vec!["vector".into(), "v1".into()],
        tree,
        parent: None,
        program_version: "larder 0.1.0".into(),
        summary: Summary {
            files_new: 3,
            files_changed: 0,
            files_unmodified: 0,
            dirs_new: 2,
            dirs_changed: 0,
            dirs_unmodified: 0,
            bytes_read: 1820,
            total_bytes: 1820,
            total_files: 3,
            data_added: 1000,
            data_added_plain: 2500,
            duration_ms: 42,
        },
        original: None,
    }
}

fn lock_info() -> LockInfo {
    // A shared lock held on another machine: it blocks no backup, and is
    // stale once its object is older than 30 minutes on the storage.
    LockInfo {
        hostname: "vector-host".into(),
        username: "vector".into(),
        machine_id: [0x11; 16],
        boot_id: [0x22; 16],
        pid_ns: 4_026_531_836,
        pid: 4242,
        start_time: 123_456_789,
        created: T0,
        lifetime_secs: 1800,
        mode: larder::lock::LockMode::Shared,
        nonce: [0x5a; 16],
    }
}

/// A deletion plan for one made-up pack (not in the vector repository, so
/// nothing the snapshot uses is marked).
fn mark_plan() -> Mark {
    Mark::Plan(DeletionPlan {
        created: T0,
        packs: vec![MarkedPack {
            id: Id([0x33; 32]),
            size: 1_048_576,
        }],
    })
}

/// The holders object of plan `plan`: the vector lock's holder, one
/// interrupted write, and one live lock that could not be read.
fn mark_holders(plan: Id) -> Mark {
    let l = lock_info();
    Mark::Holders(PlanHolders {
        plan,
        created: T0 + 60,
        holders: vec![Holder {
            machine_id: l.machine_id,
            boot_id: l.boot_id,
            pid_ns: l.pid_ns,
            pid: l.pid,
            start_time: l.start_time,
        }],
        leftovers: vec!["packs/44/.tmp-vector".into()],
        unreadable_locks: 1,
    })
}

// ---------------------------------------------------------------------------
// A hand-written postcard encoder (SPEC.md, "Postcard encoding").

#[derive(Default)]
struct Pc(Vec<u8>);

impl Pc {
    fn var(&mut self, mut v: u64) -> &mut Self {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    fn zz(&mut self, v: i64) -> &mut Self {
        self.var(((v << 1) ^ (v >> 63)) as u64)
    }
    fn byte(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }
    fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    /// Strings and serde_bytes byte strings: varint length, then bytes.
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.var(b.len() as u64).raw(b)
    }
    fn id(&mut self, id: &Id) -> &mut Self {
        self.raw(&id.0)
    }
    fn opt_id(&mut self, id: &Option<Id>) -> &mut Self {
        match id {
            None => self.byte(0),
            Some(i) => self.byte(1).id(i),
        }
    }
}

fn pc_config(c: &Config) -> Vec<u8> {
    let mut p = Pc::default();
    p.id(&c.id)
        .var(c.chunker.min as u64)
        .var(c.chunker.avg as u64)
        .var(c.chunker.max as u64)
        .byte(c.chunker.level)
        .zz(c.compression_level as i64)
        .var(c.pack_size as u64)
        .zz(c.created);
    p.0
}

fn pc_key_header(h: &KeyHeader) -> Vec<u8> {
    let kind = match h.kind {
        KeyKind::Passphrase => 0,
        KeyKind::X25519 => 1,
    };
    let mut p = Pc::default();
    p.var(kind)
        .byte(h.work_factor)
        .byte(h.scrypt_r)
        .byte(h.scrypt_p)
        .zz(h.created)
        .bytes(h.hostname.as_bytes())
        .bytes(h.username.as_bytes())
        .bytes(h.recipient.as_bytes());
    p.0
}

fn pc_entry(p: &mut Pc, e: &PackEntry) {
    p.var(e.ty as u64)
        .id(&e.id)
        .var(e.offset)
        .var(e.stored_len as u64)
        .var(e.plain_len as u64)
        .byte(e.compression);
}

fn pc_index(s: &IndexSegment) -> Vec<u8> {
    let mut p = Pc::default();
    p.var(s.packs.len() as u64);
    for ip in &s.packs {
        p.id(&ip.id).var(ip.size).var(ip.blobs.len() as u64);
        for e in &ip.blobs {
            pc_entry(&mut p, e);
        }
    }
    p.0
}

fn pc_tree_blob(t: &Tree) -> Vec<u8> {
    let mut p = Pc::default();
    p.byte(1).var(t.nodes.len() as u64);
    for n in &t.nodes {
        let kind = match n.kind {
            NodeKind::File => 0,
            NodeKind::Dir => 1,
            NodeKind::Symlink => 2,
            NodeKind::Fifo => 3,
            NodeKind::CharDev => 4,
            NodeKind::BlockDev => 5,
            NodeKind::Socket => 6,
        };
        p.bytes(&n.name)
            .var(kind)
            .var(n.mode as u64)
            .var(n.uid as u64)
            .var(n.gid as u64)
            .bytes(n.user.as_bytes())
            .bytes(n.group.as_bytes())
            .zz(n.mtime_ns)
            .zz(n.ctime_ns);
        match n.atime_ns {
            None => p.byte(0),
            Some(a) => p.byte(1).zz(a),
        };
        p.var(n.size)
            .var(n.inode)
            .var(n.device)
            .var(n.links)
            .var(n.rdev)
            .bytes(&n.link_target)
            .var(n.content.len() as u64);
        for c in &n.content {
            p.id(c);
        }
        p.opt_id(&n.subtree).var(n.xattrs.len() as u64);
        for x in &n.xattrs {
            p.bytes(&x.name).bytes(&x.value);
        }
    }
    p.0
}

fn pc_snapshot(s: &Snapshot) -> Vec<u8> {
    let mut p = Pc::default();
    p.zz(s.time_ns)
        .bytes(s.hostname.as_bytes())
        .bytes(s.username.as_bytes())
        .var(s.uid as u64)
        .var(s.gid as u64)
        .var(s.paths.len() as u64);
    for x in &s.paths {
        p.bytes(x.as_bytes());
    }
    p.var(s.tags.len() as u64);
    for x in &s.tags {
        p.bytes(x.as_bytes());
    }
    p.id(&s.tree)
        .opt_id(&s.parent)
        .bytes(s.program_version.as_bytes());
    let m = &s.summary;
    for v in [
        m.files_new,
        m.files_changed,
        m.files_unmodified,
        m.dirs_new,
        m.dirs_changed,
        m.dirs_unmodified,
        m.bytes_read,
        m.total_bytes,
        m.total_files,
        m.data_added,
        m.data_added_plain,
        m.duration_ms,
    ] {
        p.var(v);
    }
    // Field 12, `original`: present only when set.
    if s.original.is_some() {
        p.opt_id(&s.original);
    }
    p.0
}

/// A snapshot that replaces another (`tag`, `rewrite`) ends with field 12:
/// the spec's encoding and the library's agree both ways, and the vector
/// snapshot (written before the field existed) reads as one without it.
#[test]
fn snapshot_original_field() {
    let mut s = snapshot(Id([7; 32]));
    let plain = pc_snapshot(&s);
    assert_eq!(object::encode(&s).unwrap(), plain);
    s.original = Some(Id([9; 32]));
    let with = pc_snapshot(&s);
    assert_eq!(with.len(), plain.len() + 33);
    assert_eq!(with[plain.len()], 1);
    assert_eq!(object::encode(&s).unwrap(), with);
    assert_eq!(object::decode::<Snapshot>("s", &with).unwrap(), s);
    s.original = None;
    assert_eq!(object::decode::<Snapshot>("s", &plain).unwrap(), s);
    // Anything after field 12 is refused as before.
    let mut trailing = with.clone();
    trailing.push(0);
    assert!(object::decode::<Snapshot>("s", &trailing).is_err());
    // A truncated field 12, or a tag other than 0 or 1, is refused.
    assert!(object::decode::<Snapshot>("s", &with[..with.len() - 1]).is_err());
    let mut bad_tag = plain.clone();
    bad_tag.push(2);
    assert!(object::decode::<Snapshot>("s", &bad_tag).is_err());
}

/// A lock mode's byte as section 16 lists them.
fn spec_mode(m: larder::lock::LockMode) -> u8 {
    use larder::lock::LockMode::*;
    match m {
        Shared => 0,
        Exclusive => 1,
        Maintenance => 2,
        Snapshots => 3,
    }
}

fn pc_lock(l: &LockInfo) -> Vec<u8> {
    let mut p = Pc::default();
    p.bytes(l.hostname.as_bytes())
        .bytes(l.username.as_bytes())
        .raw(&l.machine_id)
        .raw(&l.boot_id)
        .var(l.pid_ns)
        .var(l.pid as u64)
        .var(l.start_time)
        .zz(l.created)
        .var(l.lifetime_secs as u64)
        .byte(spec_mode(l.mode))
        .raw(&l.nonce);
    p.0
}

fn pc_mark(m: &Mark) -> Vec<u8> {
    let mut p = Pc::default();
    match m {
        Mark::Plan(plan) => {
            p.var(0).zz(plan.created).var(plan.packs.len() as u64);
            for mp in &plan.packs {
                p.id(&mp.id).var(mp.size);
            }
        }
        Mark::Holders(h) => {
            p.var(1)
                .id(&h.plan)
                .zz(h.created)
                .var(h.holders.len() as u64);
            for x in &h.holders {
                p.raw(&x.machine_id)
                    .raw(&x.boot_id)
                    .var(x.pid_ns)
                    .var(x.pid as u64)
                    .var(x.start_time);
            }
            p.var(h.leftovers.len() as u64);
            for l in &h.leftovers {
                p.bytes(l.as_bytes());
            }
            p.var(h.unreadable_locks as u64);
        }
    }
    p.0
}

// ---------------------------------------------------------------------------
// An independent reader, written from SPEC.md.

struct SpecKeys {
    enc: [u8; 32],
    id_key: [u8; 32],
    gear: [u64; 256],
}

fn spec_keys(master: &[u8; 32]) -> SpecKeys {
    let mut raw = [0u8; 2048];
    blake3::Hasher::new_derive_key(SPEC_CTX_GEAR)
        .update(master)
        .finalize_xof()
        .fill(&mut raw);
    let mut gear = [0u64; 256];
    for (i, g) in gear.iter_mut().enumerate() {
        *g = u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
    }
    SpecKeys {
        enc: blake3::derive_key(SPEC_CTX_ENCRYPT, master),
        id_key: blake3::derive_key(SPEC_CTX_BLOB_ID, master),
        gear,
    }
}

/// `nonce(24) | ciphertext | tag(16)` → plaintext, or `None` if it does not
/// authenticate.
fn spec_unseal(k: &SpecKeys, ad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    use chacha20poly1305::aead::{Aead, KeyInit, Payload};
    use chacha20poly1305::{XChaCha20Poly1305, XNonce};
    if sealed.len() < 40 {
        return None;
    }
    let aead = XChaCha20Poly1305::new(&k.enc.into());
    aead.decrypt(
        &XNonce::try_from(&sealed[..24]).unwrap(),
        Payload {
            msg: &sealed[24..],
            aad: ad,
        },
    )
    .ok()
}

/// Opens a sealed object of type `ty`: returns `(compression, body)`.
fn spec_open_object(k: &SpecKeys, ty: u8, bytes: &[u8]) -> (u8, Vec<u8>) {
    assert_eq!(&bytes[..4], b"LRDR");
    assert_eq!(bytes[4], ty, "type byte");
    assert_eq!(bytes[5], SPEC_VERSION, "version byte");
    let plain = spec_unseal(k, &bytes[..6], &bytes[6..]).expect("object authenticates");
    let plain_len = u32::from_le_bytes(plain[..4].try_into().unwrap()) as usize;
    let body = match plain[4] {
        0 => plain[5..].to_vec(),
        1 => zstd::bulk::decompress(&plain[5..], plain_len).unwrap(),
        c => panic!("compression {c}"),
    };
    assert_eq!(body.len(), plain_len);
    (plain[4], body)
}

struct SpecPack {
    header_offset: u64,
    header_len: u32,
    entries: Vec<EntryVector>,
}

fn spec_parse_pack(k: &SpecKeys, pack: &[u8]) -> SpecPack {
    let t = &pack[pack.len() - SPEC_TRAILER_LEN..];
    assert_eq!(&t[4..10], b"LRDRPK");
    assert_eq!(t[10], SPEC_VERSION);
    assert_eq!(t[11], 0, "reserved byte");
    let hlen = u32::from_le_bytes(t[..4].try_into().unwrap());
    let hoff = pack.len() - SPEC_TRAILER_LEN - hlen as usize;
    let mut ad = b"LRDRPK".to_vec();
    ad.push(SPEC_VERSION);
    let plain =
        spec_unseal(k, &ad, &pack[hoff..hoff + hlen as usize]).expect("header authenticates");
    let n = u32::from_le_bytes(plain[..4].try_into().unwrap()) as usize;
    assert_eq!(plain.len(), 4 + n * SPEC_ENTRY_LEN);
    let entries = plain[4..]
        .chunks(SPEC_ENTRY_LEN)
        .map(|b| EntryVector {
            ty: b[0],
            id: hex::encode(&b[1..33]),
            offset: u64::from_le_bytes(b[33..41].try_into().unwrap()),
            stored_len: u32::from_le_bytes(b[41..45].try_into().unwrap()),
            plain_len: u32::from_le_bytes(b[45..49].try_into().unwrap()),
            compression: b[49],
        })
        .collect();
    SpecPack {
        header_offset: hoff as u64,
        header_len: hlen,
        entries,
    }
}

/// The zstd dictionary inside a dictionary object's postcard body
/// (`zstd: Vec<u8>`: a varint length, then the bytes), and its zstd ID
/// (u32 LE at offset 4, after the magic `37 a4 30 ec`).
fn spec_dictionary(body: &[u8]) -> (u32, Vec<u8>) {
    let (mut len, mut shift, mut i) = (0usize, 0, 0);
    loop {
        let b = body[i];
        len |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let zstd = body[i..].to_vec();
    assert_eq!(zstd.len(), len, "the body is exactly the one field");
    assert_eq!(
        &zstd[..4],
        &[0x37, 0xa4, 0x30, 0xec],
        "zstd dictionary magic"
    );
    (u32::from_le_bytes(zstd[4..8].try_into().unwrap()), zstd)
}

/// The recorded dictionaries: (zstd ID, zstd dictionary bytes).
fn spec_dictionaries(k: &SpecKeys, v: &Vectors) -> Vec<(u32, Vec<u8>)> {
    v.dicts
        .iter()
        .map(|d| {
            let (_, body) = spec_open_object(k, b'D', &read(&format!("dicts/{}", d.id)));
            spec_dictionary(&body)
        })
        .collect()
}

fn spec_open_blob(k: &SpecKeys, dicts: &[(u32, Vec<u8>)], pack: &[u8], e: &EntryVector) -> Vec<u8> {
    let stored = &pack[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
    let mut ad = vec![e.ty];
    ad.extend_from_slice(&unhex(&e.id));
    let inner = spec_unseal(k, &ad, stored).expect("blob authenticates");
    let plain = match e.compression {
        0 => inner,
        1 => zstd::bulk::decompress(&inner, e.plain_len as usize).unwrap(),
        2 => {
            // The frame header names the dictionary (zstd's frame format:
            // magic, descriptor, then the dictionary ID field).
            let fhd = inner[4];
            let id_len = [0, 1, 2, 4][(fhd & 3) as usize];
            let single = (fhd >> 5) & 1;
            let at = 5 + (1 - single as usize);
            let mut idb = [0u8; 4];
            idb[..id_len].copy_from_slice(&inner[at..at + id_len]);
            let zid = u32::from_le_bytes(idb);
            let (_, dict) = dicts
                .iter()
                .find(|(i, _)| *i == zid)
                .expect("named dictionary");
            zstd::bulk::Decompressor::with_dictionary(dict)
                .unwrap()
                .decompress(&inner, e.plain_len as usize)
                .unwrap()
        }
        c => panic!("compression {c}"),
    };
    assert_eq!(plain.len(), e.plain_len as usize);
    assert_eq!(
        blake3::keyed_hash(&k.id_key, &plain).to_hex().as_str(),
        e.id
    );
    plain
}

/// The parts of a key file.
struct SpecKeyFile<'a> {
    /// Magic, type, version, header length and header: everything before
    /// the body (a passphrase key's associated data).
    clear: &'a [u8],
    /// The postcard `KeyHeader`.
    header: &'a [u8],
    body: &'a [u8],
}

impl SpecKeyFile<'_> {
    /// `KeyHeader.kind`: 0 Passphrase, 1 X25519 (a one-byte varint).
    fn kind(&self) -> u8 {
        self.header[0]
    }
    /// `(log2 N, r, p)`: the three raw bytes after the kind.
    fn scrypt(&self) -> (u8, u8, u8) {
        (self.header[1], self.header[2], self.header[3])
    }
}

fn spec_split_key(bytes: &[u8]) -> SpecKeyFile<'_> {
    assert_eq!(&bytes[..5], b"LRDRK");
    assert_eq!(bytes[5], SPEC_VERSION, "version byte");
    let hl = u32::from_le_bytes(bytes[6..10].try_into().unwrap()) as usize;
    SpecKeyFile {
        clear: &bytes[..10 + hl],
        header: &bytes[10..10 + hl],
        body: &bytes[10 + hl..],
    }
}

/// The associated data of a passphrase key's seal, built from its parts:
/// `"LRDR" | "K" | version | header_len (u32 LE) | header`.
fn spec_key_ad(header: &[u8]) -> Vec<u8> {
    let mut ad = b"LRDRK".to_vec();
    ad.push(SPEC_VERSION);
    ad.extend_from_slice(&(header.len() as u32).to_le_bytes());
    ad.extend_from_slice(header);
    ad
}

/// The reader bounds on a passphrase key's scrypt parameters.
fn spec_scrypt_bounds_ok(n: u8, r: u8, p: u8) -> bool {
    (1..=40).contains(&n)
        && r > 0
        && p > 0
        && 128u64 * r as u64 * (1u64 << n) <= 256 << 20
        && (1u64 << n) * r as u64 * p as u64 <= 1 << 26
}

/// scrypt(passphrase, salt, N = 2^n, r, p) → 32 bytes.
fn spec_scrypt(pass: &str, salt: &[u8], (n, r, p): (u8, u8, u8)) -> [u8; 32] {
    let params = scrypt::Params::new(n, r as u32, p as u32).unwrap();
    let mut out = [0u8; 32];
    scrypt::scrypt(pass.as_bytes(), salt, &params, &mut out).unwrap();
    out
}

/// Opens a passphrase key file: the master key, or `None` if the seal does
/// not authenticate (wrong passphrase, or a modified file).
fn spec_open_passphrase_key(pass: &str, bytes: &[u8]) -> Option<[u8; 32]> {
    use chacha20poly1305::aead::{Aead, KeyInit, Payload};
    use chacha20poly1305::{XChaCha20Poly1305, XNonce};
    let kf = spec_split_key(bytes);
    assert_eq!(kf.kind(), 0, "a passphrase key");
    let (n, r, p) = kf.scrypt();
    assert!(
        spec_scrypt_bounds_ok(n, r, p),
        "N = 2^{n}, r = {r}, p = {p}"
    );
    assert_eq!(kf.body.len(), SPEC_PASS_BODY_LEN);
    let salt = &kf.body[..SPEC_SALT_LEN];
    let nonce = &kf.body[SPEC_SALT_LEN..SPEC_SALT_LEN + SPEC_NONCE_LEN];
    let sealed = &kf.body[SPEC_SALT_LEN + SPEC_NONCE_LEN..];
    let key = spec_scrypt(pass, salt, (n, r, p));
    let plain = XChaCha20Poly1305::new(&key.into())
        .decrypt(
            &XNonce::try_from(nonce).unwrap(),
            Payload {
                msg: sealed,
                aad: &spec_key_ad(kf.header),
            },
        )
        .ok()?;
    Some(plain.try_into().expect("a 32-byte master key"))
}

/// The chunk lengths of `data` with fastcdc v2020 `cut_gear`, as the spec
/// describes it (independent of `larder::chunker`).
fn spec_cut_all(gear: &[u64; 256], p: ChunkerParams, data: &[u8]) -> Vec<usize> {
    use fastcdc::v2020::{Normalization, cut_gear, select_masks};
    let level = [
        Normalization::Level0,
        Normalization::Level1,
        Normalization::Level2,
        Normalization::Level3,
    ][p.level as usize];
    let (ms, ml) = select_masks(p.avg as usize, level);
    let gear_ls: Vec<u64> = gear.iter().map(|g| g << 1).collect();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let end = (pos + p.max as usize).min(data.len());
        let (_, n) = cut_gear(
            &data[pos..end],
            p.min as usize,
            p.avg as usize,
            p.max as usize,
            ms,
            ml,
            ms << 1,
            ml << 1,
            gear,
            &gear_ls,
        );
        out.push(n.max(1));
        pos += n.max(1);
    }
    out
}

// ---------------------------------------------------------------------------
// Helpers for reading the committed repository.

fn repo_src() -> PathBuf {
    vectors_dir().join("repo")
}

/// Every file under `root`, as sorted relative paths.
fn list_files(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    out.sort();
    out
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(repo_src().join(rel)).unwrap()
}

/// A private copy of the vector repository and a cache directory.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let src = repo_src();
        for rel in list_files(&src) {
            let to = dir.path().join("repo").join(&rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(src.join(&rel), &to).unwrap();
        }
        Scratch { dir }
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    fn backend(&self) -> Arc<LocalBackend> {
        Arc::new(LocalBackend::new(self.root()))
    }
    fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }
    fn open(&self, cred: &Credential) -> larder::Result<Repository> {
        Repository::open(self.backend(), cred, &self.cache())
    }
}

fn identity(v: &Vectors) -> Credential {
    Credential::Identity(Box::new(
        age::x25519::Identity::from_str(&v.x25519_identity).unwrap(),
    ))
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn files_are_the_recorded_ones_and_named_by_their_hash() {
    let v = load_vectors();
    let got: Vec<FileVector> = list_files(&repo_src())
        .into_iter()
        .map(|p| {
            let b = read(&p);
            FileVector {
                size: b.len() as u64,
                blake3: blake3::hash(&b).to_hex().to_string(),
                path: p,
            }
        })
        .collect();
    assert_eq!(got, v.files);
    for f in &v.files {
        let name = f.path.rsplit('/').next().unwrap();
        match f.path.split('/').next().unwrap() {
            "config" => assert_eq!(f.path, "config"),
            "packs" => {
                assert_eq!(f.blake3, name, "{}", f.path);
                assert_eq!(f.path, format!("packs/{}/{}", &name[..2], name));
            }
            "keys" | "index" | "snapshots" | "locks" | "marks" | "dicts" => {
                assert_eq!(f.blake3, name, "{}", f.path);
                assert_eq!(f.path.matches('/').count(), 1);
            }
            other => panic!("unexpected top-level entry {other}"),
        }
    }
}

#[test]
fn derived_key_material_matches() {
    let v = load_vectors();
    let master = master_of(&v);
    let spec = spec_keys(&master);
    assert_eq!(hex::encode(spec.enc), v.derived.encryption_key);
    assert_eq!(hex::encode(spec.id_key), v.derived.blob_id_key);
    let fmt = |g: &[u64]| g.iter().map(|x| format!("{x:016x}")).collect::<Vec<_>>();
    assert_eq!(fmt(&spec.gear[..8]), v.derived.gear_first);
    assert_eq!(fmt(&spec.gear[248..]), v.derived.gear_last);
    let raw: Vec<u8> = spec.gear.iter().flat_map(|g| g.to_le_bytes()).collect();
    assert_eq!(
        blake3::hash(&raw).to_hex().as_str(),
        v.derived.gear_table_blake3
    );

    // The library derives the same table and blob ids.
    let keys = Keys::derive(&MasterKey::from_bytes(master));
    assert_eq!(keys.gear()[..], spec.gear[..]);
    assert!(!v.blob_ids.is_empty());
    for b in &v.blob_ids {
        let p = unhex(&b.plaintext_hex);
        assert_eq!(keys.blob_id(&p).to_hex(), b.id);
        assert_eq!(blake3::keyed_hash(&spec.id_key, &p).to_hex().as_str(), b.id);
        // Keyed: not the plain hash.
        assert_ne!(blake3::hash(&p).to_hex().as_str(), b.id);
    }
}

#[test]
fn chunker_cut_points_match() {
    let v = load_vectors();
    let c = &v.chunker;
    let params = ChunkerParams {
        min: c.min,
        avg: c.avg,
        max: c.max,
        level: c.level,
    };
    assert_eq!(params, PARAMS);
    let input = chunker_input();
    assert_eq!(input.len(), c.input_len);
    let (ms, ml) =
        fastcdc::v2020::select_masks(c.avg as usize, fastcdc::v2020::Normalization::Level1);
    assert_eq!(format!("{ms:016x}"), c.mask_s);
    assert_eq!(format!("{ml:016x}"), c.mask_l);
    let master = master_of(&v);
    let spec = spec_keys(&master);
    assert_eq!(spec_cut_all(&spec.gear, params, &input), c.lengths);
    let keys = Keys::derive(&MasterKey::from_bytes(master));
    let chunker = Chunker::new(params, keys.gear()).unwrap();
    assert_eq!(chunker.cut_all(&input), c.lengths);
    assert!(c.lengths.len() > 3, "the vector should have several cuts");
}

#[test]
fn opens_with_passphrase_and_identity() {
    let v = load_vectors();
    let cp = Scratch::new();
    let repo = cp.open(&Credential::passphrase(&v.passphrase)).unwrap();
    assert_eq!(hex::encode(repo.master().as_bytes()), v.master_key);
    let c = repo.config();
    assert_eq!(c.id.to_hex(), v.config.id);
    assert_eq!(
        c.chunker,
        ChunkerParams {
            min: v.config.min,
            avg: v.config.avg,
            max: v.config.max,
            level: v.config.level
        }
    );
    assert_eq!(c.compression_level, v.config.compression_level);
    assert_eq!(c.pack_size, v.config.pack_size);
    assert_eq!(c.created, v.config.created);
    let pass_key = v.keys.iter().find(|k| k.kind == "passphrase").unwrap();
    assert_eq!(repo.key_id().to_hex(), pass_key.id);
    drop(repo);

    let repo = cp.open(&identity(&v)).unwrap();
    assert_eq!(hex::encode(repo.master().as_bytes()), v.master_key);
    let x_key = v.keys.iter().find(|k| k.kind == "x25519").unwrap();
    assert_eq!(repo.key_id().to_hex(), x_key.id);
    drop(repo);

    assert!(matches!(
        cp.open(&Credential::passphrase("not the passphrase")),
        Err(Error::WrongPassword)
    ));
}

#[test]
fn key_files_decode() {
    let v = load_vectors();
    assert_eq!(v.keys.len(), 2);
    for k in &v.keys {
        let rel = format!("keys/{}", k.id);
        let bytes = read(&rel);
        // Library view.
        let (h, body) = larder::keys::parse_key_file(&rel, &bytes).unwrap();
        let kind = match h.kind {
            KeyKind::Passphrase => "passphrase",
            KeyKind::X25519 => "x25519",
        };
        assert_eq!(kind, k.kind);
        assert_eq!(
            (h.work_factor, h.scrypt_r, h.scrypt_p),
            (k.work_factor, k.scrypt_r, k.scrypt_p)
        );
        assert_eq!(h.created, k.created);
        assert_eq!(h.hostname, k.hostname);
        assert_eq!(h.username, k.username);
        assert_eq!(h.recipient, k.recipient);
        // Spec view: the header bytes are the hand-written postcard encoding.
        let kf = spec_split_key(&bytes);
        assert_eq!(hex::encode(kf.header), k.header_hex);
        assert_eq!(hex::encode(kf.clear), k.clear_hex);
        assert_eq!(pc_key_header(&h), kf.header);
        assert_eq!(spec_key_ad(&pc_key_header(&h)), kf.clear);
        assert_eq!(kf.body, body);
        assert_eq!(kf.body.len(), k.body_len);
        let plain = match h.kind {
            KeyKind::Passphrase => {
                assert_eq!(kf.kind(), 0);
                assert_eq!(
                    kf.scrypt(),
                    (WORK_FACTOR, SPEC_SCRYPT_R, SPEC_SCRYPT_P),
                    "N = 2^10 (the vector's), r = 8, p = 4"
                );
                assert_eq!(kf.body.len(), SPEC_PASS_BODY_LEN);
                let salt = &kf.body[..SPEC_SALT_LEN];
                let nonce = &kf.body[SPEC_SALT_LEN..SPEC_SALT_LEN + SPEC_NONCE_LEN];
                assert_eq!(Some(hex::encode(salt)), k.salt_hex);
                assert_eq!(Some(hex::encode(nonce)), k.nonce_hex);
                assert_eq!(
                    Some(hex::encode(spec_scrypt(&v.passphrase, salt, kf.scrypt()))),
                    k.scrypt_key_hex
                );
                // A wrong passphrase does not authenticate, nor does the
                // right one once any byte of the clear part has changed.
                assert_eq!(spec_open_passphrase_key("wrong", &bytes), None);
                let mut b = bytes.clone();
                let last = kf.clear.len() - 1;
                b[last] ^= 1;
                assert_eq!(spec_open_passphrase_key(&v.passphrase, &b), None);
                spec_open_passphrase_key(&v.passphrase, &bytes)
                    .expect("the passphrase opens the key")
                    .to_vec()
            }
            KeyKind::X25519 => {
                assert_eq!(kf.kind(), 1);
                assert_eq!(kf.scrypt(), (0, 0, 0));
                assert_eq!((k.salt_hex.as_ref(), k.nonce_hex.as_ref()), (None, None));
                assert_eq!(h.recipient, v.x25519_recipient);
                // The body is a binary age file wrapping the master key.
                assert!(kf.body.starts_with(b"age-encryption.org/v1\n"));
                let id = age::x25519::Identity::from_str(&v.x25519_identity).unwrap();
                age::decrypt(&id, kf.body).unwrap()
            }
        };
        assert_eq!(hex::encode(plain), v.master_key);
    }
}

#[test]
fn config_decodes() {
    let v = load_vectors();
    let bytes = read("config");
    let spec = spec_keys(&master_of(&v));
    let (compression, body) = spec_open_object(&spec, b'C', &bytes);
    assert_eq!(compression, v.config.compression);
    assert_eq!(hex::encode(&body), v.config.body_hex);
    let expected = Config {
        id: id(&v.config.id),
        chunker: ChunkerParams {
            min: v.config.min,
            avg: v.config.avg,
            max: v.config.max,
            level: v.config.level,
        },
        compression_level: v.config.compression_level,
        pack_size: v.config.pack_size,
        created: v.config.created,
    };
    assert_eq!(pc_config(&expected), body);
    let keys = Keys::derive(&MasterKey::from_bytes(master_of(&v)));
    let got: Config = object::open(&keys, ObjectType::Config, "config", &bytes).unwrap();
    assert_eq!(got, expected);
    let be = LocalBackend::new(repo_src());
    assert_eq!(
        larder::repository::read_config(&be, &keys).unwrap(),
        expected
    );
}

#[test]
fn pack_header_and_blobs_decode() {
    let v = load_vectors();
    let master = master_of(&v);
    let spec = spec_keys(&master);
    let keys = Keys::derive(&MasterKey::from_bytes(master));
    // One pack of data blobs, one of trees.
    assert_eq!(v.packs.len(), 2);
    let spec_dicts = spec_dictionaries(&spec, &v);
    let lib_dicts = lib_dictionaries(&keys, &v);
    let mut seen = 0;
    for p in &v.packs {
        let rel = format!("packs/{}/{}", &p.id[..2], p.id);
        let bytes = read(&rel);
        assert_eq!(bytes.len() as u64, p.size);
        let sp = spec_parse_pack(&spec, &bytes);
        assert_eq!(sp.header_offset, p.header_offset);
        assert_eq!(sp.header_len, p.header_len);
        assert_eq!(sp.entries, p.entries);
        // Blobs are laid out back to back from offset 0, then the header.
        let mut off = 0;
        for e in &p.entries {
            assert_eq!(e.offset, off);
            off += e.stored_len as u64;
        }
        assert_eq!(off, p.header_offset);
        assert_eq!(
            p.header_len as usize,
            4 + p.entries.len() * SPEC_ENTRY_LEN + 40
        );
        // The library reads the same entries.
        let lib: Vec<EntryVector> = pack::read_entries(&keys, &rel, &bytes)
            .unwrap()
            .iter()
            .map(entry_vector)
            .collect();
        assert_eq!(lib, p.entries);
        let (hoff, hlen) = pack::parse_trailer(&rel, p.size, &bytes[bytes.len() - 12..]).unwrap();
        assert_eq!((hoff, hlen), (p.header_offset, p.header_len));
        for e in &p.entries {
            let b = v.blobs.iter().find(|b| b.id == e.id).unwrap();
            assert_eq!(b.ty, e.ty);
            let plain = spec_open_blob(&spec, &spec_dicts, &bytes, e);
            assert_eq!(hex::encode(&plain), b.plaintext_hex, "{}", b.what);
            let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
            assert_eq!(
                pack::open_blob(&keys, &lib_dicts, "blob", &entry_of(e), s).unwrap(),
                plain
            );
            // A blob does not open under another type or id.
            let mut wrong = entry_of(e);
            wrong.ty = if wrong.ty == BlobType::Data {
                BlobType::Tree
            } else {
                BlobType::Data
            };
            assert!(pack::open_blob(&keys, &lib_dicts, "blob", &wrong, s).is_err());
            seen += 1;
        }
    }
    assert_eq!(seen, v.blobs.len());
    // Every compression mode is covered.
    let all = || v.packs.iter().flat_map(|p| &p.entries);
    for c in 0..=2 {
        assert!(all().any(|e| e.compression == c), "{c}");
    }
    assert!(
        all().all(|e| e.compression != 2 || e.ty == 0),
        "only data blobs use it"
    );
    // Without its dictionary, the dictionary-compressed blob does not open.
    let p = v
        .packs
        .iter()
        .find(|p| p.entries.iter().any(|e| e.compression == 2))
        .unwrap();
    let bytes = read(&format!("packs/{}/{}", &p.id[..2], p.id));
    let e = p.entries.iter().find(|e| e.compression == 2).unwrap();
    let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
    let err = pack::open_blob(
        &keys,
        &larder::dictionary::NoDictionaries,
        "blob",
        &entry_of(e),
        s,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("is not in the repository"),
        "{err}"
    );
}

/// The library's view of the recorded dictionaries.
fn lib_dictionaries(keys: &Keys, v: &Vectors) -> larder::dictionary::Dictionaries {
    let list = v
        .dicts
        .iter()
        .map(|d| {
            let rel = format!("dicts/{}", d.id);
            Arc::new(
                larder::dictionary::Dictionary::open(keys, &rel, id(&d.id), &read(&rel)).unwrap(),
            )
        })
        .collect();
    larder::dictionary::Dictionaries::new(list)
}

#[test]
fn dictionary_decodes() {
    let v = load_vectors();
    let master = master_of(&v);
    let spec = spec_keys(&master);
    let keys = Keys::derive(&MasterKey::from_bytes(master));
    assert_eq!(v.dicts.len(), 1);
    let d = &v.dicts[0];
    let bytes = read(&format!("dicts/{}", d.id));
    assert_eq!(Id::of_object(&bytes).to_hex(), d.id, "named by its hash");
    let (c, body) = spec_open_object(&spec, b'D', &bytes);
    assert_eq!((c, hex::encode(&body)), (d.compression, d.body_hex.clone()));
    let (zid, zstd) = spec_dictionary(&body);
    let lib = &lib_dictionaries(&keys, &v);
    let ld = &lib.all()[0];
    assert_eq!((ld.zstd_id(), ld.bytes()), (zid, &zstd[..]));
    assert_eq!(zid, dictionary_zstd_id(&zstd));
    // The library seals the same bytes to an object that opens the same.
    let (name, again) = larder::dictionary::Dictionary::seal(&keys, &zstd).unwrap();
    let (_, body2) = spec_open_object(&spec, b'D', &again);
    assert_eq!(body2, body);
    assert_eq!(name, Id::of_object(&again));
}

/// zstd's own reading of a dictionary's ID (independent of the spec reader).
fn dictionary_zstd_id(zstd: &[u8]) -> u32 {
    zstd::zstd_safe::get_dict_id_from_dict(zstd).map_or(0, |n| n.get())
}

#[test]
fn blobs_are_the_constructed_contents() {
    let v = load_vectors();
    let keys = Keys::derive(&MasterKey::from_bytes(master_of(&v)));
    let blob = |what: &str| v.blobs.iter().find(|b| b.what == what).unwrap();
    let hello = blob("hello.txt");
    let random = blob("random.bin");
    let docs = blob("tree docs");
    let root = blob("tree root");
    assert_eq!(unhex(&hello.plaintext_hex), hello_txt());
    assert_eq!(unhex(&random.plaintext_hex), random_bin());
    assert_eq!(keys.blob_id(&hello_txt()).to_hex(), hello.id);
    assert_eq!(keys.blob_id(&random_bin()).to_hex(), random.id);

    let dt = docs_tree();
    let dbytes = dt.encode().unwrap();
    assert_eq!(hex::encode(&dbytes), docs.plaintext_hex);
    assert_eq!(pc_tree_blob(&dt), dbytes);
    assert_eq!(keys.blob_id(&dbytes).to_hex(), docs.id);

    let rt = root_tree(id(&docs.id), id(&hello.id), id(&random.id));
    let rbytes = rt.encode().unwrap();
    assert_eq!(hex::encode(&rbytes), root.plaintext_hex);
    assert_eq!(pc_tree_blob(&rt), rbytes);
    assert_eq!(keys.blob_id(&rbytes).to_hex(), root.id);
    assert_eq!(Tree::decode("root", &rbytes).unwrap(), rt);
    // Raw byte order: "docs" < "hello.txt" < "random.bin"; "link" < "na\xefve".
    let names: Vec<&[u8]> = rt.nodes.iter().map(|n| n.name.as_slice()).collect();
    assert_eq!(names, [&b"docs"[..], b"hello.txt", b"random.bin"]);
    assert_eq!(dt.nodes[1].name, b"na\xefve");
    assert_eq!((docs.ty, root.ty, hello.ty, random.ty), (1, 1, 0, 0));
}

#[test]
fn index_snapshot_and_lock_decode() {
    let v = load_vectors();
    let master = master_of(&v);
    let spec = spec_keys(&master);
    let keys = Keys::derive(&MasterKey::from_bytes(master));
    let be = LocalBackend::new(repo_src());

    assert_eq!(v.index.len(), 1);
    for o in &v.index {
        let bytes = read(&format!("index/{}", o.id));
        let (c, body) = spec_open_object(&spec, b'I', &bytes);
        assert_eq!((c, hex::encode(&body)), (o.compression, o.body_hex.clone()));
        let expected = IndexSegment {
            packs: v
                .packs
                .iter()
                .map(|p| IndexPack {
                    id: id(&p.id),
                    size: p.size,
                    blobs: p.entries.iter().map(entry_of).collect(),
                })
                .collect(),
        };
        assert_eq!(pc_index(&expected), body);
        assert_eq!(
            larder::index::read_segment(&be, &keys, &o.id).unwrap(),
            expected
        );
    }

    let root = &v.blobs.iter().find(|b| b.what == "tree root").unwrap().id;
    assert_eq!(v.snapshots.len(), 1);
    for o in &v.snapshots {
        let bytes = read(&format!("snapshots/{}", o.id));
        let (c, body) = spec_open_object(&spec, b'S', &bytes);
        assert_eq!((c, hex::encode(&body)), (o.compression, o.body_hex.clone()));
        let expected = snapshot(id(root));
        assert_eq!(pc_snapshot(&expected), body);
        let got: Snapshot = object::open(&keys, ObjectType::Snapshot, "snapshot", &bytes).unwrap();
        assert_eq!(got, expected);
    }

    assert_eq!(v.locks.len(), 1);
    for o in &v.locks {
        let bytes = read(&format!("locks/{}", o.id));
        let (c, body) = spec_open_object(&spec, b'L', &bytes);
        assert_eq!((c, hex::encode(&body)), (o.compression, o.body_hex.clone()));
        assert_eq!(pc_lock(&lock_info()), body);
        let got: LockInfo = object::open(&keys, ObjectType::Lock, "lock", &bytes).unwrap();
        assert_eq!(got, lock_info());
        assert_eq!(got.lifetime(), std::time::Duration::from_secs(1800));
        // Another machine's lock: judged by its age, never by its pid.
        assert!(!larder::host::process_space().shares_pids_with(&got.space()));
    }
}

#[test]
fn deletion_marks_decode() {
    let v = load_vectors();
    let master = master_of(&v);
    let spec = spec_keys(&master);
    let keys = Keys::derive(&MasterKey::from_bytes(master));
    let be = LocalBackend::new(repo_src());

    // The plan first (its holders object names it), by the independent
    // reader: name = BLAKE3 of the bytes, type byte `M`, postcard body.
    assert_eq!(v.marks.len(), 2);
    let mut bodies = Vec::new();
    for o in &v.marks {
        let bytes = read(&format!("marks/{}", o.id));
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), o.id);
        let (c, body) = spec_open_object(&spec, b'M', &bytes);
        assert_eq!((c, hex::encode(&body)), (o.compression, o.body_hex.clone()));
        bodies.push((o.id.clone(), body));
    }
    let plan = bodies
        .iter()
        .find(|(_, b)| b.first() == Some(&0))
        .expect("a plan (variant 0)");
    let holders = bodies
        .iter()
        .find(|(_, b)| b.first() == Some(&1))
        .expect("a holders object (variant 1)");
    assert_eq!(pc_mark(&mark_plan()), plan.1);
    assert_eq!(pc_mark(&mark_holders(id(&plan.0))), holders.1);

    // The library reads the same values.
    assert_eq!(marks::read_mark(&be, &keys, &plan.0).unwrap(), mark_plan());
    assert_eq!(
        marks::read_mark(&be, &keys, &holders.0).unwrap(),
        mark_holders(id(&plan.0))
    );
    // A mark whose bytes do not hash to its name is refused, naming it.
    let cp = Scratch::new();
    let renamed = "ab".repeat(32);
    std::fs::copy(
        cp.root().join("marks").join(&plan.0),
        cp.root().join("marks").join(&renamed),
    )
    .unwrap();
    let e = marks::read_mark(&LocalBackend::new(cp.root()), &keys, &renamed).unwrap_err();
    assert!(e.to_string().contains(&renamed), "{e}");
}

#[test]
fn repository_reads_every_blob_and_snapshot() {
    let v = load_vectors();
    let cp = Scratch::new();
    let repo = cp.open(&Credential::passphrase(&v.passphrase)).unwrap();
    for b in &v.blobs {
        assert_eq!(
            hex::encode(repo.read_blob(&id(&b.id)).unwrap()),
            b.plaintext_hex,
            "{}",
            b.what
        );
    }
    let s = &v.snapshots[0];
    let snap = larder::snapshot::load(&repo, &s.id).unwrap();
    let root = &v.blobs.iter().find(|b| b.what == "tree root").unwrap().id;
    assert_eq!(snap, snapshot(id(root)));
    let report = larder::check::check(
        &repo,
        &larder::check::CheckOptions {
            read_data: true,
            subset: None,
        },
    )
    .unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(
        (
            report.packs,
            report.snapshots,
            report.trees,
            report.blobs_read
        ),
        (2, 1, 2, 5)
    );
}

/// The write side follows the spec too: what the library seals now, the
/// independent reader opens (the committed files only pin the read side).
#[test]
fn library_writes_what_the_spec_reads() {
    let v = load_vectors();
    let master = master_of(&v);
    let spec = spec_keys(&master);
    let mk = MasterKey::from_bytes(master);
    let keys = Keys::derive(&mk);

    // Sealed objects: both compression outcomes.
    let lock = lock_info();
    let sealed = object::seal(&keys, ObjectType::Lock, &lock).unwrap();
    assert_eq!(spec_open_object(&spec, b'L', &sealed).1, pc_lock(&lock));
    // Every mode, each as its byte (3, snapshot-changing, came later).
    use larder::lock::LockMode;
    for mode in [
        LockMode::Shared,
        LockMode::Exclusive,
        LockMode::Maintenance,
        LockMode::Snapshots,
    ] {
        let l = LockInfo {
            mode,
            ..lock_info()
        };
        let sealed = object::seal(&keys, ObjectType::Lock, &l).unwrap();
        let body = spec_open_object(&spec, b'L', &sealed).1;
        assert_eq!(body, pc_lock(&l));
        let got: LockInfo = object::open(&keys, ObjectType::Lock, "lock", &sealed).unwrap();
        assert_eq!(got.mode, mode);
    }
    // A mode byte past them is refused.
    let mut body = pc_lock(&lock);
    let at = body.len() - 17;
    body[at] = 4;
    assert!(object::decode::<LockInfo>("lock", &body).is_err());
    let seg = IndexSegment {
        packs: vec![IndexPack {
            id: Id([7; 32]),
            size: 1 << 20,
            blobs: (0..200u32)
                .map(|i| PackEntry {
                    ty: BlobType::Data,
                    id: keys.blob_id(&i.to_le_bytes()),
                    offset: i as u64 * 1000,
                    stored_len: 1000,
                    plain_len: 2000,
                    compression: 1,
                })
                .collect(),
        }],
    };
    let sealed = object::seal(&keys, ObjectType::Index, &seg).unwrap();
    let (c, body) = spec_open_object(&spec, b'I', &sealed);
    assert_eq!(c, 1, "a repetitive index compresses");
    assert_eq!(body, pc_index(&seg));

    // Packs.
    let mut comp = zstd::bulk::Compressor::new(3).unwrap();
    let mut w = PackWriter::default();
    let blobs = [
        (BlobType::Data, hello_txt()),
        (BlobType::Data, random_bin()),
        (BlobType::Tree, docs_tree().encode().unwrap()),
    ];
    for (ty, b) in &blobs {
        w.add(pack::prepare_blob(&keys, Some(&mut comp), *ty, keys.blob_id(b), b).unwrap())
            .unwrap();
    }
    let p = w.finish(&keys).unwrap();
    assert_eq!(p.id.to_hex(), blake3::hash(p.bytes()).to_hex().as_str());
    let sp = spec_parse_pack(&spec, p.bytes());
    assert_eq!(
        sp.entries,
        p.entries.iter().map(entry_vector).collect::<Vec<_>>()
    );
    for (e, (ty, b)) in sp.entries.iter().zip(&blobs) {
        assert_eq!(e.ty, *ty as u8);
        assert_eq!(&spec_open_blob(&spec, &[], p.bytes(), e), b);
    }

    // Key files: a passphrase key and an X25519 key.
    let kf = larder::keys::make_key_file(
        &mk,
        &NewKey::Passphrase {
            pass: PASSPHRASE.to_string().into(),
            work_factor: WORK_FACTOR,
        },
    )
    .unwrap();
    let parts = spec_split_key(&kf);
    let (h, _) = larder::keys::parse_key_file("k", &kf).unwrap();
    assert_eq!(pc_key_header(&h), parts.header);
    assert_eq!(parts.kind(), 0);
    assert_eq!(parts.scrypt(), (WORK_FACTOR, SPEC_SCRYPT_R, SPEC_SCRYPT_P));
    assert_eq!(parts.body.len(), SPEC_PASS_BODY_LEN);
    assert_eq!(spec_open_passphrase_key(PASSPHRASE, &kf), Some(master));
    assert_eq!(spec_open_passphrase_key("wrong", &kf), None);
    // The default parameters too (N = 2^15: 32 MiB, a fraction of a second).
    let kf = larder::keys::make_key_file(
        &mk,
        &NewKey::Passphrase {
            pass: PASSPHRASE.to_string().into(),
            work_factor: larder::keys::DEFAULT_WORK_FACTOR,
        },
    )
    .unwrap();
    assert_eq!(spec_split_key(&kf).scrypt(), (15, 8, 4));
    assert_eq!(spec_open_passphrase_key(PASSPHRASE, &kf), Some(master));

    let ident = age::x25519::Identity::generate();
    let kf = larder::keys::make_key_file(&mk, &NewKey::Recipient(ident.to_public())).unwrap();
    let parts = spec_split_key(&kf);
    let (h, _) = larder::keys::parse_key_file("k", &kf).unwrap();
    assert_eq!(pc_key_header(&h), parts.header);
    assert_eq!((parts.kind(), parts.scrypt()), (1, (0, 0, 0)));
    assert_eq!(h.recipient, ident.to_public().to_string());
    assert_eq!(age::decrypt(&ident, parts.body).unwrap(), master);
}

#[test]
fn unknown_versions_are_refused() {
    let v = load_vectors();
    let keys = Keys::derive(&MasterKey::from_bytes(master_of(&v)));

    // A newer config: refused before any key is tried, with a clear message.
    // A config may say 6 (a migrated repository, SPEC section 4): 7 is the
    // first version no larder of this format writes.
    let cp = Scratch::new();
    let cfg = cp.root().join("config");
    let mut b = std::fs::read(&cfg).unwrap();
    b[5] = SPEC_VERSION + 2;
    std::fs::write(&cfg, &b).unwrap();
    match cp.open(&Credential::passphrase("wrong on purpose")) {
        Err(
            e @ Error::UnsupportedVersion {
                found, supported, ..
            },
        ) if found == SPEC_VERSION as u32 + 2 && supported == SPEC_VERSION as u32 + 1 => {
            assert!(e.to_string().contains("upgrade larder"), "{e}");
        }
        Err(e) => panic!("expected UnsupportedVersion, got {e}"),
        Ok(_) => panic!("a config of a newer version was accepted"),
    }

    // Every other sealed object, a key file and a pack trailer.
    let one = |dir: &str| {
        v.files
            .iter()
            .find(|f| f.path.starts_with(dir))
            .unwrap()
            .path
            .clone()
    };
    for (dir, ty) in [
        ("index/", ObjectType::Index),
        ("snapshots/", ObjectType::Snapshot),
        ("locks/", ObjectType::Lock),
    ] {
        let mut b = read(&one(dir));
        b[5] = SPEC_VERSION + 1;
        let r = object::open::<serde::de::IgnoredAny>(&keys, ty, dir, &b);
        assert!(
            matches!(r, Err(Error::UnsupportedVersion { found, .. }) if found == SPEC_VERSION as u32 + 1),
            "{dir}"
        );
    }
    let mut k = read(&one("keys/"));
    k[5] = SPEC_VERSION + 1;
    assert!(matches!(
        larder::keys::parse_key_file("k", &k),
        Err(Error::UnsupportedVersion { found, .. }) if found == SPEC_VERSION as u32 + 1
    ));
    let mut p = read(&one("packs/"));
    let n = p.len();
    p[n - 2] = SPEC_VERSION + 1;
    assert!(matches!(
        pack::parse_trailer("p", n as u64, &p[n - 12..]),
        Err(Error::UnsupportedVersion { found, .. }) if found == SPEC_VERSION as u32 + 1
    ));
    // Tree blobs carry their own version byte.
    let mut t = docs_tree().encode().unwrap();
    t[0] = 2;
    assert!(Tree::decode("t", &t).is_err());
}

// ---------------------------------------------------------------------------
// The generator (run by hand; see the module documentation).

#[test]
#[ignore = "writes repo-format/vectors; run by hand after a format change"]
fn generate_vectors() {
    let out = vectors_dir();
    let root = out.join("repo");
    if root.exists() {
        std::fs::remove_dir_all(&root).unwrap();
    }
    std::fs::create_dir_all(&out).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let backend = Arc::new(LocalBackend::new(&root));
    let opts = InitOptions {
        chunker: PARAMS,
        compression_level: 3,
        pack_size: 1 << 20,
    };
    let repo = Repository::init(
        backend.clone(),
        &NewKey::Passphrase {
            pass: PASSPHRASE.to_string().into(),
            work_factor: WORK_FACTOR,
        },
        &opts,
        cache.path(),
    )
    .unwrap();
    let ident = age::x25519::Identity::generate();
    repo.add_key(&NewKey::Recipient(ident.to_public())).unwrap();

    // Blobs: two data blobs, then the trees that refer to them.
    let mut packer = larder::packer::Packer::new(&repo).unwrap();
    let (hello, _) = packer.add(BlobType::Data, &hello_txt()).unwrap();
    let (random, _) = packer.add(BlobType::Data, &random_bin()).unwrap();
    // A dictionary, trained from fixed samples; the data blob after it is
    // compressed with it (compression 2).
    let samples: Vec<Vec<u8>> = (0..64).map(dictionary_sample).collect();
    let sizes: Vec<usize> = samples.iter().map(|s| s.len()).collect();
    let zd = larder::dictionary::train(&samples.concat(), &sizes).unwrap();
    repo.add_dictionary(zd).unwrap();
    let (page, _) = packer.add(BlobType::Data, &page_html()).unwrap();
    let docs_bytes = docs_tree().encode().unwrap();
    let (docs, _) = packer.add(BlobType::Tree, &docs_bytes).unwrap();
    let root_bytes = root_tree(docs, hello, random).encode().unwrap();
    let (root_id, _) = packer.add(BlobType::Tree, &root_bytes).unwrap();
    packer.finish().unwrap();
    let snap_id = larder::snapshot::save(&repo, &snapshot(root_id)).unwrap();
    let lock_bytes = object::seal(repo.keys(), ObjectType::Lock, &lock_info()).unwrap();
    let lock_id = Id::of_object(&lock_bytes);
    backend
        .write(Kind::Lock, &lock_id.to_hex(), &lock_bytes)
        .unwrap();

    let plan_id = marks::write_mark(backend.as_ref(), repo.keys(), &mark_plan()).unwrap();
    marks::write_mark(backend.as_ref(), repo.keys(), &mark_holders(plan_id)).unwrap();

    let master = *repo.master().as_bytes();
    let keys = repo.keys();
    let spec = spec_keys(&master);
    let mut raw = Vec::new();
    for g in keys.gear() {
        raw.extend_from_slice(&g.to_le_bytes());
    }
    let fmt = |g: &[u64]| g.iter().map(|x| format!("{x:016x}")).collect::<Vec<_>>();
    let (ms, ml) =
        fastcdc::v2020::select_masks(PARAMS.avg as usize, fastcdc::v2020::Normalization::Level1);

    let body_of = |ty: u8, bytes: &[u8]| {
        let (c, body) = spec_open_object(&spec, ty, bytes);
        (c, hex::encode(body))
    };
    let cfg_bytes = backend
        .read_bounded(Kind::Config, "config", 1 << 20)
        .unwrap();
    let (cfg_c, cfg_body) = body_of(b'C', &cfg_bytes);
    let c = repo.config();

    let mut key_vectors: Vec<KeyVector> = backend
        .list(Kind::Key)
        .unwrap()
        .into_iter()
        .map(|e| {
            let bytes = backend.read_bounded(Kind::Key, &e.name, 1 << 20).unwrap();
            let (h, _) = larder::keys::parse_key_file(&e.name, &bytes).unwrap();
            let kf = spec_split_key(&bytes);
            let pass = (h.kind == KeyKind::Passphrase).then(|| {
                let salt = &kf.body[..SPEC_SALT_LEN];
                let nonce = &kf.body[SPEC_SALT_LEN..SPEC_SALT_LEN + SPEC_NONCE_LEN];
                let key = spec_scrypt(PASSPHRASE, salt, kf.scrypt());
                (hex::encode(salt), hex::encode(nonce), hex::encode(key))
            });
            KeyVector {
                id: e.name.clone(),
                kind: match h.kind {
                    KeyKind::Passphrase => "passphrase".into(),
                    KeyKind::X25519 => "x25519".into(),
                },
                work_factor: h.work_factor,
                scrypt_r: h.scrypt_r,
                scrypt_p: h.scrypt_p,
                created: h.created,
                hostname: h.hostname.clone(),
                username: h.username.clone(),
                recipient: h.recipient.clone(),
                header_hex: hex::encode(kf.header),
                clear_hex: hex::encode(kf.clear),
                body_len: kf.body.len(),
                salt_hex: pass.as_ref().map(|p| p.0.clone()),
                nonce_hex: pass.as_ref().map(|p| p.1.clone()),
                scrypt_key_hex: pass.map(|p| p.2),
            }
        })
        .collect();
    key_vectors.sort_by(|a, b| a.id.cmp(&b.id));

    let packs: Vec<PackVector> = backend
        .list(Kind::Pack)
        .unwrap()
        .into_iter()
        .map(|e| {
            let bytes = backend.read_bounded(Kind::Pack, &e.name, e.size).unwrap();
            let sp = spec_parse_pack(&spec, &bytes);
            PackVector {
                id: e.name,
                size: bytes.len() as u64,
                header_offset: sp.header_offset,
                header_len: sp.header_len,
                entries: sp.entries,
            }
        })
        .collect();
    let blobs = vec![
        BlobVector {
            id: hello.to_hex(),
            ty: 0,
            what: "hello.txt".into(),
            plaintext_hex: hex::encode(hello_txt()),
        },
        BlobVector {
            id: random.to_hex(),
            ty: 0,
            what: "random.bin".into(),
            plaintext_hex: hex::encode(random_bin()),
        },
        BlobVector {
            id: page.to_hex(),
            ty: 0,
            what: "page.html".into(),
            plaintext_hex: hex::encode(page_html()),
        },
        BlobVector {
            id: docs.to_hex(),
            ty: 1,
            what: "tree docs".into(),
            plaintext_hex: hex::encode(&docs_bytes),
        },
        BlobVector {
            id: root_id.to_hex(),
            ty: 1,
            what: "tree root".into(),
            plaintext_hex: hex::encode(&root_bytes),
        },
    ];
    let objects = |kind: Kind, ty: u8| -> Vec<ObjectVector> {
        let mut v: Vec<ObjectVector> = backend
            .list(kind)
            .unwrap()
            .into_iter()
            .map(|e| {
                let (compression, body_hex) =
                    body_of(ty, &backend.read_bounded(kind, &e.name, e.size).unwrap());
                ObjectVector {
                    id: e.name,
                    compression,
                    body_hex,
                }
            })
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    };
    let index = objects(Kind::Index, b'I');
    let snapshots = objects(Kind::Snapshot, b'S');
    assert_eq!(snapshots[0].id, snap_id.to_hex());
    let locks = objects(Kind::Lock, b'L');
    let marks = objects(Kind::Mark, b'M');
    let dicts = objects(Kind::Dict, b'D');
    let plaintexts: [&[u8]; 3] = [
        b"",
        b"larder",
        b"The quick brown fox jumps over the lazy dog",
    ];
    let blob_ids = plaintexts
        .iter()
        .map(|p| BlobIdVector {
            plaintext_hex: hex::encode(p),
            id: keys.blob_id(p).to_hex(),
        })
        .collect();
    let chunker = Chunker::new(PARAMS, keys.gear()).unwrap();
    let input = chunker_input();
    let files = list_files(&root)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(root.join(&p)).unwrap();
            FileVector {
                size: b.len() as u64,
                blake3: blake3::hash(&b).to_hex().to_string(),
                path: p,
            }
        })
        .collect();
    let v = Vectors {
        comment: vec![
            format!(
                "larder repository format version {} test vectors; see ../SPEC.md.",
                object::FORMAT_VERSION
            ),
            "Written by `cargo test --release --test it vectors::generate_vectors -- --ignored` (tests/it/vectors.rs).".into(),
            "Byte strings are lowercase hex; u64 gear entries and masks are 16-digit hex numbers.".into(),
            "keys: header_hex is the postcard KeyHeader, clear_hex everything before the body (a passphrase key's associated data); for the passphrase key, scrypt_key_hex is scrypt(passphrase, salt, 2^work_factor, scrypt_r, scrypt_p, 32 bytes), the XChaCha20-Poly1305 key that seals the master key under nonce_hex.".into(),
            "body_hex is the postcard body of a sealed object after unsealing and decompression.".into(),
            "The snapshot, trees, lock and deletion marks hold fixed made-up values (time 2026-01-01T00:00:00Z); the plan marks a made-up pack that is not in the repository.".into(),
            "dicts: the dictionary was trained by zstd from 64 made-up pages; blob page.html is compressed with it (compression 2), hello.txt without (compression 1).".into(),
        ],
        format_version: object::FORMAT_VERSION,
        passphrase: PASSPHRASE.into(),
        x25519_identity: {
            use age::secrecy::ExposeSecret;
            ident.to_string().expose_secret().to_string()
        },
        x25519_recipient: ident.to_public().to_string(),
        master_key: hex::encode(master),
        derived: Derived {
            encryption_key: hex::encode(spec.enc),
            blob_id_key: hex::encode(spec.id_key),
            gear_first: fmt(&keys.gear()[..8]),
            gear_last: fmt(&keys.gear()[248..]),
            gear_table_blake3: blake3::hash(&raw).to_hex().to_string(),
        },
        blob_ids,
        chunker: ChunkerVector {
            input: format!(
                "the first {CHUNKER_INPUT_LEN} bytes of the BLAKE3 XOF (unkeyed) of the ASCII string {:?}",
                String::from_utf8_lossy(CHUNKER_LABEL)
            ),
            input_len: input.len(),
            min: PARAMS.min,
            avg: PARAMS.avg,
            max: PARAMS.max,
            level: PARAMS.level,
            mask_s: format!("{ms:016x}"),
            mask_l: format!("{ml:016x}"),
            lengths: chunker.cut_all(&input),
        },
        config: ConfigVector {
            id: c.id.to_hex(),
            min: c.chunker.min,
            avg: c.chunker.avg,
            max: c.chunker.max,
            level: c.chunker.level,
            compression_level: c.compression_level,
            pack_size: c.pack_size,
            created: c.created,
            compression: cfg_c,
            body_hex: cfg_body,
        },
        keys: key_vectors,
        packs,
        blobs,
        index,
        snapshots,
        locks,
        marks,
        dicts,
        files,
    };
    let mut text = serde_json::to_string_pretty(&v).unwrap();
    text.push('\n');
    std::fs::write(out.join("vectors.json"), text).unwrap();
}
