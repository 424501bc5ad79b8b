//! The hyper service of a backend connection: decide, wait, then answer, close or reset.
//!
//! 1. Note the arrival time (after any pause: a paused connection is not read, so a request
//!    "arrives" when the backend resumes, as under SIGSTOP).
//! 2. Ask the spec ([`tailguard_fleet::BackendSpec::decide`]) with the connection's seeded RNG;
//!    apply `?delay=`-style overrides when enabled.
//! 3. Sleep until `arrival + latency` (failures take the latency too, as in seed 000).
//! 4. Answer with the status and body, or tell the connection task to close or reset.
//!
//! This is the one core every protocol answers through: [`crate::route`] sends plain HTTP
//! here, and gRPC through [`crate::grpc`], which uses the same decision and wait. On HTTP/2,
//! close and reset end the whole connection (every stream on it), as a crashing process would.
//!
//! A zero-latency answer is built at once and returned as a ready future (no allocation);
//! anything that waits is boxed.

use crate::io::{ConnCtl, Kill};
use crate::overrides::Overrides;
use crate::state::Backend;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::StatusCode;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tailguard_fleet::{Decision, Outcome};
use tokio::time::Instant;

/// Response body: plain bytes, or a gRPC body from tonic.
pub type RespBody = Either<Full<Bytes>, tonic::body::Body>;

/// The header naming the backend that answered.
pub const BACKEND_HEADER: &str = "x-tailguard-backend";

/// The header carrying the latency the backend decided on, in microseconds, so a client can
/// tell the backend's intended wait from everything else it measured.
pub const LATENCY_HEADER: &str = "x-tailguard-latency-us";

/// The core of one connection's service: decides, waits and answers (cloned for h2 streams and
/// an h2c upgrade; they share the RNG).
#[derive(Clone, Debug)]
pub struct BackendService {
    pub(crate) backend: Arc<Backend>,
    pub(crate) ctl: Arc<ConnCtl>,
    rng: Arc<Mutex<Xoshiro256PlusPlus>>,
}

impl BackendService {
    /// A service for a new connection to `backend`, with its own seeded RNG.
    pub fn new(backend: Arc<Backend>, ctl: Arc<ConnCtl>) -> Self {
        let rng = Xoshiro256PlusPlus::seed_from_u64(backend.next_connection_seed());
        BackendService {
            backend,
            ctl,
            rng: Arc::new(Mutex::new(rng)),
        }
    }

    /// The decision for a request that arrived at `arrival`, with query overrides applied.
    pub(crate) fn decide(
        &self,
        arrival: Instant,
        query: Option<&str>,
    ) -> Result<(Decision, Overrides), String> {
        let elapsed = arrival.saturating_duration_since(self.backend.shared.start);
        let spec = self.backend.spec();
        let mut rng = match self.rng.lock() {
            Ok(rng) => rng,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut decision = spec.decide(elapsed, &mut *rng);
        let mut overrides = Overrides::default();
        if let (true, Some(query)) = (self.backend.shared.overrides, query) {
            overrides = Overrides::parse(query).map_err(|e| e.to_string())?;
            overrides.apply(&mut decision, &mut *rng);
        }
        self.backend.counters.record(decision.outcome);
        Ok((decision, overrides))
    }

    /// Waits out the latency, then acts. Close and reset never return: the connection task
    /// drops the connection (and this future with it).
    pub(crate) async fn act(&self, arrival: Instant, decision: Decision) -> Option<u16> {
        if !decision.latency.is_zero() {
            crate::timer::sleep_until(arrival + decision.latency, self.backend.shared.precise)
                .await;
        }
        match decision.outcome {
            Outcome::Respond { status } => Some(status),
            Outcome::Close => self.kill(Kill::Close).await,
            Outcome::Reset => self.kill(Kill::Reset).await,
        }
    }

    async fn kill(&self, how: Kill) -> Option<u16> {
        self.ctl.kill(how);
        std::future::pending().await
    }

    pub(crate) async fn handle(
        self,
        req: Request<Incoming>,
        arrival: Instant,
    ) -> Response<RespBody> {
        let rif = self.backend.arrival_rif();
        match self.plan(&req, arrival) {
            Ok(plan) => self.finish(req, arrival, plan, rif).await,
            Err(message) => self.bad_request(message),
        }
    }

    fn bad_request(&self, message: String) -> Response<RespBody> {
        plain(400, Bytes::from(message + "\n"), &self.backend)
    }

    /// Steps 1 and 2: the decision and the body source, or why the query is bad.
    fn plan<B>(&self, req: &Request<B>, arrival: Instant) -> Result<Plan, String> {
        let (decision, overrides) = self.decide(arrival, req.uri().query())?;
        let body = match (overrides.size, self.backend.echoes()) {
            (Some(n), _) => Some(crate::state::filler(n)),
            (None, true) => None,
            (None, false) => Some(self.backend.fixed_body()),
        };
        Ok(Plan { decision, body })
    }

    /// Steps 3 and 4.
    /// `rif`: what the request found on arrival, for the latency estimate (`None`: not kept).
    async fn finish(
        self,
        req: Request<Incoming>,
        arrival: Instant,
        plan: Plan,
        rif: Option<u32>,
    ) -> Response<RespBody> {
        let _in_flight = InFlight::start(&self.backend);
        let body = match plan.body {
            Some(body) => {
                // The request is read to its end before it is answered, as servers do: an
                // HTTP/2 stream the client then breaks (a second HEADERS without END_STREAM)
                // is reset by h2, not answered. A body that never ends is waited for within
                // BODY_WAIT.
                if !req.body().is_end_stream() && !drained(req.into_body()).await {
                    return plain(
                        408,
                        Bytes::from_static(b"request body not finished\n"),
                        &self.backend,
                    );
                }
                body
            }
            None => req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default(),
        };
        let status = self.act(arrival, plan.decision).await.unwrap_or(500);
        self.backend.served(rif, arrival.elapsed());
        respond(status, body, plan.decision, &self.backend)
    }
}

/// Longest wait for the rest of a request body that is not echoed (nginx's
/// `client_body_timeout` is 60 s between reads; a test backend needs less).
const BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads `body` to its end, dropping it: true when it ended (cleanly or broken) within
/// [`BODY_WAIT`].
async fn drained(mut body: Incoming) -> bool {
    let read = async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                break;
            }
        }
    };
    tokio::time::timeout(BODY_WAIT, read).await.is_ok()
}

/// What to answer with, decided on arrival.
struct Plan {
    decision: Decision,
    /// `None`: echo the request body.
    body: Option<Bytes>,
}

/// The response future: ready at once for a zero-latency answer (no allocation), else boxed.
pub enum RespFuture {
    /// Answered already (`None` once taken).
    Ready(Option<Response<RespBody>>),
    /// Waiting (latency, echo body, gRPC, upgrade).
    Waiting(Pin<Box<dyn Future<Output = Response<RespBody>> + Send>>),
}

impl std::fmt::Debug for RespFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RespFuture::Ready(_) => "RespFuture::Ready",
            RespFuture::Waiting(_) => "RespFuture::Waiting",
        })
    }
}

impl Future for RespFuture {
    type Output = Result<Response<RespBody>, Infallible>;

    fn poll(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            // Polled again after completion (a caller bug): stay pending rather than panic.
            RespFuture::Ready(resp) => resp
                .take()
                .map_or(std::task::Poll::Pending, |r| std::task::Poll::Ready(Ok(r))),
            RespFuture::Waiting(fut) => fut.as_mut().poll(cx).map(Ok),
        }
    }
}

impl RespFuture {
    /// The same answer, made [`headless`] when it is ready.
    pub(crate) fn headless(self) -> Self {
        match self {
            RespFuture::Ready(resp) => RespFuture::Ready(resp.map(headless)),
            RespFuture::Waiting(fut) => {
                RespFuture::Waiting(Box::pin(async move { headless(fut.await) }))
            }
        }
    }
}

impl BackendService {
    /// The plain-HTTP answer to any method, body included, for a request that arrived at
    /// `arrival`.
    pub(crate) fn answer(&self, req: Request<Incoming>, arrival: Instant) -> RespFuture {
        if self.backend.spec().capacity.is_some() {
            if self.backend.shared.serve_abandoned {
                return RespFuture::Waiting(Box::pin(
                    self.clone().in_turn_regardless(req, arrival),
                ));
            }
            return RespFuture::Waiting(Box::pin(self.clone().in_turn(req, arrival)));
        }
        let plan = match self.plan(&req, arrival) {
            Ok(plan) => plan,
            Err(message) => return RespFuture::Ready(Some(self.bad_request(message))),
        };
        match plan {
            // The common benchmark case: answer now, without boxing a future.
            Plan {
                decision:
                    decision @ Decision {
                        outcome: Outcome::Respond { status },
                        ..
                    },
                body: Some(body),
            } if decision.latency.is_zero() && req.body().is_end_stream() => {
                RespFuture::Ready(Some(respond(status, body, decision, &self.backend)))
            }
            plan => {
                let rif = self.backend.arrival_rif();
                RespFuture::Waiting(Box::pin(self.clone().finish(req, arrival, plan, rif)))
            }
        }
    }
}

impl BackendService {
    /// A backend with a capacity: wait for a worker (or be turned away when the line is full),
    /// then decide and answer as of the moment the service starts, holding the worker until
    /// the answer is ready.
    async fn in_turn(self, req: Request<Incoming>, arrival: Instant) -> Response<RespBody> {
        let rif = self.backend.arrival_rif();
        let (worker, start) = match self.backend.worker(arrival).await {
            Ok(turn) => turn,
            Err(status) => return self.turned_away(status),
        };
        let resp = match self.plan(&req, start) {
            Ok(plan) => self.clone().finish(req, start, plan, None).await,
            Err(message) => self.bad_request(message),
        };
        // The latency a prober wants: the wait for a worker included.
        self.backend.served(rif, arrival.elapsed());
        drop(worker);
        resp
    }

    /// [`BackendService::in_turn`] on a task of its own, so a client that hangs up leaves the
    /// work (its place in line, then its worker) to run to its end; the answer goes nowhere.
    async fn in_turn_regardless(
        self,
        req: Request<Incoming>,
        arrival: Instant,
    ) -> Response<RespBody> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let resp = self.in_turn(req, arrival).await;
            let _ = tx.send(resp);
        });
        rx.await.unwrap_or_else(|_| {
            // Only when the runtime is shutting down (the task was dropped).
            let mut resp = Response::new(Either::Left(Full::new(Bytes::new())));
            *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            resp
        })
    }

    /// The answer to a request the full line turned away, counted as the failure it is.
    pub(crate) fn turned_away(&self, status: u16) -> Response<RespBody> {
        self.backend.counters.record(Outcome::Respond { status });
        let body = format!("{} is at capacity\n", self.backend.name());
        plain(status, Bytes::from(body), &self.backend)
    }
}

/// A HEAD response: the GET's status and headers, its length as `content-length`, and an empty
/// body (RFC 9110 9.3.2). hyper's HTTP/1.1 server leaves out a HEAD response's body by itself,
/// but its HTTP/2 server sends whatever body it is given, after HEADERS without END_STREAM; a
/// client then resets the stream, since DATA on a HEAD stream is malformed (RFC 9113 8.1.1).
/// An empty body makes hyper end the stream with the HEADERS frame.
fn headless(resp: Response<RespBody>) -> Response<RespBody> {
    let (mut parts, body) = resp.into_parts();
    let bodiless = parts.status.is_informational() || parts.status == StatusCode::NO_CONTENT;
    if let Some(len) = body.size_hint().exact().filter(|&n| n > 0 && !bodiless) {
        parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    Response::from_parts(parts, Either::Left(Full::new(Bytes::new())))
}

/// The response, with the latency decided on in a header.
fn respond(status: u16, body: Bytes, decision: Decision, backend: &Backend) -> Response<RespBody> {
    let mut resp = plain(status, body, backend);
    let micros = u64::try_from(decision.latency.as_micros()).unwrap_or(u64::MAX);
    // A static value for the common zero: formatting a number allocates.
    let value = match micros {
        0 => HeaderValue::from_static("0"),
        n => HeaderValue::from(n),
    };
    resp.headers_mut().insert(LATENCY_HEADER, value);
    resp
}

/// Counts a request in flight until dropped (answered, or the connection went away).
struct InFlight<'a>(&'a Backend);

impl<'a> InFlight<'a> {
    fn start(backend: &'a Backend) -> Self {
        backend.counters.in_flight.inc();
        InFlight(backend)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.counters.in_flight.dec();
    }
}

/// A plain-text response carrying the backend's name in a header.
pub(crate) fn plain(status: u16, body: Bytes, backend: &Backend) -> Response<RespBody> {
    let mut resp = Response::new(Either::Left(Full::new(body)));
    *resp.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    headers.insert(BACKEND_HEADER, backend.name_header());
    resp
}
