//! Asking the server what a method is: gRPC server reflection, so `--call` needs no `--proto`
//! (as ghz and grpcurl do).
//!
//! The protocol (`grpc/reflection/v1/reflection.proto`): a bidirectional stream of questions
//! and answers. Each question here is a call of its own carrying one message (a server answers
//! each message it reads and ends the call when the client's stream ends): first the file that
//! declares the service (`file_containing_symbol`), then every file it imports that is not
//! known yet (`file_by_filename`), until the set is whole. `grpc.reflection.v1` is asked first;
//! a server that does not implement it (`UNIMPLEMENTED`, or HTTP 404) is asked again as
//! `grpc.reflection.v1alpha`, whose messages are the same.
//!
//! The server is not trusted: each answer is read within [`MAX_ANSWER`], the files within
//! [`MAX_FILES`] and [`MAX_TOTAL`], the whole exchange within a time bound, and every file
//! must decode as a `FileDescriptorProto` that the descriptor pool accepts.

use crate::config::{H1Client, Protocol};
use crate::conn::{Connector, DialError, HyperConn};
use crate::grpc::{GrpcCall, GrpcError};
use crate::request::ReqBody;
use crate::target::Target;
use bytes::{Buf, Bytes};
use http::header::{CONTENT_TYPE, TE, USER_AGENT};
use http::{HeaderValue, Method, Request, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::DescriptorPool;
use std::collections::{BTreeSet, VecDeque};

/// The longest answer read (the message and its trailers' worth of framing).
pub const MAX_ANSWER: usize = 4 << 20;
/// The most files one service's description may take.
pub const MAX_FILES: usize = 256;
/// The most bytes of file descriptors in all.
pub const MAX_TOTAL: usize = 16 << 20;

/// The two versions of the reflection service, in the order they are asked.
const SERVICES: [&str; 2] = [
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// `ServerReflectionRequest`, the two questions asked.
#[derive(Clone, PartialEq, prost::Message)]
struct Question {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(oneof = "Asked", tags = "3, 4")]
    asked: Option<Asked>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Asked {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
}

/// `ServerReflectionResponse`, the two answers read.
#[derive(Clone, PartialEq, prost::Message)]
struct Answer {
    #[prost(oneof = "Answered", tags = "4, 7")]
    answered: Option<Answered>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Answered {
    #[prost(message, tag = "4")]
    Files(Files),
    #[prost(message, tag = "7")]
    Error(Refusal),
}

/// `FileDescriptorResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct Files {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

/// `ErrorResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct Refusal {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// The longest describing a service may take in all (connection, questions, answers).
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Resolves `call` by asking `target`'s reflection service what it is, and encodes `data` as
/// its request (as [`crate::grpc::resolve`] does with `.proto` files). Blocks, on a runtime of
/// its own, for at most `timeout` (and never more than [`MAX_TIMEOUT`]).
///
/// # Errors
/// No connection, no reflection service, a service or method it does not know, or `data`
/// that does not fit.
pub fn resolve(
    target: &Target,
    insecure: bool,
    timeout: std::time::Duration,
    call: Option<&str>,
    data: Option<&str>,
) -> Result<GrpcCall, GrpcError> {
    let timeout = timeout.min(MAX_TIMEOUT);
    let given = call.unwrap_or(crate::grpc::DEFAULT_CALL).to_string();
    let fail = |reason: String| GrpcError::Reflection {
        call: given.clone(),
        reason,
    };
    let Some(service) = crate::grpc::needs_reflection(call) else {
        return crate::grpc::resolve(call, &[], &[], data);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let pool = rt.block_on(async {
        let asking = async {
            let connector = Connector::new(
                Protocol::Http2,
                insecure,
                target.tls,
                0,
                H1Client::Hyper,
                &[],
            );
            let conn = connector
                .dial(target)
                .await
                .map_err(|e| dial_error(&e, target))?;
            let HyperConn::H2(send) = conn else {
                return Err(format!("{} does not speak HTTP/2", target.addr));
            };
            let mut server = Server {
                send,
                scheme: if target.tls { "https" } else { "http" },
                authority: target.authority.clone(),
            };
            describe(&mut server, &service).await
        };
        match tokio::time::timeout(timeout, asking).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "no answer within {}",
                tailguard_text::duration::format_duration(timeout)
            )),
        }
    });
    let pool = pool.map_err(&fail)?;
    if pool.get_service_by_name(&service).is_none() {
        return Err(fail(format!("its answer does not describe {service}")));
    }
    crate::grpc::resolve_with(&pool, call, data)
}

/// Why `target` could not be reached, for the user.
fn dial_error(e: &DialError, target: &Target) -> String {
    match e {
        DialError::Connect(e) => format!("cannot connect to {}: {e}", target.addr),
        DialError::ServerName => format!("{:?} is not a TLS server name", target.host),
        DialError::Tls(e) => format!("TLS with {}: {e}", target.addr),
        DialError::NoH2 => format!("{} did not choose HTTP/2 (ALPN)", target.addr),
        DialError::Http(e) => format!("HTTP/2 with {}: {e}", target.addr),
    }
}

/// Where the questions go: an HTTP/2 connection to the server and its scheme and authority.
pub(crate) struct Server {
    pub send: SendRequest<ReqBody>,
    pub scheme: &'static str,
    pub authority: http::uri::Authority,
}

/// Why one question got no usable answer.
#[derive(Debug)]
enum Failure {
    /// This version of the service is not there.
    Unimplemented,
    /// Anything else: the reason, for the user.
    Other(String),
}

/// The files describing `service` as `server` gives them, in a pool with the well-known types.
pub(crate) async fn describe(server: &mut Server, service: &str) -> Result<DescriptorPool, String> {
    let mut failure = String::new();
    for path in SERVICES {
        match describe_with(server, path, service).await {
            Ok(pool) => return Ok(pool),
            Err(Failure::Unimplemented) => {
                failure = "the server implements neither grpc.reflection.v1 nor v1alpha".into();
            }
            Err(Failure::Other(reason)) => return Err(reason),
        }
    }
    Err(failure)
}

async fn describe_with(
    server: &mut Server,
    path: &'static str,
    service: &str,
) -> Result<DescriptorPool, Failure> {
    let mut pool = DescriptorPool::global();
    let mut files: Vec<FileDescriptorProto> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut total = 0usize;
    let mut asking = VecDeque::from([Asked::FileContainingSymbol(service.to_string())]);
    while let Some(asked) = asking.pop_front() {
        for bytes in ask(server, path, asked).await? {
            total += bytes.len();
            if total > MAX_TOTAL {
                return Err(Failure::Other(format!(
                    "the descriptors pass {} MiB",
                    MAX_TOTAL >> 20
                )));
            }
            let file = FileDescriptorProto::decode(bytes.as_slice())
                .map_err(|e| Failure::Other(format!("an answer is not a file descriptor: {e}")))?;
            let name = file.name().to_string();
            if !seen.insert(name) {
                continue;
            }
            for dep in &file.dependency {
                let known = seen.contains(dep) || pool.get_file_by_name(dep).is_some();
                let queued = asking
                    .iter()
                    .any(|a| matches!(a, Asked::FileByFilename(f) if f == dep));
                if !known && !queued {
                    asking.push_back(Asked::FileByFilename(dep.clone()));
                }
            }
            files.push(file);
            if files.len() > MAX_FILES {
                return Err(Failure::Other(format!(
                    "the service takes more than {MAX_FILES} files"
                )));
            }
        }
    }
    pool.add_file_descriptor_protos(files)
        .map_err(|e| Failure::Other(format!("the descriptors do not build: {e}")))?;
    Ok(pool)
}

/// One question, one answer: the file descriptors it carries.
async fn ask(
    server: &mut Server,
    path: &'static str,
    asked: Asked,
) -> Result<Vec<Vec<u8>>, Failure> {
    let named = match &asked {
        Asked::FileByFilename(f) => format!("file {f}"),
        Asked::FileContainingSymbol(s) => format!("symbol {s}"),
    };
    let question = Question {
        host: String::new(),
        asked: Some(asked),
    };
    let uri = Uri::builder()
        .scheme(server.scheme)
        .authority(server.authority.clone())
        .path_and_query(path)
        .build()
        .map_err(|e| Failure::Other(e.to_string()))?;
    let mut req = Request::new(ReqBody::Full(Full::new(crate::grpc::frame(
        &question.encode_to_vec(),
    ))));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_2;
    let headers = req.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    headers.insert(USER_AGENT, HeaderValue::from_static(crate::USER_AGENT));
    let other = |e: &dyn std::fmt::Display| Failure::Other(e.to_string());
    server.send.ready().await.map_err(|e| other(&e))?;
    let resp = server.send.send_request(req).await.map_err(|e| other(&e))?;
    let (parts, mut body) = resp.into_parts();
    if parts.status == http::StatusCode::NOT_FOUND {
        return Err(Failure::Unimplemented);
    }
    if parts.status != http::StatusCode::OK {
        return Err(Failure::Other(format!("HTTP {}", parts.status.as_u16())));
    }
    let mut status = tailguard_http::grpc::status(&parts.headers);
    let mut message = tailguard_http::grpc::message(&parts.headers, 200).unwrap_or_default();
    let mut data = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| other(&e))?;
        if let Some(chunk) = frame.data_ref() {
            if data.len() + chunk.len() > MAX_ANSWER {
                return Err(Failure::Other(format!(
                    "an answer passes {} MiB",
                    MAX_ANSWER >> 20
                )));
            }
            data.extend_from_slice(chunk);
        } else if let Some(trailers) = frame.trailers_ref() {
            status = status.or_else(|| tailguard_http::grpc::status(trailers));
            message = tailguard_http::grpc::message(trailers, 200).unwrap_or_default();
        }
    }
    match status {
        Some(0) => {}
        Some(12) => return Err(Failure::Unimplemented),
        Some(code) => {
            let name = tailguard_record::grpc_name(code);
            return Err(Failure::Other(format!("{name} {message}").trim().into()));
        }
        None => return Err(Failure::Other("an answer with no grpc-status".into())),
    }
    let answer = first_message(data.freeze())
        .ok_or_else(|| Failure::Other(format!("no answer about {named}")))?;
    let answer = Answer::decode(answer).map_err(|e| other(&e))?;
    match answer.answered {
        Some(Answered::Files(f)) => Ok(f.file_descriptor_proto),
        Some(Answered::Error(r)) => Err(Failure::Other(format!(
            "{named}: {} (code {})",
            r.error_message.chars().take(200).collect::<String>(),
            r.error_code
        ))),
        None => Err(Failure::Other(format!("an empty answer about {named}"))),
    }
}

/// The first gRPC message of `data` (uncompressed), if it holds a whole one.
fn first_message(mut data: Bytes) -> Option<Bytes> {
    if data.len() < 5 || data[0] != 0 {
        return None;
    }
    data.advance(1);
    let len = data.get_u32() as usize;
    (data.len() >= len).then(|| data.split_to(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_and_answers_have_the_reflection_protos_wire_format() {
        // host "" is not written; file_containing_symbol (4) "a.B".
        let q = Question {
            host: String::new(),
            asked: Some(Asked::FileContainingSymbol("a.B".into())),
        };
        assert_eq!(q.encode_to_vec(), [0x22, 3, b'a', b'.', b'B']);
        // file_descriptor_response (4) { file_descriptor_proto (1): "xy" }.
        let a = Answer::decode(&[0x22, 4, 0x0a, 2, b'x', b'y'][..]).unwrap();
        assert_eq!(
            a.answered,
            Some(Answered::Files(Files {
                file_descriptor_proto: vec![b"xy".to_vec()]
            }))
        );
        assert_eq!(
            first_message(Bytes::from_static(&[0, 0, 0, 0, 2, 7, 8, 9])).unwrap(),
            &[7, 8][..]
        );
        assert!(first_message(Bytes::from_static(&[0, 0, 0, 0, 9, 7])).is_none());
        assert!(first_message(Bytes::from_static(&[1, 0, 0, 0, 0])).is_none());
    }
}
