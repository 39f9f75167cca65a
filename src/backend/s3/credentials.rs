//! Where S3 credentials come from, in restic's order: the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`),
//! else the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, or
//! `~/.aws/credentials`) under the profile `AWS_PROFILE` (or `default`).
//! The region: `AWS_DEFAULT_REGION`, else `AWS_REGION`, else us-east-1.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// A key pair and the optional session token.
#[derive(Debug, PartialEq, Eq)]
pub struct Found {
    pub key: String,
    pub secret: String,
    pub token: Option<String>,
    /// Where they came from, for messages ("the environment", a file and
    /// profile).
    pub source: String,
}

/// The credentials for `shown` (the repository, for messages), read from
/// the variables `var` gives (the process environment in use).
pub fn find(shown: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<Found> {
    if let (Some(key), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        return Ok(Found {
            key,
            secret,
            token: var("AWS_SESSION_TOKEN"),
            source: "the environment".into(),
        });
    }
    let profile = var("AWS_PROFILE").unwrap_or_else(|| "default".into());
    let file = var("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")));
    let missing = || {
        Error::Usage(format!(
            "{shown}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
             or put them under [{profile}] in {} (AWS_PROFILE chooses the profile)",
            file.as_ref()
                .map_or("~/.aws/credentials".into(), |f| f.display().to_string())
        ))
    };
    let Some(path) = file.as_ref().filter(|p| p.exists()) else {
        return Err(missing());
    };
    // A credentials file is small; a huge one is refused, not read.
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.len() > 1 << 20 {
        return Err(Error::Usage(format!(
            "{}: too large for a credentials file",
            path.display()
        )));
    }
    let ini = ini::Ini::load_from_file_noescape(path)
        .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    let Some(sec) = ini.section(Some(profile.as_str())) else {
        return Err(missing());
    };
    let get = |k: &str| sec.get(k).map(str::trim).filter(|v| !v.is_empty());
    match (get("aws_access_key_id"), get("aws_secret_access_key")) {
        (Some(key), Some(secret)) => Ok(Found {
            key: key.into(),
            secret: secret.into(),
            token: get("aws_session_token").map(Into::into),
            source: format!("profile {profile} of {}", path.display()),
        }),
        _ => Err(Error::Usage(format!(
            "{shown}: profile [{profile}] of {} lacks aws_access_key_id or aws_secret_access_key",
            path.display()
        ))),
    }
}

/// The region to sign for.
pub fn region(var: &dyn Fn(&str) -> Option<String>) -> String {
    var("AWS_DEFAULT_REGION")
        .or_else(|| var("AWS_REGION"))
        .unwrap_or_else(|| "us-east-1".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    const FILE: &str = "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = sdef\n\n\
                        [work]\naws_access_key_id=AKWORK\naws_secret_access_key=swork\naws_session_token=tok\n\
                        [half]\naws_access_key_id=AKHALF\n";

    #[test]
    fn environment_first_then_the_profile_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("credentials");
        std::fs::write(&f, FILE).unwrap();
        let fs = f.to_str().unwrap();
        let env = vars(&[
            ("AWS_ACCESS_KEY_ID", "AKENV"),
            ("AWS_SECRET_ACCESS_KEY", "senv"),
            ("AWS_SHARED_CREDENTIALS_FILE", fs),
        ]);
        assert_eq!(find("r", &env).unwrap().key, "AKENV");
        let def = find("r", &vars(&[("AWS_SHARED_CREDENTIALS_FILE", fs)])).unwrap();
        assert_eq!((def.key.as_str(), def.token), ("AKDEF", None));
        let work = find(
            "r",
            &vars(&[("AWS_SHARED_CREDENTIALS_FILE", fs), ("AWS_PROFILE", "work")]),
        )
        .unwrap();
        assert_eq!(
            (
                work.key.as_str(),
                work.secret.as_str(),
                work.token.as_deref()
            ),
            ("AKWORK", "swork", Some("tok"))
        );
        // ~/.aws/credentials through HOME.
        std::fs::create_dir(d.path().join(".aws")).unwrap();
        std::fs::write(d.path().join(".aws/credentials"), FILE).unwrap();
        let home = find("r", &vars(&[("HOME", d.path().to_str().unwrap())])).unwrap();
        assert_eq!(home.key, "AKDEF");
    }

    #[test]
    fn missing_or_incomplete_profiles_say_what_to_set() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("credentials");
        std::fs::write(&f, FILE).unwrap();
        let fs = f.to_str().unwrap();
        let e = find(
            "s3:h/b",
            &vars(&[("AWS_SHARED_CREDENTIALS_FILE", fs), ("AWS_PROFILE", "nope")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("s3:h/b") && e.contains("[nope]"), "{e}");
        let e = find(
            "r",
            &vars(&[("AWS_SHARED_CREDENTIALS_FILE", fs), ("AWS_PROFILE", "half")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("aws_secret_access_key"), "{e}");
        let e = find("r", &vars(&[])).unwrap_err().to_string();
        assert!(e.contains("AWS_ACCESS_KEY_ID"), "{e}");
    }

    #[test]
    fn region_order() {
        assert_eq!(region(&vars(&[])), "us-east-1");
        assert_eq!(region(&vars(&[("AWS_REGION", "eu-west-1")])), "eu-west-1");
        assert_eq!(
            region(&vars(&[("AWS_REGION", "x"), ("AWS_DEFAULT_REGION", "y")])),
            "y"
        );
    }
}
