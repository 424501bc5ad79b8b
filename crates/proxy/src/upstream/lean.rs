//! HTTP/1.1 upstream connections without hyper's client: the request written by the task that
//! sends it, the response head read by `httparse` ([`tailguard_http::h1::parse`]) into a header
//! map whose values share the bytes read, the body handed downstream as slices of the same
//! buffer. No connection task, no channel, no second wake-up per request.
//!
//! hyper's client stays the reference (`proxy --h1-upstream hyper`): the request bytes follow
//! its framing rules (below), the response is read by the rules its client follows, and
//! `tests/it/h1_upstream_differential.rs` puts both behind the same proxy and requires the same
//! bytes at the backend and the same answer at the client, over valid and malformed responses.

use super::connect::{Conn, SendError};
use crate::body::{BoxError, ProxyBody};
use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_LENGTH, TRAILER, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Version};
use hyper::body::{Body, Frame, SizeHint};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;
use tailguard_http::h1::parse::{self, Reader};
use tailguard_http::names::Names;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Where a connection goes back when the response it carried has ended (its endpoint's free
/// list, [`super::h1::Free`]).
pub(super) trait Home: Send + Sync + std::fmt::Debug {
    /// Takes `conn` back for the next request.
    fn put_back(&self, conn: Box<Lean>);
}

/// The read buffer's first capacity, and the least room a read is given.
const READ_ROOM: usize = 8 * 1024;

/// The read buffers idle connections give back and reading ones take
/// ([`tailguard_http::bufpool`]).
static READS: tailguard_http::bufpool::Pool = tailguard_http::bufpool::Pool::new(READ_ROOM);

/// An idle HTTP/1.1 connection of the lean client, with whatever it holds (its endpoint's
/// connection permit). Boxed for its whole life, one allocation per connection: the response
/// body holds it, and that body goes up through every stage's return (80 B less to copy each
/// time).
#[derive(Debug)]
pub(super) struct Lean {
    conn: Conn,
    buf: BytesMut,
    /// The names of the last response's fields, to recognise the next one's
    /// ([`tailguard_http::names`]).
    names: Names,
}

impl Lean {
    /// The lean client on `conn`, if it is cleartext (it reads and writes the socket itself;
    /// a TLS connection is given back).
    pub(super) fn new(conn: Conn) -> Result<Box<Lean>, Conn> {
        if conn.plain().is_none() {
            return Err(conn);
        }
        Ok(Box::new(Lean {
            conn,
            buf: READS.take(),
            names: Names::default(),
        }))
    }

    /// False once the endpoint closed the idle connection, reset it or sent bytes nobody asked
    /// for. Costs no system call unless the socket turned readable while idle.
    pub(super) fn is_open(&self) -> bool {
        let io = self.conn.stream();
        let mut cx = Context::from_waker(Waker::noop());
        match io.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(io.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }

    /// Sends `req` and reads its response head; the body follows in the response, and the
    /// connection goes back `home` when the body has been read to its end.
    ///
    /// # Errors
    /// [`SendError::Http`]: the write or read failed, the response is not HTTP/1.1, or the
    /// request body failed.
    ///
    /// Not an `async fn`, nor are the two below: one copies its arguments into its state when
    /// first polled (rust-lang/rust#62958; see `forward::handle`).
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn copies its arguments into its state"
    )]
    pub(super) fn send(
        self: Box<Self>,
        req: Request<ProxyBody>,
        home: Arc<dyn Home>,
    ) -> impl Future<Output = Result<Response<LeanBody>, SendError>> {
        async move {
            let (mut parts, mut body) = req.into_parts();
            let framing = frame(&parts.method, parts.version, &mut parts.headers, &body);
            let bare = Bare::of(&parts.method, &parts.headers);
            let mut out = Vec::with_capacity(64 + parts.headers.len() * 32);
            encode_head(&parts, &mut out);
            let mut sender = BodySender::new(framing);
            // Most requests have no body, or all of it already here: one write.
            let mut rest = !body.is_end_stream();
            if rest {
                let polled =
                    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx)));
                match polled.await {
                    Poll::Ready(Some(Ok(frame))) => {
                        sender.encode(frame, &mut out).map_err(SendError::Http)?;
                        rest = !body.is_end_stream();
                    }
                    Poll::Ready(Some(Err(e))) => return Err(SendError::Http(e)),
                    Poll::Ready(None) => rest = false,
                    Poll::Pending => {}
                }
            }
            if !rest {
                sender.finish(&mut out).map_err(SendError::Http)?;
            }
            let upload = Upload::new(body, sender, out, !rest);
            self.exchange(upload, bare, home).await
        }
    }

    /// Sends a request without a body whose head is already written ([`encode_bare`]), and
    /// reads its response head, as [`Lean::send`].
    ///
    /// # Errors
    /// As [`Lean::send`].
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn copies its arguments into its state"
    )]
    pub(super) fn send_bare(
        self: Box<Self>,
        head: Vec<u8>,
        bare: Bare,
        home: Arc<dyn Home>,
    ) -> impl Future<Output = Result<Response<LeanBody>, SendError>> {
        use http_body_util::BodyExt;
        async move {
            let none = http_body_util::Empty::new().map_err(|never| match never {});
            let upload = Upload::new(
                none.boxed(),
                BodySender::new(Framing::Length(0)),
                head,
                true,
            );
            self.exchange(upload, bare, home).await
        }
    }

    /// Writes `upload` (the head, then what is left of the body) while the response head is
    /// read; the body follows in the response.
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn copies its arguments into its state"
    )]
    fn exchange(
        mut self: Box<Self>,
        upload: Upload,
        bare: Bare,
        home: Arc<dyn Home>,
    ) -> impl Future<Output = Result<Response<LeanBody>, SendError>> {
        async move {
            let mut reader = Reader::new(bare.head);
            // The head (and what came of the body) is written, and the rest of the body streams,
            // while the response is read: an endpoint may answer before it has read it all, or
            // echo it as it reads.
            let mut upload = Some(upload);
            let resp_head = std::future::poll_fn(|cx| {
                let Lean { conn, buf, names } = &mut *self;
                if let Some(up) = &mut upload {
                    if let Poll::Ready(sent) = up.poll(conn.stream(), cx) {
                        sent.map_err(SendError::Http)?;
                        // Written whole: its buffer is the thread's to lend again.
                        if let Some(Upload { out, .. }) = upload.take() {
                            tailguard_http::spare::give_head(out);
                        }
                    }
                }
                poll_head(conn, buf, names, &mut reader, cx)
            })
            .await?;
            let mut resp = Response::new(());
            *resp.status_mut() = resp_head.status;
            *resp.version_mut() = resp_head.version;
            *resp.headers_mut() = resp_head.headers;
            if let Some(reason) = resp_head.reason {
                if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(reason) {
                    resp.extensions_mut().insert(reason);
                }
            }
            let body = LeanBody {
                conn: Some(self),
                reader,
                upload: upload.map(Box::new),
                reuse: resp_head.keep_alive && !bare.closes,
                home,
                trailers: None,
                ended: false,
                fault: None,
                yielded: false,
            };
            Ok(resp.map(|()| body))
        }
    }
}

/// What the lean client must know of a request whose head it did not write itself
/// ([`encode_bare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bare {
    /// A `HEAD`: its response has no body, whatever its head says.
    head: bool,
    /// It asks for the close (`Connection: close`): the connection is not used after it,
    /// whatever the response says (hyper's client does the same).
    closes: bool,
}

/// The HTTP/1.1 head of a request without a body, as [`Lean::send`] would write it for the
/// request `balanced::build` makes of the same parts (the differential test against hyper's
/// client holds both): the request line in origin form, `headers` in their order, then
/// `Host: {host}` if given (the caller gives one only when `headers` has none). For headers
/// without `Transfer-Encoding`, which [`Lean::send`] removes from a request without a body (and
/// so reorders the rest).
pub fn encode_bare(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    host: Option<&HeaderValue>,
    out: &mut Vec<u8>,
) -> Bare {
    out.reserve(64 + headers.len() * 32);
    request_line(method, path, Version::HTTP_11, out);
    debug_assert!(!headers.contains_key(TRANSFER_ENCODING));
    for (name, value) in headers {
        field(name, value, out);
    }
    if let Some(host) = host {
        field(&http::header::HOST, host, out);
    }
    out.extend_from_slice(b"\r\n");
    Bare::of(method, headers)
}

/// The head [`Lean::send`] writes for `req` (its framing applied), and what it knows of it.
#[cfg(test)]
pub fn written(req: Request<ProxyBody>) -> (Vec<u8>, Bare) {
    let (mut parts, body) = req.into_parts();
    frame(&parts.method, parts.version, &mut parts.headers, &body);
    let mut out = Vec::new();
    encode_head(&parts, &mut out);
    (out, Bare::of(&parts.method, &parts.headers))
}

impl Bare {
    fn of(method: &Method, headers: &HeaderMap) -> Bare {
        Bare {
            head: *method == Method::HEAD,
            closes: headers
                .get_all(http::header::CONNECTION)
                .iter()
                .any(|v| parse::has_token(v.as_bytes(), "close")),
        }
    }
}

fn io_err(e: io::Error) -> SendError {
    SendError::Http(e.into())
}

/// Reads until a final response head is complete.
fn poll_head(
    io: &mut Conn,
    buf: &mut BytesMut,
    names: &mut Names,
    reader: &mut Reader,
    cx: &mut Context<'_>,
) -> Poll<Result<parse::Head, SendError>> {
    loop {
        if !buf.is_empty() {
            match reader.read_head(buf, names) {
                Ok(Some(head)) => return Poll::Ready(Ok(head)),
                Ok(None) => {}
                Err(e) => return Poll::Ready(Err(SendError::Http(e.into()))),
            }
        }
        match ready!(poll_read(io, buf, cx)) {
            Ok(0) => return Poll::Ready(Err(SendError::Http(parse::Error::Closed.into()))),
            Ok(_) => {}
            Err(e) => return Poll::Ready(Err(io_err(e))),
        }
    }
}

/// Reads what the socket has into `buf` (growing it to leave room for a read). Through tokio's
/// `AsyncRead`, not `try_read_buf`: a read that fills less than the room it was given marks the
/// socket drained, so the next read waits for the endpoint instead of paying an `EAGAIN`.
fn poll_read(io: &mut Conn, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
    if buf.capacity() == 0 {
        *buf = READS.take();
    } else if buf.capacity() - buf.len() < READ_ROOM {
        buf.reserve(READ_ROOM);
    }
    match io.plain_mut() {
        Some(io) => std::pin::pin!(io.read_buf(buf)).poll(cx),
        // The lean client takes only cleartext connections (`Lean::new`).
        None => Poll::Ready(Err(io::Error::other("the lean client over TLS"))),
    }
}

/// How long the rest of a request body may take once the endpoint has answered.
const FINISH_UPLOAD: Duration = Duration::from_secs(10);

/// Sends the rest of a request body the endpoint answered before it had all of it, on a task
/// of its own, within [`FINISH_UPLOAD`], then closes the connection. Dropping it instead would
/// drop the client's request stream: over HTTP/2 the client is then sent RST_STREAM(NO_ERROR)
/// while it still uploads, which RFC 9113 (section 8.1) allows but curl 7.88 fails the
/// transfer on; hyper's client, the reference, goes on sending too.
fn finish_upload(conn: Box<Lean>, mut upload: Upload) {
    tokio::spawn(async move {
        let rest = std::future::poll_fn(|cx| upload.poll(conn.conn.stream(), cx));
        let _ = tokio::time::timeout(FINISH_UPLOAD, rest).await;
    });
}

/// The part of a request body not yet sent, written as it comes while the response is read.
struct Upload {
    body: ProxyBody,
    sender: BodySender,
    out: Vec<u8>,
    at: usize,
    done: bool,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload").field("done", &self.done).finish()
    }
}

impl Upload {
    /// `out` is written first; `done` when it holds the whole request.
    fn new(body: ProxyBody, sender: BodySender, out: Vec<u8>, done: bool) -> Upload {
        Upload {
            body,
            sender,
            out,
            at: 0,
            done,
        }
    }

    /// Sends what it can: ready when the whole body has been written.
    fn poll(&mut self, io: &TcpStream, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        loop {
            if self.at < self.out.len() {
                match io.try_write(&self.out[self.at..]) {
                    Ok(n) => self.at += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        ready!(io.poll_write_ready(cx))?;
                    }
                    Err(e) => return Poll::Ready(Err(e.into())),
                }
                continue;
            }
            if self.done {
                return Poll::Ready(Ok(()));
            }
            self.out.clear();
            self.at = 0;
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => self.sender.encode(frame, &mut self.out)?,
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => {
                    self.sender.finish(&mut self.out)?;
                    self.done = true;
                }
            }
        }
    }
}

/// How the request body goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Framing {
    /// Exactly this many bytes (0: none).
    Length(u64),
    /// Chunked, with the trailer fields the `Trailer` header declared.
    Chunked { trailers: Vec<HeaderName> },
}

/// The request body's framing by the rules hyper's client follows (its `set_length`): a body
/// that has ended sends none (and no `Transfer-Encoding`); `Transfer-Encoding` given is
/// honoured (made to end in `chunked`, and `Content-Length` dropped); else a valid
/// `Content-Length` given; else a known length is declared; else chunked, except for `GET`,
/// `HEAD` and `CONNECT`, which then send none. HTTP/1.0 never chunks.
fn frame(method: &Method, version: Version, headers: &mut HeaderMap, body: &ProxyBody) -> Framing {
    if body.is_end_stream() {
        headers.remove(TRANSFER_ENCODING);
        return Framing::Length(0);
    }
    let known = body.size_hint().exact();
    let given = content_length(headers);
    if version != Version::HTTP_11 {
        headers.remove(TRANSFER_ENCODING);
        return match (given, known) {
            (Some(len), _) => Framing::Length(len),
            (None, Some(len)) => declare(headers, len),
            (None, None) => Framing::Length(0),
        };
    }
    if headers.contains_key(TRANSFER_ENCODING) {
        if !last_is_chunked(headers) {
            add_chunked(headers);
        }
        headers.remove(CONTENT_LENGTH);
        chunked(headers)
    } else if let Some(len) = given {
        Framing::Length(len)
    } else if let Some(len) = known {
        declare(headers, len)
    } else if matches!(*method, Method::GET | Method::HEAD | Method::CONNECT) {
        Framing::Length(0)
    } else {
        headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        headers.remove(CONTENT_LENGTH);
        chunked(headers)
    }
}

fn declare(headers: &mut HeaderMap, len: u64) -> Framing {
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    Framing::Length(len)
}

fn chunked(headers: &HeaderMap) -> Framing {
    let trailers = headers
        .get_all(TRAILER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .filter_map(|s| HeaderName::from_bytes(s.trim().as_bytes()).ok())
        .collect();
    Framing::Chunked { trailers }
}

/// Every `Content-Length` value (comma lists included) the same valid length.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    parse::agreed_length(
        headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .map(HeaderValue::as_bytes),
    )
}

fn last_is_chunked(headers: &HeaderMap) -> bool {
    let last = headers.get_all(TRANSFER_ENCODING).iter().next_back();
    last.is_some_and(|v| parse::ends_chunked(v.as_bytes()))
}

/// Makes the last `Transfer-Encoding` line end in `chunked`, as hyper's client does.
fn add_chunked(headers: &mut HeaderMap) {
    if let http::header::Entry::Occupied(mut lines) = headers.entry(TRANSFER_ENCODING) {
        if let Some(last) = lines.iter_mut().next_back() {
            let value = [last.as_bytes(), b", chunked"].concat();
            if let Ok(value) = HeaderValue::from_bytes(&value) {
                *last = value;
            }
        }
    }
}

/// The request line and headers, as hyper's client writes them (names as stored: lower case).
fn encode_head(parts: &http::request::Parts, out: &mut Vec<u8>) {
    match parts.uri.path_and_query() {
        Some(pq) if parts.uri.scheme().is_none() => {
            request_line(&parts.method, pq.as_str(), parts.version, out);
        }
        _ => request_line(&parts.method, &parts.uri.to_string(), parts.version, out),
    }
    for (name, value) in &parts.headers {
        field(name, value, out);
    }
    out.extend_from_slice(b"\r\n");
}

fn request_line(method: &Method, target: &str, version: Version, out: &mut Vec<u8>) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(match version {
        Version::HTTP_10 => b" HTTP/1.0\r\n",
        _ => b" HTTP/1.1\r\n",
    });
}

fn field(name: &HeaderName, value: &HeaderValue, out: &mut Vec<u8>) {
    out.extend_from_slice(name.as_str().as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Writes body frames in the request's framing, counting what a declared length allows.
struct BodySender {
    framing: Framing,
    sent: u64,
}

impl BodySender {
    fn new(framing: Framing) -> BodySender {
        BodySender { framing, sent: 0 }
    }

    fn encode(&mut self, frame: Frame<Bytes>, out: &mut Vec<u8>) -> Result<(), BoxError> {
        match frame.into_data() {
            Ok(data) => {
                if data.is_empty() {
                    return Ok(());
                }
                let before = self.sent;
                self.sent += data.len() as u64;
                match &self.framing {
                    // Bytes past the declared length are not sent, as hyper's client drops
                    // them (a GET whose client sent a body with no length declares none).
                    Framing::Length(len) => {
                        let room = len.saturating_sub(before).min(data.len() as u64);
                        out.extend_from_slice(&data[..room as usize]);
                    }
                    Framing::Chunked { .. } => {
                        out.extend_from_slice(format!("{:X}\r\n", data.len()).as_bytes());
                        out.extend_from_slice(&data);
                        out.extend_from_slice(b"\r\n");
                    }
                }
            }
            Err(frame) => {
                if let (Ok(trailers), Framing::Chunked { trailers: allowed }) =
                    (frame.into_trailers(), &self.framing)
                {
                    if allowed.is_empty() {
                        return Ok(());
                    }
                    out.extend_from_slice(b"0\r\n");
                    for (name, value) in &trailers {
                        if allowed.contains(name) {
                            out.extend_from_slice(name.as_str().as_bytes());
                            out.extend_from_slice(b": ");
                            out.extend_from_slice(value.as_bytes());
                            out.extend_from_slice(b"\r\n");
                        }
                    }
                    out.extend_from_slice(b"\r\n");
                    self.framing = Framing::Length(self.sent);
                }
            }
        }
        Ok(())
    }

    /// The body has ended: the last chunk, or a check that the length was met.
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), BoxError> {
        match &self.framing {
            Framing::Chunked { .. } => out.extend_from_slice(b"0\r\n\r\n"),
            Framing::Length(len) if self.sent < *len => {
                return Err("request body shorter than its content-length".into())
            }
            Framing::Length(_) => {}
        }
        self.framing = Framing::Length(self.sent);
        Ok(())
    }
}

/// A response body read from a lean connection, as slices of its read buffer; the connection
/// goes back to its free list when the body has ended, unless the response or stray bytes
/// after it forbid reuse.
#[derive(Debug)]
pub struct LeanBody {
    conn: Option<Box<Lean>>,
    reader: Reader,
    /// The request body's unsent rest, if the response came first.
    /// Boxed, as are `trailers`: rare, and this body goes up through every stage's return.
    upload: Option<Box<Upload>>,
    reuse: bool,
    home: Arc<dyn Home>,
    trailers: Option<Box<HeaderMap>>,
    ended: bool,
    /// A fault found in the body after some of its data, given on the next poll: that data
    /// goes downstream first (the server flushes when the body is not ready), as it does
    /// through hyper's client, whose connection task hands data and fault over separately.
    fault: Option<BoxError>,
    /// Some data has been handed downstream.
    yielded: bool,
}

impl LeanBody {
    /// Ends the body with `e` after one turn (see `fault`); the connection is closed.
    fn fail(
        &mut self,
        e: BoxError,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.conn = None;
        self.upload = None;
        if !self.yielded {
            return Poll::Ready(Some(Err(e)));
        }
        self.fault = Some(e);
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The body has ended: the connection goes back when it may carry another request.
    fn end(&mut self) {
        self.ended = true;
        if let Some(mut conn) = self.conn.take() {
            // A request body still unsent leaves the connection mid-request: the rest is sent
            // (as hyper's client goes on sending it), then the connection closes.
            if let Some(upload) = self.upload.take() {
                finish_upload(conn, *upload);
                return;
            }
            if self.reuse && conn.buf.is_empty() && self.reader.is_done() {
                // An idle connection holds no buffer: the thread's pool keeps it for the next
                // read on any connection. Hundreds of pooled connections otherwise keep 8 KiB
                // each.
                READS.give(std::mem::take(&mut conn.buf));
                self.home.put_back(conn);
            }
        }
    }

    /// The body is complete without another read (no body, or all of it already read).
    pub(super) fn settle(&mut self) {
        if self.reader.is_done() && self.trailers.is_none() {
            self.end();
        }
    }
}

impl Body for LeanBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Some(e) = this.fault.take() {
            return Poll::Ready(Some(Err(e)));
        }
        loop {
            if this.ended {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(*t))));
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            if !conn.buf.is_empty() || this.reader.is_done() {
                let data = match this.reader.read_data(&conn.buf) {
                    Ok(d) => d,
                    Err(e) => return this.fail(e.into(), cx),
                };
                let taken = conn.buf.split_to(data.used);
                if data.end {
                    this.trailers = data.trailers.map(Box::new);
                    this.end();
                }
                if let Some(run) = data.run.filter(|r| !r.is_empty()) {
                    let bytes = taken.freeze().slice(run);
                    this.yielded = true;
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                if data.end || data.used > 0 {
                    continue;
                }
            }
            let conn = this.conn.as_mut().expect("checked above");
            if let Some(up) = &mut this.upload {
                match up.poll(conn.conn.stream(), cx) {
                    Poll::Ready(Ok(())) => this.upload = None,
                    Poll::Ready(Err(e)) => return this.fail(e, cx),
                    Poll::Pending => {}
                }
            }
            let read = ready!(poll_read(&mut conn.conn, &mut conn.buf, cx));
            match read {
                Ok(0) => {
                    if this.reader.until_close() {
                        this.reuse = false;
                        this.ended = true;
                        this.conn = None;
                        continue;
                    }
                    return this.fail(parse::Error::Closed.into(), cx);
                }
                Ok(_) => {}
                Err(e) => return this.fail(e.into(), cx),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.reader.remaining() {
            _ if self.ended => SizeHint::with_exact(0),
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    /// A body of unknown length that has not ended.
    fn streamed() -> ProxyBody {
        let frames =
            futures_util::stream::iter([Ok::<_, BoxError>(Frame::data(Bytes::from_static(b"x")))]);
        StreamBody::new(frames).boxed()
    }

    fn framed(method: Method, headers: &[(&str, &str)]) -> (Framing, Vec<(String, String)>) {
        let mut map = HeaderMap::new();
        for (n, v) in headers {
            map.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let framing = frame(&method, Version::HTTP_11, &mut map, &streamed());
        let listed = map
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        (framing, listed)
    }

    #[test]
    fn request_framing_follows_hyper_clients_rules() {
        let chunked = Framing::Chunked { trailers: vec![] };
        let te = |v: &str| ("transfer-encoding".to_owned(), v.to_owned());
        assert_eq!(
            framed(
                Method::POST,
                &[("transfer-encoding", "gzip"), ("content-length", "5")]
            ),
            (chunked.clone(), vec![te("gzip, chunked")]),
            "a coding made to end in chunked, the length dropped"
        );
        assert_eq!(
            framed(Method::POST, &[("content-length", "5, 5")]),
            (
                Framing::Length(5),
                vec![("content-length".to_owned(), "5, 5".to_owned())]
            )
        );
        assert_eq!(
            framed(
                Method::POST,
                &[("content-length", "5"), ("content-length", "6")]
            ),
            (chunked, vec![te("chunked")]),
            "disagreeing lengths are no length: chunked"
        );
        assert_eq!(framed(Method::GET, &[]), (Framing::Length(0), vec![]));
    }
}
