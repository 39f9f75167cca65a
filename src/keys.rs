//! Key files: the master key wrapped once per passphrase (scrypt and
//! XChaCha20-Poly1305) or per X25519 recipient (age), under `keys/<id>`.
//!
//! Layout (see `repo-format/SPEC.md`): `"LRDR" | 'K' | version | header_len:
//! u32 LE | header (postcard KeyHeader) | body`. The clear header says which
//! kind of key it is, its scrypt parameters and who made it. The body of a
//! passphrase key is `salt (32) | nonce (24) | sealed master key (48)`, sealed
//! under scrypt(passphrase, salt) with everything before the body as
//! associated data; that of an X25519 key is an age file.
//!
//! Opening is defensive: a key file that cannot be read or parsed is skipped
//! with a warning, and at most [`MAX_KEYS_TRIED`] key files of the
//! credential's kind are tried (a passphrase attempt is a scrypt run);
//! [`add_key`] never makes more than that.
//!
//! Passphrases do not use age's scrypt recipient because it fixes r = 8 and
//! p = 1: its one knob, N, ties memory to time, and restic's half second
//! would cost 128 MiB. Here N = 2^15 (32 MiB, what restic uses) and p = 4
//! (4/3 of restic's work).

use crate::backend::{Backend, Kind};
use crate::crypto::MasterKey;
use crate::error::{Error, Result};
use crate::host::{hostname, now_secs, username};
use crate::id::Id;
use crate::object::{self, HEADER_LEN, ObjectType};
use age::secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Default scrypt work factor (log2 N) for new passphrase keys. With r = 8
/// and p = 4 a key takes 32 MiB and about as long to open as restic's
/// calibrated key (N = 2^15, r = 8, p = 3) on the reference machine.
pub const DEFAULT_WORK_FACTOR: u8 = 15;
/// scrypt block size r of new passphrase keys.
pub const SCRYPT_R: u8 = 8;
/// scrypt parallelism p of new passphrase keys (computed one after another,
/// so memory stays that of one).
pub const SCRYPT_P: u8 = 4;
/// The largest work factor accepted when creating a key.
pub const MAX_WORK_FACTOR: u8 = 18;
/// The smallest work factor accepted when creating a key (tests use this).
pub const MIN_WORK_FACTOR: u8 = 10;
/// The environment variable that must be `1` for the CLI to make a key
/// weaker than [`DEFAULT_WORK_FACTOR`] (see [`check_new_work_factor`]).
pub const INSECURE_TEST_KDF_VAR: &str = "LARDER_INSECURE_TEST_KDF";
/// The most key files of the credential's kind (passphrase or X25519) one
/// open tries, each a scrypt run of up to `MAX_SCRYPT_WORK` for a passphrase.
/// [`add_key`] refuses to make more keys of a kind than this, so only key
/// files larder did not write can push a genuine key past it.
pub const MAX_KEYS_TRIED: usize = 20;
/// What a reader accepts, so a malicious key file cannot make us spend
/// unbounded memory or time: scrypt memory (128 * r * N bytes) and work
/// (N * r * p block operations).
const MAX_SCRYPT_MEMORY: u64 = 256 << 20;
const MAX_SCRYPT_WORK: u64 = 1 << 26;
/// Body of a passphrase key: salt, nonce, sealed 32-byte master key.
const SALT_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const PASS_BODY_LEN: usize = SALT_LEN + NONCE_LEN + 32 + 16;
const MAX_KEY_HEADER: usize = 64 << 10;
const MAX_KEY_FILE: usize = 1 << 20;

/// What opens a key file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyKind {
    Passphrase,
    X25519,
}

impl KeyKind {
    /// Its name in messages.
    pub fn label(self) -> &'static str {
        match self {
            KeyKind::Passphrase => "passphrase",
            KeyKind::X25519 => "X25519",
        }
    }
}

/// The clear header of a key file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyHeader {
    pub kind: KeyKind,
    /// scrypt log2(N) for passphrase keys, 0 otherwise.
    pub work_factor: u8,
    /// scrypt r for passphrase keys, 0 otherwise.
    pub scrypt_r: u8,
    /// scrypt p for passphrase keys, 0 otherwise.
    pub scrypt_p: u8,
    /// Creation time, seconds since the Unix epoch.
    pub created: i64,
    pub hostname: String,
    pub username: String,
    /// The `age1...` recipient for X25519 keys, empty otherwise.
    pub recipient: String,
}

/// Something that can open a key file.
pub enum Credential {
    Passphrase(SecretString),
    Identity(Box<age::x25519::Identity>),
}

impl Credential {
    /// A passphrase credential.
    pub fn passphrase(p: impl Into<String>) -> Self {
        Credential::Passphrase(SecretString::from(p.into()))
    }

    /// Reads an age identity file (`AGE-SECRET-KEY-1...`, comments allowed).
    pub fn identity_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("AGE-SECRET-KEY-"))
            .ok_or_else(|| {
                Error::Usage(format!("{}: no AGE-SECRET-KEY line found", path.display()))
            })?;
        let id = age::x25519::Identity::from_str(line)
            .map_err(|e| Error::Usage(format!("{}: invalid age identity: {e}", path.display())))?;
        Ok(Credential::Identity(Box::new(id)))
    }

    /// The kind of key file this credential opens.
    pub fn kind(&self) -> KeyKind {
        match self {
            Credential::Passphrase(_) => KeyKind::Passphrase,
            Credential::Identity(_) => KeyKind::X25519,
        }
    }
}

/// How to wrap the master key in a new key file.
pub enum NewKey {
    Passphrase { pass: SecretString, work_factor: u8 },
    Recipient(age::x25519::Recipient),
}

impl NewKey {
    /// The kind of key file it makes.
    pub fn kind(&self) -> KeyKind {
        match self {
            NewKey::Passphrase { .. } => KeyKind::Passphrase,
            NewKey::Recipient(_) => KeyKind::X25519,
        }
    }
}

/// Checks the work factor asked for a new passphrase key by the
/// `LARDER_KDF_WORK_FACTOR` knob: one below [`DEFAULT_WORK_FACTOR`] makes a
/// key that is cheaper to guess, so it is refused unless `weak_allowed` (the
/// CLI sets it from [`INSECURE_TEST_KDF_VAR`], which only tests set).
pub fn check_new_work_factor(work_factor: u8, weak_allowed: bool) -> Result<u8> {
    if work_factor < DEFAULT_WORK_FACTOR && !weak_allowed {
        return Err(Error::Usage(format!(
            "scrypt work factor {work_factor} (--kdf-work-factor or LARDER_KDF_WORK_FACTOR) is \
             below the default {DEFAULT_WORK_FACTOR} and would make a key that is cheaper to \
             guess; the knob exists for tests: set {INSECURE_TEST_KDF_VAR}=1 as well to use it"
        )));
    }
    Ok(work_factor)
}

/// A key file as listed by `key list`.
#[derive(Clone, Debug, Serialize)]
pub struct KeyInfo {
    pub id: String,
    pub kind: KeyKind,
    pub work_factor: u8,
    pub created: i64,
    pub hostname: String,
    pub username: String,
    pub recipient: String,
}

/// A key file `key list` could not read or parse, and why.
#[derive(Clone, Debug, Serialize)]
pub struct UnreadableKey {
    pub id: String,
    pub error: String,
}

/// What `key list` shows: the readable key files (oldest first) and the
/// unreadable ones (by name).
#[derive(Clone, Debug, Default)]
pub struct KeyList {
    pub keys: Vec<KeyInfo>,
    pub unreadable: Vec<UnreadableKey>,
}

/// The key that wraps the master key of a passphrase key file.
fn passphrase_key(
    what: &str,
    pass: &SecretString,
    salt: &[u8],
    h: &KeyHeader,
) -> Result<chacha20poly1305::Key> {
    // The format keeps RFC 7914's bound N < 2^(16 r) (repo-format/SPEC.md),
    // which the scrypt crate stopped checking in 0.12.
    if u32::from(h.work_factor) >= 16 * u32::from(h.scrypt_r) {
        return Err(Error::corrupt(
            what,
            format!(
                "scrypt parameters: N = 2^{} is not below 2^(16 r) for r = {}",
                h.work_factor, h.scrypt_r
            ),
        ));
    }
    let params = scrypt::Params::new(h.work_factor, h.scrypt_r as u32, h.scrypt_p as u32)
        .map_err(|e| Error::corrupt(what, format!("scrypt parameters: {e}")))?;
    let mut out = [0u8; 32];
    scrypt::scrypt(pass.expose_secret().as_bytes(), salt, &params, &mut out)
        .map_err(|e| Error::corrupt(what, format!("scrypt: {e}")))?;
    Ok(out.into())
}

/// The clear part of a key file: magic, type, version, header length and
/// header (the associated data of a passphrase key's seal).
fn clear_part(header: &KeyHeader) -> Result<Vec<u8>> {
    let h = object::encode(header)?;
    let mut out = object::header(ObjectType::Key).to_vec();
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    Ok(out)
}

/// Who a key file says made it (`key list` shows it): this machine's host
/// and user, or what `key add --host/--user` gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLabel {
    pub hostname: String,
    pub username: String,
}

/// The longest host or user name a key file is given.
pub const MAX_LABEL_LEN: usize = 255;

impl KeyLabel {
    /// This process's host and user.
    pub fn this_process() -> KeyLabel {
        KeyLabel {
            hostname: hostname(),
            username: username(),
        }
    }

    /// This process's host and user, each replaced by the one given;
    /// one longer than [`MAX_LABEL_LEN`] bytes, or holding a control
    /// character, is refused.
    pub fn given(host: Option<&str>, user: Option<&str>) -> Result<KeyLabel> {
        let check = |flag: &str, v: &str| {
            if v.len() > MAX_LABEL_LEN || v.chars().any(char::is_control) {
                return Err(Error::Usage(format!(
                    "{flag} {v:?}: at most {MAX_LABEL_LEN} bytes, no control characters"
                )));
            }
            Ok(v.to_string())
        };
        let here = KeyLabel::this_process();
        Ok(KeyLabel {
            hostname: host.map_or(Ok(here.hostname), |h| check("--host", h))?,
            username: user.map_or(Ok(here.username), |u| check("--user", u))?,
        })
    }
}

/// Wraps `master` into a new key file's bytes, labelled as made here.
pub fn make_key_file(master: &MasterKey, new: &NewKey) -> Result<Vec<u8>> {
    make_key_file_as(master, new, &KeyLabel::this_process())
}

/// Wraps `master` into a new key file's bytes, labelled `label`.
pub fn make_key_file_as(master: &MasterKey, new: &NewKey, label: &KeyLabel) -> Result<Vec<u8>> {
    use chacha20poly1305::aead::{Aead, KeyInit, Payload};
    match new {
        NewKey::Passphrase { pass, work_factor } => {
            if !(MIN_WORK_FACTOR..=MAX_WORK_FACTOR).contains(work_factor) {
                return Err(Error::Usage(format!(
                    "scrypt work factor {work_factor} outside {MIN_WORK_FACTOR}..={MAX_WORK_FACTOR}"
                )));
            }
            let header = KeyHeader {
                kind: KeyKind::Passphrase,
                work_factor: *work_factor,
                scrypt_r: SCRYPT_R,
                scrypt_p: SCRYPT_P,
                created: now_secs(),
                hostname: label.hostname.clone(),
                username: label.username.clone(),
                recipient: String::new(),
            };
            let mut out = clear_part(&header)?;
            let mut salt = [0u8; SALT_LEN];
            let mut nonce = [0u8; NONCE_LEN];
            crate::crypto::fill_random(&mut salt)?;
            crate::crypto::fill_random(&mut nonce)?;
            let key = passphrase_key("new key", pass, &salt, &header)?;
            let sealed = chacha20poly1305::XChaCha20Poly1305::new(&key)
                .encrypt(
                    (&nonce).into(),
                    Payload {
                        msg: master.as_bytes(),
                        aad: &out,
                    },
                )
                .map_err(|_| Error::internal("cannot wrap the master key"))?;
            out.extend_from_slice(&salt);
            out.extend_from_slice(&nonce);
            out.extend_from_slice(&sealed);
            Ok(out)
        }
        NewKey::Recipient(r) => {
            let ct = age::encrypt(r, master.as_bytes())
                .map_err(|e| Error::internal(format!("cannot wrap the master key: {e}")))?;
            let header = KeyHeader {
                kind: KeyKind::X25519,
                work_factor: 0,
                scrypt_r: 0,
                scrypt_p: 0,
                created: now_secs(),
                hostname: label.hostname.clone(),
                username: label.username.clone(),
                recipient: r.to_string(),
            };
            let mut out = clear_part(&header)?;
            out.extend_from_slice(&ct);
            Ok(out)
        }
    }
}

/// Splits a key file into its header, its clear part (magic through
/// header) and its body, bounding sizes and scrypt costs.
pub fn parse_key_file<'a>(what: &str, bytes: &'a [u8]) -> Result<(KeyHeader, &'a [u8])> {
    parse_parts(what, bytes).map(|(h, _, body)| (h, body))
}

fn parse_parts<'a>(what: &str, bytes: &'a [u8]) -> Result<(KeyHeader, &'a [u8], &'a [u8])> {
    if bytes.len() > MAX_KEY_FILE {
        return Err(Error::corrupt(what, "key file larger than 1 MiB"));
    }
    object::check_header(what, ObjectType::Key, bytes)?;
    let rest = &bytes[HEADER_LEN..];
    if rest.len() < 4 {
        return Err(Error::corrupt(
            what,
            "key file truncated before its header length",
        ));
    }
    let hl = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    if hl > MAX_KEY_HEADER || hl > rest.len() - 4 {
        return Err(Error::corrupt(
            what,
            format!("key header length {hl} is impossible"),
        ));
    }
    let header: KeyHeader = object::decode(what, &rest[4..4 + hl])?;
    let clear = &bytes[..HEADER_LEN + 4 + hl];
    let body = &rest[4 + hl..];
    if header.kind == KeyKind::Passphrase {
        let (n, r, p) = (header.work_factor, header.scrypt_r, header.scrypt_p);
        let memory = 128u64 << n.min(63) as u64;
        if n == 0
            || n > 40
            || r == 0
            || p == 0
            || memory.saturating_mul(r as u64) > MAX_SCRYPT_MEMORY
            || (1u64 << n).saturating_mul(r as u64 * p as u64) > MAX_SCRYPT_WORK
        {
            return Err(Error::corrupt(
                what,
                format!("scrypt parameters N = 2^{n}, r = {r}, p = {p} are outside the limits"),
            ));
        }
        if body.len() != PASS_BODY_LEN {
            return Err(Error::corrupt(
                what,
                format!(
                    "passphrase key body of {} bytes, not {PASS_BODY_LEN}",
                    body.len()
                ),
            ));
        }
    }
    Ok((header, clear, body))
}

/// Tries to unwrap the master key from one key file with `cred`.
/// `Ok(None)` means this credential does not open this key.
pub fn try_open(what: &str, bytes: &[u8], cred: &Credential) -> Result<Option<MasterKey>> {
    let (header, clear, body) = parse_parts(what, bytes)?;
    open_parts(what, &header, clear, body, cred)
}

/// [`try_open`] on a parsed key file.
fn open_parts(
    what: &str,
    header: &KeyHeader,
    clear: &[u8],
    body: &[u8],
    cred: &Credential,
) -> Result<Option<MasterKey>> {
    use chacha20poly1305::aead::{Aead, KeyInit, Payload};
    let plain = match (cred, header.kind) {
        (Credential::Passphrase(p), KeyKind::Passphrase) => {
            let (salt, rest) = body.split_at(SALT_LEN);
            let (nonce, sealed) = rest.split_at(NONCE_LEN);
            let key = passphrase_key(what, p, salt, header)?;
            let nonce = chacha20poly1305::XNonce::try_from(nonce)
                .map_err(|_| Error::corrupt(what, "passphrase key nonce of the wrong length"))?;
            chacha20poly1305::XChaCha20Poly1305::new(&key)
                .decrypt(
                    &nonce,
                    Payload {
                        msg: sealed,
                        aad: clear,
                    },
                )
                .ok()
        }
        (Credential::Identity(i), KeyKind::X25519) => age::decrypt(i.as_ref(), body).ok(),
        _ => return Ok(None),
    };
    match plain {
        Some(p) if p.len() == 32 => {
            let mut k = [0u8; 32];
            k.copy_from_slice(&p);
            Ok(Some(MasterKey::from_bytes(k)))
        }
        Some(_) => Err(Error::corrupt(what, "wrapped master key is not 32 bytes")),
        None => Ok(None),
    }
}

/// Writes a new key file and returns its id. Refuses to make more than
/// [`MAX_KEYS_TRIED`] keys of one kind, which opening would not all try.
pub fn add_key(backend: &dyn Backend, master: &MasterKey, new: &NewKey) -> Result<Id> {
    add_key_as(backend, master, new, &KeyLabel::this_process())
}

/// [`add_key`], the key file labelled `label`.
pub fn add_key_as(
    backend: &dyn Backend,
    master: &MasterKey,
    new: &NewKey,
    label: &KeyLabel,
) -> Result<Id> {
    let kind = new.kind();
    let have = list_keys(backend)?
        .keys
        .iter()
        .filter(|k| k.kind == kind)
        .count();
    if have >= MAX_KEYS_TRIED {
        return Err(Error::Usage(format!(
            "the repository already has {have} {} keys, the most that opening it tries; \
             remove one first (`larder key remove`)",
            kind.label()
        )));
    }
    let bytes = make_key_file_as(master, new, label)?;
    let id = Id::of_object(&bytes);
    backend.write(Kind::Key, &id.to_hex(), &bytes)?;
    Ok(id)
}

/// Reads key file `name` (bounded), checking first that its name is an id.
fn read_key_file(backend: &dyn Backend, name: &str) -> Result<(Id, Vec<u8>)> {
    let what = Kind::Key.path(name);
    let id = Id::from_hex(name).map_err(|_| Error::corrupt(&what, "name is not a key id"))?;
    Ok((
        id,
        backend.read_bounded(Kind::Key, name, MAX_KEY_FILE as u64)?,
    ))
}

/// Finds a key file that `cred` opens and whose master key `accept` takes
/// (the repository's config opens with it): returns its id, the master key
/// and what `accept` returned. Key files are tried in name order. One that
/// cannot be read, parsed or opened is skipped, with a line in `warnings`
/// naming it, so a damaged or planted file never locks out the others. So
/// is one that opens but wraps a master key `accept` refuses: a key left
/// by an `init` that lost a race to another, or planted with a known
/// passphrase. If every key that opened was refused, the first refusal is
/// the error (a damaged config says so, not "wrong password"). At most
/// [`MAX_KEYS_TRIED`] key files of the credential's kind are tried; then
/// the error says so.
pub fn find_key<T>(
    backend: &dyn Backend,
    cred: &Credential,
    warnings: &mut Vec<String>,
    accept: impl Fn(&MasterKey) -> Result<T>,
) -> Result<(Id, MasterKey, T)> {
    let mut list = backend.list(Kind::Key)?;
    list.sort_by(|a, b| a.name.cmp(&b.name));
    let wanted = cred.kind();
    let mut tried = 0;
    let mut refused: Option<Error> = None;
    let mut skip = |e: Error| warnings.push(format!("{e}; key file skipped"));
    for (i, e) in list.iter().enumerate() {
        let what = Kind::Key.path(&e.name);
        let (id, bytes) = match read_key_file(backend, &e.name) {
            Ok(k) => k,
            // Removed since listed (`key passwd` or `key remove` beside): not a problem.
            Err(e) if e.is_not_found() => continue,
            Err(err) => {
                skip(err);
                continue;
            }
        };
        let (header, clear, body) = match parse_parts(&what, &bytes) {
            Ok(p) => p,
            Err(err) => {
                skip(err);
                continue;
            }
        };
        if header.kind != wanted {
            continue;
        }
        if tried == MAX_KEYS_TRIED {
            return Err(Error::corrupt(
                "keys",
                format!(
                    "tried {tried} {} key files, the most one open tries, and none opened; \
                     {} more key file(s) were not tried. larder never writes more than \
                     {MAX_KEYS_TRIED} keys of a kind: remove the key files you do not know",
                    wanted.label(),
                    list.len() - i
                ),
            ));
        }
        tried += 1;
        match open_parts(&what, &header, clear, body, cred) {
            Ok(Some(m)) => match accept(&m) {
                Ok(t) => return Ok((id, m, t)),
                Err(e) => {
                    skip(Error::corrupt(
                        &what,
                        format!(
                            "opens with this credential, but the config does not open with \
                             the master key it holds ({e})"
                        ),
                    ));
                    refused.get_or_insert(e);
                }
            },
            Ok(None) => {}
            Err(err) => skip(err),
        }
    }
    Err(refused.unwrap_or(Error::WrongPassword))
}

/// Lists key files with their headers; those that cannot be read or parsed
/// are listed apart with the reason, so one bad file hides nothing else.
pub fn list_keys(backend: &dyn Backend) -> Result<KeyList> {
    let mut out = KeyList::default();
    for e in backend.list(Kind::Key)? {
        let what = Kind::Key.path(&e.name);
        let parsed = backend
            .read_bounded(Kind::Key, &e.name, MAX_KEY_FILE as u64)
            .and_then(|bytes| parse_key_file(&what, &bytes).map(|(h, _)| h));
        match parsed {
            Ok(h) => out.keys.push(KeyInfo {
                id: e.name,
                kind: h.kind,
                work_factor: h.work_factor,
                created: h.created,
                hostname: h.hostname,
                username: h.username,
                recipient: h.recipient,
            }),
            Err(e) if e.is_not_found() => {}
            Err(err) => out.unreadable.push(UnreadableKey {
                id: e.name,
                error: err.to_string(),
            }),
        }
    }
    out.keys
        .sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
    out.unreadable.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}
