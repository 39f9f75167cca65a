//! Periodic scheduled runs: profiles read from `larder.toml`, schedules and
//! their due times, the run cycle (hooks, retries, steps), the record of
//! every run (SQLite, JSON lines, Prometheus textfile), health words for
//! `status`, one-run-per-profile locks, systemd units and crontab entries,
//! and the daemon loop. The CLI parses and prints; everything else is here.
//!
//! How the commands use it:
//! - every command: [`paths::config_file`] and [`Config::load`] (or
//!   `load_unchecked` for `status`), [`paths::state_dir`], [`Records::open`];
//! - `config check`: [`view::profile_view`] for each profile;
//! - `run`: a [`cycle::Context`], then [`cycle::run_profile`] with the
//!   CLI's [`Steps`];
//! - `status`: [`view::status`] per profile, [`view::all_ok`] for the exit code;
//! - `schedule install|remove`: [`systemd::render`], [`systemd::install`],
//!   [`systemd::remove`] and the `*_commands`, or [`crontab::line`],
//!   [`crontab::install`], [`crontab::remove`] inside [`crontab::edit`];
//! - `daemon`: [`daemon::run`] with a steps factory.

pub mod atomic;
mod build;
pub mod calendar;
pub mod clock;
pub mod config;
pub mod credentials;
pub mod crontab;
pub mod cycle;
pub mod daemon;
pub mod events;
pub mod health;
pub mod hooks;
pub mod invocation;
pub mod oncalendar;
pub mod paths;
pub mod profile;
pub mod prometheus;
mod raw;
pub mod records;
pub mod retry;
pub mod runlock;
pub mod steps;
pub mod systemd;
#[cfg(test)]
mod testutil;
pub mod timefmt;
pub mod values;
pub mod view;

pub use calendar::Schedule;
pub use clock::{Clock, FakeClock, RealSleeper, Sleeper, StopFlag, SystemClock};
pub use config::Config;
pub use cycle::{Context, RunOutcome, RunRequest, RunSummary, run_profile};
pub use events::{Event, EventSink, JsonlFile};
pub use health::Word;
pub use invocation::Invocation;
pub use paths::Env;
pub use profile::Profile;
pub use records::Records;
pub use steps::{StepFailure, StepReport, StepResult, Steps};
pub use systemd::Scope;
