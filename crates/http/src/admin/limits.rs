//! What one admin server takes on at once, so that its pages cannot take the process's CPU
//! or memory from the traffic it exists to watch (a dashboard hammered by 200 clients once
//! made the proxy's p50 go from 0.16 ms to 3 s).
//!
//! First a pace, then three gates:
//! 0. answers of every kind, refusals included: a token bucket of [`Limits::answers_per_sec`]
//!    a second, [`Limits::answers_burst`] at once, taken by each accepted connection and each
//!    request. Past it they wait for their turn. Refusals are quick, but a flood of clients
//!    retrying them in a tight loop kept the admin thread busy, and in a test a hammered admin
//!    port took a whole core (23,000 refusals a second) from the two the data plane shared
//!    with it. Paced, a flood costs the thread a bounded share of a core. The wait is bounded
//!    too: the waiters are at most the accept loop, [`Limits::max_connections`] connections and
//!    [`Limits::max_in_flight`] streams on each, so a turn comes within
//!    `(max_connections x max_in_flight + 1) / answers_per_sec` (129 ms by default);
//! 1. connections: one more than [`Limits::max_connections`] is answered
//!    `503 Service Unavailable` and closed;
//! 2. requests in flight (from the request's head to its answer's last frame handed to the
//!    connection): one more than [`Limits::max_in_flight`] is answered 503;
//! 3. expensive pages ([`Limits::expensive`]): a token bucket of
//!    [`Limits::expensive_per_sec`] a second, [`Limits::expensive_burst`] at once. Past it a
//!    request waits for its turn when that comes within [`Limits::expensive_max_wait`] (so a
//!    script polling in a tight loop is paced, not failed), and is answered
//!    `429 Too Many Requests` at once otherwise: the queue is bounded by the wait.
//!
//! Every refusal says which limit and carries `retry-after: 1`.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
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

/// The limits of one admin server. The defaults are far above what a person or a scraper
/// asks for (a dashboard polling once a second, Prometheus every few seconds).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Answers of every kind (pages and refusals) and accepted connections per second on
    /// average, all clients together (default 1,000; zero: unpaced). Past it they wait their
    /// turn (see the module docs).
    pub answers_per_sec: u32,
    /// Answers and connections taken at once after a quiet spell (default 100).
    pub answers_burst: u32,
    /// Connections open at once (default 32).
    pub max_connections: usize,
    /// Requests being answered at once, on all connections together (default 4).
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
    /// The longest a client may take to send a request's headers (default 10 s).
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            answers_per_sec: 1000,
            answers_burst: 100,
            max_connections: 32,
            max_in_flight: 4,
            expensive_per_sec: 10,
            expensive_burst: 20,
            expensive_max_wait: Duration::from_secs(1),
            expensive: &[],
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

/// The gates of a running server (see the module docs).
#[derive(Debug)]
pub(crate) struct Gates {
    pub(crate) limits: Limits,
    connections: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    in_flight: Arc<Semaphore>,
    answers: Mutex<Bucket>,
    expensive: Mutex<Bucket>,
}

/// Tokens refilled at a steady rate up to a burst. Tokens go below zero for the turns given
/// ahead, so waiting callers are served in order at the rate.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    fn new(rate: u32, burst: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            at: now,
            rate: f64::from(rate),
            burst: f64::from(burst),
        }
    }

    /// A turn: how long until it comes (zero: now), or `None` when that is past `max_wait`
    /// (or never comes, at a rate of zero).
    fn reserve(&mut self, now: Instant, max_wait: Duration) -> Option<Duration> {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = now;
        let wait = if self.tokens >= 1.0 {
            Duration::ZERO
        } else if self.rate > 0.0 {
            Duration::try_from_secs_f64((1.0 - self.tokens) / self.rate).ok()?
        } else {
            return None;
        };
        if wait > max_wait {
            return None;
        }
        self.tokens -= 1.0;
        Some(wait)
    }
}

impl Gates {
    pub(crate) fn new(limits: Limits) -> Self {
        let now = Instant::now();
        Self {
            connections: Arc::new(Semaphore::new(limits.max_connections)),
            refusals: Arc::new(Semaphore::new(limits.max_connections)),
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            answers: Mutex::new(Bucket::new(
                limits.answers_per_sec,
                limits.answers_burst.max(1),
                now,
            )),
            expensive: Mutex::new(Bucket::new(
                limits.expensive_per_sec,
                limits.expensive_burst,
                now,
            )),
            limits,
        }
    }

    /// Waits for the turn of one more answer or accepted connection (at once when unpaced).
    /// The wait is bounded by how many can wait (see the module docs).
    pub(crate) async fn pace(&self) {
        if self.limits.answers_per_sec == 0 {
            return;
        }
        let turn = lock(&self.answers).reserve(Instant::now(), Duration::MAX);
        if let Some(wait) = turn.filter(|w| !w.is_zero()) {
            tokio::time::sleep(wait).await;
        }
    }

    /// A place for one more connection, or `None` at the limit.
    pub(crate) fn connection(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.connections).try_acquire_owned().ok()
    }

    /// A place for one more refused connection to read its refusal, or `None` when as many
    /// as connections allowed are at it.
    pub(crate) fn refusal(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.refusals).try_acquire_owned().ok()
    }

    /// A place for a request to `path` (after its turn, for an expensive page past the
    /// rate), or the refusal to answer with.
    pub(crate) async fn admit(
        &self,
        path: &str,
    ) -> Result<OwnedSemaphorePermit, Response<Full<Bytes>>> {
        self.pace().await;
        if self.limits.expensive.contains(&path) {
            let max_wait = self.limits.expensive_max_wait;
            let turn = lock(&self.expensive).reserve(Instant::now(), max_wait);
            match turn {
                Some(wait) if wait.is_zero() => {}
                Some(wait) => tokio::time::sleep(wait).await,
                None => {
                    let n = self.limits.expensive_per_sec;
                    return Err(refusal(
                        StatusCode::TOO_MANY_REQUESTS,
                        format!(
                            "admin: at most {n} a second of {} together; retry later\n",
                            self.limits.expensive.join(", ")
                        ),
                    ));
                }
            }
        }
        Arc::clone(&self.in_flight)
            .try_acquire_owned()
            .map_err(|_| {
                let n = self.limits.max_in_flight;
                refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("admin: {n} requests in flight already (the limit); retry later\n"),
                )
            })
    }
}

fn lock(bucket: &Mutex<Bucket>) -> std::sync::MutexGuard<'_, Bucket> {
    bucket.lock().unwrap_or_else(|p| p.into_inner())
}

/// The answer to a connection past [`Limits::max_connections`], written straight to the
/// socket (no HTTP server runs on it).
pub(crate) fn connection_refusal(max: usize) -> Vec<u8> {
    let body = format!("admin: {max} connections open already (the limit); retry later\n");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
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

    /// Turns come in order at the rate after the burst; a turn past the wait is refused and
    /// takes no token; a rate of zero never gives one past the burst.
    #[test]
    fn a_bucket_gives_turns_in_order_at_its_rate() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut b = Bucket::new(10, 2, t0);
        let turns: Vec<_> = (0..4).map(|_| b.reserve(t0, ms(250))).collect();
        assert_eq!(
            turns,
            [Some(ms(0)), Some(ms(0)), Some(ms(100)), Some(ms(200))]
        );
        assert_eq!(b.reserve(t0, ms(250)), None);
        // 300 ms later the two turns given ahead are paid and one token is back.
        assert_eq!(b.reserve(t0 + ms(300), ms(0)), Some(ms(0)));
        assert_eq!(b.reserve(t0 + ms(300), Duration::MAX), Some(ms(100)));
        let mut never = Bucket::new(0, 1, t0);
        assert_eq!(never.reserve(t0, Duration::MAX), Some(ms(0)));
        assert_eq!(never.reserve(t0 + ms(10_000), Duration::MAX), None);
    }
}
