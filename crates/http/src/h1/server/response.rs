//! Responses written as hyper's server writes them ([`write`]).

use super::encode::{encode_head, Framing, Unwritable};
use bytes::Bytes;
use http::{Method, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use std::io::{self, Write as _};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

/// An error a response body may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body chunk this large is written on its own rather than copied behind the head.
const WRITE_ALONE: usize = 16 * 1024;

/// Writes `response` to a request made with `method`; `close` when the connection must end
/// after it. True when the connection may carry another request.
pub(super) async fn write<B>(
    writer: &mut OwnedWriteHalf,
    method: &Method,
    response: Response<B>,
    close: bool,
) -> io::Result<bool>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let (mut parts, mut body) = response.into_parts();
    let length = if body.is_end_stream() {
        None
    } else {
        Some(body.size_hint().exact())
    };
    // The head's buffer and, once it is written into that, the header map are the thread's
    // to lend again (`spare`).
    let mut out = crate::spare::head(128 + parts.headers.len() * 32);
    let encoded = encode_head(&mut out, &mut parts, method, length, close);
    crate::spare::give_map(std::mem::take(&mut parts.headers));
    let (framing, last) = match encoded {
        Ok(head) => head,
        Err(Unwritable) => {
            // hyper's server sends nothing of a head it cannot encode (conflicting lengths),
            // only the 500 it answers for a 1xx.
            if parts.status.is_informational() {
                writer.write_all(&out).await?;
            }
            return Ok(false);
        }
    };
    let kept = !last && framing != Framing::UntilClose;
    if length.is_none() || framing == Framing::Length(0) {
        // No body to send: an ended one (a HEAD's length sends nothing; a `transfer-encoding`
        // the response set itself gets its last chunk), or a length of zero.
        if length.is_none() && framing == Framing::Chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        writer.write_all(&out).await?;
        crate::spare::give_head(out);
        return Ok(kept);
    }
    match copy_body(&mut body, writer, &mut out, framing).await? {
        // What is not yet written is dropped, as hyper's server drops its buffer.
        Copied::Failed => Ok(false),
        // The announced length is out: the rest of the body is not waited for.
        Copied::Full => {
            writer.write_all(&out).await?;
            crate::spare::give_head(out);
            Ok(kept)
        }
        // The body ended: a chunked one gets its last chunk; one short of its length fails the
        // connection, as hyper's server does; one framed by the close ends it.
        Copied::Ended => {
            if framing == Framing::Chunked {
                out.extend_from_slice(b"0\r\n\r\n");
            }
            writer.write_all(&out).await?;
            crate::spare::give_head(out);
            Ok(kept && framing == Framing::Chunked)
        }
    }
}

/// How copying a body ended.
enum Copied {
    /// The body failed.
    Failed,
    /// The announced length is in `out` or written.
    Full,
    /// The body ended.
    Ended,
}

/// Copies `body` behind the head in `out` in `framing`, writing `out` whenever the body makes
/// it wait; what is left in `out` is the caller's to write.
async fn copy_body<B>(
    body: &mut B,
    writer: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    framing: Framing,
) -> io::Result<Copied>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut left = match framing {
        Framing::Length(n) => n,
        Framing::Chunked | Framing::UntilClose => u64::MAX,
    };
    loop {
        let data = match next_data(body, writer, out).await? {
            Ok(data) => data,
            Err(end) => return Ok(end),
        };
        // More than the announced length: what fits is sent, the rest dropped (hyper's
        // length encoder does the same).
        let data = match framing {
            Framing::Length(_) if data.len() as u64 > left => data.slice(..left as usize),
            _ => data,
        };
        let n = data.len() as u64;
        put(writer, out, framing, &data).await?;
        if matches!(framing, Framing::Length(_)) {
            left -= n;
            if left == 0 {
                return Ok(Copied::Full);
            }
        }
    }
}

/// The body's next data that is not empty (trailers are skipped: hyper's server sends them only
/// to a request that asked with `TE`, which the lean path hands to hyper), or how it ended.
/// What the body has ready is taken without waiting, so a small response goes out with its
/// head in one write; `out` is written before waiting.
async fn next_data<B>(
    body: &mut B,
    writer: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
) -> io::Result<Result<Bytes, Copied>>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    loop {
        let frame = match poll_now(body) {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                if !out.is_empty() {
                    writer.write_all(out).await?;
                    out.clear();
                }
                body.frame().await
            }
        };
        match frame {
            None => return Ok(Err(Copied::Ended)),
            Some(Err(err)) => {
                let err: BoxError = err.into();
                tracing::debug!(%err, "response body failed");
                return Ok(Err(Copied::Failed));
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() {
                        return Ok(Ok(data));
                    }
                }
            }
        }
    }
}

/// Puts `data` in `framing` behind `out`; a large piece is written on its own, after `out`.
async fn put(
    writer: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    framing: Framing,
    data: &Bytes,
) -> io::Result<()> {
    if framing == Framing::Chunked {
        let _ = write!(out, "{:X}\r\n", data.len());
    }
    if data.len() >= WRITE_ALONE {
        writer.write_all(out).await?;
        out.clear();
        writer.write_all(data).await?;
    } else {
        out.extend_from_slice(data);
    }
    if framing == Framing::Chunked {
        out.extend_from_slice(b"\r\n");
    }
    Ok(())
}

/// What polling a body for a frame gives.
type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>>;

/// Polls `body` once, without a waker to be woken by.
fn poll_now<B: Body + Unpin>(body: &mut B) -> Polled<B> {
    Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop()))
}
