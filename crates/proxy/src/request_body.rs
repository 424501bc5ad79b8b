//! The client's request body as the proxy streams it upstream, watched for the client's own
//! faults: a malformed body (bad chunk framing), an aborted upload (the connection closed or
//! the stream was reset before the announced length), a body that goes idle, or one that
//! trickles in slower than a minimum rate (one byte a second would otherwise hold a client
//! connection and an upstream connection for as long as it likes).
//!
//! A fault is written into a [`FaultCell`] shared with the attempt before the body yields its
//! error, so when the upstream request then fails, the attempt knows whose fault it was: the
//! client's, answered 400 or 408 and kept away from the endpoint's accrual, load estimate and
//! success rate (a client must never be able to take a healthy endpoint out).
//!
//! # Timers
//! The idle timer measures how long the client has kept the proxy waiting since its last
//! frame: it is armed when a poll finds no data, re-armed at the first such poll after each
//! frame, and never runs while the upstream side is not asking for data. The rate is checked
//! at each frame after a grace period (Kestrel's `MinRequestBodyDataRate` rule: 240 bytes/s
//! after 5 s); gRPC requests are exempt, since a client stream's messages come at the
//! application's pace, and only the idle timer applies to them.

use crate::body::BoxError;
use crate::idle::IdleTimer;
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Why a request failed on the client's side.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientFault {
    /// The body's framing was invalid.
    #[error("client: malformed request body ({0})")]
    Malformed(String),
    /// The body ended before it was complete (connection closed or stream reset).
    #[error("client: request body aborted before its end")]
    Aborted,
    /// No data for this long.
    #[error("client: request body idle for {0:?}")]
    Idle(Duration),
    /// Slower than this many bytes per second on average, after the grace period.
    #[error("client: request body slower than {0} bytes/s")]
    TooSlow(u64),
}

impl ClientFault {
    /// The status the proxy answers: 408 for slowness, 400 for the rest.
    pub fn status(&self) -> http::StatusCode {
        match self {
            ClientFault::Idle(_) | ClientFault::TooSlow(_) => http::StatusCode::REQUEST_TIMEOUT,
            _ => http::StatusCode::BAD_REQUEST,
        }
    }

    /// The metric label: `malformed`, `aborted`, `idle`, `too_slow`.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientFault::Malformed(_) => "malformed",
            ClientFault::Aborted => "aborted",
            ClientFault::Idle(_) => "idle",
            ClientFault::TooSlow(_) => "too_slow",
        }
    }

    /// The fault behind an error reading the client's body: invalid framing is malformed,
    /// anything else (closed, reset, incomplete) an abort.
    pub fn from_read(e: &(dyn std::error::Error + 'static)) -> Self {
        let mut source = Some(e);
        while let Some(err) = source {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
                ) {
                    return ClientFault::Malformed(io.to_string());
                }
            }
            source = err.source();
        }
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_parse)
        {
            return ClientFault::Malformed(e.to_string());
        }
        ClientFault::Aborted
    }
}

/// Where a request body's fault is written, for its attempt to read.
pub type FaultCell = Arc<OnceLock<ClientFault>>;

/// How long a client may keep a streamed body waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyRules {
    /// No data for this long is a fault (`None`: no limit).
    pub idle: Option<Duration>,
    /// Fewer bytes per second than this on average, once `grace` has passed, is a fault
    /// (`None`: no minimum).
    pub min_rate: Option<u64>,
    /// How long a body may take before its rate is checked.
    pub grace: Duration,
}

/// The error a faulty body yields upstream.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Faulted(pub ClientFault);

/// The client's body (hyper's, or a stage test's), streamed and watched (module docs).
#[derive(Debug)]
pub struct ClientBody<B = Incoming> {
    inner: B,
    cell: FaultCell,
    rules: BodyRules,
    started: Instant,
    bytes: u64,
    idle: IdleTimer,
    /// Where the access log reads the bytes read so far (`None`: no log).
    tally: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl<B> ClientBody<B> {
    /// Watches `inner` by `rules`, writing its fault into `cell`.
    pub fn new(inner: B, cell: FaultCell, rules: BodyRules) -> Self {
        Self {
            inner,
            cell,
            rules,
            started: Instant::now(),
            bytes: 0,
            idle: IdleTimer::new(rules.idle),
            tally: None,
        }
    }

    /// The same body, adding the bytes it reads to `tally` (the access log's count).
    #[must_use]
    pub fn counting(mut self, tally: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>) -> Self {
        self.tally = tally;
        self
    }

    fn fail(&mut self, fault: ClientFault) -> Poll<Option<Result<Frame<Bytes>, Faulted>>> {
        let fault = self.cell.get_or_init(|| fault).clone();
        Poll::Ready(Some(Err(Faulted(fault))))
    }

    fn too_slow(&self) -> Option<u64> {
        let rate = self.rules.min_rate?;
        let elapsed = self.started.elapsed();
        let slow = elapsed > self.rules.grace
            && u128::from(self.bytes) * 1000 < u128::from(rate) * elapsed.as_millis();
        slow.then_some(rate)
    }
}

impl<B> Body for ClientBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = Faulted;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Faulted>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.bytes += d.len() as u64;
                    if let Some(t) = &this.tally {
                        t.fetch_add(d.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                this.idle.activity();
                match this.too_slow() {
                    Some(rate) => this.fail(ClientFault::TooSlow(rate)),
                    None => Poll::Ready(Some(Ok(frame))),
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let e: BoxError = e.into();
                this.fail(ClientFault::from_read(&*e))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.idle.poll_expired(cx) {
                Some(idle) => this.fail(ClientFault::Idle(idle)),
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
