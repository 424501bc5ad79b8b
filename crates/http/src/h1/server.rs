//! A lean HTTP/1.1 server connection for the proxy's hot path (`proxy --h1-server lean`): the
//! request head parsed by `httparse` into header values that are slices of the bytes read, the
//! body read by the request itself from the socket, the response written from one buffer by
//! the connection's task. Between requests a connection holds no buffer at all (hyper's holds
//! a read and a write buffer of 8 KiB each for its life).
//!
//! It serves only the request shapes a proxy sees all day, and hands anything else to hyper's
//! server, with every byte read so far, for the rest of the connection ([`Ended::Handover`]):
//! HTTP/1.1 with no body or one `Content-Length` of plain digits, no `Transfer-Encoding`,
//! `Expect`, `Upgrade` or `TE`, `Connection` only `close` or `keep-alive`, not `CONNECT`, a
//! head within the limit. A malformed, smuggling-shaped or merely unusual request therefore
//! meets hyper's own checks and answers, and what the lean path must match hyper on is the
//! narrow set it accepts. `crates/proxy/tests/it/h1_server_differential.rs` holds it to that:
//! two proxies, one on each server, the same bytes in, the same bytes out.
//!
//! The response is written as hyper's server writes it (status line, headers in their order,
//! the length or chunked framing hyper would choose, its `date` header), so a client cannot
//! tell the two apart.

use crate::names::Names;
use crate::quiet::Quiet;
use crate::rewind::Rewind;
use bytes::{Buf, Bytes, BytesMut};
use head::{parse, Head, Parsed};
use http::{Request, Response};
use hyper::body::{Body, Frame, SizeHint};
use response::write;
pub use response::BoxError;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::futures::Notified;
use tokio::sync::{oneshot, Notify};

mod encode;
mod head;
mod response;

/// How much a read for a request head asks for at first; a longer head grows the buffer.
const HEAD_READ: usize = 4096;

/// The head buffers an idle connection gives back and a reading one takes ([`crate::bufpool`]).
static HEADS: crate::bufpool::Pool = crate::bufpool::Pool::new(HEAD_READ);
/// How much a read for a request body asks for at most.
const BODY_READ: usize = 16 * 1024;

/// What a connection is held to.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// The largest request head (request line and headers); a larger one goes to hyper, which
    /// answers 431.
    pub max_head: usize,
}

/// How a connection served by [`serve`] ended.
#[derive(Debug)]
pub enum Ended {
    /// It is finished: the client closed it, a response said so, it failed, or it was asked
    /// to close ([`Closing`]).
    Closed,
    /// A request the lean path does not serve arrived: the connection, with every byte read
    /// from it that no response has consumed in front, for hyper's server to go on with.
    Handover(Rewind<TcpStream>),
}

/// A request to end the connection gracefully: at once when it is idle, after the response in
/// flight otherwise (which then says `connection: close`, as hyper's does).
#[derive(Debug, Default)]
pub struct Closing {
    asked: AtomicBool,
    notify: Notify,
}

impl Closing {
    /// Asks the connection to close.
    pub fn ask(&self) {
        self.asked.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    fn asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }
}

/// A connection's close notice, polled only once [`Closing::asked`] (or to register a new
/// waker).
type Close<'a, 'b> = Quiet<Pin<&'a mut Notified<'b>>>;

/// Serves HTTP/1.1 on `stream`, whose first bytes `prefix` were already read from it, calling
/// `handler` for each request, one at a time, until the connection ends or hands over.
pub async fn serve<H, F, B>(
    stream: TcpStream,
    prefix: Bytes,
    settings: Settings,
    closing: &Closing,
    mut handler: H,
) -> Ended
where
    H: FnMut(Request<RequestBody>) -> F,
    F: Future<Output = Response<B>>,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let (reader, mut writer) = stream.into_split();
    let buf = prefix
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    let mut conn = Reading {
        reader,
        buf,
        names: Names::default(),
    };
    // One waiter for the close for the connection's whole life: a waiter made per wait would
    // be added to the `Notify`'s list and removed again (a lock each) for every request. And
    // polled only when it may have come (`Quiet`): each poll of a waiting one takes that lock.
    let close = closing.notify.notified();
    tokio::pin!(close);
    let mut close = Quiet::new(close);
    loop {
        let head = match conn.head(settings.max_head, closing, &mut close).await {
            Next::Request(head) => head,
            Next::Closed => return Ended::Closed,
            Next::Other => return conn.handover(writer),
        };
        // Boxed: answering holds the request, its response and their writes (about 2 KiB of
        // state); between requests a connection holds only what waits for the next head.
        let answered = exchange(conn, &mut writer, head, closing, &mut close, &mut handler);
        conn = match Box::pin(answered).await {
            Some(conn) => conn,
            None => return Ended::Closed,
        };
    }
}

/// Answers the request `head` on `conn` and writes the response; the read side back, at the
/// next request, when the connection is kept.
///
/// Not an `async fn`: one copies its arguments (the request's head among them) into its state
/// when first polled (rust-lang/rust#62958); an `async move` block uses them where they are.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn copies its arguments into its state"
)]
fn exchange<'a, 'b, 'c, H, F, B>(
    conn: Reading,
    writer: &'a mut OwnedWriteHalf,
    head: Head,
    closing: &'a Closing,
    on_close: &'a mut Close<'b, 'c>,
    handler: &'a mut H,
) -> impl Future<Output = Option<Reading>> + use<'a, 'b, 'c, H, F, B>
where
    H: FnMut(Request<RequestBody>) -> F,
    F: Future<Output = Response<B>>,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    async move {
        let Head {
            request,
            length,
            keep_alive,
        } = head;
        let method = request.method().clone();
        let (body, mut held) = if length > 0 {
            let (tx, rx) = oneshot::channel();
            (RequestBody::streaming(conn, length, tx), Held::Lent(rx))
        } else {
            (RequestBody::empty(), Held::Here(conn))
        };
        let answer = handler(request.map(|()| body));
        // A client that closes its connection while its request is in flight cancels the
        // request, as under hyper's server, which reads on while it answers ([`Held::closed`]).
        let response = tokio::select! {
            biased;
            r = answer => r,
            () = held.closed() => return None,
        };
        let close = !keep_alive || closing.asked();
        let written = tokio::select! {
            biased;
            r = write(writer, &method, response, close) => r,
            () = held.closed() => return None,
        };
        let kept = match written {
            Ok(kept) => kept,
            Err(err) => {
                tracing::debug!(%err, "response write failed");
                false
            }
        };
        if !kept {
            let _ = writer.shutdown().await;
            return None;
        }
        let (mut conn, left) = match held {
            Held::Here(conn) => (conn, 0),
            Held::Back(conn, left) => (conn, left),
            // The body gives the connection back once it has ended or been dropped; a body
            // still held somewhere waits for the listener's idle watch.
            Held::Lent(back) => {
                let returned = tokio::select! {
                    r = back => r,
                    () = on_close.when(|| closing.asked()) => return None,
                };
                let Returned { conn, left } = returned.ok()?;
                (conn, left)
            }
        };
        // Unread body bytes already here are skipped; more to come cannot be told from the
        // next request without reading them: close (hyper does the same).
        match usize::try_from(left) {
            Ok(left) if left <= conn.buf.len() => conn.buf.advance(left),
            _ => return None,
        }
        if closing.asked() {
            let _ = writer.shutdown().await;
            return None;
        }
        Some(conn)
    }
}

/// The read side of a connection between requests: the socket and the bytes read ahead.
#[derive(Debug)]
struct Reading {
    reader: OwnedReadHalf,
    buf: BytesMut,
    /// The names of the last request's fields, to recognise the next one's
    /// ([`crate::names`]).
    names: Names,
}

/// Where the read side is while a request is served.
enum Held {
    /// With the connection: the request has no body.
    Here(Reading),
    /// With the request's body, which sends it back.
    Lent(oneshot::Receiver<Returned>),
    /// Back from the body, with how much of the body was left unread.
    Back(Reading, u64),
}

impl Held {
    /// Resolves when the client closes its side (or the connection fails) while its request
    /// is served, watched once the read side is here: at once for a request without a body,
    /// once the body has ended or been dropped otherwise (while the body has it, its own reads
    /// see the close).
    async fn closed(&mut self) {
        loop {
            match self {
                Held::Here(conn) | Held::Back(conn, _) => return conn.closed().await,
                Held::Lent(back) => match back.await {
                    Ok(Returned { conn, left }) => {
                        *self = Held::Back(conn, left);
                    }
                    Err(_) => return std::future::pending().await,
                },
            }
        }
    }
}

#[allow(
    clippy::large_enum_variant,
    reason = "returned once per request and taken apart at once; a box would cost an allocation"
)]
enum Next {
    Request(Head),
    Closed,
    Other,
}

impl Reading {
    /// The next request's head, read until complete. As hyper's server does, the first bytes
    /// are parsed at once (so garbage is refused at once) and, once a head was found partial,
    /// parsed again only when the bytes read since could end it ([`ends_head`]): a client that
    /// sends its head a byte at a time costs one scan, not one per byte.
    async fn head(
        &mut self,
        max_head: usize,
        closing: &Closing,
        close: &mut Close<'_, '_>,
    ) -> Next {
        let mut partial: Option<usize> = None;
        loop {
            if closing.asked() {
                return Next::Closed;
            }
            if !self.buf.is_empty() && partial.is_none_or(|from| ends_head(&self.buf, from)) {
                match parse(&mut self.buf, max_head, &mut self.names) {
                    Parsed::Lean(head) => return Next::Request(head),
                    Parsed::Other => return Next::Other,
                    Parsed::Partial => partial = Some(self.buf.len()),
                }
            }
            if self.buf.len() >= max_head {
                return Next::Other;
            }
            if self.buf.is_empty() {
                // Idle: hold no buffer until there is something to read; the thread's pool
                // keeps it for the next read.
                HEADS.give(std::mem::take(&mut self.buf));
                // Biased (here and below): the socket first, and no random draw per poll.
                tokio::select! {
                    biased;
                    r = self.reader.readable() => if r.is_err() { return Next::Closed },
                    () = close.when(|| closing.asked()) => return Next::Closed,
                }
            }
            if self.buf.capacity() == 0 {
                self.buf = HEADS.take();
            } else if self.buf.capacity() - self.buf.len() < HEAD_READ / 4 {
                self.buf.reserve(HEAD_READ.max(self.buf.len()));
            }
            // `read_buf`, not `try_read_buf`: tokio's read marks the socket drained when it
            // fills less than the buffer, which saves the `EAGAIN` read a `try_read` needs.
            // Asked to close, a connection with only part of a head goes at once (as hyper's,
            // whose connection is still idle then).
            let read = tokio::select! {
                biased;
                r = self.reader.read_buf(&mut self.buf) => r,
                () = close.when(|| closing.asked()) => return Next::Closed,
            };
            match read {
                // A close between requests ends the connection; within a head, hyper decides.
                Ok(0) | Err(_) if self.buf.is_empty() => return Next::Closed,
                Ok(0) | Err(_) => return Next::Other,
                Ok(_) => {}
            }
        }
    }

    /// Resolves when the client closes its side (or the connection fails). Once bytes of a
    /// next request are waiting, it watches no more (as hyper's server: a pipelined request
    /// followed by a half-close is still answered), and they are kept for later.
    async fn closed(&mut self) {
        loop {
            if !self.buf.is_empty() {
                return std::future::pending().await;
            }
            if self.buf.capacity() < HEAD_READ / 4 {
                self.buf.reserve(HEAD_READ);
            }
            match self.reader.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    fn handover(self, writer: OwnedWriteHalf) -> Ended {
        match self.reader.reunite(writer) {
            Ok(stream) => Ended::Handover(Rewind::new(self.buf.freeze(), stream)),
            Err(_) => Ended::Closed,
        }
    }
}

/// Whether the bytes of `buf` from `from` on (less three, for an end cut across reads) hold
/// the blank line that ends a head: hyper's server's `is_complete_fast`.
fn ends_head(buf: &[u8], from: usize) -> bool {
    let bytes = &buf[from.saturating_sub(3).min(buf.len())..];
    bytes.iter().enumerate().any(|(i, &b)| match b {
        b'\r' => bytes[i + 1..].starts_with(b"\n\r\n"),
        b'\n' => bytes.get(i + 1) == Some(&b'\n'),
        _ => false,
    })
}

/// A request's body, read from the connection by whoever polls it; at its end, or when it
/// is dropped, it gives the connection back to [`serve`].
#[derive(Debug)]
pub struct RequestBody {
    state: State,
}

#[derive(Debug)]
enum State {
    Empty,
    Streaming(Box<Streaming>),
}

#[derive(Debug)]
struct Streaming {
    conn: Option<Reading>,
    left: u64,
    back: Option<oneshot::Sender<Returned>>,
}

/// The connection a body gives back, with how much of the body was left unread.
#[derive(Debug)]
struct Returned {
    conn: Reading,
    left: u64,
}

impl Streaming {
    fn give_back(&mut self) {
        if let (Some(conn), Some(back)) = (self.conn.take(), self.back.take()) {
            let _ = back.send(Returned {
                conn,
                left: self.left,
            });
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl RequestBody {
    fn empty() -> Self {
        RequestBody {
            state: State::Empty,
        }
    }

    fn streaming(conn: Reading, left: u64, back: oneshot::Sender<Returned>) -> Self {
        RequestBody {
            state: State::Streaming(Box::new(Streaming {
                conn: Some(conn),
                left,
                back: Some(back),
            })),
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let State::Streaming(s) = &mut self.get_mut().state else {
            return Poll::Ready(None);
        };
        let Some(conn) = s.conn.as_mut() else {
            return Poll::Ready(None);
        };
        if s.left == 0 {
            s.give_back();
            return Poll::Ready(None);
        }
        while conn.buf.is_empty() {
            let want = usize::try_from(s.left).map_or(BODY_READ, |l| l.min(BODY_READ));
            conn.buf.reserve(want);
            let read = std::pin::pin!(conn.reader.read_buf(&mut conn.buf));
            match ready!(read.poll(cx)) {
                Ok(0) => {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the client closed before the end of its request body",
                    ))))
                }
                Ok(_) => {}
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
        let n = usize::try_from(s.left).map_or(conn.buf.len(), |l| l.min(conn.buf.len()));
        let chunk = conn.buf.split_to(n).freeze();
        s.left -= n as u64;
        if s.left == 0 {
            s.give_back();
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Empty => true,
            State::Streaming(s) => s.left == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Empty => SizeHint::with_exact(0),
            State::Streaming(s) => SizeHint::with_exact(s.left),
        }
    }
}

#[cfg(test)]
mod tests;
