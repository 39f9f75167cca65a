//! The SFTP backend against a real server: OpenSSH's sshd, started by the
//! test on 127.0.0.1 at a free port as the current user, with a throwaway
//! host key and client key, stopped when the test ends. larder reaches it
//! through `LARDER_SFTP_COMMAND` (an `ssh` with that key, port and a
//! known_hosts file holding only the throwaway host key). Also
//! `Backend::replace_config` by `posix-rename@openssh.com`, offered and
//! denied.
//!
//! Without sshd or ssh the tests fail, unless `LARDER_ALLOW_SKIP=1`.

use crate::common::{self, PASS, TEST_WF};
use crate::remote::{NEW, OLD, SHORT, refused_without_a_config, replace_and_read_back};
use crate::support::*;
use larder::backend::retry::RetryPolicy;
use larder::backend::{Backend, Kind, SftpBackend, SftpTarget};
use larder::keys::{Credential, NewKey};
use larder::repository::{InitOptions, Repository};
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

/// An sshd serving SFTP on 127.0.0.1, killed on drop.
struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    user: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The tools the tests need, or why not (a failure unless skips are allowed).
fn tools_present(test: &str) -> bool {
    let missing: Vec<&str> = [
        (SSHD, Path::new(SSHD).exists()),
        ("ssh", have("ssh")),
        ("ssh-keygen", have("ssh-keygen")),
    ]
    .iter()
    .filter(|(_, ok)| !ok)
    .map(|(n, _)| *n)
    .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "{test}: {} missing (apt-get install openssh-server openssh-client; .ci/run installs them)",
        missing.join(", ")
    );
    if std::env::var("LARDER_ALLOW_SKIP").is_ok_and(|v| v == "1") {
        eprintln!("skipping {msg}");
        return false;
    }
    panic!("{msg}; set LARDER_ALLOW_SKIP=1 to skip");
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "ssh-keygen {}", path.display());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    fn start() -> Sshd {
        Self::start_with("")
    }

    /// `sftp_args`: arguments of its `internal-sftp` (`-P posix-rename`
    /// denies that request).
    fn start_with(sftp_args: &str) -> Sshd {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        set_mode(&d.join("authorized_keys"), 0o600);
        fs::create_dir_all(d.join("root")).unwrap();
        if is_root() {
            // sshd's privilege separation directory.
            let _ = fs::create_dir_all("/run/sshd");
        }
        let user = nix::unistd::User::from_uid(nix::unistd::getuid())
            .unwrap()
            .unwrap()
            .name;
        let port = free_port();
        let config = format!(
            "ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n\
             Subsystem sftp internal-sftp {sftp_args}\n",
            d = d.display()
        );
        fs::write(d.join("sshd_config"), config).unwrap();
        let log = fs::File::create(d.join("sshd.log")).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut sshd = Sshd {
            child,
            dir,
            port,
            user,
        };
        let host_pub = fs::read_to_string(sshd.dir.path().join("host_key.pub")).unwrap();
        fs::write(
            sshd.dir.path().join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_pub}"),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(st) = sshd.child.try_wait().unwrap() {
                panic!("sshd exited ({st}): {}", sshd.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen: {}",
                sshd.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        sshd
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// The ssh command larder runs (LARDER_SFTP_COMMAND), at `port`.
    fn command_at(&self, port: u16) -> String {
        let d = self.dir.path().display();
        format!(
            "exec ssh -F /dev/null -i {d}/client_key -p {port} -o IdentitiesOnly=yes \
             -o UserKnownHostsFile={d}/known_hosts -o StrictHostKeyChecking=yes \
             -o BatchMode=yes -o ConnectTimeout=10 -s -- \"$LARDER_SFTP_DESTINATION\" sftp"
        )
    }

    fn command(&self) -> String {
        self.command_at(self.port)
    }

    /// The directory the server stores the repository in (the test looks
    /// at it directly, as the server's disk).
    fn repo_dir(&self) -> PathBuf {
        self.repo_dir_named("repo")
    }

    /// The directory the server stores repository `name` in.
    fn repo_dir_named(&self, name: &str) -> PathBuf {
        self.dir.path().join("root").join(name)
    }

    /// `user@127.0.0.1:/…/root/repo`, the part after `sftp:`.
    fn spec(&self) -> String {
        self.spec_named("repo")
    }

    fn spec_named(&self, name: &str) -> String {
        format!(
            "{}@127.0.0.1:{}",
            self.user,
            self.repo_dir_named(name).display()
        )
    }

    fn repo_string(&self) -> PathBuf {
        PathBuf::from(format!("sftp:{}", self.spec()))
    }

    fn backend(&self) -> SftpBackend {
        self.backend_named("repo")
    }

    /// A backend for repository `name` on this server.
    fn backend_named(&self, name: &str) -> SftpBackend {
        SftpBackend::new(SftpTarget::parse(&self.spec_named(name)).unwrap())
            .unwrap()
            .with_command(&self.command())
    }

    /// A larder command on this server's repository with cache `cache`.
    fn larder(&self, cache: &Path) -> Command {
        let mut c = common::larder(&self.repo_string(), cache);
        c.env("LARDER_SFTP_COMMAND", self.command());
        c
    }

    fn run(&self, cache: &Path, args: &[&str], want: i32) -> (String, String) {
        let mut c = self.larder(cache);
        c.args(args).stdin(Stdio::null());
        let out = c.output().unwrap();
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert_eq!(
            out.status.code(),
            Some(want),
            "larder {args:?}\nstdout:\n{o}\nstderr:\n{e}\nsshd log:\n{}",
            self.log()
        );
        (o, e)
    }
}

/// Every file name below `dir` on the server's disk that starts with
/// `prefix` (relative paths).
fn files_named(dir: &Path, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).into_iter().flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix) {
            out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out
}

fn snapshot_count(sshd: &Sshd, cache: &Path) -> usize {
    let (out, _) = sshd.run(cache, &["snapshots", "--json"], 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array().unwrap().len()
}

fn source_tree(src: &Path) -> u64 {
    let mut bytes = 0;
    for (i, n) in [0usize, 1, 100, 40_000, 3 << 20, 700_000]
        .iter()
        .enumerate()
    {
        let data = rand_bytes(900 + i as u64, *n);
        bytes += data.len() as u64;
        write(&src.join(format!("d{}/f{i}.bin", i % 2)), &data);
    }
    std::os::unix::fs::symlink("d0/f0.bin", src.join("link")).unwrap();
    bytes
}

/// The whole life of a repository over SFTP through the CLI: init, backup,
/// an unchanged re-backup that stores nothing, an exact restore, `check
/// --read-data`, a second client with an empty cache, a backup killed with
/// SIGKILL mid-upload and the run after it, forget and prune.
#[test]
fn sftp_repository_lifecycle() {
    if !tools_present("sftp_repository_lifecycle") {
        return;
    }
    let sshd = Sshd::start();
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("c1/cache");
    let src = base.path().join("src");
    let bytes = source_tree(&src);

    let (out, _) = sshd.run(&cache, &["init"], 0);
    assert!(out.contains("created larder repository"), "{out}");
    assert!(sshd.repo_dir().join("config").is_file());
    assert_eq!(
        fs::read_dir(sshd.repo_dir().join("keys")).unwrap().count(),
        1
    );
    // init again: refused, the config untouched.
    let config = fs::read(sshd.repo_dir().join("config")).unwrap();
    let (_, err) = sshd.run(&cache, &["init"], 1);
    assert!(err.contains("already"), "{err}");
    assert_eq!(fs::read(sshd.repo_dir().join("config")).unwrap(), config);

    let (out, _) = sshd.run(&cache, &["backup", "--json", path_str(&src)], 0);
    let first = json_lines(&out).pop().unwrap();
    assert_eq!(first["message_type"], "summary", "{first}");
    assert!(first["data_added"].as_u64().unwrap() > bytes / 2, "{first}");
    assert!(pack_files(&sshd.repo_dir()).0 >= 1);

    let (out, _) = sshd.run(&cache, &["backup", "--json", path_str(&src)], 0);
    let second = json_lines(&out).pop().unwrap();
    // Nothing read again, nothing stored but the trees above `src` (the
    // temporary directory's own times change as other tests run).
    assert_eq!(second["files_unmodified"], 6, "{second}");
    assert_eq!(second["bytes_read"], 0, "{second}");
    assert!(second["data_added"].as_u64().unwrap() < 4096, "{second}");

    let dest = base.path().join("restored");
    let latest_src = format!("latest:{}", path_str(&src));
    sshd.run(
        &cache,
        &["restore", &latest_src, "--target", path_str(&dest)],
        0,
    );
    assert!(assert_same_tree(&src, &dest) >= 8);

    let (out, err) = sshd.run(&cache, &["check", "--read-data"], 0);
    assert!(out.contains("no errors were found"), "{out}{err}");

    // A second machine: an empty cache (and its own state directory).
    let cache2 = base.path().join("c2/cache");
    assert_eq!(snapshot_count(&sshd, &cache2), 2);
    let dest2 = base.path().join("restored2");
    sshd.run(
        &cache2,
        &["restore", &latest_src, "--target", path_str(&dest2)],
        0,
    );
    assert!(assert_same_tree(&src, &dest2) >= 8);

    killed_backup_then_rerun(&sshd, &cache, base.path());

    // forget + prune: the snapshots of `src` go, then the packs only they
    // used, and the killed run's leftovers.
    let (out, _) = sshd.run(&cache, &["snapshots", "--json"], 0);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let gone: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["paths"] == serde_json::json!([path_str(&src)]))
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(gone.len(), 2, "{out}");
    let mut args = vec!["forget"];
    args.extend(gone.iter().map(String::as_str));
    sshd.run(&cache, &args, 0);
    assert_eq!(snapshot_count(&sshd, &cache), 1);
    let packs_before = pack_files(&sshd.repo_dir()).0;
    for _ in 0..2 {
        sshd.run(&cache, &["prune", "--keep-delete", "0s"], 0);
    }
    assert_eq!(files_named(&sshd.repo_dir(), ".tmp-"), Vec::<String>::new());
    assert_eq!(
        files_named(&sshd.repo_dir(), ".probe-"),
        Vec::<String>::new()
    );
    assert!(
        pack_files(&sshd.repo_dir()).0 < packs_before,
        "prune deleted no pack of the forgotten snapshots"
    );
    let (out, err) = sshd.run(&cache2, &["check", "--read-data"], 0);
    assert!(out.contains("no errors were found"), "{out}{err}");
    let big = base.path().join("big");
    let dest3 = base.path().join("restored3");
    let latest_big = format!("latest:{}", path_str(&big));
    sshd.run(
        &cache2,
        &["restore", &latest_big, "--target", path_str(&dest3)],
        0,
    );
    assert_eq!(assert_same_tree(&big, &dest3), 6);
}

/// A backup of a larger tree killed with SIGKILL while it uploads a pack
/// (a `.tmp-*` file exists on the server); the next backup completes, the
/// repository checks clean, and the half upload is no object.
fn killed_backup_then_rerun(sshd: &Sshd, cache: &Path, base: &Path) {
    let big = base.join("big");
    for i in 0..6u64 {
        write(
            &big.join(format!("b{i}.bin")),
            &rand_bytes(7000 + i, 8 << 20),
        );
    }
    let before = snapshot_count(sshd, cache);
    let mut child = sshd
        .larder(cache)
        .args(["backup", "-q"])
        .arg(&big)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("backup finished ({st}) before it could be killed");
        }
        if !files_named(&sshd.repo_dir().join("packs"), ".tmp-").is_empty() {
            child.kill().unwrap();
            break;
        }
        assert!(Instant::now() < deadline, "no upload began");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.wait().unwrap();
    // The ssh process under the killed run loses its stdin and exits.
    assert_eq!(
        snapshot_count(sshd, cache),
        before,
        "the killed run saved a snapshot"
    );
    let (out, _) = sshd.run(cache, &["backup", "--json", path_str(&big)], 0);
    assert_eq!(json_lines(&out).pop().unwrap()["message_type"], "summary");
    assert_eq!(snapshot_count(sshd, cache), before + 1);
    let (out, err) = sshd.run(cache, &["check", "--read-data"], 0);
    assert!(out.contains("no errors were found"), "{out}{err}");
    // No temporary name is listed as an object.
    let listed = sshd.backend().list(Kind::Pack).unwrap();
    assert!(
        listed
            .iter()
            .all(|e| e.name.len() == 64 && !e.name.starts_with('.')),
        "{listed:?}"
    );
    assert_eq!(listed.len(), pack_files(&sshd.repo_dir()).0);
}

/// The backend's own promises over SFTP: write-once (a second config is
/// refused, a second pack with the same name is a no-op), bounded and
/// ranged reads, what is not a regular file is refused without being
/// followed, listings skip temporaries that `leftovers` reports, ages come
/// from the server's clock, and a missing object is "not found".
#[test]
fn sftp_backend_objects() {
    if !tools_present("sftp_backend_objects") {
        return;
    }
    let sshd = Sshd::start();
    let b = sshd.backend();
    b.create().unwrap();
    // The layout alone, with a key (an init stopped before its config):
    // created again. Any other object in it: refused.
    b.write(Kind::Key, &"1".repeat(64), b"a key").unwrap();
    b.create().unwrap();
    b.write(Kind::Snapshot, &"2".repeat(64), b"a snapshot")
        .unwrap();
    let e = b.create().unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    b.delete(Kind::Snapshot, &"2".repeat(64)).unwrap();
    b.write(Kind::Config, "config", b"one").unwrap();
    let e = b.create().unwrap_err();
    assert!(matches!(e, larder::Error::RepositoryExists(_)), "{e}");
    let e = b.write(Kind::Config, "config", b"two").unwrap_err();
    assert!(matches!(e, larder::Error::RepositoryExists(_)), "{e}");
    assert_eq!(b.read_bounded(Kind::Config, "config", 10).unwrap(), b"one");

    let big = rand_bytes(5, 300_001);
    let name = "ab".repeat(32);
    let mut st = b.stage(Kind::Pack).unwrap();
    st.append(&big).unwrap();
    b.commit(Kind::Pack, &name, st).unwrap();
    b.write(Kind::Pack, &name, &big).unwrap(); // same name: a no-op
    assert_eq!(b.read_bounded(Kind::Pack, &name, 1 << 20).unwrap(), big);
    assert_eq!(
        b.read_range(Kind::Pack, &name, 70_000, 100_000).unwrap(),
        &big[70_000..170_000]
    );
    assert_eq!(b.size(Kind::Pack, &name).unwrap(), 300_001);
    let e = b.read_bounded(Kind::Pack, &name, 300_000).unwrap_err();
    assert!(
        e.to_string()
            .contains("300001 bytes is more than the 300000"),
        "{e}"
    );
    let e = b.read_range(Kind::Pack, &name, 300_000, 2).unwrap_err();
    assert!(
        e.to_string().contains("beyond the object's 300001 bytes"),
        "{e}"
    );
    let on_disk = sshd.repo_dir().join(format!("packs/ab/{name}"));
    assert_eq!(fs::read(&on_disk).unwrap(), big);

    // Not regular files in objects' places.
    let snaps = sshd.repo_dir().join("snapshots");
    std::os::unix::fs::symlink("/dev/zero", snaps.join("zero")).unwrap();
    nix::unistd::mkfifo(&snaps.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    fs::create_dir(snaps.join("dir")).unwrap();
    for (n, what) in [
        ("zero", "a symbolic link"),
        ("fifo", "a FIFO"),
        ("dir", "a directory"),
    ] {
        for e in [
            b.read_bounded(Kind::Snapshot, n, 1 << 20).unwrap_err(),
            b.read_range(Kind::Snapshot, n, 0, 1).unwrap_err(),
        ] {
            assert!(matches!(e, larder::Error::Corrupt { .. }), "{n}: {e}");
            assert!(
                e.to_string()
                    .contains(&format!("is {what}, not a regular file")),
                "{e}"
            );
        }
    }

    // A killed upload's temporary: not listed, reported as a leftover.
    fs::write(snaps.join(".tmp-0011223344556677"), b"half").unwrap();
    b.write(Kind::Snapshot, "s1", b"snap").unwrap();
    let mut names: Vec<String> = b
        .list(Kind::Snapshot)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, ["dir", "fifo", "s1", "zero"]);
    // At the root, a killed init's config write is one too; a directory
    // of that name is no write's and is not listed.
    let root = sshd.repo_dir();
    fs::write(root.join(".tmp-8899aabbccddeeff"), b"conf").unwrap();
    fs::create_dir(root.join(".tmp-0123456789abcdef")).unwrap();
    assert_eq!(
        b.leftovers().unwrap(),
        [".tmp-8899aabbccddeeff", "snapshots/.tmp-0011223344556677"]
    );
    for l in b.leftovers().unwrap() {
        b.remove_leftover(&l).unwrap();
    }
    assert!(b.leftovers().unwrap().is_empty());
    assert!(root.join(".tmp-0123456789abcdef").is_dir());
    assert_eq!(
        b.list(Kind::Pack).unwrap(),
        [larder::backend::Entry {
            name: name.clone(),
            size: 300_001
        }]
    );

    // Ages by the server's clock: an object stamped two hours back.
    let age = b.age(Kind::Snapshot, "s1").unwrap().unwrap();
    assert!(age < Duration::from_secs(60), "{age:?}");
    set_mtime(
        &snaps.join("s1"),
        (nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
            .unwrap()
            .tv_sec()
            - 7200)
            * 1_000_000_000,
    );
    let age = b.age(Kind::Snapshot, "s1").unwrap().unwrap();
    assert!(
        age >= Duration::from_secs(7100) && age < Duration::from_secs(7400),
        "{age:?}"
    );

    assert!(b.exists(Kind::Snapshot, "s1").unwrap());
    b.delete(Kind::Snapshot, "s1").unwrap();
    b.delete(Kind::Snapshot, "s1").unwrap();
    assert!(!b.exists(Kind::Snapshot, "s1").unwrap());
    let e = b.read_bounded(Kind::Snapshot, "s1", 10).unwrap_err();
    match &e {
        larder::Error::Backend { object, source } => {
            assert_eq!(object, "snapshots/s1");
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{e}");
        }
        _ => panic!("{e}"),
    }
    assert!(e.to_string().contains("SSH_FX_NO_SUCH_FILE"), "{e}");

    // The library opens a repository over SFTP as any other.
    let b2 = SftpBackend::new(
        SftpTarget::parse(&format!(
            "{}@127.0.0.1:{}/lib",
            sshd.user,
            sshd.dir.path().join("root").display()
        ))
        .unwrap(),
    )
    .unwrap()
    .with_command(&sshd.command());
    let cache = sshd.dir.path().join("cache");
    let opts = InitOptions {
        pack_size: 1 << 20,
        ..Default::default()
    };
    let key = NewKey::Passphrase {
        pass: PASS.to_string().into(),
        work_factor: TEST_WF,
    };
    drop(Repository::init(Arc::new(b2), &key, &opts, &cache).unwrap());
    let b3 = SftpBackend::new(
        SftpTarget::parse(&format!(
            "{}@127.0.0.1:{}/lib",
            sshd.user,
            sshd.dir.path().join("root").display()
        ))
        .unwrap(),
    )
    .unwrap()
    .with_command(&sshd.command());
    Repository::open(Arc::new(b3), &Credential::passphrase(PASS), &cache).unwrap();
}

/// ssh that cannot connect (nothing listens at the port) fails the command
/// within seconds, with ssh's own reason and the repository named.
#[test]
fn sftp_unreachable_server_fails_clearly() {
    if !tools_present("sftp_unreachable_server_fails_clearly") {
        return;
    }
    let sshd = Sshd::start();
    let cache = sshd.dir.path().join("c/cache");
    let mut c = sshd.larder(&cache);
    c.env("LARDER_SFTP_COMMAND", sshd.command_at(free_port()))
        .args(["snapshots"])
        .stdin(Stdio::null());
    let started = Instant::now();
    let out = c.output().unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert!(err.contains(&format!("sftp:{}", sshd.spec())), "{err}");
    assert!(err.contains("exited with exit status: 255"), "{err}");
    eprintln!("unreachable server reported after {took:?}: {err}");

    // A command that is not an SFTP server at all: a clear protocol error.
    let mut c = sshd.larder(&cache);
    c.env(
        "LARDER_SFTP_COMMAND",
        "echo 'Welcome to my shell!'; sleep 30",
    )
    .args(["snapshots"])
    .stdin(Stdio::null());
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is the remote shell printing text?"), "{err}");
}

/// The ssh under a session dies (killed): the next request runs on a new
/// session and succeeds; once no new session can connect either (sshd is
/// gone), the request is retried within the retry budget and then fails
/// with ssh's reason instead of hanging.
#[test]
fn sftp_dead_ssh_is_replaced_or_reported() {
    if !tools_present("sftp_dead_ssh_is_replaced_or_reported") {
        return;
    }
    let mut sshd = Sshd::start();
    let pids = sshd.dir.path().join("ssh.pids");
    let line = format!("echo $$ >> {}; {}", pids.display(), sshd.command());
    let b = SftpBackend::new(SftpTarget::parse(&sshd.spec()).unwrap())
        .unwrap()
        .with_command(&line)
        .with_retry(RetryPolicy {
            budget: Duration::from_secs(3),
            base: Duration::from_millis(100),
            cap: Duration::from_millis(500),
        });
    b.create().unwrap();
    b.write(Kind::Snapshot, "s", b"kept").unwrap();
    let ssh_pids = || -> Vec<i32> {
        fs::read_to_string(&pids)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    };
    let kill = |pid: i32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap()
    };
    assert_eq!(ssh_pids().len(), 1, "one session for sequential requests");
    kill(ssh_pids()[0]);
    assert_eq!(b.read_bounded(Kind::Snapshot, "s", 10).unwrap(), b"kept");
    assert_eq!(ssh_pids().len(), 2, "the dead session was replaced");

    // No server any more: the listener stops, the live session is killed.
    let _ = sshd.child.kill();
    let _ = sshd.child.wait();
    kill(ssh_pids()[1]);
    let e = b.read_bounded(Kind::Snapshot, "s", 10).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("repository object snapshots/s"), "{msg}");
    assert!(msg.contains("Connection refused"), "{msg}");
    assert!(msg.contains("gave up after"), "{msg}");
    assert!(ssh_pids().len() > 3, "new sessions were tried: {msg}");
}

/// Every ssh under a running backup is killed twice while it uploads (the
/// server restarted, the network dropped): the backup reconnects and
/// completes, and the repository checks clean and restores exactly.
#[test]
fn sftp_backup_survives_lost_connections() {
    if !tools_present("sftp_backup_survives_lost_connections") {
        return;
    }
    let sshd = Sshd::start();
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("cache");
    sshd.run(&cache, &["init"], 0);
    let src = base.path().join("src");
    for i in 0..6u64 {
        write(
            &src.join(format!("b{i}.bin")),
            &rand_bytes(300 + i, 6 << 20),
        );
    }
    let pids = base.path().join("ssh.pids");
    let line = format!("echo $$ >> {}; {}", pids.display(), sshd.command());
    let mut child = sshd
        .larder(&cache)
        .env("LARDER_SFTP_COMMAND", &line)
        .args(["--limit-upload", "8192", "backup", "-q"])
        .arg(&src)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut killed = 0;
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(1500));
        assert!(child.try_wait().unwrap().is_none(), "still uploading");
        for pid in fs::read_to_string(&pids).unwrap_or_default().lines() {
            let pid = nix::unistd::Pid::from_raw(pid.trim().parse().unwrap());
            if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(killed >= 2, "sessions were killed under the backup");
    assert!(
        fs::read_to_string(&pids).unwrap().lines().count() > killed,
        "new sessions replaced the killed ones"
    );
    let (o, e) = sshd.run(&cache, &["check", "--read-data"], 0);
    assert!(o.contains("no errors were found"), "{o}{e}");
    let target = base.path().join("restored");
    let t = target.to_str().unwrap();
    sshd.run(&cache, &["restore", "latest", "--target", t], 0);
    assert_same_tree(&src, &target.join(src.strip_prefix("/").unwrap()));
}

/// With `posix-rename@openssh.com` the config is replaced, leaving no
/// temporary file; a server that denies that request (and so does not
/// offer it) gets the refusal of storage that cannot replace atomically,
/// with nothing written and the config as it was.
#[test]
fn sftp_replaces_the_config_by_posix_rename() {
    if !tools_present("sftp_replaces_the_config_by_posix_rename") {
        return;
    }
    let sshd = Sshd::start();
    let b = sshd.backend();
    b.create().unwrap();
    let layout = list_rel(&sshd.repo_dir());
    refused_without_a_config(&b, &sshd.repo_dir().display().to_string());
    assert_eq!(list_rel(&sshd.repo_dir()), layout, "nothing created");
    replace_and_read_back(&b);
    assert_eq!(fs::read(sshd.repo_dir().join("config")).unwrap(), SHORT);
    assert!(b.leftovers().unwrap().is_empty());
    let other = sshd.backend_named("other");
    refused_without_a_config(&other, &sshd.repo_dir_named("other").display().to_string());
    assert!(!sshd.repo_dir_named("other").exists());

    let denying = Sshd::start_with("-P posix-rename");
    let b = denying.backend();
    b.create().unwrap();
    b.write(Kind::Config, "config", OLD).unwrap();
    let e = b.replace_config(NEW).unwrap_err();
    assert!(matches!(e, larder::Error::Usage(_)), "{e}");
    let e = e.to_string();
    assert!(e.contains("cannot replace the config atomically"), "{e}");
    assert!(e.contains("posix-rename@openssh.com"), "{e}");
    assert!(e.contains(&denying.repo_dir().display().to_string()), "{e}");
    assert_eq!(
        b.read_bounded(Kind::Config, "config", 1 << 20).unwrap(),
        OLD
    );
    assert!(b.leftovers().unwrap().is_empty(), "nothing was written");
}

/// A repository an older larder wrote (format 4), on an SFTP server: read
/// only until `migrate` replaces its config by `posix-rename`, then it
/// takes a backup that trains a dictionary and a prune that writes marks,
/// whose directories the old format never had and which are made over
/// SFTP on their first write.
#[test]
fn sftp_old_repository_is_migrated_and_takes_writers() {
    use crate::old_format::{fixture, text_tree};
    if !tools_present("sftp_old_repository_is_migrated_and_takes_writers") {
        return;
    }
    let sshd = Sshd::start();
    let base = tempfile::tempdir().unwrap();
    let f = fixture(4, base.path(), true);
    let st = Command::new("cp")
        .args(["-r"])
        .arg(base.path().join("repo"))
        .arg(sshd.repo_dir())
        .status()
        .unwrap();
    assert!(st.success());
    let cache = base.path().join("cache");
    let run = |args: &[&str], want: i32| -> (String, String) {
        let mut c = sshd.larder(&cache);
        c.env("LARDER_PASSWORD", &f.passphrase)
            .args(args)
            .stdin(Stdio::null());
        let out = c.output().unwrap();
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert_eq!(out.status.code(), Some(want), "{args:?}\n{o}\n{e}");
        (o, e)
    };
    let src = base.path().join("src");
    text_tree(&src, 150);
    let (_, err) = run(&["backup", path_str(&src)], 1);
    assert!(err.contains("larder migrate upgrade_repo_v6"), "{err}");
    let (out, _) = run(&["migrate", "upgrade_repo_v6"], 0);
    assert!(out.contains("to 6"), "{out}");
    assert_eq!(fs::read(sshd.repo_dir().join("config")).unwrap()[5], 6);
    run(&["backup", path_str(&src)], 0);
    assert_eq!(
        fs::read_dir(sshd.repo_dir().join("dicts")).unwrap().count(),
        1
    );
    run(
        &[
            "forget",
            &f.snapshot,
            "--prune",
            "--keep-delete",
            "0s",
            "--max-unused",
            "0",
        ],
        0,
    );
    assert!(sshd.repo_dir().join("marks").is_dir());
    let (out, _) = run(&["check", "--read-data"], 0);
    assert!(out.contains("no errors were found"), "{out}");
    let target = base.path().join("restored");
    run(&["restore", "latest", "--target", path_str(&target)], 0);
    let got = crate::faults::manifest(&target.join(src.strip_prefix("/").unwrap()));
    crate::faults::assert_same_manifest(&crate::faults::manifest(&src), &got, "over SFTP");
}

/// restic's URL form with a port, `sftp://user@host:PORT//abs/path`, reaches
/// the server at that port: the ssh command takes the port only from
/// `LARDER_SFTP_PORT`, so a wrong port in the string fails to connect and
/// the right one makes a repository (its `%20` decoded to a space on the
/// server's disk) that the `sftp:user@host:/path` spelling opens too. Two
/// backups through it at once both land, and the restore is exact.
#[test]
fn sftp_url_form_with_a_port() {
    if !tools_present("sftp_url_form_with_a_port") {
        return;
    }
    let sshd = Sshd::start();
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("cache");
    let src = base.path().join("src");
    source_tree(&src);
    let dir = sshd.repo_dir_named("my repo");
    let abs = dir.display().to_string().replace(' ', "%20");
    let url = |port: u16| format!("sftp://{}@127.0.0.1:{port}/{abs}", sshd.user);
    // The command passes the port it is given, never the server's own.
    let command = sshd
        .command_at(0)
        .replace("-p 0", "-p \"$LARDER_SFTP_PORT\"");
    let larder = |repo: &str, args: &[&str]| {
        let mut c = common::larder(Path::new(repo), &cache);
        c.env("LARDER_SFTP_COMMAND", &command).args(args);
        c
    };
    let run = |repo: &str, args: &[&str]| {
        crate::faults::wait_bounded(crate::faults::spawn(larder(repo, args)), repo)
    };

    // A command that does not take the port would reach its own: refused.
    let mut c = common::larder(Path::new(&url(sshd.port)), &cache);
    c.env("LARDER_SFTP_COMMAND", sshd.command()).arg("init");
    let o = crate::faults::wait_bounded(crate::faults::spawn(c), "init");
    assert_eq!(o.code, 1, "{}", o.all());
    assert!(
        o.err.contains("does not use $LARDER_SFTP_PORT"),
        "{}",
        o.all()
    );
    assert!(!dir.exists());

    let wrong = run(&url(free_port()), &["init"]);
    assert_ne!(wrong.code, 0, "{}", wrong.all());
    assert!(wrong.err.contains("ssh"), "{}", wrong.all());
    assert!(!dir.exists());

    let right = url(sshd.port);
    let o = run(&right, &["init"]);
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(dir.join("config").is_file(), "{}", o.all());

    let (a, b) = (
        crate::faults::spawn(larder(&right, &["backup", "--json", path_str(&src)])),
        crate::faults::spawn(larder(&right, &["backup", "--json", path_str(&src)])),
    );
    let ids: Vec<String> = [a, b]
        .into_iter()
        .map(|c| crate::faults::snapshot_id_of(&crate::faults::wait_bounded(c, "backup")))
        .collect();
    assert_ne!(ids[0], ids[1]);

    // The other spelling of the same repository lists both snapshots.
    let plain = format!("sftp:{}@127.0.0.1:{}", sshd.user, dir.display());
    let mut c = sshd.larder(&cache);
    c.env("LARDER_REPOSITORY", &plain)
        .args(["snapshots", "--json"]);
    let out = c.output().unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut got: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    let mut want = ids.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want);

    let o = run(&right, &["check", "--read-data"]);
    crate::faults::assert_check_clean(&o, "after two backups at once");
    let target = base.path().join("restored");
    let o = run(
        &right,
        &["restore", "-q", &ids[1], "--target", path_str(&target)],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    let restored = target.join(src.strip_prefix("/").unwrap());
    assert_same_tree(&src, &restored);
}
