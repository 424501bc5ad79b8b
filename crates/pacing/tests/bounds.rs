//! Rates and offsets at the edges: refused at construction, or saturated, never a panic.

use std::time::Duration;
use tailguard_pacing::{Arrivals, Ramp, Schedule, MAX_OFFSET, MAX_RATE, MIN_RATE};

#[test]
fn rates_outside_the_range_are_refused() {
    for rate in [1e-20, MIN_RATE / 2.0, MAX_RATE * 2.0, 1e300, f64::MAX] {
        let err = Schedule::new(Arrivals::Constant, rate, 1).unwrap_err();
        assert!(
            err.to_string().contains("from 0.001 to 10000000"),
            "{rate}: {err}"
        );
    }
    assert!(Schedule::new(Arrivals::Poisson, MIN_RATE, 1).is_ok());
    assert!(Schedule::new(Arrivals::Poisson, MAX_RATE, 1).is_ok());
    let s = Schedule::new(Arrivals::Constant, 1e6, 1).unwrap();
    for from in [1e308, 1e-300] {
        let ramp = Ramp {
            from,
            over: Duration::from_secs(1),
        };
        let err = s.clone().with_ramp(ramp).unwrap_err();
        assert!(err.to_string().contains("from 0.001 to 10000000"), "{err}");
    }
}

#[test]
fn offsets_saturate_instead_of_overflowing() {
    // Request 2^64 - 1 at one request per 1,000 s is 1.8e22 s away: past what a Duration holds.
    let mut slow = Schedule::new(Arrivals::Constant, MIN_RATE, 1).unwrap();
    assert_eq!(slow.next_send(u64::MAX), MAX_OFFSET);
    assert_eq!(slow.next_send(1), Duration::from_secs(1000));
    let ramp = Ramp {
        from: MIN_RATE,
        over: Duration::from_secs(u64::MAX / 4),
    };
    let mut ramped = Schedule::new(Arrivals::Constant, MAX_RATE, 1)
        .unwrap()
        .with_ramp(ramp)
        .unwrap();
    for i in [0, 1, 1 << 20, u64::MAX / 2, u64::MAX] {
        assert!(ramped.next_send(i) <= MAX_OFFSET);
    }
    assert!(ramped.due_by(Duration::MAX) > 0);
}
