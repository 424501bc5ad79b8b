//! An experiment for issue 49, step 2 (an io_uring data plane): the same minimal HTTP/1.1
//! keep-alive relay over three I/O layers, to measure what io_uring saves the kernel for a
//! proxy's small request/response traffic before building a data plane on it.
//!
//! Each client connection gets one upstream connection (`TCP_NODELAY` on both); a request head
//! (a GET without a body) is read whole and written upstream, the response (head and
//! `Content-Length` body) read whole and written back. No parsing beyond that, no timers, no
//! balancing: what is left is the I/O layer and the kernel. `bench/proxy/uring.sh` drives it.
//!
//! Usage: `uring-relay MODE LISTEN UPSTREAM`, MODE one of
//! - `epoll`: tokio's current-thread runtime (epoll), as tailguard's proxy uses;
//! - `tokio-uring`: tokio-uring 0.5 (io_uring, its completions reaped through tokio's epoll),
//!   the one io_uring layer that keeps tokio's timers and tasks; `tokio-uring-deferred` asks
//!   its ring for `COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN` (it then stalls: deferred
//!   completions are only run by an `io_uring_enter` that waits, which it never makes);
//! - `monoio`: monoio 0.2's io_uring runtime (a runtime of its own); `monoio-deferred` with
//!   the same three ring flags.

use std::net::SocketAddr;

type Io<T> = std::io::Result<T>;

/// The length of the whole message at the start of `buf` (a request head; with `response`, a
/// response head and its `Content-Length` body), once all of it is there.
fn complete(buf: &[u8], response: bool) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if !response {
        return Some(end);
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut head = httparse::Response::new(&mut headers);
    head.parse(&buf[..end]).ok()?;
    let length = head
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
        .unwrap_or(0);
    (buf.len() >= end + length).then_some(end + length)
}

/// Room for the next read: at least 1 KiB free.
fn room(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(4096);
    }
}

mod epoll {
    use super::{complete, room, Io};
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    pub fn run(listen: SocketAddr, upstream: SocketAddr) -> Io<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = TcpListener::bind(listen).await?;
            loop {
                let (client, _) = listener.accept().await?;
                tokio::task::spawn_local(relay(client, upstream));
            }
        })
    }

    /// Reads into `buf` until it starts with a whole message: its length (`None`: closed).
    async fn message(s: &mut TcpStream, buf: &mut Vec<u8>, response: bool) -> Io<Option<usize>> {
        loop {
            if let Some(n) = complete(buf, response) {
                return Ok(Some(n));
            }
            room(buf);
            if s.read_buf(buf).await? == 0 {
                return Ok(None);
            }
        }
    }

    async fn relay(mut client: TcpStream, upstream: SocketAddr) -> Io<()> {
        client.set_nodelay(true)?;
        let mut up = TcpStream::connect(upstream).await?;
        up.set_nodelay(true)?;
        let (mut req, mut resp) = (Vec::with_capacity(4096), Vec::with_capacity(8192));
        loop {
            let Some(n) = message(&mut client, &mut req, false).await? else {
                return Ok(());
            };
            up.write_all(&req[..n]).await?;
            req.drain(..n);
            let Some(m) = message(&mut up, &mut resp, true).await? else {
                return Ok(());
            };
            client.write_all(&resp[..m]).await?;
            resp.drain(..m);
        }
    }
}

mod tokio_ring {
    use super::{complete, room, Io};
    use std::net::SocketAddr;
    use tokio_uring::buf::BoundedBuf;
    use tokio_uring::net::{TcpListener, TcpStream};

    pub fn run(listen: SocketAddr, upstream: SocketAddr, ring: &io_uring::Builder) {
        tokio_uring::builder()
            .uring_builder(ring)
            .start(serve(listen, upstream))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    async fn serve(listen: SocketAddr, upstream: SocketAddr) -> Io<()> {
        let listener = TcpListener::bind(listen)?;
        loop {
            let (client, _) = listener.accept().await?;
            tokio_uring::spawn(relay(client, upstream));
        }
    }

    /// Reads into `buf` until it starts with a whole message: its length (`None`: closed).
    /// The buffer is owned: the ring holds it while a read is out, and it comes back.
    async fn message(
        s: &TcpStream,
        mut buf: Vec<u8>,
        response: bool,
    ) -> (Io<Option<usize>>, Vec<u8>) {
        loop {
            if let Some(n) = complete(&buf, response) {
                return (Ok(Some(n)), buf);
            }
            room(&mut buf);
            let (len, cap) = (buf.len(), buf.capacity());
            let (read, slice) = s.read(buf.slice(len..cap)).await;
            buf = slice.into_inner();
            match read {
                Ok(0) => return (Ok(None), buf),
                Ok(_) => {}
                Err(e) => return (Err(e), buf),
            }
        }
    }

    async fn relay(client: TcpStream, upstream: SocketAddr) -> Io<()> {
        client.set_nodelay(true)?;
        let up = TcpStream::connect(upstream).await?;
        up.set_nodelay(true)?;
        let (mut req, mut resp) = (Vec::with_capacity(4096), Vec::with_capacity(8192));
        loop {
            let (n, b) = message(&client, req, false).await;
            req = b;
            let Some(n) = n? else { return Ok(()) };
            let (written, s) = up.write_all(req.slice(..n)).await;
            req = s.into_inner();
            written?;
            req.drain(..n);
            let (m, b) = message(&up, resp, true).await;
            resp = b;
            let Some(m) = m? else { return Ok(()) };
            let (written, s) = client.write_all(resp.slice(..m)).await;
            resp = s.into_inner();
            written?;
            resp.drain(..m);
        }
    }
}

mod mono {
    use super::{complete, room, Io};
    use monoio::buf::{IoBuf, IoBufMut};
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
    use monoio::net::{TcpListener, TcpStream};
    use std::net::SocketAddr;

    pub fn run(listen: SocketAddr, upstream: SocketAddr, ring: io_uring::Builder) {
        let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .with_entries(1024)
            .uring_builder(ring)
            .build()
            .unwrap_or_else(|e| panic!("io_uring runtime: {e}"));
        rt.block_on(serve(listen, upstream))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    async fn serve(listen: SocketAddr, upstream: SocketAddr) -> Io<()> {
        let listener = TcpListener::bind(listen)?;
        loop {
            let (client, _) = listener.accept().await?;
            monoio::spawn(relay(client, upstream));
        }
    }

    /// As `tokio_ring::message`, over monoio's owned-buffer reads.
    async fn message(
        s: &mut TcpStream,
        mut buf: Vec<u8>,
        response: bool,
    ) -> (Io<Option<usize>>, Vec<u8>) {
        loop {
            if let Some(n) = complete(&buf, response) {
                return (Ok(Some(n)), buf);
            }
            room(&mut buf);
            let (len, cap) = (buf.len(), buf.capacity());
            let (read, slice) = s.read(buf.slice_mut(len..cap)).await;
            buf = slice.into_inner();
            match read {
                Ok(0) => return (Ok(None), buf),
                Ok(_) => {}
                Err(e) => return (Err(e), buf),
            }
        }
    }

    async fn relay(mut client: TcpStream, upstream: SocketAddr) -> Io<()> {
        client.set_nodelay(true)?;
        let mut up = TcpStream::connect(upstream).await?;
        up.set_nodelay(true)?;
        let (mut req, mut resp) = (Vec::with_capacity(4096), Vec::with_capacity(8192));
        loop {
            let (n, b) = message(&mut client, req, false).await;
            req = b;
            let Some(n) = n? else { return Ok(()) };
            let (written, s) = up.write_all(req.slice(..n)).await;
            req = s.into_inner();
            written?;
            req.drain(..n);
            let (m, b) = message(&mut up, resp, true).await;
            resp = b;
            let Some(m) = m? else { return Ok(()) };
            let (written, s) = client.write_all(resp.slice(..m)).await;
            resp = s.into_inner();
            written?;
            resp.drain(..m);
        }
    }
}

/// A ring builder, with `deferred`: `COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN` (one thread
/// submits; completions' task work runs when it waits, not on an interrupt as it arrives).
fn ring(deferred: bool) -> io_uring::Builder {
    let mut ring = io_uring::IoUring::builder();
    if deferred {
        ring.setup_coop_taskrun()
            .setup_single_issuer()
            .setup_defer_taskrun();
    }
    ring
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, listen, upstream] = &args[..] else {
        eprintln!(
            "usage: uring-relay epoll|tokio-uring[-deferred]|monoio[-deferred] LISTEN UPSTREAM"
        );
        std::process::exit(2);
    };
    let addr = |s: &str| {
        s.parse::<SocketAddr>().unwrap_or_else(|e| {
            eprintln!("{s}: {e}");
            std::process::exit(2)
        })
    };
    let (listen, upstream) = (addr(listen), addr(upstream));
    match mode.as_str() {
        "epoll" => epoll::run(listen, upstream).unwrap_or_else(|e| panic!("{e}")),
        "tokio-uring" => tokio_ring::run(listen, upstream, &ring(false)),
        "tokio-uring-deferred" => tokio_ring::run(listen, upstream, &ring(true)),
        "monoio" => mono::run(listen, upstream, ring(false)),
        "monoio-deferred" => mono::run(listen, upstream, ring(true)),
        other => {
            eprintln!("{other}: not a mode (epoll, tokio-uring[-deferred], monoio[-deferred])");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::complete;

    #[test]
    fn a_message_is_complete_with_its_head_and_declared_body() {
        assert_eq!(
            complete(b"GET / HTTP/1.1\r\nhost: a\r\n\r\nGET", false),
            Some(27)
        );
        assert_eq!(complete(b"GET / HTTP/1.1\r\nhost: a\r\n", false), None);
        let resp = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        assert_eq!(complete(resp, true), Some(resp.len()));
        assert_eq!(complete(&resp[..resp.len() - 1], true), None);
        assert_eq!(complete(b"HTTP/1.1 204 No Content\r\n\r\n", true), Some(27));
    }
}
