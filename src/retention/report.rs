//! The `forget --json` report in restic's shape: a list of groups, each with
//! its key (`tags`, `host`, `paths`), the `keep` and `remove` lists and the
//! `reasons` of every kept snapshot (`snapshot`, `matches`, `counters`).
//! How a snapshot renders is the caller's choice; [`SnapshotJson`] is a
//! restic-like default. Empty lists render as `null`, as restic's do.

use super::apply::{Counters, Decision};
use super::group::GroupKey;
use crate::id::Id;
use crate::snapshot::Snapshot;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Serialize, Serializer};

/// One group of the report.
#[derive(Clone, Debug, Serialize)]
#[serde(bound(serialize = "S: Serialize"))]
pub struct ForgetGroup<S> {
    pub tags: Option<Vec<String>>,
    /// Empty when not grouped by host (restic prints `""` too).
    pub host: String,
    pub paths: Option<Vec<String>>,
    /// Kept snapshots, newest first.
    #[serde(serialize_with = "null_if_empty")]
    pub keep: Vec<S>,
    /// Removed snapshots, newest first.
    #[serde(serialize_with = "null_if_empty")]
    pub remove: Vec<S>,
    /// One entry per kept snapshot, in the order of `keep`.
    #[serde(serialize_with = "null_if_empty")]
    pub reasons: Vec<KeepReason<S>>,
}

/// Why one snapshot is kept.
#[derive(Clone, Debug, Serialize)]
pub struct KeepReason<S> {
    pub snapshot: S,
    pub matches: Vec<String>,
    pub counters: Counters,
}

impl<S> ForgetGroup<S> {
    /// The report of one group from its key, its snapshots and the
    /// decisions [`super::apply`] made on them; `render` turns a snapshot
    /// into its JSON form.
    pub fn new(
        key: &GroupKey,
        snapshots: &[(Id, Snapshot)],
        decisions: &[Decision],
        render: impl Fn(&Id, &Snapshot) -> S,
    ) -> Self {
        let mut group = ForgetGroup {
            tags: key.tags.clone(),
            host: key.hostname.clone(),
            paths: key.paths.clone(),
            keep: Vec::new(),
            remove: Vec::new(),
            reasons: Vec::new(),
        };
        for d in decisions {
            let Some((id, snap)) = snapshots.get(d.index) else {
                continue;
            };
            if d.keep {
                group.keep.push(render(id, snap));
                group.reasons.push(KeepReason {
                    snapshot: render(id, snap),
                    matches: d.matches.clone(),
                    counters: d.counters,
                });
            } else {
                group.remove.push(render(id, snap));
            }
        }
        group
    }
}

fn null_if_empty<T: Serialize, Ser: Serializer>(
    list: &[T],
    ser: Ser,
) -> Result<Ser::Ok, Ser::Error> {
    if list.is_empty() {
        ser.serialize_none()
    } else {
        list.serialize(ser)
    }
}

/// A snapshot as restic's JSON shows it (the fields `forget` needs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SnapshotJson {
    /// RFC 3339 with the offset of the report's time zone.
    pub time: String,
    pub tree: String,
    pub paths: Vec<String>,
    pub hostname: String,
    pub username: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub id: String,
    pub short_id: String,
}

impl SnapshotJson {
    pub fn new(id: &Id, snap: &Snapshot, tz: &TimeZone) -> SnapshotJson {
        let time = match Timestamp::from_nanosecond(i128::from(snap.time_ns)) {
            Ok(ts) => ts.display_with_offset(tz.to_offset(ts)).to_string(),
            Err(_) => snap.time_ns.to_string(),
        };
        SnapshotJson {
            time,
            tree: snap.tree.to_hex(),
            paths: snap.paths.clone(),
            hostname: snap.hostname.clone(),
            username: snap.username.clone(),
            tags: snap.tags.clone(),
            id: id.to_hex(),
            short_id: id.short(),
        }
    }
}
