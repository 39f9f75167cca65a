//! Backups killed with SIGKILL at random points, over and over, while the
//! tree they back up changes (issue 10, item 7 and the "kill loop" fault
//! test): after every kill `check` passes (notices allowed) and every object
//! under a final name is whole; at the end `check --read-data` passes, every
//! snapshot restores exactly the tree it was taken of, and no blob is
//! stored twice (each run first indexes the packs a killed one left).
//!
//! The kill points are drawn from a seeded generator (`LARDER_KILL_SEED`
//! picks another seed; the one used is printed): half are delays after the
//! start spread over the length of a recent complete run, half the moment
//! the run's first or second pack is in storage.

use super::{
    assert_each_blob_stored_once, assert_objects_whole, assert_same_manifest, check_passes, fill,
    larder_cmd, manifest, notices, snapshot_id_of, snapshot_names, spawn, temp_files, wait_bounded,
};
use crate::support::{lib_restore, list_rel, pack_files, path_str, rand_bytes, set_mtime, write};
use larder::Id;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// Kills that must land on a running backup.
const KILLS: usize = 30;

/// splitmix64: a small seeded generator, so a failing sequence can be run
/// again with the same seed.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The regular files below `src` (relative paths), sorted.
fn files(src: &Path) -> Vec<String> {
    list_rel(src)
        .into_iter()
        .filter(|r| {
            fs::symlink_metadata(src.join(r))
                .unwrap()
                .file_type()
                .is_file()
        })
        .collect()
}

fn tree_bytes(src: &Path) -> u64 {
    files(src)
        .iter()
        .map(|f| fs::metadata(src.join(f)).unwrap().len())
        .sum()
}

/// Changes the tree between runs: adds files (now and then in a new
/// directory, now and then a symlink), edits some in place or by
/// appending or truncating, removes some, and keeps it under 16 MiB.
fn mutate(rng: &mut Rng, src: &Path, round: u64) {
    for i in 0..1 + rng.below(3) {
        let size = 16_384 + rng.below(2_500_000) as usize;
        let dir = format!("d{}", rng.below(4));
        let p = src.join(dir).join(format!("r{round:03}-{i}.bin"));
        write(&p, &rand_bytes(rng.next(), size));
    }
    if rng.below(4) == 0 {
        let link = src.join(format!("link{round:03}"));
        std::os::unix::fs::symlink(format!("target-{}", rng.below(1000)), link).unwrap();
    }
    let all = files(src);
    for _ in 0..1 + rng.below(2) {
        let f = src.join(&all[rng.below(all.len() as u64) as usize]);
        let mut data = fs::read(&f).unwrap();
        match rng.below(3) {
            0 => {
                let at = rng.below(data.len() as u64) as usize;
                let patch = rand_bytes(rng.next(), 4096.min(data.len() - at));
                data[at..at + patch.len()].copy_from_slice(&patch);
            }
            1 => data.extend_from_slice(&rand_bytes(rng.next(), 70_000)),
            _ => data.truncate(data.len() / 2),
        }
        fs::write(&f, &data).unwrap();
        set_mtime(&f, 1_700_000_000_000_000_000 + rng.below(1 << 40) as i64);
    }
    let mut all = files(src);
    let mut removals = rng.below(2);
    while all.len() > 4 && (removals > 0 || tree_bytes(src) > 16 << 20) {
        let f = all.remove(rng.below(all.len() as u64) as usize);
        fs::remove_file(src.join(f)).unwrap();
        removals = removals.saturating_sub(1);
    }
}

/// When a run is killed.
#[derive(Clone, Copy)]
enum KillAt {
    /// This long after it started.
    Delay(Duration),
    /// Once this many packs are in storage.
    Packs(usize),
}

/// What one run did.
struct Run {
    killed: bool,
    /// The snapshot it saved (a killed run may have saved one first).
    snapshot: Option<String>,
    took: Duration,
}

/// Backs up `src` with the CLI, killing the run (SIGKILL) at `kill_at`
/// unless it ends first; a run that ends must succeed.
fn run_backup(repo: &Path, cache: &Path, src: &Path, kill_at: Option<KillAt>, what: &str) -> Run {
    let before = snapshot_names(repo);
    let start = Instant::now();
    let mut c = larder_cmd(repo, cache, &["backup", "--json", path_str(src)]);
    // A small sample budget, so kills also land around dictionary training.
    c.env("LARDER_DICT_SAMPLES", "65536");
    let mut child = spawn(c);
    let killed = kill_at.is_some_and(|at| {
        loop {
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            let now = match at {
                KillAt::Delay(d) => start.elapsed() >= d,
                KillAt::Packs(n) => pack_files(repo).0 >= n,
            };
            if now {
                child.kill().unwrap();
                break true;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    });
    let o = wait_bounded(child, what);
    let took = start.elapsed();
    if !killed {
        assert_eq!(o.code, 0, "{what}: {}", o.all());
        let id = snapshot_id_of(&o);
        return Run {
            killed,
            snapshot: Some(id),
            took,
        };
    }
    let new: Vec<String> = snapshot_names(repo).difference(&before).cloned().collect();
    assert!(new.len() <= 1, "{what}: {new:?}");
    Run {
        killed,
        snapshot: new.into_iter().next(),
        took,
    }
}

/// A snapshot and the manifest of the tree it was taken of.
struct Taken {
    id: String,
    tree: BTreeMap<String, String>,
}

#[test]
fn backups_killed_at_random_points_leave_a_sound_repository() {
    let seed = std::env::var("LARDER_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6b69_6c6c_u64);
    println!("kill loop seed: {seed} (set LARDER_KILL_SEED to change it)");
    let mut rng = Rng(seed);
    let t = super::cli_repo(); // 1 MiB packs
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    fill(&src, 40, 12, 512 << 10);

    let mut taken: Vec<Taken> = Vec::new();
    let mut kills = 0;
    // Kills after which packs were left for the next run to index.
    let mut left_packs = 0;
    // How long a complete run took lately: kill points spread over it.
    let mut run_len = Duration::from_millis(0);
    let mut round = 0u64;
    while kills < KILLS {
        assert!(
            round < 150,
            "only {kills} of {round} runs were killed mid-run"
        );
        if round > 0 {
            mutate(&mut rng, &src, round);
        }
        let tree = manifest(&src);
        // The first run, and about one in six, is left to finish; the
        // others are killed after a random delay, or as soon as a random
        // number (1 or 2) of their packs is in storage.
        let finish = round == 0 || rng.below(6) == 0;
        let kill_at = if rng.below(2) == 0 {
            KillAt::Delay(run_len.mul_f64(rng.below(1000) as f64 / 1000.0))
        } else {
            KillAt::Packs(pack_files(&repo).0 + 1 + rng.below(2) as usize)
        };
        let what = format!("round {round} (seed {seed})");
        let run = run_backup(&repo, &cache, &src, (!finish).then_some(kill_at), &what);
        if run.killed {
            kills += 1;
        } else {
            run_len = run.took;
        }
        if let Some(id) = run.snapshot {
            taken.push(Taken { id, tree });
        }
        assert_objects_whole(&repo);
        let chk = check_passes(&repo, &cache, false, &format!("after {what}"));
        if notices(&chk)
            .iter()
            .any(|n| n.contains("not in any index segment"))
        {
            left_packs += 1;
        }
        round += 1;
    }
    println!(
        "{kills} kills in {round} runs, {left_packs} of them leaving packs unindexed; {} \
         snapshots; {} temporary files left by killed runs",
        taken.len(),
        temp_files(&repo).len()
    );
    assert!(
        left_packs >= 5,
        "only {left_packs} kills landed while packs were being stored"
    );

    // A last complete run indexes what the last killed one left.
    mutate(&mut rng, &src, round);
    let tree = manifest(&src);
    let run = run_backup(&repo, &cache, &src, None, "the last backup");
    taken.push(Taken {
        id: run.snapshot.unwrap(),
        tree,
    });
    let chk = check_passes(&repo, &cache, true, "at the end");
    assert!(notices(&chk).is_empty(), "{}", chk.all());

    let r = t.open().unwrap();
    for (i, s) in taken.iter().enumerate() {
        let dest = base.path().join(format!("restored-{i}"));
        let rep = lib_restore(&r, &Id::from_hex(&s.id).unwrap(), &src, &dest);
        assert!(rep.errors.is_empty(), "snapshot {}: {:?}", s.id, rep.errors);
        assert_same_manifest(&s.tree, &manifest(&dest), &format!("snapshot {}", s.id));
        fs::remove_dir_all(&dest).unwrap();
    }
    let (packs, blobs) = assert_each_blob_stored_once(&r);
    println!("{packs} packs, {blobs} blobs, each stored once");
}
