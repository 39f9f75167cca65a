//! Remote repositories against real servers started here on 127.0.0.1:
//! restic's REST protocol (`rclone serve restic`, plain and append-only)
//! and S3 (moto's server, found through `LARDER_MOTO_SERVER`), the latter
//! also behind a fault-injecting proxy written below; and
//! `Backend::replace_config` on each (REST refuses it). Missing tools fail
//! the tests unless `LARDER_ALLOW_SKIP=1`.

use crate::common::{self, PASS};
use crate::support::{assert_same_tree, json_lines, path_str, rand_bytes, run, write};
use larder::backend::{Backend, Kind, RemoteOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REST_PASS: &str = "Sup3rSecretRestPw";

/// A server process, killed on drop.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills `child` with SIGKILL after `wait`, checking it still ran then.
fn kill_running(mut child: Child, wait: Duration) {
    std::thread::sleep(wait);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the command ended before it was killed"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = child.wait();
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16, child: &mut Child) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("server exited before listening on {port}: {st}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("nothing listens on 127.0.0.1:{port}");
}

/// Whether a missing tool may skip the test (prints why) instead of failing.
fn skip(why: &str) -> bool {
    if std::env::var_os("LARDER_ALLOW_SKIP").is_some_and(|v| v == "1") {
        eprintln!("SKIP: {why}");
        return true;
    }
    panic!("{why} (set LARDER_ALLOW_SKIP=1 to skip)");
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn start_rclone(dir: &Path, append_only: bool) -> Option<(Server, u16)> {
    let extra: &[&std::ffi::OsStr] = if append_only {
        &["--append-only".as_ref()]
    } else {
        &[]
    };
    start_rclone_with(dir, extra)
}

/// `rclone serve restic` of `dir` on a free port of 127.0.0.1, with the
/// test's user and password and `extra` arguments.
fn start_rclone_with(dir: &Path, extra: &[&std::ffi::OsStr]) -> Option<(Server, u16)> {
    if !have("rclone") && skip("rclone is not installed (Debian package rclone)") {
        return None;
    }
    let port = free_port();
    let mut child = Command::new("rclone")
        .args(["serve", "restic", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--user", "larder", "--pass", REST_PASS])
        .args(extra)
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port, &mut child);
    Some((Server { child }, port))
}

/// A certificate authority of the test's own making (`ca.pem`) and a
/// server certificate it signed for 127.0.0.1 (`srv.pem`, `srv.key`), in
/// `dir`, made with `openssl` (`.ci/run` installs it).
fn test_certificates(dir: &Path) -> Option<()> {
    if !have("openssl") && skip("openssl is not installed (Debian package openssl)") {
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ext = dir.join("srv.ext");
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=larder test CA",
            ],
        ]
        .concat(),
        [
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "srv.key",
                "-out",
                "srv.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
        vec![
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "srv.ext",
        ],
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Some(())
}

/// `rclone serve restic` over HTTPS with `srv.pem` and `srv.key` of
/// `certs` (see [`test_certificates`]).
fn start_rclone_tls(dir: &Path, certs: &Path) -> Option<(Server, u16)> {
    let (cert, key) = (certs.join("srv.pem"), certs.join("srv.key"));
    let extra = [
        "--cert".as_ref(),
        cert.as_os_str(),
        "--key".as_ref(),
        key.as_os_str(),
    ];
    start_rclone_with(dir, &extra)
}

/// moto's server, its temporary files in `tmp` (not in /tmp, a parent of
/// the backed-up trees, whose times would change between backups).
fn start_moto(tmp: &Path) -> Option<(Server, u16)> {
    // Where `.ci/run` makes moto's venv, unless LARDER_MOTO_SERVER says.
    let default = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("larder-ci/moto-venv/bin/moto_server"));
    let exe = match std::env::var_os("LARDER_MOTO_SERVER")
        .map(PathBuf::from)
        .or(default)
    {
        Some(p) if p.exists() => p,
        _ => {
            skip("LARDER_MOTO_SERVER does not name moto's moto_server (see .ci/run)");
            return None;
        }
    };
    let port = free_port();
    std::fs::create_dir_all(tmp).unwrap();
    let mut child = Command::new(exe)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port, &mut child);
    // moto lets anyone create a bucket (objects need signed requests).
    let resp = raw_http(
        port,
        "PUT /larder-test HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    Some((Server { child }, port))
}

fn raw_http(port: u16, req: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// One client machine: its own cache and state, the repository string and
/// the environment it runs larder with.
struct Client {
    dir: tempfile::TempDir,
    repo: String,
    env: Vec<(String, String)>,
}

impl Client {
    fn new(repo: &str, env: &[(&str, &str)]) -> Client {
        Client {
            dir: tempfile::tempdir().unwrap(),
            repo: repo.to_string(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let cache = self.dir.path().join("cache");
        let mut c = common::larder(Path::new(&self.repo), &cache);
        c.env("XDG_CACHE_HOME", self.dir.path().join("xdg"))
            .env("LARDER_RETRY_TIME", "60")
            .env("LARDER_REQUEST_TIMEOUT", "20");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.args(args);
        c
    }

    /// Runs larder; checks the exit code and that no secret shows.
    fn run(&self, args: &[&str], want: i32) -> (String, String) {
        let (code, out, err) = run(self.cmd(args));
        for secret in [REST_PASS, PASS, "s3cretKey"] {
            assert!(
                !out.contains(secret) && !err.contains(secret),
                "larder {args:?} printed a secret\nstdout:\n{out}\nstderr:\n{err}"
            );
        }
        assert_eq!(
            code, want,
            "larder {args:?} exited {code}\nstdout:\n{out}\nstderr:\n{err}"
        );
        (out, err)
    }

    fn snapshot_count(&self) -> usize {
        let (out, _) = self.run(&["--json", "snapshots"], 0);
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        v.as_array().unwrap().len()
    }
}

/// A tree worth several packs of chunks, some of it compressible.
fn make_tree(root: &Path, big: usize) {
    write(&root.join("big.bin"), &rand_bytes(1, big));
    write(
        &root.join("text/a.txt"),
        "hello larder\n".repeat(5000).as_bytes(),
    );
    for i in 0..20u64 {
        write(
            &root.join(format!("many/f{i}.bin")),
            &rand_bytes(100 + i, 1000 + (i as usize) * 777),
        );
    }
    write(&root.join("empty"), b"");
}

/// init, backup, unchanged re-backup, restore, check --read-data, a second
/// client with an empty cache, forget + prune.
fn full_sequence(a: &Client, tree: &Path) {
    a.run(&["init"], 0);
    let src = tree.to_str().unwrap();
    let (out, _) = a.run(&["--json", "backup", src], 0);
    assert!(out.contains("snapshot"), "{out}");
    let (out, _) = a.run(&["--json", "backup", src], 0);
    let summary: serde_json::Value = serde_json::from_str(
        out.lines()
            .rev()
            .find(|l| l.contains("data_added"))
            .unwrap_or_else(|| panic!("{out}")),
    )
    .unwrap();
    // Nothing is read again and no file data is stored; at most the trees
    // of the source's ancestors are new (another test may have touched
    // /tmp between the two backups).
    assert_eq!(summary["bytes_read"], 0, "{out}");
    assert_eq!(summary["files_new"], 0, "{out}");
    assert_eq!(summary["files_changed"], 0, "{out}");
    assert!(
        summary["data_added"].as_u64().is_some_and(|n| n < 4096),
        "an unchanged re-backup adds at most the ancestors' trees: {out}"
    );
    assert_eq!(a.snapshot_count(), 2);

    let target = a.dir.path().join("restored");
    restore(a, tree, &target);
    a.run(&["check", "--read-data"], 0);

    // A second machine: empty cache, lists and restores.
    let b = Client::new(
        &a.repo,
        &a.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
    );
    assert_eq!(b.snapshot_count(), 2);
    let t2 = b.dir.path().join("restored");
    restore(&b, tree, &t2);

    a.run(&["forget", "--keep-last", "1", "--prune"], 0);
    assert_eq!(a.snapshot_count(), 1);
    a.run(&["check", "--read-data"], 0);
}

/// Restores the latest snapshot of `tree` into `target`; checks the bytes.
fn restore(c: &Client, tree: &Path, target: &Path) {
    let what = format!("latest:{}", tree.display());
    c.run(&["restore", &what, "--target", target.to_str().unwrap()], 0);
    assert_same_tree(tree, target);
}

fn rest_repo(port: u16) -> String {
    format!("rest:http://larder:{REST_PASS}@127.0.0.1:{port}/repo/")
}

#[test]
fn rest_server_full_sequence() {
    let d = tempfile::tempdir().unwrap();
    let Some((_server, port)) = start_rclone(&d.path().join("served"), false) else {
        return;
    };
    let tree = d.path().join("tree");
    make_tree(&tree, 3 << 20);
    // Pages enough to train a compression dictionary with a small budget.
    for i in 0..60u64 {
        let words: String = rand_bytes(500 + i, 800)
            .iter()
            .map(|b| ["restore ", "snapshot ", "<p>larder</p> ", "pack "][*b as usize % 4])
            .collect();
        write(&tree.join(format!("docs/p{i}.html")), words.as_bytes());
    }
    let a = Client::new(&rest_repo(port), &[("LARDER_DICT_SAMPLES", "200000")]);
    full_sequence(&a, &tree);
    // The objects are where restic's layout puts them; the dictionary is
    // in `keys/` under its prefix (the protocol has no directory for it),
    // and the second client of `full_sequence` opened and read past it.
    assert!(d.path().join("served/repo/config").is_file());
    assert!(d.path().join("served/repo/data").is_dir());
    let dicts: Vec<String> = std::fs::read_dir(d.path().join("served/repo/keys"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("dict-"))
        .collect();
    assert_eq!(dicts.len(), 1, "{dicts:?}");
    assert!(!d.path().join("served/repo/dicts").exists());
}

#[test]
fn rest_append_only_backs_up_and_refuses_to_delete() {
    let d = tempfile::tempdir().unwrap();
    let served = d.path().join("served");
    let Some((_server, port)) = start_rclone(&served, true) else {
        return;
    };
    let tree = d.path().join("tree");
    make_tree(&tree, 1 << 20);
    let a = Client::new(&rest_repo(port), &[]);
    a.run(&["init"], 0);
    a.run(&["backup", tree.to_str().unwrap()], 0);
    write(&tree.join("new.txt"), b"more");
    a.run(&["backup", tree.to_str().unwrap()], 0);
    assert_eq!(a.snapshot_count(), 2);
    let before = walk(&served);
    for args in [
        &["prune"][..],
        &["forget", "--keep-last", "1"][..],
        &["forget", "--keep-last", "1", "--prune"][..],
    ] {
        let (_, err) = a.run(args, 1);
        assert!(err.contains("append-only"), "{args:?}: {err}");
        assert!(err.contains("nothing was changed"), "{args:?}: {err}");
        assert!(err.contains("***"), "the location is shown redacted: {err}");
    }
    // Nothing deleted (locks come and go; everything else stays).
    let after = walk(&served);
    let no_locks = |v: &Vec<String>| -> Vec<String> {
        v.iter()
            .filter(|p| !p.contains("/locks/"))
            .cloned()
            .collect()
    };
    assert_eq!(no_locks(&before), no_locks(&after));
    assert_eq!(a.snapshot_count(), 2);
    // A dry run deletes nothing and is allowed.
    a.run(&["forget", "--keep-last", "1", "--dry-run"], 0);
    a.run(&["check"], 0);
}

fn walk(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().display().to_string())
        .collect();
    v.sort();
    v
}

fn s3_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "s3cretKey"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ]
}

#[test]
fn s3_full_sequence_and_resume_after_kill() {
    let d = tempfile::tempdir().unwrap();
    let Some((_server, port)) = start_moto(&d.path().join("moto-tmp")) else {
        return;
    };
    let tree = d.path().join("tree");
    make_tree(&tree, 3 << 20);
    let a = Client::new(
        &format!("s3:http://127.0.0.1:{port}/larder-test/repo"),
        &s3_env(),
    );
    full_sequence(&a, &tree);

    // kill -9 in the middle of a slow backup of new data, then resume.
    make_tree(&tree.join("second"), 40 << 20);
    let mut c = a.cmd(&["--limit-upload", "8192", "backup", tree.to_str().unwrap()]);
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_running(child, Duration::from_secs(3));
    assert_eq!(a.snapshot_count(), 1, "the killed backup left no snapshot");
    a.run(&["backup", tree.to_str().unwrap()], 0);
    assert_eq!(a.snapshot_count(), 2);
    a.run(&["check", "--read-data"], 0);
    let target = a.dir.path().join("after-kill");
    restore(&a, &tree, &target);
}

/// A proxy in front of an HTTP server that fails a share of requests
/// (500, 503 SlowDown, a reset connection, a stalled answer) and counts
/// what it forwards.
struct FaultProxy {
    port: u16,
    faults: Arc<AtomicBool>,
    counts: Arc<Mutex<std::collections::BTreeMap<String, u64>>>,
    seen: Arc<AtomicU64>,
    injected: Arc<AtomicU64>,
}

impl FaultProxy {
    fn start(upstream: u16) -> FaultProxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let p = FaultProxy {
            port,
            faults: Arc::new(AtomicBool::new(true)),
            counts: Arc::default(),
            seen: Arc::default(),
            injected: Arc::default(),
        };
        let (faults, counts) = (p.faults.clone(), p.counts.clone());
        let (seen, injected) = (p.seen.clone(), p.injected.clone());
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let (faults, counts) = (faults.clone(), counts.clone());
                let (seen, injected) = (seen.clone(), injected.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, &faults, &counts, (&seen, &injected));
                });
            }
        });
        p
    }

    fn reset_counts(&self) {
        self.counts.lock().unwrap().clear();
    }

    /// Requests of one kind ("GET packs", "LIST index") since the reset.
    fn count(&self, kind: &str) -> u64 {
        self.counts.lock().unwrap().get(kind).copied().unwrap_or(0)
    }

    fn counts(&self) -> (u64, String) {
        let c = self.counts.lock().unwrap();
        let total = c.values().sum();
        let text = c
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        (total, text)
    }
}

/// "GET packs", "PUT locks", "LIST index": the method and the kind of
/// object of an S3 request line (bucket, then the prefix, then the kind).
fn request_kind(line: &str) -> String {
    let mut parts = line.split(' ');
    let method = parts.next().unwrap_or("?");
    let target = parts.next().unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if query.contains("list-type") {
        let kind = query
            .split('&')
            .find_map(|q| q.strip_prefix("prefix="))
            .map(|p| p.replace("%2F", "/"))
            .and_then(|p| p.split('/').nth(1).map(str::to_string))
            .unwrap_or_default();
        return format!("LIST {kind}");
    }
    let kind = path.split('/').nth(3).unwrap_or("config");
    format!("{method} {kind}")
}

/// Handles one client connection: request after request, each forwarded
/// on a fresh upstream connection unless a fault is injected.
fn serve(
    conn: TcpStream,
    upstream: u16,
    faults: &AtomicBool,
    counts: &Mutex<std::collections::BTreeMap<String, u64>>,
    (seen, injected): (&AtomicU64, &AtomicU64),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut client = conn;
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let end = line == "\r\n";
            head.push(line);
            if end {
                break;
            }
        }
        let len: usize = head
            .iter()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body)?;
        let method = request_kind(&head[0]);
        let n = seen.fetch_add(1, Ordering::SeqCst);
        if faults.load(Ordering::SeqCst) && (matches!(n % 10, 3 | 6 | 8) || n % 37 == 11) {
            injected.fetch_add(1, Ordering::SeqCst);
        }
        if faults.load(Ordering::SeqCst) {
            let fault = match n % 10 {
                3 => Some("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"),
                6 => Some(
                    "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: 64\r\n\r\n<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>\n\n\n",
                ),
                8 => {
                    // A reset: the connection dies with no answer.
                    let _ = client.shutdown(Shutdown::Both);
                    return Ok(());
                }
                _ if n % 37 == 11 => {
                    // A stalled answer: longer than the request timeout.
                    std::thread::sleep(Duration::from_secs(4));
                    let _ = client.shutdown(Shutdown::Both);
                    return Ok(());
                }
                _ => None,
            };
            if let Some(f) = fault {
                client.write_all(f.as_bytes())?;
                continue;
            }
        }
        *counts.lock().unwrap().entry(method).or_default() += 1;
        let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
        for l in &head {
            let lower = l.to_ascii_lowercase();
            if lower.starts_with("connection:") || l == "\r\n" {
                continue;
            }
            up.write_all(l.as_bytes())?;
        }
        up.write_all(b"Connection: close\r\n\r\n")?;
        up.write_all(&body)?;
        let mut resp = Vec::new();
        up.read_to_end(&mut resp)?;
        client.write_all(&resp)?;
        // The upstream answer may not say how long it is: one per connection.
        let _ = client.shutdown(Shutdown::Both);
        return Ok(());
    }
}

#[test]
fn s3_through_faults_completes_and_gives_up_clearly() {
    let d = tempfile::tempdir().unwrap();
    let Some((server, port)) = start_moto(&d.path().join("moto-tmp")) else {
        return;
    };
    let proxy = FaultProxy::start(port);
    let tree = d.path().join("tree");
    make_tree(&tree, 2 << 20);
    // Many directories, so that trees are many requests if fetched one by one.
    const DIRS: u64 = 80;
    for i in 0..DIRS {
        write(
            &tree.join(format!("dirs/d{}/e{i}/f.txt", i % 8)),
            format!("file {i}\n").as_bytes(),
        );
    }
    let mut env = s3_env();
    env.push(("LARDER_REQUEST_TIMEOUT", "2"));
    let repo = format!("s3:http://127.0.0.1:{}/larder-test/faulty", proxy.port);
    let a = Client::new(&repo, &env);
    a.run(&["init"], 0);
    a.run(&["backup", tree.to_str().unwrap()], 0);
    let target = a.dir.path().join("restored");
    restore(&a, &tree, &target);
    a.run(&["check", "--read-data"], 0);
    let injected = proxy.injected.load(Ordering::SeqCst);
    eprintln!(
        "{injected} faults injected in {} requests",
        proxy.seen.load(Ordering::SeqCst)
    );
    assert!(injected >= 10, "faults were injected and survived");

    // Request counts without faults: an unchanged re-backup and a restore.
    proxy.faults.store(false, Ordering::SeqCst);
    proxy.reset_counts();
    a.run(&["backup", tree.to_str().unwrap()], 0);
    let (n, what) = proxy.counts();
    eprintln!("requests for an unchanged re-backup: {n} ({what})");
    assert!(
        n < DIRS,
        "the parent's trees come from the local cache, not one request each: {n} ({what})"
    );
    proxy.reset_counts();
    let t2 = a.dir.path().join("restored2");
    restore(&a, &tree, &t2);
    let (n, what) = proxy.counts();
    eprintln!("requests for a restore: {n} ({what})");
    // A second machine, empty cache: its first re-backup fetches the trees.
    let b = Client::new(&repo, &env);
    proxy.reset_counts();
    b.run(&["backup", tree.to_str().unwrap()], 0);
    let (n, what) = proxy.counts();
    eprintln!("requests for a re-backup with an empty cache: {n} ({what})");
    proxy.reset_counts();
    b.run(&["backup", tree.to_str().unwrap()], 0);
    let (n, what) = proxy.counts();
    eprintln!("requests for its next re-backup: {n} ({what})");
    assert!(n < DIRS, "{n} ({what})");

    // The server gone for good: a clear failure within the retry budget.
    drop(server);
    let mut gone = Client::new(&repo, &env);
    gone.env.push(("LARDER_RETRY_TIME".into(), "3".into()));
    let (code, _out, err) = run(gone.cmd(&["snapshots"]));
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!(
            "s3:http://127.0.0.1:{}/larder-test/faulty",
            proxy.port
        )),
        "{err}"
    );
    assert!(err.contains("config"), "names the object: {err}");
    assert!(err.contains("gave up after"), "{err}");
    eprintln!("with the server gone: {err}");
}

/// What each command asks of S3, counted by a proxy that injects no
/// faults: a backup lists `index/` and `marks/` once (under its lock) and
/// writes one index segment; `packs/` is listed only by the first backup
/// from a cache and after a run that was killed; a restore of the whole
/// snapshot fetches each pack once, across its batches of files, and a
/// restore of one small file fetches one range; a second client with an
/// empty cache fetches the parent's trees a pack at a time.
#[test]
fn s3_requests_per_command_are_few() {
    // A snapshot holds the tree's ancestors with their metadata. Another
    // test that makes or removes a directory beside one of them between
    // the two backups changes that ancestor's mtime, and the unchanged
    // re-backup then rightly writes new trees for it (one small pack and
    // its index segment). The tree lives in a directory of this test's
    // own, but a clone under /tmp (as CI makes) still has /tmp above it:
    // the ancestors' times are taken before the first backup and after the
    // second, and the tree pack is allowed only when one of them moved
    // (one CI run saw it move with no tree pack: before the first backup).
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("s3-requests");
    std::fs::create_dir_all(&base).unwrap();
    let d = tempfile::tempdir_in(&base).unwrap();
    let Some((_server, port)) = start_moto(&d.path().join("moto-tmp")) else {
        return;
    };
    let proxy = FaultProxy::start(port);
    proxy.faults.store(false, Ordering::SeqCst);
    // More files than a restore batch (1,024), more bytes than a big
    // restore (64 MiB): several packs of 16 MiB, each cut by batches.
    let tree = d.path().join("tree");
    for i in 0..2600u64 {
        write(
            &tree.join(format!("d{}/f{i}.bin", i % 13)),
            &rand_bytes(1000 + i, 20 << 10),
        );
    }
    write(&tree.join("big.bin"), &rand_bytes(7, 20 << 20));
    let repo = format!("s3:http://127.0.0.1:{}/larder-test/counted", proxy.port);
    let a = Client::new(&repo, &s3_env());
    a.run(&["init"], 0);
    let src = tree.to_str().unwrap();

    let ancestors_before = ancestor_times(&tree);
    proxy.reset_counts();
    a.run(&["backup", src], 0);
    let (_, what) = proxy.counts();
    let packs = proxy.count("PUT packs");
    assert!(packs >= 4, "several packs: {what}");
    for (kind, n) in [
        ("LIST index", 1),
        ("LIST marks", 1),
        ("LIST packs", 1),
        ("PUT index", 1),
        ("PUT snapshots", 1),
    ] {
        assert_eq!(proxy.count(kind), n, "cold backup, {kind}: {what}");
    }

    proxy.reset_counts();
    a.run(&["backup", src], 0);
    let (n, what) = proxy.counts();
    eprintln!("requests for an unchanged re-backup: {n} ({what})");
    // The window of the times is wider than the one that matters (it
    // also covers the first backup), so a moved ancestor allows the tree
    // pack without requiring it.
    let moved = u64::from(ancestor_times(&tree) != ancestors_before);
    for (kind, least, most) in [
        ("LIST index", 1, 1),
        ("LIST marks", 1, 1),
        ("LIST packs", 0, 0),
        ("PUT index", 0, moved),
        ("PUT packs", 0, moved),
        ("GET packs", 0, 0),
    ] {
        let n = proxy.count(kind);
        assert!(
            (least..=most).contains(&n),
            "re-backup, {kind} {n}, not in {least}..={most} (an ancestor moved: {moved}): {what}"
        );
    }
    assert_eq!(
        proxy.count("PUT packs"),
        proxy.count("PUT index"),
        "a tree pack comes with its index segment: {what}"
    );

    proxy.reset_counts();
    restore(&a, &tree, &a.dir.path().join("restored"));
    let (n, what) = proxy.counts();
    eprintln!("requests for a restore: {n} ({what})");
    // Each data pack once; the one pack of trees (a few kB) is not read:
    // the backup kept its trees in the local cache.
    assert_eq!(
        proxy.count("GET packs"),
        packs - 1,
        "each pack once: {what}"
    );

    proxy.reset_counts();
    let one = tree.join("d5/f5.bin");
    let t1 = a.dir.path().join("one");
    let args = ["restore", "latest", "--target", t1.to_str().unwrap()];
    a.run(
        &[&args[..], &["--include", one.to_str().unwrap()]].concat(),
        0,
    );
    let got = t1.join(one.strip_prefix("/").unwrap());
    assert_eq!(std::fs::read(got).unwrap(), rand_bytes(1005, 20 << 10));
    let (_, what) = proxy.counts();
    assert_eq!(proxy.count("GET packs"), 1, "one small file: {what}");

    // A command lists the index only if it reads it, and then once, under
    // its lock and after it picked its snapshots: none for those that never
    // read it (even with an empty cache, a new machine's), one listing for
    // a reader. A prune lists it twice: under its lock, and again after it
    // lists the snapshots it marks from, which a backup may have added to
    // meanwhile (SPEC section 13); and `marks/` once more to find its
    // earlier plans.
    let fresh = Client::new(&repo, &s3_env());
    for (who, args, index, marks) in [
        (&a, &["snapshots"][..], 0, 0),
        (&fresh, &["snapshots"][..], 0, 0),
        (&a, &["key", "list"], 0, 0),
        (&a, &["forget", "--keep-last", "100"], 0, 0),
        (&a, &["cat", "tree", "latest"], 1, 1),
        (&a, &["prune", "--dry-run"], 2, 3),
    ] {
        proxy.reset_counts();
        who.run(args, 0);
        let (_, what) = proxy.counts();
        assert_eq!(proxy.count("LIST index"), index, "{args:?}: {what}");
        assert_eq!(proxy.count("LIST marks"), marks, "{args:?}: {what}");
        if index == 0 {
            assert_eq!(proxy.count("GET index"), 0, "{args:?}: {what}");
        }
    }
    // `copy` reads its source's index under the source's read lock and its
    // destination's under the destination's lock: once each. Counted with
    // the S3 repository as the source (into a local one), then as the
    // destination (from that local copy, with a new cache).
    let local = a.dir.path().join("local-copy");
    let mut env = s3_env();
    env.push(("LARDER_FROM_PASSWORD", PASS));
    let to_local = Client::new(local.to_str().unwrap(), &env);
    to_local.run(&["init"], 0);
    let to_s3 = Client::new(&repo, &env);
    let local_arg = local.to_str().unwrap().to_string();
    for (who, from, copied) in [(&to_local, &repo, true), (&to_s3, &local_arg, false)] {
        proxy.reset_counts();
        let (out, _) = who.run(&["--json", "copy", "--from-repo", from], 0);
        let (_, what) = proxy.counts();
        let side = if copied { "from S3" } else { "into S3" };
        assert_eq!(proxy.count("LIST index"), 1, "copy {side}: {what}");
        assert_eq!(proxy.count("LIST marks"), 1, "copy {side}: {what}");
        eprintln!("copy {side}: {out}");
    }
    assert_eq!(to_local.snapshot_count(), a.snapshot_count());

    // A second machine, empty cache: the parent's trees (14 directories
    // and the tree's ancestors) come a tree pack at a time.
    let b = Client::new(&repo, &s3_env());
    proxy.reset_counts();
    b.run(&["backup", src], 0);
    let (_, what) = proxy.counts();
    assert!(
        proxy.count("GET packs") <= 2,
        "trees are fetched by the pack, not one request per directory: {what}"
    );
    // At most a pack of the ancestors' trees (other tests touch /tmp).
    assert!(proxy.count("PUT packs") <= 1, "no data again: {what}");

    // A run killed mid-upload: the next backup looks for its packs.
    write(&tree.join("new.bin"), &rand_bytes(9, 24 << 20));
    let child = a
        .cmd(&["--limit-upload", "4096", "backup", src])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_running(child, Duration::from_secs(3));
    proxy.reset_counts();
    a.run(&["backup", src], 0);
    let (_, what) = proxy.counts();
    assert_eq!(proxy.count("LIST packs"), 1, "after a killed run: {what}");
    a.run(&["check", "--read-data"], 0);
}

/// S3 credentials from the shared credentials file under `AWS_PROFILE`,
/// as restic reads them, when the `AWS_*` key variables are unset; a
/// profile that is not there is named in the error.
/// A new machine restoring from a repository of many index segments (its
/// first open loads them in bulk, as a base of sorted blocks, not as rows)
/// still fetches the snapshot's trees a tree pack at a time: the packs
/// table knows which packs hold only trees, and the pack's own header says
/// where each tree is.
#[test]
fn s3_first_restore_after_a_bulk_load_fetches_trees_by_the_pack() {
    let d = tempfile::tempdir().unwrap();
    let Some((_server, port)) = start_moto(&d.path().join("moto-tmp")) else {
        return;
    };
    let proxy = FaultProxy::start(port);
    proxy.faults.store(false, Ordering::SeqCst);
    let tree = d.path().join("tree");
    const DIRS: u64 = 60;
    for i in 0..DIRS * 3 {
        write(
            &tree.join(format!("d{}/e{}/f{i}", i % DIRS, i % 2)),
            &rand_bytes(i, 3000),
        );
    }
    let repo = format!("s3:http://127.0.0.1:{}/larder-test/bulk", proxy.port);
    let a = Client::new(&repo, &s3_env());
    a.run(&["init"], 0);
    let src = tree.to_str().unwrap();
    // 20 backups, each with one more file: 20 index segments.
    for k in 0..20u64 {
        write(&tree.join(format!("d0/new{k}")), &rand_bytes(500 + k, 100));
        a.run(&["-q", "backup", src], 0);
    }
    let b = Client::new(&repo, &s3_env());
    proxy.reset_counts();
    let target = b.dir.path().join("restored");
    restore(&b, &tree, &target);
    let (_, what) = proxy.counts();
    assert_eq!(proxy.count("LIST index"), 1, "{what}");
    let db = walkdir::WalkDir::new(b.dir.path().join("cache"))
        .into_iter()
        .flatten()
        .find(|e| e.file_name() == "index.sqlite")
        .unwrap()
        .into_path();
    let c = rusqlite::Connection::open(&db).unwrap();
    let blocks: i64 = c
        .query_row("SELECT count(*) FROM blob_base", [], |r| r.get(0))
        .unwrap();
    assert!(blocks > 0, "the first open loaded a base");
    // 180 directories and their ancestors: one request each would be far
    // more than the 21 data packs and the few tree packs that hold them.
    let reads = proxy.count("GET packs");
    assert!(
        reads < DIRS,
        "trees come a pack at a time, not one request per directory: {what}"
    );
    eprintln!("first restore after a bulk load: {reads} pack reads ({what})");
}

#[test]
fn s3_credentials_from_a_profile() {
    let d = tempfile::tempdir().unwrap();
    let Some((_server, port)) = start_moto(&d.path().join("moto-tmp")) else {
        return;
    };
    let creds = d.path().join("credentials");
    std::fs::write(
        &creds,
        "[default]\naws_access_key_id = nothere\n\n[backup]\naws_access_key_id = testing\naws_secret_access_key = s3cretKey\n",
    )
    .unwrap();
    let file = creds.to_str().unwrap();
    let repo = format!("s3:http://127.0.0.1:{port}/larder-test/profile");
    let env = [
        ("AWS_SHARED_CREDENTIALS_FILE", file),
        ("AWS_PROFILE", "backup"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ];
    let a = Client::new(&repo, &env);
    a.run(&["init"], 0);
    let tree = d.path().join("tree");
    make_tree(&tree, 1 << 20);
    a.run(&["backup", tree.to_str().unwrap()], 0);
    assert_eq!(a.snapshot_count(), 1);
    let b = Client::new(
        &repo,
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", file),
            ("AWS_PROFILE", "other"),
        ],
    );
    let (_, err) = b.run(&["snapshots"], 1);
    assert!(err.contains("[other]") && err.contains(file), "{err}");
    let c = Client::new(&repo, &[("AWS_SHARED_CREDENTIALS_FILE", file)]);
    let (_, err) = c.run(&["snapshots"], 1);
    assert!(
        err.contains("aws_secret_access_key"),
        "the default profile is incomplete: {err}"
    );
}

#[test]
fn rest_unreachable_names_server_and_object_without_the_password() {
    let port = free_port();
    let a = Client::new(&rest_repo(port), &[("LARDER_RETRY_TIME", "1")]);
    let (code, out, err) = run(a.cmd(&["snapshots"]));
    assert_ne!(code, 0);
    assert!(
        !out.contains(REST_PASS) && !err.contains(REST_PASS),
        "{err}"
    );
    assert!(
        err.contains(&format!("rest:http://larder:***@127.0.0.1:{port}/repo/")),
        "{err}"
    );
    assert!(err.contains("config"), "{err}");
}

/// The modification and change times of every directory above `p`, which
/// a snapshot records beside the backed-up path.
pub(crate) fn ancestor_times(p: &Path) -> Vec<(i64, i64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    p.ancestors()
        .skip(1)
        .map(|a| {
            let m = std::fs::metadata(a).unwrap();
            (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
        })
        .collect()
}

/// The `rclone serve restic` processes serving `path` (by their arguments).
fn rclone_servers(path: &Path) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-af", "rclone serve restic"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(path.to_str().unwrap()) && !l.contains("sh -c"))
        .map(str::to_string)
        .collect()
}

/// `rclone:REMOTE:PATH` (restic's rclone backend): a remote configured in
/// rclone's environment (its local backend) takes the whole sequence; no
/// server outlives a command, nor a backup killed with SIGKILL, after
/// which the next backup completes; two backups at once each have their
/// own server and both complete; the server's password is never on its
/// command line; a remote rclone does not know is a clear error with
/// rclone's words.
#[test]
fn rclone_remote_full_sequence_and_a_kill() {
    if !have("rclone") && skip("rclone is not installed") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let env = [("RCLONE_CONFIG_LARDERTEST_TYPE", "local")];
    let repo = format!("rclone:lardertest:{}", store.display());
    let tree = d.path().join("tree");
    make_tree(&tree, 3 << 20);
    let a = Client::new(&repo, &env);
    full_sequence(&a, &tree);
    assert!(store.join("config").is_file() && store.join("data").is_dir());
    assert_eq!(
        rclone_servers(&store),
        Vec::<String>::new(),
        "a server outlived its command"
    );

    // kill -9 in the middle of a slow backup of new data, then resume.
    make_tree(&tree.join("second"), 20 << 20);
    let mut c = a.cmd(&["--limit-upload", "4096", "backup", tree.to_str().unwrap()]);
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let server = loop {
        let s = rclone_servers(&store);
        if !s.is_empty() || start.elapsed() > Duration::from_secs(30) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(server.len(), 1, "{server:?}");
    assert!(
        !server[0].contains("--pass") && !server[0].contains("--user"),
        "{server:?}"
    );
    kill_running(child, Duration::from_secs(2));
    let start = Instant::now();
    while !rclone_servers(&store).is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        rclone_servers(&store),
        Vec::<String>::new(),
        "the killed backup's server runs on"
    );
    assert_eq!(a.snapshot_count(), 1, "the killed backup left no snapshot");
    a.run(&["backup", tree.to_str().unwrap()], 0);
    a.run(&["check", "--read-data"], 0);
    restore(&a, &tree, &a.dir.path().join("after-kill"));

    // Two backups at once, each through its own server.
    write(&tree.join("third/n.txt"), b"new for both");
    let both: Vec<Child> = (0..2)
        .map(|_| {
            let mut c = a.cmd(&["backup", "-q", tree.to_str().unwrap()]);
            c.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in both {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(a.snapshot_count(), 4);
    a.run(&["check"], 0);
    assert_eq!(rclone_servers(&store), Vec::<String>::new());

    let bad = Client::new("rclone:nosuchremote:x", &[]);
    let (_, err) = bad.run(&["snapshots"], 1);
    assert!(
        err.contains("rclone:nosuchremote:x") && err.contains("nosuchremote"),
        "{err}"
    );
    let none = Client::new(&repo, &[("LARDER_RCLONE_PROGRAM", "/nonexistent/rclone")]);
    let (_, err) = none.run(&["snapshots"], 1);
    assert!(err.contains("/nonexistent/rclone"), "{err}");
}

/// An `https` REST server whose certificate a CA of its own signed (as a
/// home server's often is): refused as unknown without `--cacert`, with an
/// error naming the server; with `--cacert CA.pem` (or `LARDER_CACERT`)
/// init, backup and restore work; `--insecure-tls` skips the check; a
/// `--cacert` file without a certificate, or missing, is refused by name.
#[test]
fn rest_over_https_with_cacert_or_insecure_tls() {
    let d = tempfile::tempdir().unwrap();
    let certs = d.path().join("certs");
    if test_certificates(&certs).is_none() {
        return;
    }
    let Some((_server, port)) = start_rclone_tls(&d.path().join("served"), &certs) else {
        return;
    };
    let repo = format!("rest:https://larder:{REST_PASS}@127.0.0.1:{port}/repo/");
    let ca = certs.join("ca.pem");
    let plain = Client::new(&repo, &[("LARDER_RETRY_TIME", "1")]);
    let (code, _, err) = run(plain.cmd(&["init"]));
    assert_ne!(code, 0, "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains(REST_PASS), "{err}");
    assert!(!d.path().join("served/repo/config").exists());

    let tree = d.path().join("tree");
    make_tree(&tree, 1 << 20);
    let a = Client::new(&repo, &[]);
    a.run(&["--cacert", path_str(&ca), "init"], 0);
    a.run(&["--cacert", path_str(&ca), "backup", path_str(&tree)], 0);
    let by_env = Client::new(&repo, &[("LARDER_CACERT", path_str(&ca))]);
    restore(&by_env, &tree, &d.path().join("restored"));
    let insecure = Client::new(&repo, &[]);
    let (out, _) = insecure.run(&["--insecure-tls", "snapshots", "--json"], 0);
    assert_eq!(json_lines(&out).len(), 1, "{out}");
    assert!(d.path().join("served/repo/config").is_file());

    let not_pem = d.path().join("not.pem");
    write(&not_pem, b"no certificate here\n");
    for (file, says) in [
        (not_pem.clone(), "holds no PEM certificate"),
        (d.path().join("missing.pem"), "missing.pem"),
    ] {
        let (code, _, err) = run(a.cmd(&["--cacert", path_str(&file), "snapshots"]));
        assert_ne!(code, 0, "{err}");
        assert!(err.contains(says) && err.contains(path_str(&file)), "{err}");
    }
}

// `Backend::replace_config` (the one rewrite of an object, for `migrate`):
// each backend writes a config, replaces it, reads the new bytes back, and
// refuses a location without a config with nothing created there. The
// SFTP backend's test (remote_sftp.rs) shares the helpers below.

pub(crate) const OLD: &[u8] = b"the config as init wrote it";
pub(crate) const NEW: &[u8] = b"the config as migrate rewrote it, longer than before";
pub(crate) const SHORT: &[u8] = b"short";

fn open_backend(repo: &str) -> Box<dyn Backend> {
    let opts = RemoteOptions::from_env().unwrap();
    larder::backend::open(Path::new(repo), &opts).unwrap()
}

/// Writes a config, replaces it twice (longer, then shorter bytes) and
/// reads each back; the config stays write-once for `write`.
pub(crate) fn replace_and_read_back(b: &dyn Backend) {
    b.write(Kind::Config, "config", OLD).unwrap();
    for new in [NEW, SHORT] {
        b.replace_config(new).unwrap();
        assert_eq!(
            b.read_bounded(Kind::Config, "config", 1 << 20).unwrap(),
            new
        );
    }
    let e = b.write(Kind::Config, "config", OLD).unwrap_err();
    assert!(matches!(e, larder::Error::RepositoryExists(_)), "{e}");
    assert_eq!(
        b.read_bounded(Kind::Config, "config", 1 << 20).unwrap(),
        SHORT
    );
}

/// `replace_config` where there is no config: `NoRepository`, naming the
/// location, and still no config.
pub(crate) fn refused_without_a_config(b: &dyn Backend, names: &str) {
    let e = b.replace_config(NEW).unwrap_err();
    assert!(matches!(e, larder::Error::NoRepository(_)), "{e}");
    assert!(e.to_string().contains(names), "{e}");
    assert!(!b.exists(Kind::Config, "config").unwrap());
}

#[test]
fn rest_refuses_to_replace_the_config() {
    let d = tempfile::tempdir().unwrap();
    let served = d.path().join("served");
    let Some((_server, port)) = start_rclone(&served, false) else {
        return;
    };
    let b = open_backend(&rest_repo(port));
    b.create().unwrap();
    b.write(Kind::Config, "config", OLD).unwrap();
    // rclone would rewrite the file in place, which is not atomic: refused,
    // named, the config as it was.
    let e = b.replace_config(NEW).unwrap_err().to_string();
    assert!(e.contains("does not replace the config atomically"), "{e}");
    assert!(e.contains(&format!("127.0.0.1:{port}/repo")), "{e}");
    assert!(!e.contains(REST_PASS), "{e}");
    assert_eq!(std::fs::read(served.join("repo/config")).unwrap(), OLD);
}

/// Set in the copy of this test binary that runs the S3 test's body (the
/// S3 backend reads its credentials from the process environment, which
/// a test must not change under the others running beside it).
const S3_CHILD_PORT: &str = "LARDER_TEST_REPLACE_CONFIG_S3_PORT";

/// Starts moto and runs this test again in a child process with the
/// credentials in its environment; there (`S3_CHILD_PORT` set), the body.
#[test]
fn s3_replaces_the_config() {
    if let Some(port) = std::env::var_os(S3_CHILD_PORT) {
        let port = port.to_string_lossy().into_owned();
        let s3 = |prefix: &str| {
            open_backend(&format!("s3:http://127.0.0.1:{port}/larder-test/{prefix}"))
        };
        let b = s3("repo");
        b.create().unwrap();
        refused_without_a_config(&*b, "larder-test/repo");
        replace_and_read_back(&*b);
        refused_without_a_config(&*s3("other"), "larder-test/other");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some((_server, port)) = start_moto(&d.path().join("moto-tmp")) else {
        return;
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "remote::s3_replaces_the_config"])
        .args(["--test-threads", "1", "--nocapture"])
        .env(S3_CHILD_PORT, port.to_string())
        .envs(s3_env())
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env("LARDER_RETRY_TIME", "20")
        .env("TMPDIR", d.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && o.contains("1 passed"),
        "the S3 body failed ({})\nstdout:\n{o}\nstderr:\n{e}",
        out.status
    );
}
