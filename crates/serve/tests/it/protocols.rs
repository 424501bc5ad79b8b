//! HTTP/2 (prior knowledge and h2c upgrade), gRPC ping and health, overrides, bodies.

use crate::common;

use bytes::Bytes;
use common::{addr, serve, serve_with};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tailguard_serve::grpc::{PingRequest, PingResponse, PING_PATH};
use tailguard_testsupport::bounded;
use tailguard_testsupport::client::{get, H1};
use tailguard_testsupport::h2wire;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An HTTP/2 (prior knowledge) connection to `to`, driven in the background.
async fn h2_sender(
    to: std::net::SocketAddr,
) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    let stream = bounded(TcpStream::connect(to)).await.unwrap();
    let (sender, conn) = bounded(hyper::client::conn::http2::handshake(
        TokioExecutor::new(),
        TokioIo::new(stream),
    ))
    .await
    .unwrap();
    tokio::spawn(conn);
    sender
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_prior_knowledge_works() {
    let running = serve("backends: [{name: h2, latency: 0s}]").await;
    let mut sender = h2_sender(addr(&running, 0)).await;
    let req = hyper::Request::get("http://t/")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = bounded(sender.send_request(req)).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.headers()["x-tailguard-backend"], "h2");
    let body = bounded(resp.into_body().collect()).await.unwrap();
    assert_eq!(body.to_bytes(), "h2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_upgrade_answers_the_first_request_on_stream_1() {
    let running = serve("backends: [{name: up, latency: 0s}]").await;
    let mut stream = TcpStream::connect(addr(&running, 0)).await.unwrap();
    stream
        .write_all(b"GET /hello HTTP/1.1\r\nhost: t\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(bounded(stream.read_u8()).await.unwrap());
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // Client preface and an empty SETTINGS frame.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let resp = h2wire::read_response(&mut stream, 1).await;
    assert_eq!(resp.status_byte, 0x88, "`:status: 200`");
    assert_eq!(resp.body, b"up\n");
    // The connection goes on as HTTP/2: the client's first stream of its own is 3.
    let block = h2wire::request_block("GET", "t", "/again");
    let flags = h2wire::END_STREAM | h2wire::END_HEADERS;
    let headers = h2wire::frame(h2wire::HEADERS, flags, 3, &block);
    stream.write_all(&headers).await.unwrap();
    assert_eq!(h2wire::read_response(&mut stream, 3).await.body, b"up\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_ping_follows_the_backend_and_health_serves() {
    let running =
        serve("backends: [{name: g, latency: 0s}, {name: bad, latency: 0s, fail: {error: 1.0}}]")
            .await;
    let call = |i: usize| {
        let url = format!("http://{}", addr(&running, i));
        async move {
            let channel = tonic::transport::Endpoint::from_shared(url)
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut client = tonic::client::Grpc::new(channel);
            bounded(client.ready()).await.unwrap();
            let codec = tonic_prost::ProstCodec::<PingRequest, PingResponse>::default();
            let req = tonic::Request::new(PingRequest {
                payload: b"hi".to_vec(),
                count: 0,
            });
            client
                .unary(req, http::uri::PathAndQuery::from_static(PING_PATH), codec)
                .await
        }
    };
    let ok = call(0).await.unwrap().into_inner();
    assert_eq!(
        (ok.payload.as_slice(), ok.backend.as_str()),
        (&b"hi"[..], "g")
    );
    let err = call(1).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", addr(&running, 0)))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let resp = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(
        resp.into_inner().status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_overrides_only_when_enabled() {
    let off = serve("backends: [{latency: 0s}]").await;
    let (status, _, d) = get(addr(&off, 0), "/?delay=200ms&status=503").await;
    assert_eq!(status, 200);
    assert!(d.as_millis() < 200);

    let on = serve_with("backends: [{latency: 0s}]", |o| o.overrides = true).await;
    let (status, _, d) = get(addr(&on, 0), "/?delay=30ms&status=503").await;
    assert_eq!(status, 503);
    assert!(d.as_millis() >= 30);
    let (status, body, _) = get(addr(&on, 0), "/?size=5").await;
    assert_eq!((status, body.as_str()), (200, "xxxxx"));
    let (status, body, _) = get(addr(&on, 0), "/?delay=soon").await;
    assert_eq!(status, 400);
    assert!(body.contains("delay=soon"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_echo_size_and_text() {
    let running =
        serve("backends: [{body: echo}, {body: {size: 1000}}, {body: {text: hello}}]").await;
    let (_, body, _) = H1::connect(addr(&running, 0))
        .await
        .request("POST", "/", "ping pong")
        .await;
    assert_eq!(body, "ping pong");
    assert_eq!(get(addr(&running, 1), "/").await.1.len(), 1000);
    assert_eq!(get(addr(&running, 2), "/").await.1, "hello");
}

/// HEAD over HTTP/2 ends with the response headers: no body, no reset (a DATA frame on a HEAD
/// stream is a protocol error the client answers with RST_STREAM). `content-length` is the
/// GET's, and the connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_over_http2_ends_with_the_headers() {
    let running = serve("backends: [{name: h, latency: 0s}]").await;
    let mut sender = h2_sender(addr(&running, 0)).await;
    for method in [http::Method::HEAD, http::Method::GET, http::Method::HEAD] {
        let req = hyper::Request::builder()
            .method(method.clone())
            .uri("http://t/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = bounded(sender.send_request(req)).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_2);
        assert_eq!(resp.headers()["content-length"], "2");
        let body = bounded(resp.into_body().collect()).await.expect("no reset");
        let want = if method == http::Method::HEAD {
            ""
        } else {
            "h\n"
        };
        assert_eq!(body.to_bytes(), want, "{method}");
    }
}

/// HEAD over HTTP/1.1: the GET's `content-length` and no body bytes, so the next request on
/// the same connection reads its own response (a stray body would be parsed as its status line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_over_http1_sends_no_body() {
    let running = serve("backends: [{name: h, latency: 0s}]").await;
    let mut stream = TcpStream::connect(addr(&running, 0)).await.unwrap();
    stream
        .write_all(b"HEAD / HTTP/1.1\r\nhost: t\r\n\r\nGET / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = String::new();
    bounded(stream.read_to_string(&mut got)).await.unwrap();
    let (head, get) = got.split_at(got.rfind("HTTP/1.1 ").unwrap());
    assert!(
        head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"),
        "{got}"
    );
    assert!(head.contains("content-length: 2\r\n"), "{head}");
    assert!(
        get.starts_with("HTTP/1.1 200") && get.ends_with("\r\n\r\nh\n"),
        "{get}"
    );
}

/// A bad opening (garbage in the preface, or the preface followed by anything but SETTINGS)
/// closes the connection within a bounded time, with GOAWAY (PROTOCOL_ERROR) when the preface
/// was whole and unanswered when the first line is not HTTP at all (h2spec 3.5/2), and the
/// backend serves the next client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_preface_closes_the_connection_and_the_next_client_is_served() {
    let running = serve("backends: [{name: p, latency: 0s}]").await;
    let addr = addr(&running, 0);
    let mut openings = h2wire::bad_openings();
    openings.push((
        "h2spec's invalid preface",
        b"INVALID CONNECTION PREFACE\r\n\r\n".to_vec(),
    ));
    for (case, opening) in openings {
        let got = h2wire::closed_after(addr, &opening).await;
        if opening.starts_with(h2wire::PREFACE) {
            let code = h2wire::goaway_code(&got);
            assert_eq!(code, Some(h2wire::PROTOCOL_ERROR), "{case}: {got:?}");
        } else {
            assert!(got.is_empty(), "{case}: answered {got:?}");
        }
        assert_eq!(get(addr, "/").await.0, 200, "after {case}");
    }
}

/// A request whose stream the client breaks before it ends (a second HEADERS frame without
/// END_STREAM, h2spec 8.1/1) is reset with PROTOCOL_ERROR, never answered: the backend reads a
/// request to its end before it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_broken_before_its_end_is_reset_not_answered() {
    let running = serve("backends: [{name: p, latency: 0s}]").await;
    let mut stream = tokio::net::TcpStream::connect(addr(&running, 0))
        .await
        .unwrap();
    let block = h2wire::request_block("GET", "t", "/");
    // The request's first HEADERS, then a PING: once its ACK is back the server has taken the
    // HEADERS (and, before the fix, answered them), as h2spec's pause between frames allows.
    let mut opening = h2wire::client_opening();
    opening.extend(h2wire::frame(
        h2wire::HEADERS,
        h2wire::END_HEADERS,
        1,
        &block,
    ));
    opening.extend(h2wire::frame(h2wire::PING, 0, 0, b"12345678"));
    stream.write_all(&opening).await.unwrap();
    let mut first_on_stream = None;
    loop {
        let (kind, flags, id, _) = h2wire::read_frame(&mut stream).await.expect("PING ACK");
        if id == 1 && first_on_stream.is_none() {
            first_on_stream = Some(kind);
        }
        if kind == h2wire::PING && flags & 0x1 == 1 {
            break;
        }
    }
    let second = h2wire::frame(h2wire::HEADERS, h2wire::END_HEADERS, 1, &block);
    stream.write_all(&second).await.unwrap();
    let mut reset = None;
    while reset.is_none() {
        let (kind, _, id, payload) = h2wire::read_frame(&mut stream)
            .await
            .expect("the connection ended before the stream was reset");
        if id != 1 {
            continue;
        }
        first_on_stream.get_or_insert(kind);
        if kind == h2wire::RST_STREAM {
            reset = Some(u32::from_be_bytes(payload[..4].try_into().unwrap()));
        }
    }
    assert_eq!(
        first_on_stream,
        Some(h2wire::RST_STREAM),
        "stream 1 was answered before it was reset"
    );
    assert_eq!(reset, Some(h2wire::PROTOCOL_ERROR));
}

/// Each streaming method answers as its `.proto` says: `Stream` `count` answers numbered from
/// 1, `Collect` the number of messages read, `Echo` one answer per message in order; a
/// failing backend fails each of them before any answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_streaming_methods_answer_each_kind() {
    use tailguard_serve::grpc::{COLLECT_PATH, ECHO_PATH, STREAM_PATH};
    let running =
        serve("backends: [{name: g, latency: 1ms}, {name: bad, latency: 0s, fail: {error: 1.0}}]")
            .await;
    let client = |i: usize| {
        let url = format!("http://{}", addr(&running, i));
        async move {
            let channel = tonic::transport::Endpoint::from_shared(url)
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut client = tonic::client::Grpc::new(channel);
            bounded(client.ready()).await.unwrap();
            client
        }
    };
    let codec = || tonic_prost::ProstCodec::<PingRequest, PingResponse>::default();
    let ping = |payload: &[u8], count| PingRequest {
        payload: payload.to_vec(),
        count,
    };
    let path = |p: &'static str| http::uri::PathAndQuery::from_static(p);
    let collect = |mut stream: tonic::Streaming<PingResponse>| async move {
        let mut got = Vec::new();
        while let Some(m) = bounded(stream.message()).await.unwrap() {
            got.push((m.count, m.payload, m.backend));
        }
        got
    };

    let mut c = client(0).await;
    let req = tonic::Request::new(ping(b"s", 3));
    let answers = bounded(c.server_streaming(req, path(STREAM_PATH), codec()))
        .await
        .unwrap();
    let got = collect(answers.into_inner()).await;
    let want: Vec<_> = (1..=3)
        .map(|n| (n, b"s".to_vec(), "g".to_string()))
        .collect();
    assert_eq!(got, want);
    c.ready().await.unwrap();
    let req = tonic::Request::new(ping(b"", 0));
    let answers = bounded(c.server_streaming(req, path(STREAM_PATH), codec()))
        .await
        .unwrap();
    assert_eq!(
        collect(answers.into_inner()).await.len(),
        10,
        "0 asks for 10"
    );

    c.ready().await.unwrap();
    let sent = futures_util::stream::iter((0..4u8).map(move |i| ping(&[i], 0)));
    let req = tonic::Request::new(sent);
    let one = bounded(c.client_streaming(req, path(COLLECT_PATH), codec()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((one.count, one.payload), (4, vec![3]));

    c.ready().await.unwrap();
    let sent = futures_util::stream::iter((0..5u8).map(move |i| ping(&[i], 0)));
    let answers = bounded(c.streaming(tonic::Request::new(sent), path(ECHO_PATH), codec()))
        .await
        .unwrap();
    let got = collect(answers.into_inner()).await;
    let want: Vec<_> = (0..5u8)
        .map(|i| (u32::from(i) + 1, vec![i], "g".to_string()))
        .collect();
    assert_eq!(got, want);

    let mut bad = client(1).await;
    let req = tonic::Request::new(ping(b"", 2));
    let failed = match bounded(bad.server_streaming(req, path(STREAM_PATH), codec())).await {
        Ok(answers) => bounded(answers.into_inner().message()).await.unwrap_err(),
        Err(status) => status,
    };
    assert_eq!(failed.code(), tonic::Code::Unavailable);
    bad.ready().await.unwrap();
    let sent = futures_util::stream::iter([ping(b"", 0)]);
    let failed =
        match bounded(bad.streaming(tonic::Request::new(sent), path(ECHO_PATH), codec())).await {
            Ok(answers) => bounded(answers.into_inner().message()).await.unwrap_err(),
            Err(status) => status,
        };
    assert_eq!(failed.code(), tonic::Code::Unavailable);
    bad.ready().await.unwrap();
    let sent = futures_util::stream::iter([ping(b"", 0)]);
    let failed =
        bounded(bad.client_streaming(tonic::Request::new(sent), path(COLLECT_PATH), codec()))
            .await
            .unwrap_err();
    assert_eq!(failed.code(), tonic::Code::Unavailable);
}
