//! Server reflection against a server that does not play along: one that implements only
//! `grpc.reflection.v1alpha` (as older grpc-go and grpc-java servers do), one whose answers
//! are too large, not descriptors at all, or an endless chain of imports. Every case ends in
//! a resolved call or a named error, within bounds.

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use prost::Message;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_load::grpc::CallKind;
use tailguard_load::target::Target;

/// The question's two kinds, as `ServerReflectionRequest` numbers them.
#[derive(Clone, PartialEq, prost::Message)]
struct Question {
    #[prost(string, tag = "3")]
    file_by_filename: String,
    #[prost(string, tag = "4")]
    file_containing_symbol: String,
}

/// `ServerReflectionResponse` with a `FileDescriptorResponse` (4).
#[derive(Clone, PartialEq, prost::Message)]
struct Answer {
    #[prost(message, optional, tag = "4")]
    files: Option<Files>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Files {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

/// How the test server answers a v1alpha question.
#[derive(Clone, Copy)]
enum Mode {
    /// The truth: the files of `demo/greet.proto` and its import.
    Honest,
    /// 5 MiB of descriptors in one answer.
    Huge,
    /// Bytes that are not a `FileDescriptorProto`.
    Garbage,
    /// Each file imports a new one, for ever.
    Endless,
}

/// The two files the honest server describes: a service of every kind, and its import.
fn demo_files() -> Vec<prost_reflect::prost_types::FileDescriptorProto> {
    let dir = std::env::temp_dir().join(format!("tg-reflect-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("demo")).unwrap();
    std::fs::write(
        dir.join("demo/common.proto"),
        "syntax = \"proto3\";\npackage demo;\nmessage Word { string text = 1; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("demo/greet.proto"),
        "syntax = \"proto3\";\npackage demo;\nimport \"demo/common.proto\";\n\
         import \"google/protobuf/empty.proto\";\n\
         service Greeter {\n  rpc Say(Word) returns (Word);\n  rpc Chat(stream Word) returns (stream Word);\n\
           rpc Quiet(google.protobuf.Empty) returns (google.protobuf.Empty);\n}\n",
    )
    .unwrap();
    let set = protox::compile(["demo/greet.proto"], [&dir]).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    set.file
        .into_iter()
        .filter(|f| f.name().starts_with("demo/"))
        .collect()
}

/// A scripted answer's body: its frames, in order.
type Scripted =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// A gRPC answer: HTTP 200, the message (if any), then `grpc-status` in the trailers.
fn grpc_answer(message: Option<Vec<u8>>, status: u8) -> hyper::Response<Scripted> {
    let mut frames = Vec::new();
    if let Some(m) = message {
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(m.len() as u32).to_be_bytes());
        framed.extend_from_slice(&m);
        frames.push(Ok(Frame::data(Bytes::from(framed))));
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", status.to_string().parse().unwrap());
    frames.push(Ok(Frame::trailers(trailers)));
    let mut resp = hyper::Response::new(StreamBody::new(futures_util::stream::iter(frames)));
    resp.headers_mut()
        .insert("content-type", "application/grpc".parse().unwrap());
    resp
}

/// The answer to one question in `mode`; `asked` records every question.
fn answer(mode: Mode, question: &Question, files: &[Vec<u8>]) -> Vec<Vec<u8>> {
    match mode {
        Mode::Honest => {
            let want = match question.file_containing_symbol.as_str() {
                "" => question.file_by_filename.as_str(),
                _ => "demo/greet.proto",
            };
            let file = files.iter().find(|f| {
                prost_reflect::prost_types::FileDescriptorProto::decode(&f[..])
                    .unwrap()
                    .name()
                    == want
            });
            vec![file.unwrap().clone()]
        }
        Mode::Huge => vec![vec![0u8; 5 << 20]],
        Mode::Garbage => vec![vec![0xff; 64]],
        Mode::Endless => {
            // `f0.proto` for the symbol, then `f(n+1).proto` for `f(n).proto`.
            let n: u64 = question
                .file_by_filename
                .trim_start_matches('f')
                .trim_end_matches(".proto")
                .parse()
                .unwrap_or(0);
            let file = prost_reflect::prost_types::FileDescriptorProto {
                name: Some(format!("f{n}.proto")),
                dependency: vec![format!("f{}.proto", n + 1)],
                ..Default::default()
            };
            vec![file.encode_to_vec()]
        }
    }
}

/// A server answering only v1alpha reflection, in `mode`, on a thread of its own; the
/// questions it was asked (path, symbol or file) come back through the returned list.
fn start(mode: Mode) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let files: Vec<Vec<u8>> = demo_files().iter().map(Message::encode_to_vec).collect();
    let files = Arc::new(files);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let log = asked.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            // Bounded: the test makes a handful of connections.
            for _ in 0..8 {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (files, log) = (files.clone(), log.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (files, log) = (files.clone(), log.clone());
                            async move {
                                let path = req.uri().path().to_string();
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let mut body = body.slice(5..);
                                let q = Question::decode(&mut body).unwrap();
                                let what =
                                    format!("{}{}", q.file_containing_symbol, q.file_by_filename);
                                log.lock().unwrap().push(format!("{path} {what}"));
                                if !path.starts_with("/grpc.reflection.v1alpha.") {
                                    // What grpc-go answers for a service it does not have.
                                    return Ok::<_, Infallible>(grpc_answer(None, 12));
                                }
                                let a = Answer {
                                    files: Some(Files {
                                        file_descriptor_proto: answer(mode, &q, &files),
                                    }),
                                };
                                Ok(grpc_answer(Some(a.encode_to_vec()), 0))
                            }
                        },
                    );
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(io, service)
                    .await;
                });
            }
        });
    });
    (addr, asked)
}

fn resolve(
    addr: SocketAddr,
    call: &str,
    data: Option<&str>,
) -> Result<tailguard_load::grpc::GrpcCall, String> {
    let target = Target::parse(&format!("http://{addr}")).unwrap();
    tailguard_load::reflection::resolve(&target, false, Duration::from_secs(5), Some(call), data)
        .map_err(|e| e.to_string())
}

#[test]
fn a_v1alpha_only_server_is_asked_again_and_its_imports_fetched() {
    let (addr, asked) = start(Mode::Honest);
    let call = resolve(
        addr,
        "demo.Greeter/Chat",
        Some(r#"[{"text": "a"}, {"text": "b"}]"#),
    )
    .unwrap();
    assert_eq!(call.kind, CallKind::Bidi);
    assert_eq!(call.path.as_str(), "/demo.Greeter/Chat");
    // Word{text: "a"}, Word{text: "b"}, framed.
    let messages: Vec<&[u8]> = call.messages.iter().map(|m| &m[..]).collect();
    assert_eq!(
        messages,
        [
            &[0u8, 0, 0, 0, 3, 0x0a, 1, b'a'][..],
            &[0, 0, 0, 0, 3, 0x0a, 1, b'b'][..]
        ]
    );
    let asked = asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo demo.Greeter",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo demo.Greeter",
            // The well-known import is known already; only the file's own import is asked.
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo demo/common.proto",
        ]
    );
    let (addr, _) = start(Mode::Honest);
    let quiet = resolve(addr, "demo.Greeter.Quiet", None).unwrap();
    assert_eq!(quiet.kind, CallKind::Unary);
    assert_eq!(&quiet.body[..], &[0, 0, 0, 0, 0]);
}

#[test]
fn hostile_answers_end_in_named_errors() {
    for (mode, says) in [
        (Mode::Huge, "an answer passes 4 MiB"),
        (Mode::Garbage, "an answer is not a file descriptor"),
        (Mode::Endless, "the service takes more than 256 files"),
    ] {
        let (addr, _) = start(mode);
        let err = resolve(addr, "demo.Greeter/Say", None).unwrap_err();
        assert!(err.contains("server reflection: "), "{err}");
        assert!(err.contains(says), "{err}");
    }
}
