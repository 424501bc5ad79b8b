//! HTTP/2 over cleartext by upgrade (`Upgrade: h2c`, RFC 7540 section 3.2), for `tailguard
//! serve` and the proxy's listener.
//!
//! hyper serves prior-knowledge h2c but not the upgrade, because the request that asked for it
//! must be answered as stream 1 of the new HTTP/2 connection, which hyper's server cannot
//! adopt. So:
//!
//! 1. [`accept`] answers the request with `101 Switching Protocols` (which hyper writes before
//!    giving up the connection) and encodes the request as an HPACK block, with literals that
//!    leave the decoder's table untouched, so the client's own encoder stays in step.
//! 2. [`Upgrade::io`] takes the connection over from hyper, reads the client's preface and
//!    first SETTINGS frame ([`crate::preface`]; anything else is refused with GOAWAY), and
//!    returns the connection for hyper's HTTP/2 server: those bytes, then a synthetic HEADERS
//!    frame for stream 1 carrying the request, then the rest of the client's bytes. hyper sees
//!    an ordinary client opening stream 1 and answers it there, as the upgrade requires.
//!
//! RFC 9113 deprecates this upgrade (prior knowledge is the way), but `curl --http2` and older
//! clients still ask for it. A request with a body, or whose headers would not fit one frame,
//! is declined ([`accept`] returns `None`) and answered over HTTP/1.1, which the RFC allows:
//! buffering a body to replay it on stream 1 would add a limit and a wait to a path clients
//! are leaving. The `HTTP2-Settings` header is not decoded: the client's SETTINGS frame,
//! which must follow its preface, carries the same settings and comes before stream 1.

use crate::preface::{self, Opening, MAX_FRAME};
use crate::rewind::Rewind;
use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderValue, Request, Response, StatusCode, Version};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use std::io;
use tokio::io::AsyncReadExt;

/// Headers that belong to the HTTP/1.1 hop and must not be carried into HTTP/2 (RFC 9113
/// section 8.2.2), besides any the `Connection` header names.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "upgrade",
    "http2-settings",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "host",
    "te",
];

/// True for an HTTP/1.1 request asking to switch to h2c.
pub fn is_upgrade<B>(req: &Request<B>) -> bool {
    req.version() == Version::HTTP_11
        && req
            .headers()
            .get(UPGRADE)
            .is_some_and(|v| has_token(v, "h2c"))
        && req.headers().contains_key("http2-settings")
}

/// True when the comma-separated `value` lists `token` (case-insensitive).
fn has_token(value: &HeaderValue, token: &str) -> bool {
    value.to_str().is_ok_and(|v| {
        v.split(',')
            .any(|part| part.trim().eq_ignore_ascii_case(token))
    })
}

/// A switch to HTTP/2 that was answered with `101`: the connection is taken over with
/// [`Upgrade::io`] once hyper has written the answer.
#[derive(Debug)]
pub struct Upgrade {
    on_upgrade: OnUpgrade,
    block: Bytes,
}

/// The `101 Switching Protocols` answer to `req` and the switch it starts, or `None` when
/// `req` asks for no h2c upgrade or cannot be carried over (a body, or headers larger than a
/// frame): serve it over HTTP/1.1 then. The caller's server must serve HTTP/1.1 with
/// upgrades on (hyper's `with_upgrades`).
pub fn accept<B>(req: &mut Request<B>) -> Option<(Response<()>, Upgrade)> {
    // The upgrade test first: the proxy asks this of every request.
    if !is_upgrade(req) {
        return None;
    }
    let has_body = req.headers().contains_key(TRANSFER_ENCODING)
        || req.headers().get(CONTENT_LENGTH).is_some_and(|v| v != "0");
    if has_body {
        return None;
    }
    let block = Some(header_block(req)).filter(|b| b.len() <= MAX_FRAME)?;
    let on_upgrade = hyper::upgrade::on(&mut *req);
    let mut resp = Response::new(());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = resp.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static("h2c"));
    Some((resp, Upgrade { on_upgrade, block }))
}

impl Upgrade {
    /// Waits for hyper to give up the connection (after writing the `101`), reads the client's
    /// preface and SETTINGS, and returns the connection to serve with hyper's HTTP/2 server.
    ///
    /// # Errors
    /// hyper never gave the connection up (it closed first); a read or write failed; or the
    /// client did not open HTTP/2 with a SETTINGS frame (it got GOAWAY).
    pub async fn io(self) -> io::Result<Rewind<TokioIo<Upgraded>>> {
        let mut io = TokioIo::new(self.on_upgrade.await.map_err(io::Error::other)?);
        let mut prefix = BytesMut::with_capacity(256);
        let Opening::Settings(len) = preface::read_opening(&mut io, &mut prefix).await? else {
            preface::refuse(&mut io).await?;
            return Err(preface::bad_preface());
        };
        let start = prefix.len();
        prefix.resize(start + len, 0);
        io.read_exact(&mut prefix[start..]).await?;
        prefix.extend_from_slice(&headers_frame(&self.block));
        Ok(Rewind::new(prefix.freeze(), io))
    }
}

/// The request as an HPACK block of "literal without indexing, new name" fields.
fn header_block<B>(req: &Request<B>) -> Bytes {
    let mut out = BytesMut::new();
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    literal(&mut out, b":method", req.method().as_str().as_bytes());
    literal(&mut out, b":scheme", b"http");
    literal(&mut out, b":path", path.as_bytes());
    if let Some(host) = req.headers().get(HOST) {
        literal(&mut out, b":authority", host.as_bytes());
    }
    let nominated = |name: &str| {
        crate::hop::may_be_named(name)
            && req
                .headers()
                .get_all(CONNECTION)
                .iter()
                .any(|v| has_token(v, name))
    };
    for (name, value) in req.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) && !nominated(name.as_str()) {
            literal(&mut out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    out.freeze()
}

fn literal(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_u8(0x00);
    for s in [name, value] {
        integer(out, s.len(), 7, 0x00);
        out.put_slice(s);
    }
}

/// HPACK integer (RFC 7541 section 5.1) with an `n`-bit prefix under `flags`.
fn integer(out: &mut BytesMut, mut v: usize, n: u32, flags: u8) {
    let max = (1usize << n) - 1;
    if v < max {
        out.put_u8(flags | v as u8);
        return;
    }
    out.put_u8(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.put_u8((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.put_u8(v as u8);
}

/// A HEADERS frame on stream 1 with END_STREAM and END_HEADERS.
fn headers_frame(block: &[u8]) -> Vec<u8> {
    let len = block.len();
    let mut frame = vec![
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        0x1,
        0x5,
        0,
        0,
        0,
        1,
    ];
    frame.extend_from_slice(block);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc7541() {
        // RFC 7541 C.1.1 and C.1.2: 10 and 1337 with a 5-bit prefix.
        let mut out = BytesMut::new();
        integer(&mut out, 10, 5, 0);
        integer(&mut out, 1337, 5, 0);
        assert_eq!(&out[..], [0x0a, 0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn block_drops_hop_by_hop_and_nominated_headers() {
        let req = Request::get("/x?y=1")
            .header("host", "h")
            .header(
                "connection",
                "Upgrade, HTTP2-Settings, X-Hop, x-tailguard-timeout-ms",
            )
            .header("upgrade", "h2c")
            .header("x-hop", "1")
            .header("x-tailguard-timeout-ms", "300")
            .header("accept", "*/*")
            .body(())
            .unwrap();
        let block = header_block(&req);
        let text = String::from_utf8_lossy(&block);
        assert!(text.contains("/x?y=1") && text.contains(":authority") && text.contains("accept"));
        assert!(
            !text.contains("upgrade") && !text.contains("x-hop"),
            "{text}"
        );
        assert!(
            text.contains("x-tailguard-timeout-ms"),
            "not nominable: {text}"
        );
    }

    #[test]
    fn only_a_bodiless_http11_request_with_settings_is_accepted() {
        let upgrade = || {
            Request::get("/")
                .header("connection", "Upgrade, HTTP2-Settings")
                .header("upgrade", "websocket, H2C")
                .header("http2-settings", "")
        };
        assert!(accept(&mut upgrade().body(()).unwrap()).is_some());
        let with_body = upgrade().header("content-length", "3").body(());
        assert!(accept(&mut with_body.unwrap()).is_none());
        let without_settings = Request::get("/").header("upgrade", "h2c").body(());
        assert!(accept(&mut without_settings.unwrap()).is_none());
        let h10 = upgrade().version(Version::HTTP_10).body(());
        assert!(accept(&mut h10.unwrap()).is_none());
    }
}
