//! A lean HTTP/1.1 client connection for `load`'s hot path: a request written from prebuilt
//! bytes, the response read by [`parse::Reader`] (the head by `httparse`), the body counted and
//! dropped. No driver task, no channels, no header map: one `write` and usually one `read` per
//! request, on the task that sends it.
//!
//! hyper stays the reference: `load --h1-client hyper` uses it, and
//! `crates/http/tests/h1_differential.rs` feeds both the same valid and malformed responses over
//! real sockets and requires the same status, body length, connection reuse and error kind.
//! `bench/load/run.sh` measures what the lean path saves (README: load against wrk).

pub mod parse;
pub mod server;
mod version;

pub use version::later_minor_as_11;

pub use parse::{Progress, Reader, Response};
use std::io;
use std::task::{Context, Poll, Waker};
use tailguard_record::ErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The read buffer's first size; a head that does not fit grows it (up to
/// [`parse::MAX_HEAD_BYTES`]), and so does a body that fills it (up to [`MAX_READ`]).
const FIRST_READ: usize = 16 * 1024;
/// Largest read buffer a long body grows it to.
const MAX_READ: usize = 256 * 1024;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the request or reading the response failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The response is not valid HTTP/1.1, or it ended early.
    #[error(transparent)]
    Response(#[from] parse::Error),
}

impl Error {
    /// The error kind `load` counts a request that met this under (as [`crate::error::kind`]
    /// words hyper's errors).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io(e) => crate::error::kind(e),
            Error::Response(e) => e.kind(),
        }
    }
}

/// An HTTP/1.1 connection that carries one request at a time.
#[derive(Debug)]
pub struct Connection {
    io: TcpStream,
    buf: Vec<u8>,
    /// The last response left the connection reusable.
    reusable: bool,
}

impl Connection {
    /// A connection over a dialed socket (which already has TCP_NODELAY set).
    pub fn new(io: TcpStream) -> Connection {
        Connection {
            io,
            buf: vec![0; FIRST_READ],
            reusable: true,
        }
    }

    /// True when the connection can carry another request: the last response allowed it and
    /// the peer has not closed it (or sent bytes nobody asked for) since. Costs no system call
    /// unless the socket turned readable while idle.
    pub fn is_open(&self) -> bool {
        self.reusable && !self.stirred_while_idle()
    }

    /// The idle socket became readable: the peer closed or reset it, or sent something
    /// unasked. A read that emptied the socket left it marked not readable, so an idle
    /// socket normally answers from tokio's cached readiness.
    fn stirred_while_idle(&self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match self.io.poll_read_ready(&mut cx) {
            Poll::Pending => false,
            Poll::Ready(Err(_)) => true,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                !matches!(self.io.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }

    /// Writes `request` (a whole HTTP/1.1 request, head and body) and reads its response;
    /// `head_request` for `HEAD`, whose response has no body.
    ///
    /// # Errors
    /// The write or read failed, or the response is not valid HTTP/1.1. The connection is
    /// then not reusable.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
    ) -> Result<Response, Error> {
        self.reusable = false;
        self.io.write_all(request).await?;
        let mut reader = Reader::new(head_request);
        let mut filled = 0;
        loop {
            if filled == self.buf.len() {
                // Only an unfinished head is kept across reads; the reader refuses one at its limit.
                let grown = (self.buf.len() * 2).min(parse::MAX_HEAD_BYTES);
                self.buf.resize(grown, 0);
            }
            let n = self.io.read(&mut self.buf[filled..]).await?;
            if n == 0 {
                let mut response = reader.eof()?;
                response.keep_alive = false;
                return Ok(response);
            }
            let full = filled + n == self.buf.len();
            filled += n;
            let (used, progress) = reader.read(&self.buf[..filled])?;
            if let Progress::Done(response) = progress {
                // Bytes past the response belong to no request: the connection is not reused.
                self.reusable = response.keep_alive && used == filled;
                return Ok(response);
            }
            self.buf.copy_within(used..filled, 0);
            filled -= used;
            if full && filled == 0 && self.buf.len() < MAX_READ {
                // A long body: read it in larger pieces.
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{tcp, Nagle};
    use tokio::net::TcpListener;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: t\r\n\r\n";

    /// A server that answers one request with `OK` and then, when `after` is given, closes
    /// (`None`) or writes those bytes unasked; it holds the connection while `hold` is open.
    async fn one_answer(
        after: Option<Option<&'static [u8]>>,
    ) -> (Connection, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (hold, held) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf).await;
            s.write_all(OK).await.unwrap();
            match after {
                Some(None) => return,
                Some(Some(bytes)) => s.write_all(bytes).await.unwrap(),
                None => {}
            }
            let _ = held.await;
        });
        let conn = Connection::new(tcp::connect(addr, Nagle::Off).await.unwrap());
        (conn, hold)
    }

    /// Polls `is_open` until it turns false, for at most 5 s.
    async fn turns_closed(conn: &Connection) -> bool {
        for _ in 0..5000 {
            if !conn.is_open() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        false
    }

    #[tokio::test]
    async fn a_kept_connection_stays_open_for_the_next_request() {
        let (mut conn, _hold) = one_answer(None).await;
        let r = conn.exchange(GET, false).await.unwrap();
        assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 2, true));
        assert!(conn.is_open());
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_while_idle_is_not_reused() {
        let (mut conn, _hold) = one_answer(Some(None)).await;
        conn.exchange(GET, false).await.unwrap();
        assert!(turns_closed(&conn).await, "the peer's close went unseen");
    }

    #[tokio::test]
    async fn a_connection_with_bytes_nobody_asked_for_is_not_reused() {
        let (mut conn, _hold) = one_answer(Some(Some(b"HTTP/1.1 200 OK\r\n"))).await;
        conn.exchange(GET, false).await.unwrap();
        assert!(turns_closed(&conn).await, "the unasked bytes went unseen");
    }
}
