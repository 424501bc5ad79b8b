//! The probe lane: how the admin server answers `/ready` and `/live` when every connection
//! it allows is taken. Issue 43 (item 2) found 33 clients that each sent `GET /ready` a byte
//! every 0.5 s and reconnected whatever was closed: they held all 32 connections, and 44 of 44
//! health probes got `503`. A Kubernetes probe needs a connection, not only a request.
//!
//! A connection accepted while all [`Limits::max_connections`] places are taken comes here,
//! to one of [`Limits::probe_lane`] places:
//! 1. With room in the lane, it enters. Without, the lane connection longest on an incomplete
//!    head is closed to make room: the oldest that has sent part of its head, else the oldest
//!    that has sent nothing; when every one is answering a health check, the new one is
//!    closed at once (unanswered: it cost an accept). A connection whose task has not read
//!    yet is judged by what waits in its socket (`MSG_PEEK`): part of a head counts as a
//!    partial head, a whole health check's head as one being answered (kept), any other
//!    whole head as a refusal (it will be refused when read, so it takes no room).
//! 2. Its head must arrive whole within [`Limits::probe_head_timeout`] (1 s; a probe's head
//!    is one write), or the connection closes.
//! 3. `GET` or `HEAD` of a [`Limits::health`] path is answered by the handler, within the
//!    health allowance and with no place in flight. Anything else leaves the lane's room and
//!    is answered, at its turn of the pace, the `503` that says the connections are full;
//!    with as many such refusals waiting as connections allowed, it is closed unanswered.
//!    One request, then the connection closes (`connection: close`). HTTP/1.1 only, as
//!    probes speak it.
//!
//! Why the oldest incomplete head goes: a probe's head arrives in one write, so once it is
//! read the probe is safe, while a slow client's head is never complete. Why one that has sent
//! part of its head goes before one that has sent nothing: a probe accepted before its head
//! arrived (a client descheduled between its connect and its write, a network's round trip)
//! has sent nothing; the slow clients, having sent the start of theirs, go first. Why the
//! lane has as many places as the connections (32): clients turned away reconnect in bursts
//! (a client runtime's connects complete together and their heads follow on its next turn),
//! so for a moment the lane holds only connections that have sent nothing, and with fewer
//! places than the burst the oldest of them, perhaps a probe whose head is a moment late, is
//! closed. With a lane of 8, about one probe in 600 failed so under 64 clients hammering a
//! page (`tests/admin_probes.rs`); at 10,000 accepts a second, a lane of 32 turns over in
//! 3.2 ms.
//! Why a refusal leaves the room: a flood of whole requests (a hammered dashboard) would
//! otherwise fill the lane with refusals waiting on the pace, and closing those to make room
//! would only bring their clients back at once, costing an accept and a close each instead of
//! one paced answer. For the same reason a flood's heads that wait unread count as the
//! refusals they will be: counted as answered, a lane full of them closed every newcomer
//! (the hammered page's heads did, a probe among the newcomers). The accept loop yields after
//! each connection it puts here (see [`Lane::make_room`]).
//!
//! ```text
//! lane of 2: [probe (waiting), slow A (partial)] + new C -> A closed -> [probe, C]
//! ```
//!
//! [`Limits::health`]: super::Limits::health
//! [`Limits::max_connections`]: super::Limits::max_connections
//! [`Limits::probe_head_timeout`]: super::Limits::probe_head_timeout
//! [`Limits::probe_lane`]: super::Limits::probe_lane

use super::limits::{AdminBody, Gates};
use super::stage::{Progress, Stage, Watched};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::RawFd;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::AbortHandle;

/// The most a lane connection's head may take, in bytes (a probe's is about 100; hyper's
/// smallest read buffer is 8 KiB).
const LANE_HEAD_BYTES: usize = 16 * 1024;

/// The lane's connections, oldest first.
#[derive(Debug)]
pub(crate) struct Lane {
    room: usize,
    entries: VecDeque<Entry>,
}

#[derive(Debug)]
struct Entry {
    progress: Progress,
    task: AbortHandle,
    /// The connection's socket, to look at what arrived before its task read it.
    fd: Option<RawFd>,
}

impl Lane {
    pub(crate) fn new(room: usize) -> Self {
        Self {
            room,
            entries: VecDeque::with_capacity(room),
        }
    }

    /// Makes room for one more connection, closing one when the lane is full (step 1 of the
    /// module docs); `false` when there is none to close.
    ///
    /// A connection that enters must have its first read before the next call: the caller
    /// yields to the runtime in between, or a current-thread runtime accepting a queue of
    /// connections in a row would close a probe whose head was waiting, unread, in its socket.
    pub(crate) fn make_room(&mut self, gates: &Gates) -> bool {
        self.entries.retain(|e| !e.task.is_finished());
        let stages = || self.entries.iter().map(|e| e.progress.get());
        if stages().filter(|&s| s != Stage::Refusing).count() < self.room {
            return true;
        }
        // A connection whose task has not read yet is judged by what waits in its socket: a
        // whole health check's head (a probe's, sent in one write) is kept as one being
        // answered, any other whole head will be refused, part of one goes with the partial
        // heads. The fd is open: its task has not finished, and this runs on the admin
        // thread's only runtime thread, between its tasks' turns. Each socket is looked at
        // once: the lane holds its room and the refusals waiting, a few dozen.
        let judged: Vec<Stage> = (self.entries.iter())
            .map(|e| match (e.progress.get(), e.fd) {
                (Stage::Waiting, Some(fd)) => match peek(fd, gates) {
                    Pending::Nothing => Stage::Waiting,
                    Pending::Part => Stage::Partial,
                    Pending::Health => Stage::Answering,
                    Pending::Other => Stage::Refusing,
                },
                (stage, _) => stage,
            })
            .collect();
        if judged.iter().filter(|&&s| s != Stage::Refusing).count() < self.room {
            return true;
        }
        let chosen = victim(judged.iter().copied());
        let Some(entry) = chosen.and_then(|i| self.entries.remove(i)) else {
            return false;
        };
        entry.task.abort();
        true
    }

    /// Counts in the connection served by `task`, at `progress`, on socket `fd`.
    pub(crate) fn enter(&mut self, progress: Progress, task: AbortHandle, fd: Option<RawFd>) {
        self.entries.push_back(Entry { progress, task, fd });
    }
}

/// What waits, unread, in a connection's socket.
#[derive(Debug, PartialEq, Eq)]
enum Pending {
    /// Nothing (or the socket cannot say).
    Nothing,
    /// Bytes without the end of a head (`\r\n\r\n` within the first [`PEEK_BYTES`]).
    Part,
    /// A whole head that asks for a health check.
    Health,
    /// A whole head that asks for anything else, or that is not HTTP: it will be refused.
    Other,
}

/// How far a waiting connection's bytes are looked at: a probe's head is about 100 bytes.
const PEEK_BYTES: usize = 1024;

/// The most header lines a waiting head is parsed with: a probe sends three or four; a head
/// with more is not a probe's, and is judged as one that will be refused.
const PEEK_HEADERS: usize = 32;

/// Looks at what waits in socket `fd` without taking it (`MSG_PEEK`, never blocking).
fn peek(fd: RawFd, gates: &Gates) -> Pending {
    use nix::sys::socket::{recv, MsgFlags};
    let mut buf = [0u8; PEEK_BYTES];
    match recv(fd, &mut buf, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT) {
        Ok(0) | Err(_) => Pending::Nothing,
        Ok(n) => judge(&buf[..n], gates),
    }
}

/// What `bytes`, the start of a connection's first request, will get once read: a head
/// parsed as the connection's task will parse it, and asked of `gates` as it will ask.
fn judge(bytes: &[u8], gates: &Gates) -> Pending {
    if !bytes.windows(4).any(|w| w == b"\r\n\r\n") {
        return Pending::Part;
    }
    let mut headers = [httparse::EMPTY_HEADER; PEEK_HEADERS];
    let mut head = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(_)) = head.parse(bytes) else {
        return Pending::Other;
    };
    let method = head
        .method
        .and_then(|m| http::Method::from_bytes(m.as_bytes()).ok());
    let uri = head.path.and_then(|p| p.parse::<http::Uri>().ok());
    match (method, uri) {
        (Some(method), Some(uri)) if gates.is_health(&method, uri.path()) => Pending::Health,
        _ => Pending::Other,
    }
}

/// Which of a full lane's connections (oldest first) to close: the oldest with part of a
/// head, else the oldest with nothing; none while every one answers a health check (refusals
/// are not in the lane's room).
fn victim(stages: impl Iterator<Item = Stage> + Clone) -> Option<usize> {
    let oldest = |wanted: Stage| stages.clone().position(|s| s == wanted);
    oldest(Stage::Partial).or_else(|| oldest(Stage::Waiting))
}

/// Serves one lane connection (steps 2 and 3 of the module docs) until it closes.
pub(crate) async fn serve<F, Fut>(
    stream: TcpStream,
    handler: F,
    gates: Arc<Gates>,
    progress: Progress,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let mut builder = crate::server::h1_builder();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(gates.limits.probe_head_timeout)
        .keep_alive(false)
        .max_buf_size(LANE_HEAD_BYTES);
    let io = TokioIo::new(Watched::new(stream, progress.clone()));
    let conn = builder.serve_connection(io, service(handler, gates, progress));
    if let Err(err) = conn.await {
        tracing::debug!(%err, "admin probe lane connection ended with an error");
    }
}

/// What a lane connection's request gets (step 3), decided as its head completes.
enum Verdict {
    /// A health check: the handler's answer.
    Health,
    /// The refusal, at its turn, holding one of the refusals' places until it is written.
    Refuse(OwnedSemaphorePermit),
    /// As many refusals waiting as allowed: closed unanswered.
    Close,
}

/// A lane connection's service: its one request judged, its [`Stage`] set at once (before
/// anything waits, so the lane sees it), then answered or refused.
fn service<F, Fut>(
    handler: F,
    gates: Arc<Gates>,
    progress: Progress,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<AdminBody>,
    Error = std::io::Error,
    Future = impl Future<Output = Result<Response<AdminBody>, std::io::Error>> + Send,
>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    service_fn(move |req: Request<Incoming>| {
        let (handler, gates) = (handler.clone(), Arc::clone(&gates));
        let verdict = if gates.is_health(req.method(), req.uri().path()) {
            progress.set(Stage::Answering);
            Verdict::Health
        } else {
            progress.set(Stage::Refusing);
            gates.refusal().map_or(Verdict::Close, Verdict::Refuse)
        };
        async move {
            match verdict {
                Verdict::Health => {
                    gates.health_turn().await;
                    Ok(handler(req).await.map(|b| AdminBody::new(b, None)))
                }
                Verdict::Refuse(place) => {
                    let answer = gates.connections_full().await;
                    Ok(answer.map(|b| AdminBody::new(b, Some(place))))
                }
                Verdict::Close => Err(std::io::Error::other("as many refusals waiting as allowed")),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Stage::{Answering as A, Partial as P, Refusing as R, Waiting as W};

    /// The oldest with part of a head, else the oldest with nothing, else none.
    #[test]
    fn the_victim_is_the_oldest_partial_head_then_the_oldest_silent_one() {
        let cases: [(&[Stage], Option<usize>); 6] = [
            (&[P, P, P], Some(0)),
            (&[W, A, P, P], Some(2)),
            (&[W, R, W], Some(0)),
            (&[R, A, R], None),
            (&[A, A], None),
            (&[], None),
        ];
        for (stages, want) in cases {
            assert_eq!(victim(stages.iter().copied()), want, "{stages:?}");
        }
    }

    /// A waiting head is judged as its task will judge it once read: a health check's
    /// (`GET` or `HEAD` of a health path, whatever its query or form) is answered, anything
    /// else, malformed or not HTTP included, refused; without its end, a partial head.
    #[test]
    fn a_waiting_head_is_judged_as_its_task_will_judge_it() {
        let gates = Gates::new(super::super::Limits::default());
        let many = format!("GET /ready HTTP/1.1\r\n{}\r\n", "a: b\r\n".repeat(40));
        let cases: [(&[u8], Pending); 10] = [
            (b"GET /ready HTTP/1.1\r\nHost: x\r\n", Pending::Part),
            (b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n", Pending::Health),
            (b"HEAD /live HTTP/1.1\r\nHost: x\r\n\r\n", Pending::Health),
            (b"GET /ready?verbose=1 HTTP/1.1\r\n\r\n", Pending::Health),
            (b"GET http://x/ready HTTP/1.1\r\n\r\n", Pending::Health),
            (b"POST /ready HTTP/1.1\r\n\r\n", Pending::Other),
            (b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n", Pending::Other),
            (b"GET /ready HTTP/1.1 junk\r\n\r\n", Pending::Other),
            (b"\x16\x03\x01\x02\x00\r\n\r\n", Pending::Other),
            (many.as_bytes(), Pending::Other),
        ];
        for (bytes, want) in cases {
            let shown = String::from_utf8_lossy(bytes);
            assert_eq!(judge(bytes, &gates), want, "{shown:?}");
        }
    }

    /// A connected pair on loopback: the client's end and the server's.
    async fn pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        (client, listener.accept().await.unwrap().0)
    }

    /// Waits (bounded: loopback delivers at once, but no test assumes it) until `fd` shows
    /// `want`.
    async fn until_peek(fd: RawFd, gates: &Gates, want: Pending) {
        for _ in 0..1000 {
            if peek(fd, gates) == want {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never {want:?}");
    }

    /// What waits unread is looked at, not taken: nothing, part of a head, a whole head.
    #[tokio::test]
    async fn peek_sees_what_waits_and_leaves_it() {
        use std::os::fd::AsRawFd;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let gates = Gates::new(super::super::Limits::default());
        let (mut client, mut server) = pair().await;
        let fd = server.as_raw_fd();
        assert_eq!(peek(fd, &gates), Pending::Nothing);
        client
            .write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        until_peek(fd, &gates, Pending::Part).await;
        client.write_all(b"\r\n").await.unwrap();
        until_peek(fd, &gates, Pending::Health).await;
        let want = b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut got = vec![0u8; want.len()];
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            server.read_exact(&mut got),
        );
        read.await.unwrap().unwrap();
        assert_eq!(&got[..], want);
    }

    /// A full lane judges connections whose heads wait unread by what they ask: heads that
    /// will be refused take no room, so a newcomer (perhaps a probe) enters and nobody is
    /// closed; heads of health checks are kept, and the newcomer has no room. (Counted as
    /// answered, as they once were, a hammered page's unread heads closed every newcomer.)
    #[tokio::test]
    async fn unread_heads_take_room_by_what_they_ask() {
        use std::os::fd::AsRawFd;
        use tokio::io::AsyncWriteExt;
        let gates = Gates::new(super::super::Limits::default());
        for (head, room) in [
            (&b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n"[..], true),
            (&b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n"[..], false),
        ] {
            let mut lane = Lane::new(2);
            let mut held = Vec::new();
            for _ in 0..2 {
                let (mut client, server) = pair().await;
                let task = tokio::spawn(std::future::pending::<()>());
                assert!(lane.make_room(&gates));
                let fd = server.as_raw_fd();
                lane.enter(Progress::default(), task.abort_handle(), Some(fd));
                client.write_all(head).await.unwrap();
                until_peek(fd, &gates, judge(head, &gates)).await;
                held.push((client, server, task));
            }
            assert_eq!(
                lane.make_room(&gates),
                room,
                "{}",
                String::from_utf8_lossy(head)
            );
            for (_, _, task) in &held {
                assert!(!task.is_finished(), "nobody closed");
                task.abort();
            }
        }
    }

    /// A full lane closes its victim's task to make room; with every connection answering
    /// it has none to give; refusals and finished connections take no room.
    #[tokio::test]
    async fn a_full_lane_closes_its_victim_or_refuses() {
        let gates = Gates::new(super::super::Limits::default());
        let mut lane = Lane::new(2);
        let idle = || tokio::spawn(std::future::pending::<()>());
        let (first, second, third) = (idle(), idle(), idle());
        let (p1, p3) = (Progress::default(), Progress::default());
        assert!(lane.make_room(&gates));
        lane.enter(p1.clone(), first.abort_handle(), None);
        assert!(lane.make_room(&gates));
        lane.enter(Progress::default(), second.abort_handle(), None);
        p1.set(Stage::Answering);
        assert!(lane.make_room(&gates), "the second, silent, makes room");
        assert!(second.await.unwrap_err().is_cancelled());
        lane.enter(p3.clone(), third.abort_handle(), None);
        p3.set(Stage::Answering);
        assert!(!lane.make_room(&gates), "both answer: no room");
        p3.set(Stage::Refusing);
        assert!(lane.make_room(&gates), "a refusal takes no room");
        p3.set(Stage::Answering);
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        assert!(lane.make_room(&gates), "a finished one leaves");
        third.abort();
    }
}
