//! The response head as hyper's server writes it ([`encode_head`]): the status line, the
//! header fields in their order, and the framing the body gets.

use crate::h1::parse;
use http::header::{self, Entry, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};
use std::cell::RefCell;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    if close {
        ask_close(&mut parts.headers);
    }
    status_line(out, parts);
    let body_allowed = can_have_body(method, status);
    // An HTTP/1.0 response (a backend's version is kept) cannot be chunked: a body of unknown
    // length goes until the close, and `transfer-encoding` and `trailer` are dropped.
    let chunked_ok = body_allowed && parts.version != Version::HTTP_10;
    let mut fields = Fields {
        out,
        method,
        length,
        chunked_ok,
        framing: Framing::Length(0),
        wrote_len: false,
        wrote_date: false,
        last: close,
        prev_len: None,
        open: None,
        add_chunked: false,
    };
    // Read in place: the map goes back to the thread's spares once the head is written
    // (`response::write`).
    for (name, value) in &parts.headers {
        fields.field(name, value)?;
    }
    close_line(fields.out, &mut fields.open, fields.add_chunked);
    let Fields {
        out,
        mut framing,
        wrote_len,
        wrote_date,
        last,
        ..
    } = fields;
    if !wrote_len {
        framing = implicit_framing(out, method, status, length, chunked_ok);
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

/// Adds `close` to the response's `connection` header unless it is there.
fn ask_close(headers: &mut http::HeaderMap) {
    match headers.entry(header::CONNECTION) {
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

/// The status line: a backend's `HTTP/1.0` and reason phrase kept, the canonical reason
/// otherwise.
fn status_line(out: &mut Vec<u8>, parts: &http::response::Parts) {
    let status = parts.status;
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>();
    if parts.version != Version::HTTP_10 && status == StatusCode::OK && reason.is_none() {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        return;
    }
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

/// The framing, and its header, of a response whose headers gave no length or encoding.
fn implicit_framing(
    out: &mut Vec<u8>,
    method: &Method,
    status: StatusCode,
    length: Option<Option<u64>>,
    chunked_ok: bool,
) -> Framing {
    match length {
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
                // Formatted into the head's buffer, as chunk sizes are: no `String` per response.
                let _ = write!(out, "content-length: {len}\r\n");
                Framing::Length(len)
            } else {
                Framing::Length(0)
            }
        }
    }
}

/// The header fields as [`encode_head`] writes them, one at a time, and what they decided.
struct Fields<'a> {
    out: &'a mut Vec<u8>,
    method: &'a Method,
    length: Option<Option<u64>>,
    chunked_ok: bool,
    framing: Framing,
    wrote_len: bool,
    wrote_date: bool,
    /// Whether the connection ends after this response.
    last: bool,
    /// The `content-length` already written, for a body of unknown length.
    prev_len: Option<u64>,
    /// The name whose values are being joined on one line.
    open: Option<HeaderName>,
    /// Whether `chunked` must be added at the end of that line (a `transfer-encoding` that
    /// does not end with it).
    add_chunked: bool,
}

impl Fields<'_> {
    fn field(&mut self, name: &HeaderName, value: &HeaderValue) -> Result<(), Unwritable> {
        let same = self.open.as_ref() == Some(name);
        if !same {
            close_line(self.out, &mut self.open, self.add_chunked);
        }
        match *name {
            header::CONTENT_LENGTH => {
                if self.wrote_len && !same {
                    return Err(Unwritable);
                }
                if !self.content_length(name, value, same)? {
                    return Ok(());
                }
            }
            header::TRANSFER_ENCODING => {
                if self.wrote_len && !same {
                    return Err(Unwritable);
                }
                if self.chunked_ok {
                    self.wrote_len = true;
                    self.add_chunked = !parse::ends_chunked(value.as_bytes());
                    if !same {
                        self.framing = Framing::Chunked;
                    }
                    join_value(self.out, &mut self.open, name, value, same);
                }
                return Ok(());
            }
            header::CONNECTION => {
                if parse::has_token(value.as_bytes(), "close") {
                    self.last = true;
                }
                join_value(self.out, &mut self.open, name, value, same);
                return Ok(());
            }
            header::TRAILER => {
                if self.chunked_ok {
                    join_value(self.out, &mut self.open, name, value, same);
                }
                return Ok(());
            }
            header::DATE => self.wrote_date = true,
            _ => {}
        }
        let out = &mut *self.out;
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// A `content-length` field: written (as the start of a line of joined values) or left
    /// out as hyper decides; true when it is to be written as a plain field instead (a `HEAD`
    /// response whose body has ended).
    fn content_length(
        &mut self,
        name: &HeaderName,
        value: &HeaderValue,
        same: bool,
    ) -> Result<bool, Unwritable> {
        match self.length {
            Some(Some(len)) => {
                if !same {
                    self.start_length(name, value, len);
                }
                Ok(false)
            }
            Some(None) => {
                let len = parse::digits(value.as_bytes()).ok_or(Unwritable)?;
                match self.prev_len {
                    Some(prev) if prev != len => Err(Unwritable),
                    Some(_) => Ok(false),
                    None => {
                        self.start_length(name, value, len);
                        self.prev_len = Some(len);
                        Ok(false)
                    }
                }
            }
            None if *self.method != Method::HEAD => Ok(false),
            None => {
                self.wrote_len = true;
                Ok(true)
            }
        }
    }

    fn start_length(&mut self, name: &HeaderName, value: &HeaderValue, len: u64) {
        self.framing = Framing::Length(len);
        self.out.extend_from_slice(b"content-length: ");
        self.out.extend_from_slice(value.as_bytes());
        self.wrote_len = true;
        self.open = Some(name.clone());
    }
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
