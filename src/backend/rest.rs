//! restic's REST protocol, version 2 (rest-server, `rclone serve restic`):
//! `POST /?create=true` makes the layout; objects are `GET`/`HEAD`/`POST`/
//! `DELETE` on `/config`, `/keys/NAME`, `/data/NAME`, `/index/NAME`,
//! `/snapshots/NAME` and `/locks/NAME`; listings are `GET /TYPE/` with
//! `Accept: application/vnd.x.restic.rest.v2` (JSON names and sizes).
//!
//! larder's packs go to `data/`; prune's deletion marks, which restic's
//! layout has no place for, go to `locks/` under a `mark-` prefix (a
//! server that checks object types accepts them there) and are kept apart
//! from the locks when listed.
//!
//! Append-only servers answer 403 to every DELETE outside `locks/` and to
//! rewriting an existing object: [`RestBackend::check_deletable`] detects
//! this with a DELETE of an object that cannot exist, which writes nothing.

use super::http::{
    Body, Http, RemoteOptions, age_from_headers, body_failure, content_length, not_found,
    read_body, unexpected,
};
use super::location::RestLocation;
use super::retry::Failure;
use super::{Backend, Entry, Kind};
use crate::error::{Error, Result};

const V2: &str = "application/vnd.x.restic.rest.v2";
/// Name prefix of marks in `locks/`.
const MARK_PREFIX: &str = "mark-";
/// Name prefix of compression dictionaries in `keys/` (the REST protocol
/// knows only its own directories).
const DICT_PREFIX: &str = "dict-";
/// Largest listing accepted (names and sizes of a very large repository).
const MAX_LISTING: u64 = 1 << 30;

/// A repository behind a REST server.
pub struct RestBackend {
    base: url::Url,
    /// `Basic …`, if the URL had a user.
    auth: Option<String>,
    http: Http,
    /// The rclone server this backend talks to, ended with it (the
    /// `rclone:` backend).
    _server: Option<super::rclone::RcloneServer>,
}

impl RestBackend {
    pub fn new(loc: &RestLocation, shown: String, opts: &RemoteOptions) -> RestBackend {
        use base64::Engine;
        let auth = loc.user.as_ref().map(|u| {
            let pair = format!("{u}:{}", loc.password.as_deref().unwrap_or(""));
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        RestBackend {
            base: loc.url.clone(),
            auth,
            http: Http::new(shown, opts),
            _server: None,
        }
    }

    /// This backend, keeping `server` running as long as it lives.
    pub fn with_server(mut self, server: super::rclone::RcloneServer) -> Self {
        self._server = Some(server);
        self
    }

    /// The server path of an object (relative to the base URL).
    fn rel(kind: Kind, name: &str) -> Result<String> {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::internal(format!("invalid object name {name:?}")));
        }
        Ok(match kind {
            Kind::Config => "config".to_string(),
            Kind::Pack => format!("data/{name}"),
            Kind::Mark => format!("locks/{MARK_PREFIX}{name}"),
            Kind::Dict => format!("keys/{DICT_PREFIX}{name}"),
            k => format!("{}/{name}", k.dir()),
        })
    }

    fn url(&self, rel: &str) -> Result<String> {
        self.base
            .join(rel)
            .map(String::from)
            .map_err(|e| Error::internal(format!("URL for {rel}: {e}")))
    }

    fn request(&self, method: &str, url: &str) -> ureq::http::request::Builder {
        let mut b = ureq::http::Request::builder().method(method).uri(url);
        if let Some(a) = &self.auth {
            b = b.header("authorization", a);
        }
        b
    }

    /// One exchange: `method` on `url` with `body` and extra headers.
    fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Body<'_>>,
    ) -> std::result::Result<super::http::Response, Failure> {
        let mut b = self.request(method, url);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        self.http.exchange(|agent| match body {
            Some(d) => d.send(agent, b),
            None => agent.run(b.body(()).map_err(ureq::Error::Http)?),
        })
    }

    /// POSTs `data` as object `name` (see [`Backend::write`]).
    fn post(&self, kind: Kind, name: &str, data: Body<'_>) -> Result<()> {
        let object = kind.path(name);
        // The protocol has no conditional create: the config, the one
        // object not named by its content, is checked first.
        if kind == Kind::Config && self.exists(kind, name)? {
            return Err(Error::RepositoryExists(self.location()));
        }
        let url = self.url(&Self::rel(kind, name)?)?;
        let refused = self.http.run(&object, || {
            self.http.throttle_up(data.len() as usize);
            let mut r = self.send(
                "POST",
                &url,
                &[("content-type", "application/octet-stream")],
                Some(data),
            )?;
            match r.status().as_u16() {
                200 | 201 | 204 => Ok(false),
                // Append-only servers refuse rewriting an existing object.
                403 => Ok(true),
                _ => Err(Failure::Fatal(unexpected(
                    &self.http.location,
                    &object,
                    &mut r,
                ))),
            }
        })?;
        if refused {
            // Same name, same bytes: already there is written.
            if kind != Kind::Config && self.exists(kind, name)? {
                return Ok(());
            }
            return Err(Error::Backend {
                object,
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{}: the server refused the write (HTTP 403)",
                        self.location()
                    ),
                ),
            });
        }
        Ok(())
    }

    /// HEAD: `Some(response)` if the object exists.
    fn head(&self, kind: Kind, name: &str) -> Result<Option<super::http::Response>> {
        let rel = Self::rel(kind, name)?;
        let url = self.url(&rel)?;
        self.http.run(&kind.path(name), || {
            let mut r = self.send("HEAD", &url, &[], None)?;
            match r.status().as_u16() {
                200 => Ok(Some(r)),
                404 => Ok(None),
                _ => Err(Failure::Fatal(unexpected(
                    &self.http.location,
                    &kind.path(name),
                    &mut r,
                ))),
            }
        })
    }

    /// One of the protocol's directories that holds two of larder's kinds
    /// (locks and marks, keys and dictionaries): the names with `prefix`
    /// (without it) when `prefixed`, else the others.
    fn list_shared(&self, dir: &str, prefix: &str, prefixed: bool) -> Result<Vec<Entry>> {
        Ok(self
            .list_dir(dir)?
            .into_iter()
            .filter_map(|e| match e.name.strip_prefix(prefix) {
                Some(name) if prefixed => Some(Entry {
                    name: name.to_string(),
                    size: e.size,
                }),
                None if !prefixed => Some(e),
                _ => None,
            })
            .collect())
    }

    /// The names in `dir/` with their sizes.
    fn list_dir(&self, dir: &str) -> Result<Vec<Entry>> {
        #[derive(serde::Deserialize)]
        struct Item {
            name: String,
            size: u64,
        }
        let url = self.url(&format!("{dir}/"))?;
        let object = format!("{dir}/");
        self.http.run(&object, || {
            let mut r = self.send("GET", &url, &[("accept", V2)], None)?;
            match r.status().as_u16() {
                200 => {}
                404 => return Ok(Vec::new()),
                _ => {
                    return Err(Failure::Fatal(unexpected(
                        &self.http.location,
                        &object,
                        &mut r,
                    )));
                }
            }
            let body = read_body(&object, &mut r, MAX_LISTING).map_err(body_failure)?;
            self.http.throttle_down(body.len());
            let items: Vec<Item> = serde_json::from_slice(&body).map_err(|e| {
                Failure::Fatal(Error::corrupt(&object, format!("not a v2 listing: {e}")))
            })?;
            Ok(items
                .into_iter()
                .map(|i| Entry {
                    name: i.name,
                    size: i.size,
                })
                .collect())
        })
    }
}

impl Backend for RestBackend {
    fn location(&self) -> String {
        self.http.location.clone()
    }

    fn create(&self) -> Result<()> {
        let mut url = self.base.clone();
        url.set_query(Some("create=true"));
        let url = String::from(url);
        self.http.run("(repository layout)", || {
            let mut r = self.send("POST", &url, &[], None)?;
            match r.status().as_u16() {
                200 | 201 | 204 => Ok(()),
                _ => Err(Failure::Fatal(unexpected(
                    &self.http.location,
                    "(repository layout)",
                    &mut r,
                ))),
            }
        })
    }

    fn exists(&self, kind: Kind, name: &str) -> Result<bool> {
        Ok(self.head(kind, name)?.is_some())
    }

    fn list(&self, kind: Kind) -> Result<Vec<Entry>> {
        match kind {
            Kind::Config => Ok(Vec::new()),
            Kind::Pack => self.list_dir("data"),
            Kind::Lock => self.list_shared("locks", MARK_PREFIX, false),
            Kind::Mark => self.list_shared("locks", MARK_PREFIX, true),
            Kind::Key => self.list_shared("keys", DICT_PREFIX, false),
            Kind::Dict => self.list_shared("keys", DICT_PREFIX, true),
            k => self.list_dir(k.dir()),
        }
    }

    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
        let url = self.url(&Self::rel(kind, name)?)?;
        let object = kind.path(name);
        self.http.run(&object, || {
            let mut r = self.send("GET", &url, &[], None)?;
            match r.status().as_u16() {
                200 => {}
                404 => return Err(Failure::Fatal(not_found(&self.http.location, &object))),
                _ => {
                    return Err(Failure::Fatal(unexpected(
                        &self.http.location,
                        &object,
                        &mut r,
                    )));
                }
            }
            let v = read_body(&object, &mut r, max).map_err(body_failure)?;
            self.http.throttle_down(v.len());
            Ok(v)
        })
    }

    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let url = self.url(&Self::rel(kind, name)?)?;
        let object = kind.path(name);
        ranged_get(
            &self.http,
            &object,
            len,
            |range| self.send("GET", &url, &[("range", range)], None),
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
        self.post(kind, name, Body::Bytes(data))
    }

    /// Refused: the REST protocol does not say how a server stores a POST
    /// over an existing object, and none replaces the config atomically.
    /// `rclone serve restic` over a local directory rewrites the file in
    /// place (a crash midway would leave a partial config, and a failed
    /// upload none), restic's rest-server refuses with HTTP 403. Migrate
    /// on the server, on the repository's directory, instead.
    fn replace_config(&self, _data: &[u8]) -> Result<()> {
        Err(Error::Usage(format!(
            "{}: a REST server does not replace the config atomically, so larder will not migrate it over REST; run `larder migrate` on the server, on the repository's directory",
            self.location()
        )))
    }

    fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        let url = self.url(&Self::rel(kind, name)?)?;
        let object = kind.path(name);
        self.http.run(&object, || {
            let mut r = self.send("DELETE", &url, &[], None)?;
            match r.status().as_u16() {
                200 | 204 | 404 => Ok(()),
                403 => Err(Failure::Fatal(Error::Backend {
                    object: object.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        format!(
                            "{}: the server refused the deletion (HTTP 403; an append-only repository?)",
                            self.http.location
                        ),
                    ),
                })),
                _ => Err(Failure::Fatal(unexpected(
                    &self.http.location,
                    &object,
                    &mut r,
                ))),
            }
        })
    }

    fn age(&self, kind: Kind, name: &str) -> Result<Option<std::time::Duration>> {
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
        // Streamed from the staged file, not read into memory.
        let mut held = Vec::new();
        let body = super::staged_body(&mut staged, &mut held)?;
        self.post(kind, name, body)
    }

    fn connections(&self) -> Option<usize> {
        Some(self.http.connections())
    }

    fn requests(&self) -> Option<u64> {
        Some(self.http.requests())
    }

    /// A DELETE of a snapshot name that cannot exist (not hex): an
    /// append-only server refuses it with 403 before looking; any other
    /// answer means deletions are allowed.
    fn check_deletable(&self) -> Result<()> {
        let url = self.url("snapshots/larder-append-only-probe")?;
        let object = "snapshots/larder-append-only-probe";
        let refused = self.http.run(object, || {
            let r = self.send("DELETE", &url, &[], None)?;
            Ok(r.status().as_u16() == 403)
        })?;
        if refused {
            return Err(append_only(&self.location()));
        }
        Ok(())
    }
}

/// The error for a repository whose server refuses deletions.
pub fn append_only(location: &str) -> Error {
    Error::Usage(format!(
        "{location} is append-only: the server refuses to delete anything (HTTP 403), \
         so forget and prune cannot run through it; nothing was changed. Run them \
         against the server's storage directly, from a trusted machine"
    ))
}

/// A ranged GET shared by the HTTP backends: `len` bytes at `offset`,
/// exactly, through `send(range_header)`.
pub fn ranged_get(
    http: &Http,
    object: &str,
    len: u64,
    send: impl Fn(&str) -> std::result::Result<super::http::Response, Failure>,
    offset: u64,
) -> Result<Vec<u8>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let end = offset
        .checked_add(len - 1)
        .ok_or_else(|| Error::corrupt(object, format!("range {offset}+{len} overflows")))?;
    let range = format!("bytes={offset}-{end}");
    http.run(object, || {
        let mut r = send(&range)?;
        match r.status().as_u16() {
            206 => {}
            404 => return Err(Failure::Fatal(not_found(&http.location, object))),
            416 => {
                return Err(Failure::Fatal(Error::corrupt(
                    object,
                    format!("range {offset}+{len} is beyond the object's end"),
                )));
            }
            _ => return Err(Failure::Fatal(unexpected(&http.location, object, &mut r))),
        }
        let v = read_body(object, &mut r, len).map_err(body_failure)?;
        if (v.len() as u64) != len {
            return Err(Failure::Fatal(Error::corrupt(
                object,
                format!("range {offset}+{len}: the server sent {} bytes", v.len()),
            )));
        }
        http.throttle_down(v.len());
        Ok(v)
    })
}
