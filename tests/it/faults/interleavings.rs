//! Two larder processes on one repository, at every point of one of them:
//! the first is held (by the fault shim) just after each of its opens in
//! the repository in turn, on a fresh copy of a prepared state each time,
//! while the second runs to its end; then the first is let go. Where
//! `concurrency`, `readers` and `beside_prune` try chosen moments (a lock,
//! a listing), this walks all of them. It found a backup failing because
//! a prune removed its lock's temporary file, and a prune stopping as
//! "corrupt" on the snapshot of a backup that ended beside it.
//!
//! Each time both must succeed (the second may find a lock it must not
//! run beside: exit 11), `check` passes, every snapshot either wrote
//! restores exactly, and prunes with no grace period afterwards leave a
//! repository that restores exactly and `check --read-data` reads whole.

use super::crash_points::{
    Ended, FORGET, backed_up, copy_state, hold_below, into_copy_source, paths, points,
    recovery_tree, restores_exactly, run_held, with_damaged_header, with_forgotten,
};
use super::{
    Out, assert_check_clean, assert_same_manifest, cat_of, check_passes, dumps_exactly, fill,
    larder_cmd, larder_ok, manifest, snapshot_id_of, snapshot_names, spawn, wait_bounded,
};
use crate::support::{pack_names, path_str};
use std::cell::{Cell, RefCell};
use std::fs;
use std::path::{Path, PathBuf};

/// For each open of `larder HELD` in the repository: on a fresh copy of
/// `state` (the copy its working directory, `cache` its cache), `held`
/// is held just after that open, `meanwhile(copy, what)` runs, `held` is
/// let go and must succeed, `check` must pass, and `after(copy, held's
/// output, what)` judges the rest. Returns how many opens `held` makes.
fn sweep(
    state: &Path,
    held: &[&str],
    meanwhile: impl FnMut(&Path, &str),
    after: impl FnMut(&Path, &Out, &str),
) -> u64 {
    sweep_under(state, "repo", held, meanwhile, after)
}

/// [`sweep`], holding `held` at its opens below the state's directory
/// `under` (`repo`, or another repository it reads).
fn sweep_under(
    state: &Path,
    under: &str,
    held: &[&str],
    meanwhile: impl FnMut(&Path, &str),
    mut after: impl FnMut(&Path, &Out, &str),
) -> u64 {
    sweep_outcomes(state, under, held, meanwhile, |dir, o, what| {
        assert_eq!(o.code, 0, "{what}: {}", o.all());
        check_passes(&dir.join("repo"), &dir.join("cache"), false, what);
        after(dir, o, what);
    })
}

/// [`sweep_under`] for a held command that may fail (losing to what ran
/// beside it): `after` judges its output, whatever its exit code.
fn sweep_outcomes(
    state: &Path,
    under: &str,
    held: &[&str],
    meanwhile: impl FnMut(&Path, &str),
    after: impl FnMut(&Path, &Out, &str),
) -> u64 {
    sweep_env(state, under, held, &[], meanwhile, after)
}

/// [`sweep_outcomes`], with `env` added to the held command's
/// environment.
fn sweep_env(
    state: &Path,
    under: &str,
    held: &[&str],
    env: &[(&str, &str)],
    mut meanwhile: impl FnMut(&Path, &str),
    mut after: impl FnMut(&Path, &Out, &str),
) -> u64 {
    let scratch = tempfile::tempdir().unwrap();
    let count = scratch.path().join("count");
    copy_state(state, &count);
    // For `copy`, whose source has the same passphrase.
    let mut env = env.to_vec();
    env.push(("LARDER_FROM_PASSWORD", crate::common::PASS));
    let (ended, opens) = run_held(&count, under, held, &env, None, scratch.path());
    match ended {
        Ended::Finished(o) => assert_eq!(o.code, 0, "{held:?} alone: {}", o.all()),
        Ended::Killed => panic!("{held:?} was held when only counting"),
    }
    // None would sweep nothing and pass: the shim must see the opens.
    assert!(opens > 0, "{held:?} opened nothing below {under}");
    for n in points(opens) {
        let dir = scratch.path().join(format!("at-{n}"));
        copy_state(state, &dir);
        let (repo, cache) = paths(&dir);
        let what = format!("{held:?} held after open {} of {opens}", n + 1);
        let hold = hold_below(&dir, under, scratch.path(), &n.to_string()).skip(n);
        let mut c = larder_cmd(&repo, &cache, held);
        c.current_dir(&dir).envs(env.iter().copied());
        hold.inject(&mut c);
        let mut child = spawn(c);
        hold.wait_held(&mut child, &what);
        meanwhile(&dir, &what);
        hold.release();
        let o = wait_bounded(child, &what);
        after(&dir, &o, &what);
        fs::remove_dir_all(&dir).unwrap();
    }
    opens
}

/// `larder ARGS` in `dir` as a second process (its own cache).
fn second(dir: &Path, args: &[&str]) -> Out {
    let repo = dir.join("repo");
    let mut c = larder_cmd(&repo, &dir.join("cache-2"), args);
    c.current_dir(dir);
    wait_bounded(spawn(c), &format!("beside: larder {args:?}"))
}

/// [`second`], which must succeed.
fn second_ok(dir: &Path, args: &[&str], what: &str) -> Out {
    let o = second(dir, args);
    assert_eq!(o.code, 0, "{what}: beside: {}", o.all());
    o
}

/// `forget … --prune` beside a held command: it runs (counted in
/// `pruned`) or finds a lock it must not run beside (exit 11).
fn prune_beside(dir: &Path, what: &str, pruned: &Cell<usize>) {
    let p = second(dir, FORGET);
    assert!(p.code == 0 || p.code == 11, "{what}: {}", p.all());
    pruned.set(pruned.get() + usize::from(p.code == 0));
}

/// Prunes with no grace period, twice (the second deletes what the first
/// marked while nothing else runs); then `id` restores exactly.
fn prunes_keep(dir: &Path, id: &str, src: &Path, want: &Want, what: &str) {
    let (repo, cache) = paths(dir);
    for _ in 0..2 {
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
    }
    assert!(
        snapshot_names(&repo).contains(id),
        "{what}: snapshot {id} is gone after the prunes"
    );
    restores_exactly(dir, id, src, want, what);
}

type Want = std::collections::BTreeMap<String, String>;

/// A prepared state: `rounds` backups of `src` (see [`backed_up`]) in
/// `state`, all inside `base` (removed on drop); `want` is the manifest of
/// `src` as the last backup took it.
struct Prepared {
    base: tempfile::TempDir,
    src: PathBuf,
    state: PathBuf,
    want: Want,
}

fn prepared(rounds: u64) -> Prepared {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, want) = backed_up(base.path(), &src, rounds);
    Prepared {
        base,
        src,
        state,
        want,
    }
}

/// The newest snapshot `larder snapshots --json ARGS` lists in `repo`.
fn newest(repo: &Path, cache: &Path, args: &[&str]) -> serde_json::Value {
    let o = larder_ok(repo, cache, &[&["snapshots", "--json"], args].concat());
    let v = crate::support::json_lines(&o.out);
    // Oldest first.
    v[0].as_array().unwrap().last().unwrap().clone()
}

/// Writes back (into `src/r0`) data that only the oldest snapshot of
/// [`backed_up`]'s three holds, so a backup finds it stored in packs a
/// prune that keeps the newest snapshot marks or deletes.
fn bring_back_old_data(src: &Path) -> Want {
    let before = manifest(src);
    fill(&src.join("r0"), 10, 4, 200 << 10);
    let after = manifest(src);
    assert_ne!(before, after, "the tree did not change");
    after
}

/// A backup held at each open beside `forget … --prune`: the backup
/// completes and its snapshot restores exactly, before and after more
/// prunes.
#[test]
fn a_backup_at_each_open_beside_a_prune() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(3);
    let want = bring_back_old_data(&src);
    let pruned = Cell::new(0);
    let args = ["backup", "--json", path_str(&src)];
    let opens = sweep(
        &state,
        &args,
        |dir, what| prune_beside(dir, what, &pruned),
        |dir, b, what| {
            let id = snapshot_id_of(b);
            restores_exactly(dir, &id, &src, &want, what);
            prunes_keep(dir, &id, &src, &want, what);
        },
    );
    println!(
        "a backup with {opens} opens: pruned beside it at {} points",
        pruned.get()
    );
    assert!(pruned.get() > 0, "no prune ran beside the held backup");
}

/// `forget … --prune` held at each open beside a backup that ends first:
/// both succeed; the backup's snapshot is kept and restores exactly.
#[test]
fn a_prune_at_each_open_beside_a_backup() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(3);
    let want = bring_back_old_data(&src);
    let id = RefCell::new(String::new());
    sweep(
        &state,
        FORGET,
        |dir, what| {
            let b = second_ok(dir, &["backup", "--json", path_str(&src)], what);
            *id.borrow_mut() = snapshot_id_of(&b);
        },
        |dir, _, what| prunes_keep(dir, &id.borrow(), &src, &want, what),
    );
}

/// A restore of the newest snapshot held at each open beside `forget …
/// --prune` (which deletes the other snapshots' packs and repacks those
/// the newest shares with them): it restores exactly. Both regimes occur:
/// the prune deletes packs when the restore holds no lock yet, and leaves
/// them while it does.
#[test]
fn a_restore_at_each_open_beside_a_prune() {
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(3);
    let (repo, cache) = paths(&state);
    let newest = newest(&repo, &cache, &[])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (deleted, kept) = (Cell::new(0), Cell::new(0));
    let args = ["restore", "-q", newest.as_str(), "--target", "back"];
    let opens = sweep(
        &state,
        &args,
        |dir, what| {
            let before = pack_names(&dir.join("repo"));
            second_ok(dir, FORGET, what);
            let gone = before.difference(&pack_names(&dir.join("repo"))).count();
            let n = if gone > 0 { &deleted } else { &kept };
            n.set(n.get() + 1);
        },
        |dir, _, what| {
            let got = dir.join("back").join(src.strip_prefix("/").unwrap());
            assert_same_manifest(&want, &manifest(&got), what);
            fs::remove_dir_all(dir.join("back")).unwrap();
            prunes_keep(dir, &newest, &src, &want, what);
        },
    );
    println!(
        "a restore with {opens} opens: the prune deleted packs beside it at {} points and \
         kept them at {}",
        deleted.get(),
        kept.get()
    );
    assert!(deleted.get() > 0 && kept.get() > 0);
}

/// Two backups at once, of trees that share data: one held at each of its
/// opens while the other runs. Both snapshots restore exactly.
#[test]
fn a_backup_at_each_open_beside_another_backup() {
    let Prepared {
        base, src, state, ..
    } = prepared(1);
    fill(&src.join("new"), 20, 4, 150 << 10);
    let want = manifest(&src);
    let other = base.path().join("other");
    fill(&other, 20, 4, 150 << 10); // the same files as src/new
    fill(&other.join("own"), 21, 3, 100 << 10);
    let want_other = manifest(&other);
    let other_id = RefCell::new(String::new());
    sweep(
        &state,
        &["backup", "--json", path_str(&src)],
        |dir, what| {
            let b = second_ok(dir, &["backup", "--json", path_str(&other)], what);
            *other_id.borrow_mut() = snapshot_id_of(&b);
        },
        |dir, b, what| {
            restores_exactly(dir, &snapshot_id_of(b), &src, &want, what);
            restores_exactly(dir, &other_id.borrow(), &other, &want_other, what);
        },
    );
}

/// A backup held at each open while every snapshot, its parent included,
/// is forgotten and pruned at once: it completes (reading again what its
/// parent no longer vouches for) and restores exactly.
#[test]
fn a_backup_at_each_open_beside_forgetting_its_parent() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(2);
    fill(&src.join("d1"), 30, 2, 30 << 10);
    let want = manifest(&src);
    // The snapshots before the backup (not the one it may have written by
    // then).
    let ids = snapshot_names(&state.join("repo"));
    sweep(
        &state,
        &["backup", "--json", path_str(&src)],
        |dir, what| {
            let mut args = vec!["forget", "--prune", "--keep-delete", "0s"];
            args.extend(ids.iter().map(String::as_str));
            second_ok(dir, &args, what);
        },
        |dir, b, what| {
            let id = snapshot_id_of(b);
            restores_exactly(dir, &id, &src, &want, what);
            prunes_keep(dir, &id, &src, &want, what);
        },
    );
}

/// `check` held at each open beside `forget … --prune`: it finds no
/// error (what the prune removed under it is at most a notice).
#[test]
fn a_check_at_each_open_beside_a_prune() {
    let Prepared {
        base: _base, state, ..
    } = prepared(3);
    sweep(
        &state,
        &["check"],
        |dir, what| {
            second_ok(dir, FORGET, what);
        },
        |_, c, what| assert_check_clean(c, what),
    );
}

/// `check` held at each open beside a backup that ends first: it finds
/// no error (the backup's new snapshot, packs and index included).
#[test]
fn a_check_at_each_open_beside_a_backup() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(3);
    let want = bring_back_old_data(&src);
    sweep(
        &state,
        &["check", "--read-data"],
        |dir, what| {
            second_ok(dir, &["backup", "--json", path_str(&src)], what);
        },
        |dir, c, what| {
            assert_check_clean(c, what);
            restores_exactly(dir, "latest", &src, &want, what);
        },
    );
}

/// `restore latest` held at each open of the prepared `state` while
/// `meanwhile` changes which snapshot is newest: each time it restores,
/// exactly, the tree `src` was as `old` or as `new` records it, and both
/// happen across the points. Prints how often each.
fn restore_latest_is_one_of(
    state: &Path,
    src: &Path,
    old: &Want,
    new: &Want,
    meanwhile: impl FnMut(&Path, &str),
    label: &str,
) {
    let (olds, news) = (Cell::new(0), Cell::new(0));
    sweep(
        state,
        &["restore", "-q", "latest", "--target", "back"],
        meanwhile,
        |dir, _, what| {
            let got = manifest(&dir.join("back").join(src.strip_prefix("/").unwrap()));
            let (n, want) = if got == *new {
                (&news, new)
            } else {
                (&olds, old)
            };
            n.set(n.get() + 1);
            assert_same_manifest(want, &got, what);
        },
    );
    println!(
        "restore latest beside {label}: the old {} times, the new {}",
        olds.get(),
        news.get()
    );
    assert!(
        olds.get() > 0 && news.get() > 0,
        "{label}: one side never happened"
    );
}

/// `restore latest` held at each open beside a backup that ends first:
/// it restores the snapshot that was newest when it picked one, exactly
/// (the backup's, when it picks after the backup ended).
#[test]
fn a_restore_of_latest_at_each_open_beside_a_backup() {
    let Prepared {
        base: _base,
        src,
        state,
        want: before,
    } = prepared(3);
    let after = bring_back_old_data(&src);
    let backup = |dir: &Path, what: &str| {
        second_ok(dir, &["backup", "--json", path_str(&src)], what);
    };
    restore_latest_is_one_of(&state, &src, &before, &after, backup, "a backup");
}

/// Commands that read snapshots (`ls`, `diff`, `find`, `stats`, `dump`),
/// each held at each open beside a backup that ends first:
/// each succeeds, on the snapshot that was newest when it picked one, and
/// prints what it prints for that snapshot named by its id.
#[test]
fn readers_at_each_open_beside_a_backup() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(3);
    bring_back_old_data(&src);
    let ids = snapshot_names(&state.join("repo"));
    let (repo, cache) = paths(&state);
    let old_latest = newest(&repo, &cache, &[])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let file = format!("{}/r0/d0/f000.bin", path_str(&src));
    let oldest = ids.iter().next().unwrap().clone();
    let readers: Vec<Vec<&str>> = vec![
        vec!["ls", "latest"],
        vec!["diff", &oldest, "latest"],
        vec!["find", "f00*"],
        vec!["stats", "latest"],
        // Into a file: run_held reads no output until the command ends.
        vec!["dump", "--target", "dumped", "latest", &file],
    ];
    for args in &readers {
        sweep(
            &state,
            args,
            |dir, what| {
                second_ok(dir, &["backup", "--json", path_str(&src)], what);
            },
            |dir, o, what| {
                // The same command on the snapshot it must have read: the
                // one newest before the backup, or the backup's.
                let (repo, cache) = paths(dir);
                let new_latest: Vec<String> = snapshot_names(&repo)
                    .into_iter()
                    .filter(|n| !ids.contains(n))
                    .collect();
                let same = [&old_latest, &new_latest[0]].iter().any(|id| {
                    let named: Vec<&str> = args
                        .iter()
                        .map(|a| if *a == "latest" { id.as_str() } else { a })
                        .collect();
                    let _ = fs::remove_file(dir.join("dumped-0"));
                    let named: Vec<&str> = named
                        .iter()
                        .map(|a| if *a == "dumped" { "dumped-0" } else { a })
                        .collect();
                    let mut c = larder_cmd(&repo, &cache, &named);
                    c.current_dir(dir);
                    let again = wait_bounded(spawn(c), "the same, by id");
                    assert_eq!(again.code, 0, "{what}: {named:?}: {}", again.all());
                    match args[0] {
                        // `find` lists every snapshot: the backup's too.
                        "find" => true,
                        "dump" => {
                            fs::read(dir.join("dumped")).unwrap()
                                == fs::read(dir.join("dumped-0")).unwrap()
                        }
                        _ => again.out == o.out,
                    }
                });
                assert!(
                    same,
                    "{what}: printed what neither snapshot gives:\n{}",
                    o.out
                );
            },
        );
    }
}

/// Commands that rewrite snapshots (`tag`, `rewrite --forget`, `forget`)
/// held at each open beside a backup that ends first: each succeeds, and
/// the backup's snapshot is left alone and restores exactly; every
/// snapshot left restores.
#[test]
fn snapshot_rewriters_at_each_open_beside_a_backup() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(3);
    let want = bring_back_old_data(&src);
    let ids = snapshot_names(&state.join("repo"));
    let oldest = ids.iter().next().unwrap().clone();
    let rewriters: Vec<Vec<&str>> = vec![
        vec!["tag", "--add", "x", &oldest],
        // `d0` is in every snapshot (`r1` is not in the first round's).
        vec!["rewrite", "--exclude", "d0", "--forget", &oldest],
        vec!["forget", "--keep-last", "2"],
    ];
    for args in &rewriters {
        let backup_id = RefCell::new(String::new());
        sweep(
            &state,
            args,
            |dir, what| {
                let b = second_ok(dir, &["backup", "--json", path_str(&src)], what);
                *backup_id.borrow_mut() = snapshot_id_of(&b);
            },
            |dir, _, what| {
                let (repo, cache) = paths(dir);
                let left = snapshot_names(&repo);
                assert!(
                    left.contains(&*backup_id.borrow()),
                    "{what}: the backup's snapshot is gone"
                );
                for id in &left {
                    let back = dir.join(format!("back-{id}"));
                    let o = larder_ok(
                        &repo,
                        &cache,
                        &["restore", "-q", id, "--target", path_str(&back)],
                    );
                    assert!(o.err.is_empty(), "{what}: restore {id}: {}", o.all());
                }
                restores_exactly(dir, &backup_id.borrow(), &src, &want, what);
            },
        );
    }
}

/// `forget … --prune` held at each open beside `tag`, which saves the
/// newest snapshot anew and removes the old object: both succeed (the tag
/// finds the forget's lock, exit 11, while the forget holds it, and runs
/// at the prune's points) and the tagged snapshot restores exactly,
/// before and after more prunes.
#[test]
fn a_prune_at_each_open_beside_a_tag() {
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(3);
    let codes = RefCell::new(Vec::new());
    sweep(
        &state,
        FORGET,
        |dir, what| {
            let t = second(dir, &["tag", "--add", "kept", "latest"]);
            assert!(t.code == 0 || t.code == 11, "{what}: tag: {}", t.all());
            codes.borrow_mut().push(t.code);
        },
        |dir, _, what| {
            let (repo, cache) = paths(dir);
            // The forget keeps one snapshot: the tagged one if tag ran.
            let mut args = vec!["snapshots", "--json"];
            if codes.borrow().last() == Some(&0) {
                args.extend(["--tag", "kept"]);
            }
            let o = larder_ok(&repo, &cache, &args);
            let v = crate::support::json_lines(&o.out);
            let tagged = v[0].as_array().unwrap();
            assert_eq!(tagged.len(), 1, "{what}: {args:?}: {}", o.out);
            let id = tagged[0]["id"].as_str().unwrap().to_string();
            prunes_keep(dir, &id, &src, &want, what);
        },
    );
    let codes = codes.borrow();
    println!("tag beside a forget --prune held at each open: {codes:?}");
    assert!(codes.contains(&0) && codes.contains(&11), "{codes:?}");
}

/// `copy` held at each of its opens in the repository it copies from,
/// while `forget … --prune` runs there (deleting the other snapshots'
/// packs and repacking the rest): the copy completes, and the newest
/// snapshot it holds restores exactly.
#[test]
fn a_copy_at_each_open_of_its_source_beside_a_prune_there() {
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(3);
    into_copy_source(&state);
    let copied = Cell::new(0);
    sweep_under(
        &state,
        "from",
        &["copy", "--from-repo", "from"],
        |dir, what| {
            let mut c = larder_cmd(&dir.join("from"), &dir.join("cache-2"), FORGET);
            c.current_dir(dir);
            let p = wait_bounded(spawn(c), "the prune of the source");
            assert_eq!(p.code, 0, "{what}: the prune of the source: {}", p.all());
        },
        |dir, _, what| {
            let n = snapshot_names(&dir.join("repo")).len();
            assert!((1..=3).contains(&n), "{what}: {n} snapshots copied");
            copied.set(copied.get().max(n));
            restores_exactly(dir, "latest", &src, &want, what);
        },
    );
    assert_eq!(copied.get(), 3, "no copy began before the prune");
}

/// `copy` into a repository held at each of its opens there while a
/// backup into the same repository runs to its end: both succeed, and the
/// copied newest snapshot and the backup's each restore exactly.
#[test]
fn a_copy_at_each_open_beside_a_backup_into_the_same_repository() {
    let Prepared {
        base,
        src,
        state,
        want: want_copied,
    } = prepared(2);
    let (_, cache) = into_copy_source(&state);
    let other = base.path().join("other");
    fill(&other, 10, 4, 200 << 10); // data the source holds too
    let want_other = manifest(&other);
    let (from_newest, backup_id) = (RefCell::new(String::new()), RefCell::new(String::new()));
    *from_newest.borrow_mut() = newest(&state.join("from"), &cache, &[])["time"]
        .as_str()
        .unwrap()
        .to_string();
    sweep(
        &state,
        &["copy", "--from-repo", "from"],
        |dir, what| {
            let b = second_ok(dir, &["backup", "--json", path_str(&other)], what);
            *backup_id.borrow_mut() = snapshot_id_of(&b);
        },
        |dir, _, what| {
            let (repo, cache) = paths(dir);
            restores_exactly(dir, &backup_id.borrow(), &other, &want_other, what);
            let o = larder_ok(
                &repo,
                &cache,
                &["snapshots", "--json", "--path", path_str(&src)],
            );
            let v = crate::support::json_lines(&o.out);
            let copied = v[0].as_array().unwrap();
            assert_eq!(copied.len(), 2, "{what}: copied snapshots: {}", o.out);
            let newest = copied.last().unwrap();
            assert_eq!(
                newest["time"].as_str().unwrap(),
                from_newest.borrow().as_str()
            );
            let id = newest["id"].as_str().unwrap().to_string();
            restores_exactly(dir, &id, &src, &want_copied, what);
        },
    );
}

/// A backup held at each open while `repair index` (an exclusive lock)
/// rewrites `index/` beside it, or is refused (exit 11) once the backup
/// holds its lock: the backup completes and restores exactly.
#[test]
fn a_backup_at_each_open_beside_repair_index() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(3);
    let want = bring_back_old_data(&src);
    let repaired = Cell::new(0);
    sweep(
        &state,
        &["backup", "--json", path_str(&src)],
        |dir, what| {
            let r = second(dir, &["repair", "index"]);
            assert!(
                r.code == 0 || r.code == 11,
                "{what}: repair index: {}",
                r.all()
            );
            repaired.set(repaired.get() + usize::from(r.code == 0));
        },
        |dir, b, what| {
            let id = snapshot_id_of(b);
            restores_exactly(dir, &id, &src, &want, what);
            prunes_keep(dir, &id, &src, &want, what);
        },
    );
    assert!(
        repaired.get() > 0,
        "repair index never ran beside the backup"
    );
}

/// `forget … --prune` held at each open while `copy` brings snapshots
/// from another repository into this one: both succeed, and the newest
/// copied snapshot restores exactly, before and after more prunes.
#[test]
fn a_prune_at_each_open_beside_a_copy_into_the_repository() {
    // The repository first holds two older snapshots of another tree.
    let early = tempfile::tempdir().unwrap();
    let (dest, dest_cache) = (early.path().join("repo"), early.path().join("cache"));
    drop(crate::common::init_at(&dest, &dest_cache));
    let other = early.path().join("other");
    for round in 0..2 {
        fill(&other, 50 + round, 3, 100 << 10);
        larder_ok(&dest, &dest_cache, &["backup", "-q", path_str(&other)]);
    }
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(3);
    let (repo, cache) = paths(&state);
    fs::rename(&repo, state.join("from")).unwrap();
    copy_state(&dest, &repo);
    let newest_time = newest(&state.join("from"), &cache, &[])["time"]
        .as_str()
        .unwrap()
        .to_string();
    let copy = |dir: &Path| {
        let args = ["copy", "--from-repo", "from"];
        let mut c = larder_cmd(&dir.join("repo"), &dir.join("cache-2"), &args);
        c.current_dir(dir)
            .env("LARDER_FROM_PASSWORD", crate::common::PASS);
        wait_bounded(spawn(c), "the copy")
    };
    let codes = RefCell::new(Vec::new());
    sweep(
        &state,
        FORGET,
        |dir, what| {
            // 11: the forget held its snapshot-changing lock when the copy
            // came to save its snapshots.
            let o = copy(dir);
            assert!(o.code == 0 || o.code == 11, "{what}: the copy: {}", o.all());
            codes.borrow_mut().push(o.code);
        },
        |dir, _, what| {
            let (repo, cache) = paths(dir);
            if codes.borrow().last() == Some(&11) {
                let o = copy(dir);
                assert_eq!(o.code, 0, "{what}: the copy again: {}", o.all());
            }
            let n = newest(&repo, &cache, &[]);
            assert_eq!(n["time"].as_str().unwrap(), newest_time, "{what}: newest");
            let id = n["id"].as_str().unwrap().to_string();
            prunes_keep(dir, &id, &src, &want, what);
        },
    );
    let codes = codes.borrow();
    println!("a copy beside a forget --prune held at each open: {codes:?}");
    assert!(codes.contains(&0), "{codes:?}");
}

/// `restore latest` held at each open while `rewrite --exclude r1
/// --forget` replaces the newest snapshot and a prune with no grace period
/// deletes what only the old one used: it restores, exactly, either the
/// snapshot as it was or as rewritten.
#[test]
fn a_restore_at_each_open_beside_a_rewrite_and_prune() {
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(3);
    let mut rewritten = want.clone();
    rewritten.retain(|k, _| k != "r1" && !k.starts_with("r1/"));
    assert_ne!(rewritten, want, "nothing to exclude");
    let rewrite = |dir: &Path, what: &str| {
        second_ok(
            dir,
            &["rewrite", "--exclude", "r1", "--forget", "latest"],
            what,
        );
        second_ok(
            dir,
            &["prune", "--keep-delete", "0s", "--max-unused", "0"],
            what,
        );
    };
    restore_latest_is_one_of(&state, &src, &want, &rewritten, rewrite, "a rewrite");
}

/// `forget … --prune` held at each open while the newest snapshot is
/// restored beside it: both succeed, and the restore is exact.
#[test]
fn a_prune_at_each_open_beside_a_restore() {
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(3);
    let (repo, cache) = paths(&state);
    let id = newest(&repo, &cache, &[])["id"]
        .as_str()
        .unwrap()
        .to_string();
    sweep(
        &state,
        FORGET,
        |dir, what| {
            second_ok(dir, &["restore", "-q", &id, "--target", "back"], what);
            let got = manifest(&dir.join("back").join(src.strip_prefix("/").unwrap()));
            assert_same_manifest(&want, &got, what);
        },
        |dir, _, what| prunes_keep(dir, &id, &src, &want, what),
    );
}

/// The ids of the snapshots that stand for snapshot `id` in `dir`'s
/// repository: itself, or what `tag` and `rewrite` saved in its place
/// (their `original`).
fn standing_for(dir: &Path, id: &str) -> Vec<serde_json::Value> {
    let (repo, cache) = paths(dir);
    let all = larder_ok(&repo, &cache, &["snapshots", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&all.out).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"] == id || s["original"] == id)
        .cloned()
        .collect()
}

/// Two commands that replace or remove one snapshot, one held at each
/// open while the other runs to its end: `tag` (and `rewrite --forget`)
/// beside `forget` of the snapshot it changes, and `tag` beside another
/// `tag` of it, and `rewrite --new-host` beside a `tag`. A snapshot
/// that `forget` removed does not come back (as a `tag` saved after it
/// read the snapshot would bring it), and two changes of one snapshot do
/// not leave two snapshots in its place. Either command may lose with
/// exit 11, or find the snapshot gone, as long as it says so.
#[test]
fn snapshot_changes_at_each_open_beside_each_other() {
    let Prepared {
        base: _base, state, ..
    } = prepared(2);
    // The first by name: any one of the two.
    let first = snapshot_names(&state.join("repo"))
        .into_iter()
        .next()
        .unwrap();
    let tag_x: &[&str] = &["tag", "--add", "x", &first];
    // `d0` is in every snapshot, so the rewrite always saves a new one.
    let rewrite: &[&str] = &["rewrite", "--exclude", "d0", "--forget", &first];
    // A metadata rewrite saves a new one without writing a tree.
    let rename: &[&str] = &["rewrite", "--new-host", "renamed", "--forget", &first];
    let pairs: [(&[&str], Vec<&str>); 5] = [
        (tag_x, vec!["forget", &first]),
        (&["forget", &first], vec!["tag", "--add", "x", &first]),
        (tag_x, vec!["tag", "--add", "y", &first]),
        (rewrite, vec!["forget", &first]),
        (rename, vec!["tag", "--add", "y", &first]),
    ];
    for (held, beside) in pairs {
        let forgets = held[0] == "forget" || beside[0] == "forget";
        let codes = RefCell::new(Vec::new());
        let vanished = Cell::new(0);
        sweep_outcomes(
            &state,
            "repo",
            held,
            |dir, _| {
                let o = second(dir, &beside);
                codes.borrow_mut().push(o.code);
            },
            |dir, o, what| {
                let b = codes.borrow().last().copied().unwrap();
                let (repo, cache) = paths(dir);
                check_passes(&repo, &cache, false, what);
                let left = standing_for(dir, &first);
                // 3: a forget that found the snapshot it names gone.
                for code in [o.code, b] {
                    assert!(
                        [0, 1, 3, 11].contains(&code),
                        "{what}: exit {code}: {}",
                        o.all()
                    );
                }
                let forgotten = forgets
                    && ((held[0] == "forget" && o.code == 0) || (beside[0] == "forget" && b == 0));
                if forgotten {
                    assert!(
                        left.is_empty(),
                        "{what} (beside: {beside:?}, exit {b}): a forgotten snapshot came back: {left:?}\n{}",
                        o.all()
                    );
                } else {
                    assert_eq!(
                        left.len(),
                        1,
                        "{what} (beside: {beside:?}, exit {b}): in its place: {left:?}\n{}",
                        o.all()
                    );
                }
                // A held command that lost says why: its snapshot was gone
                // when it chose (no snapshot), or by the time it held its
                // lock (left as it is).
                if o.code == 1 {
                    let late = o.err.contains("removed or replaced by another process");
                    assert!(late || o.err.contains("no snapshot"), "{what}: {}", o.all());
                    vanished.set(vanished.get() + usize::from(late));
                }
            },
        );
        println!(
            "{held:?} beside {beside:?}: exits beside {:?}; the held one's snapshot gone \
             under its lock {} times",
            codes.borrow(),
            vanished.get()
        );
        if held[0] != "forget" {
            assert!(vanished.get() > 0, "{held:?} beside {beside:?}: never gone");
        }
        // Both regimes: the other ran whole, or found this one's lock.
        let codes = codes.borrow();
        assert!(
            codes.contains(&11) && codes.iter().any(|c| *c != 11),
            "{held:?} beside {beside:?}: exits {codes:?}"
        );
    }
}

/// `unlock` beside a backup, a `forget --prune` and a `tag`, each held at
/// each open: it removes no lock (the held command's, once written, is
/// live and kept, with its reason), and the held command completes.
#[test]
fn unlock_beside_commands_held_at_each_open_removes_no_live_lock() {
    let Prepared {
        base: _base,
        src,
        state,
        ..
    } = prepared(2);
    let backup = ["backup", "--json", path_str(&src)];
    let tag: &[&str] = &["tag", "--add", "x", "latest"];
    for held in [&backup[..], FORGET, tag] {
        let kept = Cell::new(0);
        sweep(
            &state,
            held,
            |dir, what| {
                let u = second_ok(dir, &["--json", "unlock"], what);
                let r: serde_json::Value = serde_json::from_str(&u.out).unwrap();
                let removed = r["removed"].as_array().unwrap();
                assert!(removed.is_empty(), "{what}: unlock removed {removed:?}");
                let k = r["kept"].as_array().unwrap();
                assert!(k.len() <= 1, "{what}: kept {k:?}");
                for l in k {
                    assert_eq!(l["stale"], false, "{what}: {l}");
                    assert!(l["reason"].as_str().unwrap().contains("running"), "{l}");
                }
                kept.set(kept.get() + k.len());
            },
            |_, _, _| {},
        );
        println!("{held:?}: unlock kept its lock at {} points", kept.get());
        assert!(kept.get() > 0, "{held:?}: never held beside a live lock");
    }
}

/// Two `copy`s of one source into one repository, one held at each of its
/// opens there while the other runs to its end: each source snapshot is
/// there once (not once per copy), and the newest restores exactly.
#[test]
fn a_copy_at_each_open_beside_the_same_copy() {
    let Prepared {
        base: _base,
        src,
        state,
        want,
    } = prepared(2);
    into_copy_source(&state);
    let args = ["copy", "--from-repo", "from"];
    let codes = RefCell::new(Vec::new());
    sweep_outcomes(
        &state,
        "repo",
        &args,
        |dir, _| {
            let mut c = larder_cmd(&dir.join("repo"), &dir.join("cache-2"), &args);
            c.current_dir(dir)
                .env("LARDER_FROM_PASSWORD", crate::common::PASS);
            let o = wait_bounded(spawn(c), "the other copy");
            codes.borrow_mut().push(o.code);
        },
        |dir, o, what| {
            let b = *codes.borrow().last().unwrap();
            assert!(
                [0, 11].contains(&o.code) && [0, 11].contains(&b) && o.code + b < 22,
                "{what}: exits {} and {b}: {}",
                o.code,
                o.all()
            );
            let (repo, cache) = paths(dir);
            check_passes(&repo, &cache, false, what);
            let n = snapshot_names(&repo).len();
            assert_eq!(
                n,
                2,
                "{what} (the other exited {b}): {n} snapshots\n{}",
                o.all()
            );
            restores_exactly(dir, "latest", &src, &want, what);
        },
    );
    println!(
        "a copy beside the same copy: exits beside {:?}",
        codes.borrow()
    );
}

/// Two first backups into an empty repository, each training and storing
/// a compression dictionary from its documents, one held at each open
/// while the other runs to its end: both succeed, each snapshot restores
/// exactly, and `check --read-data` reads every blob, whichever
/// dictionary it was made with.
#[test]
fn a_first_backup_at_each_open_beside_another_first_backup() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, _) = backed_up(base.path(), &src, 0);
    crate::dictionary::make_docs(&src.join("docs"), 3, 120);
    let want = manifest(&src);
    let other = base.path().join("other");
    crate::dictionary::make_docs(&other.join("docs"), 4, 120);
    fill(&other, 5, 3, 50 << 10);
    let want_other = manifest(&other);
    let budget = ("LARDER_DICT_SAMPLES", crate::dictionary::BUDGET);
    let other_id = RefCell::new(String::new());
    let dicts = RefCell::new(Vec::new());
    sweep_env(
        &state,
        "repo",
        &["backup", "--json", path_str(&src)],
        &[budget],
        |dir, what| {
            let args = ["backup", "--json", path_str(&other)];
            let mut c = larder_cmd(&dir.join("repo"), &dir.join("cache-2"), &args);
            c.current_dir(dir).env(budget.0, budget.1);
            let b = wait_bounded(spawn(c), "the other backup");
            assert_eq!(b.code, 0, "{what}: the other backup: {}", b.all());
            *other_id.borrow_mut() = snapshot_id_of(&b);
        },
        |dir, b, what| {
            assert_eq!(b.code, 0, "{what}: {}", b.all());
            dicts
                .borrow_mut()
                .push(super::objects(&dir.join("repo"), "dicts"));
            restores_exactly(dir, &snapshot_id_of(b), &src, &want, what);
            restores_exactly(dir, &other_id.borrow(), &other, &want_other, what);
        },
    );
    let dicts = dicts.borrow();
    println!("two first backups: dictionaries stored {dicts:?}");
    assert!(dicts.iter().all(|n| (1..=2).contains(n)), "{dicts:?}");
}

/// `key passwd` held at each open while a command opens the repository
/// with the old passphrase, and with the new one: each open either works
/// or fails as a wrong passphrase (exit 12), never on a key file that
/// vanished between its listing and its read; and `passwd` completes.
#[test]
fn opens_beside_a_key_passwd_at_each_open() {
    let Prepared { base, state, .. } = prepared(1);
    let new_pass = base.path().join("new-pass");
    fs::write(&new_pass, "another passphrase\n").unwrap();
    let outcomes = RefCell::new(Vec::new());
    sweep_outcomes(
        &state,
        "repo",
        &["key", "passwd", "--new-password-file", path_str(&new_pass)],
        |dir, what| {
            for pass in [crate::common::PASS, "another passphrase"] {
                let mut c = larder_cmd(&dir.join("repo"), &dir.join("cache-2"), &["snapshots"]);
                c.env("LARDER_PASSWORD", pass);
                let o = wait_bounded(spawn(c), "snapshots beside key passwd");
                assert!(
                    o.code == 0 || (o.code == 12 && o.err.contains("password")),
                    "{what}: with {pass:?}: {}",
                    o.all()
                );
                outcomes
                    .borrow_mut()
                    .push((pass == crate::common::PASS, o.code));
            }
        },
        |dir, p, what| {
            assert_eq!(p.code, 0, "{what}: {}", p.all());
            let mut c = larder_cmd(&dir.join("repo"), &dir.join("cache-2"), &["check"]);
            c.env("LARDER_PASSWORD", "another passphrase");
            let o = wait_bounded(spawn(c), "check after key passwd");
            assert_check_clean(&o, what);
        },
    );
    let o = outcomes.borrow();
    println!("opens beside key passwd (old passphrase?, exit): {o:?}");
    assert!(o.contains(&(true, 0)) && o.contains(&(false, 0)), "{o:?}");
}

/// Prunes with no grace period, twice; then snapshot `id`'s stream
/// `name` dumps exactly and `check --read-data` passes.
fn prunes_keep_stream(dir: &Path, id: &str, name: &str, want: &[u8], what: &str) {
    let (repo, cache) = paths(dir);
    for _ in 0..2 {
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
    }
    dumps_exactly(&repo, &cache, id, name, want, what);
    check_passes(&repo, &cache, true, what);
}

/// The prepared state, with data only its oldest snapshot holds written
/// back into `src/r0`, and a command that writes that data (`cat` of
/// `src/r0`'s files) with what it writes.
fn stream_state() -> (Prepared, Vec<String>, Vec<u8>) {
    let p = prepared(3);
    bring_back_old_data(&p.src);
    let (command, data) = cat_of(&p.src.join("r0"));
    (p, command, data)
}

/// `backup --stdin-from-command` (its stream: data only the oldest
/// snapshot holds) held at each open beside `forget … --prune`, which
/// deletes or repacks the packs that data is in: the backup completes and
/// its stream dumps exactly, before and after more prunes.
#[test]
fn a_command_stream_backup_at_each_open_beside_a_prune() {
    let (
        Prepared {
            base: _base, state, ..
        },
        command,
        data,
    ) = stream_state();
    let mut args = vec![
        "backup",
        "--json",
        "--stdin-filename",
        "r0.cat",
        "--stdin-from-command",
        "--",
    ];
    args.extend(command.iter().map(String::as_str));
    let pruned = Cell::new(0);
    let opens = sweep(
        &state,
        &args,
        |dir, what| prune_beside(dir, what, &pruned),
        |dir, b, what| {
            let id = snapshot_id_of(b);
            let (repo, cache) = paths(dir);
            dumps_exactly(&repo, &cache, &id, "r0.cat", &data, what);
            prunes_keep_stream(dir, &id, "r0.cat", &data, what);
        },
    );
    println!(
        "a stream backup with {opens} opens: pruned beside it at {} points",
        pruned.get()
    );
    assert!(
        pruned.get() > 0,
        "no prune ran beside the held stream backup"
    );
}

/// `repair index` (an exclusive lock) held at each open beside `backup
/// --stdin-from-command`: where the repair holds its lock the backup is
/// refused (exit 11) without starting its command; elsewhere it runs its
/// command once and its stream dumps exactly, before and after prunes.
/// Both happen across the points.
#[test]
fn a_repair_index_at_each_open_beside_a_command_stream_backup() {
    let (
        Prepared {
            base: _base, state, ..
        },
        command,
        data,
    ) = stream_state();
    // The command notes each start in the working directory (the state's
    // copy), then writes the stream.
    let script = format!("echo started >> started; {}", command.join(" "));
    let args = [
        "backup",
        "--json",
        "--stdin-filename",
        "r0.cat",
        "--stdin-from-command",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let id = RefCell::new(None);
    let (refused, ran) = (Cell::new(0), Cell::new(0));
    sweep(
        &state,
        &["repair", "index"],
        |dir, what| {
            let b = second(dir, &args);
            let started = fs::read_to_string(dir.join("started")).unwrap_or_default();
            match b.code {
                11 => {
                    assert_eq!(started, "", "{what}: a refused backup ran its command");
                    refused.set(refused.get() + 1);
                    *id.borrow_mut() = None;
                }
                0 => {
                    assert_eq!(started, "started\n", "{what}: the command ran not once");
                    ran.set(ran.get() + 1);
                    *id.borrow_mut() = Some(snapshot_id_of(&b));
                }
                _ => panic!("{what}: beside: {}", b.all()),
            }
        },
        |dir, _, what| {
            if let Some(id) = id.borrow().as_deref() {
                prunes_keep_stream(dir, id, "r0.cat", &data, what);
            }
        },
    );
    both_outcomes("stream backups beside a held repair index", &ran, &refused);
}

/// Prints how many of a sweep's second commands ran and were refused
/// (`what` names them), and requires both outcomes.
fn both_outcomes(what: &str, ran: &Cell<u32>, refused: &Cell<u32>) {
    println!("{what}: {} ran, {} refused", ran.get(), refused.get());
    assert!(
        ran.get() > 0 && refused.get() > 0,
        "{what}: not both outcomes"
    );
}

/// A backup of `src` beside a held command of an exclusive lock: it
/// completes (its snapshot's id kept in `id`, counted in `ran`) or, while
/// the lock is held, is refused with exit 11 (`id` emptied, counted in
/// `refused`); anything else fails the test.
fn backup_beside_exclusive(
    dir: &Path,
    src: &Path,
    id: &RefCell<Option<String>>,
    (ran, refused): (&Cell<u32>, &Cell<u32>),
    what: &str,
) {
    let b = second(dir, &["backup", "--json", path_str(src)]);
    match b.code {
        0 => {
            ran.set(ran.get() + 1);
            *id.borrow_mut() = Some(snapshot_id_of(&b));
        }
        11 => {
            refused.set(refused.get() + 1);
            *id.borrow_mut() = None;
        }
        _ => panic!("{what}: beside: {}", b.all()),
    }
}

/// `recover` held at each open beside a backup: the backup completes (its
/// snapshot restores exactly) or, while `recover` holds its exclusive
/// lock, is refused (exit 11); `recover` saves the very tree it saves
/// alone, of the forgotten snapshots' trees only, never the backup's.
#[test]
fn a_recover_at_each_open_beside_a_backup() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, lost) = with_forgotten(base.path(), &src);
    let alone = base.path().join("alone");
    copy_state(&state, &alone);
    let (repo, cache) = paths(&alone);
    crate::recover::recover_json(&repo, &cache, &[]);
    let want_tree = recovery_tree(&alone, "recover alone");
    let want = bring_back_old_data(&src);
    let backup_id = RefCell::new(None);
    let (ran, refused) = (Cell::new(0), Cell::new(0));
    sweep(
        &state,
        &["recover", "--json"],
        |dir, what| backup_beside_exclusive(dir, &src, &backup_id, (&ran, &refused), what),
        |dir, r, what| {
            let report = crate::support::json_lines(&r.out).pop().unwrap();
            assert_eq!(report["lost"], serde_json::json!(lost), "{what}: {report}");
            assert_eq!(recovery_tree(dir, what), want_tree, "{what}");
            if let Some(id) = backup_id.borrow().as_deref() {
                restores_exactly(dir, id, &src, &want, what);
            }
        },
    );
    both_outcomes("backups beside a held recover", &ran, &refused);
}

/// `repair packs` (a pack whose header is damaged) held at each open
/// beside a backup of new files: the backup completes (its snapshot
/// restores exactly) or, while the repair holds its exclusive lock, is
/// refused (exit 11); the repair loses nothing, the pack is gone, and the
/// old snapshot restores exactly.
#[test]
fn a_repair_packs_at_each_open_beside_a_backup() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, pack, snapshot, want_old) = with_damaged_header(base.path(), &src);
    let id = larder::Id::from_hex(&pack).unwrap();
    fill(&src.join("new"), 40, 3, 200 << 10);
    let want = manifest(&src);
    let backup_id = RefCell::new(None);
    let (ran, refused) = (Cell::new(0), Cell::new(0));
    sweep(
        &state,
        &["--json", "repair", "packs", &pack],
        |dir, what| backup_beside_exclusive(dir, &src, &backup_id, (&ran, &refused), what),
        |dir, r, what| {
            let report = crate::support::json_lines(&r.out).pop().unwrap();
            assert_eq!(
                report["packs"][0]["lost"],
                serde_json::json!([]),
                "{what}: {report}"
            );
            let (repo, _) = paths(dir);
            assert!(
                !crate::repair_packs::pack_path(&repo, &id).exists(),
                "{what}"
            );
            restores_exactly(dir, &snapshot, &src, &want_old, what);
            if let Some(b) = backup_id.borrow().as_deref() {
                restores_exactly(dir, b, &src, &want, what);
            }
        },
    );
    both_outcomes("backups beside a held repair packs", &ran, &refused);
}
