//! gRPC streams through the proxy with a real gRPC client: ghz (grpc-go) drives a
//! bidirectional streaming method and a server-streaming one through the proxy to a gRPC
//! backend written here on hyper's HTTP/2 server. Every message of every stream must reach the
//! backend in order and every echo come back (ghz counts a stream OK only when its trailers
//! say so), the caller's metadata must arrive unchanged, its deadline must arrive as a
//! `grpc-timeout` no longer than the one it set, and a call the caller's deadline ends must be
//! cancelled at the backend, not left running.

use crate::support;

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, Request, Response};
use http_body_util::{combinators::BoxBody, BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::peers::run;
use tailguard_proxy::config::{ServiceConfig, Upstream};
use tailguard_testsupport::process::go_tool;
use tokio::net::TcpListener;

const PROTO: &str = "syntax = \"proto3\";\npackage tgtest;\n\
    message Msg { string text = 1; }\n\
    service Echo {\n\
      rpc Chat (stream Msg) returns (stream Msg) {}\n\
      rpc Hang (Msg) returns (stream Msg) {}\n\
      rpc Upload (stream Msg) returns (Msg) {}\n\
      rpc Put (Msg) returns (Msg) {}\n\
    }\n";

/// What the backend saw.
#[derive(Debug, Default)]
struct Seen {
    /// The messages of each finished `Chat` stream, in the order they came.
    chats: Vec<Vec<String>>,
    /// The `x-trace` metadata of each call.
    traces: Vec<String>,
    /// The `grpc-timeout` of each call.
    timeouts: Vec<String>,
    /// `Hang` calls whose stream the backend saw cancelled.
    cancelled: usize,
    /// The text lengths of each finished `Upload` stream's messages.
    uploads: Vec<Vec<usize>>,
}

type Body = BoxBody<Bytes, Infallible>;

/// A gRPC message: a 5-byte prefix (uncompressed, length) and `Msg { text }` (field 1).
fn message(text: &str) -> Bytes {
    let mut msg = vec![0x0a, text.len() as u8];
    msg.extend_from_slice(text.as_bytes());
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(&msg);
    Bytes::from(out)
}

/// The next whole message's text in `buf`, taken out of it.
fn take_text(buf: &mut BytesMut) -> Option<String> {
    if buf.len() < 5 {
        return None;
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if buf.len() < 5 + len {
        return None;
    }
    buf.advance(5);
    let msg = buf.split_to(len);
    // Field 1, length-delimited (a varint length); an empty Msg has no field.
    let text = match msg.split_first() {
        Some((0x0a, rest)) => {
            let (mut n, mut shift, mut at) = (0usize, 0, 0);
            while let Some(&b) = rest.get(at) {
                n |= usize::from(b & 0x7f) << shift;
                shift += 7;
                at += 1;
                if b < 0x80 {
                    break;
                }
            }
            String::from_utf8_lossy(&rest[at..at + n]).into_owned()
        }
        _ => String::new(),
    };
    Some(text)
}

/// Counts a cancelled `Hang` when the stream it is held by is dropped.
struct Cancelled(Arc<Mutex<Seen>>);

impl Drop for Cancelled {
    fn drop(&mut self) {
        self.0.lock().unwrap().cancelled += 1;
    }
}

async fn handle(
    req: Request<Incoming>,
    seen: Arc<Mutex<Seen>>,
) -> Result<Response<Body>, Infallible> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default()
    };
    {
        let mut s = seen.lock().unwrap();
        s.traces.push(header("x-trace"));
        s.timeouts.push(header("grpc-timeout"));
    }
    let ok = |body: Body| {
        Response::builder()
            .header("content-type", "application/grpc")
            .body(body)
            .unwrap()
    };
    if req.uri().path() == "/tgtest.Echo/Hang" {
        let guard = Cancelled(Arc::clone(&seen));
        let stream = futures_util::stream::unfold(guard, |guard| async move {
            std::future::pending::<()>().await;
            drop(guard);
            None::<(Result<Frame<Bytes>, Infallible>, Cancelled)>
        });
        return Ok(ok(StreamBody::new(stream).boxed()));
    }
    if matches!(req.uri().path(), "/tgtest.Echo/Upload" | "/tgtest.Echo/Put") {
        // Client streaming (or unary): every message read, then one answer and OK.
        let mut body = req.into_body();
        let mut buf = BytesMut::new();
        let mut sizes = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
                while let Some(text) = take_text(&mut buf) {
                    sizes.push(text.len());
                }
            }
        }
        let answer = message(&format!("got:{}", sizes.len()));
        seen.lock().unwrap().uploads.push(sizes);
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let frames = [Ok(Frame::data(answer)), Ok(Frame::trailers(trailers))];
        return Ok(ok(
            StreamBody::new(futures_util::stream::iter(frames)).boxed()
        ));
    }
    // Chat: each message echoed as it comes, then OK in the trailers.
    let (tx, rx) = tokio::sync::mpsc::channel::<Frame<Bytes>>(16);
    let mut body = req.into_body();
    tokio::spawn(async move {
        let mut buf = BytesMut::new();
        let mut texts = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
                while let Some(text) = take_text(&mut buf) {
                    let echo = message(&format!("echo:{text}"));
                    texts.push(text);
                    if tx.send(Frame::data(echo)).await.is_err() {
                        return;
                    }
                }
            }
        }
        seen.lock().unwrap().chats.push(texts);
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let _ = tx.send(Frame::trailers(trailers)).await;
    });
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|f| (Ok::<_, Infallible>(f), rx))
    });
    Ok(ok(StreamBody::new(frames).boxed()))
}

/// The gRPC backend: HTTP/2 by prior knowledge on 127.0.0.1.
async fn backend(seen: Arc<Mutex<Seen>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).unwrap();
            let seen = Arc::clone(&seen);
            let service = hyper::service::service_fn(move |req| handle(req, Arc::clone(&seen)));
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

/// `grpc-timeout` as a duration, read by the proxy's own reader.
fn timeout(value: &str) -> Option<Duration> {
    let mut headers = http::HeaderMap::new();
    headers.insert("grpc-timeout", value.parse().ok()?);
    tailguard_proxy::grpc::timeout(&headers)
}

/// Runs ghz with `args` against the proxy at `addr` (the proto written to a file of its own);
/// its JSON report.
async fn ghz(addr: SocketAddr, args: &[&str]) -> serde_json::Value {
    let ghz = go_tool("ghz", "github.com/bojand/ghz/cmd/ghz@v0.93.0");
    // The method's name (`tgtest.Echo/Chat`) has a slash: one directory, not two.
    let name = args[1].replace('/', "-");
    let dir = std::env::temp_dir().join(format!("tg-streams-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let proto = dir.join("echo.proto");
    std::fs::write(&proto, PROTO).unwrap();
    let mut all: Vec<String> = ["--insecure", "--proto"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    all.push(proto.display().to_string());
    all.extend(args.iter().map(|s| (*s).to_owned()));
    all.extend(["-O".to_owned(), "json".to_owned(), addr.to_string()]);
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        run(&ghz, &args)
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_str(&out).unwrap()
}

async fn proxy_to(backend: SocketAddr) -> tailguard_proxy::Proxy {
    let s = ServiceConfig::new("web", vec![Upstream::new(backend)]);
    support::start(s).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: ghz (go install github.com/bojand/ghz/cmd/ghz@v0.93.0)"]
async fn bidirectional_streams_pass_message_by_message_with_metadata_and_deadline() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let proxy = proxy_to(backend(Arc::clone(&seen)).await).await;
    let report = ghz(
        proxy.addr(),
        &[
            "--call",
            "tgtest.Echo/Chat",
            "-d",
            r#"[{"text":"a"},{"text":"b"},{"text":"c"}]"#,
            "-m",
            r#"{"x-trace":"t-1"}"#,
            "--timeout",
            "5s",
            "-n",
            "20",
            "-c",
            "2",
            "--connections",
            "1",
        ],
    )
    .await;
    proxy.shutdown().await;
    let codes = &report["statusCodeDistribution"];
    assert_eq!(codes["OK"].as_u64(), Some(20), "ghz: {codes}");
    let s = seen.lock().unwrap();
    println!(
        "ghz: {codes}; grpc-timeout at the backend: {:?}",
        &s.timeouts[..3]
    );
    assert_eq!(s.chats.len(), 20, "{s:?}");
    for chat in &s.chats {
        assert_eq!(chat, &["a", "b", "c"], "every message, in order");
    }
    assert!(
        s.traces.iter().all(|t| t == "t-1"),
        "metadata: {:?}",
        s.traces
    );
    for t in &s.timeouts {
        let left = timeout(t).unwrap_or_else(|| panic!("grpc-timeout {t:?}"));
        assert!(
            left <= Duration::from_secs(5) && left > Duration::from_secs(3),
            "grpc-timeout {t}: the caller's 5 s, less the time already spent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: ghz (go install github.com/bojand/ghz/cmd/ghz@v0.93.0)"]
async fn a_call_its_deadline_ends_is_cancelled_at_the_backend() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let proxy = proxy_to(backend(Arc::clone(&seen)).await).await;
    let report = ghz(
        proxy.addr(),
        &[
            "--call",
            "tgtest.Echo/Hang",
            "-d",
            r#"{"text":"x"}"#,
            "--timeout",
            "300ms",
            "-n",
            "4",
            "-c",
            "1",
            "--connections",
            "1",
        ],
    )
    .await;
    let codes = &report["statusCodeDistribution"];
    assert_eq!(codes["DeadlineExceeded"].as_u64(), Some(4), "ghz: {codes}");
    let cancelled = support::eventually(Duration::from_secs(5), async || {
        seen.lock().unwrap().cancelled == 4
    })
    .await;
    let (seen_cancelled, calls) = {
        let s = seen.lock().unwrap();
        (s.cancelled, s.timeouts.len())
    };
    println!("ghz: {codes}; cancelled at the backend: {seen_cancelled}");
    assert!(
        cancelled,
        "the backend saw {seen_cancelled} of 4 calls cancelled"
    );
    assert_eq!(calls, 4);
    // The deadline was the caller's: nothing is held against the endpoint.
    let views = support::views(&proxy);
    assert_eq!(views[0].failures, 0, "{views:?}");
    proxy.shutdown().await;
}

/// Request messages of 100 KB and 4 MB, a client stream of them and unary calls, from grpc-go
/// (ghz) through the proxy: every message arrives whole. Calls with a request message over
/// 64 KiB (the retry buffer) all failed with `UNAVAILABLE: ... stream no longer needed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: ghz (go install github.com/bojand/ghz/cmd/ghz@v0.93.0)"]
async fn large_messages_cross_whole_unary_and_client_streaming() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let proxy = proxy_to(backend(Arc::clone(&seen)).await).await;
    let dir = std::env::temp_dir().join(format!("tg-large-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for size in [100_000, 4_000_000] {
        let text = "x".repeat(size);
        let one = dir.join(format!("one-{size}.json"));
        std::fs::write(&one, format!(r#"{{"text":"{text}"}}"#)).unwrap();
        let three = dir.join(format!("three-{size}.json"));
        std::fs::write(
            &three,
            format!(r#"[{{"text":"{text}"}},{{"text":"{text}"}},{{"text":"{text}"}}]"#),
        )
        .unwrap();
        for (call, data, messages) in [
            ("tgtest.Echo/Put", &one, 1),
            ("tgtest.Echo/Upload", &one, 1),
            ("tgtest.Echo/Upload", &three, 3),
        ] {
            seen.lock().unwrap().uploads.clear();
            let data = data.display().to_string();
            let report = ghz(
                proxy.addr(),
                &[
                    "--call",
                    call,
                    "-D",
                    &data,
                    "-n",
                    "6",
                    "-c",
                    "2",
                    "--timeout",
                    "20s",
                ],
            )
            .await;
            let codes = &report["statusCodeDistribution"];
            assert_eq!(
                codes["OK"].as_u64(),
                Some(6),
                "{size} x {messages}: {codes}"
            );
            let s = seen.lock().unwrap();
            assert_eq!(s.uploads.len(), 6, "{size} x {messages}");
            for sizes in &s.uploads {
                assert_eq!(sizes, &vec![size; messages], "every message whole");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    proxy.shutdown().await;
}
