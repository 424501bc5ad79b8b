//! The attempts stage alone, on paused time, over a scripted stand-in for the balanced stage:
//! what is retried, when, where, and what a backup does.

use super::{run, Answered, AttemptBody, Attempted, Balanced, Outgoing, Policy, Turn};
use crate::clock::Clock;
use crate::config::Upstream;
use crate::endpoints::Endpoints;
use crate::fault::ErrorDetail;
use crate::fault::{EndpointFault, Failure, Fault, ProxyFault};
use crate::metrics::{Metrics, ServiceHandles};
use crate::request_body::ClientFault;
use crate::response::Reply;
use crate::response_body::ResponseBody;
use http::Response;
use http_body_util::{BodyExt, Empty};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tailguard_balance::Policy as Balancer;
use tailguard_client::{ArmConfig, RetryConfig};
use tailguard_resilience::{Backoff, Class, HedgeConfig, Method, RetryBudgetConfig};
use tokio::time::Instant;

/// How a scripted attempt ends, and after how long.
#[derive(Clone, Debug)]
enum End {
    Status(u16),
    Unreachable,
    Client,
}

/// One attempt as the stand-in saw it.
#[derive(Debug, PartialEq)]
struct Seen {
    slot: usize,
    avoid: Option<usize>,
    at: Duration,
    /// The reading of the proxy's clock it was picked at.
    picked: Duration,
    /// Whether it ran to its end (false: dropped, i.e. cancelled).
    finished: bool,
}

/// A balanced stage that answers from a script: attempt k ends with `script[k]` after its
/// delay, on slot `k % slots`.
struct Scripted {
    script: Mutex<VecDeque<(Duration, End)>>,
    seen: Mutex<Vec<Seen>>,
    slots: usize,
    start: Instant,
}

impl Scripted {
    fn new(slots: usize, script: &[(u64, End)]) -> Self {
        Self {
            script: Mutex::new(
                script
                    .iter()
                    .map(|(ms, e)| (Duration::from_millis(*ms), e.clone()))
                    .collect(),
            ),
            seen: Mutex::default(),
            slots,
            start: Instant::now(),
        }
    }

    fn seen(&self) -> Vec<(usize, Option<usize>, u64, bool)> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .map(|s| (s.slot, s.avoid, s.at.as_millis() as u64, s.finished))
            .collect()
    }
}

/// Marks its attempt finished when it runs to the end; dropped first, it stays unfinished.
struct Finish<'a>(&'a Mutex<Vec<Seen>>, usize);

impl Finish<'_> {
    fn done(self) {
        self.0.lock().unwrap()[self.1].finished = true;
    }
}

impl Balanced for Scripted {
    fn attempt<'a>(
        &'a self,
        _request: &'a Outgoing,
        turn: Turn,
        now: Duration,
        slot_out: &mut usize,
    ) -> impl Future<Output = Attempted> + Send + 'a {
        let avoid = turn.avoid();
        let (delay, end) = self.script.lock().unwrap().pop_front().expect("scripted");
        let index = {
            let mut seen = self.seen.lock().unwrap();
            let slot = seen.len() % self.slots;
            seen.push(Seen {
                slot,
                avoid,
                at: self.start.elapsed(),
                picked: now,
                finished: false,
            });
            seen.len() - 1
        };
        let slot = index % self.slots;
        let finish = Finish(&self.seen, index);
        let attempt = async move {
            tokio::time::sleep(delay).await;
            finish.done();
            let addr = "127.0.0.1:9".parse().unwrap();
            match end {
                End::Status(s) => Attempted {
                    class: Class {
                        success: s < 500,
                        retryable: s >= 500,
                    },
                    result: Ok(response(s)),
                },
                End::Unreachable => Attempted {
                    class: Class {
                        success: false,
                        retryable: true,
                    },
                    result: Err(Fault::Endpoint(EndpointFault {
                        addr,
                        failure: Failure::Unreachable(
                            crate::fault::Reason::ConnectionRefused,
                            "connection refused".into(),
                        ),
                    })),
                },
                End::Client => Attempted {
                    class: Attempted::FINAL,
                    result: Err(Fault::Client(ClientFault::Aborted)),
                },
            }
        };
        *slot_out = slot;
        Box::pin(attempt)
    }
}

fn response(status: u16) -> Response<ResponseBody> {
    let body = Empty::new().map_err(|never| match never {}).boxed();
    let mut resp = Response::new(ResponseBody::local(body));
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
    resp
}

fn request(body: AttemptBody) -> Outgoing {
    let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
    Outgoing {
        parts,
        body: Mutex::new(body),
        method: Method::Get,
        h2: false,
        reply: Reply::Http,
        fault: None,
        deadline: None,
        hedge: true,
        retry: None,
        trail: None,
        trace: None,
        admission: None,
        arrived: None,
        answered: Default::default(),
    }
}

/// A service of three endpoints under an arm, with its counters.
struct Service {
    arm: ArmConfig,
    endpoints: Endpoints,
    handles: ServiceHandles,
    clock: Clock,
}

impl Service {
    fn new(arm: ArmConfig) -> Self {
        let upstreams: Vec<Upstream> = (1..=3)
            .map(|p| Upstream::new(format!("127.0.0.1:{p}").parse().unwrap()))
            .collect();
        Self::over(arm, &upstreams)
    }

    fn over(arm: ArmConfig, upstreams: &[Upstream]) -> Self {
        let endpoints = Endpoints::new(upstreams, &arm, Duration::ZERO, 7).unwrap();
        let handles = ServiceHandles::new(&Metrics::new(), "web", "[default]");
        Self {
            arm,
            endpoints,
            handles,
            clock: Clock::start(),
        }
    }

    fn policy(&self) -> Policy<'_> {
        Policy {
            arm: &self.arm,
            endpoints: &self.endpoints,
            handles: &self.handles,
            clock: self.clock,
        }
    }
}

fn retrying(max_retries: u32) -> ArmConfig {
    let mut arm = ArmConfig::new("web", Balancer::RoundRobin);
    arm.retries = Some(RetryConfig {
        max_retries,
        ..RetryConfig::default()
    });
    arm
}

fn status(result: &Result<Response<ResponseBody>, Fault>) -> u16 {
    match result {
        Ok(resp) => resp.status().as_u16(),
        Err(fault) => fault
            .answer(Reply::Http, ErrorDetail::Reason)
            .status()
            .as_u16(),
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_attempt_starts_from_the_arrival_the_request_carries() {
    let service = Service::new(retrying(1));
    let next = Scripted::new(3, &[(10, End::Status(503)), (10, End::Status(200))]);
    tokio::time::advance(Duration::from_millis(50)).await;
    let mut request = request(AttemptBody::Empty);
    request.arrived = Some(Duration::from_millis(7));
    let result = run(service.policy(), &next, &request).await;
    assert_eq!(status(&result), 200);
    let picked: Vec<Duration> = next.seen.lock().unwrap().iter().map(|s| s.picked).collect();
    assert_eq!(picked.len(), 2);
    assert_eq!(picked[0], Duration::from_millis(7), "the arrival's reading");
    assert!(
        picked[1] >= Duration::from_millis(60),
        "a retry reads the clock: {picked:?}"
    );
}

#[test]
fn answered_is_none_until_an_attempt_ends_then_the_last_reading() {
    let answered = Answered::default();
    assert_eq!(answered.get(), None);
    answered.set(Duration::from_micros(5));
    answered.set(Duration::from_micros(9));
    assert_eq!(answered.get(), Some(Duration::from_micros(9)));
    // Beyond what nanoseconds in a u64 hold: still a reading, not "none".
    answered.set(Duration::MAX);
    assert!(answered.get().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_retryable_failure_is_retried_elsewhere_up_to_the_limit() {
    let arm = retrying(2);
    let service = Service::new(arm);
    let policy = service.policy();
    let next = Scripted::new(
        3,
        &[
            (10, End::Status(503)),
            (10, End::Unreachable),
            (10, End::Status(502)),
        ],
    );
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 502, "the last attempt's answer");
    // Each retry avoids the slot of the attempt before it, and goes at once (no backoff).
    assert_eq!(
        next.seen(),
        [
            (0, None, 0, true),
            (1, Some(0), 10, true),
            (2, Some(1), 20, true)
        ]
    );
    assert_eq!(service.handles.retries.get(), 2);
}

/// The answer to a request whose attempts all failed says (with `clientErrorDetail: full`) how
/// many there were and how long they took, not only what the last one met; by default, the
/// reason alone.
#[tokio::test(start_paused = true)]
async fn the_last_failure_tells_how_many_attempts_and_how_long() {
    let service = Service::new(retrying(2));
    let three = [
        (1000, End::Unreachable),
        (1000, End::Unreachable),
        (1000, End::Unreachable),
    ];
    let next = Scripted::new(3, &three);
    let result = run(service.policy(), &next, &request(AttemptBody::Empty)).await;
    let fault = result.unwrap_err();
    let answer = fault.answer(Reply::Http, ErrorDetail::Full);
    let why = answer.headers()["x-tailguard-error"].to_str().unwrap();
    assert_eq!(
        why,
        "upstream 127.0.0.1:9: connection refused; 3 attempts in 3000 ms"
    );
    let answer = fault.answer(Reply::Http, ErrorDetail::Reason);
    assert_eq!(answer.headers()["x-tailguard-error"], "connection refused");
    // One attempt says nothing more.
    let next = Scripted::new(3, &[(1000, End::Unreachable)]);
    let result = run(
        Service::new(retrying(0)).policy(),
        &next,
        &request(AttemptBody::Empty),
    )
    .await;
    let answer = result.unwrap_err().answer(Reply::Http, ErrorDetail::Full);
    assert_eq!(
        answer.headers()["x-tailguard-error"],
        "upstream 127.0.0.1:9: connection refused"
    );
}

#[tokio::test(start_paused = true)]
async fn a_success_or_a_final_fault_is_not_retried() {
    let arm = retrying(3);
    let service = Service::new(arm);
    let (policy, handles) = (service.policy(), &service.handles);
    for (end, expect) in [
        (End::Status(200), 200),
        (End::Status(404), 404),
        (End::Client, 400),
    ] {
        let next = Scripted::new(3, &[(5, end)]);
        let result = run(policy, &next, &request(AttemptBody::Empty)).await;
        assert_eq!(status(&result), expect);
        assert_eq!(next.seen().len(), 1);
    }
    assert_eq!(handles.retries.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_or_a_body_that_cannot_be_sent_again_ends_the_request() {
    let mut arm = retrying(3);
    arm.retries.as_mut().unwrap().budget = RetryBudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec: 0,
        percent: 0.0,
    };
    let service = Service::new(arm);
    let (policy, handles) = (service.policy(), &service.handles);
    let next = Scripted::new(3, &[(5, End::Status(503))]);
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 503);
    assert_eq!(handles.budget_exhausted.get(), 1);

    // A streamed body an attempt already took cannot go again, whatever the budget.
    let arm = retrying(3);
    let service = Service::new(arm);
    let (policy, handles) = (service.policy(), &service.handles);
    let next = Scripted::new(3, &[(5, End::Status(503))]);
    let taken = request(AttemptBody::Streaming(None));
    assert_eq!(status(&run(policy, &next, &taken).await), 503);
    assert_eq!((next.seen().len(), handles.retries.get()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn retries_wait_out_their_backoff() {
    let mut arm = retrying(2);
    arm.retries.as_mut().unwrap().backoff = Some(Backoff::Constant(Duration::from_millis(100)));
    let service = Service::new(arm);
    let policy = service.policy();
    let next = Scripted::new(
        3,
        &[
            (10, End::Unreachable),
            (10, End::Unreachable),
            (10, End::Status(200)),
        ],
    );
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 200);
    let starts: Vec<u64> = next.seen().iter().map(|s| s.2).collect();
    assert_eq!(starts, [0, 110, 220]);
}

#[tokio::test(start_paused = true)]
async fn no_endpoints_is_the_proxys_fault_and_sends_nothing() {
    let service = Service::over(retrying(3), &[]);
    let next = Scripted::new(1, &[]);
    let result = run(service.policy(), &next, &request(AttemptBody::Empty)).await;
    assert!(matches!(result, Err(Fault::Proxy(ProxyFault::NoEndpoints))));
    assert!(next.seen().is_empty());
}

/// An arm that hedges after the p50 of what it has seen, and endpoints that have seen 20
/// attempts of 10 ms each.
fn hedging() -> Service {
    let mut arm = ArmConfig::new("web", Balancer::RoundRobin);
    arm.hedge = Some(HedgeConfig {
        max_extra_load: 0.5,
        min_per_sec: 10,
        min_samples: 20,
        min_delay: Duration::from_millis(1),
        ..HedgeConfig::default()
    });
    let service = Service::new(arm);
    let endpoints = &service.endpoints;
    let mut rng_free = Vec::new();
    for _ in 0..20 {
        let attempt = endpoints
            .send(Duration::ZERO, None, true, &mut rng_free)
            .unwrap();
        let ms10 = Duration::from_millis(10);
        let ok = tailguard_resilience::AttemptOutcome::Status(200);
        endpoints.complete(attempt, ms10, Method::Get, ok, Duration::ZERO, None);
    }
    service
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_attempt_gets_a_backup_and_the_first_success_wins() {
    let service = hedging();
    let (policy, handles, endpoints) = (service.policy(), &service.handles, &service.endpoints);
    let delay = endpoints.hedge_delay(Duration::from_secs(2)).expect("warm");
    let next = Scripted::new(3, &[(1_000, End::Status(200)), (10, End::Status(201))]);
    let started = Instant::now();
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 201, "the backup's answer");
    // The backup went at the delay (tokio's timer rounds it up to its next millisecond) and
    // answered 10 ms later.
    let took = started.elapsed();
    let backup_at = took - Duration::from_millis(10);
    assert!(
        backup_at >= delay && backup_at < delay + Duration::from_millis(1),
        "{took:?}"
    );
    let seen = next.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].1,
        Some(seen[0].0),
        "the backup avoids the first's endpoint"
    );
    assert!(!seen[0].3, "the slow first attempt was dropped (cancelled)");
    assert_eq!((handles.hedges.get(), handles.hedge_wins.get()), (1, 1));

    // A first attempt that ends within the delay gets no backup.
    let next = Scripted::new(3, &[(1, End::Status(200))]);
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!((status(&result), next.seen().len()), (200, 1));
}

#[tokio::test(start_paused = true)]
async fn when_the_backup_fails_the_first_attempt_decides() {
    let service = hedging();
    let (policy, handles) = (service.policy(), &service.handles);
    let next = Scripted::new(3, &[(300, End::Status(200)), (10, End::Unreachable)]);
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 200);
    let finished: Vec<bool> = next.seen().iter().map(|s| s.3).collect();
    assert_eq!(finished, [true, true]);
    assert_eq!((handles.hedges.get(), handles.hedge_wins.get()), (1, 0));
}

/// A balanced stage over the service's own [`Endpoints`]: each attempt is picked and reported
/// there (so the client sees each endpoint's silence), the first attempt's endpoint stalls for
/// `stall`, and every other attempt answers after 5 ms with the next of `answers` (200 once
/// they run out).
struct Live<'e> {
    endpoints: &'e Endpoints,
    clock: Clock,
    stall: Duration,
    stalled: Mutex<Option<usize>>,
    answers: Mutex<VecDeque<u16>>,
    seen: Mutex<Vec<(usize, u64)>>,
    start: Instant,
}

/// Reports an attempt's end to the endpoints, or its cancellation when dropped unfinished.
struct Out<'e>(
    &'e Endpoints,
    Clock,
    Option<(usize, tailguard_client::Sent)>,
);

impl Drop for Out<'_> {
    fn drop(&mut self) {
        if let Some(a) = self.2.take() {
            self.0.cancel(a, self.1.now());
        }
    }
}

impl<'e> Live<'e> {
    fn new(service: &'e Service, stall: Duration, answers: &[u16]) -> Self {
        Self {
            endpoints: &service.endpoints,
            clock: service.clock,
            stall,
            stalled: Mutex::default(),
            answers: Mutex::new(answers.iter().copied().collect()),
            seen: Mutex::default(),
            start: Instant::now(),
        }
    }
}

impl Balanced for Live<'_> {
    fn attempt<'a>(
        &'a self,
        _request: &'a Outgoing,
        turn: Turn,
        now: Duration,
        slot_out: &mut usize,
    ) -> impl Future<Output = Attempted> + Send + 'a {
        let first = turn == Turn::First;
        let (slot, sent) = self
            .endpoints
            .send(now, turn.avoid(), first, &mut Vec::new())
            .unwrap();
        let stalls = *self.stalled.lock().unwrap().get_or_insert(slot) == slot;
        let status = if stalls {
            200
        } else {
            self.answers.lock().unwrap().pop_front().unwrap_or(200)
        };
        let delay = if stalls {
            self.stall
        } else {
            Duration::from_millis(5)
        };
        self.seen
            .lock()
            .unwrap()
            .push((slot, self.start.elapsed().as_millis() as u64));
        let out = Out(self.endpoints, self.clock, Some((slot, sent)));
        let attempt = async move {
            let mut out = out; // the guard whole, so dropping the attempt cancels it
            tokio::time::sleep(delay).await;
            let a = out.2.take().expect("once");
            let outcome = tailguard_resilience::AttemptOutcome::Status(status);
            let now = self.clock.now();
            let class = self
                .endpoints
                .complete(a, delay, Method::Get, outcome, now, None)
                .class;
            Attempted {
                class,
                result: Ok(response(status)),
            }
        };
        *slot_out = slot;
        Box::pin(attempt)
    }
}

/// A service with rescue on (and retries, which it needs), whose endpoints have seen 120
/// answers of 10 ms: the backup delay is 10 ms, and an endpoint is silent after 100 ms (ten
/// times its mean).
fn rescuing(rescue: bool) -> Service {
    let mut arm = retrying(3);
    arm.classifier = tailguard_resilience::Classifier::retryable_read_5xx();
    arm.rescue = rescue;
    let service = Service::new(arm);
    let ok = tailguard_resilience::AttemptOutcome::Status(200);
    let ms10 = Duration::from_millis(10);
    for _ in 0..120 {
        let now = service.clock.now();
        let a = service
            .endpoints
            .send(now, None, true, &mut Vec::new())
            .unwrap();
        service
            .endpoints
            .complete(a, ms10, Method::Get, ok, now + ms10, None);
    }
    service
}

#[tokio::test(start_paused = true)]
async fn a_request_at_a_silent_endpoint_is_rescued_on_another() {
    let service = rescuing(true);
    let (policy, handles) = (service.policy(), &service.handles);
    let next = Live::new(&service, Duration::from_secs(5), &[]);
    let started = Instant::now();
    let result = run(policy, &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 200);
    let took = started.elapsed();
    // Rescued once the endpoint had been silent for ten times its 10 ms mean, answered 5 ms
    // later: not after the 5 s stall.
    assert!(
        took >= Duration::from_millis(105) && took < Duration::from_millis(130),
        "{took:?}"
    );
    let seen = next.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_ne!(seen[0].0, seen[1].0, "the rescue went elsewhere");
    assert_eq!((handles.rescues.get(), handles.retries.get()), (1, 1));
    assert_eq!(handles.hedges.get(), 0);
    // The stalled attempt was cancelled: nothing waits at its endpoint any more.
    assert_eq!(service.endpoints.pending(seen[0].0), 0);
}

#[tokio::test(start_paused = true)]
async fn without_rescue_the_request_waits_out_the_stall() {
    let service = rescuing(false);
    let next = Live::new(&service, Duration::from_secs(5), &[]);
    let started = Instant::now();
    let result = run(service.policy(), &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 200);
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert_eq!(service.handles.rescues.get(), 0);
}

/// A rescue that meets a failing endpoint is followed by another at once, not by the stalled
/// attempt; each counts as a retry, and the retry limit bounds them.
#[tokio::test(start_paused = true)]
async fn a_failed_rescue_is_followed_by_another_within_the_retry_limit() {
    let service = rescuing(true);
    let next = Live::new(&service, Duration::from_secs(5), &[503]);
    let started = Instant::now();
    let result = run(service.policy(), &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 200);
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(service.handles.rescues.get(), 2);
    assert_eq!(next.seen.lock().unwrap().len(), 3);

    // With one retry allowed, the failed rescue is the last backup: the request waits for
    // the stalled attempt.
    let mut arm = service.arm.clone();
    arm.retries.as_mut().unwrap().max_retries = 1;
    let limited = Service::new(arm);
    let ok = tailguard_resilience::AttemptOutcome::Status(200);
    for _ in 0..120 {
        let now = limited.clock.now();
        let a = limited
            .endpoints
            .send(now, None, true, &mut Vec::new())
            .unwrap();
        let ms10 = Duration::from_millis(10);
        limited
            .endpoints
            .complete(a, ms10, Method::Get, ok, now + ms10, None);
    }
    let next = Live::new(&limited, Duration::from_secs(5), &[503]);
    let started = Instant::now();
    let result = run(limited.policy(), &next, &request(AttemptBody::Empty)).await;
    assert_eq!(status(&result), 200);
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert_eq!(limited.handles.rescues.get(), 1);
}

/// Under the service's admission, a retry goes only with room and nobody waiting: the first
/// attempt's place goes to the request that waited, and the failure in hand is answered
/// rather than retried; a success's round trip is what the limit learns.
#[tokio::test(start_paused = true)]
async fn a_retry_finding_no_room_is_not_sent() {
    use crate::admission::{Entry, Gated};
    use std::sync::Arc;
    use tailguard_resilience::admission::{Criticality, QueueConfig};
    let service = Service::new(retrying(2));
    let mut cfg = tailguard_client::AdmissionConfig::cap(1);
    cfg.queue = QueueConfig {
        max_size: 1,
        max_wait: Duration::from_secs(10),
    };
    let gate = Arc::new(Gated::new(cfg, service.clock));
    let place = gate.enter(Criticality::Default, None).await.unwrap();
    let waiter = {
        let gate = Arc::clone(&gate);
        tokio::spawn(async move { gate.enter(Criticality::Default, None).await.is_ok() })
    };
    while gate.figures().2 == 0 {
        tokio::task::yield_now().await;
    }
    let mut req = request(AttemptBody::Empty);
    req.admission = Some(Entry::new(Arc::clone(&gate), place));
    let next = Scripted::new(3, &[(10, End::Status(503)), (10, End::Status(200))]);
    let result = run(service.policy(), &next, &req).await;
    assert_eq!(status(&result), 503, "the failure in hand");
    assert_eq!(next.seen().len(), 1, "no retry was sent");
    assert_eq!(service.handles.admission_no_room.get(), 1);
    assert!(waiter.await.unwrap(), "the waiting request took the place");
    // With room, the retry goes, holding its own place while it runs.
    let gate = Arc::new(Gated::new(
        tailguard_client::AdmissionConfig::cap(1),
        service.clock,
    ));
    let place = gate.enter(Criticality::Default, None).await.unwrap();
    let mut req = request(AttemptBody::Empty);
    req.admission = Some(Entry::new(Arc::clone(&gate), place));
    let next = Scripted::new(3, &[(10, End::Status(503)), (10, End::Status(200))]);
    let result = run(service.policy(), &next, &req).await;
    assert_eq!(status(&result), 200);
    assert_eq!(next.seen().len(), 2);
    assert_eq!(gate.figures(), (1, 0, 0), "every place came back");
}
