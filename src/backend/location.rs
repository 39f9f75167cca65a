//! Repository strings, as restic spells them, parsed into where a backend
//! goes: a local directory (`/srv/repo`, `local:/srv/repo`), restic's REST
//! protocol (`rest:http[s]://[user:pass@]host[:port]/path`), S3-compatible
//! storage (`s3:https://host[:port]/bucket/prefix`, `s3:host/bucket/prefix`
//! for https, `s3:http://…` for local servers) and SFTP
//! (`sftp:[user@]host:/path`, `sftp:ALIAS:/path`,
//! `sftp://[user@]host[:port]/path`).
//!
//! A password in a REST URL is kept apart from the URL and never shown:
//! [`Location::display`] redacts it, and the backend sends it as a header.

use super::sftp::SftpTarget;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Where a repository lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    Rest(RestLocation),
    S3(S3Location),
    /// Checked as every SFTP target is ([`SftpTarget::new`]).
    Sftp(SftpTarget),
    /// `rclone:REMOTE:PATH`: what rclone is to serve.
    Rclone(String),
}

/// A REST server (restic's protocol v2).
#[derive(Clone, PartialEq, Eq)]
pub struct RestLocation {
    /// `http[s]://host[:port]/path/`, without user or password, ending in `/`.
    pub url: url::Url,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for RestLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestLocation")
            .field("url", &self.url.as_str())
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// An S3-compatible bucket and the key prefix the repository lives under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Location {
    /// `http[s]://host[:port]/`.
    pub endpoint: url::Url,
    pub bucket: String,
    /// Without leading or trailing `/`; may be empty.
    pub prefix: String,
}

impl S3Location {
    /// Whether the endpoint is Amazon's own (virtual-host addressing);
    /// every other host gets path-style addressing.
    pub fn is_aws(&self) -> bool {
        self.endpoint
            .host_str()
            .is_some_and(|h| h == "amazonaws.com" || h.ends_with(".amazonaws.com"))
    }
}

impl Location {
    /// Parses a repository string. Anything without a backend prefix is a
    /// local path.
    pub fn parse(repo: &Path) -> Result<Location> {
        let Some(s) = repo.to_str() else {
            return Ok(Location::Local(repo.to_path_buf()));
        };
        if let Some(rest) = s.strip_prefix("local:") {
            return Ok(Location::Local(PathBuf::from(rest)));
        }
        if let Some(rest) = s.strip_prefix("rest:") {
            return parse_rest(rest).map(Location::Rest);
        }
        if let Some(rest) = s.strip_prefix("s3:") {
            return parse_s3(rest).map(Location::S3);
        }
        if let Some(rest) = s.strip_prefix("sftp:") {
            return parse_sftp(rest).map(Location::Sftp);
        }
        if let Some(rest) = s.strip_prefix("rclone:") {
            if rest.is_empty() {
                return Err(usage(
                    "rclone:… (rclone:REMOTE:PATH)",
                    "give the rclone remote and path",
                ));
            }
            return Ok(Location::Rclone(rest.to_string()));
        }
        Ok(Location::Local(repo.to_path_buf()))
    }

    /// The location for messages and for the record of known repositories:
    /// local paths made absolute; a REST password replaced by `***`.
    pub fn display(&self) -> String {
        match self {
            Location::Local(p) => std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string(),
            Location::Rest(r) => rest_display(r),
            Location::S3(s) => {
                let mut out = format!("s3:{}{}", s.endpoint, s.bucket);
                if !s.prefix.is_empty() {
                    out.push('/');
                    out.push_str(&s.prefix);
                }
                out
            }
            Location::Rclone(r) => format!("rclone:{r}"),
            Location::Sftp(s) => s.to_string(),
        }
    }
}

fn rest_display(r: &RestLocation) -> String {
    let mut u = r.url.clone();
    if let Some(user) = &r.user {
        let _ = u.set_username(user);
    }
    if r.password.is_some() {
        let _ = u.set_password(Some("***"));
    }
    format!("rest:{u}")
}

fn usage(what: &str, why: &str) -> Error {
    Error::Usage(format!("invalid repository {what}: {why}"))
}

fn parse_rest(s: &str) -> Result<RestLocation> {
    let shown = "rest:… (rest:http[s]://[user:pass@]host[:port]/path)";
    let mut url = url::Url::parse(s).map_err(|e| usage(shown, &e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(usage(
            shown,
            "the URL must be http:// or https:// with a host",
        ));
    }
    let decode = |v: &str| {
        percent_decode(v).ok_or_else(|| usage(shown, "the user or password is not valid UTF-8"))
    };
    let user = match url.username() {
        "" => None,
        u => Some(decode(u)?),
    };
    let password = url.password().map(decode).transpose()?;
    let _ = url.set_username("");
    let _ = url.set_password(None);
    if url.query().is_some() || url.fragment().is_some() {
        return Err(usage(shown, "the URL must not have a query or fragment"));
    }
    if !url.path().ends_with('/') {
        let p = format!("{}/", url.path());
        url.set_path(&p);
    }
    Ok(RestLocation {
        url,
        user,
        password,
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let h = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn parse_s3(s: &str) -> Result<S3Location> {
    let shown = format!("s3:{s} (s3:https://host[:port]/bucket/prefix or s3:host/bucket/prefix)");
    let with_scheme = if s.starts_with("http://") || s.starts_with("https://") {
        s.to_string()
    } else {
        format!("https://{s}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|e| usage(&shown, &e.to_string()))?;
    if url.host_str().is_none() || url.query().is_some() || url.fragment().is_some() {
        return Err(usage(
            &shown,
            "expected a host, a bucket and an optional prefix",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(usage(
            &shown,
            "credentials go in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, not the URL",
        ));
    }
    let path = url.path().trim_matches('/').to_string();
    let (bucket, prefix) = match path.split_once('/') {
        Some((b, p)) => (b.to_string(), p.trim_matches('/').to_string()),
        None => (path, String::new()),
    };
    if bucket.is_empty() {
        return Err(usage(&shown, "no bucket given"));
    }
    let mut endpoint = url.clone();
    endpoint.set_path("/");
    Ok(S3Location {
        endpoint,
        bucket,
        prefix,
    })
}

/// `sftp:[user@]host:path` (an IPv6 address in brackets) or restic's URL
/// form `sftp://[user@]host[:port]/path`, where `//abs` is an absolute
/// path and `/rel` one relative to the login directory; the URL's user
/// and path are percent-decoded, as restic reads them.
fn parse_sftp(s: &str) -> Result<SftpTarget> {
    let shown = format!("sftp:{s} (sftp:[user@]host:/path or sftp://[user@]host[:port]/path)");
    if !s.starts_with("//") {
        return SftpTarget::parse(s);
    }
    let url = url::Url::parse(&format!("sftp:{s}")).map_err(|e| usage(&shown, &e.to_string()))?;
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(usage(&shown, "no host given")),
    };
    if url.password().is_some() {
        return Err(usage(&shown, "passwords are not supported (keys only)"));
    }
    let decoded = |what: &str, t: &str| {
        percent_encoding::percent_decode_str(t)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| usage(&shown, &format!("the {what} is not UTF-8 once decoded")))
    };
    let user = decoded("user", url.username())?;
    let user = Some(user).filter(|u| !u.is_empty());
    let path = decoded("path", url.path())?;
    let path = path.strip_prefix('/').unwrap_or(&path);
    if path.is_empty() {
        return Err(usage(&shown, "no path given"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(usage(&shown, "a '?' or '#' does not belong in it"));
    }
    SftpTarget::new(user.as_deref(), &host, url.port(), path).map_err(|why| usage(&shown, &why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Location {
        Location::parse(Path::new(s)).unwrap()
    }

    #[test]
    fn local_paths() {
        assert_eq!(parse("/srv/repo"), Location::Local("/srv/repo".into()));
        assert_eq!(parse("repo"), Location::Local("repo".into()));
        assert_eq!(parse("local:/x/y"), Location::Local("/x/y".into()));
    }

    #[test]
    fn rest_urls_keep_the_password_apart() {
        let Location::Rest(r) = parse("rest:https://al%40ice:s3cr%2Ft@h.example:8000/repo") else {
            panic!()
        };
        assert_eq!(r.url.as_str(), "https://h.example:8000/repo/");
        assert_eq!(r.user.as_deref(), Some("al@ice"));
        assert_eq!(r.password.as_deref(), Some("s3cr/t"));
        let shown = Location::Rest(r.clone()).display();
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(shown.contains("***"), "{shown}");
        assert!(!format!("{r:?}").contains("s3cr"));
        let Location::Rest(r) = parse("rest:http://127.0.0.1:8000/") else {
            panic!()
        };
        assert_eq!(r.url.as_str(), "http://127.0.0.1:8000/");
        assert_eq!((r.user, r.password), (None, None));
        assert!(Location::parse(Path::new("rest:ftp://h/x")).is_err());
        assert!(Location::parse(Path::new("rest:nonsense")).is_err());
    }

    #[test]
    fn s3_strings_as_restic() {
        let Location::S3(s) = parse("s3:https://s3.amazonaws.com/bucket/a/b/") else {
            panic!()
        };
        assert_eq!(s.endpoint.as_str(), "https://s3.amazonaws.com/");
        assert_eq!((s.bucket.as_str(), s.prefix.as_str()), ("bucket", "a/b"));
        assert!(s.is_aws());
        let Location::S3(s) = parse("s3:minio.lan:9000/b") else {
            panic!()
        };
        assert_eq!(s.endpoint.as_str(), "https://minio.lan:9000/");
        assert_eq!((s.bucket.as_str(), s.prefix.as_str()), ("b", ""));
        assert!(!s.is_aws());
        let Location::S3(s) = parse("s3:http://127.0.0.1:5000/b/p") else {
            panic!()
        };
        assert_eq!(s.endpoint.as_str(), "http://127.0.0.1:5000/");
        assert_eq!(Location::S3(s).display(), "s3:http://127.0.0.1:5000/b/p");
        assert!(Location::parse(Path::new("s3:http://host/")).is_err());
        assert!(Location::parse(Path::new("s3:http://k:s@host/b")).is_err());
    }

    #[test]
    fn sftp_strings() {
        let Location::Sftp(s) = parse("sftp:me@nas:/srv/repo") else {
            panic!()
        };
        assert_eq!(s.user.as_deref(), Some("me"));
        assert_eq!((s.host.as_str(), s.path.as_str()), ("nas", "/srv/repo"));
        let Location::Sftp(s) = parse("sftp:backuphost:repo") else {
            panic!()
        };
        assert_eq!(s.user, None);
        assert_eq!((s.host.as_str(), s.path.as_str()), ("backuphost", "repo"));
        let Location::Sftp(s) = parse("sftp://me@nas:2222//srv/repo") else {
            panic!()
        };
        assert_eq!(s.port, Some(2222));
        assert_eq!(s.path, "/srv/repo");
        assert!(Location::parse(Path::new("sftp:nohostpath")).is_err());
        // restic's URL form: a relative path, an IPv6 address (brackets
        // only in the string), percent-escapes decoded; shown as given.
        for (given, user, host, port, path) in [
            ("sftp://nas/rel/repo", None, "nas", None, "rel/repo"),
            ("sftp://[::1]:22//r", None, "::1", Some(22), "/r"),
            (
                "sftp://b%40k@nas:2222//srv/my%20repo/",
                Some("b@k"),
                "nas",
                Some(2222),
                "/srv/my repo",
            ),
        ] {
            let Location::Sftp(s) = parse(given) else {
                panic!("{given}")
            };
            assert_eq!(s.user.as_deref(), user, "{given}");
            assert_eq!((s.host.as_str(), s.port), (host, port), "{given}");
            assert_eq!(s.path, path, "{given}");
        }
        assert_eq!(
            parse("sftp://me@[::1]:2222//srv/repo").display(),
            "sftp://me@[::1]:2222//srv/repo"
        );
        assert_eq!(parse("sftp://me@nas/rel").display(), "sftp:me@nas:rel");
        // Shown as parsed back: escaped where the URL form needs it.
        let odd = "sftp://b%40k@nas:2222//srv/my%20repo%23";
        assert_eq!(parse(odd).display(), odd);
        assert_eq!(parse(&parse(odd).display()), parse(odd));
        assert_eq!(parse("sftp:me@[::1]:/r").display(), "sftp:me@[::1]:/r");
        // Every spelling is checked alike: nothing that ssh would read as
        // an option, no password, port or path left out, nothing after '?'.
        for bad in [
            "sftp://-oProxyCommand=x@nas//r",
            "sftp://me%20x@nas//r",
            "sftp://me:secret@nas//r",
            "sftp://nas:0//r",
            "sftp://nas/",
            "sftp://nas//r?x=1",
            "sftp://nas:99999//r",
            "sftp:-oProxyCommand=x:/r",
        ] {
            assert!(Location::parse(Path::new(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            parse("rclone:b2:bucket/larder"),
            Location::Rclone("b2:bucket/larder".into())
        );
        assert_eq!(Location::Rclone("/srv/r".into()).display(), "rclone:/srv/r");
        assert!(Location::parse(Path::new("rclone:")).is_err());
    }
}
