//! The HTTP/2 client connection preface (RFC 9113 section 3.4), checked before hyper serves a
//! connection.
//!
//! The preface is a fixed 24-byte string followed by a SETTINGS frame; anything else is a
//! connection error. hyper (through the h2 crate) checks the string but not the frame: a client
//! that sends PING or HEADERS in place of SETTINGS is served as if it had sent it. So [`check`]
//! reads the first bytes itself, before hyper:
//!
//! 1. Read until the bytes part from the preface (HTTP/1.1, or garbage that hyper answers with
//!    400), or the preface and the next frame's 9-byte header are in, or the peer closes.
//! 2. The preface followed by anything but a SETTINGS frame: answer with SETTINGS and GOAWAY
//!    (PROTOCOL_ERROR), close, and return an error.
//! 3. Not the preface, and [`NotHttp::Close`] asked for (`serve` and the proxy): read on to the end of the
//!    first line (at most [`MAX_LINE`] bytes). A line that is not an HTTP/1.x request line
//!    (`httparse` says so) is not HTTP at all: the connection is closed unanswered and an
//!    error returned. An HTTP/2 server must close on an
//!    invalid preface (RFC 9113 section 3.4, h2spec 3.5/2), and a port that speaks both
//!    protocols cannot tell a broken HTTP/1.1 request line from a broken preface. A request
//!    line that parses goes to hyper, which answers malformed headers with 400 as before. With
//!    [`NotHttp::Answer`] (what nginx and HAProxy do) hyper answers any garbage with 400.
//! 4. Otherwise return the connection with those bytes put back in front ([`Rewind`]).
//!
//! An HTTP/2 opening reads at most 33 bytes. A client that stops mid-line waits here as it
//! would in hyper: bounding that is the listener's header read timeout.
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use tailguard_http::preface;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let (client, server) = tokio::io::duplex(1024);
//! let (mut read, mut write) = tokio::io::split(client);
//! // The preface, then a PING frame where SETTINGS belongs.
//! write.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\x08\x06\0\0\0\0\0").await.unwrap();
//! write.shutdown().await.unwrap();
//! assert!(preface::check(server, preface::NotHttp::Answer).await.is_err());
//! let mut answer = Vec::new();
//! read.read_to_end(&mut answer).await.unwrap();
//! assert_eq!(answer[9 + 3], 0x7, "GOAWAY after our SETTINGS");
//! # }
//! ```

use crate::rewind::Rewind;
use bytes::BytesMut;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The fixed start of every HTTP/2 connection.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The size of a frame header: length (3), type, flags, stream (4).
pub const FRAME_HEADER: usize = 9;
/// The preface and the first frame's header: all [`read_opening`] reads.
const OPENING: usize = PREFACE.len() + FRAME_HEADER;
const SETTINGS: u8 = 0x4;
const ACK: u8 = 0x1;
/// The default SETTINGS_MAX_FRAME_SIZE (RFC 9113 section 6.5.2): a longer first frame is a
/// FRAME_SIZE_ERROR, and is refused before anything is allocated for it.
pub const MAX_FRAME: usize = 16_384;
/// The answer to a bad preface: an empty SETTINGS frame (the server preface), then GOAWAY for
/// last stream 0 with PROTOCOL_ERROR (0x1).
const REFUSAL: &[u8] = b"\0\0\0\x04\0\0\0\0\0\0\0\x08\x07\0\0\0\0\0\0\0\0\0\0\0\0\x01";
/// How long a refused client's bytes are read and dropped after GOAWAY: closing with unread
/// bytes makes the kernel send RST, which may destroy the GOAWAY before the client reads it.
const LINGER: Duration = Duration::from_secs(1);
/// The most a refused client's bytes are read for.
const LINGER_BYTES: u64 = 64 * 1024;

/// The longest first line read to check it is an HTTP/1.x request line; a longer one goes to
/// hyper unchecked (which refuses heads past its own limit).
pub const MAX_LINE: usize = 8 * 1024;

/// What to do with a connection whose first line is neither HTTP/1.x nor the HTTP/2 preface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotHttp {
    /// Close it unanswered, as an HTTP/2 server must (h2spec 3.5/2).
    Close,
    /// Let hyper answer it with HTTP/1.1's 400, as an HTTP/1.1 server would.
    Answer,
}

/// How a connection opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// Not with the HTTP/2 preface (HTTP/1.1, garbage, or the peer closed first).
    Other,
    /// The preface, then a SETTINGS frame with a payload this long.
    Settings(usize),
    /// The preface, then a frame other than SETTINGS (or an oversized one): a connection error.
    Bad,
}

/// Reads from `io` into `buf` until the opening is known: at most the preface and a frame
/// header (33 bytes) in `buf`.
///
/// # Errors
/// The I/O error of a read.
pub async fn read_opening<I>(io: &mut I, buf: &mut BytesMut) -> io::Result<Opening>
where
    I: AsyncRead + Unpin,
{
    opening(io, buf, Reads::Exact).await
}

/// How [`opening`] reads: no further than the opening (a caller that must know where the
/// first frame starts, [`crate::h2c`]), or whatever the peer has sent, up to [`FIRST_READ`]
/// bytes a read (a caller that hands all of it to a server, [`open`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    Exact,
    Greedy,
}

/// The most [`open`] reads at once: a whole request head as browsers and load generators send
/// it, so that HTTP/1.1's server finds the first request whole in what it is handed back.
/// (Handed only its first 33 bytes, hyper reads again and doubles its 8 KiB read buffer for the
/// connection's life.)
const FIRST_READ: usize = 4 * 1024;

async fn opening<I>(io: &mut I, buf: &mut BytesMut, reads: Reads) -> io::Result<Opening>
where
    I: AsyncRead + Unpin,
{
    loop {
        let seen = buf.len().min(PREFACE.len());
        if buf[..seen] != PREFACE[..seen] {
            return Ok(Opening::Other);
        }
        if buf.len() >= OPENING {
            return Ok(first_frame(&buf[PREFACE.len()..OPENING]));
        }
        let n = match reads {
            Reads::Exact => {
                let mut chunk = [0u8; OPENING];
                let n = io.read(&mut chunk[..OPENING - buf.len()]).await?;
                buf.extend_from_slice(&chunk[..n]);
                n
            }
            Reads::Greedy => {
                buf.reserve(FIRST_READ);
                let mut limited = (&mut *io).take(FIRST_READ as u64);
                limited.read_buf(buf).await?
            }
        };
        if n == 0 {
            return Ok(Opening::Other);
        }
    }
}

/// What the frame header after the preface allows.
fn first_frame(header: &[u8]) -> Opening {
    let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    if header[3] == SETTINGS && header[4] & ACK == 0 && len <= MAX_FRAME {
        Opening::Settings(len)
    } else {
        Opening::Bad
    }
}

/// Ends a connection whose preface is bad as a connection error (RFC 9113 section 5.4.1):
/// SETTINGS, GOAWAY with PROTOCOL_ERROR, close; then reads what the client still sends, for
/// a bounded time, so that the close is a FIN the client sees after GOAWAY.
///
/// # Errors
/// The I/O error of the write or the close.
pub async fn refuse<I>(io: &mut I) -> io::Result<()>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    io.write_all(REFUSAL).await?;
    io.shutdown().await?;
    let mut rest = io.take(LINGER_BYTES);
    let _ = tokio::time::timeout(LINGER, tokio::io::copy(&mut rest, &mut tokio::io::sink())).await;
    Ok(())
}

/// Checks how a connection opens ([module docs](self)): the connection to serve, with the
/// bytes read put back in front, or an error after a bad preface was refused.
///
/// # Errors
/// `InvalidData` when the preface was bad (the client got GOAWAY), or an I/O error.
pub async fn check<I>(io: I, not_http: NotHttp) -> io::Result<Rewind<I>>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    open(io, not_http).await.map(|(_, io)| io)
}

/// The protocol a checked connection opened with ([`open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.x: a request line, or bytes for HTTP/1.1's server to judge (garbage under
    /// [`NotHttp::Answer`], a first line cut short or past [`MAX_LINE`], or nothing at all).
    Http1,
    /// The HTTP/2 preface and a SETTINGS frame.
    Http2,
}

/// [`check`], also telling which protocol the connection opened with, so that its server can
/// be HTTP/1.1's or HTTP/2's alone instead of one that reads the opening again to decide.
///
/// # Errors
/// As [`check`].
pub async fn open<I>(mut io: I, not_http: NotHttp) -> io::Result<(Protocol, Rewind<I>)>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = BytesMut::new();
    match opening(&mut io, &mut buf, Reads::Greedy).await? {
        Opening::Bad => {
            refuse(&mut io).await?;
            Err(bad_preface())
        }
        Opening::Settings(_) => Ok((Protocol::Http2, Rewind::new(buf.freeze(), io))),
        Opening::Other if not_http == NotHttp::Answer => {
            Ok((Protocol::Http1, Rewind::new(buf.freeze(), io)))
        }
        Opening::Other => {
            if !request_line(&mut io, &mut buf).await? {
                io.shutdown().await?;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the first line is neither an HTTP/1.x request nor the HTTP/2 preface",
                ));
            }
            Ok((Protocol::Http1, Rewind::new(buf.freeze(), io)))
        }
    }
}

/// Reads on until `buf` holds its first line (empty lines before it skipped, as HTTP/1.1
/// allows), the peer closes or [`MAX_LINE`] bytes are in; false when a whole first line is
/// there and it is not an HTTP/1.x request line.
async fn request_line<I>(io: &mut I, buf: &mut BytesMut) -> io::Result<bool>
where
    I: AsyncRead + Unpin,
{
    loop {
        let start = buf.iter().position(|b| *b != b'\r' && *b != b'\n');
        if let Some(start) = start {
            if let Some(end) = buf[start..].iter().position(|b| *b == b'\n') {
                let line = &buf[start..start + end + 1];
                let head = [line, b"\r\n"].concat();
                let mut headers = [httparse::EMPTY_HEADER; 0];
                return Ok(match httparse::Request::new(&mut headers).parse(&head) {
                    Ok(_) => true,
                    // `HTTP/1.2`, served as HTTP/1.1 (RFC 9110 section 2.5), as nginx and
                    // HAProxy do.
                    Err(httparse::Error::Version) => crate::h1::later_minor_as_11(buf),
                    Err(_) => false,
                });
            }
        }
        if buf.len() >= MAX_LINE {
            return Ok(true);
        }
        let mut chunk = [0u8; 1024];
        let want = (MAX_LINE - buf.len()).min(chunk.len());
        let n = io.read(&mut chunk[..want]).await?;
        if n == 0 {
            return Ok(true);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The error of a refused preface.
pub(crate) fn bad_preface() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "HTTP/2 preface not followed by a SETTINGS frame",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn opening(bytes: &[u8]) -> (Opening, usize) {
        let mut buf = BytesMut::new();
        let got = read_opening(&mut &bytes[..], &mut buf).await.unwrap();
        (got, buf.len())
    }

    #[tokio::test]
    async fn tells_openings_apart_reading_no_more_than_needed() {
        let settings = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\x06\x04\0\0\0\0\0\0\x03\0\0\0\x64";
        assert_eq!(opening(settings).await, (Opening::Settings(6), OPENING));
        let ping = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\x08\x06\0\0\0\0\0abcdefgh";
        assert_eq!(opening(ping).await, (Opening::Bad, OPENING));
        let ack = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\x01\0\0\0\0";
        assert_eq!(opening(ack).await.0, Opening::Bad);
        let huge = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x01\0\0\x04\0\0\0\0\0";
        assert_eq!(opening(huge).await.0, Opening::Bad);
        let h1 = b"GET / HTTP/1.1\r\nhost: t\r\n\r\n";
        assert_eq!(opening(h1).await.0, Opening::Other);
        let xx = b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n";
        assert_eq!(opening(xx).await.0, Opening::Other);
        assert_eq!(opening(b"PRI * HT").await, (Opening::Other, 8));
    }

    #[tokio::test]
    async fn open_hands_back_the_whole_first_request_in_one_read() {
        let request = format!(
            "GET /a HTTP/1.1\r\nhost: t\r\nx-long: {}\r\n\r\n",
            "v".repeat(300)
        );
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        client.write_all(request.as_bytes()).await.unwrap();
        let (protocol, mut io) = open(server, NotHttp::Close).await.unwrap();
        assert_eq!(protocol, Protocol::Http1);
        // hyper's first read must find the request whole, not the opening's first 33 bytes.
        let mut first = vec![0u8; 8 * 1024];
        let n = io.read(&mut first).await.unwrap();
        assert_eq!(&first[..n], request.as_bytes());

        let settings = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        client.write_all(settings).await.unwrap();
        let (protocol, mut io) = open(server, NotHttp::Close).await.unwrap();
        assert_eq!(protocol, Protocol::Http2);
        let n = io.read(&mut first).await.unwrap();
        assert_eq!(&first[..n], settings);
    }

    /// What [`check`] does with a connection that opens with `bytes` and then closes: served
    /// (true) or closed unanswered.
    async fn served(bytes: &[u8]) -> bool {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        client.write_all(bytes).await.unwrap();
        client.shutdown().await.unwrap();
        check(server, NotHttp::Close).await.is_ok()
    }

    #[tokio::test]
    async fn a_first_line_that_is_not_http_is_closed_unanswered() {
        assert!(served(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n").await);
        assert!(served(b"\r\nPOST /a?b HTTP/1.0\r\n\r\n").await);
        assert!(served(b"GET / HTTP/1.2\r\n\r\n").await, "read as HTTP/1.1");
        assert!(
            served(b"GET / HTTP/1.1\r\nbad header\r\n\r\n").await,
            "hyper's 400"
        );
        assert!(served(b"GET / HT").await, "cut short: hyper's to judge");
        assert!(
            !served(b"INVALID CONNECTION PREFACE\r\n\r\n").await,
            "h2spec 3.5/2"
        );
        assert!(!served(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n").await);
        assert!(!served(b"GET / HTTP/2.0\r\n\r\n").await);
        assert!(
            !served(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n").await,
            "TLS on h2c"
        );
        let long = [b"GET /".as_slice(), &[b'a'; MAX_LINE], b" HTTP/1.1\r\n\r\n"].concat();
        assert!(served(&long).await, "past MAX_LINE: hyper's to judge");
        let (mut client, server) = tokio::io::duplex(1024);
        client.write_all(b"INVALID\r\n\r\n").await.unwrap();
        assert!(
            check(server, NotHttp::Answer).await.is_ok(),
            "hyper answers 400"
        );
    }

    #[test]
    fn the_refusal_is_settings_then_goaway_protocol_error() {
        let (settings, goaway) = REFUSAL.split_at(FRAME_HEADER);
        assert_eq!(first_frame(settings), Opening::Settings(0));
        assert_eq!(goaway.len(), FRAME_HEADER + 8);
        assert_eq!((goaway[2], goaway[3]), (8, 0x7));
        assert_eq!(&goaway[FRAME_HEADER..], &[0, 0, 0, 0, 0, 0, 0, 1]);
    }
}
