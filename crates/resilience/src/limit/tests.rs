use super::*;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A backend of `workers` workers, each taking `service` per attempt, FIFO: with `in_flight`
/// attempts, an attempt's round trip is `service x max(1, in_flight / workers)`.
fn queueing_rtt(service: Duration, workers: u32, in_flight: u32) -> Duration {
    service.mul_f64((f64::from(in_flight) / f64::from(workers)).max(1.0))
}

/// Drives `limit` for `secs` seconds of a demand of `demand` attempts at once against the
/// queueing backend: every 1 ms, as many samples as attempts complete in a millisecond, each
/// with the in-flight count the limit allows.
fn drive(
    limit: &mut ConcurrencyLimit,
    from: Duration,
    secs: u64,
    demand: u32,
    rtt_of: impl Fn(u32) -> Duration,
) -> Duration {
    let mut now = from;
    let end = from + Duration::from_secs(secs);
    while now < end {
        let in_flight = demand.min(limit.limit());
        let rtt = rtt_of(in_flight);
        // Completions per millisecond: in flight / round trip.
        let per_ms = (f64::from(in_flight) / (rtt.as_secs_f64() * 1e3))
            .round()
            .max(1.0) as u32;
        for _ in 0..per_ms {
            limit.on_sample(now, rtt, in_flight);
        }
        now += ms(1);
    }
    now
}

#[test]
fn settings_out_of_range_are_named() {
    assert_eq!(LimitConfig::gradient().validate(), Ok(()));
    assert_eq!(LimitConfig::aimd().validate(), Ok(()));
    let err = |cfg: LimitConfig| cfg.validate().unwrap_err().to_string();
    let mut c = LimitConfig::gradient();
    c.initial = 2;
    assert_eq!(err(c), "initialLimit must be minLimit to maxLimit, got 2");
    c = LimitConfig::gradient();
    c.max = 3;
    assert_eq!(err(c), "maxLimit must be minLimit to 100000, got 3");
    c = LimitConfig::gradient();
    c.algorithm = Algorithm::Gradient {
        smoothing: 0.0,
        rtt_tolerance: 1.5,
        long_window: 600,
        queue: 4,
    };
    assert_eq!(err(c), "smoothing must be above 0, at most 1, got 0");
    c.algorithm = Algorithm::Aimd { backoff_ratio: 1.0 };
    assert_eq!(err(c), "backoffRatio must be 0.5 to below 1, got 1");
}

#[test]
fn a_backend_whose_latency_does_not_rise_lets_the_limit_grow() {
    for cfg in [LimitConfig::gradient(), LimitConfig::aimd()] {
        let mut limit = ConcurrencyLimit::new(cfg, Duration::ZERO);
        drive(&mut limit, Duration::ZERO, 30, 10_000, |_| ms(10));
        // A window a second: Gradient2 adds 0.8 a window (its queue of 4, smoothed), AIMD 1.
        assert!(
            limit.limit() >= 40,
            "{:?}: {}",
            cfg.algorithm,
            limit.limit()
        );
    }
}

#[test]
fn a_queueing_backend_holds_the_gradient_limit_near_its_capacity() {
    let rtt = |n| queueing_rtt(ms(10), 12, n);
    let mut limit = ConcurrencyLimit::new(LimitConfig::gradient(), Duration::ZERO);
    // Light demand first: the long-term round trip learns the unloaded 10 ms, and the limit
    // stays (the demand, not the backend, sets the round trip).
    let now = drive(&mut limit, Duration::ZERO, 15, 6, rtt);
    assert_eq!(limit.limit(), 20);
    assert_eq!(limit.long_rtt(), Some(ms(10)));
    // Then far more than it serves: the limit settles where the round trip is within the
    // tolerance of the unloaded one (1.5 x 12 = 18 in flight, plus the queue of 4), never
    // starving the workers; the long-term round trip creeps up by a tenth in 30 windows.
    drive(&mut limit, now, 30, 1_000, rtt);
    let l = limit.limit();
    assert!((12..=26).contains(&l), "{l}");
}

#[test]
fn drops_cut_the_limit() {
    let mut g = ConcurrencyLimit::new(LimitConfig::gradient(), Duration::ZERO);
    let mut a = ConcurrencyLimit::new(LimitConfig::aimd(), Duration::ZERO);
    // One drop a second: each window closes at the next one.
    for i in 1..=30 {
        g.on_drop(ms(i * 1_000), 100);
        a.on_drop(ms(i * 1_000), 100);
    }
    // Gradient: 0.8 L + 0.2 (0.5 L + 4) = 0.9 L + 0.8 a window; AIMD: 0.9 L.
    assert!(g.limit() < 12, "{}", g.limit());
    assert_eq!(a.limit(), 4, "the floor");
}

#[test]
fn a_window_closes_after_a_second_and_counts_with_ten_samples_or_a_drop() {
    let mut limit = ConcurrencyLimit::new(LimitConfig::aimd(), Duration::ZERO);
    // Eight samples, then a ninth after the second: the window closes with nine, too few.
    for i in 0..8 {
        limit.on_sample(ms(i), ms(5), 20);
    }
    limit.on_sample(ms(1_000), ms(5), 20);
    assert_eq!(limit.limit(), 20, "too few samples to count");
    for i in 0..10 {
        limit.on_sample(ms(1_001 + i), ms(5), 20);
    }
    limit.on_sample(ms(1_999), ms(5), 20);
    assert_eq!(limit.limit(), 20, "the window lasts a second");
    limit.on_sample(ms(2_000), ms(5), 20);
    assert_eq!(
        limit.limit(),
        21,
        "ten samples with the limit half used: one more"
    );
    limit.on_drop(ms(2_500), 20);
    assert_eq!(
        limit.limit(),
        21,
        "the window with the drop closes a second after it began"
    );
    limit.on_sample(ms(3_000), ms(5), 20);
    assert_eq!(limit.limit(), 18, "21 x 0.9");
}

proptest! {
    /// Whatever the samples and drops, the limit stays within its bounds.
    #[test]
    fn the_limit_stays_within_its_bounds(
        aimd in any::<bool>(),
        events in proptest::collection::vec((0u64..50, 0u64..5_000, 0u32..2_000, any::<bool>()), 1..400),
    ) {
        let cfg = if aimd { LimitConfig::aimd() } else { LimitConfig::gradient() };
        let mut limit = ConcurrencyLimit::new(cfg, Duration::ZERO);
        let mut now = Duration::ZERO;
        for (step_ms, rtt_us, in_flight, drop) in events {
            now += ms(step_ms);
            match drop {
                true => limit.on_drop(now, in_flight),
                false => limit.on_sample(now, Duration::from_micros(rtt_us), in_flight),
            }
            prop_assert!((cfg.min..=cfg.max).contains(&limit.limit()));
        }
    }

    /// A backend whose round trip never changes never has its limit cut: no burst of
    /// refusals while nothing got worse.
    #[test]
    fn a_steady_backend_never_sees_the_limit_fall(
        rtt_ms in 1u64..200,
        in_flight in 0u32..2_000,
        step_us in 100u64..20_000,
    ) {
        let mut limit = ConcurrencyLimit::new(LimitConfig::gradient(), Duration::ZERO);
        let mut now = Duration::ZERO;
        let mut last = limit.limit();
        for _ in 0..2_000 {
            now += Duration::from_micros(step_us);
            limit.on_sample(now, ms(rtt_ms), in_flight);
            prop_assert!(limit.limit() >= last);
            last = limit.limit();
        }
    }
}
