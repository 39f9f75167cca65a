//! Tests of the crontab line and of block editing: byte-for-byte round trips, idempotent install, and the edit lock.

use super::*;
use crate::schedule::config::Config;
use crate::schedule::paths::Env;

fn profile(name: &str, extra: &str) -> Profile {
    let text = format!(
        "[profile.{name}]\nrepository = \"/srv/r\"\npassword-command = \"echo pw\"\npaths = [\"/home\"]\n{extra}\n"
    );
    let cfg = Config::parse(&text, Path::new("/etc/larder/larder.toml"), &Env::default()).unwrap();
    cfg.profiles[name].clone()
}

fn inv() -> Invocation {
    Invocation {
        binary: "/usr/local/bin/larder".into(),
        config: Some("/home/u/my 100% config.toml".into()),
        state_dir: "/home/u/.local/state/larder".into(),
    }
}

fn tools() -> PriorityTools {
    PriorityTools {
        nice: Some("/usr/bin/nice".into()),
        ionice: Some("/usr/bin/ionice".into()),
    }
}

#[test]
fn polling_minutes_cover_the_schedule_and_every_quarter_hour() {
    let cases = [
        ("daily", "0,15,30,45"),
        ("30 2 * * *", "0,15,30,45"),
        ("7 2 * * *", "0,7,15,30,45"),
        ("*/5 * * * *", "0,5,10,15,20,25,30,35,40,45,50,55"),
        ("*/2 * * * *", "*"),
        ("*/30 * * * * *", "*"),
    ];
    for (s, want) in cases {
        let p = profile("home", &format!("schedule = \"{s}\""));
        assert_eq!(poll_minutes(&p).unwrap(), want, "{s}");
    }
    assert!(
        poll_minutes(&profile("home", ""))
            .unwrap_err()
            .to_string()
            .contains("no schedule")
    );
}

#[test]
fn the_line_runs_if_due_with_the_profile_priority() {
    let p = profile("home", "schedule = \"7 2 * * *\"\nnice = 15");
    assert_eq!(
        line(&p, &inv(), &tools()).unwrap(),
        "0,7,15,30,45 * * * * LARDER_STATE_DIR=/home/u/.local/state/larder /usr/bin/nice -n 15 \
         /usr/bin/ionice -c 3 /usr/local/bin/larder run --if-due --config '/home/u/my 100\\% config.toml' home"
    );
    let p = profile("home", "schedule = \"daily\"\nionice = \"best-effort:5\"");
    let l = line(
        &p,
        &inv(),
        &PriorityTools {
            nice: None,
            ionice: Some("/usr/bin/ionice".into()),
        },
    )
    .unwrap();
    assert!(l.contains(" LARDER_STATE_DIR=/home/u/.local/state/larder /usr/bin/ionice -c 2 -n 5 /usr/local/bin/larder "), "{l}");
    let l = line(&p, &inv(), &PriorityTools::default()).unwrap();
    assert!(l.starts_with("0,15,30,45 * * * * LARDER_STATE_DIR=/home/u/.local/state/larder /usr/local/bin/larder run --if-due "), "{l}");
}

const ORIGINALS: &[&str] = &[
    "",
    "MAILTO=me@example.org\n# m h dom mon dow command\n0 * * * * /usr/bin/true\n",
    "0 * * * * /usr/bin/true",
    "\n\n",
    "# BEGIN larder profile home2; remove with: larder schedule remove home2\n* * * * * x\n# END larder profile home2\n",
];

#[test]
fn install_then_remove_gives_back_the_original_byte_for_byte() {
    let home = profile("home", "schedule = \"daily\"");
    let work = profile("work", "schedule = \"hourly\"");
    let (lh, lw) = (
        line(&home, &inv(), &tools()).unwrap(),
        line(&work, &inv(), &tools()).unwrap(),
    );
    for original in ORIGINALS {
        let one = install(original, "home", &lh);
        assert_ne!(&one, original);
        assert!(one.ends_with('\n'));
        assert_eq!(
            install(&one, "home", &lh),
            one,
            "install twice changed {original:?}"
        );
        assert_eq!(remove(&one, "home"), *original);
        // Two profiles, removed in either order.
        let two = install(&one, "work", &lw);
        assert_eq!(remove(&remove(&two, "home"), "work"), *original);
        assert_eq!(remove(&remove(&two, "work"), "home"), *original);
        assert_eq!(
            installed(&two)
                .iter()
                .filter(|p| *p == "home" || *p == "work")
                .count(),
            2
        );
        // Removing what is not there changes nothing.
        assert_eq!(remove(original, "home"), *original);
    }
}

#[test]
fn a_changed_line_is_replaced_in_place() {
    let original = "MAILTO=me\n";
    let a = install(original, "home", "0 * * * * old");
    let b = install(
        &(a.clone() + "5 5 * * * later\n"),
        "home",
        "0,30 * * * * new",
    );
    assert_eq!(
        b,
        "MAILTO=me\n# BEGIN larder profile home; remove with: larder schedule remove home\n0,30 * * * * new\n\
         # END larder profile home\n5 5 * * * later\n"
    );
    assert_eq!(remove(&b, "home"), "MAILTO=me\n5 5 * * * later\n");
    // The home2 block is not mistaken for home's.
    let text = install(ORIGINALS[4], "home", "0 * * * * h");
    assert_eq!(remove(&text, "home"), ORIGINALS[4]);
    assert_eq!(
        installed(&text),
        vec!["home2".to_string(), "home".to_string()]
    );
}

#[test]
fn an_edit_waits_for_the_lock_and_gives_up_naming_it_without_touching_the_crontab() {
    let tmp = tempfile::tempdir().unwrap();
    let held = lock_for_edit(tmp.path(), std::time::Duration::ZERO).unwrap();
    let start = std::time::Instant::now();
    let wait = std::time::Duration::from_millis(200);
    let err = edit(tmp.path(), wait, |_| -> Result<String> {
        panic!("the change ran without the lock")
    })
    .unwrap_err();
    assert!(start.elapsed() >= wait, "gave up before waiting");
    assert_eq!(err.exit_code(), 11);
    let msg = err.to_string();
    assert!(
        msg.contains("editing the crontab") && msg.contains("locks/.crontab.lock"),
        "{msg}"
    );
    assert!(!msg.contains("repository"), "{msg}");
    drop(held);
}

#[test]
fn the_edit_lock_makes_a_missing_state_directory_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let _held = lock_for_edit(&state, std::time::Duration::ZERO).unwrap();
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert!(state.join("CACHEDIR.TAG").is_file());
    assert!(edit_lock_path(&state).is_file());
}
