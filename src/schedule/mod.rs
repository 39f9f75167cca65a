//! Periodic scheduled runs: profiles read from `larder.toml`, schedules and
//! their due times, the run cycle (hooks, retries, steps), the record of
//! every run (SQLite, JSON lines, Prometheus textfile), health words for
//! `status`, one-run-per-profile locks, systemd units and crontab entries,
//! and the daemon loop. The CLI parses and prints; everything else is here.

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
pub use paths::Env;
pub use profile::Profile;
pub use steps::{StepFailure, StepReport, StepResult, Steps};
