//! S3-compatible object storage (AWS, MinIO, Ceph, Garage, B2, Wasabi, …).
//! Requests are signed by `rusty-s3` (SigV4 presigned URLs, sans-IO) and
//! sent by the shared blocking client ([`super::http`]); each attempt is
//! signed anew, so retries never reuse an expired signature.
//!
//! Objects keep larder's layout under the prefix (`PREFIX/config`,
//! `PREFIX/keys/…`, `PREFIX/packs/ab/…`). Writes are single PUTs (packs are
//! far below S3's 5 GiB limit), visible only once complete, and
//! conditional (`If-None-Match: *`): an object is created only if absent.
//! A server that does not implement the condition (501) gets plain PUTs
//! from then on, where names (content hashes) give the same guarantee.
//! The one write meant to replace an object is `replace_config` (for
//! `migrate`): a plain PUT over the existing config, which S3 swaps whole.
//!
//! Credentials as restic's (see [`credentials`]): the `AWS_*` variables,
//! else the shared credentials file under `AWS_PROFILE`.
//! Amazon's own hosts get virtual-host addressing, all others path-style.

mod credentials;

use super::http::{
    Body, Http, RemoteOptions, Response, age_from_headers, body_failure, content_length, not_found,
    read_body, unexpected,
};
use super::location::S3Location;
use super::retry::Failure;
use super::{Backend, Entry, Kind};
use crate::error::{Error, Result};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a signed request stays valid (it is signed just before use).
const SIGNED_FOR: Duration = Duration::from_secs(15 * 60);
/// Largest page of a listing accepted.
const MAX_LIST_PAGE: u64 = 64 << 20;

/// A repository under a prefix of an S3 bucket.
pub struct S3Backend {
    bucket: Bucket,
    creds: Credentials,
    /// `PREFIX/` or empty.
    prefix: String,
    http: Http,
    /// False once the server answered 501 to a conditional PUT.
    conditional: AtomicBool,
}

impl S3Backend {
    /// A backend for `loc`, with credentials from the environment.
    pub fn new(loc: &S3Location, shown: String, opts: &RemoteOptions) -> Result<S3Backend> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let found = credentials::find(&shown, &env)?;
        let creds = match found.token {
            Some(t) => Credentials::new_with_token(found.key, found.secret, t),
            None => Credentials::new(found.key, found.secret),
        };
        let region = credentials::region(&env);
        let style = if loc.is_aws() {
            UrlStyle::VirtualHost
        } else {
            UrlStyle::Path
        };
        let bucket = Bucket::new(loc.endpoint.clone(), style, loc.bucket.clone(), region)
            .map_err(|e| Error::Usage(format!("{shown}: {e}")))?;
        let prefix = if loc.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", loc.prefix)
        };
        Ok(S3Backend {
            bucket,
            creds,
            prefix,
            http: Http::new(shown, opts),
            conditional: AtomicBool::new(true),
        })
    }

    fn key(&self, kind: Kind, name: &str) -> Result<String> {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::internal(format!("invalid object name {name:?}")));
        }
        Ok(format!("{}{}", self.prefix, kind.path(name)))
    }

    /// Sends a signed request: `method` on `url` with extra headers and
    /// an optional body.
    fn send(
        &self,
        method: &str,
        url: url::Url,
        headers: &[(&str, &str)],
        body: Option<Body<'_>>,
    ) -> std::result::Result<Response, Failure> {
        let mut b = ureq::http::Request::builder()
            .method(method)
            .uri(String::from(url));
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        self.http.exchange(|agent| match body {
            Some(d) => d.send(agent, b),
            None => agent.run(b.body(()).map_err(ureq::Error::Http)?),
        })
    }

    fn fatal(&self, object: &str, r: &mut Response) -> Failure {
        Failure::Fatal(unexpected(&self.http.location, object, r))
    }

    /// HEAD: `Some(response)` if the object exists.
    fn head(&self, kind: Kind, name: &str) -> Result<Option<Response>> {
        let key = self.key(kind, name)?;
        let object = kind.path(name);
        self.http.run(&object, || {
            let url = self
                .bucket
                .head_object(Some(&self.creds), &key)
                .sign(SIGNED_FOR);
            let mut r = self.send("HEAD", url, &[], None)?;
            match r.status().as_u16() {
                200 => Ok(Some(r)),
                404 => Ok(None),
                _ => Err(self.fatal(&object, &mut r)),
            }
        })
    }

    /// One page of a listing under `prefix`.
    fn list_page(
        &self,
        prefix: &str,
        token: Option<&str>,
    ) -> Result<rusty_s3::actions::ListObjectsV2Response> {
        let object = format!("{}/", prefix.trim_end_matches('/'));
        self.http.run(&object, || {
            let mut a = self.bucket.list_objects_v2(Some(&self.creds));
            a.with_prefix(prefix);
            if let Some(t) = token {
                a.with_continuation_token(t);
            }
            let mut r = self.send("GET", a.sign(SIGNED_FOR), &[], None)?;
            if r.status().as_u16() != 200 {
                return Err(self.fatal(&object, &mut r));
            }
            let body = read_body(&object, &mut r, MAX_LIST_PAGE).map_err(body_failure)?;
            self.http.throttle_down(body.len());
            let text = String::from_utf8_lossy(&body);
            rusty_s3::actions::ListObjectsV2::parse_response(&text).map_err(|e| {
                Failure::Fatal(Error::corrupt(
                    &object,
                    format!("not a bucket listing: {e}"),
                ))
            })
        })
    }

    /// Creates the bucket if it is not there.
    fn ensure_bucket(&self) -> Result<()> {
        let object = "(bucket)";
        let exists = self.http.run(object, || {
            let url = self.bucket.head_bucket(Some(&self.creds)).sign(SIGNED_FOR);
            let mut r = self.send("HEAD", url, &[], None)?;
            match r.status().as_u16() {
                200 => Ok(true),
                404 => Ok(false),
                _ => Err(self.fatal(object, &mut r)),
            }
        })?;
        if exists {
            return Ok(());
        }
        self.http.run(object, || {
            let action = self.bucket.create_bucket(&self.creds);
            let body = action.body();
            let mut r = self.send(
                "PUT",
                action.sign(SIGNED_FOR),
                &[],
                Some(Body::Bytes(body.as_bytes())),
            )?;
            match r.status().as_u16() {
                200 | 204 | 409 => Ok(()),
                _ => Err(self.fatal(object, &mut r)),
            }
        })
    }

    /// One PUT of `data` to `key`; `Ok(false)` if a conditional create
    /// found the object there (412). `create_only`: conditional
    /// (`If-None-Match: *`) while the server implements it; otherwise a
    /// plain PUT, which replaces an object there.
    fn put(&self, object: &str, key: &str, data: Body<'_>, create_only: bool) -> Result<bool> {
        self.http.run(object, || {
            self.http.throttle_up(data.len() as usize);
            let url = self
                .bucket
                .put_object(Some(&self.creds), key)
                .sign(SIGNED_FOR);
            let conditional = create_only && self.conditional.load(Ordering::Relaxed);
            let mut headers = vec![("content-type", "application/octet-stream")];
            if conditional {
                headers.push(("if-none-match", "*"));
            }
            let mut r = self.send("PUT", url, &headers, Some(data))?;
            match r.status().as_u16() {
                200 | 201 | 204 => Ok(true),
                412 => Ok(false),
                // A concurrent conditional write of the same key: try again.
                409 => Err(Failure::Transient(super::http::describe_status(&mut r))),
                501 if conditional => {
                    self.conditional.store(false, Ordering::Relaxed);
                    Err(Failure::Transient(
                        "conditional PUT not implemented by the server; retrying without".into(),
                    ))
                }
                _ => Err(self.fatal(object, &mut r)),
            }
        })
    }
}

impl Backend for S3Backend {
    fn location(&self) -> String {
        self.http.location.clone()
    }

    fn create(&self) -> Result<()> {
        self.ensure_bucket()
    }

    fn exists(&self, kind: Kind, name: &str) -> Result<bool> {
        Ok(self.head(kind, name)?.is_some())
    }

    fn list(&self, kind: Kind) -> Result<Vec<Entry>> {
        if kind == Kind::Config {
            return Ok(Vec::new());
        }
        let prefix = format!("{}{}/", self.prefix, kind.dir());
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_page(&prefix, token.as_deref())?;
            for c in page.contents {
                let Some(rest) = c.key.strip_prefix(&prefix) else {
                    continue;
                };
                // Packs sit one level down (packs/ab/NAME); nothing deeper.
                let parts: Vec<&str> = rest.split('/').collect();
                let name = match (kind, parts.as_slice()) {
                    (Kind::Pack, [_, n]) => *n,
                    (Kind::Pack, _) => continue,
                    (_, [n]) => *n,
                    _ => continue,
                };
                if !name.is_empty() {
                    out.push(Entry {
                        name: name.to_string(),
                        size: c.size.unwrap_or(0),
                    });
                }
            }
            match page.next_continuation_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        Ok(out)
    }

    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
        let key = self.key(kind, name)?;
        let object = kind.path(name);
        self.http.run(&object, || {
            let url = self
                .bucket
                .get_object(Some(&self.creds), &key)
                .sign(SIGNED_FOR);
            let mut r = self.send("GET", url, &[], None)?;
            match r.status().as_u16() {
                200 => {}
                404 => return Err(Failure::Fatal(not_found(&self.http.location, &object))),
                _ => return Err(self.fatal(&object, &mut r)),
            }
            let v = read_body(&object, &mut r, max).map_err(body_failure)?;
            self.http.throttle_down(v.len());
            Ok(v)
        })
    }

    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let key = self.key(kind, name)?;
        let object = kind.path(name);
        super::rest::ranged_get(
            &self.http,
            &object,
            len,
            |range| {
                let url = self
                    .bucket
                    .get_object(Some(&self.creds), &key)
                    .sign(SIGNED_FOR);
                self.send("GET", url, &[("range", range)], None)
            },
            offset,
        )
    }

    fn size(&self, kind: Kind, name: &str) -> Result<u64> {
        let object = kind.path(name);
        match self.head(kind, name)? {
            Some(r) => content_length(&r)
                .ok_or_else(|| Error::corrupt(&object, "the server reported no size".to_string())),
            None => Err(not_found(&self.http.location, &object)),
        }
    }

    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()> {
        let key = self.key(kind, name)?;
        let object = kind.path(name);
        if kind == Kind::Config
            && !self.conditional.load(Ordering::Relaxed)
            && self.exists(kind, name)?
        {
            return Err(Error::RepositoryExists(self.location()));
        }
        let created = self.put(&object, &key, Body::Bytes(data), true)?;
        // A retried PUT whose first attempt landed finds its own object:
        // only a config with other bytes is another repository's.
        if !created
            && kind == Kind::Config
            && self
                .read_bounded(kind, name, data.len() as u64 + 1)
                .ok()
                .as_deref()
                != Some(data)
        {
            return Err(Error::RepositoryExists(self.location()));
        }
        Ok(())
    }

    /// A plain (unconditional) PUT of `config`, after a HEAD finds it
    /// there: S3 replaces an object whole, so readers get the old bytes or
    /// the new.
    fn replace_config(&self, data: &[u8]) -> Result<()> {
        let (kind, name) = (Kind::Config, "config");
        if !self.exists(kind, name)? {
            return Err(Error::NoRepository(self.location()));
        }
        let key = self.key(kind, name)?;
        self.put(&kind.path(name), &key, Body::Bytes(data), false)?;
        Ok(())
    }

    fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        let key = self.key(kind, name)?;
        let object = kind.path(name);
        self.http.run(&object, || {
            let url = self
                .bucket
                .delete_object(Some(&self.creds), &key)
                .sign(SIGNED_FOR);
            let mut r = self.send("DELETE", url, &[], None)?;
            match r.status().as_u16() {
                200 | 204 | 404 => Ok(()),
                _ => Err(self.fatal(&object, &mut r)),
            }
        })
    }

    fn age(&self, kind: Kind, name: &str) -> Result<Option<Duration>> {
        match self.head(kind, name)? {
            Some(r) => Ok(age_from_headers(&r)),
            None => Err(not_found(&self.http.location, &kind.path(name))),
        }
    }

    /// Packs wait for their upload in a temporary file.
    fn stage(&self, kind: Kind) -> Result<super::Staged> {
        match kind {
            Kind::Pack => super::stage_in_temp(&self.http.stage_dir),
            _ => Ok(super::Staged::Memory(Vec::new())),
        }
    }

    fn commit(&self, kind: Kind, name: &str, mut staged: super::Staged) -> Result<()> {
        if kind == Kind::Config {
            return self.write(kind, name, &super::staged_bytes(staged)?);
        }
        // Content-addressed: streamed from the staged file, not read into
        // memory; an object already there is the same bytes.
        let mut held = Vec::new();
        let body = super::staged_body(&mut staged, &mut held)?;
        self.put(&kind.path(name), &self.key(kind, name)?, body, true)?;
        Ok(())
    }

    fn connections(&self) -> Option<usize> {
        Some(self.http.connections())
    }

    fn requests(&self) -> Option<u64> {
        Some(self.http.requests())
    }
}
