//! Helpers shared by this module's unit tests.

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Europe/Berlin from the system's tzdata (the `tzdata` package).
pub fn berlin() -> TimeZone {
    let path = "/usr/share/zoneinfo/Europe/Berlin";
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e} (install tzdata)"));
    TimeZone::tzif("Europe/Berlin", &bytes).unwrap()
}

/// Parses an RFC 3339 instant.
pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}
