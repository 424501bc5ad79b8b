//! Proxy hygiene (RFC 9110 section 7.6): hop-by-hop headers are removed in both directions,
//! `Via` is added, and the client's address is appended to `X-Forwarded-For`. Before routing,
//! [`admit`] refuses what a proxy must not forward (RFC 9110, RFC 9112):
//! 1. `CONNECT`: 405 (tailguard forwards to its configured services, it is no tunnel);
//! 2. more than one `Host`: 400 (which one would the backend believe?);
//! 3. an absolute-form target or HTTP/2 `:authority` replaces `Host` (RFC 9112 3.2.2);
//! 4. HTTP/1.1 with no `Host`: 400 (RFC 9112 3.2);
//! 5. an encoded slash or backslash in the path (`%2F`, `%5C`, or a plain `\`) is refused with
//!    400, or decoded to `/`, or kept, as `limits.escapedSlashes` says
//!    ([`EscapedSlashes`]): a backend that decodes `/api/..%2fsecret` before matching
//!    (nginx does) must not see a different path from the one the proxy routed;
//! 6. dot-segments in the path, plain or percent-encoded (`/api/%2e%2e/x`), are resolved
//!    (RFC 3986 5.2.4), so routing and the backend see the same path; one that climbs above
//!    the root is refused with 400.

use crate::config::EscapedSlashes;
use http::header::{
    HeaderName, HeaderValue, CONNECTION, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE, VIA,
};
use http::{HeaderMap, Method, Request, StatusCode, Version};
use std::net::IpAddr;

/// Why [`admit`] refused a request: the status and the reason.
pub type Refusal = (StatusCode, &'static str);

/// Checks and normalises a request before routing (module docs, steps 1 to 6), with encoded
/// slashes handled as `escaped` says.
///
/// # Errors
/// The status and reason to answer with.
pub fn admit<B>(req: &mut Request<B>, escaped: EscapedSlashes) -> Result<(), Refusal> {
    if req.method() == Method::CONNECT {
        let why = "CONNECT is not supported: tailguard forwards only to its services";
        return Err((StatusCode::METHOD_NOT_ALLOWED, why));
    }
    let mut hosts = req.headers().get_all(http::header::HOST).iter();
    if hosts.next().is_some() && hosts.next().is_some() {
        return Err((StatusCode::BAD_REQUEST, "more than one Host header"));
    }
    if let Some(authority) = req.uri().authority() {
        let v = HeaderValue::from_str(authority.as_str())
            .map_err(|_| (StatusCode::BAD_REQUEST, "invalid authority"))?;
        req.headers_mut().insert(http::header::HOST, v);
    } else if req.version() == Version::HTTP_11 && !req.headers().contains_key(http::header::HOST) {
        return Err((StatusCode::BAD_REQUEST, "HTTP/1.1 request without Host"));
    }
    let normal = normalize_path(req.uri().path(), escaped).map_err(|e| match e {
        BadPath::AboveRoot => (StatusCode::BAD_REQUEST, "path climbs above the root"),
        BadPath::EscapedSlash => (
            StatusCode::BAD_REQUEST,
            "encoded slash or backslash in the path (limits.escapedSlashes: reject)",
        ),
    })?;
    if let Some(path) = normal {
        let mut parts = req.uri().clone().into_parts();
        let pq = match req.uri().query() {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        parts.path_and_query = Some(
            pq.parse()
                .map_err(|_| (StatusCode::BAD_REQUEST, "invalid path"))?,
        );
        *req.uri_mut() =
            http::Uri::from_parts(parts).map_err(|_| (StatusCode::BAD_REQUEST, "invalid path"))?;
    }
    Ok(())
}

/// A path [`normalize_path`] refuses.
#[derive(Debug, PartialEq, Eq)]
pub enum BadPath {
    /// Its dot-segments climb above the root.
    AboveRoot,
    /// It holds an encoded slash or backslash, and the rule is to refuse them.
    EscapedSlash,
}

/// `path` normalised (steps 5 and 6), or `None` when it needs nothing: encoded slashes and
/// backslashes (`%2F`, `%5C`, `\`) handled as `escaped` says (decoded, they become `/`, as
/// a WHATWG URL parser reads a backslash in an `http` URL), then dot-segments resolved (RFC
/// 3986 5.2.4, `%2e` read as `.`). Other percent-encodings are left as they are.
///
/// # Errors
/// [`BadPath`]: a `..` with no segment left to remove, or an encoded slash to refuse.
pub fn normalize_path(path: &str, escaped: EscapedSlashes) -> Result<Option<String>, BadPath> {
    let slashes = escaped != EscapedSlashes::KeepUnchanged && has_escaped_slash(path);
    if slashes && escaped == EscapedSlashes::Reject {
        return Err(BadPath::EscapedSlash);
    }
    let unescaped = slashes.then(|| unescape_slashes(path));
    let path_now = unescaped.as_deref().unwrap_or(path);
    match resolve_dots(path_now)? {
        Some(resolved) => Ok(Some(resolved)),
        None => Ok(unescaped),
    }
}

/// True when `path` holds `%2F`, `%5C` (any case) or `\`.
fn has_escaped_slash(path: &str) -> bool {
    let b = path.as_bytes();
    b.contains(&b'\\')
        || b.windows(3).any(|w| {
            w[0] == b'%'
                && matches!(
                    (w[1], w[2].to_ascii_uppercase()),
                    (b'2', b'F') | (b'5', b'C')
                )
        })
}

/// `path` with `%2F`, `%5C` and `\` as `/`.
fn unescape_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(i) = rest.find(['%', '\\']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let code = tail.get(1..3).map(str::to_ascii_uppercase);
        if let Some(after) = tail.strip_prefix('\\') {
            out.push('/');
            rest = after;
        } else if matches!(code.as_deref(), Some("2F" | "5C")) {
            out.push('/');
            rest = &tail[3..];
        } else {
            out.push('%');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// `path` with its dot-segments resolved (step 6), or `None` when it has none.
fn resolve_dots(path: &str) -> Result<Option<String>, BadPath> {
    let suspicious = path.contains("/.") || path.contains("%2e") || path.contains("%2E");
    let Some(rest) = path.strip_prefix('/').filter(|_| suspicious) else {
        return Ok(None);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    let mut trailing = false;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match dots(seg) {
            1 => trailing = last,
            2 => {
                out.pop().ok_or(BadPath::AboveRoot)?;
                trailing = last;
            }
            _ => out.push(seg),
        }
    }
    let mut s = String::with_capacity(path.len());
    for seg in &out {
        s.push('/');
        s.push_str(seg);
    }
    if trailing || s.is_empty() {
        s.push('/');
    }
    Ok((s != path).then_some(s))
}

/// 1 for a `.` segment, 2 for `..`, 0 otherwise (`%2e` in any case is a dot).
fn dots(seg: &str) -> usize {
    let decoded = seg.replace("%2e", ".").replace("%2E", ".");
    match decoded.as_str() {
        "." => 1,
        ".." => 2,
        _ => 0,
    }
}

const HOP_BY_HOP_LEN: usize = 8;
const HOP_BY_HOP: [HeaderName; HOP_BY_HOP_LEN] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
];

/// Removes hop-by-hop headers, including those named by `Connection` (but not the ones it may
/// not name: [`tailguard_http::hop`]). `TE: trailers` is kept:
/// gRPC needs it end to end. A message that came with `Transfer-Encoding` loses its
/// `Content-Length` too: the length did not frame it, and a proxy must not pass it on (RFC 9112
/// section 6.3; an endpoint sending both is a smuggling shape).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the few names present notes which of these are there; most messages
    // carry none, and those that do (a response's `Connection: keep-alive`) one or two, so
    // only those are looked up and removed (a lookup hashes the name).
    let mut present = [false; HOP_BY_HOP_LEN];
    let mut te = false;
    for k in headers.keys() {
        if *k == TE {
            te = true;
        } else if let Some(i) = HOP_BY_HOP.iter().position(|h| h == k) {
            present[i] = true;
        }
    }
    if !te && !present.contains(&true) {
        return;
    }
    let had = |name: &HeaderName| HOP_BY_HOP.iter().zip(present).any(|(h, p)| p && h == name);
    if had(&TRANSFER_ENCODING) {
        headers.remove(http::header::CONTENT_LENGTH);
    }
    // `Connection: keep-alive` alone (nginx's, on every response) names nothing to remove
    // beyond the hop-by-hop ones below: not split or parsed.
    let only_keep_alive = || {
        headers.get_all(CONNECTION).iter().all(|v| {
            v.as_bytes()
                .trim_ascii()
                .eq_ignore_ascii_case(b"keep-alive")
        })
    };
    if had(&CONNECTION) && !only_keep_alive() {
        // The names `Connection` lists; `keep-alive`, the usual one, is removed below if it
        // is there, so it is neither parsed nor looked up here.
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|name| !name.eq_ignore_ascii_case("keep-alive"))
            .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok())
            .filter(|name| tailguard_http::hop::may_be_named(name.as_str()))
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for (name, _) in HOP_BY_HOP.iter().zip(present).filter(|(_, p)| *p) {
        headers.remove(name);
    }
    if !te {
        return;
    }
    match headers.get(TE).map(HeaderValue::as_bytes) {
        None | Some(b"trailers") => {}
        // In the one spelling HTTP/2 allows (RFC 9113 section 8.2.2): `h2` refuses any other.
        Some(v) if v.eq_ignore_ascii_case(b"trailers") => {
            headers.insert(TE, HeaderValue::from_static("trailers"));
        }
        Some(_) => {
            headers.remove(TE);
        }
    }
}

/// Appends this hop to `Via`.
pub fn add_via(headers: &mut HeaderMap, version: Version) {
    // Made when compiling: `from_static` checks every byte each time it runs (twice a GET).
    const HTTP_2: HeaderValue = HeaderValue::from_static("2 tailguard");
    const HTTP_10: HeaderValue = HeaderValue::from_static("1.0 tailguard");
    const HTTP_11: HeaderValue = HeaderValue::from_static("1.1 tailguard");
    let hop = match version {
        Version::HTTP_2 => HTTP_2,
        Version::HTTP_10 => HTTP_10,
        _ => HTTP_11,
    };
    headers.append(VIA, hop);
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The client's address as a header value, made once per connection.
pub fn client_value(client: IpAddr) -> HeaderValue {
    HeaderValue::from_str(&client.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Appends `client` (from [`client_value`]) to `X-Forwarded-For`; a copy of it when the
/// request has none (no formatting per request).
pub fn append_forwarded_for(headers: &mut HeaderMap, client: &HeaderValue) {
    let prev = headers.get(&X_FORWARDED_FOR).map(HeaderValue::as_bytes);
    let value = match prev {
        None => client.clone(),
        Some(prev) => {
            let mut joined = Vec::with_capacity(prev.len() + 2 + client.len());
            joined.extend_from_slice(prev);
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(client.as_bytes());
            match HeaderValue::from_bytes(&joined) {
                Ok(v) => v,
                Err(_) => return,
            }
        }
    };
    headers.insert(X_FORWARDED_FOR, value);
}

#[cfg(test)]
mod tests {
    /// A header map of `pairs`, in order (a name twice: both values).
    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn strips_hop_by_hop_headers_and_those_connection_names() {
        let mut h = http::HeaderMap::new();
        h.insert("connection", "close, x-secret".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("accept", "*/*".parse().unwrap());
        super::strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
    }

    /// `Connection: keep-alive` alone skips reading the names, and only when every
    /// `Connection` line is that: a name listed on a second line, or beside it, still goes.
    #[test]
    fn keep_alive_alone_names_nothing_and_a_name_beside_it_still_goes() {
        let mut alone = headers(&[
            ("connection", " Keep-Alive\t"),
            ("keep-alive", "timeout=5"),
            ("x-kept", "1"),
        ]);
        super::strip_hop_by_hop(&mut alone);
        assert_eq!(
            alone.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["x-kept"]
        );
        for lines in [
            &[("connection", "keep-alive"), ("connection", "x-listed")][..],
            &[("connection", "keep-alive, x-listed")][..],
        ] {
            let mut h = headers(lines);
            h.insert("x-listed", "1".parse().unwrap());
            h.insert("x-kept", "1".parse().unwrap());
            super::strip_hop_by_hop(&mut h);
            assert_eq!(
                h.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
                ["x-kept"],
                "{lines:?}"
            );
        }
    }

    /// Every hop-by-hop header goes whatever else is there, a listed name in any case, and a
    /// `Transfer-Encoding` takes the `Content-Length` with it.
    #[test]
    fn every_hop_by_hop_header_goes_and_a_listed_name_in_any_case() {
        let mut h = headers(&[
            ("connection", "Keep-Alive, X-Listed, UPGRADE"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authenticate", "Basic"),
            ("proxy-authorization", "Basic x"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("content-length", "5"),
            ("upgrade", "websocket"),
            ("x-listed", "1"),
            ("te", "Trailers"),
            ("accept", "*/*"),
        ]);
        super::strip_hop_by_hop(&mut h);
        let mut left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "te"]);
        assert_eq!(h["te"], "trailers");
    }

    /// `Connection` cannot take away the host, the framing or a header the proxy reads or
    /// adds (it used to strip the client's `Host`).
    #[test]
    fn connection_tokens_naming_end_to_end_headers_are_ignored() {
        let mut h = headers(&[
            (
                "connection",
                "Host, Content-Length, TE, Via, X-Forwarded-For, grpc-timeout, \
                 x-tailguard-timeout-ms, content-type, x-other",
            ),
            ("host", "web"),
            ("content-length", "5"),
            ("te", "trailers"),
            ("via", "1.1 a"),
            ("x-forwarded-for", "10.0.0.1"),
            ("grpc-timeout", "1S"),
            ("x-tailguard-timeout-ms", "300"),
            ("content-type", "application/grpc"),
            ("x-other", "1"),
        ]);
        super::strip_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left.len(), 8, "{left:?}");
        assert!(!left.contains(&"x-other") && !left.contains(&"connection"));
        assert_eq!(h["host"], "web");
    }

    #[test]
    fn te_is_kept_only_as_trailers_in_http2s_spelling() {
        for (sent, kept) in [
            ("trailers", Some("trailers")),
            ("Trailers", Some("trailers")),
            ("gzip", None),
        ] {
            let mut h = http::HeaderMap::new();
            h.insert("te", sent.parse().unwrap());
            super::strip_hop_by_hop(&mut h);
            assert_eq!(h.get("te").map(|v| v.to_str().unwrap()), kept, "te: {sent}");
        }
    }

    #[test]
    fn a_message_framed_by_transfer_encoding_loses_its_content_length() {
        let mut h = http::HeaderMap::new();
        h.insert("transfer-encoding", "chunked".parse().unwrap());
        h.insert("content-length", "3".parse().unwrap());
        h.insert("accept", "*/*".parse().unwrap());
        super::strip_hop_by_hop(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["accept"]);
        let mut h = http::HeaderMap::new();
        h.insert("content-length", "3".parse().unwrap());
        super::strip_hop_by_hop(&mut h);
        assert_eq!(h.get("content-length").unwrap(), "3");
    }

    use super::*;

    const KEEP: EscapedSlashes = EscapedSlashes::KeepUnchanged;

    #[test]
    fn normalizes_the_documented_paths() {
        let reject = EscapedSlashes::Reject;
        assert_eq!(
            normalize_path("/api/../echo", reject).unwrap().as_deref(),
            Some("/echo")
        );
        assert_eq!(
            normalize_path("/api/%2E%2e/echo", reject)
                .unwrap()
                .as_deref(),
            Some("/echo")
        );
        assert_eq!(normalize_path("/api/x", reject).unwrap(), None);
        assert!(normalize_path("/../etc", reject).is_err());
    }

    #[test]
    fn encoded_slashes_are_refused_decoded_or_kept_as_configured() {
        let attacks = [
            "/api/..%2fsecret",
            "/api/%2e%2e%2fsecret",
            "/api/..%2Fsecret",
            "/api/..%5csecret",
            "/api/..\\secret",
        ];
        for path in attacks {
            assert_eq!(
                normalize_path(path, EscapedSlashes::Reject),
                Err(BadPath::EscapedSlash),
                "{path}"
            );
            // Decoded, the path is what a decoding backend would see: out of /api.
            let decoded = normalize_path(path, EscapedSlashes::UnescapeAndForward).unwrap();
            assert_eq!(decoded.as_deref(), Some("/secret"), "{path}");
            assert_eq!(normalize_path(path, KEEP).unwrap(), None, "{path}");
        }
        let unescape = EscapedSlashes::UnescapeAndForward;
        let plain = normalize_path("/a%2fb%20c%2", unescape).unwrap();
        assert_eq!(plain.as_deref(), Some("/a/b%20c%2"));
        assert_eq!(
            normalize_path("/%2f..%2f..%2fetc", unescape),
            Err(BadPath::AboveRoot)
        );
        assert_eq!(normalize_path("/a%20b%2", EscapedSlashes::Reject), Ok(None));
    }

    #[test]
    fn dot_segments_resolve_and_climbing_out_is_refused() {
        let cases = [
            ("/a/./b", Some("/a/b")),
            ("/a/b/..", Some("/a/")),
            ("/a/.", Some("/a/")),
            ("/a/%2e%2E/b", Some("/b")),
            ("/a/.%2e/b/", Some("/b/")),
            ("/a/..b/c", None),
            ("/a/.well-known/x", None),
            ("/a/%2F../b", None),
            ("/", None),
        ];
        for (path, want) in cases {
            assert_eq!(
                normalize_path(path, KEEP).unwrap().as_deref(),
                want,
                "{path}"
            );
        }
        assert_eq!(normalize_path("/a/../../b", KEEP), Err(BadPath::AboveRoot));
        assert_eq!(normalize_path("/%2e%2e", KEEP), Err(BadPath::AboveRoot));
    }

    fn request(version: Version, method: Method, uri: &str, hosts: &[&str]) -> Request<()> {
        let mut b = Request::builder().method(method).uri(uri).version(version);
        for h in hosts {
            b = b.header(http::header::HOST, *h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn requests_a_proxy_must_not_forward_are_refused() {
        let v11 = Version::HTTP_11;
        let status = |mut r: Request<()>| {
            admit(&mut r, EscapedSlashes::Reject)
                .err()
                .map(|e| e.0.as_u16())
        };
        assert_eq!(
            status(request(v11, Method::CONNECT, "web:443", &["web"])),
            Some(405)
        );
        assert_eq!(
            status(request(v11, Method::GET, "/", &["web", "evil"])),
            Some(400)
        );
        assert_eq!(status(request(v11, Method::GET, "/", &[])), Some(400));
        assert_eq!(
            status(request(Version::HTTP_10, Method::GET, "/", &[])),
            None
        );
        assert_eq!(
            status(request(v11, Method::GET, "/../x", &["web"])),
            Some(400)
        );
        let mut abs = request(v11, Method::GET, "http://web/a/../b?q=1", &["evil"]);
        admit(&mut abs, EscapedSlashes::Reject).unwrap();
        assert_eq!(abs.headers()[http::header::HOST], "web");
        assert_eq!(abs.uri().path_and_query().unwrap().as_str(), "/b?q=1");
    }
}
