//! Key files: the master key wrapped with age, one file per passphrase
//! (age's scrypt recipient) or per X25519 recipient, under `keys/<id>`.
//!
//! Layout (see `repo-format/SPEC.md`): `"LRDR" | 'K' | version | header_len:
//! u32 LE | header (postcard KeyHeader) | age ciphertext of the 32-byte master
//! key`. The clear header only says which kind of key it is, its scrypt work
//! factor and who made it; age authenticates the wrapped key itself.

use crate::backend::{Backend, Kind};
use crate::crypto::MasterKey;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, HEADER_LEN, ObjectType};
use age::secrecy::SecretString;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Default scrypt work factor (log2 N) for new passphrase keys: about half a
/// second on the reference machine, what restic calibrates to. age fixes
/// r = 8 and p = 1, so this costs 128 MiB of memory while a key opens.
pub const DEFAULT_WORK_FACTOR: u8 = 17;
/// The largest work factor a reader accepts: bounds the time and memory a
/// malicious key file can make us spend.
pub const MAX_WORK_FACTOR: u8 = 20;
/// The smallest work factor accepted when creating a key (tests use this).
pub const MIN_WORK_FACTOR: u8 = 10;
const MAX_KEY_HEADER: usize = 64 << 10;
const MAX_KEY_FILE: usize = 1 << 20;

/// What opens a key file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyKind {
    Passphrase,
    X25519,
}

/// The clear header of a key file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyHeader {
    pub kind: KeyKind,
    /// scrypt log2(N) for passphrase keys, 0 otherwise.
    pub work_factor: u8,
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
}

/// How to wrap the master key in a new key file.
pub enum NewKey {
    Passphrase { pass: SecretString, work_factor: u8 },
    Recipient(age::x25519::Recipient),
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

pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn username() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| crate::tree::user_name(crate::tree::current_uid()).unwrap_or_default())
}

pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Wraps `master` into a new key file's bytes.
pub fn make_key_file(master: &MasterKey, new: &NewKey) -> Result<Vec<u8>> {
    let (header, ct) = match new {
        NewKey::Passphrase { pass, work_factor } => {
            if !(MIN_WORK_FACTOR..=MAX_WORK_FACTOR).contains(work_factor) {
                return Err(Error::Usage(format!(
                    "scrypt work factor {work_factor} outside {MIN_WORK_FACTOR}..={MAX_WORK_FACTOR}"
                )));
            }
            let mut r = age::scrypt::Recipient::new(pass.clone());
            r.set_work_factor(*work_factor);
            let ct = age::encrypt(&r, master.as_bytes())
                .map_err(|e| Error::Usage(format!("cannot wrap the master key: {e}")))?;
            (
                KeyHeader {
                    kind: KeyKind::Passphrase,
                    work_factor: *work_factor,
                    created: now_secs(),
                    hostname: hostname(),
                    username: username(),
                    recipient: String::new(),
                },
                ct,
            )
        }
        NewKey::Recipient(r) => {
            let ct = age::encrypt(r, master.as_bytes())
                .map_err(|e| Error::Usage(format!("cannot wrap the master key: {e}")))?;
            (
                KeyHeader {
                    kind: KeyKind::X25519,
                    work_factor: 0,
                    created: now_secs(),
                    hostname: hostname(),
                    username: username(),
                    recipient: r.to_string(),
                },
                ct,
            )
        }
    };
    let h = object::encode(&header)?;
    let mut out = object::header(ObjectType::Key).to_vec();
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(&ct);
    Ok(out)
}

/// Splits a key file into its header and age ciphertext, bounding sizes.
pub fn parse_key_file<'a>(what: &str, bytes: &'a [u8]) -> Result<(KeyHeader, &'a [u8])> {
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
    if header.work_factor > MAX_WORK_FACTOR {
        return Err(Error::corrupt(
            what,
            format!(
                "scrypt work factor {} above the limit {MAX_WORK_FACTOR}",
                header.work_factor
            ),
        ));
    }
    Ok((header, &rest[4 + hl..]))
}

/// Tries to unwrap the master key from one key file with `cred`.
/// `Ok(None)` means this credential does not open this key.
pub fn try_open(what: &str, bytes: &[u8], cred: &Credential) -> Result<Option<MasterKey>> {
    let (header, ct) = parse_key_file(what, bytes)?;
    let plain = match (cred, header.kind) {
        (Credential::Passphrase(p), KeyKind::Passphrase) => {
            let mut id = age::scrypt::Identity::new(p.clone());
            id.set_max_work_factor(header.work_factor.max(MIN_WORK_FACTOR));
            age::decrypt(&id, ct)
        }
        (Credential::Identity(i), KeyKind::X25519) => age::decrypt(i.as_ref(), ct),
        _ => return Ok(None),
    };
    match plain {
        Ok(p) if p.len() == 32 => {
            let mut k = [0u8; 32];
            k.copy_from_slice(&p);
            Ok(Some(MasterKey::from_bytes(k)))
        }
        Ok(_) => Err(Error::corrupt(what, "wrapped master key is not 32 bytes")),
        Err(_) => Ok(None),
    }
}

/// Writes a new key file and returns its id.
pub fn add_key(backend: &dyn Backend, master: &MasterKey, new: &NewKey) -> Result<Id> {
    let bytes = make_key_file(master, new)?;
    let id = Id::of_object(&bytes);
    backend.write(Kind::Key, &id.to_hex(), &bytes)?;
    Ok(id)
}

/// Finds a key file that `cred` opens: returns its id and the master key.
pub fn find_key(backend: &dyn Backend, cred: &Credential) -> Result<(Id, MasterKey)> {
    let mut list = backend.list(Kind::Key)?;
    list.sort_by(|a, b| a.name.cmp(&b.name));
    for e in list {
        let what = Kind::Key.path(&e.name);
        let bytes = backend.read_bounded(Kind::Key, &e.name, MAX_KEY_FILE as u64)?;
        // A corrupt key file must not stop other keys from opening the repository.
        match try_open(&what, &bytes, cred) {
            Ok(Some(m)) => return Ok((Id::from_hex(&e.name)?, m)),
            Ok(None) | Err(Error::Corrupt { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::WrongPassword)
}

/// Lists key files with their headers.
pub fn list_keys(backend: &dyn Backend) -> Result<Vec<KeyInfo>> {
    let mut out = Vec::new();
    for e in backend.list(Kind::Key)? {
        let what = Kind::Key.path(&e.name);
        let bytes = backend.read_bounded(Kind::Key, &e.name, MAX_KEY_FILE as u64)?;
        let (h, _) = parse_key_file(&what, &bytes)?;
        out.push(KeyInfo {
            id: e.name,
            kind: h.kind,
            work_factor: h.work_factor,
            created: h.created,
            hostname: h.hostname,
            username: h.username,
            recipient: h.recipient,
        });
    }
    out.sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
    Ok(out)
}
