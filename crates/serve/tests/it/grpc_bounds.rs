//! gRPC requests are hostile input: a bad length prefix, a compressed flag with no encoding, a
//! flag that is neither 0 nor 1, invalid protobuf, a body that ends inside a message, or more
//! than a stream may carry ends the call with a non-OK status (never `OK`), and no answer
//! carries a `grpc-message` past its bound. Each call is a raw gRPC body over a real HTTP/2
//! connection to 127.0.0.1, whose client accepts header blocks up to 1 MiB so the test sees
//! what serve sends.

use crate::common;

use bytes::Bytes;
use common::{addr, serve};
use http::HeaderMap;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use std::pin::Pin;
use std::task::{Context, Poll};
use tailguard_testsupport::bounded;
use tokio::net::TcpStream;
use tonic::Code;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

const V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
const V1ALPHA: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
const PING: &str = "/tailguard.serve.v1.Ping/Ping";
const FORTIO: &str = "/fgrpc.PingServer/Ping";
const HEALTH: &str = "/grpc.health.v1.Health/Check";

/// The most a `grpc-message` may take (serve's stated bound).
const MESSAGE_BOUND: usize = 1024;

/// The most a whole status block may take: the message and a few short fields.
const BLOCK_BOUND: usize = 2048;

/// A request body: its bytes, then the end of the stream or (`open`) nothing more, ever.
struct Script {
    data: Option<Bytes>,
    open: bool,
}

impl Body for Script {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match (self.data.take(), self.open) {
            (Some(data), _) => Poll::Ready(Some(Ok(Frame::data(data)))),
            (None, true) => Poll::Pending,
            (None, false) => Poll::Ready(None),
        }
    }
}

/// What a call came back with.
#[derive(Debug)]
struct Answer {
    /// `grpc-status`, from the trailers or a trailers-only response's headers.
    code: Option<Code>,
    /// `grpc-message` as sent (percent-encoded).
    message: String,
    /// The size of the block that carried the status, as HTTP/2 counts it for
    /// `SETTINGS_MAX_HEADER_LIST_SIZE` (name + value + 32 per field, RFC 7541 section 4.1).
    block: usize,
    /// The response messages' bytes.
    data: Bytes,
}

fn block_size(map: &HeaderMap) -> usize {
    map.iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 32)
        .sum()
}

/// Calls `path` on `to` with `body` as the request body (and `extra` headers); the stream stays
/// open after the body when `open`.
async fn call(
    to: std::net::SocketAddr,
    path: &str,
    extra: &[(&str, &str)],
    body: Vec<u8>,
    open: bool,
) -> Answer {
    let stream = bounded(TcpStream::connect(to)).await.unwrap();
    let (mut sender, conn) = bounded(
        hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .max_header_list_size(1 << 20)
            .handshake(TokioIo::new(stream)),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::post(format!("http://t{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let body = Script {
        data: Some(Bytes::from(body)),
        open,
    };
    let resp = bounded(sender.send_request(req.body(body).unwrap()))
        .await
        .unwrap();
    let (head, body) = resp.into_parts();
    assert_eq!(
        head.status, 200,
        "{path}: gRPC answers 200, the status in trailers"
    );
    let collected = bounded(body.collect())
        .await
        .expect("the answer ends cleanly");
    let trailers = collected.trailers().cloned();
    let data = collected.to_bytes();
    let carrier = match &trailers {
        Some(t) if t.contains_key("grpc-status") => t.clone(),
        _ => head.headers.clone(),
    };
    let header = |name: &str| carrier.get(name).map(|v| v.to_str().unwrap().to_owned());
    Answer {
        code: header("grpc-status").map(|s| Code::from_i32(s.parse().unwrap())),
        message: header("grpc-message").unwrap_or_default(),
        block: block_size(&carrier),
        data,
    }
}

/// One gRPC message: flag, big-endian length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend((payload.len() as u32).to_be_bytes());
    out.extend(payload);
    out
}

fn reflection(request: MessageRequest, host: &str) -> Vec<u8> {
    ServerReflectionRequest {
        host: host.into(),
        message_request: Some(request),
    }
    .encode_to_vec()
}

fn list() -> Vec<u8> {
    reflection(MessageRequest::ListServices(String::new()), "")
}

fn symbol(name: String) -> Vec<u8> {
    reflection(MessageRequest::FileContainingSymbol(name), "")
}

/// The answer's messages as reflection responses.
fn responses(mut data: &[u8]) -> Vec<ServerReflectionResponse> {
    let mut out = Vec::new();
    while data.len() >= 5 {
        let len = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
        out.push(ServerReflectionResponse::decode(&data[5..5 + len]).unwrap());
        data = &data[5 + len..];
    }
    out
}

/// A hostile request and the code it gets.
struct Case {
    name: &'static str,
    /// The `grpc-encoding` header, if any.
    encoding: Option<&'static str>,
    body: Vec<u8>,
    /// The stream stays open after the body: the answer must not wait for its end.
    open: bool,
    want: Code,
}

/// The hostile bodies every reader refuses.
fn hostile() -> Vec<Case> {
    let case = |name, encoding, body, want| Case {
        name,
        encoding,
        body,
        open: false,
        want,
    };
    let mut mid_message = frame(0, &list());
    mid_message.truncate(mid_message.len() - 1);
    let compressed = frame(1, &list());
    vec![
        Case {
            open: true,
            ..case(
                "a 0xffffffff length prefix, the stream left open",
                None,
                vec![0, 0xff, 0xff, 0xff, 0xff],
                Code::ResourceExhausted,
            )
        },
        case(
            "the compressed flag and no grpc-encoding",
            None,
            compressed.clone(),
            Code::Internal,
        ),
        case(
            "the compressed flag and grpc-encoding: identity",
            Some("identity"),
            compressed.clone(),
            Code::Internal,
        ),
        case(
            "grpc-encoding: gzip, which serve does not support",
            Some("gzip"),
            compressed,
            Code::Unimplemented,
        ),
        case("flag 2", None, frame(2, &list()), Code::Internal),
        case(
            "invalid protobuf (a length past the message's end)",
            None,
            frame(0, &[0x22, 0x05, b'a']),
            Code::Internal,
        ),
        case(
            "a body that ends inside a message",
            None,
            mid_message,
            Code::Internal,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_grpc_reader_refuses_hostile_framing_with_a_non_ok_status() {
    let running = serve("backends: [{name: g, latency: 0s}]").await;
    let to = addr(&running, 0);
    for path in [V1, V1ALPHA, PING, FORTIO, HEALTH] {
        for case in hostile() {
            let headers: Vec<_> = case
                .encoding
                .map(|e| ("grpc-encoding", e))
                .into_iter()
                .collect();
            let got = call(to, path, &headers, case.body, case.open).await;
            let name = case.name;
            assert_eq!(got.code, Some(case.want), "{path}, {name}: {got:?}");
            assert!(got.block <= BLOCK_BOUND, "{path}, {name}: {}", got.block);
        }
    }
}

/// A reflection request is a file name or a symbol: 64 KiB is far past any real one, and a
/// 200 KB or 4 MiB symbol is refused from its length prefix with a short message (before, a
/// 200 KB unknown symbol came back whole in `grpc-message`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_refuses_a_message_past_64_kib() {
    let running = serve("backends: [{name: g, latency: 0s}]").await;
    let to = addr(&running, 0);
    for path in [V1, V1ALPHA] {
        for size in [200_000, 4 << 20] {
            let body = frame(0, &symbol("x".repeat(size)));
            let got = call(to, path, &[], body, false).await;
            assert_eq!(got.code, Some(Code::ResourceExhausted), "{path} {size}");
            assert!(got.block <= BLOCK_BOUND, "{path} {size}: {}", got.block);
        }
        // Just under the bound is read and answered (NOT_FOUND, its message bounded).
        let body = frame(0, &symbol("x".repeat(65_000)));
        let got = call(to, path, &[], body, false).await;
        assert_eq!(got.code, Some(Code::NotFound), "{path}");
        assert!(got.message.len() <= MESSAGE_BOUND, "{path}");
    }
}

/// A stream's questions are read up to 1 MiB in all: sixteen questions of 65,000 bytes are
/// answered, the seventeenth is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflection_stream_reads_at_most_1_mib() {
    let running = serve("backends: [{name: g, latency: 0s}]").await;
    let question = frame(
        0,
        &reflection(
            MessageRequest::ListServices(String::new()),
            &"h".repeat(65_000),
        ),
    );
    let body = question.repeat(17);
    let got = call(addr(&running, 0), V1, &[], body, false).await;
    assert_eq!(got.code, Some(Code::ResourceExhausted), "{}", got.message);
    assert_eq!(responses(&got.data).len(), 16);
}

/// A good question is answered, and a bad one after it still ends the stream non-OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_answers_good_questions_then_refuses_a_bad_one() {
    let running = serve("backends: [{name: g, latency: 0s}]").await;
    let to = addr(&running, 0);
    for path in [V1, V1ALPHA] {
        let got = call(to, path, &[], frame(0, &list()), false).await;
        assert_eq!(got.code, Some(Code::Ok), "{path}: {got:?}");
        let answers = responses(&got.data);
        let names = format!("{:?}", answers[0].message_response);
        assert!(names.contains("tailguard.serve.v1.Ping"), "{names}");

        let mut body = frame(0, &list());
        body.extend(frame(0, &[0xff]));
        let got = call(to, path, &[], body, false).await;
        assert_eq!(got.code, Some(Code::Internal), "{path}: {got:?}");
        assert_eq!(responses(&got.data).len(), 1, "{path}");
    }
}

/// A `grpc-message` that quotes the client (an unknown symbol, an unknown method) is cut to
/// 1 KiB at a character boundary, so it stays valid percent-encoded UTF-8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_messages_are_bounded_and_stay_valid_utf8() {
    let running = serve("backends: [{name: g, latency: 0s}]").await;
    let to = addr(&running, 0);
    for name in ["x".repeat(60_000), "é".repeat(20_000), "a€".repeat(9_000)] {
        let got = call(to, V1, &[], frame(0, &symbol(name.clone())), false).await;
        assert_eq!(got.code, Some(Code::NotFound));
        assert!(got.message.len() <= MESSAGE_BOUND, "{}", got.message.len());
        assert!(got.block <= BLOCK_BOUND, "{}", got.block);
        let text = percent_decode(&got.message);
        let text = String::from_utf8(text).expect("a cut at a character boundary");
        assert!(text.starts_with("symbol '"), "{text}");
    }
    let path = format!("/nope.Service/{}", "m".repeat(8_000));
    let got = call(to, &path, &[], frame(0, &[]), false).await;
    assert_eq!(got.code, Some(Code::Unimplemented));
    assert!(got.message.len() <= MESSAGE_BOUND, "{}", got.message.len());
    assert!(got.block <= BLOCK_BOUND, "{}", got.block);
}

/// `%XX` sequences decoded (gRPC's percent-encoding of `grpc-message`).
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).expect("two hex digits after %"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}
