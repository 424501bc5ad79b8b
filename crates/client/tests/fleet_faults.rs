//! The client's resilience features against whole-fleet faults, in virtual time: a feature that
//! is on must never do worse than the same client with it off.
//!
//! Each run is a small discrete-event loop: requests arrive at a fixed rate, each goes to the
//! endpoint the [`Client`] picks, and completes after that endpoint's latency with its outcome.
//! Time is a `Duration` from zero; nothing reads a clock.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;
use tailguard_balance::{LoadKind, Policy};
use tailguard_client::{ArmConfig, Client, RetryConfig, Sent};
use tailguard_resilience::{
    AccrualConfig, AttemptOutcome, Classifier, HedgeConfig, Method, OutlierConfig,
};

/// What an endpoint does to an attempt sent at `t`: its latency and outcome.
type Behaviour = dyn Fn(usize, Duration) -> (Duration, AttemptOutcome);

// long: one event loop of a small simulator (arrivals, completions, retries) over shared
// state; the real one is tailguard-sim's, which this test keeps out of the client's tests.
/// Runs `rate` requests per second for `length` against `n` endpoints behaving as `fleet`
/// says, retrying as the proxy does (another endpoint, under the budget); returns the share
/// of requests that arrived from `from` on and succeeded.
fn success_share(
    arm: &ArmConfig,
    n: usize,
    fleet: &Behaviour,
    rate: u64,
    length: Duration,
    from: Duration,
) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut client = Client::new(arm, n, Duration::ZERO, &mut rng).unwrap();
    let gap = Duration::from_nanos(1_000_000_000 / rate);
    // Completions in time order: (time, request index) into `flying`.
    let mut due: BinaryHeap<Reverse<(Duration, u64)>> = BinaryHeap::new();
    let mut flying: HashMap<u64, Attempt> = HashMap::new();
    let (mut ok, mut counted) = (0u64, 0u64);
    for i in 0.. {
        let arrival = gap * u32::try_from(i).unwrap();
        let last = arrival >= length;
        while let Some(&Reverse((at, k))) = due.peek() {
            if at > arrival && !last {
                break;
            }
            due.pop();
            let a = flying.remove(&k).unwrap();
            let class = client
                .on_complete(
                    a.endpoint,
                    a.ticket,
                    at.saturating_sub(a.sent),
                    Method::Get,
                    a.outcome,
                    at,
                    &mut rng,
                )
                .class;
            let retry = !class.success
                && class.retryable
                && arm.retries.is_some_and(|r| a.tries < r.max_retries)
                && client.may_retry(at);
            if retry {
                let endpoint = client.pick(at, Some(a.endpoint), &mut rng);
                let ticket = client.on_send(endpoint, at);
                let (latency, outcome) = fleet(endpoint, at);
                due.push(Reverse((at + latency, k)));
                let tries = a.tries + 1;
                let (sent, arrived) = (at, a.arrived);
                flying.insert(
                    k,
                    Attempt {
                        endpoint,
                        ticket,
                        sent,
                        arrived,
                        tries,
                        outcome,
                    },
                );
            } else if a.arrived >= from {
                counted += 1;
                ok += u64::from(class.success);
            }
        }
        if last {
            break;
        }
        client.on_request(arrival);
        let endpoint = client.pick(arrival, None, &mut rng);
        let ticket = client.on_send(endpoint, arrival);
        let (latency, outcome) = fleet(endpoint, arrival);
        due.push(Reverse((arrival + latency, i)));
        let attempt = Attempt {
            endpoint,
            ticket,
            sent: arrival,
            arrived: arrival,
            tries: 0,
            outcome,
        };
        flying.insert(i, attempt);
    }
    ok as f64 / counted.max(1) as f64
}

/// One attempt in flight.
struct Attempt {
    endpoint: usize,
    ticket: Sent,
    sent: Duration,
    /// When its request arrived.
    arrived: Duration,
    /// Retries before this attempt.
    tries: u32,
    outcome: AttemptOutcome,
}

/// The fleet: e0 and e1 answer in 20 ms, e2 in 300 ms; from `down` on, e0 and e1
/// refuse connections (a refused connect takes 0.2 ms).
fn two_fast_go_down(down: Duration) -> impl Fn(usize, Duration) -> (Duration, AttemptOutcome) {
    move |e, t| match e {
        0 | 1 if t >= down => (Duration::from_micros(200), AttemptOutcome::Refused),
        0 | 1 => (Duration::from_millis(20), AttemptOutcome::Status(200)),
        _ => (Duration::from_millis(300), AttemptOutcome::Status(200)),
    }
}

/// The proxy's default service: P2C peak EWMA, retryable reads, retries under the default
/// budget, Linkerd 1's consecutive-failures accrual.
fn proxy_arm(policy: Policy) -> ArmConfig {
    let mut arm = ArmConfig::new("proxy", policy);
    arm.classifier = Classifier::retryable_read_5xx();
    arm.retries = Some(RetryConfig::default());
    arm.accrual = Some(AccrualConfig::default());
    arm
}

fn ewma_arm() -> ArmConfig {
    proxy_arm(Policy::p2c(LoadKind::peak_ewma()))
}

#[test]
fn ejection_never_turns_two_dead_endpoints_into_an_outage() {
    let down = Duration::from_secs(40);
    let fleet = two_fast_go_down(down);
    let (length, rate) = (Duration::from_secs(100), 100);
    let without = success_share(&ewma_arm(), 3, &fleet, rate, length, down);
    let mut arm = ewma_arm();
    arm.outlier = Some(OutlierConfig {
        factor: 3.0,
        ..OutlierConfig::default()
    });
    let with = success_share(&arm, 3, &fleet, rate, length, down);
    eprintln!("P2C peak EWMA after the down: {with:.4} with ejection, {without:.4} without");
    assert!(without > 0.95, "without ejection: {without:.4}");
    assert!(
        with >= without - 0.005,
        "ejection made it worse: {with:.4} against {without:.4} without"
    );
}

#[test]
fn ejection_under_round_robin_releases_the_healthy_endpoint_when_the_others_fail() {
    // Round robin does not avoid failing endpoints by itself; the point is that ejection does
    // not make it worse by keeping the one healthy endpoint out.
    let down = Duration::from_secs(40);
    let fleet = two_fast_go_down(down);
    let (length, rate) = (Duration::from_secs(100), 100);
    let rr = proxy_arm(Policy::RoundRobin);
    let without = success_share(&rr, 3, &fleet, rate, length, down);
    let mut arm = rr.clone();
    arm.outlier = Some(OutlierConfig {
        factor: 3.0,
        ..OutlierConfig::default()
    });
    let with = success_share(&arm, 3, &fleet, rate, length, down);
    eprintln!("round robin after the down: {with:.4} with ejection, {without:.4} without");
    assert!(
        with >= without - 0.005,
        "ejection made it worse: {with:.4} against {without:.4} without"
    );
}

#[test]
fn hedging_is_not_blinded_by_a_stalled_endpoint() {
    // Three endpoints at 20 ms; from 20 s on, endpoint 2 stalls: every attempt sent to it
    // takes 10 s. Round robin keeps sending it a third of the traffic, so the live p95 of
    // attempt latencies would climb to 10 s and no backup would ever leave in time.
    let stall = Duration::from_secs(20);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let mut arm = ArmConfig::new("rr", Policy::RoundRobin);
    arm.hedge = Some(HedgeConfig {
        min_per_sec: 20,
        ..HedgeConfig::default()
    });
    let mut client = Client::new(&arm, 3, Duration::ZERO, &mut rng).unwrap();
    let ms = Duration::from_millis;
    let mut delays = Vec::new();
    // 200 req/s for 60 s; every attempt completes (no hedges are sent here: this checks the
    // delay the hedger would use).
    for i in 0..12_000u64 {
        let now = ms(i * 5);
        client.on_request(now);
        let e = client.pick(now, None, &mut rng);
        let ticket = client.on_send(e, now);
        let latency = if e == 2 && now >= stall {
            ms(10_000)
        } else {
            ms(20)
        };
        // Completions are recorded in order of sending; good enough for the quantile.
        let class = client
            .on_complete(
                e,
                ticket,
                latency,
                Method::Get,
                AttemptOutcome::Status(200),
                now + latency,
                &mut rng,
            )
            .class;
        assert!(class.success);
        if i % 1000 == 999 {
            delays.push(client.hedge_delay(now));
        }
    }
    let worst = delays.iter().flatten().max().copied().unwrap();
    assert!(
        worst <= ms(200),
        "the hedge delay rose to {worst:?}: {delays:?}"
    );
}
