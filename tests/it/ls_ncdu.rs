//! `ls --ncdu` (restic 0.17's flag): the export parses as ncdu's format
//! (version 1.2: a directory is an array whose first element is its
//! information block) and holds exactly the backed-up tree, each entry
//! with the size, `st_mode`, inode, link count and mtime the source had;
//! below a path it starts there; a path that is no directory is a clear
//! error.

use crate::faults::{backup_ok, cli_repo, larder_ok, larder_run};
use crate::support::{path_str, rand_bytes, write};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Every entry below directory array `dir`, by path relative to it: its
/// information block, and whether it is a directory.
fn entries(dir: &Value, prefix: &str, out: &mut BTreeMap<String, (Value, bool)>) {
    let items = dir.as_array().unwrap();
    for item in &items[1..] {
        let (info, is_dir) = match item {
            Value::Array(a) => (a[0].clone(), true),
            v => (v.clone(), false),
        };
        let path = format!("{prefix}{}", info["name"].as_str().unwrap());
        if is_dir {
            entries(item, &format!("{path}/"), out);
        }
        out.insert(path, (info, is_dir));
    }
}

#[test]
fn the_export_holds_the_tree_with_its_metadata() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    write(&src.join("a.txt"), b"alpha");
    write(&src.join("big.bin"), &rand_bytes(3, 300_000));
    write(&src.join("d/e/deep.txt"), b"deep");
    fs::create_dir_all(src.join("empty")).unwrap();
    std::os::unix::fs::symlink("a.txt", src.join("d/link")).unwrap();
    fs::hard_link(src.join("a.txt"), src.join("d/hard")).unwrap();
    let id = backup_ok(&repo, &cache, &src);

    let o = larder_ok(&repo, &cache, &["ls", "--ncdu", &id, path_str(&src)]);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!((v[0].as_u64(), v[1].as_u64()), (Some(1), Some(2)), "{v}");
    assert_eq!(v[2]["progname"], "larder");
    let root = &v[3];
    assert_eq!(root[0]["name"], path_str(&src));
    let mut got = BTreeMap::new();
    entries(root, "", &mut got);
    let want: Vec<String> = walkdir::WalkDir::new(&src)
        .min_depth(1)
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            e.path()
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got.keys().cloned().collect::<Vec<_>>(), want_sorted);
    for rel in &want {
        let md = fs::symlink_metadata(src.join(rel)).unwrap();
        let (info, is_dir) = &got[rel];
        assert_eq!(*is_dir, md.is_dir(), "{rel}");
        assert_eq!(info["mode"], md.mode(), "{rel}: {info}");
        assert_eq!(info["ino"], md.ino(), "{rel}: {info}");
        assert_eq!(info["mtime"], md.mtime(), "{rel}: {info}");
        if md.is_file() {
            assert_eq!(info["asize"], md.len(), "{rel}: {info}");
            assert_eq!(info["nlink"], md.nlink(), "{rel}: {info}");
            assert_eq!(info["hlnkc"] == true, md.nlink() > 1, "{rel}: {info}");
        }
        assert_eq!(
            info["notreg"] == true,
            md.file_type().is_symlink(),
            "{rel}: {info}"
        );
    }

    // From the snapshot's root: the source's path, a directory at a time.
    let o = larder_ok(&repo, &cache, &["ls", "--ncdu", &id]);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    let mut all = BTreeMap::new();
    entries(&v[3], "/", &mut all);
    assert!(
        all.get(path_str(&src)).is_some_and(|e| e.1),
        "{:?}",
        all.keys()
    );
    assert!(all.contains_key(&format!("{}/d/e/deep.txt", path_str(&src))));

    let o = larder_run(
        &repo,
        &cache,
        &["ls", "--ncdu", &id, &format!("{}/a.txt", path_str(&src))],
    );
    assert!(
        o.code == 1 && o.err.contains("is not a directory"),
        "{}",
        o.all()
    );
    assert!(Path::new(&src).exists());
}
