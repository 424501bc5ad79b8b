//! What one admin server takes on at once, so that its pages cannot take the process's CPU
//! or memory from the traffic it exists to watch (a dashboard hammered by 200 clients once
//! made the proxy's p50 go from 0.16 ms to 3 s), while its health checks are always answered.
//!
//! Three paces (token buckets, [`super::bucket`]), then three gates:
//! 0. accepted connections: [`Limits::accepts_per_sec`] a second, [`Limits::accepts_burst`]
//!    at once, ten times the answers': clients that reconnect as soon as they are closed fill
//!    the kernel's backlog ahead of a probe, which waits until they have all been accepted;
//!    at 10,000 a second a full backlog (4,096) is crossed in 0.41 s, within kubelet's 1 s.
//!    The churn costs the thread what the pace allows: 28% of a core at 10,000 connections a
//!    second (issue 43's 1,000 slow clients), most of it the kernel's accepts and closes;
//! 1. answers of every kind, refusals included: [`Limits::answers_per_sec`] a second,
//!    [`Limits::answers_burst`] at once. Past it they wait for their turn. Refusals are quick,
//!    but a flood of clients retrying them in a tight loop kept the admin thread busy, and in
//!    a test a hammered admin port took a whole core (23,000 refusals a second) from the two
//!    the data plane shared with it. Paced, a flood costs the thread a bounded share of a core.
//!    The wait is bounded too: the waiters are at most [`Limits::max_connections`]
//!    connections of [`Limits::max_in_flight`] streams, as many refusals in the probe lane
//!    and its [`Limits::probe_lane`] health checks, so a turn comes within
//!    `(max_connections x (max_in_flight + 1) + probe_lane) / answers_per_sec` (192 ms by
//!    default). A caller that gives up waiting gives its turn back;
//! 2. health checks (`GET` or `HEAD` of [`Limits::health`]): their own allowance of
//!    [`Limits::health_per_sec`] a second, [`Limits::health_burst`] at once, and past it the
//!    answers' pace (a wait, never a refusal). They never take a place in flight and are never
//!    expensive: a kubelet's probe must not fail because a dashboard is busy, and a flood of
//!    them still costs no more than the answers' pace allows.
//!
//! The gates:
//! 1. connections: past [`Limits::max_connections`], a connection goes to the probe lane
//!    ([`super::lane`]), where a health check is answered and anything else gets
//!    `503 Service Unavailable` and the connection closes (as many such refusals waiting for
//!    their turn as connections allowed; one more is closed unanswered);
//! 2. requests in flight (from the request's head to its answer's last frame handed to the
//!    connection): one more than [`Limits::max_in_flight`] is answered 503;
//! 3. expensive pages ([`Limits::expensive`]): a token bucket of
//!    [`Limits::expensive_per_sec`] a second, [`Limits::expensive_burst`] at once. Past it a
//!    request waits for its turn when that comes within [`Limits::expensive_max_wait`] (so a
//!    script polling in a tight loop is paced, not failed), and is answered
//!    `429 Too Many Requests` at once otherwise: the queue is bounded by the wait.
//!
//! Every refusal says which limit and carries `retry-after: 1`.

use super::bucket::Bucket;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The longest a client may take to send a request's headers, by default.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a connection in the probe lane may take to send its head, by default: a
/// probe's head is one write, and kubelet gives up after a second.
pub const PROBE_HEAD_TIMEOUT: Duration = Duration::from_secs(1);

/// The limits of one admin server. The defaults are far above what a person or a scraper
/// asks for (a dashboard polling once a second, Prometheus every few seconds).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections accepted per second on average (default 10,000; zero: unpaced). Past it
    /// they wait in the kernel's backlog.
    pub accepts_per_sec: u32,
    /// Connections accepted at once after a quiet spell (default 1,000).
    pub accepts_burst: u32,
    /// Answers of every kind (pages and refusals) per second on average, all clients
    /// together (default 1,000; zero: unpaced). Past it they wait their turn (see the module
    /// docs).
    pub answers_per_sec: u32,
    /// Answers given at once after a quiet spell (default 100).
    pub answers_burst: u32,
    /// Connections open at once, besides the probe lane's (default 32).
    pub max_connections: usize,
    /// Requests being answered at once, on all connections together; health checks take no
    /// place (default 4).
    pub max_in_flight: usize,
    /// Expensive pages answered per second on average, all clients together (default 10).
    pub expensive_per_sec: u32,
    /// Expensive pages answered at once after a quiet spell (default 20).
    pub expensive_burst: u32,
    /// The longest an expensive page past the rate waits for its turn; one that would wait
    /// longer is answered 429 at once (default 1 s; zero: never wait).
    pub expensive_max_wait: Duration,
    /// The paths whose answers are expensive to build (the caller's pages; none by default).
    pub expensive: &'static [&'static str],
    /// The paths of health checks, answered to `GET` and `HEAD` past every limit but the
    /// health allowance (default `/ready` and `/live`; a caller without them answers its 404).
    /// They skip the expensive pages' rate: a caller whose handler answers them with an
    /// expensive page should leave them out.
    pub health: &'static [&'static str],
    /// Health checks answered per second on average before they take turns of the answers'
    /// pace (default 100).
    pub health_per_sec: u32,
    /// Health checks answered at once after a quiet spell, within their allowance (default 20).
    pub health_burst: u32,
    /// Connections past [`Limits::max_connections`] kept while they send a health check's
    /// head; when they are all taken, the one longest on an incomplete head is closed for a
    /// new one (default 32, as many as the connections: see `admin::lane` for why; zero:
    /// none, connections past the limit are closed at once).
    pub probe_lane: usize,
    /// The longest a connection in the probe lane may take to send its head (default 1 s).
    pub probe_head_timeout: Duration,
    /// The longest a client may take to send a request's headers (default 10 s).
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            accepts_per_sec: 10_000,
            accepts_burst: 1_000,
            answers_per_sec: 1000,
            answers_burst: 100,
            max_connections: 32,
            max_in_flight: 4,
            expensive_per_sec: 10,
            expensive_burst: 20,
            expensive_max_wait: Duration::from_secs(1),
            expensive: &[],
            health: &["/ready", "/live"],
            health_per_sec: 100,
            health_burst: 20,
            probe_lane: 32,
            probe_head_timeout: PROBE_HEAD_TIMEOUT,
            header_read_timeout: HEADER_READ_TIMEOUT,
        }
    }
}

impl Limits {
    /// These limits with `paths` as the expensive pages.
    pub fn expensive(mut self, paths: &'static [&'static str]) -> Self {
        self.expensive = paths;
        self
    }
}

/// The paces and gates of a running server (see the module docs).
#[derive(Debug)]
pub(crate) struct Gates {
    pub(crate) limits: Limits,
    connections: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    in_flight: Arc<Semaphore>,
    accepts: Mutex<Bucket>,
    answers: Mutex<Bucket>,
    health: Mutex<Bucket>,
    expensive: Mutex<Bucket>,
}

/// A request let through: the place in flight it holds until its answer is taken (none for
/// a health check).
pub(crate) type Admitted = Option<OwnedSemaphorePermit>;

impl Gates {
    pub(crate) fn new(limits: Limits) -> Self {
        let now = Instant::now();
        let l = &limits;
        Self {
            connections: Arc::new(Semaphore::new(l.max_connections)),
            refusals: Arc::new(Semaphore::new(l.max_connections)),
            in_flight: Arc::new(Semaphore::new(l.max_in_flight)),
            accepts: Mutex::new(Bucket::new(l.accepts_per_sec, l.accepts_burst.max(1), now)),
            answers: Mutex::new(Bucket::new(l.answers_per_sec, l.answers_burst.max(1), now)),
            health: Mutex::new(Bucket::new(l.health_per_sec, l.health_burst, now)),
            expensive: Mutex::new(Bucket::new(l.expensive_per_sec, l.expensive_burst, now)),
            limits,
        }
    }

    /// Waits for the turn of one more accepted connection (pace 0).
    pub(crate) async fn accept_turn(&self) {
        turn(&self.accepts, self.limits.accepts_per_sec).await;
    }

    /// Waits for the turn of one more answer (pace 1). The wait is bounded by how many can
    /// wait (see the module docs).
    pub(crate) async fn pace(&self) {
        turn(&self.answers, self.limits.answers_per_sec).await;
    }

    /// Whether a request is a health check: `GET` or `HEAD` of a [`Limits::health`] path.
    pub(crate) fn is_health(&self, method: &Method, path: &str) -> bool {
        (method == Method::GET || method == Method::HEAD) && self.limits.health.contains(&path)
    }

    /// A place for one more connection, or `None` at the limit.
    pub(crate) fn connection(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.connections).try_acquire_owned().ok()
    }

    /// A place for one more refusal of a connection past the limit, held until its answer is
    /// written, or `None` when as many as connections allowed are waiting for theirs.
    pub(crate) fn refusal(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.refusals).try_acquire_owned().ok()
    }

    /// Lets a request through the paces and gates (after its turn, for an expensive page
    /// past the rate), or gives the refusal to answer with.
    pub(crate) async fn admit(
        &self,
        method: &Method,
        path: &str,
    ) -> Result<Admitted, Response<Full<Bytes>>> {
        if self.is_health(method, path) {
            self.health_turn().await;
            return Ok(None);
        }
        self.pace().await;
        if self.limits.expensive.contains(&path) {
            self.expensive_turn().await?;
        }
        let place = Arc::clone(&self.in_flight).try_acquire_owned();
        place.map(Some).map_err(|_| {
            let n = self.limits.max_in_flight;
            refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("admin: {n} requests in flight already (the limit); retry later\n"),
            )
        })
    }

    /// The answer to a request on a connection past the limit, at its turn of the pace.
    pub(crate) async fn connections_full(&self) -> Response<Full<Bytes>> {
        self.pace().await;
        let n = self.limits.max_connections;
        refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("admin: {n} connections open already (the limit); retry later\n"),
        )
    }

    /// A health check's turn (pace 2): from its allowance at once, else a turn of the
    /// answers' pace.
    pub(crate) async fn health_turn(&self) {
        let allowed = lock(&self.health).reserve(Instant::now(), Duration::ZERO);
        if allowed.is_none() {
            self.pace().await;
        }
    }

    /// An expensive page's turn, waited for when it comes within the bound; else the 429.
    async fn expensive_turn(&self) -> Result<(), Response<Full<Bytes>>> {
        let max_wait = self.limits.expensive_max_wait;
        let turn = lock(&self.expensive).reserve(Instant::now(), max_wait);
        match turn {
            Some(wait) => {
                wait_for(&self.expensive, wait).await;
                Ok(())
            }
            None => {
                let n = self.limits.expensive_per_sec;
                Err(refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "admin: at most {n} a second of {} together; retry later\n",
                        self.limits.expensive.join(", ")
                    ),
                ))
            }
        }
    }
}

/// Waits for a turn of `bucket` (at once when `rate` is zero: unpaced).
async fn turn(bucket: &Mutex<Bucket>, rate: u32) {
    if rate == 0 {
        return;
    }
    let turn = lock(bucket).reserve(Instant::now(), Duration::MAX);
    if let Some(wait) = turn {
        wait_for(bucket, wait).await;
    }
}

/// Sleeps `wait` for a turn reserved from `bucket`, giving the turn back if dropped before.
async fn wait_for(bucket: &Mutex<Bucket>, wait: Duration) {
    if wait.is_zero() {
        return;
    }
    let mut reserved = Reserved(Some(bucket));
    tokio::time::sleep(wait).await;
    reserved.0 = None;
}

/// A turn reserved and not yet taken: given back when dropped.
struct Reserved<'a>(Option<&'a Mutex<Bucket>>);

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if let Some(bucket) = self.0 {
            lock(bucket).refund();
        }
    }
}

fn lock(bucket: &Mutex<Bucket>) -> std::sync::MutexGuard<'_, Bucket> {
    bucket.lock().unwrap_or_else(|p| p.into_inner())
}

fn refusal(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// An answer's body that holds its request's place in flight until the server has taken its
/// last frame (or dropped it).
#[derive(Debug)]
pub struct AdminBody {
    inner: Full<Bytes>,
    _place: Option<OwnedSemaphorePermit>,
}

impl AdminBody {
    pub(crate) fn new(inner: Full<Bytes>, place: Option<OwnedSemaphorePermit>) -> Self {
        Self {
            inner,
            _place: place,
        }
    }
}

impl Body for AdminBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait given up gives its turn back: fifty callers that gave up leave no turns taken
    /// ahead of the next one (which would otherwise wait five seconds).
    #[tokio::test(start_paused = true)]
    async fn a_turn_given_up_is_given_back() {
        let gates = Gates::new(Limits {
            answers_per_sec: 10,
            answers_burst: 1,
            ..Limits::default()
        });
        gates.pace().await;
        for _ in 0..50 {
            let given_up = tokio::time::timeout(Duration::from_millis(1), gates.pace()).await;
            assert!(given_up.is_err(), "each would wait 50 ms or more");
        }
        let started = Instant::now();
        gates.pace().await;
        assert!(started.elapsed() <= Duration::from_millis(100));
    }
}
