//! Helpers shared by the integration tests.

#![allow(dead_code)]

use larder::backend::LocalBackend;
use larder::keys::{Credential, NewKey};
use larder::repository::{InitOptions, Repository};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The passphrase used by tests.
pub const PASS: &str = "correct horse battery staple";

/// The lowest scrypt work factor larder accepts (N = 2^10; with r = 8 and
/// p = 4, 1 MiB), so tests stay fast.
pub const TEST_WF: u8 = larder::keys::MIN_WORK_FACTOR;

/// A temporary repository and cache directory.
pub struct TestRepo {
    pub dir: tempfile::TempDir,
}

impl TestRepo {
    pub fn new() -> Self {
        TestRepo {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub fn repo_path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    pub fn cache_path(&self) -> PathBuf {
        self.dir.path().join("cache")
    }
    pub fn backend(&self) -> Arc<LocalBackend> {
        Arc::new(LocalBackend::new(self.repo_path()))
    }
    /// Creates the repository with small packs and chunks.
    pub fn init(&self) -> Repository {
        let opts = InitOptions {
            chunker: larder::chunker::ChunkerParams {
                min: 4096,
                avg: 16384,
                max: 65536,
                level: 1,
            },
            compression_level: 3,
            pack_size: 1 << 20,
        };
        Repository::init(
            self.backend(),
            &NewKey::Passphrase {
                pass: PASS.to_string().into(),
                work_factor: TEST_WF,
            },
            &opts,
            &self.cache_path(),
        )
        .unwrap()
    }
    pub fn open(&self) -> larder::Result<Repository> {
        Repository::open(
            self.backend(),
            &Credential::passphrase(PASS),
            &self.cache_path(),
        )
    }
}

/// Path of the `larder` binary the CLI tests run: the one this build made,
/// or the one `LARDER_TEST_BIN` names (to show that a test fails on an
/// older build: `LARDER_TEST_BIN=/path/to/old/larder cargo test NAME`).
pub fn larder_bin() -> PathBuf {
    match std::env::var_os("LARDER_TEST_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_larder")),
    }
}

/// A `larder` command with the repository, password and cache set.
pub fn larder(repo: &Path, cache: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(larder_bin());
    c.env("LARDER_REPOSITORY", repo)
        .env("LARDER_PASSWORD", PASS)
        .env("LARDER_CACHE_DIR", cache)
        .env(
            "LARDER_STATE_DIR",
            cache.parent().unwrap_or(cache).join("larder-state"),
        )
        .env("LARDER_KDF_WORK_FACTOR", TEST_WF.to_string())
        // A work factor below the default is refused without this.
        .env("LARDER_INSECURE_TEST_KDF", "1")
        .env_remove("LARDER_PASSWORD_FILE")
        .env_remove("LARDER_PASSWORD_COMMAND")
        // The machine's settings stay out of the tests.
        .env_remove("LARDER_HOST")
        .env_remove("LARDER_PACK_SIZE")
        .env_remove("LARDER_COMPRESSION")
        .env_remove("LARDER_CONNECTIONS")
        .env_remove("LARDER_REPOSITORY_FILE")
        .env_remove("LARDER_CACERT")
        .env_remove("LARDER_READ_CONCURRENCY")
        .env_remove("LARDER_FROM_REPOSITORY")
        .env_remove("LARDER_FROM_REPOSITORY_FILE")
        .env_remove("LARDER_FROM_PASSWORD_FILE")
        .env_remove("LARDER_FROM_PASSWORD_COMMAND");
    c
}

/// Creates a repository at `repo` with the small packs and chunks of
/// [`TestRepo::init`] (for a repository that must live elsewhere than a
/// `TestRepo`'s directory, such as on a small filesystem).
pub fn init_at(repo: &Path, cache: &Path) -> Repository {
    let opts = InitOptions {
        chunker: larder::chunker::ChunkerParams {
            min: 4096,
            avg: 16384,
            max: 65536,
            level: 1,
        },
        compression_level: 3,
        pack_size: 1 << 20,
    };
    Repository::init(
        Arc::new(LocalBackend::new(repo)),
        &NewKey::Passphrase {
            pass: PASS.to_string().into(),
            work_factor: TEST_WF,
        },
        &opts,
        cache,
    )
    .unwrap()
}

/// Repository `repo` opened by the library, with a cache of its own at
/// `cache` (beside a CLI command's).
pub fn lib_open(repo: &Path, cache: &Path) -> Repository {
    Repository::open(
        Arc::new(LocalBackend::new(repo.to_path_buf())),
        &Credential::passphrase(PASS),
        cache,
    )
    .unwrap()
}
