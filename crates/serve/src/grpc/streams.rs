//! The streaming methods of `tailguard.serve.v1.Ping`: one of each kind, so a load generator's
//! streaming calls meet a backend whose behaviour is known.
//!
//! A call is decided once, like any request of the backend (its latency and its outcome). A
//! call decided to fail waits its latency and fails before any answer (a 5xx is `UNAVAILABLE`;
//! close and reset end the connection). Otherwise:
//! - `Stream`: `count` answers (0: [`DEFAULT_COUNT`]; at most [`MAX_COUNT`]), the first a
//!   latency after the call arrived, each next a latency after the one before;
//! - `Collect`: reads the client's messages to the end of its stream, then answers a latency
//!   later with how many it read;
//! - `Echo`: answers each message a latency after it was read, in order.

use super::messages::{PingRequest, PingResponse};
use crate::service::BackendService;
use futures_util::stream::{self, Stream};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tailguard_fleet::{Decision, Outcome};
use tokio::time::Instant;
use tonic::server::{ClientStreamingService, ServerStreamingService, StreamingService};
use tonic::{Status, Streaming};

/// The server-streaming method's path.
pub const STREAM_PATH: &str = "/tailguard.serve.v1.Ping/Stream";
/// The client-streaming method's path.
pub const COLLECT_PATH: &str = "/tailguard.serve.v1.Ping/Collect";
/// The bidirectional method's path.
pub const ECHO_PATH: &str = "/tailguard.serve.v1.Ping/Echo";

/// Answers of `Stream` when the request's `count` is 0.
pub const DEFAULT_COUNT: u32 = 10;
/// The most answers one `Stream` call gets.
pub const MAX_COUNT: u32 = 100_000;

/// The answers of a streaming call.
type Answers = Pin<Box<dyn Stream<Item = Result<PingResponse, Status>> + Send>>;

type Answering<T> = Pin<Box<dyn Future<Output = Result<tonic::Response<T>, Status>> + Send>>;

/// One streaming call with its decision already made.
#[derive(Clone)]
pub(super) struct Streams {
    pub svc: BackendService,
    pub arrival: Instant,
    pub decision: Decision,
}

impl Streams {
    /// Waits the call's latency from `from`, then says whether it answers (`Ok`) or fails.
    async fn verdict(&self, from: Instant) -> Result<(), Status> {
        match self.svc.act(from, self.decision).await {
            Some(status) if status < 500 => Ok(()),
            Some(status) => Err(Status::unavailable(format!(
                "{} failed on purpose (HTTP {status})",
                self.svc.backend.name()
            ))),
            None => Err(Status::internal("connection was to be closed")),
        }
    }

    /// True when the call is decided to answer (its latency aside).
    fn answers(&self) -> bool {
        matches!(self.decision.outcome, Outcome::Respond { status } if status < 500)
    }

    fn latency(&self) -> Duration {
        self.decision.latency
    }

    async fn pause(&self, from: Instant) {
        if !self.latency().is_zero() {
            crate::timer::sleep_until(from + self.latency(), self.svc.backend.shared.precise).await;
        }
    }

    /// Counts a message read from the client.
    fn read(&self) {
        self.svc.backend.counters.received.inc();
    }

    /// An answer, counted as sent.
    fn answer(&self, payload: Vec<u8>, count: u32) -> PingResponse {
        self.svc.backend.counters.sent.inc();
        PingResponse {
            payload,
            backend: self.svc.backend.name().to_owned(),
            count,
        }
    }
}

impl ServerStreamingService<PingRequest> for Streams {
    type Response = PingResponse;
    type ResponseStream = Answers;
    type Future = Answering<Answers>;

    fn call(&mut self, request: tonic::Request<PingRequest>) -> Self::Future {
        let call = self.clone();
        Box::pin(async move {
            let request = request.into_inner();
            call.read();
            call.verdict(call.arrival).await?;
            let count = match request.count {
                0 => DEFAULT_COUNT,
                n => n.min(MAX_COUNT),
            };
            let payload = request.payload;
            // The first answer leaves now; each next one a latency after the one before.
            let answers = stream::unfold(1u32, move |n| {
                let (call, payload) = (call.clone(), payload.clone());
                async move {
                    if n > count {
                        return None;
                    }
                    if n > 1 {
                        call.pause(Instant::now()).await;
                    }
                    Some((Ok(call.answer(payload, n)), n + 1))
                }
            });
            Ok(tonic::Response::new(Box::pin(answers) as Answers))
        })
    }
}

impl ClientStreamingService<PingRequest> for Streams {
    type Response = PingResponse;
    type Future = Answering<PingResponse>;

    fn call(&mut self, request: tonic::Request<Streaming<PingRequest>>) -> Self::Future {
        let call = self.clone();
        Box::pin(async move {
            let mut messages = request.into_inner();
            let (mut count, mut last) = (0u32, Vec::new());
            while let Some(m) = messages.message().await? {
                call.read();
                count = count.saturating_add(1);
                last = m.payload;
            }
            call.verdict(Instant::now()).await?;
            Ok(tonic::Response::new(call.answer(last, count)))
        })
    }
}

impl StreamingService<PingRequest> for Streams {
    type Response = PingResponse;
    type ResponseStream = Answers;
    type Future = Answering<Answers>;

    fn call(&mut self, request: tonic::Request<Streaming<PingRequest>>) -> Self::Future {
        let call = self.clone();
        Box::pin(async move {
            if !call.answers() {
                call.verdict(call.arrival).await?;
            }
            let messages = request.into_inner();
            let answers = stream::unfold(Some((messages, 1u32)), move |state| {
                let call = call.clone();
                async move {
                    let (mut messages, n) = state?;
                    match messages.message().await {
                        Ok(Some(m)) => {
                            call.read();
                            call.pause(Instant::now()).await;
                            let answer = call.answer(m.payload, n);
                            Some((Ok(answer), Some((messages, n.saturating_add(1)))))
                        }
                        Ok(None) => None,
                        // A failed read ends the call with its status; nothing follows.
                        Err(status) => Some((Err(status), None)),
                    }
                }
            });
            Ok(tonic::Response::new(Box::pin(answers) as Answers))
        })
    }
}
