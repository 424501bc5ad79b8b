//! HTTP/2 over cleartext by upgrade (`Upgrade: h2c`, RFC 7540 section 3.2).
//!
//! hyper serves prior-knowledge h2c but not the upgrade, because the request that asked for it
//! must be answered as stream 1 of the new HTTP/2 connection, which hyper's server cannot
//! adopt. So, after writing `101 Switching Protocols`, this module reads the client's preface
//! and first SETTINGS frame, then hands hyper's HTTP/2 server those bytes followed by a
//! synthetic HEADERS frame for stream 1 that carries the original request (encoded with HPACK
//! literals that leave the decoder's table untouched, so the client's own encoder stays in
//! step), then the rest of the client's bytes. hyper sees an ordinary client opening stream 1
//! and answers it there, as the upgrade requires.
//!
//! Requests with a body, or whose headers would not fit one frame, are answered over HTTP/1.1
//! instead (the RFC lets a server ignore the upgrade).

use crate::io::ConnCtl;
use crate::service::{BackendService, RespBody};
use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderValue, Request, Response, Version};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::time::Instant;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The default SETTINGS_MAX_FRAME_SIZE: the synthetic HEADERS frame must fit it.
const MAX_FRAME: usize = 16_384;
/// Headers that belong to the HTTP/1.1 hop and must not be carried into HTTP/2.
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
        && req.headers().contains_key("http2-settings")
        && req
            .headers()
            .get(UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case("h2c")))
}

/// Answers `101` and continues the connection as HTTP/2, or answers over HTTP/1.1 when the
/// request cannot be carried over.
pub async fn upgrade(svc: BackendService, mut req: Request<Incoming>) -> Response<RespBody> {
    let has_body = req.headers().contains_key(TRANSFER_ENCODING)
        || req.headers().get(CONTENT_LENGTH).is_some_and(|v| v != "0");
    let block = Some(header_block(&req)).filter(|b| b.len() <= MAX_FRAME);
    let (false, Some(block)) = (has_body, block) else {
        return svc.handle(req, Instant::now()).await;
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let h2_svc = svc.clone();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                if let Err(err) = serve_h2(h2_svc, TokioIo::new(upgraded), block).await {
                    tracing::debug!(%err, "h2c upgrade failed");
                }
            }
            Err(err) => tracing::debug!(%err, "h2c upgrade never completed"),
        }
    });
    let mut resp = Response::new(Either::Left(Full::new(Bytes::new())));
    *resp.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    resp.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    resp.headers_mut()
        .insert(UPGRADE, HeaderValue::from_static("h2c"));
    resp
}

async fn serve_h2<I>(svc: BackendService, mut io: I, block: Bytes) -> io::Result<()>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut prefix = vec![0u8; PREFACE.len() + 9];
    io.read_exact(&mut prefix).await?;
    let frame = &prefix[PREFACE.len()..];
    if &prefix[..PREFACE.len()] != PREFACE || frame[3] != 0x4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no HTTP/2 preface and SETTINGS after 101",
        ));
    }
    let len = usize::from(frame[0]) << 16 | usize::from(frame[1]) << 8 | usize::from(frame[2]);
    let start = prefix.len();
    prefix.resize(start + len, 0);
    io.read_exact(&mut prefix[start..]).await?;
    prefix.extend_from_slice(&headers_frame(&block));
    let io = Prefixed {
        prefix: Bytes::from(prefix),
        inner: io,
    };
    let ctl: Arc<ConnCtl> = svc.ctl.clone();
    let backend = svc.backend.clone();
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), svc);
    tokio::select! {
        res = conn => res.map_err(io::Error::other),
        () = ctl.killed() => Ok(()),
        () = backend.gate.down() => Ok(()),
    }
}

/// The request as an HPACK block of "literal without indexing, new name" fields.
fn header_block<B>(req: &Request<B>) -> Bytes {
    let mut out = BytesMut::new();
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    literal(&mut out, b":method", req.method().as_str().as_bytes());
    literal(&mut out, b":scheme", b"http");
    literal(&mut out, b":path", path.as_bytes());
    if let Some(host) = req.headers().get(http::header::HOST) {
        literal(&mut out, b":authority", host.as_bytes());
    }
    for (name, value) in req.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
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

/// Reads `prefix` first, then `inner`; writes go straight to `inner`.
struct Prefixed<I> {
    prefix: Bytes,
    inner: I,
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let n = this.prefix.len().min(buf.remaining());
        buf.put_slice(&this.prefix.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Prefixed<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
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
    fn block_drops_hop_by_hop_headers() {
        let req = Request::get("/x?y=1")
            .header("host", "h")
            .header("upgrade", "h2c")
            .header("accept", "*/*")
            .body(())
            .unwrap();
        let block = header_block(&req);
        let text = String::from_utf8_lossy(&block);
        assert!(text.contains("/x?y=1") && text.contains(":authority") && text.contains("accept"));
        assert!(!text.contains("upgrade"));
    }
}
