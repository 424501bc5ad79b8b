//! Request files (`--targets FILE`): requests with their own method, headers and body, in
//! vegeta's two formats.
//!
//! The http format: a request line `METHOD URL`, then its header lines `Name: value`, then
//! optionally `@PATH`, a file holding its body (relative to the request file's directory);
//! blank lines between requests, `#` starts a comment line.
//!
//! ```text
//! GET http://127.0.0.1:8080/users/42
//! Accept: application/json
//!
//! POST http://127.0.0.1:8080/users
//! Content-Type: application/json
//! @bodies/new-user.json
//! ```
//!
//! The JSON format: one object per line, `{"method": "GET", "url": "...", "header": {"K":
//! ["v"]}, "body": "<base64>", "name": "...", "weight": 3}` (vegeta's JSON target, plus a name
//! and a weight); only `url` is required.
//!
//! Everything is bounded: the file, each body, the bodies together (a body file named by many
//! requests is read once), the requests, the distinct names.

use crate::files::{read_limited, MAX_BODY_BYTES, MAX_URL_FILE_BYTES};
use crate::target::{Target, TargetError};
use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::config::MAX_WEIGHT_SUM;
pub use crate::target::RequestSpec;

/// The most distinct request names a run reports apart.
pub const MAX_NAMES: usize = 1_000;

/// The most bytes all of a file's distinct bodies may hold together.
pub const MAX_BODIES_BYTES: u64 = 256 << 20;

/// The largest weight of one request.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// The format of a request file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// JSON when the first line that is not blank starts with `{`, else http.
    #[default]
    Auto,
    /// vegeta's http format.
    Http,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Format::Auto),
            "http" => Ok(Format::Http),
            "json" => Ok(Format::Json),
            _ => Err(format!("{s:?}: the format is auto, http or json")),
        }
    }
}

/// A request file that cannot be used: the file, the line (0 for the whole file) and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}{}: {reason}", path.display(), if *line > 0 { format!(":{line}") } else { String::new() })]
pub struct RequestsError {
    /// The request file.
    pub path: PathBuf,
    /// The line, from 1; 0 when the error is about the whole file.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Reads the requests of `path`, each with its URL resolved.
///
/// # Errors
/// The first problem, with its line: a malformed line, a bad URL or header, an unreadable or
/// too large body, too many requests or names, weights that cannot be shared.
pub fn read(path: &Path, format: Format) -> Result<Vec<Target>, RequestsError> {
    let whole = |reason: String| RequestsError {
        path: path.to_path_buf(),
        line: 0,
        reason,
    };
    let bytes = read_limited(path, MAX_URL_FILE_BYTES).map_err(|e| whole(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| whole("not UTF-8".into()))?;
    let json = match format {
        Format::Json => true,
        Format::Http => false,
        Format::Auto => text.trim_start().starts_with('{'),
    };
    let mut reader = Reader {
        path: path.to_path_buf(),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        bodies: HashMap::new(),
        body_bytes: 0,
        names: BTreeMap::new(),
        out: Vec::new(),
    };
    if json {
        reader.json(&text)?;
    } else {
        reader.http(&text)?;
    }
    if reader.out.is_empty() {
        return Err(whole("no request in the file".into()));
    }
    let sum: u64 = reader.out.iter().map(|t| u64::from(weight(t))).sum();
    if sum == 0 {
        return Err(whole(
            "every weight is 0: give at least one request a weight".into(),
        ));
    }
    if sum > MAX_WEIGHT_SUM {
        return Err(whole(format!(
            "the weights add up to {sum}, more than {MAX_WEIGHT_SUM}: divide them"
        )));
    }
    Ok(reader.out)
}

fn weight(t: &Target) -> u32 {
    t.spec.as_ref().map_or(1, |s| s.weight)
}

/// The request being read, in the http format.
struct Pending {
    line: usize,
    method: Method,
    url: String,
    headers: HeaderMap,
    body: Bytes,
}

struct Reader {
    path: PathBuf,
    dir: PathBuf,
    /// Body files already read, by path.
    bodies: HashMap<PathBuf, Bytes>,
    body_bytes: u64,
    /// Distinct names, with the line that first used each.
    names: BTreeMap<String, usize>,
    out: Vec<Target>,
}

impl Reader {
    fn error(&self, line: usize, reason: impl Into<String>) -> RequestsError {
        RequestsError {
            path: self.path.clone(),
            line,
            reason: reason.into(),
        }
    }

    fn http(&mut self, text: &str) -> Result<(), RequestsError> {
        let mut pending: Option<Pending> = None;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.starts_with('#') {
                continue;
            }
            if line.is_empty() {
                if let Some(p) = pending.take() {
                    self.push_http(p)?;
                }
                continue;
            }
            if let Some(body_path) = line.strip_prefix('@') {
                let Some(p) = pending.as_mut() else {
                    return Err(self.error(n, "a body (@PATH) before any request line"));
                };
                if !p.body.is_empty() {
                    return Err(self.error(n, "a second body for one request"));
                }
                p.body = self.body_file(n, body_path.trim())?;
                continue;
            }
            match (request_line(line), pending.as_mut()) {
                (Some((method, url)), _) => {
                    if let Some(p) = pending.take() {
                        self.push_http(p)?;
                    }
                    let method = Method::from_bytes(method.as_bytes())
                        .map_err(|_| self.error(n, format!("bad method {method:?}")))?;
                    pending = Some(Pending {
                        line: n,
                        method,
                        url: url.to_string(),
                        headers: HeaderMap::new(),
                        body: Bytes::new(),
                    });
                }
                (None, Some(p)) => {
                    let (name, value) = header(line).map_err(|e| self.error(n, e))?;
                    if !p.body.is_empty() {
                        return Err(self.error(n, "a header after the body line"));
                    }
                    p.headers.append(name, value);
                }
                (None, None) => {
                    return Err(self.error(
                        n,
                        format!("expected a request line, METHOD URL, got {line:?}"),
                    ))
                }
            }
        }
        if let Some(p) = pending.take() {
            self.push_http(p)?;
        }
        Ok(())
    }

    fn push_http(&mut self, p: Pending) -> Result<(), RequestsError> {
        self.push(p.line, p.method, &p.url, p.headers, p.body, None, 1)
    }

    fn json(&mut self, text: &str) -> Result<(), RequestsError> {
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let t: JsonRequest =
                serde_json::from_str(line).map_err(|e| self.error(n, e.to_string()))?;
            self.push_json(n, t)?;
        }
        Ok(())
    }

    fn push_json(&mut self, n: usize, t: JsonRequest) -> Result<(), RequestsError> {
        let (method, headers, body) = json_parts(t.method.as_deref(), &t.header, t.body.as_deref())
            .map_err(|e| self.error(n, e))?;
        self.count_body(n, body.len() as u64)?;
        let weight = t.weight.unwrap_or(1);
        self.push(n, method, &t.url, headers, body, t.name, weight)
    }

    #[allow(clippy::too_many_arguments)] // one request's parts, each checked here
    fn push(
        &mut self,
        n: usize,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
        name: Option<String>,
        weight: u32,
    ) -> Result<(), RequestsError> {
        if self.out.len() >= crate::config::MAX_TARGETS {
            return Err(self.error(
                n,
                format!("more than {} requests", crate::config::MAX_TARGETS),
            ));
        }
        if weight > MAX_WEIGHT {
            return Err(self.error(n, format!("weight {weight} is above {MAX_WEIGHT}")));
        }
        let mut target = Target::parse(url).map_err(|e| self.error(n, explain(e)))?;
        let name = name.unwrap_or_else(|| format!("{method} {url}"));
        if name.is_empty() || name.len() > 1024 || name.chars().any(char::is_control) {
            return Err(self.error(
                n,
                "a name must be 1 to 1024 characters, none of them control characters",
            ));
        }
        if !self.names.contains_key(&name) {
            if self.names.len() >= MAX_NAMES {
                return Err(self.error(
                    n,
                    format!("more than {MAX_NAMES} names: give requests a shared \"name\""),
                ));
            }
            self.names.insert(name.clone(), n);
        }
        target.spec = Some(Arc::new(RequestSpec {
            method,
            headers,
            body,
            name,
            weight,
        }));
        self.out.push(target);
        Ok(())
    }

    fn body_file(&mut self, n: usize, rel: &str) -> Result<Bytes, RequestsError> {
        if rel.is_empty() {
            return Err(self.error(n, "@ without a path"));
        }
        let path = self.dir.join(rel);
        if let Some(b) = self.bodies.get(&path) {
            return Ok(b.clone());
        }
        let bytes = read_limited(&path, MAX_BODY_BYTES)
            .map_err(|e| self.error(n, format!("cannot read body file {}: {e}", path.display())))?;
        self.count_body(n, bytes.len() as u64)?;
        let body = Bytes::from(bytes);
        self.bodies.insert(path, body.clone());
        Ok(body)
    }

    fn count_body(&mut self, n: usize, len: u64) -> Result<(), RequestsError> {
        self.body_bytes += len;
        if self.body_bytes > MAX_BODIES_BYTES {
            return Err(self.error(
                n,
                format!("the bodies add up to more than {MAX_BODIES_BYTES} bytes"),
            ));
        }
        Ok(())
    }
}

/// The method, headers and body of a JSON request (vegeta's JSON target: `method`, `header`
/// as name to values, `body` in base64), checked.
pub(crate) fn json_parts(
    method: Option<&str>,
    header: &BTreeMap<String, Vec<String>>,
    body: Option<&str>,
) -> Result<(Method, HeaderMap, Bytes), String> {
    let method = method.unwrap_or("GET");
    let method =
        Method::from_bytes(method.as_bytes()).map_err(|_| format!("bad method {method:?}"))?;
    let mut headers = HeaderMap::new();
    for (name, values) in header {
        let hname = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("bad header name {name:?}"))?;
        for v in values {
            let value =
                HeaderValue::from_str(v).map_err(|_| format!("bad value of header {name:?}"))?;
            headers.append(hname.clone(), value);
        }
    }
    let body = match body {
        None => Bytes::new(),
        Some(b) => {
            if b.len() as u64 > MAX_BODY_BYTES / 3 * 4 + 4 {
                return Err(format!("a body of more than {MAX_BODY_BYTES} bytes"));
            }
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("the body is not base64: {e}"))?;
            Bytes::from(raw)
        }
    };
    Ok((method, headers, body))
}

fn explain(e: TargetError) -> String {
    e.to_string()
}

/// `METHOD URL`: a token of letters, a space, a URL with a scheme.
fn request_line(line: &str) -> Option<(&str, &str)> {
    let (method, url) = line.split_once(char::is_whitespace)?;
    let url = url.trim();
    let token = !method.is_empty() && method.bytes().all(|b| b.is_ascii_alphabetic());
    (token && url.contains("://") && !url.contains(char::is_whitespace)).then_some((method, url))
}

fn header(line: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = line.split_once(':').ok_or_else(|| {
        format!("expected a header, Name: value, or a request line, METHOD URL, got {line:?}")
    })?;
    let hname = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("bad header name {:?}", name.trim()))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("bad value of header {:?}", name.trim()))?;
    Ok((hname, value))
}

/// One line of the JSON format.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JsonRequest {
    #[serde(default)]
    pub method: Option<String>,
    pub url: String,
    #[serde(default)]
    pub header: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub weight: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("tg-requests-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(d.join("bodies")).unwrap();
            Dir(d)
        }

        fn file(&self, name: &str, text: &str) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn spec(t: &Target) -> &RequestSpec {
        t.spec.as_deref().unwrap()
    }

    #[test]
    fn the_http_format_reads_methods_headers_and_bodies() {
        let dir = Dir::new("http");
        dir.file("bodies/user.json", "{\"name\": \"ada\"}");
        let path = dir.file(
            "targets.txt",
            "# the users API\nGET http://127.0.0.1:1/users/42\nAccept: application/json\nX-Twice: 1\nX-Twice: 2\n\n\
             POST http://127.0.0.1:1/users\nContent-Type: application/json\n@bodies/user.json\n\
             DELETE http://127.0.0.1:2/users/7\n",
        );
        let got = read(&path, Format::Auto).unwrap();
        assert_eq!(got.len(), 3);
        let get = spec(&got[0]);
        assert_eq!(get.method, Method::GET);
        assert_eq!(get.name, "GET http://127.0.0.1:1/users/42");
        assert_eq!(get.headers.get_all("x-twice").iter().count(), 2);
        let post = spec(&got[1]);
        assert_eq!(post.body, Bytes::from_static(b"{\"name\": \"ada\"}"));
        assert_eq!(post.headers["content-type"], "application/json");
        assert_eq!(spec(&got[2]).method, Method::DELETE);
        assert_eq!(got[2].addr.port(), 2);
    }

    #[test]
    fn the_json_format_reads_vegetas_targets_with_names_and_weights() {
        let dir = Dir::new("json");
        let path = dir.file(
            "targets.jsonl",
            "{\"method\": \"PUT\", \"url\": \"http://127.0.0.1:1/a\", \"header\": {\"X-A\": [\"1\", \"2\"]}, \"body\": \"aGVsbG8=\", \"name\": \"put a\", \"weight\": 3}\n\n\
             {\"url\": \"http://127.0.0.1:1/b\"}\n",
        );
        let got = read(&path, Format::Auto).unwrap();
        let put = spec(&got[0]);
        assert_eq!(
            (put.method.as_str(), put.name.as_str(), put.weight),
            ("PUT", "put a", 3)
        );
        assert_eq!(put.body, Bytes::from_static(b"hello"));
        assert_eq!(put.headers.get_all("x-a").iter().count(), 2);
        assert_eq!(spec(&got[1]).name, "GET http://127.0.0.1:1/b");
        assert_eq!(spec(&got[1]).weight, 1);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let dir = Dir::new("errors");
        let cases = [
            (
                "a.txt",
                "GET http://127.0.0.1:1/\nno colon here\n",
                ":2: expected a header",
            ),
            ("b.txt", "Accept: x\n", ":1: expected a request line"),
            (
                "c.txt",
                "GET http://127.0.0.1:1/\n@missing.bin\n",
                ":2: cannot read body file",
            ),
            ("d.txt", "GET ftp://127.0.0.1:1/\n", ":1: bad URL"),
            (
                "e.txt",
                "@x\n",
                ":1: a body (@PATH) before any request line",
            ),
            (
                "f.json",
                "{\"url\": \"http://127.0.0.1:1/\"}\n{\"url\": 1}\n",
                ":2: invalid type",
            ),
            (
                "g.json",
                "{\"url\": \"http://127.0.0.1:1/\", \"wieght\": 2}\n",
                ":1: unknown field `wieght`",
            ),
            (
                "h.json",
                "{\"url\": \"http://127.0.0.1:1/\", \"weight\": 0}\n",
                "every weight is 0",
            ),
            (
                "i.json",
                "{\"url\": \"http://127.0.0.1:1/\", \"body\": \"@@\"}\n",
                ":1: the body is not base64",
            ),
            ("j.txt", "# nothing\n\n", "no request in the file"),
            (
                "k.json",
                "{\"url\": \"http://127.0.0.1:1/\", \"weight\": 2000000}\n",
                ":1: weight 2000000 is above",
            ),
        ];
        for (name, text, want) in cases {
            let path = dir.file(name, text);
            let err = read(&path, Format::Auto).unwrap_err().to_string();
            assert!(err.starts_with(&path.display().to_string()), "{err}");
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn names_and_requests_are_bounded() {
        let dir = Dir::new("bounds");
        let many: String = (0..=MAX_NAMES)
            .map(|i| format!("{{\"url\": \"http://127.0.0.1:1/{i}\"}}\n"))
            .collect();
        let err = read(&dir.file("names.json", &many), Format::Json).unwrap_err();
        assert_eq!(err.line, MAX_NAMES + 1);
        assert!(err.reason.contains("more than 1000 names"), "{err}");
        let shared: String = (0..=crate::config::MAX_TARGETS)
            .map(|i| format!("{{\"url\": \"http://127.0.0.1:1/{i}\", \"name\": \"all\"}}\n"))
            .collect();
        let err = read(&dir.file("many.json", &shared), Format::Json).unwrap_err();
        assert!(err.reason.contains("more than 10000 requests"), "{err}");
    }
}
