//! Tests of reading larder.toml: line-numbered errors, defaults, inheritance, cycles, credential file permissions.

use super::*;
use crate::schedule::profile::Credential;
use crate::schedule::values::{CheckSubset, IoNice};
use std::time::Duration;

fn env() -> Env {
    Env {
        home: Some("/home/u".into()),
        ..Env::default()
    }
}

fn parse(text: &str) -> Result<Config> {
    Config::parse(text, Path::new("/etc/larder/larder.toml"), &env())
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

const FULL: &str = r#"
[profile.base]
repository = "/srv/larder"
password-file = "keys/pass"
nice = 5
retention-unused = 1
"#;

#[test]
fn unknown_key_names_its_line_and_a_suggestion() {
    let e = err(FULL);
    assert_eq!(
        e,
        "/etc/larder/larder.toml:6: unknown key `retention-unused`",
    );
    let e = err("[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\nkeep-dayly = 7\n");
    assert_eq!(
        e,
        "/etc/larder/larder.toml:4: unknown key `keep-dayly` (did you mean `keep-daily`?)"
    );
    let e = err("[profiles.a]\nrepository = \"/r\"\n");
    assert!(
        e.starts_with("/etc/larder/larder.toml:1: unknown key `profiles`"),
        "{e}"
    );
}

#[test]
fn a_wrong_type_names_its_line() {
    let e = err("[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\n\nnice = \"low\"\n");
    assert!(e.starts_with("/etc/larder/larder.toml:5: "), "{e}");
}

#[test]
fn a_full_profile_resolves_with_defaults() {
    let text = r#"
[profile.home]
repository = "~/backup"
password-file = "keys/home.pass"
paths = ["~/", "/etc"]
exclude = ["*.tmp"]
exclude-file = ["/etc/larder/excludes"]
exclude-caches = true
tags = ["home"]
schedule = "daily"
keep-daily = 7
keep-yearly = -1
keep-within = "2y"
prune = "weekly"
check = "0 4 * * 0"
check-subset = "5%"
before = "echo start"
prometheus-textfile = "/var/lib/node_exporter/larder-home.prom"
"#;
    let c = parse(text).unwrap();
    let p = c.profile("home").unwrap();
    assert_eq!(p.repository, "/home/u/backup");
    assert_eq!(
        p.credential,
        Credential::PasswordFile("/etc/larder/keys/home.pass".into())
    );
    assert_eq!(
        p.paths,
        vec![PathBuf::from("/home/u/"), PathBuf::from("/etc")]
    );
    assert!(p.backup.exclude_caches && !p.backup.one_file_system);
    assert_eq!(p.schedule.as_ref().unwrap().as_str(), "daily");
    assert_eq!(p.retention.keep_daily, Some(7));
    assert_eq!(p.retention.keep_yearly, Some(-1));
    assert!(p.retention.is_set());
    assert_eq!(p.check_subset, Some(CheckSubset::Percent(5.0)));
    assert_eq!((p.nice, p.ionice), (10, IoNice::Idle));
    assert_eq!(p.hooks.timeout, Duration::from_secs(900));
    assert_eq!(p.retry.retries, 3);
    assert_eq!(p.origin.header_line, 2);
    assert_eq!(p.origin.key_lines["schedule"], 10);
    let e = p.error_at("keep-within", "bad");
    assert_eq!(
        e.to_string(),
        "/etc/larder/larder.toml:13: profile home: bad"
    );
    assert!(
        c.profile("nope")
            .unwrap_err()
            .to_string()
            .contains("profiles: home")
    );
}

#[test]
fn the_resolved_view_uses_the_file_names_and_holds_no_secret() {
    let c = parse(
        "[profile.a]\nrepository = \"/r\"\npassword-command = \"pass show larder\"\nschedule = \"30 2 * * *\"\nhook-timeout = \"90s\"\n",
    )
    .unwrap();
    let v = serde_json::to_value(c.profile("a").unwrap()).unwrap();
    assert_eq!(v["schedule"], "30 2 * * *");
    assert_eq!(v["credential"]["password-command"], "pass show larder");
    assert_eq!(v["hooks"]["timeout"], "1m 30s");
    assert_eq!(v["ionice"], "idle");
    assert_eq!(v["retry"]["max-delay"], "10m");
    assert!(v.get("origin").is_none());
}

#[test]
fn a_bad_schedule_names_its_line() {
    let e = err("[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\nschedule = \"dayly\"\n");
    assert!(
        e.starts_with("/etc/larder/larder.toml:4: profile a: schedule \"dayly\""),
        "{e}"
    );
    let e =
        err("[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\nprune = \"0 25 * * *\"\n");
    assert!(
        e.starts_with("/etc/larder/larder.toml:4: profile a: schedule \"0 25 * * *\""),
        "{e}"
    );
}

#[test]
fn a_missing_credential_source_names_the_profile_header() {
    let e = err("# comment\n\n[profile.laptop]\nrepository = \"/r\"\n");
    assert_eq!(
        e,
        "/etc/larder/larder.toml:3: profile laptop: no credential source: set password-file, \
         password-command or identity-file"
    );
    let e =
        err("[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\nidentity-file = \"/i\"\n");
    assert!(
        e.starts_with("/etc/larder/larder.toml:4: profile a: both password-file and identity-file"),
        "{e}"
    );
    let e = err("[profile.a]\npassword-file = \"/p\"\n");
    assert_eq!(e, "/etc/larder/larder.toml:1: profile a: no repository");
}

#[test]
fn every_error_is_reported_at_once() {
    let e = err(
        "[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\nkeep-daily = -3\ncheck-subset = \"200%\"\nnice = 40\npaths = [\"rel/dir\"]\nionice = \"fast\"\nretries = -1\n",
    );
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 6, "{e}");
    for (line, needle) in [
        (7, "must be absolute"),
        (5, "check-subset"),
        (4, "keep-daily = -3"),
        (6, "nice = 40"),
        (8, "ionice"),
        (9, "retries = -1"),
    ] {
        let prefix = format!("/etc/larder/larder.toml:{line}: profile a: ");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&prefix) && l.contains(needle)),
            "{line} {needle}: {e}"
        );
    }
}

#[test]
fn inherit_overrides_and_replaces_lists() {
    let text = r#"
[profile.base]
repository = "/srv/r"
password-file = "/p"
nice = 5
exclude = ["*.o", "*.tmp"]
schedule = "daily"

[profile.home]
inherit = "base"
nice = 15
exclude = ["*.iso"]
paths = ["/home"]

[profile.grandchild]
inherit = "home"
schedule = "hourly"
"#;
    let c = parse(text).unwrap();
    let home = c.profile("home").unwrap();
    assert_eq!(home.repository, "/srv/r");
    assert_eq!(home.nice, 15);
    assert_eq!(home.backup.exclude, vec!["*.iso".to_string()]);
    assert_eq!(home.schedule.as_ref().unwrap().as_str(), "daily");
    // An inherited key keeps the parent's line.
    assert_eq!(home.origin.key_lines["repository"], 3);
    assert_eq!(home.origin.key_lines["nice"], 11);
    let g = c.profile("grandchild").unwrap();
    assert_eq!(g.schedule.as_ref().unwrap().as_str(), "hourly");
    assert_eq!(
        (g.nice, g.paths.clone()),
        (15, vec![PathBuf::from("/home")])
    );
    assert_eq!(g.inherit.as_deref(), Some("home"));
    assert_eq!(c.profile("base").unwrap().nice, 5);
}

#[test]
fn inheritance_cycles_and_unknown_parents_are_refused() {
    let e = err(
        "[profile.a]\ninherit = \"b\"\nrepository = \"/r\"\npassword-file = \"/p\"\n[profile.b]\ninherit = \"a\"\n",
    );
    // Each profile's error points at the `inherit` that closes its cycle.
    assert!(
        e.contains("/etc/larder/larder.toml:6: inheritance cycle: a -> b -> a"),
        "{e}"
    );
    assert!(
        e.contains("/etc/larder/larder.toml:2: inheritance cycle: b -> a -> b"),
        "{e}"
    );
    let e = err("[profile.a]\ninherit = \"a\"\n");
    assert_eq!(e, "/etc/larder/larder.toml:2: inheritance cycle: a -> a");
    let e = err("[profile.a]\nrepository = \"/r\"\npassword-file = \"/p\"\ninherit = \"ghost\"\n");
    assert_eq!(
        e,
        "/etc/larder/larder.toml:4: profile a: inherits from \"ghost\", which is not defined"
    );
}

#[test]
fn bad_profile_names_are_refused() {
    let e = err("[profile.\"my home\"]\nrepository = \"/r\"\npassword-file = \"/p\"\n");
    assert!(
        e.starts_with("/etc/larder/larder.toml:1: profile my home: profile name"),
        "{e}"
    );
}

#[test]
fn credential_files_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let pass = tmp.path().join("pass");
    std::fs::write(&pass, "secret\n").unwrap();
    let cfg = tmp.path().join("larder.toml");
    std::fs::write(
        &cfg,
        "[profile.a]\nrepository = \"/r\"\npassword-file = \"pass\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Config::load(&cfg, &env()).unwrap_err().to_string();
    assert!(e.contains("larder.toml:3: profile a: "), "{e}");
    assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(Config::load(&cfg, &env()).is_err());
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = Config::load(&cfg, &env()).unwrap();
    assert_eq!(
        c.profile("a").unwrap().credential,
        Credential::PasswordFile(pass.clone())
    );
    // Unchecked loading (for status) does not look at the file.
    std::fs::remove_file(&pass).unwrap();
    assert!(Config::load_unchecked(&cfg, &env()).is_ok());
    let e = Config::load(&cfg, &env()).unwrap_err().to_string();
    assert!(
        e.contains("larder.toml:3:") && e.contains("No such file"),
        "{e}"
    );
}

#[test]
fn a_missing_config_file_says_how_to_give_one() {
    let e = Config::load(Path::new("/nonexistent/larder.toml"), &env()).unwrap_err();
    assert!(e.to_string().contains("--config"), "{e}");
}

/// The commented example the README shows parses as described.
#[test]
fn the_documented_example_parses() {
    let text = include_str!("example.toml");
    let c = parse(text).unwrap();
    let home = c.profile("home").unwrap();
    assert_eq!(
        home.credential,
        Credential::PasswordFile("/home/u/.config/larder/pass".into())
    );
    assert_eq!(home.paths, vec![PathBuf::from("/home/u/")]);
    assert_eq!(home.schedule.as_ref().unwrap().as_str(), "daily");
    assert_eq!(home.prune.as_ref().unwrap().as_str(), "weekly");
    assert_eq!(home.retention.keep_yearly, Some(-1));
    assert_eq!(home.hooks.timeout, Duration::from_secs(300));
    assert!(
        home.hooks
            .on_failure
            .as_deref()
            .unwrap()
            .contains("$LARDER_ERROR")
    );
    assert_eq!(home.retry.max_delay, Duration::from_secs(600));
    assert_eq!(home.backup.iexclude, ["*.iso"]);
    assert_eq!(home.backup.exclude_larger_than, Some(4 << 30));
    assert!(home.backup.skip_if_unchanged);
    assert!(c.profile("base").unwrap().schedule.is_none());
    let off = c.profile("offsite").unwrap();
    assert!(off.repository.starts_with("s3:"), "{}", off.repository);
    assert_eq!(off.storage.pack_size, Some(64));
    assert_eq!(off.storage.limit_upload, Some(2000));
    assert_eq!(off.paths, home.paths, "inherited from home");
}

#[test]
fn case_blind_excludes_and_a_size_limit_resolve() {
    let text = r#"
[profile.home]
repository = "/srv/r"
password-file = "pass"
paths = ["/home"]
iexclude = ["*.TMP"]
iexclude-file = ["ignore"]
exclude-larger-than = "100M"
"#;
    let c = parse(text).unwrap();
    let b = &c.profile("home").unwrap().backup;
    assert_eq!(b.iexclude, ["*.TMP"]);
    assert_eq!(b.iexclude_file, [PathBuf::from("/etc/larder/ignore")]);
    assert_eq!(b.exclude_larger_than, Some(100 << 20));
    let e = err(&text.replace("\"100M\"", "\"12Q\""));
    assert!(
        e.contains("larder.toml:8:") && e.contains("exclude-larger-than"),
        "{e}"
    );
}

#[test]
fn a_stream_profile_takes_a_command_in_place_of_paths() {
    let text = r#"
[profile.db]
repository = "/srv/r"
password-file = "pass"
stdin-from-command = ["pg_dump", "--format=custom", "mydb"]
stdin-filename = "mydb.dump"
"#;
    let c = parse(text).unwrap();
    let p = c.profile("db").unwrap();
    assert!(p.paths.is_empty());
    assert_eq!(
        p.backup.stdin_from_command,
        ["pg_dump", "--format=custom", "mydb"]
    );
    assert_eq!(p.backup.stream_name(), "mydb.dump");
    let unnamed = text.replace("stdin-filename = \"mydb.dump\"\n", "");
    let c = parse(&unnamed).unwrap();
    assert_eq!(c.profile("db").unwrap().backup.stream_name(), "stdin");

    // Paths and a command in one profile, even through `inherit`.
    let both = text.replace("[profile.db]\n", "[profile.db]\npaths = [\"/home\"]\n");
    let e = err(&both);
    assert!(
        e.contains("larder.toml:6:") && e.contains("both paths and stdin-from-command"),
        "{e}"
    );
    let inherited = format!(
        "[profile.files]\nrepository = \"/srv/r\"\npassword-file = \"pass\"\npaths = [\"/h\"]\n{}",
        text.replace("[profile.db]\n", "[profile.db]\ninherit = \"files\"\n")
    );
    assert!(err(&inherited).contains("both paths and stdin-from-command"));
    // A name without a command; a name that is not one file's; no command.
    let e = err(&text.replace(
        "stdin-from-command = [\"pg_dump\", \"--format=custom\", \"mydb\"]\n",
        "paths = [\"/h\"]\n",
    ));
    assert!(
        e.contains("larder.toml:6:")
            && e.contains("stdin-filename names what stdin-from-command stores"),
        "{e}"
    );
    for bad in ["../x", "a/b", ".."] {
        let e = err(&text.replace("mydb.dump", bad));
        assert!(
            e.contains("larder.toml:6:") && e.contains("give a file name"),
            "{bad}: {e}"
        );
    }
    let e = err(&text.replace("[\"pg_dump\", \"--format=custom\", \"mydb\"]", "[]"));
    assert!(
        e.contains("larder.toml:5:") && e.contains("give the command"),
        "{e}"
    );
}

/// `compression`, `pack-size`, `limit-upload`, `limit-download` and
/// `connections` resolve (inherited like any key), and each bad value is
/// an error naming its line; unset, they are unset.
#[test]
fn storage_settings_resolve_and_bad_ones_name_their_line() {
    let text = r#"
[profile.base]
repository = "s3:https://s3.example.com/bucket/larder"
password-file = "pass"
paths = ["/home"]
pack-size = 64
compression = "Max"
limit-upload = 2000
limit-download = 8000
connections = 8
cacert = ["/etc/larder/ca.pem"]
insecure-tls = true

[profile.child]
inherit = "base"
compression = "7"
"#;
    let c = parse(text).unwrap();
    let s = &c.profile("base").unwrap().storage;
    assert_eq!(s.compression.as_deref(), Some("max"));
    assert_eq!(s.pack_size, Some(64));
    assert_eq!((s.limit_upload, s.limit_download), (Some(2000), Some(8000)));
    assert_eq!(s.connections, Some(8));
    assert_eq!(
        s.cacert,
        vec![std::path::PathBuf::from("/etc/larder/ca.pem")]
    );
    assert!(s.insecure_tls);
    let child = &c.profile("child").unwrap().storage;
    assert_eq!(child.compression.as_deref(), Some("7"));
    assert_eq!(child.pack_size, Some(64), "inherited");
    let plain = "[profile.p]\nrepository = \"/r\"\npassword-file = \"/p\"\n";
    assert_eq!(
        parse(plain).unwrap().profile("p").unwrap().storage,
        Default::default()
    );
    for (line, says) in [
        ("pack-size = 2", "pack-size = 2: expected 4 to 128"),
        ("pack-size = 129", "pack-size = 129"),
        ("compression = \"ultra\"", "compression:"),
        ("compression = \"23\"", "compression:"),
        ("limit-upload = 0", "limit-upload = 0: expected a positive"),
        ("limit-download = -5", "limit-download = -5"),
        ("connections = 0", "connections = 0: expected 1 to 256"),
        ("connections = 300", "connections = 300"),
    ] {
        let e = err(&format!("{plain}{line}\n"));
        assert!(
            e.contains("larder.toml:4:") && e.contains(says),
            "{line}: {e}"
        );
    }
}

/// `read-concurrency` reaches the profile's backup options (inherited like
/// any key, unset when not given), and a value outside 1 to 64 is an error
/// naming its line.
#[test]
fn read_concurrency_resolves_and_bad_values_name_their_line() {
    let text = r#"
[profile.base]
repository = "/r"
password-file = "/p"
read-concurrency = 8

[profile.child]
inherit = "base"
"#;
    let c = parse(text).unwrap();
    assert_eq!(c.profile("base").unwrap().backup.read_concurrency, Some(8));
    assert_eq!(c.profile("child").unwrap().backup.read_concurrency, Some(8));
    let plain = "[profile.p]\nrepository = \"/r\"\npassword-file = \"/p\"\n";
    assert_eq!(
        parse(plain)
            .unwrap()
            .profile("p")
            .unwrap()
            .backup
            .read_concurrency,
        None
    );
    for line in [
        "read-concurrency = 0",
        "read-concurrency = 65",
        "read-concurrency = -1",
    ] {
        let e = err(&format!("{plain}{line}\n"));
        assert!(
            e.contains("larder.toml:4:")
                && e.contains(&format!("{line}: expected a number of files from 1 to 64")),
            "{line}: {e}"
        );
    }
}

/// `keep-within*` and `group-by` are checked when the file is read, at
/// their line, instead of failing the forget step of every run; good
/// values are kept as written.
#[test]
fn retention_values_are_checked_when_read() {
    let plain = "[profile.p]\nrepository = \"/r\"\npassword-file = \"/p\"\n";
    let good = format!(
        "{plain}keep-within = \"1y2m\"\nkeep-within-daily = \"7d\"\ngroup-by = \"host,tags\"\n"
    );
    let c = parse(&good).unwrap();
    let r = &c.profile("p").unwrap().retention;
    assert_eq!(r.keep_within.as_deref(), Some("1y2m"));
    assert_eq!(r.keep_within_daily.as_deref(), Some("7d"));
    assert_eq!(r.group_by.as_deref(), Some("host,tags"));
    for key in [
        "keep-within",
        "keep-within-hourly",
        "keep-within-daily",
        "keep-within-weekly",
        "keep-within-monthly",
        "keep-within-yearly",
    ] {
        let e = err(&format!("{plain}{key} = \"2 days\"\n"));
        assert!(
            e.contains("larder.toml:4:") && e.contains(&format!("{key} = \"2 days\"")),
            "{key}: {e}"
        );
        assert!(e.contains("invalid duration"), "{key}: {e}");
    }
    // Rules that keep nothing are refused at the first one's line.
    let e = err(&format!("{plain}keep-last = 0\nkeep-within = \"0d\"\n"));
    assert!(
        e.contains("larder.toml:4:") && e.contains("keep nothing"),
        "{e}"
    );
    assert!(parse(&format!("{plain}keep-last = 0\nkeep-daily = 7\n")).is_ok());
    let e = err(&format!("{plain}group-by = \"host,owner\"\n"));
    assert!(
        e.contains("larder.toml:4:") && e.contains("unknown grouping option \"owner\""),
        "{e}"
    );
}
