//! The one door to a repository: `init`, `open` (key → master key → config →
//! index cache), the config object, and reading and writing blobs.
//!
//! Write order gives crash safety: packs first, then the index segment that
//! lists them, then (in the archiver) the snapshot that refers to them.

pub mod cache_dirs;
mod config;
mod dicts;
mod pack_ids;
mod repair;
mod tree_cache;
pub mod trust;

pub use config::{
    Compression, Config, InitOptions, LEVEL_DEFAULT, LEVEL_FAST, LEVEL_MAX, open_config,
    read_config,
};
pub use repair::RepairReport;

use crate::backend::{Backend, Kind};
use crate::chunker::Chunker;
use crate::crypto::{Keys, MasterKey};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::{BlobLocation, Index, SyncReport};
use crate::keys::{self, Credential, NewKey};
use crate::lock::{self, LockConfig, LockGuard, LockMode, UnlockReport};
use crate::object::{self, ObjectType};
use crate::pack::{self, BlobType};
use crate::tree::Tree;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// The name of the migration that makes a repository of an older format
/// writable ([`Repository::upgrade_format`]).
pub const UPGRADE_MIGRATION: &str = "upgrade_repo_v6";

/// How long a migration keeps its lock after the config is replaced: an
/// older larder that read the old config just before (and is deriving its
/// key) meets the lock if it locks within this time, rather than working
/// on a migrated repository whose version-5 locks it cannot read.
pub const MIGRATION_HOLD: std::time::Duration = std::time::Duration::from_secs(3);

/// The largest pack of trees fetched whole into the tree cache.
const TREE_PACK_MAX: u64 = 32 << 20;

/// An open repository.
pub struct Repository {
    backend: Arc<dyn Backend>,
    keys: Keys,
    master: MasterKey,
    config: Config,
    /// The config's format version: [`object::FORMAT_VERSION`],
    /// [`object::MIGRATED_VERSION`], or an older one this larder reads but
    /// does not write (see [`Repository::format_version`]).
    format_version: u8,
    key_id: Id,
    index: Mutex<Index>,
    /// Whether the index cache has been brought up to date with `index/`
    /// since open (the first use of the index does it).
    index_synced: AtomicBool,
    /// Whether `index/` must be read again before the index cache's next
    /// use: set under a new read lock and after each listing of
    /// `snapshots/` (see [`Repository::index_after_listing`]).
    index_stale: AtomicBool,
    /// Index segments the first sync skipped, until taken (see
    /// [`Repository::take_index_problems`]).
    index_problems: Mutex<Vec<String>>,
    /// Who is told of those problems as the first sync meets them, instead
    /// of keeping them (see [`Repository::tell_index_problems`]).
    index_problems_to: Mutex<Option<fn(&str)>>,
    cache_dir: PathBuf,
    /// The cache directory's in-use lock ([`cache_dirs`]).
    _cache_in_use: cache_dirs::InUse,
    /// Whether commands that only read take a shared lock (see
    /// [`Repository::lock_for_reading`]).
    lock_readers: AtomicBool,
    /// The shared lock that reading commands through this handle hold, while
    /// any of them holds it (see [`Repository::lock_for_reading`]).
    read_lock: Mutex<std::sync::Weak<LockGuard>>,
    /// How long taking a lock waits for a conflicting one, and whom it
    /// tells (see [`Repository::set_lock_retry`]).
    lock_retry: Mutex<(std::time::Duration, Option<crate::lock::OnWait>)>,
    /// The zstd level data blobs are written with through this handle
    /// (`0`: raw): the config's, unless [`Repository::set_compression`]
    /// chose another for this run.
    compression_level: AtomicI32,
    /// The size new packs are closed at through this handle: the
    /// config's, unless [`Repository::set_pack_size`] chose another.
    pack_size: std::sync::atomic::AtomicU32,
    /// Sealed tree blobs kept locally, for remote repositories.
    tree_cache: Option<tree_cache::TreeCache>,
    /// The compression dictionaries, once listed (see `dicts.rs`): read
    /// for every blob opened, by every thread, so under a shared lock.
    dicts: RwLock<Option<Arc<crate::dictionary::Dictionaries>>>,
    /// The dictionary data blobs are written with: `None` until chosen.
    write_dict: Mutex<Option<Option<Arc<crate::dictionary::Dictionary>>>>,
    /// Dictionary IDs looked for again once already and still missing.
    dict_misses: Mutex<Vec<u32>>,
}

/// The pack sizes `--pack-size` takes, in MiB (restic's bounds; the
/// format reads packs up to 1 GiB).
pub const PACK_SIZE_MIB_MIN: u32 = 4;
pub const PACK_SIZE_MIB_MAX: u32 = 128;

/// The default cache directory: `$XDG_CACHE_HOME/larder` or `~/.cache/larder`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("larder");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(h).join(".cache").join("larder");
    }
    std::env::temp_dir().join("larder-cache")
}

impl Repository {
    /// Creates a repository and its first key. Refuses an existing one.
    pub fn init(
        backend: Arc<dyn Backend>,
        first_key: &NewKey,
        opts: &InitOptions,
        cache_dir: &Path,
    ) -> Result<Repository> {
        Self::init_with_master(backend, first_key, opts, cache_dir, MasterKey::generate()?)
    }

    /// [`Repository::init`] with a given master key instead of a new one:
    /// `init --copy-chunker-params --from-repo` gives the new repository
    /// the source's master key, so both derive the same blob-ID key and
    /// gear table and blobs copy between them with the same IDs (see
    /// repo-format/SPEC.md, "Repositories that share a master key").
    pub fn init_with_master(
        backend: Arc<dyn Backend>,
        first_key: &NewKey,
        opts: &InitOptions,
        cache_dir: &Path,
        master: MasterKey,
    ) -> Result<Repository> {
        opts.chunker.validate()?;
        if backend.exists(Kind::Config, "config")? {
            return Err(Error::RepositoryExists(backend.location()));
        }
        backend.create()?;
        let keys = Keys::derive(&master);
        let config = Config {
            id: crate::crypto::random_id()?,
            chunker: opts.chunker,
            compression_level: opts.compression_level,
            pack_size: opts.pack_size,
            created: crate::host::now_secs(),
        };
        let key_id = keys::add_key(backend.as_ref(), &master, first_key)?;
        // The config goes last: a repository exists once it has one.
        let bytes = object::seal(&keys, ObjectType::Config, &config)?;
        match backend.write(Kind::Config, "config", &bytes) {
            Ok(()) => {}
            // A config is there: ours (a retried write whose first try
            // landed) or another init's, written meanwhile. Then this
            // init's key wraps a master key no config uses: removed, so
            // that opening does not try it (it would skip it if left).
            // After any other error the key stays: the config may have
            // landed all the same, and it would be the only way in.
            Err(Error::RepositoryExists(at)) => {
                let ours = read_config(backend.as_ref(), &keys).is_ok_and(|c| c.id == config.id);
                if !ours {
                    let _ = backend.delete(Kind::Key, &key_id.to_hex());
                    return Err(Error::RepositoryExists(format!(
                        "{at} (another process created it while this init ran; this init's \
                         key file was removed)"
                    )));
                }
            }
            Err(e) => return Err(e),
        }
        let version = object::FORMAT_VERSION;
        Self::finish_open(backend, keys, master, (config, version), key_id, cache_dir)
    }

    /// Opens a repository with a credential.
    pub fn open(
        backend: Arc<dyn Backend>,
        cred: &Credential,
        cache_dir: &Path,
    ) -> Result<Repository> {
        Self::open_reporting(backend, cred, cache_dir, &mut Vec::new())
    }

    /// [`Repository::open_reporting`], with the index cache brought up to
    /// date with `index/` before it returns.
    pub fn open_reporting(
        backend: Arc<dyn Backend>,
        cred: &Credential,
        cache_dir: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Repository> {
        let repo = Self::open_unsynced(backend, cred, cache_dir, warnings)?;
        drop(repo.index()?);
        Ok(repo)
    }

    /// [`Repository::open`], adding to `warnings` what it skipped on the
    /// way (key files it could not read or use), whether or not it opens.
    /// The index cache is opened but not yet brought up to date: its first
    /// use does that. For a command that brings it up to date itself once
    /// it holds its lock (a backup), this saves listing `index/` and
    /// `marks/` twice, which on remote storage is two requests each.
    pub fn open_unsynced(
        backend: Arc<dyn Backend>,
        cred: &Credential,
        cache_dir: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Repository> {
        let bytes = match backend.read_bounded(Kind::Config, "config", 1 << 20) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Err(Error::NoRepository(backend.location())),
            Err(e) => return Err(e),
        };
        // Say "needs a newer larder" before asking for any key.
        let version = object::check_header("config", ObjectType::Config, &bytes)?;
        let (key_id, master, (keys, config)) =
            keys::find_key(backend.as_ref(), cred, warnings, |master| {
                let keys = Keys::derive(master);
                let config = open_config(&bytes, &keys)?;
                Ok((keys, config))
            })?;
        Self::finish_open(backend, keys, master, (config, version), key_id, cache_dir)
    }

    fn finish_open(
        backend: Arc<dyn Backend>,
        keys: Keys,
        master: MasterKey,
        (config, format_version): (Config, u8),
        key_id: Id,
        cache_dir: &Path,
    ) -> Result<Repository> {
        // The cache root carries larder's CACHEDIR.TAG, so no backup stores it.
        crate::host::prepare_state_dir(cache_dir)?;
        let dir = cache_dir.join(config.id.to_hex());
        // Held while the repository is open: `cache --cleanup` leaves it.
        let cache_in_use = cache_dirs::use_dir(&dir)?;
        let index = Index::open(&dir.join("index.sqlite"))?;
        // Remote backends (those with connections) keep trees locally.
        let tree_cache = backend
            .connections()
            .map(|_| tree_cache::TreeCache::new(dir.join("trees")));
        Ok(Repository {
            backend,
            keys,
            master,
            key_id,
            index: Mutex::new(index),
            index_synced: AtomicBool::new(false),
            index_stale: AtomicBool::new(false),
            index_problems: Mutex::new(Vec::new()),
            index_problems_to: Mutex::new(None),
            tree_cache,
            cache_dir: dir,
            _cache_in_use: cache_in_use,
            lock_readers: AtomicBool::new(true),
            read_lock: Mutex::new(std::sync::Weak::new()),
            lock_retry: Mutex::new((std::time::Duration::ZERO, None)),
            compression_level: AtomicI32::new(config.compression_level),
            pack_size: std::sync::atomic::AtomicU32::new(config.pack_size),
            config,
            format_version,
            dicts: RwLock::new(None),
            write_dict: Mutex::new(None),
            dict_misses: Mutex::new(Vec::new()),
        })
    }

    /// The storage backend.
    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// A shared handle on the backend.
    pub fn backend_arc(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    /// The derived keys.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The master key (for key files and for deriving keys in helper threads).
    pub fn master(&self) -> &MasterKey {
        &self.master
    }

    /// The repository config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The format version of the repository's config: the version this
    /// larder writes ([`object::FORMAT_VERSION`]), [`object::MIGRATED_VERSION`]
    /// for a repository [`Repository::upgrade_format`] migrated, or an
    /// older one it reads (from [`object::OLDEST_READ_VERSION`]). A
    /// repository of an older version is read-only: every lock a writer
    /// takes is refused ([`Error::OldFormat`]) until it is migrated; a
    /// reader's lock is written in the older version's bytes, so that the
    /// older larder sees it.
    pub fn format_version(&self) -> u8 {
        self.format_version
    }

    /// Upgrades a repository of an older format version so that this
    /// larder writes it (`larder migrate upgrade_repo_v6`). Under an
    /// exclusive lock, written in the older version's bytes so that an
    /// older larder at work sees it (and while any lock is held, none is
    /// taken), the config is read again, its stored bytes are handed to
    /// `keep_old` (to keep for a user who must go back; an error there
    /// stops the migration before anything is written), and it is rewritten with
    /// the version byte [`object::MIGRATED_VERSION`], its body unchanged,
    /// in one atomic replacement ([`Backend::replace_config`]). Nothing
    /// else is rewritten: the older version's objects stay as they are and
    /// read as before. The lock is then held for [`MIGRATION_HOLD`] more,
    /// for an older larder that read the old config just before the
    /// replacement and has yet to lock. After it, larders that read only
    /// version 5 or older refuse the repository at its config: the older
    /// ones could not read the dictionaries this one then writes, the
    /// earlier version-5 ones could not read the older objects.
    /// Returns the version it upgraded from, or None when the repository
    /// needed no migration (nothing is written then).
    pub fn upgrade_format(
        &self,
        keep_old: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<Option<u8>> {
        if self.format_version >= object::FORMAT_VERSION {
            return Ok(None);
        }
        let lock = self.take_lock(LockMode::Exclusive)?;
        // Again under the lock: another migration may have run meanwhile.
        let bytes = self.backend.read_bounded(Kind::Config, "config", 1 << 20)?;
        let version = object::check_header("config", ObjectType::Config, &bytes)?;
        if version >= object::FORMAT_VERSION {
            return Ok(None);
        }
        keep_old(&bytes)?;
        let body = object::open_body_owned(&self.keys, ObjectType::Config, "config", bytes)?;
        let config: Config = object::decode("config", &body)?;
        if config.id != self.config.id {
            return Err(Error::corrupt(
                "config",
                "the repository's config changed while it was open",
            ));
        }
        let sealed = object::seal_body_as(
            &self.keys,
            ObjectType::Config,
            object::MIGRATED_VERSION,
            &body,
        )?;
        lock.check()?;
        self.backend.replace_config(&sealed)?;
        std::thread::sleep(MIGRATION_HOLD);
        drop(lock);
        Ok(Some(version))
    }

    /// Whether this repository's config is of an older format version
    /// while `dicts/` holds dictionaries, which are version 5's: the config
    /// was put back over a migrated one after data was written with it (by
    /// hand, or by someone with write access to the storage). Reading still
    /// works; migrating again makes it writable. Lists `dicts/` only for
    /// an older config.
    pub fn rolled_back(&self) -> Result<bool> {
        if self.format_version >= object::FORMAT_VERSION {
            return Ok(false);
        }
        Ok(self
            .backend
            .list(Kind::Dict)?
            .iter()
            .any(|e| Id::from_hex(&e.name).is_ok()))
    }

    /// Refuses a write to a repository of an older format version.
    fn writable(&self) -> Result<()> {
        if self.format_version < object::FORMAT_VERSION {
            return Err(Error::OldFormat {
                location: self.backend.location(),
                version: self.format_version,
            });
        }
        Ok(())
    }

    /// Writes data blobs from now on at the level `c` picks (`auto`: the
    /// config's): `--compression` for one run. Readers need not know it.
    pub fn set_compression(&self, c: Compression) {
        let level = c.level(self.config.compression_level);
        self.compression_level.store(level, Ordering::Relaxed);
    }

    /// Closes new packs at `mib` MiB from now on (`--pack-size` for one
    /// run; None: the config's size). Readers need not know it: a pack of
    /// any size reads the same.
    pub fn set_pack_size(&self, mib: Option<u32>) -> Result<()> {
        let bytes = match mib {
            None => self.config.pack_size,
            Some(m) if (PACK_SIZE_MIB_MIN..=PACK_SIZE_MIB_MAX).contains(&m) => m << 20,
            Some(m) => {
                return Err(Error::Usage(format!(
                    "--pack-size {m}: give {PACK_SIZE_MIB_MIN} to {PACK_SIZE_MIB_MAX} (MiB)"
                )));
            }
        };
        self.pack_size.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// The size in bytes new packs are closed at.
    pub fn pack_size(&self) -> u32 {
        self.pack_size.load(Ordering::Relaxed)
    }

    /// The zstd level data blobs are written with (`0`: stored raw).
    pub fn compression_level(&self) -> i32 {
        self.compression_level.load(Ordering::Relaxed)
    }

    /// The id of the key file that opened this repository.
    pub fn key_id(&self) -> Id {
        self.key_id
    }

    /// This repository's directory inside the cache.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The index cache (locked for the caller), brought up to date with
    /// `index/` first if this is its first use since open, or since a read
    /// lock was taken or `snapshots/` listed.
    pub fn index(&self) -> Result<MutexGuard<'_, Index>> {
        let mut g = self.lock_index()?;
        if self.index_stale.load(Ordering::Acquire) || !self.index_synced.load(Ordering::Acquire) {
            self.sync_locked(&mut g)?;
        }
        Ok(g)
    }

    fn lock_index(&self) -> Result<MutexGuard<'_, Index>> {
        self.index
            .lock()
            .map_err(|_| Error::internal("index cache lock poisoned by a panic"))
    }

    /// Syncs the locked index; the first sync's problems are told, or
    /// kept until taken.
    fn sync_locked(&self, g: &mut Index) -> Result<SyncReport> {
        // What is listed from here on is read after this sync's listing.
        let stale = self.index_stale.swap(false, Ordering::AcqRel);
        let report = match g.sync(self.backend.as_ref(), &self.keys) {
            Ok(r) => r,
            Err(e) => {
                self.index_stale.fetch_or(stale, Ordering::AcqRel);
                return Err(e);
            }
        };
        if !self.index_synced.swap(true, Ordering::AcqRel) {
            let tell = self.index_problems_to.lock().ok().and_then(|t| *t);
            match tell {
                Some(tell) => report.bad.iter().for_each(|p| tell(p)),
                None => {
                    if let Ok(mut p) = self.index_problems.lock() {
                        p.clone_from(&report.bad);
                    }
                }
            }
        }
        Ok(report)
    }

    /// Tells `to` each problem the first sync of the index meets (a
    /// segment it skipped), when it meets it, instead of keeping them for
    /// [`Repository::take_index_problems`]. For a caller that opens with
    /// [`Repository::open_unsynced`] and lets whichever step first needs
    /// the index sync it (under that step's lock), so the problems are
    /// shown even when a later error ends the command.
    pub fn tell_index_problems(&self, to: fn(&str)) {
        if let Ok(mut t) = self.index_problems_to.lock() {
            *t = Some(to);
        }
    }

    /// To be called after listing `snapshots/`: the index cache's next use
    /// ([`Repository::index`]) reads `index/` again first, so that it
    /// places every blob of each snapshot listed (a backup writes a
    /// snapshot's index segments before the snapshot: repo-format/SPEC.md,
    /// section 13), even one written by a backup that ended after the last
    /// sync. A command that lists and never looks a blob up reads nothing.
    pub fn index_after_listing(&self) {
        self.index_stale.store(true, Ordering::Release);
    }

    /// Re-reads `index/` into the cache. Segments that cannot be read are
    /// skipped and named in the report.
    pub fn sync_index(&self) -> Result<SyncReport> {
        let mut g = self.lock_index()?;
        self.sync_locked(&mut g)
    }

    /// Problems the first sync of the index met: segments that could not
    /// be read and were skipped (blobs they list look missing until
    /// `repair index`). Taken once, so whoever shows them shows them once.
    pub fn take_index_problems(&self) -> Vec<String> {
        self.index_problems
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// A chunker with this repository's parameters and gear table.
    pub fn chunker(&self) -> Result<Chunker> {
        Chunker::new(self.config.chunker, self.keys.gear())
    }

    /// Adds a key file wrapping this repository's master key, under a
    /// maintenance lock (see [`Repository::remove_key`]), so two processes
    /// adding keys at once cannot pass [`keys::MAX_KEYS_TRIED`] together.
    pub fn add_key(&self, new: &NewKey) -> Result<Id> {
        self.add_key_as(new, &keys::KeyLabel::this_process())
    }

    /// [`Repository::add_key`], the key labelled `label` (`key add
    /// --host/--user`).
    pub fn add_key_as(&self, new: &NewKey, label: &keys::KeyLabel) -> Result<Id> {
        let _lock = self.lock_maintenance()?;
        keys::add_key_as(self.backend.as_ref(), &self.master, new, label)
    }

    /// Removes key `id`; refuses the key in use and the last key.
    ///
    /// The key files are listed under a maintenance lock: it never waits
    /// for a backup, but two key changes (or a key change and a prune)
    /// never run at once. Without it, two processes opened with different
    /// keys, each removing the other's, would both see two keys and leave
    /// none, and the repository could never be opened again.
    pub fn remove_key(&self, id: &str) -> Result<()> {
        let lock = self.lock_maintenance()?;
        let list = self.backend.list(Kind::Key)?;
        let matches: Vec<_> = list.iter().filter(|e| e.name.starts_with(id)).collect();
        let target = match matches.as_slice() {
            [one] => one.name.clone(),
            [] => return Err(Error::Usage(format!("no key {id}"))),
            _ => return Err(Error::Usage(format!("key prefix {id} is ambiguous"))),
        };
        if target == self.key_id.to_hex() {
            return Err(Error::Usage(
                "refusing to remove the key in use; open the repository with another key".into(),
            ));
        }
        if list.len() < 2 {
            return Err(Error::Usage("refusing to remove the last key".into()));
        }
        lock.check()?;
        self.backend.delete(Kind::Key, &target)
    }

    /// Replaces the key in use with a new one (`key passwd`): adds the new
    /// key, then deletes the one in use, under one maintenance lock (see
    /// [`Repository::remove_key`]). Killed between the two steps, it
    /// leaves both keys, each of which opens the repository.
    pub fn change_key(&self, new: &NewKey) -> Result<Id> {
        self.change_key_as(new, &keys::KeyLabel::this_process())
    }

    /// [`Repository::change_key`], the new key labelled `label`.
    pub fn change_key_as(&self, new: &NewKey, label: &keys::KeyLabel) -> Result<Id> {
        let lock = self.lock_maintenance()?;
        let id = keys::add_key_as(self.backend.as_ref(), &self.master, new, label)?;
        lock.check()?;
        self.backend.delete(Kind::Key, &self.key_id.to_hex())?;
        Ok(id)
    }

    /// How this process holds and judges locks: the defaults (or the
    /// `LARDER_LOCK_REFRESH_SECS` test knob), watching locks from this
    /// repository's cache directory when the backend cannot tell their age.
    pub fn lock_config(&self) -> Result<LockConfig> {
        let mut cfg = LockConfig::from_env(Some(self.cache_dir.clone()))?;
        cfg.format = self.format_version.min(object::FORMAT_VERSION);
        (cfg.retry, cfg.on_wait) = *self
            .lock_retry
            .lock()
            .map_err(|_| Error::internal("the lock settings' holder panicked"))?;
        Ok(cfg)
    }

    /// Makes every lock taken through this handle wait up to `wait` while a
    /// conflicting lock is held (restic's `--retry-lock`), telling
    /// `on_wait` what holds it when a wait begins; zero (the default)
    /// fails at once.
    pub fn set_lock_retry(&self, wait: std::time::Duration, on_wait: Option<crate::lock::OnWait>) {
        if let Ok(mut r) = self.lock_retry.lock() {
            *r = (wait, on_wait);
        }
    }

    /// Takes a shared lock (backup, restore, check, copy: many may run at once;
    /// only an exclusive lock conflicts). Released when the guard drops;
    /// call [`LockGuard::check`] (or a [`LockGuard::handle`]'s) before
    /// each write.
    pub fn lock_shared(&self) -> Result<LockGuard> {
        self.writable()?;
        self.take_lock(LockMode::Shared)
    }

    /// A shared lock of its own for a command that only reads but keeps a
    /// guard of its own (the dry runs of `rewrite` and `repair
    /// snapshots`): as [`Repository::lock_shared`], but allowed on a
    /// repository of an older format version, whose larder reads it in
    /// that version's bytes.
    pub fn lock_reader(&self) -> Result<LockGuard> {
        self.take_lock(LockMode::Shared)
    }

    /// Lets commands that only read run without a lock (`--no-lock`, as
    /// restic's): for storage that cannot be written (a read-only mount, a
    /// full disk). Such a reader is not protected from a prune that deletes
    /// what it reads; it never affects anyone else. Writers always lock.
    pub fn set_lock_readers(&self, on: bool) {
        self.lock_readers.store(on, Ordering::Relaxed);
    }

    /// The lock of a command that only reads (restore, check, stats, ls,
    /// diff): a shared lock, or none after
    /// [`Repository::set_lock_readers`]`(false)`. When the lock cannot be
    /// written because the storage is read-only or full, the error says so
    /// and how to read without one.
    ///
    /// Readers through one handle share one lock: while a guard this returned
    /// is alive, another call returns the same lock, and it is released when
    /// the last guard drops. So a command takes the lock **before** it picks
    /// the snapshot it reads (SPEC section 21, rule 2), and the library call
    /// it then makes, which locks for itself, adds no second lock object.
    /// A snapshot picked before the lock could lose its data to a prune
    /// that marked and swept (`--keep-delete 0s`) in between without
    /// seeing the reader.
    ///
    /// A fresh lock has the index cache brought up to date under it before
    /// its next use, as a backup's does: a cache synced before the lock may
    /// place a blob in a pack that a prune, not waiting for this reader,
    /// repacked and deleted in between (SPEC section 21, rule 2). Open the
    /// repository unsynced ([`Repository::open_unsynced`]) to list `index/`
    /// and `marks/` only then. Without a lock the cache is synced if it was
    /// not yet.
    pub fn lock_for_reading(&self) -> Result<Option<Arc<LockGuard>>> {
        if !self.lock_readers.load(Ordering::Relaxed) {
            drop(self.index()?);
            return Ok(None);
        }
        let mut held = self
            .read_lock
            .lock()
            .map_err(|_| Error::internal("the read lock's holder panicked"))?;
        if let Some(g) = held.upgrade() {
            return Ok(Some(g));
        }
        match self.take_lock(LockMode::Shared) {
            Ok(g) => {
                let g = Arc::new(g);
                *held = Arc::downgrade(&g);
                self.index_stale.store(true, Ordering::Release);
                Ok(Some(g))
            }
            Err(e) if storage_refuses_writes(&e) => Err(Error::Usage(format!(
                "{e}\ncannot take a lock: the repository's storage refuses writes; to read it anyway, run again with --no-lock (nothing is written then, and a prune running meanwhile could delete what is being read)"
            ))),
            Err(e) => Err(e),
        }
    }

    /// Takes an exclusive lock (operations that delete what others may
    /// read). Released when the guard drops.
    pub fn lock_exclusive(&self) -> Result<LockGuard> {
        self.writable()?;
        self.take_lock(LockMode::Exclusive)
    }

    /// Takes a maintenance lock (prune, key changes): it never blocks a
    /// backup, but no two maintenance operations, and no exclusive one,
    /// run at once.
    pub fn lock_maintenance(&self) -> Result<LockGuard> {
        self.writable()?;
        self.take_lock(LockMode::Maintenance)
    }

    /// Takes the lock of a command that replaces or removes snapshots
    /// (`forget`, `tag`, `rewrite`, `repair snapshots`): beside backups,
    /// readers and prune, never beside another such command. Snapshots
    /// chosen before it was taken may have been removed meanwhile: see
    /// [`crate::snapshot::still_listed`].
    pub fn lock_snapshots(&self) -> Result<LockGuard> {
        self.writable()?;
        self.take_lock(LockMode::Snapshots)
    }

    /// Takes a lock of `mode` with this repository's lock settings.
    fn take_lock(&self, mode: LockMode) -> Result<LockGuard> {
        LockGuard::acquire(
            self.backend.clone(),
            &self.master,
            mode,
            &self.lock_config()?,
        )
    }

    /// Removes stale locks (every lock with `remove_all`): `larder unlock`.
    pub fn unlock(&self, remove_all: bool) -> Result<UnlockReport> {
        lock::unlock(
            self.backend.as_ref(),
            &self.keys,
            &self.lock_config()?,
            remove_all,
        )
    }

    /// Where blob `id` is stored.
    pub fn lookup(&self, id: &Id) -> Result<Option<BlobLocation>> {
        self.index()?.lookup(id)
    }

    /// Runs `f` with the index cache's lookups in one read transaction
    /// ([`Index::begin_read`]), for read-only commands that look up blob
    /// after blob. Nothing in `f` may write to the index cache.
    pub fn reading<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let began = self.index()?.begin_read()?;
        let out = f();
        if began {
            let ended = self.lock_index()?.end_read();
            if out.is_ok() {
                ended?;
            }
        }
        out
    }

    /// Looks up many blobs at once; the answers are in the order of `ids`.
    pub fn lookup_many(&self, ids: &[Id]) -> Result<Vec<Option<BlobLocation>>> {
        self.index()?.lookup_many(ids)
    }

    /// Reads, decrypts and verifies one blob.
    pub fn read_blob(&self, id: &Id) -> Result<Vec<u8>> {
        let loc = self
            .lookup(id)?
            .ok_or_else(|| Error::MissingBlob(id.to_hex()))?;
        self.read_blob_at(id, &loc)
    }

    /// Reads, decrypts and verifies blob `id`, stored at `loc` (looked up
    /// by the caller).
    pub fn read_blob_at(&self, id: &Id, loc: &BlobLocation) -> Result<Vec<u8>> {
        let (mut stored, mut plain) = (Vec::new(), Vec::new());
        self.read_blob_at_into(id, loc, &mut stored, &mut plain)?;
        Ok(plain)
    }

    /// [`Repository::read_blob_at`] into `plain`, reading the stored bytes
    /// into `stored`: buffers a caller reuses from blob to blob.
    fn read_blob_at_into(
        &self,
        id: &Id,
        loc: &BlobLocation,
        stored: &mut Vec<u8>,
        plain: &mut Vec<u8>,
    ) -> Result<()> {
        let e = loc.entry;
        let name = loc.pack.to_hex();
        let pack_path = Kind::Pack.path(&name);
        let what = pack::BlobIn {
            id,
            pack: &pack_path,
        };
        let cache = self.tree_cache.as_ref().filter(|_| e.ty == BlobType::Tree);
        if let Some(c) = cache {
            let cached = match c.get(id, e.stored_len as usize) {
                Some(b) => Some(b),
                None if self.fetch_tree_pack(c, loc)? => c.get(id, e.stored_len as usize),
                None => None,
            };
            if let Some(b) = cached {
                match pack::open_blob_into(&self.keys, self, &what, &e, &b, plain) {
                    Ok(()) => return Ok(()),
                    Err(_) => c.forget(id),
                }
            }
        }
        self.backend
            .read_range_into(Kind::Pack, &name, e.offset, e.stored_len as u64, stored)?;
        pack::open_blob_into(&self.keys, self, &what, &e, stored, plain)?;
        if let Some(c) = cache {
            c.put(id, stored);
        }
        Ok(())
    }

    /// A tree missing from the cache of a remote repository brings its
    /// whole pack, in one request, when the index shows the pack holds only
    /// trees (as packers write them) and is at most [`TREE_PACK_MAX`]
    /// bytes: every tree in it goes into the cache, sealed (each is
    /// verified when read). The pack's own (authenticated) header says
    /// where each tree is, so this needs no per-blob rows in the cache.
    /// Returns whether it did; a pack whose header cannot be read is left
    /// to the single-blob read, which reports what is wrong.
    fn fetch_tree_pack(&self, c: &tree_cache::TreeCache, loc: &BlobLocation) -> Result<bool> {
        let size = {
            let idx = self.index()?;
            match idx
                .tree_pack_size(&loc.pack)?
                .filter(|&s| s <= TREE_PACK_MAX)
            {
                Some(s) => s,
                None => return Ok(false),
            }
        };
        let name = loc.pack.to_hex();
        let data = self.backend.read_range(Kind::Pack, &name, 0, size)?;
        let Ok(entries) = pack::read_entries(&self.keys, &Kind::Pack.path(&name), &data) else {
            return Ok(false);
        };
        for e in entries.iter().filter(|e| e.ty == BlobType::Tree) {
            let (at, len) = (e.offset as usize, e.stored_len as usize);
            if let Some(b) = at.checked_add(len).and_then(|end| data.get(at..end)) {
                c.put(&e.id, b);
            }
        }
        Ok(true)
    }

    /// Keeps a tree blob just written (sealed) in the local tree cache, for
    /// remote repositories; nothing for local ones.
    pub fn keep_tree(&self, id: &Id, stored: &[u8]) {
        if let Some(c) = &self.tree_cache {
            c.put(id, stored);
        }
    }

    /// Loads and decodes tree blob `id`.
    pub fn load_tree(&self, id: &Id) -> Result<Tree> {
        let bytes = self.read_blob(id)?;
        Tree::decode(&format!("tree {id}"), &bytes)
    }

    /// Loads tree blob `id`, stored at `loc` (looked up by the caller).
    pub fn load_tree_at(&self, id: &Id, loc: &BlobLocation) -> Result<Tree> {
        // The thread's buffers, taken (not borrowed): nothing called here
        // can then find them in use. A backup loads every tree of its
        // parent; two fresh buffers per tree, and glibc merging its freed
        // small blocks before each of these larger requests, showed in its
        // profile.
        let (mut stored, mut plain) = TREE_BUFFERS.take();
        let tree = self
            .read_blob_at_into(id, loc, &mut stored, &mut plain)
            .and_then(|()| Tree::decode(&format_args!("tree {id}"), &plain));
        if stored.capacity().max(plain.capacity()) <= crate::tree::BUFFER_KEPT {
            TREE_BUFFERS.set((stored, plain));
        }
        tree
    }

    /// Loads tree blob `id` after checking that the index knows it as a
    /// tree blob (what `check` uses: a data blob in a tree's place is
    /// reported as such rather than as undecodable).
    pub fn load_tree_checked(&self, id: &Id) -> Result<Tree> {
        match self.lookup(id)? {
            Some(loc) if loc.entry.ty == BlobType::Tree => {}
            Some(_) => return Err(Error::corrupt(format!("blob {id}"), "is not a tree blob")),
            None => return Err(Error::MissingBlob(id.to_hex())),
        }
        self.load_tree(id)
    }

    /// Reads and decodes the header of pack `id` of `size` bytes.
    pub fn read_pack_header(&self, id: &Id, size: u64) -> Result<Vec<pack::PackEntry>> {
        let name = id.to_hex();
        let what = Kind::Pack.path(&name);
        if size < pack::TRAILER_LEN as u64 {
            return Err(Error::corrupt(&what, "pack shorter than its trailer"));
        }
        let t = self.backend.read_range(
            Kind::Pack,
            &name,
            size - pack::TRAILER_LEN as u64,
            pack::TRAILER_LEN as u64,
        )?;
        let (off, hlen) = pack::parse_trailer(&what, size, &t)?;
        let sealed = self
            .backend
            .read_range(Kind::Pack, &name, off, hlen as u64)?;
        pack::open_header_as(&self.keys, &what, &sealed, off, pack::trailer_version(&t))
    }
}

thread_local! {
    /// A loading thread's buffers for one tree blob, as stored and opened.
    static TREE_BUFFERS: std::cell::Cell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// Whether `e` says the storage cannot be written at all: read-only, full,
/// over quota, or not writable by this user.
fn storage_refuses_writes(e: &Error) -> bool {
    let io = match e {
        Error::Io { source, .. } | Error::Backend { source, .. } => source,
        _ => return false,
    };
    matches!(
        io.raw_os_error(),
        Some(libc::EROFS | libc::ENOSPC | libc::EDQUOT | libc::EACCES | libc::EPERM)
    ) || matches!(
        io.kind(),
        std::io::ErrorKind::ReadOnlyFilesystem
            | std::io::ErrorKind::StorageFull
            | std::io::ErrorKind::PermissionDenied
    )
}

/// A repository for the library's own tests, in `dir/repo` with its cache
/// in `dir/cache`: small chunks (4–64 KiB) and packs (256 KiB), data blobs
/// stored uncompressed, and a passphrase key of the lowest work factor.
#[cfg(test)]
pub(crate) fn test_repository(dir: &std::path::Path) -> Repository {
    use crate::backend::LocalBackend;
    use crate::chunker::ChunkerParams;
    use crate::keys::{MIN_WORK_FACTOR, NewKey};
    let opts = InitOptions {
        chunker: ChunkerParams {
            min: 4096,
            avg: 16384,
            max: 65536,
            level: 1,
        },
        compression_level: 0,
        pack_size: 1 << 18,
    };
    let key = NewKey::Passphrase {
        pass: "pw".to_string().into(),
        work_factor: MIN_WORK_FACTOR,
    };
    let backend = Arc::new(LocalBackend::new(dir.join("repo")));
    Repository::init(backend, &key, &opts, &dir.join("cache")).unwrap()
}
