//! The repository configuration (`config`): the repository id, chunker
//! parameters, compression level and pack size, fixed at `init` and sealed
//! like every other object; and [`Compression`], the words of
//! `--compression` that pick a level for one run (or for `init`).

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
            compression_level: LEVEL_DEFAULT,
            pack_size: 16 << 20,
        }
    }
}

/// The zstd level of `--compression max`.
pub const LEVEL_MAX: i32 = 19;
/// The zstd level of `--compression fast`.
pub const LEVEL_FAST: i32 = 1;
/// The zstd level of `--compression better`.
pub const LEVEL_BETTER: i32 = 3;
/// The level `init` records unless told otherwise. Level 1, not 3: with
/// the repository's dictionary (SPEC section 11) level 1 stores the
/// benchmark tree in 5 % more bytes than level 3 (159 against 151 MB,
/// still 0.8x restic's repository) for 16 % less user CPU in a cold backup
/// (user time 3.1 against 3.7 s, four interleaved runs each).
pub const LEVEL_DEFAULT: i32 = LEVEL_FAST;

/// A compression choice as restic's `--compression` words it: `auto`
/// (the repository's configured level), `off` (data blobs stored raw),
/// `fast` or `fastest` (zstd 1), `better` (zstd 3), `max` (zstd 19), or a
/// zstd level 1..=22. Only the level
/// of the zstd frames a writer produces depends on it: any level reads back
/// the same, so it is not part of the format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    Auto,
    Off,
    Fast,
    Better,
    Max,
    Level(i32),
}

impl Compression {
    /// The zstd level for data blobs (`0`: stored raw), where the
    /// repository's configured level is `configured`.
    pub fn level(self, configured: i32) -> i32 {
        match self {
            Compression::Auto => configured,
            Compression::Off => 0,
            Compression::Fast => LEVEL_FAST,
            Compression::Better => LEVEL_BETTER,
            Compression::Max => LEVEL_MAX,
            Compression::Level(l) => l,
        }
    }
}

impl std::fmt::Display for Compression {
    /// The word [`FromStr`](std::str::FromStr) reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::Auto => f.write_str("auto"),
            Compression::Off => f.write_str("off"),
            Compression::Fast => f.write_str("fast"),
            Compression::Better => f.write_str("better"),
            Compression::Max => f.write_str("max"),
            Compression::Level(l) => write!(f, "{l}"),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let c = match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Compression::Auto,
            "off" => Compression::Off,
            "fast" | "fastest" => Compression::Fast,
            "better" => Compression::Better,
            "max" => Compression::Max,
            other => match other.parse::<i32>() {
                Ok(l) if (1..=22).contains(&l) => Compression::Level(l),
                _ => {
                    return Err(format!(
                        "{s:?} is not a compression: expected auto, off, fast, better, \
                         max or a zstd level 1..=22"
                    ));
                }
            },
        };
        Ok(c)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_words_and_levels() {
        let cases = [
            ("auto", Compression::Auto, 7),
            ("off", Compression::Off, 0),
            ("fast", Compression::Fast, 1),
            ("Fastest", Compression::Fast, 1),
            ("better", Compression::Better, 3),
            ("MAX", Compression::Max, 19),
            ("12", Compression::Level(12), 12),
            ("22", Compression::Level(22), 22),
        ];
        for (word, c, level) in cases {
            assert_eq!(word.parse::<Compression>(), Ok(c), "{word}");
            assert_eq!(c.level(7), level, "{word}");
        }
        for bad in ["", "0", "23", "-1", "zstd", "max2"] {
            let e = bad.parse::<Compression>().unwrap_err();
            assert!(
                e.contains("expected auto, off, fast, better, max"),
                "{bad:?}: {e}"
            );
        }
    }
}
