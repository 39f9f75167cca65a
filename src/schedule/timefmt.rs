//! Instants in JSON and logs: RFC 3339 in UTC (`2025-06-10T02:00:00Z`),
//! as serde helpers for fields holding a `jiff::Timestamp`.

use jiff::Timestamp;
use serde::Serializer;

/// Serialises an instant as RFC 3339.
pub fn ser<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

/// Serialises an optional instant as RFC 3339 or null.
pub fn ser_opt<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(t),
        None => s.serialize_none(),
    }
}
