//! Randomized stress test of every picker: random fleet sizes, random request durations,
//! endpoints going down and up at random. Checks the two rules of `Balance::pick` (a ready
//! endpoint whenever one exists; some endpoint when none is) and that no ready endpoint starves.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Duration;
use tailguard_balance::{
    ApertureConfig, Balance, Choices, LoadKind, Policy, PrequalConfig, ProbeReply, Ready,
};

fn policies() -> Vec<Policy> {
    let aperture = ApertureConfig::default();
    vec![
        Policy::RoundRobin,
        Policy::Random,
        Policy::Heap,
        Policy::p2c(LoadKind::Pending),
        Policy::p2c(LoadKind::peak_ewma()),
        Policy::BestOf {
            choices: Choices::D(3),
            load: LoadKind::peak_ewma(),
        },
        Policy::BestOf {
            choices: Choices::All,
            load: LoadKind::Pending,
        },
        Policy::Aperture {
            config: aperture,
            load: LoadKind::Pending,
        },
        Policy::Aperture {
            config: aperture,
            load: LoadKind::peak_ewma(),
        },
        Policy::Prequal(PrequalConfig::default()),
    ]
}

/// Answers the probes a probing balancer asks for after a pick, at once: each endpoint's
/// requests in flight and a latency that grows with them (other balancers ask for none).
fn answer_probes(
    b: &mut dyn Balance,
    in_flight: &[InFlight],
    ready: Ready<'_>,
    now: Duration,
    rng: &mut Xoshiro256PlusPlus,
) {
    let mut targets = Vec::new();
    b.probe_targets(now, ready, rng, &mut targets);
    for t in targets {
        assert!(ready(t), "probes go to ready endpoints only");
        let rif = in_flight.iter().filter(|x| x.1 == t).count() as u32;
        let reply = ProbeReply {
            rif,
            latency: Duration::from_millis(50 + 10 * u64::from(rif)),
        };
        // Now and then a probe gets no answer.
        let reply = (!rng.random_bool(0.1)).then_some(reply);
        b.probe_reply(t, reply, now);
    }
}

/// One request in flight: (completion time, endpoint, send time).
type InFlight = (Duration, usize, Duration);

/// Completes every request due by `now`.
fn complete_due(b: &mut dyn Balance, in_flight: &mut Vec<InFlight>, now: Duration) {
    in_flight.retain(|&(done, endpoint, sent)| {
        let due = done <= now;
        if due {
            b.end(endpoint, done - sent, done);
        }
        !due
    });
}

/// Phase 1: endpoints flap; every pick must respect readiness.
fn flapping(policy: &Policy, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = rng.random_range(1..40);
    let mut b = policy.build(n, Duration::ZERO, &mut rng).unwrap();
    let mut up: Vec<bool> = (0..n).map(|_| rng.random_bool(0.7)).collect();
    let mut in_flight = Vec::new();
    let mut now = Duration::ZERO;
    for _ in 0..3_000 {
        now += Duration::from_micros(rng.random_range(0..2_000));
        complete_due(b.as_mut(), &mut in_flight, now);
        if rng.random_bool(0.02) {
            let i = rng.random_range(0..n);
            up[i] = !up[i];
        }
        let ready = |i: usize| up[i];
        let chosen = b.pick(now, &ready, &mut rng).expect("endpoints exist");
        assert!(chosen < n);
        if up.iter().any(|&u| u) {
            assert!(
                up[chosen],
                "{policy}: picked down endpoint {chosen} (seed {seed})"
            );
        }
        b.start(chosen, now);
        let latency = Duration::from_millis(rng.random_range(1..50));
        in_flight.push((now + latency, chosen, now));
        answer_probes(b.as_mut(), &in_flight, &ready, now, &mut rng);
    }
}

/// Phase 2: equal endpoints, all ready, enough load that aperture opens fully: every endpoint
/// gets a fair share.
fn no_starvation(policy: &Policy, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = rng.random_range(2..16);
    let mut b = policy.build(n, Duration::ZERO, &mut rng).unwrap();
    let mut counts = vec![0u32; n];
    let mut in_flight = Vec::new();
    let mut now = Duration::ZERO;
    let picks = 8_000;
    for _ in 0..picks {
        // About 4 * n requests in flight: 50 ms each, one every 12.5 / n ms.
        now += Duration::from_micros(12_500 / n as u64);
        complete_due(b.as_mut(), &mut in_flight, now);
        let chosen = b.pick(now, &|_| true, &mut rng).unwrap();
        counts[chosen] += 1;
        b.start(chosen, now);
        let latency = Duration::from_micros(rng.random_range(45_000..55_000));
        in_flight.push((now + latency, chosen, now));
        answer_probes(b.as_mut(), &in_flight, &|_| true, now, &mut rng);
    }
    let fair = picks as f64 / n as f64;
    for (i, &c) in counts.iter().enumerate() {
        assert!(
            f64::from(c) > fair / 3.0,
            "{policy}: endpoint {i} got {c} of {picks} (fair {fair:.0}), seed {seed}: {counts:?}"
        );
    }
}

#[test]
fn every_picker_respects_readiness_under_flapping() {
    for policy in policies() {
        for seed in 0..8 {
            flapping(&policy, seed);
        }
    }
}

#[test]
fn no_ready_endpoint_starves() {
    for policy in policies() {
        for seed in 100..104 {
            no_starvation(&policy, seed);
        }
    }
}

#[test]
fn all_down_still_picks() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for policy in policies() {
        let mut b = policy.build(7, Duration::ZERO, &mut rng).unwrap();
        for _ in 0..50 {
            let chosen = b.pick(Duration::ZERO, &|_| false, &mut rng);
            assert!(chosen.is_some_and(|i| i < 7), "{policy}");
        }
        let mut empty = policy.build(0, Duration::ZERO, &mut rng).unwrap();
        assert_eq!(empty.pick(Duration::ZERO, &|_| true, &mut rng), None);
    }
}
