//! gRPC on the backend port: a ping service that obeys the backend's behaviour, and the
//! standard health service.
//!
//! - `/tailguard.serve.v1.Ping/Ping` (`PingRequest{payload}` -> `PingResponse{payload,
//!   backend}`): decided like any request. A 5xx outcome becomes gRPC status `UNAVAILABLE`
//!   (HTTP status 200 with `grpc-status: 14`, as gRPC carries errors in trailers); close and
//!   reset end the connection. This is the service fortio's `grpcping` plays in seed 003.
//! - `/grpc.health.v1.Health/*` from tonic-health, always `SERVING` (a paused or down backend
//!   does not answer at all).
//!
//! The messages are written by hand with prost's derive, so the build needs no protoc:
//! ```proto
//! syntax = "proto3";
//! package tailguard.serve.v1;
//! service Ping { rpc Ping(PingRequest) returns (PingResponse); }
//! message PingRequest { bytes payload = 1; }
//! message PingResponse { bytes payload = 1; string backend = 2; }
//! ```

use crate::service::{BackendService, RespBody};
use http::header::CONTENT_TYPE;
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
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

/// The ping method's path.
pub const PING_PATH: &str = "/tailguard.serve.v1.Ping/Ping";

/// Ping request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PingRequest {
    /// Echoed back.
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
}

/// Ping response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PingResponse {
    /// The request's payload.
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    /// The backend that answered.
    #[prost(string, tag = "2")]
    pub backend: String,
}

/// True for gRPC requests.
pub fn is_grpc<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A health server reporting `SERVING`.
pub fn health_server() -> HealthServer<HealthService> {
    HealthServer::new(HealthService::from_health_reporter(HealthReporter::new()))
}

/// Routes one gRPC request.
pub async fn handle(
    svc: BackendService,
    req: Request<Incoming>,
    arrival: Instant,
) -> Response<RespBody> {
    let path = req.uri().path();
    if path.starts_with("/grpc.health.v1.Health/") {
        let mut health = svc.backend.health.clone();
        return match health.call(req).await {
            Ok(resp) => resp.map(Either::Right),
            Err(never) => match never {},
        };
    }
    if path != PING_PATH {
        return Status::unimplemented(format!("no method {path}"))
            .into_http()
            .map(Either::Right);
    }
    let decision = match svc.decide(arrival, None) {
        Ok((decision, _)) => decision,
        Err(message) => {
            return Status::invalid_argument(message)
                .into_http()
                .map(Either::Right)
        }
    };
    let ping = Ping {
        svc,
        arrival,
        decision,
    };
    let codec = tonic_prost::ProstCodec::<PingResponse, PingRequest>::default();
    let mut grpc = tonic::server::Grpc::new(codec);
    grpc.unary(ping, req).await.map(Either::Right)
}

/// One ping call with its decision already made.
struct Ping {
    svc: BackendService,
    arrival: Instant,
    decision: Decision,
}

type PingFuture =
    Pin<Box<dyn Future<Output = Result<tonic::Response<PingResponse>, Status>> + Send>>;

impl UnaryService<PingRequest> for Ping {
    type Response = PingResponse;
    type Future = PingFuture;

    fn call(&mut self, request: tonic::Request<PingRequest>) -> Self::Future {
        let svc = self.svc.clone();
        let (arrival, decision) = (self.arrival, self.decision);
        Box::pin(async move {
            let backend = svc.backend.name().to_owned();
            match svc.act(arrival, decision).await {
                Some(status) if status < 500 => Ok(tonic::Response::new(PingResponse {
                    payload: request.into_inner().payload,
                    backend,
                })),
                Some(status) => Err(Status::unavailable(format!(
                    "{backend} failed on purpose (HTTP {status})"
                ))),
                None => Err(Status::internal("connection was to be closed")),
            }
        })
    }
}
