//! What the scheduling commands (`config`, `run`, `schedule`, `daemon`)
//! share: where the profiles file and state directory are, loading the
//! profiles, and the run context over the real clock, the JSON-lines log
//! and the process's SIGTERM flag.

use super::Global;
use crate::error::Result;
use crate::repo_steps::Dirs;
use crate::schedule::events::{EventSink, JsonlFile, LOG_NAME};
use crate::schedule::{Config, Context, Env, RealSleeper, Records, StopFlag, SystemClock, paths};
use std::path::PathBuf;

/// The locations in force for one command.
pub struct Setup {
    pub env: Env,
    pub config_file: PathBuf,
    pub state_dir: PathBuf,
}

impl Setup {
    /// Resolves `--config`, `$LARDER_CONFIG` and the state directory.
    pub fn new(g: &Global) -> Result<Setup> {
        let env = Env::from_process();
        let config_file = paths::config_file(g.config.as_deref(), &env)?;
        let state_dir = paths::state_dir(&env)?;
        Ok(Setup {
            env,
            config_file,
            state_dir,
        })
    }

    /// The profiles, validated (credential files included).
    pub fn load(&self) -> Result<Config> {
        Config::load(&self.config_file, &self.env)
    }

    /// The profiles, without looking at credential files.
    pub fn load_unchecked(&self) -> Result<Config> {
        Config::load_unchecked(&self.config_file, &self.env)
    }

    /// The run records.
    pub fn records(&self) -> Result<Records> {
        Records::open(&self.state_dir)
    }

    /// The log every run appends to.
    pub fn log(&self) -> JsonlFile {
        JsonlFile::new(&self.state_dir.join(LOG_NAME))
    }

    /// The cache and state directories a run's repository work uses.
    pub fn dirs(&self, g: &Global) -> Dirs {
        Dirs {
            cache: g.cache_dir(),
            state: self.state_dir.clone(),
        }
    }

    /// A run context on the real clock; SIGINT and SIGTERM set its stop
    /// flag (and the library's, which is the same one).
    pub fn context<'a>(
        &'a self,
        records: &'a Records,
        events: &'a dyn EventSink,
    ) -> Result<Context<'a>> {
        crate::interrupt::install_handlers()?;
        Ok(Context {
            state_dir: &self.state_dir,
            records,
            events,
            clock: &SystemClock,
            sleeper: &RealSleeper,
            tz: jiff::tz::TimeZone::system(),
            stop: StopFlag::from_atomic(crate::interrupt::shared_flag()),
        })
    }
}
