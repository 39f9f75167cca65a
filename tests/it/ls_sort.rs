//! `ls --recursive`, `--sort` and `--reverse` (restic 0.17/0.18's flags):
//! with a path, the directory itself, then only its entries unless
//! `--recursive` (as restic lists them);
//! the whole listing sorted by size, mtime or extension (ties by path),
//! reversed with `--reverse`, in `--json` too; `--ncdu` refuses `--sort`.

use crate::faults::{backup_ok, cli_repo, larder_ok, larder_run};
use crate::support::{set_mtime, write};
use serde_json::Value;
use std::path::Path;

/// The files below `src`, each with its size and mtime (seconds), created
/// in this order: neither name, size nor mtime order.
const FILES: [(&str, usize, i64); 5] = [
    ("b.txt", 300, 1_300_000_000),
    ("sub/deep/e.rs", 400, 1_100_000_000),
    ("a.bin", 100, 1_500_000_000),
    ("sub/d.txt", 50, 1_400_000_000),
    ("c.md", 200, 1_200_000_000),
];

/// Makes [`FILES`] in `src` (directories `sub` and `sub/deep` dated after
/// every file); returns `src` as text.
fn make_src(src: &Path) -> String {
    for (name, size, _) in FILES {
        write(&src.join(name), &vec![b'x'; size]);
    }
    for (name, _, secs) in FILES {
        set_mtime(&src.join(name), secs * 1_000_000_000);
    }
    set_mtime(&src.join("sub/deep"), 1_600_000_000 * 1_000_000_000);
    set_mtime(&src.join("sub"), 1_700_000_000 * 1_000_000_000);
    src.to_string_lossy().into_owned()
}

/// `larder -q ls ARGS`'s lines, relative to `src` (`.` for `src` itself;
/// lines outside `src` kept whole).
fn ls_lines(repo: &Path, cache: &Path, src: &str, args: &[&str]) -> Vec<String> {
    let mut a = vec!["-q", "ls"];
    a.extend_from_slice(args);
    let o = larder_ok(repo, cache, &a);
    o.out
        .lines()
        .map(|l| {
            if l == src {
                ".".to_string()
            } else {
                l.strip_prefix(&format!("{src}/")).unwrap_or(l).to_string()
            }
        })
        .collect()
}

#[test]
fn ls_lists_a_paths_entries_unless_recursive_and_sorts_the_listing() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src_dir = t.dir.path().join("src");
    let src = make_src(&src_dir);
    let id = backup_ok(&repo, &cache, &src_dir);
    let ls = |args: &[&str]| ls_lines(&repo, &cache, &src, args);

    // A path without --recursive: itself and its entries, in name order.
    assert_eq!(
        ls(&[&id, &src]),
        [".", "a.bin", "b.txt", "c.md", "sub"],
        "only the path and its entries"
    );
    assert_eq!(
        ls(&[&id, &format!("{src}/sub")]),
        ["sub", "sub/d.txt", "sub/deep"]
    );
    // A file named: its own line only (as restic lists it).
    assert_eq!(ls(&[&id, &format!("{src}/sub/d.txt")]), ["sub/d.txt"]);
    assert_eq!(
        ls(&[&id, &format!("{src}/sub/d.txt"), "--recursive"]),
        ["sub/d.txt"]
    );
    // With --recursive: the path, then everything below it, the
    // grandchildren too.
    assert_eq!(
        ls(&[&id, &src, "--recursive"]),
        [
            ".",
            "a.bin",
            "b.txt",
            "c.md",
            "sub",
            "sub/d.txt",
            "sub/deep",
            "sub/deep/e.rs"
        ]
    );
    // Without a path: everything, recursively (the ancestors of src too).
    let all = ls(&[&id]);
    assert!(all.iter().any(|l| l == "sub/deep/e.rs"), "{all:?}");
    assert!(all.iter().any(|l| l == "."), "{all:?}");

    // --sort size: the whole listing by size (directories' sizes are not
    // the files' order's concern: only the files are compared in order),
    // and the size order of the files differs from their name order.
    let files = |lines: Vec<String>| -> Vec<String> {
        lines
            .into_iter()
            .filter(|l| FILES.iter().any(|(n, _, _)| n == l))
            .collect()
    };
    let by_size = ls(&[&id, &src, "--recursive", "--sort", "size"]);
    assert_eq!(
        files(by_size.clone()),
        ["sub/d.txt", "a.bin", "c.md", "b.txt", "sub/deep/e.rs"]
    );
    assert_eq!(by_size.len(), 8, "{by_size:?}");
    // --reverse reverses the whole of it.
    let mut reversed = by_size.clone();
    reversed.reverse();
    assert_eq!(
        ls(&[&id, &src, "--recursive", "--sort", "size", "--reverse"]),
        reversed
    );
    // Without --recursive, sorted too, and still no grandchildren.
    assert_eq!(
        files(ls(&[&id, &src, "--sort", "size"])),
        ["a.bin", "c.md", "b.txt"]
    );

    // --sort mtime (and `time`, its other name): by modification time; the
    // directories, dated after every file, come last (src itself, written
    // to now, last of all).
    let by_mtime = [
        "sub/deep/e.rs",
        "c.md",
        "b.txt",
        "sub/d.txt",
        "a.bin",
        "sub/deep",
        "sub",
        ".",
    ];
    assert_eq!(ls(&[&id, &src, "--recursive", "--sort", "mtime"]), by_mtime);
    assert_eq!(ls(&[&id, &src, "--recursive", "--sort", "time"]), by_mtime);

    // --sort extension: no extension (the directories) first, ties by path.
    assert_eq!(
        ls(&[&id, &src, "--recursive", "--sort", "extension"]),
        [
            ".",
            "sub",
            "sub/deep",
            "a.bin",
            "c.md",
            "sub/deep/e.rs",
            "b.txt",
            "sub/d.txt"
        ]
    );
}

#[test]
fn ls_json_sorts_its_node_lines_and_ncdu_refuses_sort() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src_dir = t.dir.path().join("src");
    let src = make_src(&src_dir);
    let id = backup_ok(&repo, &cache, &src_dir);

    let o = larder_ok(
        &repo,
        &cache,
        &["--json", "ls", &id, &src, "--recursive", "--sort", "size"],
    );
    let lines: Vec<Value> = o
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["message_type"], "snapshot", "{}", o.out);
    let nodes: Vec<(u64, String)> = lines[1..]
        .iter()
        .map(|v| {
            assert_eq!(v["message_type"], "node", "{v}");
            (
                v["size"].as_u64().unwrap(),
                v["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(nodes.len(), 8, "{}", o.out);
    let mut want = nodes.clone();
    want.sort();
    assert_eq!(nodes, want, "by size, ties by path");
    let files: Vec<&str> = nodes
        .iter()
        .filter_map(|(_, p)| p.strip_prefix(&format!("{src}/")))
        .filter(|p| FILES.iter().any(|(n, _, _)| n == p))
        .collect();
    assert_eq!(
        files,
        ["sub/d.txt", "a.bin", "c.md", "b.txt", "sub/deep/e.rs"]
    );

    for flag in ["--sort", "--reverse"] {
        let mut args = vec!["ls", "--ncdu", &id, flag];
        if flag == "--sort" {
            args.push("size");
        }
        let o = larder_run(&repo, &cache, &args);
        assert_ne!(o.code, 0, "{}", o.all());
        assert!(o.out.is_empty(), "{}", o.all());
        assert!(
            o.err.contains("--ncdu") && o.err.contains(flag),
            "{}",
            o.all()
        );
    }
}

/// `--human-readable` (restic's flag): `ls -l` and `find` print sizes as
/// KiB, MiB, GiB; without it, bytes.
#[test]
fn human_readable_sizes_in_ls_long_and_find() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src_dir = t.dir.path().join("src");
    let src = make_src(&src_dir);
    write(&src_dir.join("big.dat"), &vec![7u8; 1_536_000]);
    let id = backup_ok(&repo, &cache, &src_dir);
    let line_of = |out: &str, name: &str| -> String {
        out.lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_string()
    };
    let big = format!("{src}/big.dat");
    let plain = larder_ok(&repo, &cache, &["-q", "ls", "-l", &id, &src]).out;
    let human = larder_ok(
        &repo,
        &cache,
        &["-q", "ls", "-l", "--human-readable", &id, &src],
    )
    .out;
    assert!(line_of(&plain, &big).contains(" 1536000 "), "{plain}");
    assert!(line_of(&human, &big).contains(" 1.465 MiB "), "{human}");
    assert!(line_of(&human, "/b.txt").contains(" 300 B "), "{human}");
    assert_eq!(plain.lines().count(), human.lines().count());
    let found = larder_ok(&repo, &cache, &["-q", "find", "big.dat"]).out;
    assert!(found.contains(" 1536000 "), "{found}");
    let found = larder_ok(
        &repo,
        &cache,
        &["-q", "find", "--human-readable", "big.dat"],
    )
    .out;
    assert!(found.contains("1.465 MiB"), "{found}");
}
