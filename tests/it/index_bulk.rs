//! The first open of a repository by a client with an empty cache: many
//! index segments absorbed in one sorted bulk load. It must answer exactly
//! as absorbing the segments one by one does (a blob stored twice may be
//! found in either copy), skip a damaged segment, not
//! absorb a segment twice when two processes open at once, and survive a
//! `kill -9` in the middle (the load is one transaction).

use crate::common::{TestRepo, larder};
use crate::support::{assert_same_tree, cli, lib_backup, lib_restore, rand_bytes, write};
use larder::Id;
use larder::backend::{Backend, Kind};
use larder::index::{BlobLocation, Index, IndexPack, IndexSegment, read_segment, write_segment};
use larder::pack::{BlobType, PackEntry};
use larder::repository::Repository;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

fn fake_id(tag: &str, n: u64) -> Id {
    let mut h = blake3::Hasher::new();
    h.update(tag.as_bytes());
    h.update(&n.to_le_bytes());
    Id(*h.finalize().as_bytes())
}

/// A synthetic segment of `packs` packs of `per_pack` blobs, numbered from
/// `first`.
fn synth_segment(first: u64, packs: u64, per_pack: u64) -> IndexSegment {
    let mut seg = IndexSegment::default();
    for p in 0..packs {
        let mut blobs = Vec::new();
        let mut offset = 0;
        for b in 0..per_pack {
            let n = first + p * per_pack + b;
            let plain_len = 1000 + (n % 5000) as u32;
            blobs.push(PackEntry {
                ty: if n.is_multiple_of(7) {
                    BlobType::Tree
                } else {
                    BlobType::Data
                },
                id: fake_id("blob", n),
                offset,
                stored_len: plain_len / 2 + 40,
                plain_len,
                compression: (n % 2) as u8,
            });
            offset += (plain_len / 2 + 40) as u64;
        }
        seg.packs.push(IndexPack {
            id: fake_id("pack", first + p * per_pack),
            size: offset + 100,
            blobs,
        });
    }
    seg
}

/// A repository with a real snapshot of a small tree plus `segments`
/// synthetic segments of `packs` x `per_pack` blobs. The last synthetic
/// segment repeats a pack of the first (a pack two segments list) and
/// stores one of its blobs again in a new pack (a blob with two copies).
/// Returns the snapshot id and the number of blob rows the index holds.
fn big_index_repo(t: &TestRepo, src: &Path, segments: u64, packs: u64, per_pack: u64) -> (Id, u64) {
    for i in 0..30 {
        write(
            &src.join(format!("d{}/f{i}", i % 4)),
            &rand_bytes(i, 3000 + 5000 * i as usize),
        );
    }
    let repo = t.init();
    let snap = lib_backup(&repo, &[src]).snapshot_id.unwrap();
    let real_rows = repo.index().unwrap().blob_count().unwrap();
    let backend = t.backend();
    let per_seg = packs * per_pack;
    for s in 0..segments {
        let mut seg = synth_segment(s * per_seg, packs, per_pack);
        if s == segments - 1 {
            let first = synth_segment(0, 1, per_pack);
            let mut again = first.packs[0].clone();
            seg.packs.push(again.clone());
            again.id = fake_id("copy pack", 0);
            again.blobs.truncate(1);
            seg.packs.push(again);
        }
        write_segment(backend.as_ref(), repo.keys(), &seg).unwrap();
    }
    // The extra copy of one blob is the only extra row.
    (snap, real_rows + segments * per_seg + 1)
}

/// The lookups `got` answer as `want` does: the same location, or, for a
/// blob stored more than once, another of its copies.
fn assert_same_lookups(
    ids: &[Id],
    want: &[Option<BlobLocation>],
    got: &[Option<BlobLocation>],
    copies: &HashMap<Id, Vec<BlobLocation>>,
) {
    assert_eq!(want.len(), got.len());
    for ((id, w), g) in ids.iter().zip(want).zip(got) {
        if w == g {
            continue;
        }
        let all = copies.get(id).map(Vec::as_slice).unwrap_or_default();
        assert!(
            all.len() > 1
                && w.as_ref().is_some_and(|w| all.contains(w))
                && g.as_ref().is_some_and(|g| all.contains(g)),
            "blob {id}: {w:?} against {g:?}"
        );
    }
}

/// Every answer of `a` and `b` is the same: packs with sizes, the lookup
/// of every blob, and each pack's blobs by offset. `b` holds a base: its
/// lookups are compared before and after listing a pack's blobs turns the
/// base into rows.
fn assert_same_index(a: &mut Index, b: &mut Index) {
    assert_eq!(a.blob_count().unwrap(), b.blob_count().unwrap());
    let packs = a.packs().unwrap();
    assert_eq!(packs, b.packs().unwrap());
    let mut ids = Vec::new();
    // Every stored copy of each blob: a blob with two copies may be found
    // in either (which one depends on the order the segments are listed).
    let mut copies: HashMap<Id, Vec<BlobLocation>> = HashMap::new();
    for (p, _) in &packs {
        for e in a.blobs_in_pack(p).unwrap() {
            ids.push(e.id);
            copies
                .entry(e.id)
                .or_default()
                .push(BlobLocation { pack: *p, entry: e });
        }
    }
    ids.push(fake_id("never stored", 1));
    let want = a.lookup_many(&ids).unwrap();
    assert!(b.has_base().unwrap(), "the bulk load kept a base");
    assert_same_lookups(&ids, &want, &b.lookup_many(&ids).unwrap(), &copies);
    for id in &ids {
        assert_eq!(a.contains(id).unwrap(), b.contains(id).unwrap());
    }
    // Asked for all at once (as a backup asks for a directory's files):
    // every stored blob, and not the one never stored.
    let among = b.contained_among(&ids).unwrap();
    let distinct: std::collections::HashSet<&Id> = ids.iter().collect();
    assert_eq!(among.len(), distinct.len() - 1, "stored blobs in the base");
    assert!(!among.contains(&fake_id("never stored", 1)));
    assert_eq!(among, a.contained_among(&ids).unwrap());
    for (p, _) in &packs {
        assert_eq!(
            a.blobs_in_pack(p).unwrap(),
            b.blobs_in_pack(p).unwrap(),
            "pack {p}"
        );
    }
    assert!(!b.has_base().unwrap(), "listing a pack's blobs made rows");
    assert_same_lookups(&ids, &want, &b.lookup_many(&ids).unwrap(), &copies);
    assert_eq!(a.blob_count().unwrap(), b.blob_count().unwrap());
}

fn index_names(db: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'blobs' ORDER BY name")
        .unwrap();
    st.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|r| r.unwrap())
        .filter(|n| !n.starts_with("sqlite_autoindex"))
        .collect()
}

#[test]
fn bulk_first_open_answers_like_absorbing_segment_by_segment() {
    let t = TestRepo::new();
    let src = t.dir.path().join("src");
    // 24 segments x 6,000 blobs: more rows than one sorted run holds.
    let (snap, rows) = big_index_repo(&t, &src, 24, 60, 100);
    let backend = t.backend();
    // A damaged segment: skipped and named, never fatal.
    let junk = b"not an index segment".to_vec();
    let junk_name = Id::of_object(&junk).to_hex();
    backend.write(Kind::Index, &junk_name, &junk).unwrap();

    let repo = t.open().unwrap();
    let keys = repo.keys();
    let scratch = tempfile::tempdir().unwrap();
    let mut one_by_one = Index::open(&scratch.path().join("a.sqlite")).unwrap();
    for e in backend.list(Kind::Index).unwrap() {
        if let Ok(seg) = read_segment(backend.as_ref(), keys, &e.name) {
            one_by_one
                .absorb(&Id::from_hex(&e.name).unwrap(), &seg)
                .unwrap();
        }
    }
    let bulk_db = scratch.path().join("b.sqlite");
    let mut bulk = Index::open(&bulk_db).unwrap();
    let report = bulk.sync(backend.as_ref(), keys).unwrap();
    assert_eq!(
        report.absorbed, 25,
        "24 synthetic segments and the real one"
    );
    assert_eq!(report.bad.len(), 1, "{:?}", report.bad);
    assert!(report.bad[0].contains(&junk_name), "{:?}", report.bad);
    assert_eq!(bulk.blob_count().unwrap(), rows);
    assert_same_index(&mut one_by_one, &mut bulk);
    assert_eq!(
        index_names(&bulk_db),
        ["blobs_by_pack", "blobs_marked"],
        "the secondary indexes are back after the base became rows"
    );
    // A second sync finds nothing new.
    let again = bulk.sync(backend.as_ref(), keys).unwrap();
    assert_eq!((again.absorbed, again.forgotten), (0, 0));
    drop(repo);

    // The real snapshot restores exactly through a cache built this way.
    std::fs::remove_dir_all(t.cache_path()).unwrap();
    let repo = t.open().unwrap();
    let out = t.dir.path().join("out");
    lib_restore(&repo, &snap, &src, &out);
    assert_same_tree(&src, &out);
}

#[test]
fn two_clients_opening_at_once_absorb_each_segment_once() {
    let t = TestRepo::new();
    let src = t.dir.path().join("src");
    let (_, rows) = big_index_repo(&t, &src, 20, 20, 100);
    let repo = t.open().unwrap();
    let db = t.dir.path().join("shared.sqlite");
    let backend = t.backend();
    let absorbed: Vec<usize> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (db, backend, keys) = (&db, backend.clone(), repo.keys());
                s.spawn(move || {
                    let mut ix = Index::open(db).unwrap();
                    let r = ix.sync(backend.as_ref(), keys).unwrap();
                    assert!(r.bad.is_empty(), "{:?}", r.bad);
                    assert_eq!(ix.blob_count().unwrap(), rows);
                    r.absorbed
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        absorbed.iter().sum::<usize>(),
        21,
        "each segment absorbed by one of the two: {absorbed:?}"
    );
}

#[test]
fn first_open_killed_midway_is_redone_by_the_next() {
    let t = TestRepo::new();
    let src = t.dir.path().join("src");
    let (snap, rows) = big_index_repo(&t, &src, 40, 50, 200);
    let cache = t.dir.path().join("cli-cache");
    let mut killed_inside = false;
    for delay_ms in [150u64, 400, 900] {
        let _ = std::fs::remove_dir_all(&cache);
        // `ls` reads the index (`snapshots` does not).
        let mut child = larder(&t.repo_path(), &cache)
            .args(["-q", "ls", "latest"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        killed_inside |= !finished;
        // The next command on that cache completes the load.
        cli(&t.repo_path(), &cache, &["-q", "ls", "latest"], 0);
        let (out, _) = cli(&t.repo_path(), &cache, &["--json", "snapshots"], 0);
        let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1);
        let dbs: Vec<_> = walk_sqlite(&cache);
        assert_eq!(dbs.len(), 1, "one cache database: {dbs:?}");
        let ix = Index::open(&dbs[0]).unwrap();
        assert_eq!(
            ix.blob_count().unwrap(),
            rows,
            "after a kill at {delay_ms} ms"
        );
        assert_eq!(
            ix.packs().unwrap().len() as u64,
            40 * 50 + 1 + real_packs(&t)
        );
    }
    assert!(
        killed_inside,
        "at least one kill landed before the load ended"
    );
    // And the repository's real snapshot restores from that cache.
    let repo = Repository::open(
        t.backend(),
        &larder::keys::Credential::passphrase(crate::common::PASS),
        &cache,
    )
    .unwrap();
    let out = t.dir.path().join("out");
    lib_restore(&repo, &snap, &src, &out);
    assert_same_tree(&src, &out);
}

/// Packs the real backup wrote.
fn real_packs(t: &TestRepo) -> u64 {
    t.backend().list(Kind::Pack).unwrap().len() as u64
}

fn walk_sqlite(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).into_iter().flatten() {
        if e.file_name() == "index.sqlite" {
            out.push(e.path().to_path_buf());
        }
    }
    out
}

fn base_blocks(cache: &Path) -> i64 {
    let db = &walk_sqlite(cache)[0];
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT count(*) FROM blob_base", [], |r| r.get(0))
        .unwrap()
}

/// A new client whose first open loaded a base prunes: prune needs every
/// blob as a row, so the base becomes rows first; the pruned repository
/// checks clean and the kept snapshot restores exactly.
#[test]
fn prune_after_a_bulk_first_open_turns_the_base_into_rows() {
    let t = TestRepo::new();
    let src = t.dir.path().join("src");
    let repo = t.init();
    for k in 0..18u64 {
        write(
            &src.join(format!("d{}/f{k}", k % 3)),
            &rand_bytes(k, 20_000 + 1000 * k as usize),
        );
        lib_backup(&repo, &[&src]);
    }
    drop(repo);
    let cache = t.dir.path().join("new-machine");
    let run = |args: &[&str]| cli(&t.repo_path(), &cache, args, 0).0;
    let listed: serde_json::Value = serde_json::from_str(&run(&["--json", "snapshots"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 18);
    run(&["ls", "latest"]);
    assert!(base_blocks(&cache) > 0, "the first open loaded a base");
    run(&["forget", "--keep-last", "2", "--prune"]);
    assert_eq!(base_blocks(&cache), 0, "prune turned the base into rows");
    let checked = run(&["check", "--read-data"]);
    assert!(checked.contains("no errors"), "{checked}");
    let out = t.dir.path().join("out");
    run(&[
        "restore",
        &format!("latest:{}", src.display()),
        "--target",
        out.to_str().unwrap(),
    ]);
    assert_same_tree(&src, &out);
}
