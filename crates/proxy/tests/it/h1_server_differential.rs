//! The proxy's lean HTTP/1.1 server against hyper's (`limits.h1_server`, `proxy --h1-server`),
//! over real sockets on 127.0.0.1: for every request a client may write, valid and malformed
//! (`tailguard_testsupport::h1_requests`), written at once and cut into pieces, two proxies
//! that differ only in their server must send the client the same bytes (the `date` header's
//! value aside), close the connection or keep it open alike, and forward the same bytes to
//! the backend. When both keep the connection open, a second request on it must fare alike.
//!
//! Only the requests the backend received complete are compared, and a chunked body as its
//! data and trailers (`/echo` answers with the data): how much of a request whose body then
//! failed the proxy had forwarded, and where it cut the chunks of a body it forwards, depend on
//! how its reads of the client's bytes fell.
//!
//! hyper's server has races of its own in a few corners (a connection kept open or closed
//! after a chunked request body read in pieces, now and then: whether it has seen the body's
//! end when the response ends), so a request whose outcomes differ is compared again, and
//! fails only when they differ twice.
//!
//! Each comparison has its own scripted backend per proxy (raw TCP, one `Log` each), so what
//! each backend received is exactly what its proxy forwarded for that request; comparisons run
//! side by side, each a few watches of [`WATCH`] long, on tokio's paused clock (a watch is
//! virtual time, so a busy machine cannot cut one short).

use futures_util::StreamExt;
use proptest::prelude::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_proxy::config::{Config, H1Server, ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_proxy::Proxy;
use tailguard_testsupport::h1_requests::{large, request, End, CASES};
use tailguard_testsupport::h1_responses::split;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// Long enough for any answer owed on loopback, however busy the machine.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a client watches a quiet connection for more bytes or its close.
const WATCH: Duration = Duration::from_millis(400);
/// The proxies' `limits.max_request_header_bytes`: its floor, hyper's smallest read buffer.
const MAX_HEAD: usize = 8 * 1024;
/// Where the pieces of the cut variant of each request end.
const CUTS: &[usize] = &[1, 5, 17, 33, 60];
/// The second request on a connection both proxies kept open.
const SECOND: &[u8] = b"GET /len HTTP/1.1\r\nHost: x\r\n\r\n";
/// Comparisons in flight at once.
const SIDE_BY_SIDE: usize = 64;

/// What one backend received: each complete request, in arrival order.
type Log = Arc<Mutex<Vec<Vec<u8>>>>;

/// The backend's answer to a path it does not know.
const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
/// The backend's answers by path, and whether it closes the connection after each. `/empty` is
/// answered as soon as the request's head is in.
const ANSWERS: &[(&[u8], &[u8], bool)] = &[
    (b"/len", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", false),
    (b"/chunked", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n1\r\n \r\n5;e=1\r\nworld\r\n0\r\n\r\n", false),
    (b"/empty", b"HTTP/1.1 204 No Content\r\n\r\n", false),
    (b"/notmod", b"HTTP/1.1 304 Not Modified\r\netag: \"a\"\r\n\r\n", false),
    (b"/http10", b"HTTP/1.0 200 OK\r\ncontent-length: 5\r\n\r\nhello", true),
    (b"/reason", b"HTTP/1.1 200 Fine\r\ncontent-length: 2\r\n\r\nok", false),
    (b"/trailers", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-t\r\n\r\n5\r\nhello\r\n0\r\nx-t: 1\r\n\r\n", false),
    (b"/close", b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 3\r\n\r\nbye", true),
    (b"/unframed", b"HTTP/1.1 200 OK\r\nx-framing: none\r\n\r\nuntil the close", true),
    (b"/unframed10", b"HTTP/1.0 200 OK\r\nx-framing: none\r\n\r\nuntil the close", true),
];

/// The answer to `method` on `path` ([`ANSWERS`]; `/big`, 256 KiB; `/echo`, the request's
/// body, unchunked), and whether the connection closes after it.
fn answer(method: &[u8], path: &[u8], body: &[u8]) -> (Vec<u8>, bool) {
    let with = |body: &[u8]| {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
        [head.as_bytes(), body].concat()
    };
    let (mut out, close) = match path {
        b"/echo" => (with(body), false),
        b"/big" => {
            let big: Vec<u8> = (0..256 * 1024).map(|i| b'a' + (i % 23) as u8).collect();
            (with(&big), false)
        }
        _ => ANSWERS
            .iter()
            .find(|(p, _, _)| *p == path)
            .map_or((OK.to_vec(), false), |a| (a.1.to_vec(), a.2)),
    };
    if method == b"HEAD" {
        out.truncate(find(&out, b"\r\n\r\n").map_or(out.len(), |at| at + 4));
    }
    (out, close)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A request at the start of the backend's buffer, its head in.
struct Arrived {
    method: Vec<u8>,
    path: Vec<u8>,
    /// Once its body is complete: where it ends, its body (unchunked), and the request as it
    /// is logged, a chunked body as one chunk (how the proxy cut the body follows its reads of
    /// the client's, which is no part of what is compared), extensions dropped.
    complete: Option<(usize, Vec<u8>, Vec<u8>)>,
}

/// The request at the start of `buf` once its head is in; enough HTTP/1.1 for what the proxy
/// sends (a body by `content-length` or chunked).
fn arrived(buf: &[u8]) -> Option<Arrived> {
    let head_end = find(buf, b"\r\n\r\n")? + 4;
    let head = &buf[..head_end];
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|b| *b == b' ');
    let method = words.next().unwrap_or_default().to_vec();
    let target = words.next().unwrap_or_default();
    let path = target
        .split(|b| *b == b'?')
        .next()
        .unwrap_or_default()
        .to_vec();
    let lower = String::from_utf8_lossy(head).to_ascii_lowercase();
    let body = &buf[head_end..];
    let complete = if lower.contains("\r\ntransfer-encoding: chunked\r\n") {
        unchunked(body).map(|(end, data, trailers)| {
            let mut logged = head.to_vec();
            if !data.is_empty() {
                logged.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                logged.extend_from_slice(&data);
                logged.extend_from_slice(b"\r\n");
            }
            logged.extend_from_slice(b"0\r\n");
            logged.extend_from_slice(trailers);
            (head_end + end, data, logged)
        })
    } else {
        let len = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        (body.len() >= len).then(|| {
            (
                head_end + len,
                body[..len].to_vec(),
                buf[..head_end + len].to_vec(),
            )
        })
    };
    Some(Arrived {
        method,
        path,
        complete,
    })
}

/// A complete chunked body at the start of `body`: where it ends, its data, and its trailers
/// with the empty line that ends them.
fn unchunked(body: &[u8]) -> Option<(usize, Vec<u8>, &[u8])> {
    let mut at = 0;
    let mut data = Vec::new();
    loop {
        let line = find(&body[at..], b"\r\n")?;
        let size = String::from_utf8_lossy(&body[at..at + line]);
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        at += line + 2;
        if size == 0 {
            let trailers = at;
            loop {
                let trailer = find(&body[at..], b"\r\n")?;
                at += trailer + 2;
                if trailer == 0 {
                    return Some((at, data, &body[trailers..at]));
                }
            }
        }
        if body.len() < at + size + 2 {
            return None;
        }
        data.extend_from_slice(&body[at..at + size]);
        at += size + 2;
    }
}

/// A backend on raw TCP, keep-alive unless an answer says otherwise, that answers by path
/// ([`answer`]) and logs every request once it is complete.
async fn backend(log: Log) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            s.set_nodelay(true).expect("nodelay");
            tokio::spawn(serve(s, Arc::clone(&log)));
        }
    });
    addr
}

/// One backend connection: requests answered in turn, `/empty` as soon as its head is in.
async fn serve(mut s: TcpStream, log: Log) {
    let mut buf = Vec::new();
    let mut read = vec![0u8; 64 * 1024];
    let mut early = false;
    loop {
        while let Some(req) = arrived(&buf) {
            let body = req.complete.as_ref().map_or(&[][..], |c| &c.1);
            let (resp, close) = answer(&req.method, &req.path, body);
            if req.path == b"/empty" && !early {
                early = true;
                if s.write_all(&resp).await.is_err() {
                    return;
                }
            }
            let Some((end, _, logged)) = req.complete else {
                break;
            };
            buf.drain(..end);
            log.lock().unwrap().push(logged);
            if !std::mem::take(&mut early) && s.write_all(&resp).await.is_err() {
                return;
            }
            if close {
                return;
            }
        }
        let n = match tokio::time::timeout(PATIENCE, s.read(&mut read)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return,
        };
        buf.extend_from_slice(&read[..n]);
    }
}

/// A proxy in front of `backend` speaking HTTP/1.1 to its clients with `server`.
async fn proxy(server: H1Server, backend: SocketAddr) -> Proxy {
    let mut service = ServiceConfig::new("web", vec![Upstream::new(backend)]);
    service.arm.retries = None;
    service.arm.accrual = None;
    service.protocol = UpstreamProtocol::Http1;
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), vec![service]);
    config.admin = None;
    config.seed = Some(1);
    config.limits.max_request_header_bytes = MAX_HEAD;
    config.limits.h1_server = server;
    tailguard_proxy::start(config).await.expect("proxy")
}

/// What a client read after writing: the bytes (each `date` value replaced), and whether the
/// proxy closed the connection (or reset it) rather than going quiet for [`WATCH`].
#[derive(Clone, Debug, PartialEq, Eq)]
struct Read {
    bytes: Vec<u8>,
    closed: bool,
}

/// Reads what the proxy sends while `written` runs and then until it closes or stays quiet
/// for [`WATCH`]; [`PATIENCE`] in all.
async fn watch(r: &mut OwnedReadHalf, written: impl std::future::Future<Output = ()>) -> Read {
    tokio::pin!(written);
    let deadline = Instant::now() + PATIENCE;
    let mut writing = true;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let closed = loop {
        let quiet = if writing {
            deadline
        } else {
            (Instant::now() + WATCH).min(deadline)
        };
        tokio::select! {
            () = &mut written, if writing => writing = false,
            got = tokio::time::timeout_at(quiet, r.read(&mut buf)) => match got {
                Ok(Ok(0) | Err(_)) => break true,
                Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
                Err(_) => break false,
            },
        }
    };
    Read {
        bytes: undated(&bytes),
        closed,
    }
}

/// `bytes` with every `from` replaced by `to`.
fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// `bytes` with every `date` header's value replaced: each server stamps its own.
fn undated(bytes: &[u8]) -> Vec<u8> {
    const DATE: &[u8] = b"\r\ndate: ";
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = find(rest, DATE) {
        out.extend_from_slice(&rest[..at + DATE.len()]);
        out.extend_from_slice(b"<date>");
        let value = &rest[at + DATE.len()..];
        rest = &value[find(value, b"\r\n").unwrap_or(value.len())..];
    }
    out.extend_from_slice(rest);
    out
}

/// Writes `pieces` on a fresh connection to `proxy` (then half-closes, as `end` says) and
/// watches the answer; then, if the connection is still open both ways, the same for [`SECOND`].
async fn client(proxy: SocketAddr, pieces: &[Vec<u8>], end: End) -> Vec<Read> {
    let s = TcpStream::connect(proxy).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let (mut r, mut w) = s.into_split();
    let first = watch(&mut r, async {
        for p in pieces {
            if w.write_all(p).await.is_err() {
                return;
            }
        }
        if end == End::HalfClose {
            let _ = w.shutdown().await;
        }
    })
    .await;
    let open = !first.closed && end == End::Open;
    let mut reads = vec![first];
    if open {
        reads.push(
            watch(&mut r, async {
                let _ = w.write_all(SECOND).await;
            })
            .await,
        );
    }
    reads
}

/// What a client read and what the backend received, through one proxy.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    reads: Vec<Read>,
    backend: Vec<Vec<u8>>,
}

/// One proxy with `server` and its own backend; `pieces` written through it.
async fn run(server: H1Server, pieces: &[Vec<u8>], end: End) -> Outcome {
    let log = Log::default();
    let at = backend(Arc::clone(&log)).await;
    let proxy = proxy(server, at).await;
    let reads = client(proxy.addr(), pieces, end).await;
    tokio::time::timeout(PATIENCE, proxy.shutdown())
        .await
        .expect("the proxy stops");
    // A request without a host is forwarded with the endpoint's address, which differs
    // between the two backends.
    let at = at.to_string();
    let backend = (log.lock().unwrap().iter())
        .map(|req| replaced(req, at.as_bytes(), b"BACKEND"))
        .collect();
    Outcome { reads, backend }
}

/// Up to 600 bytes of `bytes` from `from`, escaped, with the total length.
fn shown(bytes: &[u8], from: usize) -> String {
    let from = from.min(bytes.len());
    let to = (from + 600).min(bytes.len());
    let more = if to < bytes.len() { "..." } else { "" };
    format!(
        "[{} bytes] {}\"{}\"{more}",
        bytes.len(),
        if from > 0 { "..." } else { "" },
        bytes[from..to].escape_ascii()
    )
}

/// `what` differs: both versions from a little before their first difference.
fn differ(what: &str, hyper: &[u8], lean: &[u8]) -> String {
    let at = hyper
        .iter()
        .zip(lean)
        .position(|(h, l)| h != l)
        .unwrap_or(hyper.len().min(lean.len()));
    let from = at.saturating_sub(120);
    format!(
        "  {what} differ at byte {at}:\n    hyper {}\n    lean  {}",
        shown(hyper, from),
        shown(lean, from)
    )
}

/// Every way the two outcomes differ, one line each.
fn differences(hyper: &Outcome, lean: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    let names = ["first answer", "answer to the second request"];
    for (i, name) in names.iter().enumerate() {
        match (hyper.reads.get(i), lean.reads.get(i)) {
            (Some(h), Some(l)) => {
                if h.bytes != l.bytes {
                    out.push(differ(name, &h.bytes, &l.bytes));
                }
                if h.closed != l.closed {
                    let show = |c: bool| if c { "closed" } else { "kept open" };
                    let (h, l) = (show(h.closed), show(l.closed));
                    out.push(format!(
                        "  after the {name}: hyper {h} the connection, lean {l} it"
                    ));
                }
            }
            (None, None) => {}
            (h, l) => {
                let show = |r: Option<&Read>| r.map_or("none".to_owned(), |r| shown(&r.bytes, 0));
                out.push(format!(
                    "  {name}:\n    hyper {}\n    lean  {}",
                    show(h),
                    show(l)
                ));
            }
        }
    }
    if hyper.backend.len() != lean.backend.len() {
        out.push(format!(
            "  the backend got {} requests from hyper, {} from lean",
            hyper.backend.len(),
            lean.backend.len()
        ));
    }
    for (i, (h, l)) in hyper.backend.iter().zip(&lean.backend).enumerate() {
        if h != l {
            out.push(differ(&format!("backend request {i}"), h, l));
        }
    }
    out
}

/// Writes `bytes` (cut at `cuts`) through both proxies; hyper's outcome, or what differed
/// (twice: module docs).
async fn compare(name: &str, bytes: &[u8], cuts: &[usize], end: End) -> Result<Outcome, String> {
    let pieces = split(bytes, cuts);
    let mut first = None;
    for _ in 0..2 {
        let (hyper, lean) = tokio::join!(
            run(H1Server::Hyper, &pieces, end),
            run(H1Server::Lean, &pieces, end)
        );
        let found = differences(&hyper, &lean);
        if found.is_empty() {
            return Ok(hyper);
        }
        first.get_or_insert(found);
    }
    let how = if cuts.is_empty() {
        "at once"
    } else {
        "in pieces"
    };
    let found = first.unwrap_or_default().join("\n");
    Err(format!("{name:?} ({how}, {end:?}):\n{found}"))
}

/// Compares every request, [`SIDE_BY_SIDE`] at a time; the failures, and hyper's outcomes by name.
async fn compare_all(
    requests: Vec<(String, Vec<u8>, Vec<usize>, End)>,
) -> (Vec<String>, Vec<(String, Outcome)>) {
    let results: Vec<_> = futures_util::stream::iter(requests)
        .map(|(name, bytes, cuts, end)| async move {
            (name.clone(), compare(&name, &bytes, &cuts, end).await)
        })
        .buffer_unordered(SIDE_BY_SIDE)
        .collect()
        .await;
    let mut failures = Vec::new();
    let mut outcomes = Vec::new();
    for (name, result) in results {
        match result {
            Ok(outcome) => outcomes.push((name, outcome)),
            Err(e) => failures.push(e),
        }
    }
    failures.sort();
    (failures, outcomes)
}

/// On tokio's paused clock: the watch for a connection's close (and every delay) is virtual,
/// so a busy machine cannot end a watch early; the outcomes are those of the wall clock (all
/// 307 compared alike, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn hand_picked_requests_are_served_as_by_hyper() {
    let mut requests = Vec::new();
    for case in CASES {
        for cuts in [&[][..], CUTS] {
            requests.push((
                case.name.to_owned(),
                case.bytes.to_vec(),
                cuts.to_vec(),
                case.end,
            ));
        }
    }
    for (name, bytes) in large(MAX_HEAD) {
        requests.push((name, bytes, Vec::new(), End::Open));
    }
    let (failures, outcomes) = compare_all(requests).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The comparison means something only if requests get through: a plain GET reaches the
    // backend and is answered, and so is the second request after it.
    let (_, get) = outcomes
        .iter()
        .find(|(n, _)| n == "get")
        .expect("the plain GET");
    assert_eq!(get.backend.len(), 2, "{get:?}");
    for read in &get.reads {
        assert!(read.bytes.starts_with(b"HTTP/1.1 200 OK\r\n"), "{get:?}");
        assert!(
            read.bytes.ends_with(b"\r\n\r\nhello") && !read.closed,
            "{get:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Batches of 12 generated requests (48 in all), each compared on its own connection, side
    /// by side.
    #[test]
    fn generated_requests_are_served_as_by_hyper(
        batch in prop::collection::vec((request(), prop::collection::vec(any::<usize>(), 0..4)), 12),
    ) {
        // Paused, as the hand-picked test: no wall-clock bound.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let requests = batch
            .into_iter()
            .map(|(bytes, cuts)| (bytes.escape_ascii().to_string(), bytes, cuts, End::Open))
            .collect();
        let (failures, _) = runtime.block_on(compare_all(requests));
        prop_assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
