//! The proxy's lean HTTP/1.1 upstream client against hyper's (`proxy --h1-upstream`), behind
//! the same proxy, over real sockets on 127.0.0.1: for every response a scripted backend sends,
//! valid and malformed (`tailguard_testsupport::h1_responses`, shared with `load`'s differential
//! test), the client must get the same answer (status, headers, body, trailers; or the same
//! refusal, or the same broken body), the backend must have received the same request bytes,
//! and a second request must reuse the upstream connection whenever hyper's client does. The
//! lean client may reuse one where hyper's did not, only when the response allows it (complete,
//! kept alive, nothing after it): hyper's pooled connection is ready again only once its task
//! has run, which a request that comes at once may not wait for.
//! Requests with and without bodies (length, chunked, trailers, from HTTP/1.1 and HTTP/2
//! clients) show the request side: the same bytes on the wire.
//! Every runtime here runs on tokio's paused clock: a watch for an answer that may never
//! complete is virtual time, so a busy machine cannot cut one short (and the module takes 0.3 s
//! rather than 22 s).

use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use proptest::prelude::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_proxy::config::{Config, H1Upstream, ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::h1_responses::{over_the_limits, response, split, CASES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Long enough for any answer owed on loopback, however busy the machine.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a client watches for an answer that may never complete.
const WATCH: Duration = Duration::from_millis(400);
const SECOND: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecond";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Close,
    Hold,
}

/// What the backend saw: each request's bytes, and how many connections carried them.
#[derive(Debug, Default)]
struct Log {
    requests: Vec<String>,
    connections: usize,
}

/// Reads one request (head, then its body by `content-length` or chunked framing) from `s`;
/// `None` at the close or on a stall. Enough HTTP/1.1 for what the proxy sends.
async fn read_request(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let mut byte = [0u8; 4096];
    let ended = |seen: &[u8]| -> Option<usize> {
        let head_end = seen.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
        if head.contains("transfer-encoding: chunked") {
            let body = &seen[head_end..];
            // The last chunk, then trailers, end with an empty line.
            let last = body.windows(3).position(|w| w == b"0\r\n")?;
            let rest = &body[last..];
            let end = rest
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|p| p + 4)
                .or_else(|| (rest.starts_with(b"0\r\n\r\n")).then_some(5))?;
            return Some(head_end + last + end);
        }
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        (seen.len() >= head_end + len).then_some(head_end + len)
    };
    loop {
        if let Some(n) = ended(&seen) {
            seen.truncate(n);
            return Some(seen);
        }
        match tokio::time::timeout(PATIENCE, s.read(&mut byte)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&byte[..n]),
            _ => return None,
        }
    }
}

/// A backend that answers the first request on every connection with `pieces` (written one
/// by one), then closes, or (held) answers a second request on it with [`SECOND`].
async fn backend(pieces: Vec<Vec<u8>>, then: Then, log: Arc<Mutex<Log>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            s.set_nodelay(true).expect("nodelay");
            log.lock().unwrap().connections += 1;
            let pieces = pieces.clone();
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let Some(req) = read_request(&mut s).await else {
                    return;
                };
                log.lock()
                    .unwrap()
                    .requests
                    .push(req.escape_ascii().to_string());
                for piece in pieces {
                    if s.write_all(&piece).await.is_err() {
                        return;
                    }
                }
                if then == Then::Close {
                    return;
                }
                while let Some(req) = read_request(&mut s).await {
                    log.lock()
                        .unwrap()
                        .requests
                        .push(req.escape_ascii().to_string());
                    if s.write_all(SECOND).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// What the client made of one answer through the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    /// The endpoint's answer, forwarded (the `date` header left out: the proxy's server adds
    /// one of its own when the endpoint sent none).
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
        trailers: Option<Vec<(String, String)>>,
    },
    /// The endpoint's head, forwarded, then the body broke off.
    Broken {
        status: u16,
        headers: Vec<(String, String)>,
    },
    /// The proxy's own answer naming the fault (its wording differs between the two clients,
    /// each naming what it found, so the status is compared).
    Refused(u16),
    /// No complete answer within the watch.
    Waiting,
    /// The connection to the proxy failed.
    Failed,
}

fn listed(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(n, _)| *n != "date")
        .map(|(n, v)| (n.to_string(), v.as_bytes().escape_ascii().to_string()))
        .collect()
}

/// A request the client sends through the proxy.
#[derive(Clone, Copy, Debug)]
enum Ask {
    Get,
    Head,
    /// POST with a known length.
    Post,
    /// POST whose body streams in two pieces, its length unknown (chunked on HTTP/1.1).
    Stream,
    /// As `Stream`, with a trailer the `trailer` header declares.
    Trailers,
    /// PUT with an empty body.
    Empty,
    /// GET with a streamed body and no length (an HTTP/2 client may send one).
    GetWithBody,
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

fn request(ask: Ask, h2: bool, proxy: SocketAddr) -> Request<Body> {
    let b = Request::builder()
        .uri(if h2 {
            format!("http://{proxy}/d?q=1")
        } else {
            "/d?q=1".to_owned()
        })
        .header("host", "differential")
        .header("x-a", "1");
    let streamed = |trailer: bool| {
        let mut frames = vec![
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Ok(Frame::data(Bytes::from_static(b"defgh"))),
        ];
        if trailer {
            let mut t = HeaderMap::new();
            t.insert("x-sum", "8".parse().unwrap());
            frames.push(Ok(Frame::trailers(t)));
        }
        StreamBody::new(futures_util::stream::iter(frames)).boxed()
    };
    match ask {
        Ask::Get => b.method("GET").body(Full::new(Bytes::new()).boxed()),
        Ask::Head => b.method("HEAD").body(Full::new(Bytes::new()).boxed()),
        Ask::Post => b
            .method("POST")
            .body(Full::new(Bytes::from_static(b"hello")).boxed()),
        Ask::Stream => b.method("POST").body(streamed(false)),
        Ask::Trailers => b
            .method("POST")
            .header("te", "trailers")
            .header("trailer", "x-sum")
            .body(streamed(true)),
        Ask::Empty => b.method("PUT").body(Full::new(Bytes::new()).boxed()),
        Ask::GetWithBody => b.method("GET").body(streamed(false)),
    }
    .expect("request")
}

/// Sends `asks` one after the other on one client connection to the proxy.
async fn client(proxy: SocketAddr, asks: &[Ask], h2: bool, wait: Duration) -> Vec<Seen> {
    let Ok(socket) = TcpStream::connect(proxy).await else {
        return vec![Seen::Failed];
    };
    socket.set_nodelay(true).expect("nodelay");
    let io = hyper_util::rt::TokioIo::new(socket);
    let mut seen = Vec::new();
    if h2 {
        let Ok((mut send, conn)) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await
        else {
            return vec![Seen::Failed];
        };
        tokio::spawn(conn);
        for ask in asks {
            let got = exchange(send.send_request(request(*ask, true, proxy)), wait).await;
            let stop = !matches!(got, Seen::Answer { .. } | Seen::Refused(_));
            seen.push(got);
            if stop {
                break;
            }
        }
    } else {
        let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(io).await else {
            return vec![Seen::Failed];
        };
        tokio::spawn(conn);
        for ask in asks {
            if tokio::time::timeout(PATIENCE, send.ready()).await.is_err() {
                seen.push(Seen::Failed);
                break;
            }
            let got = exchange(send.send_request(request(*ask, false, proxy)), wait).await;
            let stop = !matches!(got, Seen::Answer { .. } | Seen::Refused(_));
            seen.push(got);
            if stop {
                break;
            }
        }
    }
    seen
}

async fn exchange(
    sent: impl std::future::Future<Output = hyper::Result<http::Response<hyper::body::Incoming>>>,
    wait: Duration,
) -> Seen {
    let got = async {
        let Ok(resp) = sent.await else {
            return Seen::Failed;
        };
        let (parts, mut body) = resp.into_parts();
        let status = parts.status.as_u16();
        if parts.headers.contains_key("x-tailguard-error") {
            let _ = body.collect().await;
            return Seen::Refused(status);
        }
        let headers = listed(&parts.headers);
        let mut bytes = Vec::new();
        let mut trailers = None;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => match f.into_data() {
                    Ok(d) => bytes.extend_from_slice(&d),
                    Err(f) => trailers = f.into_trailers().ok().map(|t| listed(&t)),
                },
                Err(_) => return Seen::Broken { status, headers },
            }
        }
        Seen::Answer {
            status,
            headers,
            body: bytes.escape_ascii().to_string(),
            trailers,
        }
    };
    tokio::time::timeout(wait, got)
        .await
        .unwrap_or(Seen::Waiting)
}

/// What the client saw, the requests the backend got, and over how many connections.
type Outcome = (Vec<Seen>, Vec<String>, usize);

/// The two outcomes agree, or differ only in that the lean client reused a connection hyper's
/// did not, for a response that allows reuse (module docs).
fn agree(lean: &Outcome, hyper: &Outcome, reusable: bool) -> bool {
    if lean == hyper {
        return true;
    }
    let (l, h) = (lean, hyper);
    reusable
        && l.2 == 1
        && h.2 == 2
        && l.0.len() == 2
        && h.0.len() == 2
        && l.0[0] == h.0[0]
        && l.1[0] == h.1[0]
        && l.1.get(1) == h.1.get(1)
}

/// The response in `bytes` leaves its connection reusable: complete, kept alive, nothing after.
fn reusable(bytes: &[u8], head: bool) -> bool {
    let mut reader = tailguard_http::h1::Reader::new(head);
    matches!(
        reader.read(bytes),
        Ok((used, tailguard_http::h1::Progress::Done(r))) if r.keep_alive && used == bytes.len()
    )
}

/// The response in `bytes` completes, or fails, without the backend's close.
fn ends_by_itself(bytes: &[u8], head: bool) -> bool {
    let mut reader = tailguard_http::h1::Reader::new(head);
    matches!(
        reader.read(bytes),
        Ok((_, tailguard_http::h1::Progress::Done(_))) | Err(_)
    )
}

/// One run behind a proxy with the given client: what the client saw, what the backend got.
async fn run(
    h1: H1Upstream,
    pieces: &[Vec<u8>],
    then: Then,
    asks: &[Ask],
    h2: bool,
    wait: Duration,
) -> Outcome {
    let log = Arc::new(Mutex::new(Log::default()));
    let addr = backend(pieces.to_vec(), then, Arc::clone(&log)).await;
    let mut service = ServiceConfig::new("web", vec![Upstream::new(addr)]);
    service.arm.retries = None;
    service.arm.accrual = None;
    service.protocol = UpstreamProtocol::Http1;
    service.pool.h1 = h1;
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), vec![service]);
    config.admin = None;
    config.seed = Some(1);
    let proxy = tailguard_proxy::start(config).await.expect("proxy");
    let at = proxy.addr();
    let seen = client(at, asks, h2, wait).await;
    tokio::time::timeout(PATIENCE, proxy.shutdown())
        .await
        .expect("the proxy stops");
    let log = log.lock().unwrap();
    // An HTTP/2 client's authority is the proxy's address, which differs between the runs.
    let requests = log
        .requests
        .iter()
        .map(|r| r.replace(&at.to_string(), "PROXY"))
        .collect();
    (seen, requests, log.connections)
}

/// Serves `bytes` (cut into pieces at `cuts`) to a request through both proxies, closed and
/// held open (then with a second request), and compares.
fn compare(bytes: &[u8], cuts: &[usize], ask: Ask) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let pieces = split(bytes, cuts);
    runtime.block_on(async {
        let show = || format!("{:?} ({ask:?})", String::from_utf8_lossy(bytes));
        let head = matches!(ask, Ask::Head);
        for (then, asks) in [(Then::Close, vec![ask]), (Then::Hold, vec![ask, Ask::Get])] {
            // A response that ends (or breaks) by itself is waited for as long as it takes on
            // a busy machine; one that needs the close, held open, is watched for a while.
            let by_itself = asks
                .iter()
                .all(|a| ends_by_itself(bytes, matches!(a, Ask::Head)));
            let wait = if then == Then::Close || by_itself {
                PATIENCE
            } else {
                WATCH
            };
            let lean = run(H1Upstream::Lean, &pieces, then, &asks, false, wait).await;
            let hyper = run(H1Upstream::Hyper, &pieces, then, &asks, false, wait).await;
            if !agree(&lean, &hyper, reusable(bytes, head)) {
                return Err(format!(
                    "{then:?}: lean {lean:?}\n   hyper {hyper:?}\n   for {}",
                    show()
                ));
            }
        }
        Ok(())
    })
}

#[test]
fn hand_picked_responses_are_forwarded_as_through_hyper() {
    let mut failures = Vec::new();
    for bytes in CASES {
        for (cuts, ask) in [
            (&[][..], Ask::Get),
            (&[1, 7, 20, 40][..], Ask::Get),
            (&[][..], Ask::Head),
        ] {
            if let Err(e) = compare(bytes, cuts, ask) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn requests_reach_the_backend_as_hyper_sends_them() {
    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec();
    let chunked =
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-t: 1\r\n\r\n"
            .to_vec();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let mut failures = Vec::new();
    runtime.block_on(async {
        for h2 in [false, true] {
            for ask in [
                Ask::Get,
                Ask::Head,
                Ask::Post,
                Ask::Stream,
                Ask::Trailers,
                Ask::Empty,
                Ask::GetWithBody,
            ] {
                for pieces in [vec![ok.clone()], vec![chunked.clone()]] {
                    let asks = [ask, ask];
                    let lean =
                        run(H1Upstream::Lean, &pieces, Then::Hold, &asks, h2, PATIENCE).await;
                    let hyper =
                        run(H1Upstream::Hyper, &pieces, Then::Hold, &asks, h2, PATIENCE).await;
                    assert_eq!(lean.1.len(), 2, "{ask:?} (h2 {h2}): {lean:?}");
                    if !agree(
                        &lean,
                        &hyper,
                        reusable(&pieces[0], matches!(ask, Ask::Head)),
                    ) {
                        failures.push(format!(
                            "{ask:?} (h2 {h2}): lean {lean:?}\n   hyper {hyper:?}"
                        ));
                    }
                }
            }
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn too_many_headers_and_a_head_past_the_limit_are_refused_by_both() {
    for bytes in over_the_limits(tailguard_http::h1::parse::MAX_HEAD_BYTES) {
        compare(&bytes, &[], Ask::Get).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_responses_are_forwarded_as_through_hyper(
        bytes in response(),
        cuts in prop::collection::vec(any::<usize>(), 0..3),
        head in prop::bool::weighted(0.1),
    ) {
        let ask = if head { Ask::Head } else { Ask::Get };
        compare(&bytes, &cuts, ask).map_err(TestCaseError::fail)?;
    }
}

/// An endpoint that answers as soon as a request's head is in, then reads the body it
/// announced; resolves to how many body bytes it got.
async fn answers_early() -> (SocketAddr, tokio::sync::oneshot::Receiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        let mut seen = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        let head_end = loop {
            if let Some(p) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            match tokio::time::timeout(PATIENCE, s.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        };
        let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
        let want: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await;
        let mut got = seen.len() - head_end;
        while got < want {
            match tokio::time::timeout(PATIENCE, s.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => got += n,
                _ => break,
            }
        }
        let _ = tx.send(got);
    });
    (addr, rx)
}

/// An endpoint that answers before it has the request body still gets all of it, through
/// either client: hyper's goes on sending it, and so must the lean one. Dropping the rest
/// would also drop an HTTP/2 client's request stream while it still uploads, which curl 7.88
/// fails the transfer on (`h2_clients.rs`, tier 2).
#[test]
fn a_body_still_coming_when_the_endpoint_answers_is_sent_whole() {
    const CHUNK: usize = 16 * 1024;
    const CHUNKS: usize = 16;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for h1 in [H1Upstream::Hyper, H1Upstream::Lean] {
            let (addr, got) = answers_early().await;
            let mut service = ServiceConfig::new("web", vec![Upstream::new(addr)]);
            service.arm.retries = None;
            service.protocol = UpstreamProtocol::Http1;
            service.pool.h1 = h1;
            let mut config = Config::new("127.0.0.1:0".parse().unwrap(), vec![service]);
            config.admin = None;
            let proxy = tailguard_proxy::start(config).await.expect("proxy");
            let socket = TcpStream::connect(proxy.addr()).await.expect("connect");
            let io = hyper_util::rt::TokioIo::new(socket);
            let (mut send, conn) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await
                    .expect("handshake");
            tokio::spawn(conn);
            let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(CHUNKS);
            let frames = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
                let data = rx.recv().await?;
                Some((Ok::<_, std::convert::Infallible>(Frame::data(data)), rx))
            }));
            let req = Request::post(format!("http://{}/", proxy.addr()))
                .header("content-length", (CHUNK * CHUNKS).to_string())
                .body(StreamBody::new(frames))
                .expect("request");
            tx.send(Bytes::from(vec![b'x'; CHUNK])).await.unwrap();
            let resp = tokio::time::timeout(PATIENCE, send.send_request(req))
                .await
                .expect("an answer in time")
                .expect("an answer");
            assert_eq!(resp.status(), 200, "{h1:?}");
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            assert_eq!(&body[..], b"ok", "{h1:?}");
            // Only now does the rest of the body come.
            for _ in 1..CHUNKS {
                if tx.send(Bytes::from(vec![b'x'; CHUNK])).await.is_err() {
                    break;
                }
            }
            drop(tx);
            let got = tokio::time::timeout(PATIENCE, got)
                .await
                .expect("the endpoint done in time")
                .expect("a count");
            assert_eq!(got, CHUNK * CHUNKS, "{h1:?}: the endpoint got {got} bytes");
            tokio::time::timeout(PATIENCE, proxy.shutdown())
                .await
                .expect("the proxy stops");
        }
    });
}
