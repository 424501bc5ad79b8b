//! HTTP/2 at the byte level, for conformance tests that must send what no well-behaved
//! client would (a bad preface) or see what a client library hides (which frame carried
//! END_STREAM).
//!
//! # Example
//! ```
//! use tailguard_testsupport::h2wire::{self, GOAWAY, PROTOCOL_ERROR};
//! let goaway = h2wire::frame(GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, PROTOCOL_ERROR as u8]);
//! assert_eq!(h2wire::goaway_code(&goaway), Some(PROTOCOL_ERROR));
//! ```

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use tailguard_http::preface::PREFACE;

/// Frame type DATA.
pub const DATA: u8 = 0x0;
/// Frame type HEADERS.
pub const HEADERS: u8 = 0x1;
/// Frame type RST_STREAM.
pub const RST_STREAM: u8 = 0x3;
/// Frame type SETTINGS.
pub const SETTINGS: u8 = 0x4;
/// Frame type PING.
pub const PING: u8 = 0x6;
/// Frame type GOAWAY.
pub const GOAWAY: u8 = 0x7;
/// Flag END_STREAM (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// Flag END_HEADERS (HEADERS).
pub const END_HEADERS: u8 = 0x4;
/// Error code PROTOCOL_ERROR.
pub const PROTOCOL_ERROR: u32 = 0x1;

/// How long a server may take to close a connection it must close.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(5);

/// Openings a server must refuse by closing the connection: (what is wrong, the bytes).
pub fn bad_openings() -> Vec<(&'static str, Vec<u8>)> {
    let after_preface = |rest: &[u8]| [PREFACE, rest].concat();
    vec![
        (
            "garbage in the preface",
            b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n".to_vec(),
        ),
        (
            "PING in place of SETTINGS",
            after_preface(&frame(PING, 0, 0, b"12345678")),
        ),
        (
            "HEADERS in place of SETTINGS",
            after_preface(&frame(
                HEADERS,
                END_STREAM | END_HEADERS,
                1,
                &request_block("GET", "t", "/"),
            )),
        ),
        (
            "no frame after the preface",
            after_preface(b"hello, not a frame header"),
        ),
    ]
}

/// One frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a test frame is small");
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The preface and an empty SETTINGS frame: a client's correct opening.
pub fn client_opening() -> Vec<u8> {
    [PREFACE, &frame(SETTINGS, 0, 0, &[])].concat()
}

/// An HPACK block for `method` on `path` at `authority`, all literals without indexing.
pub fn request_block(method: &str, authority: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in [
        (":method", method),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
    ] {
        out.push(0);
        for s in [name, value] {
            out.push(u8::try_from(s.len()).expect("short test strings (under 127 bytes)"));
            out.extend_from_slice(s.as_bytes());
        }
    }
    out
}

/// A frame read back: (type, flags, stream, payload).
pub type Frame = (u8, u8, u32, Vec<u8>);

/// Reads one frame; `None` when the connection ends first.
///
/// # Panics
/// When no frame comes within [`crate::client::LIMIT`].
pub async fn read_frame(stream: &mut TcpStream) -> Option<Frame> {
    let mut head = [0u8; 9];
    crate::bounded(stream.read_exact(&mut head)).await.ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    crate::bounded(stream.read_exact(&mut payload)).await.ok()?;
    Some((head[3], head[4], id, payload))
}

/// The error code of the first GOAWAY among the frames in `bytes`.
pub fn goaway_code(mut bytes: &[u8]) -> Option<u32> {
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let payload = bytes.get(9..9 + len)?;
        if bytes[3] == GOAWAY {
            return Some(u32::from_be_bytes(payload.get(4..8)?.try_into().ok()?));
        }
        bytes = &bytes[9 + len..];
    }
    None
}

/// Writes `opening` on a new connection to `addr` and reads until the server closes it (FIN
/// or reset), returning what it sent. Panics when the connection is still open after
/// [`CLOSE_WITHIN`].
pub async fn closed_after(addr: SocketAddr, opening: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(opening).await.expect("write the opening");
    let mut got = Vec::new();
    let read = tokio::time::timeout(CLOSE_WITHIN, stream.read_to_end(&mut got)).await;
    assert!(
        read.is_ok(),
        "still open after {CLOSE_WITHIN:?}, having sent {got:?}"
    );
    got
}

/// A response read off the wire.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    /// The first byte of its header block: `0x88` is HPACK's indexed `:status: 200`, which
    /// hyper sends first.
    pub status_byte: u8,
    /// Whether the HEADERS frame ended the stream (no DATA frame followed).
    pub ended_with_headers: bool,
    /// The DATA frames' payloads.
    pub body: Vec<u8>,
}

/// Reads frames until stream `id` ends, acknowledging the server's SETTINGS on the way.
/// Panics on a reset of the stream, GOAWAY, or the end of the connection.
pub async fn read_response(stream: &mut TcpStream, id: u32) -> Response {
    let mut resp: Option<Response> = None;
    loop {
        let (kind, flags, on, payload) = read_frame(stream).await.expect("connection open");
        match (kind, on) {
            (SETTINGS, 0) if flags & 0x1 == 0 => {
                let ack = frame(SETTINGS, 0x1, 0, &[]);
                stream.write_all(&ack).await.expect("write SETTINGS ack");
            }
            (HEADERS, _) if on == id && resp.is_none() => {
                resp = Some(Response {
                    status_byte: payload[0],
                    ended_with_headers: flags & END_STREAM != 0,
                    body: Vec::new(),
                });
            }
            (DATA, _) if on == id => {
                let r = resp.as_mut().expect("DATA after HEADERS");
                r.body.extend_from_slice(&payload);
            }
            (RST_STREAM, _) if on == id => panic!("stream {id} reset: {payload:?}"),
            (GOAWAY, 0) => panic!("GOAWAY: {payload:?}"),
            _ => {}
        }
        if on == id && flags & END_STREAM != 0 && matches!(kind, HEADERS | DATA) {
            return resp.expect("HEADERS first");
        }
    }
}
