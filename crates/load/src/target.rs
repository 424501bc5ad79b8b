//! Target URLs: parsed, checked and resolved once, before the run.

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use http::{HeaderMap, Method};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

/// One URL requests are sent to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// `http` or `https`.
    pub tls: bool,
    /// Host and port as written (the Host header / `:authority`).
    pub authority: Authority,
    /// Host name without port (TLS server name).
    pub host: String,
    /// Path and query (the HTTP/1.1 request target).
    pub path: PathAndQuery,
    /// The address connected to.
    pub addr: SocketAddr,
    /// A request file's request: its own method, headers, body, name and weight (`None`: the
    /// run's `-X`, `-H` and `--data`).
    pub spec: Option<std::sync::Arc<RequestSpec>>,
}

/// What a request of a request file (`--targets`) sends, beyond its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// The method.
    pub method: Method,
    /// Its own headers (`-H` headers of the same name give way to them).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// The name its figures are reported under (default `METHOD URL`).
    pub name: String,
    /// Its share of the requests (default 1).
    pub weight: u32,
}

/// A URL that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    /// Not a URL.
    #[error("bad URL {url:?}: {reason}")]
    BadUrl {
        /// The text given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A scheme other than http or https.
    #[error("bad URL {0:?}: the scheme must be http or https")]
    Scheme(String),
    /// The host did not resolve.
    #[error("cannot resolve {host:?} in {url:?}: {reason}")]
    Resolve {
        /// The URL.
        url: String,
        /// The host.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
    /// An `@file` that could not be read.
    #[error("cannot read URL file {path:?}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl Target {
    /// Parses and resolves `url` (resolution uses the system resolver, once).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let bad = |reason: &str| TargetError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if !url.contains("://") {
            return Err(bad("missing scheme (http:// or https://)"));
        }
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        let tls = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP => false,
            Some(s) if *s == Scheme::HTTPS => true,
            Some(_) => return Err(TargetError::Scheme(url.to_string())),
            None => return Err(bad("missing scheme (http:// or https://)")),
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| bad("missing host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let path = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let addr = resolve(&host, port).map_err(|reason| TargetError::Resolve {
            url: url.to_string(),
            host: host.clone(),
            reason,
        })?;
        Ok(Target {
            url: url.to_string(),
            tls,
            authority,
            host,
            path,
            addr,
            spec: None,
        })
    }

    /// The connection this target's requests travel on: scheme, address and the name TLS
    /// verifies. Targets with the same origin share connections.
    pub fn origin(&self) -> (bool, SocketAddr, &str) {
        (self.tls, self.addr, &self.host)
    }

    /// The name its figures are reported under: the request file's, else `METHOD URL`.
    pub fn name(&self, method: &http::Method) -> String {
        match &self.spec {
            Some(s) => s.name.clone(),
            None => format!("{method} {}", self.url),
        }
    }

    /// The absolute URI (HTTP/2 requests carry scheme and authority).
    pub fn absolute_uri(&self) -> Uri {
        Uri::builder()
            .scheme(if self.tls { "https" } else { "http" })
            .authority(self.authority.clone())
            .path_and_query(self.path.clone())
            .build()
            .expect("parts come from a valid URI")
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| "no address".to_string())
}

/// Expands the URL arguments: each is a URL, or `@FILE` holding one URL per line (blank lines
/// and lines starting with `#` are skipped).
pub fn expand_args(args: &[String]) -> Result<Vec<String>, TargetError> {
    let mut out = Vec::new();
    for arg in args {
        match arg.strip_prefix('@') {
            Some(path) => out.extend(read_url_file(Path::new(path))?),
            None => out.push(arg.clone()),
        }
    }
    Ok(out)
}

fn read_url_file(path: &Path) -> Result<Vec<String>, TargetError> {
    let file_error = |reason: String| TargetError::File {
        path: path.display().to_string(),
        reason,
    };
    let bytes = crate::files::read_limited(path, crate::files::MAX_URL_FILE_BYTES)
        .map_err(|e| file_error(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| file_error("not UTF-8".into()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_and_https_with_default_ports() {
        let t = Target::parse("http://127.0.0.1:9000/a?b=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(t.path.as_str(), "/a?b=1");
        assert!(!t.tls);
        let t = Target::parse("https://127.0.0.1").unwrap();
        assert_eq!(t.addr.port(), 443);
        assert_eq!(t.path.as_str(), "/");
        assert_eq!(t.absolute_uri().to_string(), "https://127.0.0.1/");
        let t = Target::parse("http://[::1]:8080/").unwrap();
        assert_eq!(t.host, "::1");
    }

    #[test]
    fn bad_urls_name_the_problem() {
        let cases = [
            ("127.0.0.1:80/", "missing scheme"),
            ("ftp://127.0.0.1/", "the scheme must be http or https"),
            ("http://exa mple/", "bad URL"),
        ];
        for (url, want) in cases {
            let err = Target::parse(url).unwrap_err().to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
    }

    #[test]
    fn url_files_skip_blanks_and_comments() {
        let dir = std::env::temp_dir().join(format!("tg-urls-{}", std::process::id()));
        std::fs::write(
            &dir,
            "# fleet\nhttp://127.0.0.1:1/\n\n  http://127.0.0.1:2/ \n",
        )
        .unwrap();
        let args = vec![
            format!("@{}", dir.display()),
            "http://127.0.0.1:3/".to_string(),
        ];
        let urls = expand_args(&args).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(
            urls,
            [
                "http://127.0.0.1:1/",
                "http://127.0.0.1:2/",
                "http://127.0.0.1:3/"
            ]
        );
        let missing = expand_args(&["@/nonexistent/urls".to_string()]).unwrap_err();
        assert!(missing.to_string().starts_with("cannot read URL file"));
    }
}
