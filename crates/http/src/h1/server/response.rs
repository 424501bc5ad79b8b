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
    let mut out = Vec::with_capacity(128 + parts.headers.len() * 32);
    let (framing, last) = match encode_head(&mut out, &mut parts, method, length, close) {
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
    let mut left = match framing {
        Framing::Length(0) => {
            writer.write_all(&out).await?;
            return Ok(kept);
        }
        Framing::Length(n) => n,
        Framing::Chunked | Framing::UntilClose => u64::MAX,
    };
    if length.is_none() {
        // An ended body in front of a framing that wants one: a HEAD's length sends nothing, a
        // `transfer-encoding` the response set itself its last chunk.
        if framing == Framing::Chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        writer.write_all(&out).await?;
        return Ok(kept);
    }
    loop {
        // Take what the body has ready without waiting, so a small response goes out with its
        // head in one write; wait only once the head is out.
        let frame = match poll_now(&mut body) {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                if !out.is_empty() {
                    writer.write_all(&out).await?;
                    out.clear();
                }
                body.frame().await
            }
        };
        let data = match frame {
            None => break,
            Some(Err(err)) => {
                // What is not yet written is dropped, as hyper's server drops its buffer.
                let err: BoxError = err.into();
                tracing::debug!(%err, "response body failed");
                return Ok(false);
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers: hyper's server sends them only to a request that asked with `TE`,
                // which the lean path hands to hyper.
                Err(_) => continue,
            },
        };
        if data.is_empty() {
            continue;
        }
        // More than the announced length: what fits is sent, the rest dropped (hyper's
        // length encoder does the same).
        let data = match framing {
            Framing::Length(_) if data.len() as u64 > left => data.slice(..left as usize),
            _ => data,
        };
        let n = data.len() as u64;
        if framing == Framing::Chunked {
            let _ = write!(out, "{n:X}\r\n");
        }
        if data.len() >= WRITE_ALONE {
            writer.write_all(&out).await?;
            out.clear();
            writer.write_all(&data).await?;
        } else {
            out.extend_from_slice(&data);
        }
        if framing == Framing::Chunked {
            out.extend_from_slice(b"\r\n");
        } else if matches!(framing, Framing::Length(_)) {
            left -= n;
            if left == 0 {
                // The announced length is out: the rest of the body is not waited for.
                writer.write_all(&out).await?;
                return Ok(kept);
            }
        }
    }
    match framing {
        Framing::Chunked => {
            out.extend_from_slice(b"0\r\n\r\n");
            writer.write_all(&out).await?;
            Ok(kept)
        }
        Framing::UntilClose => {
            writer.write_all(&out).await?;
            Ok(false)
        }
        // The body ended short of its length: hyper's server fails the connection.
        Framing::Length(_) => {
            writer.write_all(&out).await?;
            Ok(false)
        }
    }
}

/// What polling a body for a frame gives.
type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>>;

/// Polls `body` once, without a waker to be woken by.
fn poll_now<B: Body + Unpin>(body: &mut B) -> Polled<B> {
    Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop()))
}
