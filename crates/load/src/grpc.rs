//! gRPC calls: which method, of which kind, and the request messages, decided once before the
//! run.
//!
//! A call is named `package.Service/Method` (`package.Service.Method` is read the same way, as
//! ghz does). Three services are built in, their `.proto` text kept here and compiled at start:
//! the standard health check `grpc.health.v1.Health/Check` (the default), `tailguard serve`'s
//! `tailguard.serve.v1.Ping` (`Ping`, and a streaming method of each kind: `Stream`, `Collect`,
//! `Echo`), and fortio's ping `fgrpc.PingServer/Ping` (`PingMessage{seq, ts, payload,
//! delayNanos}`), so `tailguard load` drives a `fortio server`. Any other method comes from
//! `--proto` files, compiled at run time by `protox` (a protobuf compiler in Rust, no
//! `protoc`), or, with no `--proto`, from the server's own reflection service
//! ([`crate::reflection`]).
//! The request is JSON encoded by `prost-reflect` (protobuf's JSON mapping: field names in
//! lowerCamelCase or as declared): one object, or for a client or bidirectional stream an
//! array, one element per message.
//!
//! Every message is encoded and framed once (a gRPC message: one flag byte, a 4-byte length,
//! the protobuf bytes); each call sends the same bytes, so a unary call costs what an HTTP/2
//! POST costs.

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
    /// The request message (a stream's first), framed for the wire.
    pub body: Bytes,
    /// Unary or which kind of stream.
    pub kind: CallKind,
    /// Every request message, framed, in order: one, or a client stream's array.
    pub messages: Vec<Bytes>,
}

/// The four kinds of gRPC method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// One message each way.
    Unary,
    /// One request message, a stream of answers.
    ServerStream,
    /// A stream of request messages, one answer.
    ClientStream,
    /// Streams both ways.
    Bidi,
}

impl CallKind {
    /// The kind of method `m`.
    pub fn of(m: &MethodDescriptor) -> CallKind {
        match (m.is_client_streaming(), m.is_server_streaming()) {
            (false, false) => CallKind::Unary,
            (false, true) => CallKind::ServerStream,
            (true, false) => CallKind::ClientStream,
            (true, true) => CallKind::Bidi,
        }
    }

    /// The client sends a stream of messages.
    pub fn client_streams(self) -> bool {
        matches!(self, CallKind::ClientStream | CallKind::Bidi)
    }

    /// As the report names it.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Unary => "unary",
            CallKind::ServerStream => "server streaming",
            CallKind::ClientStream => "client streaming",
            CallKind::Bidi => "bidirectional streaming",
        }
    }
}

/// The most messages `--data` may give as an array.
pub const MAX_DATA_MESSAGES: usize = 10_000;

/// The method called when none is named.
pub const DEFAULT_CALL: &str = "grpc.health.v1.Health/Check";

/// Short names for the built-in methods.
const ALIASES: [(&str, &str); 3] = [
    ("health", "grpc.health.v1.Health/Check"),
    ("ping", "tailguard.serve.v1.Ping/Ping"),
    ("fortio", "fgrpc.PingServer/Ping"),
];

/// The built-in services, as `.proto` sources: the repository's `proto/` files, the ones
/// `tailguard serve` answers (and its reflection describes).
const BUILTIN_PROTOS: [(&str, &str); 3] = [
    (
        "grpc/health/v1/health.proto",
        include_str!("../../../proto/grpc/health/v1/health.proto"),
    ),
    (
        "tailguard/serve/v1/ping.proto",
        include_str!("../../../proto/tailguard/serve/v1/ping.proto"),
    ),
    (
        "fgrpc/ping.proto",
        include_str!("../../../proto/fgrpc/ping.proto"),
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
    /// The server's reflection service could not say what the method is.
    #[error("--call {call:?}: server reflection: {reason} (give the method's --proto instead)")]
    Reflection {
        /// The name given.
        call: String,
        /// What went wrong.
        reason: String,
    },
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
    let user = user_pool(protos, imports)?;
    let builtins = builtin_pool();
    let pools: Vec<&DescriptorPool> = user.iter().chain(std::iter::once(&builtins)).collect();
    resolve_in(&pools, given, data)
}

/// The service `call` (an alias or a full name) names, when it is not a built-in one: the
/// service a server's reflection is asked about. `None` for a built-in or a malformed name.
pub fn needs_reflection(call: Option<&str>) -> Option<String> {
    let given = call.unwrap_or(DEFAULT_CALL);
    let name = full_name(given);
    let (service, _) = split_name(name)?;
    builtin_pool()
        .get_service_by_name(service)
        .is_none()
        .then(|| service.to_string())
}

/// Resolves `call` among the services of `pool` (a server's, from its reflection) and the
/// built-ins.
///
/// # Errors
/// As [`resolve`].
pub fn resolve_with(
    pool: &DescriptorPool,
    call: Option<&str>,
    data: Option<&str>,
) -> Result<GrpcCall, GrpcError> {
    let builtins = builtin_pool();
    resolve_in(&[pool, &builtins], call.unwrap_or(DEFAULT_CALL), data)
}

fn full_name(given: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == given)
        .map_or(given, |(_, full)| full)
}

fn resolve_in(
    pools: &[&DescriptorPool],
    given: &str,
    data: Option<&str>,
) -> Result<GrpcCall, GrpcError> {
    let name = full_name(given);
    let (service, method) = split_name(name).ok_or_else(|| GrpcError::BadName(given.into()))?;
    let builtins = pools.last().copied().cloned().unwrap_or_else(builtin_pool);
    let found = pools
        .iter()
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
    let kind = CallKind::of(&m);
    let messages = requests(&m, kind, data)?;
    let path = format!("/{service}/{method}")
        .parse()
        .map_err(|_| GrpcError::BadName(given.into()))?;
    Ok(GrpcCall {
        method: format!("{service}/{method}"),
        path,
        body: messages[0].clone(),
        kind,
        messages,
    })
}

/// `pkg.Svc/Method` or `pkg.Svc.Method` into the service's full name and the method's.
fn split_name(name: &str) -> Option<(&str, &str)> {
    let name = name.trim_start_matches('/');
    let (service, method) = name.split_once('/').or_else(|| name.rsplit_once('.'))?;
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || "._".contains(c));
    (ok(service) && ok(method) && !method.contains('.')).then_some((service, method))
}

/// The request messages `data` gives, framed: none, the empty message; an object, that
/// message; an array (client and bidirectional streams only), one message per element.
fn requests(
    method: &MethodDescriptor,
    kind: CallKind,
    data: Option<&str>,
) -> Result<Vec<Bytes>, GrpcError> {
    let input = method.input();
    let fail = |reason: String| GrpcError::Data {
        message: input.full_name().to_string(),
        reason,
    };
    let Some(json) = data else {
        return Ok(vec![frame(
            &DynamicMessage::new(input.clone()).encode_to_vec(),
        )]);
    };
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| fail(e.to_string()))?;
    let values = match value {
        serde_json::Value::Array(items) if kind.client_streams() => items,
        serde_json::Value::Array(_) => {
            return Err(fail(format!(
                "an array gives a stream's messages, and {} sends one (give an object)",
                kind.name()
            )))
        }
        one => vec![one],
    };
    if values.is_empty() {
        return Err(fail("an empty array: no message to send".into()));
    }
    if values.len() > MAX_DATA_MESSAGES {
        return Err(fail(format!(
            "{} messages; at most {MAX_DATA_MESSAGES}",
            values.len()
        )));
    }
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let msg = DynamicMessage::deserialize(input.clone(), v).map_err(|e| {
                match kind.client_streams() {
                    true => fail(format!("message {}: {e}", i + 1)),
                    false => fail(e.to_string()),
                }
            })?;
            Ok(frame(&msg.encode_to_vec()))
        })
        .collect()
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
    fn a_proto_file_adds_methods_of_every_kind() {
        let dir = std::env::temp_dir().join(format!("tg-proto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("greet.proto");
        std::fs::write(
            &file,
            "syntax = \"proto3\";\npackage demo;\nmessage Hi { string name = 1; }\n\
             service Greeter { rpc Say(Hi) returns (Hi); rpc Many(Hi) returns (stream Hi);\n\
             rpc Gather(stream Hi) returns (Hi); rpc Talk(stream Hi) returns (stream Hi); }\n",
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
        let kind = |m: &str| resolve(Some(m), &protos, &[], None).unwrap().kind;
        assert_eq!(kind("demo.Greeter/Say"), CallKind::Unary);
        assert_eq!(kind("demo.Greeter/Many"), CallKind::ServerStream);
        assert_eq!(kind("demo.Greeter/Gather"), CallKind::ClientStream);
        assert_eq!(kind("demo.Greeter/Talk"), CallKind::Bidi);
        // A client stream's array: one message per element, in order.
        let talk = resolve(
            Some("demo.Greeter/Talk"),
            &protos,
            &[],
            Some(r#"[{"name":"a"}, {}, {"name":"b"}]"#),
        )
        .unwrap();
        let messages: Vec<&[u8]> = talk.messages.iter().map(|m| &m[5..]).collect();
        assert_eq!(messages, [&[0x0a, 1, b'a'][..], &[], &[0x0a, 1, b'b']]);
        assert_eq!(talk.body, talk.messages[0]);
        let many = resolve(Some("demo.Greeter/Many"), &protos, &[], Some("[{}]"));
        assert!(many
            .unwrap_err()
            .to_string()
            .contains("server streaming sends one"));
        std::fs::write(&file, "syntax = \"proto3\";\nmessage {").unwrap();
        let broken = resolve(Some("demo.Greeter/Say"), &protos, &[], None).unwrap_err();
        assert!(broken.to_string().starts_with("--proto: "), "{broken}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
