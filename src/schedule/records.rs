//! The record of every run: a small SQLite database (`runs.db` in the state
//! directory) with one row per run (profile, start, end, result, exit code,
//! error, snapshot, files and bytes added, pid) and one per step (backup,
//! forget, prune, check and the hooks: ok, failed or skipped, with a
//! message). A run is written when it starts and completed when it ends; a
//! run left unfinished by a killed process is marked interrupted by the
//! next run of its profile.

use crate::error::{Error, Result};
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The database file name inside the state directory.
pub const DB_NAME: &str = "runs.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    profile TEXT NOT NULL,
    started_ns INTEGER NOT NULL,
    ended_ns INTEGER,
    result TEXT NOT NULL,
    exit_code INTEGER,
    error TEXT,
    snapshot_id TEXT,
    files_added INTEGER,
    bytes_added INTEGER,
    pid INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_profile ON runs(profile, started_ns);
CREATE TABLE IF NOT EXISTS steps (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    step TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    started_ns INTEGER NOT NULL,
    ended_ns INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX IF NOT EXISTS steps_by_name ON steps(step, status);
PRAGMA user_version = 1;
";

/// How a run ended (or that it has not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunResult {
    Running,
    Ok,
    Failed,
    /// Stopped by a stop request or a killed process; counts as neither
    /// success nor failure.
    Interrupted,
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    Ok,
    Failed,
    Skipped,
}

macro_rules! text_enum {
    ($t:ty { $($v:ident => $s:literal),* }) => {
        impl $t {
            /// The name stored in the database and logs.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
            fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some(Self::$v),)* _ => None }
            }
        }
    };
}
text_enum!(RunResult { Running => "running", Ok => "ok", Failed => "failed", Interrupted => "interrupted" });
text_enum!(StepStatus { Ok => "ok", Failed => "failed", Skipped => "skipped" });

/// One step of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepRecord {
    /// `before-hook`, `backup`, `forget`, `prune`, `check`, `after-hook`,
    /// `on-success-hook` or `on-failure-hook`.
    pub step: String,
    pub status: StepStatus,
    pub message: String,
    #[serde(serialize_with = "super::timefmt::ser")]
    pub started: Timestamp,
    #[serde(serialize_with = "super::timefmt::ser")]
    pub ended: Timestamp,
    pub attempts: u32,
}

/// One run, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    pub id: i64,
    pub profile: String,
    #[serde(serialize_with = "super::timefmt::ser")]
    pub started: Timestamp,
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub ended: Option<Timestamp>,
    pub result: RunResult,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub snapshot_id: Option<String>,
    pub files_added: Option<u64>,
    pub bytes_added: Option<u64>,
    pub pid: u32,
    pub steps: Vec<StepRecord>,
}

impl RunRecord {
    /// How long the run took, if it has ended.
    pub fn duration(&self) -> Option<std::time::Duration> {
        let end = self.ended?;
        std::time::Duration::try_from(end.duration_since(self.started)).ok()
    }
}

/// How a run ended, for [`Records::finish`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunEnd {
    pub result: Option<RunResult>,
    pub exit_code: i32,
    pub error: Option<String>,
    pub snapshot_id: Option<String>,
    pub files_added: u64,
    pub bytes_added: u64,
}

/// What the health rules need to know about a profile's past.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct History {
    /// The latest run of any result, including one still running.
    pub last_run: Option<RunRecord>,
    /// The latest run that ended ok or failed (not interrupted).
    pub last_finished: Option<RunRecord>,
    pub last_success: Option<RunRecord>,
}

/// The run database.
pub struct Records {
    conn: Connection,
    path: PathBuf,
}

fn ns(t: Timestamp) -> i64 {
    i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX)
}

fn from_ns(v: i64) -> Timestamp {
    Timestamp::from_nanosecond(i128::from(v)).unwrap_or(Timestamp::UNIX_EPOCH)
}

const RUN_COLUMNS: &str = "id, profile, started_ns, ended_ns, result, exit_code, error, \
                           snapshot_id, files_added, bytes_added, pid";

impl Records {
    /// Opens (creating if needed) the database in `state_dir`, which is
    /// created and tagged first.
    pub fn open(state_dir: &Path) -> Result<Records> {
        super::paths::prepare_state_dir(state_dir)?;
        let path = state_dir.join(DB_NAME);
        let conn = Connection::open(&path).map_err(|e| Error::sqlite(&path, e))?;
        let r = Records { conn, path };
        r.conn
            .busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| r.err(e))?;
        r.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| r.err(e))?;
        r.conn.execute_batch(SCHEMA).map_err(|e| r.err(e))?;
        Ok(r)
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.path, e)
    }

    /// Records the start of a run; returns its id.
    pub fn begin(&self, profile: &str, started: Timestamp, pid: u32) -> Result<i64> {
        self.conn
            .execute(
                "INSERT INTO runs (profile, started_ns, result, pid) VALUES (?1, ?2, 'running', ?3)",
                params![profile, ns(started), pid],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records one step of run `run_id`.
    pub fn add_step(&self, run_id: i64, s: &StepRecord) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO steps (run_id, seq, step, status, message, started_ns, ended_ns, attempts)
                 VALUES (?1, (SELECT COUNT(*) FROM steps WHERE run_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run_id,
                    s.step,
                    s.status.as_str(),
                    s.message,
                    ns(s.started),
                    ns(s.ended),
                    s.attempts
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records the end of run `run_id`.
    pub fn finish(&self, run_id: i64, ended: Timestamp, end: &RunEnd) -> Result<()> {
        let result = end.result.unwrap_or(RunResult::Failed);
        self.conn
            .execute(
                "UPDATE runs SET ended_ns = ?2, result = ?3, exit_code = ?4, error = ?5,
                 snapshot_id = ?6, files_added = ?7, bytes_added = ?8 WHERE id = ?1",
                params![
                    run_id,
                    ns(ended),
                    result.as_str(),
                    end.exit_code,
                    end.error,
                    end.snapshot_id,
                    i64::try_from(end.files_added).unwrap_or(i64::MAX),
                    i64::try_from(end.bytes_added).unwrap_or(i64::MAX)
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Marks the profile's runs still shown as running as interrupted (call
    /// while holding the profile's run lock: no other run can be live).
    pub fn mark_unfinished_interrupted(&self, profile: &str, now: Timestamp) -> Result<usize> {
        self.conn
            .execute(
                "UPDATE runs SET result = 'interrupted', ended_ns = ?2,
                 error = 'the process ended before the run finished'
                 WHERE profile = ?1 AND result = 'running'",
                params![profile, ns(now)],
            )
            .map_err(|e| self.err(e))
    }

    fn runs_where(&self, clause: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<RunRecord>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE {clause}");
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(args, |r| {
                let result: String = r.get(4)?;
                Ok(RunRecord {
                    id: r.get(0)?,
                    profile: r.get(1)?,
                    started: from_ns(r.get(2)?),
                    ended: r.get::<_, Option<i64>>(3)?.map(from_ns),
                    result: RunResult::parse(&result).unwrap_or(RunResult::Failed),
                    exit_code: r.get(5)?,
                    error: r.get(6)?,
                    snapshot_id: r.get(7)?,
                    files_added: r.get::<_, Option<i64>>(8)?.map(|v| v.max(0) as u64),
                    bytes_added: r.get::<_, Option<i64>>(9)?.map(|v| v.max(0) as u64),
                    pid: r.get(10)?,
                    steps: Vec::new(),
                })
            })
            .map_err(|e| self.err(e))?;
        let mut runs = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        for run in &mut runs {
            run.steps = self.steps(run.id)?;
        }
        Ok(runs)
    }

    fn steps(&self, run_id: i64) -> Result<Vec<StepRecord>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT step, status, message, started_ns, ended_ns, attempts FROM steps
                 WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([run_id], |r| {
                let status: String = r.get(1)?;
                Ok(StepRecord {
                    step: r.get(0)?,
                    status: StepStatus::parse(&status).unwrap_or(StepStatus::Failed),
                    message: r.get(2)?,
                    started: from_ns(r.get(3)?),
                    ended: from_ns(r.get(4)?),
                    attempts: r.get(5)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn latest(&self, profile: &str, results: &str) -> Result<Option<RunRecord>> {
        let clause = format!(
            "profile = ?1 AND result IN ({results}) ORDER BY started_ns DESC, id DESC LIMIT 1"
        );
        Ok(self.runs_where(&clause, &[&profile])?.pop())
    }

    /// The profile's latest runs, newest first.
    pub fn recent(&self, profile: &str, limit: u32) -> Result<Vec<RunRecord>> {
        self.runs_where(
            "profile = ?1 ORDER BY started_ns DESC, id DESC LIMIT ?2",
            &[&profile, &limit],
        )
    }

    /// The profile's last run, last finished run and last success.
    pub fn history(&self, profile: &str) -> Result<History> {
        Ok(History {
            last_run: self.latest(profile, "'running', 'ok', 'failed', 'interrupted'")?,
            last_finished: self.latest(profile, "'ok', 'failed'")?,
            last_success: self.latest(profile, "'ok'")?,
        })
    }

    /// When `step` last succeeded for the profile (the step's start).
    pub fn last_step_success(&self, profile: &str, step: &str) -> Result<Option<Timestamp>> {
        self.conn
            .query_row(
                "SELECT MAX(s.started_ns) FROM steps s JOIN runs r ON r.id = s.run_id
                 WHERE r.profile = ?1 AND s.step = ?2 AND s.status = 'ok'",
                params![profile, step],
                |r| r.get::<_, Option<i64>>(0),
            )
            .optional()
            .map(|v| v.flatten().map(from_ns))
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
