//! The repository configuration (`config`): the repository id, chunker
//! parameters, compression level and pack size, fixed at `init` and sealed
//! like every other object.

use crate::backend::{Backend, Kind};
use crate::chunker::ChunkerParams;
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use serde::{Deserialize, Serialize};

/// The repository configuration, sealed in `config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Random repository id (names the local cache).
    pub id: Id,
    pub chunker: ChunkerParams,
    /// zstd level for data blobs.
    pub compression_level: i32,
    /// Target pack size in bytes.
    pub pack_size: u32,
    /// Creation time, seconds since the Unix epoch.
    pub created: i64,
}

/// Options for `init`.
#[derive(Clone, Debug)]
pub struct InitOptions {
    pub chunker: ChunkerParams,
    pub compression_level: i32,
    pub pack_size: u32,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            chunker: ChunkerParams::default(),
            compression_level: 3,
            pack_size: 16 << 20,
        }
    }
}

/// Reads and opens the config object with `keys`.
pub fn read_config(backend: &dyn Backend, keys: &Keys) -> Result<Config> {
    let bytes = backend.read_bounded(Kind::Config, "config", 1 << 20)?;
    open_config(&bytes, keys)
}

/// Opens and checks config object bytes already read (an open reads the
/// config once, to check its version before asking for a key, and opens
/// those same bytes: one request, and no second copy that could differ).
pub fn open_config(bytes: &[u8], keys: &Keys) -> Result<Config> {
    let cfg: Config = object::open(keys, ObjectType::Config, "config", bytes)?;
    cfg.chunker
        .validate()
        .map_err(|e| Error::corrupt("config", e))?;
    if cfg.pack_size < (1 << 20) || cfg.pack_size > (1 << 30) {
        return Err(Error::corrupt("config", "pack size outside 1 MiB..1 GiB"));
    }
    Ok(cfg)
}
