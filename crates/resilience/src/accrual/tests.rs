//! Table tests for the accrual state machine: each case is a script of timed steps.

use super::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug)]
enum Step {
    /// Send a request named by the string at the time (ms).
    Send(&'static str, u64),
    /// The named request ends (success?) at the time.
    End(&'static str, bool, u64),
    /// The named request is cancelled at the time.
    Cancel(&'static str, u64),
    /// Expect availability at the time.
    Available(bool, u64),
    /// Expect the status.
    Is(Status),
    /// Expect the kind of the named ticket.
    Kind(&'static str, TicketKind),
}
use Step::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn run(name: &str, config: AccrualConfig, script: &[Step]) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut a = Accrual::new(&config);
    let mut tickets: BTreeMap<&str, Ticket> = BTreeMap::new();
    for (i, step) in script.iter().enumerate() {
        let at = format!("{name}, step {i} {step:?}");
        match *step {
            Send(id, t) => {
                tickets.insert(id, a.on_send(ms(t)));
            }
            End(id, ok, t) => {
                a.on_outcome(tickets[id], ok, ms(t), &mut rng);
            }
            Cancel(id, t) => a.on_cancel(tickets[id], ms(t)),
            Available(want, t) => assert_eq!(a.is_available(ms(t)), want, "{at}"),
            Is(want) => assert_eq!(a.status(), want, "{at}"),
            Kind(id, want) => assert_eq!(tickets[id].kind, want, "{at}"),
        }
    }
}

fn consecutive(failures: u32, backoff: Backoff) -> AccrualConfig {
    AccrualConfig {
        policy: TripPolicy::ConsecutiveFailures { failures },
        backoff,
    }
}

const TEN_S: Backoff = Backoff::Constant(Duration::from_secs(10));

#[test]
#[rustfmt::skip]
fn trip_backoff_single_probe_revive() {
    run(
        "consecutive",
        consecutive(2, TEN_S),
        &[
            Send("a", 0), End("a", false, 1),
            Send("b", 2), End("b", true, 3), // resets the count
            Send("c", 4), End("c", false, 5),
            Available(true, 5),
            Send("d", 6), End("d", false, 7),
            Is(Status::Dead { until: ms(10_007), attempt: 1 }),
            Available(false, 10_006), Available(true, 10_007),
            Send("probe", 10_010), Kind("probe", TicketKind::Probe),
            Is(Status::Probing { attempt: 1 }), Available(false, 10_010),
            End("probe", false, 10_020),
            Is(Status::Dead { until: ms(20_020), attempt: 2 }),
            Send("probe2", 20_020), End("probe2", true, 20_030),
            Is(Status::Alive), Available(true, 20_030),
            // a fresh history: one failure does not trip again
            Send("e", 20_040), End("e", false, 20_050), Is(Status::Alive),
        ],
    );
}

#[test]
#[rustfmt::skip]
fn stragglers_from_an_earlier_life_are_ignored() {
    run(
        "stragglers",
        consecutive(1, TEN_S),
        &[
            Send("slow", 0), Send("fails", 1), End("fails", false, 2),
            Is(Status::Dead { until: ms(10_002), attempt: 1 }),
            Send("probe", 10_002),
            End("slow", true, 10_003), // not the probe: still probing
            Is(Status::Probing { attempt: 1 }),
            End("probe", true, 10_004), Is(Status::Alive),
        ],
    );
}

#[test]
#[rustfmt::skip]
fn cancelled_probe_reopens_at_once() {
    run(
        "cancel",
        consecutive(1, TEN_S),
        &[
            Send("a", 0), End("a", false, 0),
            Send("probe", 10_000), Cancel("probe", 10_500),
            Is(Status::Dead { until: ms(10_500), attempt: 1 }),
            Available(true, 10_500),
            Send("probe2", 10_600), Kind("probe2", TicketKind::Probe),
            Cancel("a", 10_700), // cancelling a normal ticket changes nothing
            Is(Status::Probing { attempt: 1 }),
        ],
    );
}

#[test]
#[rustfmt::skip]
fn forced_requests_revive_on_success_only() {
    run(
        "forced",
        consecutive(1, TEN_S),
        &[
            Send("a", 0), End("a", false, 0),
            Send("f1", 100), Kind("f1", TicketKind::Forced),
            End("f1", false, 200),
            Is(Status::Dead { until: ms(10_000), attempt: 1 }),
            Send("f2", 300), End("f2", true, 400), Is(Status::Alive),
        ],
    );
}

#[test]
#[rustfmt::skip]
fn exponential_backoff_grows_with_each_failed_probe() {
    let exp = Backoff::Exponential { start: Duration::from_secs(1), max: Duration::from_secs(3) };
    run(
        "exponential",
        consecutive(1, exp),
        &[
            Send("a", 0), End("a", false, 0),
            Is(Status::Dead { until: ms(1_000), attempt: 1 }),
            Send("p1", 1_000), End("p1", false, 1_000),
            Is(Status::Dead { until: ms(3_000), attempt: 2 }),
            Send("p2", 3_000), End("p2", false, 3_000),
            Is(Status::Dead { until: ms(6_000), attempt: 3 }), // capped at 3 s
        ],
    );
}

#[test]
fn success_rate_trips_only_after_enough_requests() {
    let config = AccrualConfig {
        policy: TripPolicy::SuccessRate {
            threshold: 0.9,
            requests: 20,
        },
        backoff: TEN_S,
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    // (pattern of outcomes, request index that trips or None)
    type Pattern = fn(u32) -> bool;
    let cases: [(Pattern, Option<u32>); 4] = [
        (|_| true, None),
        (|_| false, Some(20)),
        (|i| i % 2 == 0, Some(20)),
        (|i| i % 20 != 0, None), // 95% success
    ];
    for (k, (outcome, trips_at)) in cases.iter().enumerate() {
        let mut a = Accrual::new(&config);
        let mut tripped = None;
        for i in 1..=200 {
            let t = a.on_send(ms(u64::from(i)));
            if a.on_outcome(t, outcome(i), ms(u64::from(i)), &mut rng)
                .is_some()
            {
                tripped = Some(i);
                break;
            }
        }
        assert_eq!(tripped, *trips_at, "case {k}");
    }
}

#[test]
#[rustfmt::skip]
fn windowed_success_rate_forgets_old_failures() {
    let config = AccrualConfig {
        policy: TripPolicy::SuccessRateWindowed {
            threshold: 0.5,
            window: Duration::from_secs(10),
            min_requests: 5,
        },
        backoff: TEN_S,
    };
    run(
        "windowed",
        config,
        &[
            Send("a", 0), End("a", false, 0),
            Send("b", 1), End("b", false, 1),
            Send("c", 2), End("c", false, 2),
            Send("d", 3), End("d", false, 3),
            // 15 s later the four failures expired: one more is not five in the window
            Send("e", 15_000), End("e", false, 15_000), Is(Status::Alive),
            Send("f", 15_001), End("f", true, 15_001),
            Send("g", 15_002), End("g", false, 15_002),
            Send("h", 15_003), End("h", false, 15_003),
            Send("i", 15_004), End("i", false, 15_004),
            Is(Status::Dead { until: ms(25_004), attempt: 1 }),
        ],
    );
}

#[test]
fn validate_names_the_broken_constraint() {
    let bad = AccrualConfig {
        policy: TripPolicy::SuccessRate {
            threshold: 1.5,
            requests: 20,
        },
        backoff: TEN_S,
    };
    assert_eq!(bad.validate(), Err(AccrualError::Threshold(1.5)));
    assert_eq!(
        consecutive(0, TEN_S).validate(),
        Err(AccrualError::ZeroCount("failures"))
    );
    assert_eq!(AccrualConfig::default().validate(), Ok(()));
}
