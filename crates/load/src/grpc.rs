//! gRPC unary calls: which method, and the request message, decided once before the run.
//!
//! A call is named `package.Service/Method` (`package.Service.Method` is read the same way, as
//! ghz does). Three services are built in, their `.proto` text kept here and compiled at start:
//! the standard health check `grpc.health.v1.Health/Check` (the default), `tailguard serve`'s
//! `tailguard.serve.v1.Ping/Ping`, and fortio's ping `fgrpc.PingServer/Ping`
//! (`PingMessage{seq, ts, payload, delayNanos}`), so `tailguard load` drives a `fortio server`.
//! Any other unary method comes from `--proto` files, compiled at run time by `protox` (a
//! protobuf compiler in Rust, no `protoc`), with the request given as JSON and encoded by
//! `prost-reflect` (protobuf's JSON mapping: field names in lowerCamelCase or as declared).
//!
//! The request is encoded and framed once (a gRPC message: one flag byte, a 4-byte length, the
//! protobuf bytes); each call sends the same bytes, so a call costs what an HTTP/2 POST costs.

mod resolver;

pub use resolver::MAX_DEPTH;

use bytes::{BufMut, Bytes, BytesMut};
use http::uri::PathAndQuery;
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor};
use protox::file::{File, FileResolver};
use std::path::{Path, PathBuf};

/// The call every request of a gRPC run makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcCall {
    /// `package.Service/Method`.
    pub method: String,
    /// The request path, `/package.Service/Method`.
    pub path: PathAndQuery,
    /// The request message, framed for the wire.
    pub body: Bytes,
}

/// The method called when none is named.
pub const DEFAULT_CALL: &str = "grpc.health.v1.Health/Check";

/// Short names for the built-in methods.
const ALIASES: [(&str, &str); 3] = [
    ("health", "grpc.health.v1.Health/Check"),
    ("ping", "tailguard.serve.v1.Ping/Ping"),
    ("fortio", "fgrpc.PingServer/Ping"),
];

/// The built-in services, as `.proto` sources.
const BUILTIN_PROTOS: [(&str, &str); 3] = [
    (
        "grpc/health/v1/health.proto",
        r#"syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health { rpc Check(HealthCheckRequest) returns (HealthCheckResponse); }
"#,
    ),
    (
        "tailguard/serve/v1/ping.proto",
        r#"syntax = "proto3";
package tailguard.serve.v1;
message PingRequest { bytes payload = 1; }
message PingResponse { bytes payload = 1; string backend = 2; }
service Ping { rpc Ping(PingRequest) returns (PingResponse); }
"#,
    ),
    (
        "fgrpc/ping.proto",
        r#"syntax = "proto3";
package fgrpc;
message PingMessage {
  int64 seq = 1;
  int64 ts = 2;
  string payload = 3;
  int64 delayNanos = 4;
}
service PingServer { rpc Ping(PingMessage) returns (PingMessage); }
"#,
    ),
];

/// What is wrong with a call, its `.proto` files or its request.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrpcError {
    /// A `.proto` file that does not compile (or cannot be read).
    #[error("--proto: {0}")]
    Proto(String),
    /// A call name that is not `package.Service/Method`.
    #[error("--call {0:?}: expected package.Service/Method")]
    BadName(String),
    /// No such service or method.
    #[error("--call {call:?}: {reason}")]
    Unknown {
        /// The name given.
        call: String,
        /// What was not found, and what there is.
        reason: String,
    },
    /// A streaming method: only unary calls are load-tested.
    #[error("--call {0:?} streams; only unary methods can be called")]
    Streaming(String),
    /// The JSON request does not fit the method's input message.
    #[error("--data for {message}: {reason}")]
    Data {
        /// The input message's full name.
        message: String,
        /// The parser's complaint.
        reason: String,
    },
}

/// Resolves `call` (default [`DEFAULT_CALL`]) among the built-ins and the `protos` (compiled
/// with `imports` and each file's own directory as include paths), and encodes `data` (JSON;
/// none: the empty message) as its request.
///
/// # Errors
/// A `.proto` that does not compile, an unknown or streaming method, or JSON that does not fit.
pub fn resolve(
    call: Option<&str>,
    protos: &[PathBuf],
    imports: &[PathBuf],
    data: Option<&str>,
) -> Result<GrpcCall, GrpcError> {
    let given = call.unwrap_or(DEFAULT_CALL);
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == given)
        .map_or(given, |(_, full)| full);
    let (service, method) = split_name(name).ok_or_else(|| GrpcError::BadName(given.into()))?;
    let user = user_pool(protos, imports)?;
    let builtins = builtin_pool();
    let found = user
        .iter()
        .chain(std::iter::once(&builtins))
        .find_map(|pool| pool.get_service_by_name(service));
    let Some(svc) = found else {
        return Err(GrpcError::Unknown {
            call: given.into(),
            reason: format!(
                "no service {service} (built in: {}; others need --proto FILE)",
                builtin_services(&builtins)
            ),
        });
    };
    let Some(m) = svc.methods().find(|m| m.name() == method) else {
        let methods: Vec<String> = svc.methods().map(|m| m.name().to_string()).collect();
        return Err(GrpcError::Unknown {
            call: given.into(),
            reason: format!(
                "{service} has no method {method} (it has {})",
                methods.join(", ")
            ),
        });
    };
    if m.is_client_streaming() || m.is_server_streaming() {
        return Err(GrpcError::Streaming(given.into()));
    }
    let body = request(&m, data)?;
    let path = format!("/{service}/{method}")
        .parse()
        .map_err(|_| GrpcError::BadName(given.into()))?;
    Ok(GrpcCall {
        method: format!("{service}/{method}"),
        path,
        body,
    })
}

/// `pkg.Svc/Method` or `pkg.Svc.Method` into the service's full name and the method's.
fn split_name(name: &str) -> Option<(&str, &str)> {
    let name = name.trim_start_matches('/');
    let (service, method) = name.split_once('/').or_else(|| name.rsplit_once('.'))?;
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || "._".contains(c));
    (ok(service) && ok(method) && !method.contains('.')).then_some((service, method))
}

fn request(method: &MethodDescriptor, data: Option<&str>) -> Result<Bytes, GrpcError> {
    let input = method.input();
    let message = match data {
        None => DynamicMessage::new(input),
        Some(json) => {
            let mut de = serde_json::Deserializer::from_str(json);
            let msg = DynamicMessage::deserialize(input.clone(), &mut de)
                .and_then(|m| de.end().map(|()| m))
                .map_err(|e| GrpcError::Data {
                    message: input.full_name().to_string(),
                    reason: e.to_string(),
                })?;
            msg
        }
    };
    Ok(frame(&message.encode_to_vec()))
}

/// A gRPC message on the wire: uncompressed flag, big-endian length, the bytes.
pub(crate) fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    out.put_slice(message);
    out.freeze()
}

fn user_pool(protos: &[PathBuf], imports: &[PathBuf]) -> Result<Option<DescriptorPool>, GrpcError> {
    if protos.is_empty() {
        return Ok(None);
    }
    let mut includes: Vec<PathBuf> = imports.to_vec();
    for p in protos {
        if let Err(e) = std::fs::metadata(p) {
            return Err(GrpcError::Proto(format!("{}: {e}", p.display())));
        }
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        includes.push(dir.unwrap_or(Path::new(".")).to_path_buf());
    }
    let proto_err = |e: protox::Error| GrpcError::Proto(e.to_string());
    // Each file (an import too) is read within bounds before protox parses it.
    let mut compiler = protox::Compiler::with_file_resolver(resolver::Checked::new(includes));
    compiler.open_files(protos).map_err(proto_err)?;
    Ok(Some(compiler.descriptor_pool()))
}

/// Serves the built-in `.proto` sources to the compiler.
struct Builtins;

impl FileResolver for Builtins {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match BUILTIN_PROTOS.iter().find(|(file, _)| *file == name) {
            Some((file, source)) => File::from_source(file, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn builtin_pool() -> DescriptorPool {
    let mut compiler = protox::Compiler::with_file_resolver(Builtins);
    compiler
        .open_files(BUILTIN_PROTOS.iter().map(|(file, _)| *file))
        .expect("the built-in protos compile");
    compiler.descriptor_pool()
}

fn builtin_services(pool: &DescriptorPool) -> String {
    let names: Vec<String> = pool.services().map(|s| s.full_name().to_string()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_resolve_by_name_and_alias() {
        let health = resolve(None, &[], &[], None).unwrap();
        assert_eq!(health.method, "grpc.health.v1.Health/Check");
        assert_eq!(health.path.as_str(), "/grpc.health.v1.Health/Check");
        assert_eq!(
            &health.body[..],
            &[0, 0, 0, 0, 0],
            "an empty message, framed"
        );
        let fortio = resolve(Some("fortio"), &[], &[], None).unwrap();
        assert_eq!(fortio.method, "fgrpc.PingServer/Ping");
        let dotted = resolve(Some("tailguard.serve.v1.Ping.Ping"), &[], &[], None).unwrap();
        assert_eq!(dotted.path.as_str(), "/tailguard.serve.v1.Ping/Ping");
    }

    #[test]
    fn json_data_is_encoded_as_the_input_message() {
        let call = resolve(
            Some("fgrpc.PingServer/Ping"),
            &[],
            &[],
            Some(r#"{"seq": "7", "payload": "hi", "delayNanos": 1000}"#),
        )
        .unwrap();
        // seq=7 (field 1, varint), payload="hi" (field 3), delayNanos=1000 (field 4).
        let message = [0x08, 7, 0x1a, 2, b'h', b'i', 0x20, 0xe8, 0x07];
        assert_eq!(&call.body[..5], &[0, 0, 0, 0, message.len() as u8]);
        assert_eq!(&call.body[5..], &message);
    }

    #[test]
    fn mistakes_are_named() {
        let err = |call, data| resolve(Some(call), &[], &[], data).unwrap_err().to_string();
        assert!(err("nosuch.Svc/M", None).contains("no service nosuch.Svc (built in: "));
        assert!(err("fgrpc.PingServer/Pong", None).contains("has no method Pong (it has Ping)"));
        assert!(err("x", None).contains("expected package.Service/Method"));
        let bad = err("fgrpc.PingServer/Ping", Some(r#"{"sequence": 1}"#));
        assert!(
            bad.starts_with("--data for fgrpc.PingMessage: unrecognized field name"),
            "{bad}"
        );
        assert!(err("fgrpc.PingServer/Ping", Some("{")).contains("--data"));
    }

    #[test]
    fn a_proto_file_adds_methods_and_refuses_streams() {
        let dir = std::env::temp_dir().join(format!("tg-proto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("greet.proto");
        std::fs::write(
            &file,
            "syntax = \"proto3\";\npackage demo;\nmessage Hi { string name = 1; }\n\
             service Greeter { rpc Say(Hi) returns (Hi); rpc Many(Hi) returns (stream Hi); }\n",
        )
        .unwrap();
        let protos = [file.clone()];
        let call = resolve(
            Some("demo.Greeter/Say"),
            &protos,
            &[],
            Some(r#"{"name":"a"}"#),
        );
        assert_eq!(&call.unwrap().body[5..], &[0x0a, 1, b'a']);
        let streaming = resolve(Some("demo.Greeter/Many"), &protos, &[], None).unwrap_err();
        assert_eq!(streaming, GrpcError::Streaming("demo.Greeter/Many".into()));
        std::fs::write(&file, "syntax = \"proto3\";\nmessage {").unwrap();
        let broken = resolve(Some("demo.Greeter/Say"), &protos, &[], None).unwrap_err();
        assert!(broken.to_string().starts_with("--proto: "), "{broken}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
