//! gRPC on the backend port: a ping service that obeys the backend's behaviour, and the
//! standard health service.
//!
//! - `/tailguard.serve.v1.Ping/Ping` (`PingRequest{payload}` -> `PingResponse{payload,
//!   backend}`): decided like any request. A 5xx outcome becomes gRPC status `UNAVAILABLE`
//!   (HTTP status 200 with `grpc-status: 14`, as gRPC carries errors in trailers); close and
//!   reset end the connection. This is the service fortio's `grpcping` plays in seed 003.
//! - `/fgrpc.PingServer/Ping`, fortio's ping (`PingMessage{seq, ts, payload, delayNanos}`),
//!   decided the same way, so `fortio load -grpc -ping` can drive a `tailguard serve`. The answer
//!   echoes `seq`, `payload` and `delayNanos` and sets `ts` to the server's clock in Unix
//!   nanoseconds, as fortio's server does. `delayNanos` sets the latency only under
//!   `--overrides` (as `?delay=` does for HTTP), at most 10 s.
//! - `/grpc.health.v1.Health/*` from tonic-health, always `SERVING` (a paused or down backend
//!   does not answer at all).
//! - `/grpc.reflection.v1.ServerReflection/*` and `/grpc.reflection.v1alpha...` (tonic's
//!   reflection), so ghz, grpcurl and Postman find these services and their messages with no
//!   `.proto` at hand. The descriptors are the repository's `proto/` files, compiled by
//!   `build.rs` with protox.
//!
//! The messages are written by hand with prost's derive (no code generation); a test holds
//! them to the repository's `proto/` files, field by field.
//!
//! A request is hostile input. Its messages reach tonic only whole and checked
//! ([`frames`]: within a bound per call, 64 KiB for reflection and health, tonic's 4 MiB for
//! a ping; a flag of 0, protobuf a reflection request can decode), so every violation ends the
//! call with a non-OK status, even on reflection, whose service would end its stream `OK`
//! after a read error. Every answer's `grpc-message` is cut to 1 KiB ([`status`]), as it may
//! quote the client.

mod frames;
mod messages;
mod status;
mod streams;

pub use messages::{PingMessage, PingRequest, PingResponse};
pub use streams::{COLLECT_PATH, ECHO_PATH, STREAM_PATH};

use crate::service::{BackendService, RespBody};
use frames::{Checked, Limits};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::future::Future;
use std::pin::Pin;
use tailguard_fleet::Decision;
use tokio::time::Instant;
use tonic::codegen::Service;
use tonic::server::UnaryService;
use tonic::Status;

/// The repository's `proto/` files as a descriptor set (`build.rs`).
pub const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

/// A request as serve hands it to tonic: its body checked ([`frames`]).
type Call = Request<Checked<Incoming>>;

/// tonic's answer.
type Answer = Response<tonic::body::Body>;

/// An answer to come, boxed (the reflection services' types are opaque).
type Answering = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// The reflection services, v1 and v1alpha, over [`DESCRIPTORS`]: built once, each call
/// answered by a clone.
static REFLECTION: std::sync::LazyLock<Box<dyn Fn(Call) -> Answering + Send + Sync>> =
    std::sync::LazyLock::new(|| {
        let builder = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(DESCRIPTORS)
        };
        let v1 = builder().build_v1().expect("proto/ compiled by build.rs");
        let v1alpha = builder()
            .build_v1alpha()
            .expect("proto/ compiled by build.rs");
        Box::new(move |req: Call| -> Answering {
            let alpha = req.uri().path().starts_with("/grpc.reflection.v1alpha.");
            let (mut v1, mut v1alpha) = (v1.clone(), v1alpha.clone());
            Box::pin(async move {
                let answered = match alpha {
                    true => v1alpha.call(req).await,
                    false => v1.call(req).await,
                };
                match answered {
                    Ok(resp) => resp,
                    Err(never) => match never {},
                }
            })
        })
    });

/// The ping method's path.
pub const PING_PATH: &str = "/tailguard.serve.v1.Ping/Ping";

/// fortio's ping method's path.
pub const FORTIO_PING_PATH: &str = "/fgrpc.PingServer/Ping";

/// The longest `delayNanos` a fortio ping may ask for.
const MAX_PING_DELAY: std::time::Duration = std::time::Duration::from_secs(10);

/// True for gRPC requests (`application/grpc`, `+proto` and the like; not gRPC-Web, whose
/// framing this backend does not speak).
pub(crate) fn is_grpc<B>(req: &Request<B>) -> bool {
    tailguard_http::grpc::is_grpc(req.headers())
}

/// Answers one gRPC request: its body checked on the way in, its status on the way out.
pub(crate) async fn handle(
    svc: BackendService,
    req: Request<Incoming>,
    arrival: Instant,
) -> Response<RespBody> {
    let path = req.uri().path();
    let limits = if is_reflection(path) {
        Limits::REFLECTION
    } else if path.starts_with(HEALTH_PREFIX) {
        Limits::HEALTH
    } else if path == COLLECT_PATH || path == ECHO_PATH {
        Limits::STREAM
    } else {
        Limits::PING
    };
    let (parts, body) = req.into_parts();
    let body = Checked::new(body, &parts.headers, limits);
    let verdict = body.verdict();
    let answer = route(svc, Request::from_parts(parts, body), arrival).await;
    status::settle(answer, verdict).map(Either::Right)
}

/// The health service's path prefix.
const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

fn is_reflection(path: &str) -> bool {
    path.starts_with("/grpc.reflection.v1.ServerReflection/")
        || path.starts_with("/grpc.reflection.v1alpha.ServerReflection/")
}

/// Routes one gRPC request to its service.
async fn route(svc: BackendService, req: Call, arrival: Instant) -> Answer {
    let path = req.uri().path();
    if is_reflection(path) {
        return REFLECTION(req).await;
    }
    if path.starts_with(HEALTH_PREFIX) {
        let mut health = svc.backend.health.clone();
        return match health.call(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    }
    if ![
        PING_PATH,
        FORTIO_PING_PATH,
        STREAM_PATH,
        COLLECT_PATH,
        ECHO_PATH,
    ]
    .contains(&path)
    {
        return Status::unimplemented(format!("no method {path}")).into_http();
    }
    ping(svc, req, arrival).await
}

/// A ping, tailguard's or fortio's: decided and answered like any request of the backend.
async fn ping(svc: BackendService, req: Call, arrival: Instant) -> Answer {
    // The latency estimate a load probe reads counts from arrival, the wait included.
    let (rif, arrived) = (svc.backend.arrival_rif(), arrival);
    let backend = std::sync::Arc::clone(&svc.backend);
    // A backend with a capacity: wait for a worker, held until the call ends; the service
    // starts when it is taken.
    let (_worker, arrival) = match svc.backend.worker(arrival).await {
        Ok(turn) => turn,
        Err(status) => {
            svc.backend
                .counters
                .record(tailguard_fleet::Outcome::Respond { status });
            let full = format!("{} is at capacity", svc.backend.name());
            return Status::unavailable(full).into_http();
        }
    };
    let decision = match svc.decide(arrival, None) {
        Ok((decision, _)) => decision,
        Err(message) => return Status::invalid_argument(message).into_http(),
    };
    let path = req.uri().path();
    let streams = |svc, decision| streams::Streams {
        svc,
        arrival,
        decision,
    };
    let codec = || tonic_prost::ProstCodec::<PingResponse, PingRequest>::default();
    let resp = if path == STREAM_PATH {
        let call = streams(svc, decision);
        tonic::server::Grpc::new(codec())
            .server_streaming(call, req)
            .await
    } else if path == COLLECT_PATH {
        let call = streams(svc, decision);
        tonic::server::Grpc::new(codec())
            .client_streaming(call, req)
            .await
    } else if path == ECHO_PATH {
        let call = streams(svc, decision);
        tonic::server::Grpc::new(codec()).streaming(call, req).await
    } else if path == FORTIO_PING_PATH {
        let answer = fortio_answer;
        let ping = Ping {
            svc,
            arrival,
            decision,
            answer,
        };
        let codec = tonic_prost::ProstCodec::<PingMessage, PingMessage>::default();
        tonic::server::Grpc::new(codec).unary(ping, req).await
    } else {
        let answer = tailguard_answer;
        let ping = Ping {
            svc,
            arrival,
            decision,
            answer,
        };
        tonic::server::Grpc::new(codec()).unary(ping, req).await
    };
    backend.served(rif, arrived.elapsed());
    resp
}

/// The answer to a tailguard ping, and no latency of its own.
fn tailguard_answer(
    request: PingRequest,
    backend: String,
    _: bool,
) -> (PingResponse, Option<std::time::Duration>) {
    let response = PingResponse {
        payload: request.payload,
        backend,
        count: 1,
    };
    (response, None)
}

/// The answer to a fortio ping, and the latency it asks for when overrides are on.
fn fortio_answer(
    request: PingMessage,
    _: String,
    overrides: bool,
) -> (PingMessage, Option<std::time::Duration>) {
    let delay = (overrides && request.delay_nanos > 0).then(|| {
        std::time::Duration::from_nanos(request.delay_nanos.unsigned_abs()).min(MAX_PING_DELAY)
    });
    let response = PingMessage {
        ts: unix_nanos(),
        ..request
    };
    (response, delay)
}

/// The wall clock in Unix nanoseconds (fortio's ping carries it; never used for timing).
#[allow(clippy::disallowed_methods)] // A timestamp for the peer, not a measurement.
fn unix_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One ping call with its decision already made; `answer` builds the response from the
/// request (and may ask for a latency of its own).
struct Ping<Req, Resp> {
    svc: BackendService,
    arrival: Instant,
    decision: Decision,
    answer: fn(Req, String, bool) -> (Resp, Option<std::time::Duration>),
}

type PingFuture<Resp> = Pin<Box<dyn Future<Output = Result<tonic::Response<Resp>, Status>> + Send>>;

impl<Req, Resp> UnaryService<Req> for Ping<Req, Resp>
where
    Req: Send + 'static,
    Resp: Send + 'static,
{
    type Response = Resp;
    type Future = PingFuture<Resp>;

    fn call(&mut self, request: tonic::Request<Req>) -> Self::Future {
        let svc = self.svc.clone();
        let (arrival, mut decision, answer) = (self.arrival, self.decision, self.answer);
        Box::pin(async move {
            let backend = svc.backend.name().to_owned();
            let overrides = svc.backend.shared.overrides;
            let counters = &svc.backend.counters;
            counters.received.inc();
            let (response, delay) = answer(request.into_inner(), backend.clone(), overrides);
            if let Some(delay) = delay {
                decision.latency = delay;
            }
            match svc.act(arrival, decision).await {
                Some(status) if status < 500 => {
                    svc.backend.counters.sent.inc();
                    Ok(tonic::Response::new(response))
                }
                Some(status) => Err(Status::unavailable(format!(
                    "{backend} failed on purpose (HTTP {status})"
                ))),
                None => Err(Status::internal("connection was to be closed")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use prost_reflect::{DescriptorPool, DynamicMessage, Value};

    /// `msg` encoded by its hand-written type, decoded as `name` of `proto/`: the fields read
    /// back by their `.proto` names.
    fn as_proto(msg: &impl Message, name: &str) -> DynamicMessage {
        let pool = DescriptorPool::decode(DESCRIPTORS).unwrap();
        let desc = pool.get_message_by_name(name).unwrap();
        DynamicMessage::decode(desc, msg.encode_to_vec().as_slice()).unwrap()
    }

    #[test]
    fn the_hand_written_messages_are_the_protos() {
        let req = as_proto(
            &PingRequest {
                payload: b"hi".to_vec(),
                count: 3,
            },
            "tailguard.serve.v1.PingRequest",
        );
        assert_eq!(
            req.get_field_by_name("payload")
                .unwrap()
                .as_bytes()
                .unwrap()
                .as_ref(),
            b"hi"
        );
        let resp = PingResponse {
            payload: b"hi".to_vec(),
            backend: "a".into(),
            count: 4,
        };
        let resp = as_proto(&resp, "tailguard.serve.v1.PingResponse");
        assert_eq!(
            resp.get_field_by_name("backend").unwrap().as_str(),
            Some("a")
        );
        assert_eq!(
            resp.get_field_by_name("count").unwrap().into_owned(),
            Value::U32(4)
        );
        let fortio = PingMessage {
            seq: 7,
            ts: 8,
            payload: "p".into(),
            delay_nanos: 9,
        };
        let m = as_proto(&fortio, "fgrpc.PingMessage");
        let field = |n: &str| m.get_field_by_name(n).unwrap().into_owned();
        assert_eq!(field("seq"), Value::I64(7));
        assert_eq!(field("ts"), Value::I64(8));
        assert_eq!(field("payload"), Value::String("p".into()));
        assert_eq!(field("delayNanos"), Value::I64(9));
        // Every method answered here is in the descriptors, under the path it is served at.
        let pool = DescriptorPool::decode(DESCRIPTORS).unwrap();
        let paths: Vec<String> = pool
            .services()
            .flat_map(|s| {
                s.methods()
                    .map(|m| format!("/{}/{}", s.full_name(), m.name()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let served = [
            PING_PATH,
            STREAM_PATH,
            COLLECT_PATH,
            ECHO_PATH,
            FORTIO_PING_PATH,
        ];
        for path in served.into_iter().chain(["/grpc.health.v1.Health/Check"]) {
            assert!(paths.iter().any(|p| p == path), "{path}: {paths:?}");
        }
    }
}
