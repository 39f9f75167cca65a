//! `restore --include-xattr` and `--exclude-xattr` (restic 0.17): globs on
//! an extended attribute's whole name pick which attributes a restore sets,
//! on files and directories alike; neither flag sets them all; both
//! together are refused, as is an invalid pattern (named).

use crate::faults::{backup_ok, cli_repo, larder_ok, larder_run};
use crate::support::{path_str, write};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The attributes every test path gets, with their values.
const ATTRS: [(&str, &[u8]); 3] = [
    ("user.a", b"value a"),
    ("user.b", b"value b\0binary\xff"),
    ("user.keep.x", b"kept"),
];

/// The `user.*` attributes of `p` (others, such as a security label the
/// filesystem adds, are not the test's), with their values.
fn user_xattrs(p: &Path) -> BTreeMap<String, Vec<u8>> {
    xattr::list(p)
        .unwrap_or_else(|e| panic!("listing {}: {e}", p.display()))
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.starts_with("user."))
        .map(|n| {
            let v = xattr::get(p, &n).unwrap().unwrap();
            (n, v)
        })
        .collect()
}

/// The restored file `f` and directory `d` below `got` each have exactly
/// the user attributes `names` (with their values).
fn both_have(got: &Path, names: &[&str]) {
    for p in [got.join("f"), got.join("d")] {
        assert_eq!(user_xattrs(&p), want(names), "{}", p.display());
    }
}

fn want(names: &[&str]) -> BTreeMap<String, Vec<u8>> {
    ATTRS
        .iter()
        .filter(|(n, _)| names.contains(n))
        .map(|(n, v)| (n.to_string(), v.to_vec()))
        .collect()
}

/// A repository with one backup of a directory `src` holding file `f` and
/// directory `d`, each with [`ATTRS`]: the repository, `src` and the
/// snapshot's id.
fn backed_up() -> (crate::common::TestRepo, PathBuf, String) {
    let t = cli_repo();
    let src = t.dir.path().join("src");
    write(&src.join("f"), b"a file with attributes");
    write(&src.join("d/inside"), b"in a directory with attributes");
    for p in [src.join("f"), src.join("d")] {
        for (n, v) in ATTRS {
            xattr::set(&p, n, v).unwrap_or_else(|e| panic!("{} {n}: {e}", p.display()));
        }
    }
    assert_eq!(
        user_xattrs(&src.join("f")),
        want(&["user.a", "user.b", "user.keep.x"])
    );
    let id = backup_ok(&t.repo_path(), &t.cache_path(), &src);
    (t, src, id)
}

/// Restores `id` into a new directory `name` beside the repository with
/// `args`; returns where `src` landed.
fn restore(
    t: &crate::common::TestRepo,
    id: &str,
    src: &Path,
    name: &str,
    args: &[&str],
) -> PathBuf {
    let target = t.dir.path().join(name);
    larder_ok(
        &t.repo_path(),
        &t.cache_path(),
        &[&["restore", "-q", id, "--target", path_str(&target)], args].concat(),
    );
    let got = target.join(src.strip_prefix("/").unwrap());
    assert_eq!(
        std::fs::read(got.join("f")).unwrap(),
        b"a file with attributes",
        "{name}: the file's content"
    );
    got
}

#[test]
fn include_xattr_restores_only_matching_attributes() {
    let (t, src, id) = backed_up();
    let got = restore(&t, &id, &src, "only", &["--include-xattr", "user.keep.*"]);
    both_have(&got, &["user.keep.x"]);
    // Repeated: either pattern's matches.
    let got = restore(
        &t,
        &id,
        &src,
        "two",
        &[
            "--include-xattr",
            "user.keep.*",
            "--include-xattr",
            "user.b",
        ],
    );
    both_have(&got, &["user.b", "user.keep.x"]);
    // `*` spans the dots: `user.*` matches all three.
    let got = restore(&t, &id, &src, "star", &["--include-xattr", "user.*"]);
    assert_eq!(
        user_xattrs(&got.join("f")),
        want(&["user.a", "user.b", "user.keep.x"])
    );
}

#[test]
fn exclude_xattr_restores_all_but_matching_attributes() {
    let (t, src, id) = backed_up();
    let got = restore(&t, &id, &src, "but", &["--exclude-xattr", "user.a"]);
    both_have(&got, &["user.b", "user.keep.x"]);
    // The whole name must match: `user.keep` is not `user.keep.x`.
    let got = restore(&t, &id, &src, "whole", &["--exclude-xattr", "user.keep"]);
    assert_eq!(
        user_xattrs(&got.join("d")),
        want(&["user.a", "user.b", "user.keep.x"])
    );
}

#[test]
fn without_the_flags_every_attribute_is_restored() {
    let (t, src, id) = backed_up();
    let got = restore(&t, &id, &src, "all", &[]);
    both_have(&got, &["user.a", "user.b", "user.keep.x"]);
}

#[test]
fn both_flags_or_an_invalid_pattern_are_refused() {
    let (t, _src, id) = backed_up();
    let target = t.dir.path().join("refused");
    let o = larder_run(
        &t.repo_path(),
        &t.cache_path(),
        &[
            "restore",
            &id,
            "--target",
            path_str(&target),
            "--include-xattr",
            "user.*",
            "--exclude-xattr",
            "user.a",
        ],
    );
    assert_ne!(o.code, 0, "{}", o.all());
    assert!(
        o.err.contains("--include-xattr") && o.err.contains("cannot be used with"),
        "{}",
        o.all()
    );
    assert!(!target.exists(), "nothing restored");
    let o = larder_run(
        &t.repo_path(),
        &t.cache_path(),
        &[
            "restore",
            &id,
            "--target",
            path_str(&target),
            "--include-xattr",
            "user.[a",
        ],
    );
    assert_ne!(o.code, 0, "{}", o.all());
    assert!(
        o.err.contains("--include-xattr") && o.err.contains("user.[a"),
        "the error names the pattern: {}",
        o.all()
    );
    assert!(!target.exists(), "checked before the target is made");
}
