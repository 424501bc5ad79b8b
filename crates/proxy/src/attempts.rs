//! Stage 2 of the request path ([`crate::forward`] -> **attempts** -> [`crate::balanced`] ->
//! [`crate::upstream`]): the attempts of one request. It decides whether a failed attempt is
//! tried again (the classifier's verdict, the retry limit, the retry budget, a body that can
//! be sent again, the backoff) and whether a slow first attempt gets a backup (hedging); the
//! stage below sends each attempt and says how it ended ([`Attempted`]).
//!
//! # Retries
//! An attempt that failed retryably is tried again on another endpoint while the retry limit
//! and the budget allow and the body can be sent again (an empty body always; a copied one
//! while the copy is whole; a streamed one only when no attempt took it, i.e. every earlier
//! attempt found no connection).
//!
//! # Hedging and rescue
//! With `hedge` in the arm, the first attempt of a request whose method the classifier would
//! retry, and whose body can be sent again, races a timer set to the hedger's delay (the live
//! `1 - maxExtraLoad` quantile of attempt latencies). When the timer fires first, the whole
//! body is known and the hedge budget allows, a backup goes to another endpoint; the first
//! success wins and the other attempt is dropped, which cancels it (the balancer hears of the
//! cancellation). A failure of one waits for the other. Retries after that are not hedged, as
//! in the simulator.
//!
//! With `rescue` in the arm (the default, with retries), the same race runs at the backup delay
//! (the hedge delay, or the p99 of attempts when hedging is off) for a first attempt, and for a
//! retry of a request that had no backup yet: when the attempt's endpoint has answered nothing
//! for that long and for ten times its own mean latency, a backup goes elsewhere, charged to
//! the retry budget (`tailguard_proxy_rescues_total`, and in `retries_total`); while the
//! endpoint still answers others, or the budget is empty, the question is asked again when it
//! could change. One backup per request, hedge or rescue. gRPC calls (POST) are hedged only when their method is listed in
//! `hedge.grpcMethods` (a call may not be idempotent; gRPC's own hedging is opt-in per method).
//!
//! # Deadlines
//! With a deadline ([`Outgoing::deadline`]: the total timeout or the caller's), a retry whose
//! backoff would end within a millisecond of it is not started, and a backup whose delay would
//! is not armed: the failure in hand is answered at once.

use crate::admission::Place;
use crate::body::{BoxError, ProxyBody};
use crate::clock::Clock;
use crate::deadline::Deadline;
use crate::endpoints::Endpoints;
use crate::fault::{Failure, Fault, ProxyFault};
use crate::metrics::ServiceHandles;
use crate::pushback::GrpcPushback;
use crate::replay::{NotReplayable, Replay};
use crate::request_body::FaultCell;
use crate::response::Reply;
use crate::response_body::ResponseBody;
use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Frame;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tailguard_client::{ArmConfig, Backup};
use tailguard_resilience::{Class, Method};

/// A request body, as attempts use it.
#[derive(Debug)]
pub enum AttemptBody {
    /// Empty: every attempt sends nothing.
    Empty,
    /// Copied as it streams, up to the retry buffer: every attempt may send it while the copy
    /// is whole ([`Replay`]).
    Replay(Replay),
    /// Streamed: only the attempt that sends it can use it; attempts that found no connection
    /// leave it for the next.
    Streaming(Option<ProxyBody>),
}

impl AttemptBody {
    /// The body for an attempt that has its connection.
    pub fn take(&mut self) -> ProxyBody {
        match self {
            AttemptBody::Empty => Empty::new().map_err(|never| match never {}).boxed(),
            AttemptBody::Replay(r) => r.body().boxed(),
            AttemptBody::Streaming(b) => b.take().unwrap_or_else(|| {
                // `available` said no: an attempt went ahead anyway. Fail it loudly rather
                // than send an empty body in the client's name.
                let gone: Result<Frame<Bytes>, BoxError> = Err(Box::new(NotReplayable));
                StreamBody::new(futures_util::stream::once(std::future::ready(gone))).boxed()
            }),
        }
    }

    /// Whether another attempt can send the body: an empty one always, a copied one while the
    /// copy is whole, a streamed one until an attempt took it (an attempt that found no
    /// connection never does).
    fn available(&self) -> bool {
        match self {
            AttemptBody::Empty => true,
            AttemptBody::Replay(r) => r.replayable(),
            AttemptBody::Streaming(b) => b.is_some(),
        }
    }

    /// A retry is decided: whether it can send the body, the earlier attempts giving it up
    /// ([`Replay::retire`]).
    fn retire(&self) -> bool {
        match self {
            AttemptBody::Replay(r) => r.retire(),
            other => other.available(),
        }
    }

    /// Whether two attempts may send the body at once (a backup): the whole of it is known.
    fn complete(&self) -> bool {
        match self {
            AttemptBody::Empty => true,
            AttemptBody::Replay(r) => r.complete(),
            AttemptBody::Streaming(_) => false,
        }
    }
}

/// A request ready for its attempts (cleaned, its body prepared; not sent yet). A hedged request
/// has two attempts in flight at once, each reading this through a shared reference.
#[derive(Debug)]
pub struct Outgoing {
    /// Method, path, cleaned headers, upstream version.
    pub parts: http::request::Parts,
    /// The body (behind a lock only ever held to take a copy).
    pub body: std::sync::Mutex<AttemptBody>,
    /// The method as the classifier sees it.
    pub method: Method,
    /// Over HTTP/2.
    pub h2: bool,
    /// A gRPC call: its outcome is its `grpc-status`, its errors gRPC responses.
    pub reply: Reply,
    /// Where a streamed body writes the client's fault (`None`: a buffered body).
    pub fault: Option<FaultCell>,
    /// The sooner of the total timeout and the caller's deadline, if any: no retry or backup
    /// starts that would wait past it, and each attempt forwards what remains of the caller's.
    pub deadline: Option<Deadline>,
    /// The request may have a backup: hedging is on and the classifier would repeat its
    /// method, or it is a gRPC call to a method listed in `hedge.grpcMethods`.
    pub hedge: bool,
    /// Its route's word on retries: `Some(true)` every failure is retryable, `Some(false)`
    /// none is (an attempt that could not connect is still re-picked), `None` the classifier's.
    pub retry: Option<bool>,
    /// What the access log wants to know of the attempts (`None`: no log).
    pub trail: Option<std::sync::Arc<crate::access_log::Trail>>,
    /// The request's trace, when it is sampled: each attempt gets a CLIENT span.
    pub trace: Option<std::sync::Arc<crate::trace::Traced>>,
    /// Its service's admission, and the place its first attempt holds (`None`: attempts in
    /// flight are not bounded).
    pub admission: Option<crate::admission::Entry>,
    /// When it arrived, on the proxy's clock, if nothing has made it wait since (an admission
    /// queue): the attempts start from that reading rather than from one of their own.
    pub arrived: Option<Duration>,
    /// When an endpoint last answered it (or failed), as the attempt read it for its round
    /// trip: the request's own time ends there, with no reading of its own.
    pub answered: Answered,
}

/// The proxy clock's reading when an attempt of a request ended ([`Outgoing::answered`]).
/// Atomic, as a hedged request's two attempts share the request; the last one written wins,
/// which is the attempt whose end the request returns (a response ends the attempts).
#[derive(Debug)]
pub struct Answered(AtomicU64);

impl Default for Answered {
    fn default() -> Self {
        Self(AtomicU64::new(u64::MAX))
    }
}

impl Answered {
    /// An attempt ended at `at`.
    pub fn set(&self, at: Duration) {
        let nanos = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX - 1);
        self.0.store(nanos.min(u64::MAX - 1), Ordering::Relaxed);
    }

    /// When the last attempt ended (`None`: none has).
    pub fn get(&self) -> Option<Duration> {
        let nanos = self.0.load(Ordering::Relaxed);
        (nanos != u64::MAX).then(|| Duration::from_nanos(nanos))
    }
}

impl Outgoing {
    /// The body, locked (only ever held to take a copy or ask about it).
    pub fn body(&self) -> std::sync::MutexGuard<'_, AttemptBody> {
        // Taking a copy cannot panic midway; keep what a panicked holder left.
        self.body.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether an attempt starting `wait` from now would still start before the deadline,
    /// with a millisecond to spare.
    fn in_time(&self, wait: Duration) -> bool {
        // The clock is read only with a deadline (none by default).
        self.deadline
            .is_none_or(|d| d.allows(tokio::time::Instant::now() + wait))
    }

    /// Whether a backup may be sent: hedging or rescue is on, the classifier would repeat the
    /// method, and the body can be sent again (whether all of it is known yet is checked when
    /// the backup is due).
    fn hedgeable(&self) -> bool {
        self.hedge && self.body().available()
    }

    /// A place for a retry or a backup: `Err` when the service's admission has no room (or
    /// someone waits), `Ok(None)` when attempts are not bounded.
    fn extra_place(&self) -> Result<Option<Place>, ()> {
        match &self.admission {
            None => Ok(None),
            Some(a) => a.extra().map(Some).ok_or(()),
        }
    }

    /// When an attempt starts, for the concurrency limit's sample: the clock is read only when
    /// the service has an admission (none by default: no clock read per attempt for it).
    fn sent_at(&self, clock: Clock) -> Option<Duration> {
        self.admission.as_ref().map(|_| clock.now())
    }

    /// What an attempt that ended (`done`, sent at `sent`) teaches the concurrency limit: a
    /// success's round trip when the request was unary (its whole body known: not a stream),
    /// or a timeout's drop; nothing from other failures or cancelled attempts.
    fn learn(&self, done: &Attempted, sent: Option<Duration>, clock: Clock) {
        let (Some(a), Some(sent)) = (&self.admission, sent) else {
            return;
        };
        let took = clock.now().saturating_sub(sent);
        match &done.result {
            Ok(_) if done.class.success && self.body().complete() => a.learn(Some(took)),
            Err(Fault::Endpoint(f)) if matches!(f.failure, Failure::Timeout) => a.learn(None),
            _ => {}
        }
    }
}

/// How one attempt ended.
#[derive(Debug)]
pub struct Attempted {
    /// The classifier's verdict (success, retryable); [`Attempted::FINAL`] for an attempt
    /// the endpoint never heard of as its own (the client's or the proxy's fault).
    pub class: Class,
    /// The response to forward, or whose fault it was that there is none.
    pub result: Result<Response<ResponseBody>, Fault>,
}

impl Attempted {
    /// Not a success, not retryable: a request the proxy answers itself.
    pub const FINAL: Class = Class {
        success: false,
        retryable: false,
    };
}

/// Which attempt of a request this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The first: the request has just arrived (the budgets count it).
    First,
    /// A retry after an attempt to this slot failed.
    Retry {
        /// The slot of the attempt that failed.
        after: usize,
    },
    /// A backup beside a first attempt to this slot.
    Backup {
        /// The slot of the first attempt, still out.
        beside: usize,
    },
}

impl Turn {
    /// The slot to avoid when another endpoint exists.
    pub fn avoid(self) -> Option<usize> {
        match self {
            Turn::First => None,
            Turn::Retry { after: slot } | Turn::Backup { beside: slot } => Some(slot),
        }
    }
}

/// The stage below ([`crate::balanced`]): one attempt, to the endpoint the balancer picks.
pub trait Balanced: Sync {
    /// Picks the endpoint of attempt `turn` of `request` at `now` on the proxy's clock
    /// (avoiding the slot it names when another exists), writes its slot to `slot`, and
    /// returns the attempt (in flight from the pick: dropping it cancels it). The caller
    /// passes the time it read for its own decision just before (one clock read per event).
    /// The slot is written, not returned with the future: a future taken out of a tuple is
    /// copied whole (kilobytes) where one returned alone is made in its place.
    fn attempt<'a>(
        &'a self,
        request: &'a Outgoing,
        turn: Turn,
        now: Duration,
        slot: &mut usize,
    ) -> impl Future<Output = Attempted> + Send + 'a;
}

/// What decides the attempts of one service's requests: its arm (retries, hedging, the
/// classifier), its endpoint generation (the budgets, the hedge delay, the retry jitter) and
/// its counters.
#[derive(Clone, Copy)]
pub struct Policy<'a> {
    /// The service's arm.
    pub arm: &'a ArmConfig,
    /// The endpoint generation the request started on.
    pub endpoints: &'a Endpoints,
    /// The service's counters.
    pub handles: &'a ServiceHandles,
    /// The proxy's clock.
    pub clock: Clock,
}

/// Runs attempts of `request` through `next` until one is final: its response, or the fault
/// of the last attempt.
///
/// # Errors
/// The last attempt's [`Fault`], or [`ProxyFault::NoEndpoints`].
///
/// Not an `async fn`, nor is [`hedged`]: one copies its arguments into its state when first
/// polled (rust-lang/rust#62958; see `forward::handle`).
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn copies its arguments into its state"
)]
pub fn run<'a, B: Balanced>(
    policy: Policy<'a>,
    next: &'a B,
    request: &'a Outgoing,
) -> impl Future<Output = Result<Response<ResponseBody>, Fault>> + 'a {
    async move {
        let Policy {
            arm,
            endpoints,
            handles,
            clock,
        } = policy;
        if endpoints.is_empty() {
            return Err(Fault::Proxy(ProxyFault::NoEndpoints));
        }
        // One clock reading for the start: the backup delay, the first pick and the retries'
        // time; the request's arrival when nothing made it wait since.
        let started = request.arrived.unwrap_or_else(|| clock.now());
        // A backup that would leave after the deadline is not armed.
        let hedge = request
            .hedgeable()
            .then(|| endpoints.backup_delay(started))
            .flatten()
            .filter(|&delay| request.in_time(delay));
        let (mut turn, mut tries) = (Turn::First, 0u32);
        let tell = |slot: usize, result: Result<Response<ResponseBody>, Fault>, tries| {
            if let Some(trail) = &request.trail {
                if !matches!(result, Err(Fault::Proxy(_) | Fault::Client(_))) {
                    trail.answered_by(endpoints.addr(slot));
                }
            }
            // The clock is read for the message only when there were retries.
            told(result, tries, || clock.now().saturating_sub(started))
        };
        let rescue = arm.rescue && arm.retries.is_some();
        let max_retries = arm.retries.map_or(0, |r| r.max_retries);
        // The place this round's attempt holds under the service's admission (the first
        // attempt's from admission, a retry's taken when it was decided).
        let mut place = request.admission.as_ref().and_then(|a| a.first());
        loop {
            let now = match tries {
                0 => started,
                _ => clock.now(),
            };
            let backup = match tries {
                0 => hedge,
                _ if rescue => request
                    .hedgeable()
                    .then(|| endpoints.backup_delay(now))
                    .flatten()
                    .filter(|&delay| request.in_time(delay)),
                _ => None,
            };
            let (slot, done) = match backup {
                Some(delay) => {
                    // Rescues count as retries, within the limit.
                    let left = max_retries.saturating_sub(tries);
                    let round = Round {
                        turn,
                        now,
                        delay,
                        rescues_left: left,
                        place: place.take(),
                    };
                    let (slot, done, rescues) = hedged(policy, next, request, round).await;
                    tries += rescues;
                    (slot, done)
                }
                None => {
                    let sent = request.sent_at(clock);
                    let mut slot = 0;
                    let done = next.attempt(request, turn, now, &mut slot).await;
                    request.learn(&done, sent, clock);
                    (slot, done)
                }
            };
            // The attempt ended: its place goes to whoever waits.
            drop(place.take());
            let class = done.class;
            let retryable = match request.retry {
                None => class.retryable,
                // Any failure of the endpoint's; not the client's or the proxy's own.
                Some(true) => !matches!(done.result, Err(Fault::Client(_) | Fault::Proxy(_))),
                Some(false) => unreachable_before_send(&done),
            };
            let may = !class.success
                && retryable
                && request.body().available()
                && arm.retries.is_some_and(|r| tries < r.max_retries);
            if !may {
                return tell(slot, done.result, tries);
            }
            let backoff = arm.retries.and_then(|r| r.backoff);
            let mut wait = backoff.map_or(Duration::ZERO, |b| endpoints.retry_delay(&b, tries + 1));
            // gRPC's pushback (gRFC A6): no retry, or none sooner than asked (within the cap).
            let pushback = match (&done.result, arm.pushback_max) {
                (Ok(resp), Some(max)) => {
                    crate::pushback::grpc_pushback(resp.headers()).map(|p| (p, max))
                }
                _ => None,
            };
            match pushback {
                Some((GrpcPushback::Stop, _)) => return tell(slot, done.result, tries),
                Some((GrpcPushback::Wait(asked), max)) => wait = wait.max(asked.min(max)),
                None => {}
            }
            if !request.in_time(wait) {
                // A retry that could only start at or after the deadline: the failure now, rather
                // than a timeout later (and the budget is not charged for it).
                return tell(slot, done.result, tries);
            }
            if !endpoints.may_retry(clock.now()) {
                handles.budget_exhausted.inc();
                return tell(slot, done.result, tries);
            }
            // A retry goes only with room under the service's admission and nobody waiting.
            match request.extra_place() {
                Ok(p) => place = p,
                Err(()) => {
                    handles.admission_no_room.inc();
                    return tell(slot, done.result, tries);
                }
            }
            if !request.body().retire() {
                return tell(slot, done.result, tries);
            }
            drop(done);
            handles.retries.inc();
            tries += 1;
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            turn = Turn::Retry { after: slot };
        }
    }
}

/// True when the attempt never reached its endpoint (refused, or no connection within the
/// connect timeout): nothing was sent, so even a route that never retries may pick again.
fn unreachable_before_send(done: &Attempted) -> bool {
    matches!(
        &done.result,
        Err(Fault::Endpoint(f)) if matches!(f.failure, Failure::Unreachable(..))
    )
}

/// The last attempt's failure, saying how many attempts there were and how long they took in
/// all when there was more than one: `TLS handshake timeout (1s)` alone read as though the
/// client had waited a second, when it had waited four across the retries.
fn told(
    result: Result<Response<ResponseBody>, Fault>,
    retries: u32,
    took: impl FnOnce() -> Duration,
) -> Result<Response<ResponseBody>, Fault> {
    match result {
        Err(Fault::Endpoint(mut f)) if retries > 0 => {
            if let Failure::Unreachable(_, why) | Failure::Broken(_, why) = &mut f.failure {
                let ms = took().as_millis();
                why.push_str(&format!("; {} attempts in {ms} ms", retries + 1));
            }
            Err(Fault::Endpoint(f))
        }
        other => other,
    }
}

/// An attempt that may get a backup (the first attempt of a request, or a retry): after
/// `delay`, [`Endpoints::may_backup`] is asked (a hedge on the first ask of a first attempt, or
/// a rescue when the attempt's endpoint has gone silent, at most `rescues_left` of them), and
/// asked again when it says to wait; the first success wins, and dropping the other attempt
/// cancels it. When the first attempt fails, the backup's answer decides; when a backup fails
/// while the first is still out, the question is asked again at once, so a rescue that met a
/// failing endpoint is followed by another rather than by the stalled attempt. Returns the slot
/// of the attempt whose end it returns, that end, and the rescues sent.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn copies its arguments into its state"
)]
fn hedged<'a, B: Balanced>(
    Policy {
        arm,
        endpoints,
        handles,
        clock,
    }: Policy<'a>,
    next: &'a B,
    request: &'a Outgoing,
    Round {
        turn,
        now,
        delay,
        mut rescues_left,
        place,
    }: Round,
) -> impl Future<Output = (usize, Attempted, u32)> + 'a {
    // Taken apart here, not in the block: each part is captured where it is.
    async move {
        let sent = request.sent_at(clock);
        let mut first_slot = 0;
        let mut first = std::pin::pin!(next.attempt(request, turn, now, &mut first_slot));
        let mut first_place = place;
        // The backup: its slot, the attempt (boxed: backups are the rare case), when it was sent,
        // and its place.
        let mut backup: Option<BackupOut<_>> = None;
        // When to ask next, on the proxy's clock (None: no more asking); a hedge only on the first
        // ask of a first attempt. Kept as a time, not a wait, so arming the timer reads no clock.
        let (mut ask, mut asked, mut rescues) = (Some(now + delay), turn != Turn::First, 0u32);
        // The loop ends with a backup to wait for alone (the first attempt failed); the wait is
        // after it, so the failed answer and the event are not held in this future meanwhile.
        let (slot, b, at, p) = loop {
            let ask_at = if backup.is_none() { ask } else { None };
            // Biased: the first attempt, then the backup, then the timer; no random draw per poll
            // (every request with rescue on comes through here).
            let event = tokio::select! {
                biased;
                done = &mut first => Event::First(done),
                done = async {
                    match backup.as_mut() {
                        Some((_, b, _, _)) => b.await,
                        None => std::future::pending().await,
                    }
                } => Event::Backup(done),
                () = async {
                    match ask_at {
                        Some(at) => tokio::time::sleep_until(clock.at(at)).await,
                        None => std::future::pending().await,
                    }
                } => Event::Ask,
            };
            match event {
                Event::First(done) => {
                    request.learn(&done, sent, clock);
                    drop(first_place.take());
                    match backup.take().filter(|_| !done.class.success) {
                        Some(out) => break out,
                        None => return (first_slot, done, rescues),
                    }
                }
                Event::Backup(done) => {
                    let (slot, _, at, _) = backup.take().expect("a backup was out");
                    request.learn(&done, at, clock);
                    if done.class.success {
                        handles.hedge_wins.inc();
                        endpoints.hedge_won(slot);
                        return (slot, done, rescues);
                    }
                    // The backup failed and the first attempt is still out: ask again now.
                    // (The clock's start is past: the timer fires at once.)
                    ask = ask.map(|_| Duration::ZERO);
                }
                Event::Ask => {
                    // A backup sends the body alongside the first attempt: all of it must be known.
                    if !request.body().complete() || (asked && rescues_left == 0) {
                        ask = None;
                        continue;
                    }
                    // A backup goes only with room under the service's admission.
                    let Ok(backup_place) = request.extra_place() else {
                        handles.admission_no_room.inc();
                        ask = None;
                        continue;
                    };
                    let now = clock.now();
                    let answer = endpoints.may_backup(first_slot, !asked, now);
                    if !asked && arm.hedge.is_some() && answer != Backup::Hedge {
                        handles.hedge_budget_exhausted.inc();
                    }
                    asked = true;
                    match answer {
                        Backup::Hedge => {
                            handles.hedges.inc();
                        }
                        Backup::Rescue => {
                            handles.rescues.inc();
                            handles.retries.inc();
                            rescues += 1;
                            rescues_left -= 1;
                        }
                        // Asked again while the first attempt is out, unless the deadline is near.
                        Backup::Wait(after) if request.in_time(after) => {
                            ask = Some(now + after);
                            continue;
                        }
                        Backup::Wait(_) | Backup::No => {
                            ask = None;
                            continue;
                        }
                    };
                    let at = request.sent_at(clock);
                    let (mut slot, beside) = (0, Turn::Backup { beside: first_slot });
                    let b = Box::pin(next.attempt(request, beside, now, &mut slot));
                    endpoints.hedged(slot);
                    backup = Some((slot, b, at, backup_place));
                    ask = Some(now + delay);
                }
            }
        };
        let done = b.await;
        request.learn(&done, at, clock);
        drop(p);
        if done.class.success {
            handles.hedge_wins.inc();
            endpoints.hedge_won(slot);
        }
        (slot, done, rescues)
    }
}

/// A backup in [`hedged`]: its slot, the attempt, when it was sent (for the limit's sample:
/// only read with an admission), and the place it holds.
type BackupOut<F> = (usize, Pin<Box<F>>, Option<Duration>, Option<Place>);

/// One round of [`hedged`]: the attempt's turn, the backup delay, the rescues it may still
/// send, and the place the attempt holds under the service's admission.
struct Round {
    turn: Turn,
    /// When the round starts, on the proxy's clock.
    now: Duration,
    delay: Duration,
    rescues_left: u32,
    place: Option<Place>,
}

/// What ended a wait in [`hedged`].
enum Event {
    /// The first attempt ended.
    First(Attempted),
    /// The backup ended.
    Backup(Attempted),
    /// Time to ask about a backup.
    Ask,
}

#[cfg(test)]
mod tests;
