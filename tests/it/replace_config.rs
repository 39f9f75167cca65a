//! `Backend::replace_config` (the one rewrite of an object, for `migrate`)
//! against real servers started here on 127.0.0.1: `rclone serve restic`
//! (plain, and append-only, which refuses), moto's S3 server, and
//! OpenSSH's sshd (offering `posix-rename@openssh.com`, and with it
//! denied). Each opens the backend through the library, writes a config,
//! replaces it, reads the new bytes back, and finds a location without a
//! config refused with nothing created there. Missing tools fail the tests
//! unless `LARDER_ALLOW_SKIP=1`.

use larder::backend::{Backend, Kind, RemoteOptions, SftpBackend, SftpTarget};
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REST_PASS: &str = "Sup3rSecretRestPw";
const OLD: &[u8] = b"the config as init wrote it";
const NEW: &[u8] = b"the config as migrate rewrote it, longer than before";
const SHORT: &[u8] = b"short";

/// A server process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on 127.0.0.1:{port}");
}

fn opts() -> RemoteOptions {
    RemoteOptions::from_env().unwrap()
}

/// Writes a config, replaces it twice (longer, then shorter bytes) and
/// reads each back; the config stays write-once for `write`.
fn replace_and_read_back(b: &dyn Backend) {
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
fn refused_without_a_config(b: &dyn Backend, names: &str) {
    let e = b.replace_config(NEW).unwrap_err();
    assert!(matches!(e, larder::Error::NoRepository(_)), "{e}");
    assert!(e.to_string().contains(names), "{e}");
    assert!(!b.exists(Kind::Config, "config").unwrap());
}

/// `rclone serve restic` of `dir` on a free port of 127.0.0.1.
fn start_rclone(dir: &Path, append_only: bool) -> Option<(Server, u16)> {
    if !have("rclone") && skip("rclone is not installed (Debian package rclone)") {
        return None;
    }
    let port = free_port();
    let mut c = Command::new("rclone");
    c.args(["serve", "restic", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--user", "larder", "--pass", REST_PASS]);
    if append_only {
        c.arg("--append-only");
    }
    let mut child = c
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port, &mut child);
    Some((Server(child), port))
}

fn rest_backend(port: u16, path: &str) -> Box<dyn Backend> {
    let repo = format!("rest:http://larder:{REST_PASS}@127.0.0.1:{port}/{path}/");
    larder::backend::open(Path::new(&repo), &opts()).unwrap()
}

#[test]
fn rest_refuses_to_replace_the_config() {
    let d = tempfile::tempdir().unwrap();
    let served = d.path().join("served");
    let Some((_server, port)) = start_rclone(&served, false) else {
        return;
    };
    let b = rest_backend(port, "repo");
    b.create().unwrap();
    b.write(Kind::Config, "config", OLD).unwrap();
    // rclone would rewrite the file in place, which is not atomic: refused,
    // named, the config as it was.
    let e = b.replace_config(NEW).unwrap_err().to_string();
    assert!(e.contains("does not replace the config atomically"), "{e}");
    assert!(e.contains(&format!("127.0.0.1:{port}/repo")), "{e}");
    assert!(!e.contains(REST_PASS), "{e}");
    assert_eq!(fs::read(served.join("repo/config")).unwrap(), OLD);
}

/// Set in the copy of this test binary that runs the S3 test's body (the
/// S3 backend reads its credentials from the process environment, which
/// a test must not change under the others running beside it).
const S3_CHILD_PORT: &str = "LARDER_TEST_REPLACE_CONFIG_S3_PORT";

/// moto's server, its temporary files in `tmp`.
fn start_moto(tmp: &Path) -> Option<(Server, u16)> {
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
    fs::create_dir_all(tmp).unwrap();
    let mut child = Command::new(exe)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port, &mut child);
    Some((Server(child), port))
}

/// Starts moto and runs this test again in a child process with the
/// credentials in its environment; there (`S3_CHILD_PORT` set), the body.
#[test]
fn s3_replaces_the_config() {
    if let Some(port) = std::env::var_os(S3_CHILD_PORT) {
        let port = port.to_string_lossy().into_owned();
        let s3 = |prefix: &str| {
            let repo = format!("s3:http://127.0.0.1:{port}/larder-test/{prefix}");
            larder::backend::open(Path::new(&repo), &opts()).unwrap()
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
        .args(["--exact", "replace_config::s3_replaces_the_config"])
        .args(["--test-threads", "1", "--nocapture"])
        .env(S3_CHILD_PORT, port.to_string())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "s3cretKey")
        .env("AWS_DEFAULT_REGION", "us-east-1")
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

/// An sshd serving SFTP on 127.0.0.1 as the current user, with throwaway
/// keys, killed on drop.
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

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "ssh-keygen {}", path.display());
}

impl Sshd {
    /// `None` (skipped) without sshd or ssh. `sftp_args`: arguments of
    /// `internal-sftp` (`-P posix-rename` denies that request).
    fn start(sftp_args: &str) -> Option<Sshd> {
        const SSHD: &str = "/usr/sbin/sshd";
        if !(Path::new(SSHD).exists() && have("ssh") && have("ssh-keygen"))
            && skip("sshd, ssh or ssh-keygen is missing (Debian openssh-server, openssh-client)")
        {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        fs::create_dir_all(d.join("root")).unwrap();
        if nix::unistd::geteuid().is_root() {
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
        let host_pub = fs::read_to_string(d.join("host_key.pub")).unwrap();
        fs::write(
            d.join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_pub}"),
        )
        .unwrap();
        let log = fs::File::create(d.join("sshd.log")).unwrap();
        let mut child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        wait_port(port, &mut child);
        Some(Sshd {
            child,
            dir,
            port,
            user,
        })
    }

    /// The directory the server keeps repository `name` in.
    fn repo_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join("root").join(name)
    }

    /// A backend for repository `name` on this server, through an `ssh`
    /// with the throwaway key and known_hosts.
    fn backend(&self, name: &str) -> SftpBackend {
        let d = self.dir.path().display();
        let command = format!(
            "exec ssh -F /dev/null -i {d}/client_key -p {} -o IdentitiesOnly=yes \
             -o UserKnownHostsFile={d}/known_hosts -o StrictHostKeyChecking=yes \
             -o BatchMode=yes -o ConnectTimeout=10 -s -- \"$LARDER_SFTP_DESTINATION\" sftp",
            self.port
        );
        let spec = format!("{}@127.0.0.1:{}", self.user, self.repo_dir(name).display());
        SftpBackend::new(SftpTarget::parse(&spec).unwrap())
            .unwrap()
            .with_command(&command)
    }
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// With `posix-rename@openssh.com` the config is replaced, leaving no
/// temporary file; a server that denies that request (and so does not
/// offer it) gets the refusal of storage that cannot replace atomically,
/// with nothing written and the config as it was.
#[test]
fn sftp_replaces_the_config_by_posix_rename() {
    let Some(sshd) = Sshd::start("") else {
        return;
    };
    let b = sshd.backend("repo");
    b.create().unwrap();
    let layout = names_in(&sshd.repo_dir("repo"));
    refused_without_a_config(&b, &sshd.repo_dir("repo").display().to_string());
    assert_eq!(names_in(&sshd.repo_dir("repo")), layout, "nothing created");
    replace_and_read_back(&b);
    assert_eq!(
        fs::read(sshd.repo_dir("repo").join("config")).unwrap(),
        SHORT
    );
    assert!(b.leftovers().unwrap().is_empty());
    let other = sshd.backend("other");
    refused_without_a_config(&other, &sshd.repo_dir("other").display().to_string());
    assert!(!sshd.repo_dir("other").exists());

    let Some(denying) = Sshd::start("-P posix-rename") else {
        return;
    };
    let b = denying.backend("repo");
    b.create().unwrap();
    b.write(Kind::Config, "config", OLD).unwrap();
    let e = b.replace_config(NEW).unwrap_err();
    assert!(matches!(e, larder::Error::Usage(_)), "{e}");
    let e = e.to_string();
    assert!(e.contains("cannot replace the config atomically"), "{e}");
    assert!(e.contains("posix-rename@openssh.com"), "{e}");
    assert!(
        e.contains(&denying.repo_dir("repo").display().to_string()),
        "{e}"
    );
    assert_eq!(
        b.read_bounded(Kind::Config, "config", 1 << 20).unwrap(),
        OLD
    );
    assert!(b.leftovers().unwrap().is_empty(), "nothing was written");
}
