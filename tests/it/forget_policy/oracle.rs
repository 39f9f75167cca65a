//! larder's decisions against the real restic: scripts/forget_oracle.py
//! writes generated snapshot sets into a restic repository and records what
//! `restic forget --dry-run --json` keeps under many policies and groupings;
//! this test applies the same policies to the same snapshots and requires
//! the same kept snapshots, the same reasons and the same counters.
//!
//! restic older than 0.16 (Debian's is 0.14) lacks one rule larder follows
//! (restic ≥ 0.16 keeps a group's oldest snapshot while counts are left, or
//! while it lies inside a `--keep-within-<bucket>` duration). For such a
//! restic the oldest snapshot of each group is checked against what that
//! rule adds to restic's own answer: restic's final counters tell whether
//! counts were left, and restic's `--keep-within D` (the script's probes)
//! tells whether the oldest lies inside D. restic before 0.17 has no
//! `unlimited`; the script passes 10^9 instead (the same decisions; the
//! counters of such rules are compared as -1).

use super::snapshot;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use larder::Id;
use larder::retention::{Count, Duration, GroupBy, GroupKey, Policy, TagList, apply, group, plan};
use larder::snapshot::Snapshot;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

#[derive(Default)]
struct Totals {
    runs: usize,
    groups: usize,
    decisions: usize,
    kept: usize,
    oldest_rule: usize,
}

/// Set to an `oracle.json` the script wrote earlier to compare against it
/// instead of running restic again.
const REUSE: &str = "LARDER_FORGET_ORACLE_JSON";

#[test]
fn same_decisions_as_restic() {
    let text = match std::env::var_os(REUSE) {
        Some(path) => std::fs::read(path).unwrap(),
        None => match run_oracle() {
            Some(text) => text,
            None => return,
        },
    };
    let oracle: Value = serde_json::from_slice(&text).unwrap();
    let version: Vec<u32> = oracle["restic_version"]
        .as_str()
        .unwrap()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    let mut totals = Totals::default();
    for sc in oracle["scenarios"].as_array().unwrap() {
        Scenario::new(sc).check(version < vec![0, 16, 0], &mut totals);
    }
    eprintln!(
        "forget_policy::oracle: restic {}: {} runs, {} groups, {} snapshot decisions \
         ({} kept) identical; oldest-snapshot rule checked {} times",
        oracle["restic_version"].as_str().unwrap(),
        totals.runs,
        totals.groups,
        totals.decisions,
        totals.kept,
        totals.oldest_rule
    );
    assert!(
        totals.runs >= 250 && totals.decisions >= 500_000,
        "the oracle ran too little"
    );
}

/// Runs scripts/forget_oracle.py and returns its output; `None` (after
/// saying why) when restic, python3 or Python's cryptography is missing.
fn run_oracle() -> Option<Vec<u8>> {
    for program in ["restic", "python3"] {
        if !on_path(program) {
            eprintln!(
                "SKIPPED forget_policy::oracle: `{program}` is not on PATH \
                 (needs restic and python3 with the cryptography package)"
            );
            return None;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/forget_oracle.py");
    let status = Command::new("python3")
        .arg(&script)
        .arg("--out")
        .arg(dir.path())
        .status()
        .unwrap();
    if status.code() == Some(77) {
        eprintln!(
            "SKIPPED forget_policy::oracle: {} lacks a prerequisite",
            script.display()
        );
        return None;
    }
    assert!(status.success(), "{} failed: {status}", script.display());
    Some(std::fs::read(dir.path().join("oracle.json")).unwrap())
}

struct Scenario<'a> {
    json: &'a Value,
    tz: TimeZone,
    snaps: Vec<(Id, Snapshot)>,
    position: HashMap<Id, usize>,
}

/// One kept snapshot as compared: its time, its id unless its time is
/// shared with another snapshot of the group (restic orders such ties as it
/// lists files, larder by input order), its reasons and its counters.
type Entry = (i64, Option<Id>, Vec<String>, String);

impl<'a> Scenario<'a> {
    fn new(json: &'a Value) -> Self {
        let tz = TimeZone::get(json["tz"].as_str().unwrap()).unwrap();
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().map_or(Vec::new(), |a| {
                a.iter().map(|s| s.as_str().unwrap().to_string()).collect()
            })
        };
        let mut snaps = Vec::new();
        for s in json["snapshots"].as_array().unwrap() {
            let time: Timestamp = s["time"].as_str().unwrap().parse().unwrap();
            let paths = strings(&s["paths"]);
            let tags = strings(&s["tags"]);
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
            let mut snap = snapshot(0, s["hostname"].as_str().unwrap(), &paths, &tags);
            snap.time_ns = i64::try_from(time.as_nanosecond()).unwrap();
            snaps.push((Id::from_hex(s["id"].as_str().unwrap()).unwrap(), snap));
        }
        let position = snaps
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i))
            .collect();
        Scenario {
            json,
            tz,
            snaps,
            position,
        }
    }

    fn check(&self, old_restic: bool, totals: &mut Totals) {
        let now = Timestamp::now();
        for run in self.json["runs"].as_array().unwrap() {
            let args: Vec<String> = run["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            let what = format!(
                "{}: forget {args:?} --group-by {}",
                self.json["name"], run["group_by"]
            );
            let policy = policy_of(&args);
            let by = run["group_by"]
                .as_str()
                .map_or(GroupBy::default(), |g| GroupBy::parse(g).unwrap());
            let refused = plan(&policy, by, self.snaps.clone(), &self.tz, now, false).is_err();
            if run["exit"] != 0 {
                let stderr = run["stderr"].as_str().unwrap_or("");
                assert!(
                    stderr.contains("refusing to delete last snapshot"),
                    "{what}: {stderr}"
                );
                assert!(refused, "{what}: restic refused, larder does not");
                totals.runs += 1;
                continue;
            }
            let theirs: HashMap<GroupKey, &Value> = run["groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| (key_of(g), g))
                .collect();
            let mine = group(self.snaps.clone(), by);
            let my_keys: BTreeSet<&GroupKey> = mine.iter().map(|g| &g.key).collect();
            let their_keys: BTreeSet<&GroupKey> = theirs.keys().collect();
            assert_eq!(my_keys, their_keys, "{what}: groups differ");
            let mut emptied = false;
            for g in &mine {
                let decisions = apply(&policy, &g.snapshots, &self.tz, now);
                emptied |= !decisions.iter().any(|d| d.keep);
                let cx = Group {
                    scenario: self,
                    what: format!("{what}, group {}", g.key),
                    policy: &policy,
                    args: &args,
                    run,
                    key: &g.key,
                    snaps: &g.snapshots,
                };
                cx.compare(&decisions, theirs[&g.key], old_restic, totals);
                totals.groups += 1;
                totals.decisions += g.snapshots.len();
            }
            assert_eq!(refused, emptied, "{what}: refusal");
            totals.runs += 1;
        }
    }

    /// The scenario positions restic's `--keep-within duration` kept in the
    /// group `key` under the run's grouping (the script's probes).
    fn within_probe(&self, group_by: &Value, duration: &str, key: &GroupKey) -> BTreeSet<usize> {
        let probe = self.json["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["group_by"] == *group_by && p["args"][1] == duration)
            .unwrap_or_else(|| panic!("no probe for --keep-within {duration} by {group_by}"));
        let groups = probe["groups"].as_array().unwrap();
        let g = groups.iter().find(|g| key_of(g) == *key).unwrap();
        g["keep"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect()
    }
}

fn key_of(g: &Value) -> GroupKey {
    let list = |v: &Value| {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
    };
    GroupKey {
        hostname: g["host"].as_str().unwrap().to_string(),
        paths: list(&g["paths"]),
        tags: list(&g["tags"]),
    }
}

fn policy_of(args: &[String]) -> Policy {
    let mut p = Policy::default();
    for pair in args.chunks(2) {
        let v = pair[1].as_str();
        let count = || Count::parse(v).unwrap();
        let dur = || Duration::parse(v).unwrap();
        match pair[0].as_str() {
            "--keep-last" => p.last = count(),
            "--keep-hourly" => p.hourly = count(),
            "--keep-daily" => p.daily = count(),
            "--keep-weekly" => p.weekly = count(),
            "--keep-monthly" => p.monthly = count(),
            "--keep-yearly" => p.yearly = count(),
            "--keep-within" => p.within = dur(),
            "--keep-within-hourly" => p.within_hourly = dur(),
            "--keep-within-daily" => p.within_daily = dur(),
            "--keep-within-weekly" => p.within_weekly = dur(),
            "--keep-within-monthly" => p.within_monthly = dur(),
            "--keep-within-yearly" => p.within_yearly = dur(),
            "--keep-tag" => p.tags.push(TagList::parse(v)),
            other => panic!("unknown flag {other}"),
        }
    }
    p
}

/// The counted rules: counter name, the policy's count, the reason word.
fn counted(p: &Policy) -> [(&'static str, Count, &'static str); 6] {
    [
        ("last", p.last, "last snapshot"),
        ("hourly", p.hourly, "hourly snapshot"),
        ("daily", p.daily, "daily snapshot"),
        ("weekly", p.weekly, "weekly snapshot"),
        ("monthly", p.monthly, "monthly snapshot"),
        ("yearly", p.yearly, "yearly snapshot"),
    ]
}

/// Comparing one group of one run.
struct Group<'a> {
    scenario: &'a Scenario<'a>,
    what: String,
    policy: &'a Policy,
    args: &'a [String],
    run: &'a Value,
    key: &'a GroupKey,
    snaps: &'a [(Id, Snapshot)],
}

impl Group<'_> {
    fn compare(
        &self,
        decisions: &[larder::retention::Decision],
        theirs: &Value,
        old: bool,
        totals: &mut Totals,
    ) {
        let what = &self.what;
        assert_eq!(theirs["size"], self.snaps.len(), "{what}: group size");
        let mut times: HashMap<i64, usize> = HashMap::new();
        for (_, s) in self.snaps {
            *times.entry(s.time_ns).or_default() += 1;
        }
        let tied = |t: i64| times[&t] > 1;
        let their_pos: Vec<usize> = theirs["keep"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect();
        let reasons = theirs["reasons"].as_array().unwrap();
        let mut their: Vec<(usize, Vec<String>, Value)> = their_pos
            .iter()
            .zip(reasons)
            .map(|(p, r)| (*p, strings(&r["matches"]), self.normalized(&r["counters"])))
            .collect();
        // restic 0.17 and later print no counters; compare them when given.
        let counters = !reasons.iter().any(|r| r["counters"].is_null());
        let mut mine: Vec<(usize, Vec<String>, Value)> = decisions
            .iter()
            .filter(|d| d.keep)
            .map(|d| {
                let pos = self.scenario.position[&self.snaps[d.index].0];
                let c = if counters {
                    serde_json::to_value(d.counters).unwrap()
                } else {
                    Value::Null
                };
                (pos, d.matches.clone(), c)
            })
            .collect();
        totals.kept += mine.len();
        if old && let Some(last) = decisions.last() {
            let oldest = self.scenario.position[&self.snaps[last.index].0];
            let t = self.scenario.snaps[oldest].1.time_ns;
            assert!(
                !tied(t),
                "{what}: the oldest snapshot's time is tied; the check needs it unique"
            );
            let final_counters = their
                .last()
                .map_or_else(|| self.initial_counters(), |e| e.2.clone());
            let their_oldest = take(&mut their, oldest);
            let my_oldest = take(&mut mine, oldest);
            self.check_oldest(oldest, their_oldest, my_oldest, final_counters, totals);
        }
        let entries = |list: Vec<(usize, Vec<String>, Value)>| -> Vec<Entry> {
            let mut v: Vec<Entry> = list
                .into_iter()
                .map(|(p, m, c)| {
                    let (id, s) = &self.scenario.snaps[p];
                    (
                        s.time_ns,
                        (!tied(s.time_ns)).then_some(*id),
                        m,
                        c.to_string(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let (mine, their) = (entries(mine), entries(their));
        if mine != their {
            let only_mine: Vec<String> = mine
                .iter()
                .filter(|e| !their.contains(e))
                .take(5)
                .map(|e| self.show(e))
                .collect();
            let only_their: Vec<String> = their
                .iter()
                .filter(|e| !mine.contains(e))
                .take(5)
                .map(|e| self.show(e))
                .collect();
            panic!(
                "{what}: kept snapshots differ\n  only larder: {only_mine:#?}\n  only restic: {only_their:#?}"
            );
        }
    }

    /// restic < 0.16 versus the rule of restic ≥ 0.16 on the oldest snapshot:
    /// larder must give exactly restic's reasons plus one `oldest …` reason
    /// for each rule that rule applies to, and the counters that follow.
    fn check_oldest(
        &self,
        oldest: usize,
        their: Option<(Vec<String>, Value)>,
        mine: Option<(Vec<String>, Value)>,
        final_counters: Value,
        totals: &mut Totals,
    ) {
        let what = &self.what;
        let their_matches = their.as_ref().map_or(Vec::new(), |t| t.0.clone());
        let mut expect = BTreeSet::new();
        let mut counters = final_counters;
        for (name, count, word) in counted(self.policy) {
            let left = counters.get(name).and_then(Value::as_i64).unwrap_or(0);
            if count != Count::Off && left != 0 && !their_matches.iter().any(|m| m == word) {
                expect.insert(format!("oldest {word}"));
                if left > 0 {
                    counters[name] = json!(left - 1);
                    if left == 1 {
                        counters.as_object_mut().unwrap().remove(name);
                    }
                }
            }
        }
        for (flag, word) in [
            ("--keep-within-hourly", "hourly within"),
            ("--keep-within-daily", "daily within"),
            ("--keep-within-weekly", "weekly within"),
            ("--keep-within-monthly", "monthly within"),
            ("--keep-within-yearly", "yearly within"),
        ] {
            let Some(pair) = self.args.chunks(2).find(|p| p[0] == flag) else {
                continue;
            };
            let d = Duration::parse(&pair[1]).unwrap();
            let reason = format!("{word} {d}");
            let inside = self
                .scenario
                .within_probe(&self.run["group_by"], &pair[1], self.key)
                .contains(&oldest);
            if inside && !their_matches.contains(&reason) {
                expect.insert(format!("oldest {reason}"));
            }
        }
        let (my_matches, my_counters) = mine.unwrap_or_default();
        let plain: Vec<String> = my_matches
            .iter()
            .filter(|m| !m.starts_with("oldest "))
            .cloned()
            .collect();
        let extra: BTreeSet<String> = my_matches
            .iter()
            .filter(|m| m.starts_with("oldest "))
            .cloned()
            .collect();
        assert_eq!(
            plain, their_matches,
            "{what}: reasons of the oldest snapshot"
        );
        assert_eq!(extra, expect, "{what}: oldest-snapshot rule");
        if !my_matches.is_empty() {
            assert_eq!(
                my_counters, counters,
                "{what}: counters of the oldest snapshot"
            );
        }
        totals.oldest_rule += usize::from(!expect.is_empty());
    }

    /// restic's counters with unlimited rules (given to restic as 10^9)
    /// shown as larder shows them, -1.
    fn normalized(&self, counters: &Value) -> Value {
        let mut c = counters.clone();
        if c.is_null() {
            return c;
        }
        for (name, count, _) in counted(self.policy) {
            if count == Count::Unlimited {
                c[name] = json!(-1);
            }
        }
        c
    }

    /// The counters before any snapshot is kept.
    fn initial_counters(&self) -> Value {
        let mut c = json!({});
        for (name, count, _) in counted(self.policy) {
            match count {
                Count::Off => {}
                Count::Limit(n) => c[name] = json!(n),
                Count::Unlimited => c[name] = json!(-1),
            }
        }
        c
    }

    fn show(&self, e: &Entry) -> String {
        let t = Timestamp::from_nanosecond(e.0.into()).unwrap();
        format!("{} {:?} {}", t.to_zoned(self.scenario.tz.clone()), e.2, e.3)
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Removes and returns the entry of scenario position `pos`.
fn take(list: &mut Vec<(usize, Vec<String>, Value)>, pos: usize) -> Option<(Vec<String>, Value)> {
    let i = list.iter().position(|e| e.0 == pos)?;
    let (_, m, c) = list.remove(i);
    Some((m, c))
}
