//! Responses written as hyper's server writes them ([`write`]).

use crate::h1::parse;
use bytes::Bytes;
use http::header::{self, Entry, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use std::cell::RefCell;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

/// An error a response body may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body chunk this large is written on its own rather than copied behind the head.
const WRITE_ALONE: usize = 16 * 1024;

/// How a response body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

/// The response head could not be written (conflicting lengths, a 1xx status): as hyper does,
/// the connection is closed.
#[derive(Debug)]
pub(super) struct Unwritable;

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

/// Whether a response to `method` with `status` may have a body (hyper's `can_chunked`).
fn can_have_body(method: &Method, status: StatusCode) -> bool {
    !(method == Method::HEAD
        || status.is_informational()
        || matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED))
}

/// Whether a response with `status` may carry `content-length`.
fn can_have_length(status: StatusCode) -> bool {
    !(status.is_informational()
        || matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED))
}

/// Writes the status line and headers as hyper's server does (`proto::h1::role::Server`,
/// lower-case names, no custom header case), choosing the framing for a body that has ended
/// (`None`), has a known length, or has not (`Some(None)`). Returns the framing and whether
/// the connection ends after this response.
pub(super) fn encode_head(
    out: &mut Vec<u8>,
    parts: &mut http::response::Parts,
    method: &Method,
    length: Option<Option<u64>>,
    close: bool,
) -> Result<(Framing, bool), Unwritable> {
    let status = parts.status;
    if status.is_informational() {
        // hyper's server cannot send a 1xx as the response: it answers 500 and closes.
        out.extend_from_slice(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n");
        extend_date(out);
        return Err(Unwritable);
    }
    let mut last = close;
    if close {
        match parts.headers.entry(header::CONNECTION) {
            Entry::Occupied(mut entry) => {
                if !entry
                    .iter()
                    .any(|v| parse::has_token(v.as_bytes(), "close"))
                {
                    entry.append(HeaderValue::from_static("close"));
                }
            }
            Entry::Vacant(entry) => {
                entry.insert(HeaderValue::from_static("close"));
            }
        }
    }
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>();
    if parts.version != Version::HTTP_10 && status == StatusCode::OK && reason.is_none() {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(if parts.version == Version::HTTP_10 {
            b"HTTP/1.0 "
        } else {
            b"HTTP/1.1 "
        });
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        match reason {
            Some(reason) => out.extend_from_slice(reason.as_bytes()),
            None => out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
    }
    let body_allowed = can_have_body(method, status);
    // An HTTP/1.0 response (a backend's version is kept) cannot be chunked: a body of unknown
    // length goes until the close, and `transfer-encoding` and `trailer` are dropped.
    let chunked_ok = body_allowed && parts.version != Version::HTTP_10;
    let mut framing = Framing::Length(0);
    let mut wrote_len = false;
    let mut wrote_date = false;
    let mut prev_len = None;
    // The name whose values are being joined on one line, and whether `chunked` must be added
    // at its end (a `transfer-encoding` that does not end with it).
    let mut open: Option<HeaderName> = None;
    let mut add_chunked = false;
    let headers = std::mem::take(&mut parts.headers);
    for (name, value) in &headers {
        let same = open.as_ref() == Some(name);
        if !same {
            close_line(out, &mut open, add_chunked);
        }
        match *name {
            header::CONTENT_LENGTH => {
                if wrote_len && !same {
                    return Err(Unwritable);
                }
                match length {
                    Some(Some(_)) => {
                        if !same {
                            framing = Framing::Length(length.flatten().unwrap_or_default());
                            out.extend_from_slice(b"content-length: ");
                            out.extend_from_slice(value.as_bytes());
                            wrote_len = true;
                            open = Some(name.clone());
                        }
                        continue;
                    }
                    Some(None) => {
                        let len = value
                            .to_str()
                            .ok()
                            .and_then(parse::digits)
                            .ok_or(Unwritable)?;
                        match prev_len {
                            Some(prev) if prev != len => return Err(Unwritable),
                            Some(_) => continue,
                            None => {
                                framing = Framing::Length(len);
                                out.extend_from_slice(b"content-length: ");
                                out.extend_from_slice(value.as_bytes());
                                wrote_len = true;
                                prev_len = Some(len);
                                open = Some(name.clone());
                                continue;
                            }
                        }
                    }
                    None if *method != Method::HEAD => continue,
                    None => wrote_len = true,
                }
            }
            header::TRANSFER_ENCODING => {
                if wrote_len && !same {
                    return Err(Unwritable);
                }
                if !chunked_ok {
                    continue;
                }
                wrote_len = true;
                add_chunked = !parse::ends_chunked(value.as_bytes());
                if !same {
                    framing = Framing::Chunked;
                }
                join_value(out, &mut open, name, value, same);
                continue;
            }
            header::CONNECTION => {
                if parse::has_token(value.as_bytes(), "close") {
                    last = true;
                }
                join_value(out, &mut open, name, value, same);
                continue;
            }
            header::TRAILER => {
                if !chunked_ok {
                    continue;
                }
                join_value(out, &mut open, name, value, same);
                continue;
            }
            header::DATE => wrote_date = true,
            _ => {}
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    close_line(out, &mut open, add_chunked);
    if !wrote_len {
        framing = match length {
            Some(None) if chunked_ok => {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                Framing::Chunked
            }
            Some(None) => Framing::UntilClose,
            None | Some(Some(0)) => {
                if can_have_length(status) && *method != Method::HEAD {
                    out.extend_from_slice(b"content-length: 0\r\n");
                }
                Framing::Length(0)
            }
            Some(Some(len)) => {
                if can_have_length(status) {
                    out.extend_from_slice(b"content-length: ");
                    out.extend_from_slice(len.to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    Framing::Length(len)
                } else {
                    Framing::Length(0)
                }
            }
        };
    }
    if !body_allowed {
        framing = Framing::Length(0);
    }
    if wrote_date {
        out.extend_from_slice(b"\r\n");
    } else {
        extend_date(out);
    }
    Ok((framing, last))
}

/// Writes a value of a header whose values go on one line (`connection`, `transfer-encoding`,
/// `trailer`, as hyper's server writes them): after `, ` on the line `same` says is open, or
/// starting a line of its own.
fn join_value(
    out: &mut Vec<u8>,
    open: &mut Option<HeaderName>,
    name: &HeaderName,
    value: &HeaderValue,
    same: bool,
) {
    if same {
        out.extend_from_slice(b", ");
    } else {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        *open = Some(name.clone());
    }
    out.extend_from_slice(value.as_bytes());
}

/// Ends the line of the header whose values were being joined, if any.
fn close_line(out: &mut Vec<u8>, open: &mut Option<HeaderName>, add_chunked: bool) {
    if open.take().is_some() {
        out.extend_from_slice(if add_chunked {
            b", chunked\r\n"
        } else {
            b"\r\n"
        });
    }
}

thread_local! {
    /// The `date` value for the current second, as hyper's server caches it.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Appends `date: <now>\r\n\r\n`, the end of a head.
fn extend_date(out: &mut Vec<u8>) {
    #[allow(
        clippy::disallowed_methods,
        reason = "the date header is wall-clock time by definition"
    )]
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != second {
            let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
            if text.len() == 29 {
                cache.1.copy_from_slice(text.as_bytes());
                cache.0 = second;
            }
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(&cache.1);
        out.extend_from_slice(b"\r\n\r\n");
    });
}
