//! Object and blob identifiers: 32-byte values shown as lowercase hex.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A 32-byte identifier. Blob IDs are keyed BLAKE3 of the plaintext; object
/// names (packs, index segments, snapshots, keys, locks) are plain BLAKE3 of
/// the stored bytes, so anyone can verify storage integrity without a key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Id(pub [u8; 32]);

impl Id {
    /// Plain BLAKE3 of `data`: the storage name of a repository object.
    pub fn of_object(data: &[u8]) -> Id {
        Id(*blake3::hash(data).as_bytes())
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The 8-hex-digit short form shown in tables.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..4])
    }

    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Result<Id> {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b)
            .map_err(|e| Error::Usage(format!("{s:?} is not a 64-digit hex id: {e}")))?;
        Ok(Id(b))
    }

    /// The first two hex digits: the fan-out directory of packs.
    pub fn prefix(&self) -> String {
        hex::encode(&self.0[..1])
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.short())
    }
}
