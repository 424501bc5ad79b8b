use super::*;
use proptest::prelude::*;

#[test]
fn rejects_bad_rates_and_names() {
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            Schedule::new(Arrivals::Constant, rate, 1).is_err(),
            "{rate}"
        );
    }
    assert_eq!(
        "burst".parse::<Arrivals>().unwrap_err().to_string(),
        "unknown arrivals \"burst\": use constant or poisson"
    );
}

#[test]
fn poisson_is_seeded_and_has_the_right_mean_rate() {
    let offsets = |seed| {
        let mut s = Schedule::new(Arrivals::Poisson, 1000.0, seed).unwrap();
        (0..20_000).map(|i| s.next_send(i)).collect::<Vec<_>>()
    };
    let a = offsets(42);
    assert_eq!(a, offsets(42));
    assert_ne!(a, offsets(43));
    assert_eq!(a[0], Duration::ZERO);
    // 19,999 gaps of mean 1 ms: the sum is within 3% of 20 s (about 4 standard deviations).
    let end = a.last().unwrap().as_secs_f64();
    assert!((end - 20.0).abs() < 0.6, "{end}");
    assert!(a.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn poisson_allows_asking_twice() {
    let mut s = Schedule::new(Arrivals::Poisson, 10.0, 1).unwrap();
    s.next_send(0);
    let one = s.next_send(1);
    assert_eq!(s.next_send(1), one);
}

proptest! {
    #[test]
    fn constant_offsets_match_index_over_rate(rate in 0.1f64..1_000_000.0, i in 0u64..10_000_000) {
        let mut s = Schedule::new(Arrivals::Constant, rate, 0).unwrap();
        let got = s.next_send(i).as_secs_f64();
        let want = i as f64 / rate;
        prop_assert!((got - want).abs() <= want * 1e-12 + 1e-9);
    }

    #[test]
    fn due_by_counts_offsets_not_after_elapsed(rate in 1.0f64..100_000.0, ms in 0u64..100_000) {
        let mut s = Schedule::new(Arrivals::Constant, rate, 0).unwrap();
        let elapsed = Duration::from_millis(ms);
        let n = s.due_by(elapsed);
        prop_assert!(n >= 1);
        // Allow one nanosecond of float rounding at the boundary.
        prop_assert!(s.next_send(n - 1) <= elapsed + Duration::from_nanos(1));
        prop_assert!(s.next_send(n) + Duration::from_nanos(1) > elapsed);
    }
}

proptest! {
    /// The shards of a schedule, merged, are the schedule: every request once, at its offset.
    #[test]
    fn shards_partition_the_schedule(
        poisson in any::<bool>(),
        rate in 1.0f64..100_000.0,
        seed in any::<u64>(),
        of in 1u64..5,
    ) {
        let arrivals = if poisson { Arrivals::Poisson } else { Arrivals::Constant };
        let whole = Schedule::new(arrivals, rate, seed).unwrap();
        let mut reference = whole.clone();
        let want: Vec<Duration> = (0..200).map(|i| reference.next_send(i)).collect();
        let mut got = vec![None; 200];
        for part in 0..of {
            let mut shard = Shard::new(whole.clone(), part, of);
            loop {
                let (i, due) = shard.peek();
                // Peeking twice gives the same answer.
                prop_assert_eq!(shard.peek(), (i, due));
                if i >= 200 {
                    break;
                }
                prop_assert_eq!(i % of, part);
                prop_assert!(got[i as usize].is_none());
                got[i as usize] = Some(due);
                shard.advance();
            }
        }
        let got: Vec<Duration> = got.into_iter().map(|d| d.expect("every request in a shard")).collect();
        prop_assert_eq!(got, want);
    }
}

/// A schedule ramping from `from` to `rate` over `over_ms`.
fn ramped(arrivals: Arrivals, from: f64, rate: f64, over_ms: u64, seed: u64) -> Schedule {
    let ramp = Ramp {
        from,
        over: Duration::from_millis(over_ms),
    };
    Schedule::new(arrivals, rate, seed)
        .unwrap()
        .with_ramp(ramp)
        .unwrap()
}

/// The ramps the exact checks of constant arrivals run over: `(from, rate, over_ms)`.
fn constant_ramp() -> impl Strategy<Value = (f64, f64, u64)> {
    (1.0f64..20_000.0, 1.0f64..20_000.0, 1u64..60_000)
}

#[test]
fn rejects_bad_ramps_naming_the_constraint() {
    let s = Schedule::new(Arrivals::Constant, 100.0, 1).unwrap();
    for from in [0.0, -5.0, f64::NAN, f64::INFINITY] {
        let ramp = Ramp {
            from,
            over: Duration::from_secs(1),
        };
        let err = s.clone().with_ramp(ramp).unwrap_err();
        assert!(
            matches!(err, PacingError::BadRamp(r) if r.over == ramp.over),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("a ramp must start from a rate from 0.001 to 10000000, got"),
            "{err}"
        );
    }
    let zero = Ramp {
        from: 50.0,
        over: Duration::ZERO,
    };
    assert_eq!(
        s.clone().with_ramp(zero).unwrap_err().to_string(),
        "a ramp must last longer than zero"
    );
    assert_eq!(s.ramp(), None);
}

/// Without a ramp, the offsets are exactly what they were before ramps existed: `i / rate`,
/// and the running sum of the seeded exponential gaps.
#[test]
fn an_unramped_schedule_is_unchanged_bit_for_bit() {
    let mut constant = Schedule::new(Arrivals::Constant, 1234.5, 9).unwrap();
    for i in [0, 1, 7, 1_000, 123_456_789] {
        assert_eq!(
            constant.next_send(i),
            Duration::from_secs_f64(i as f64 / 1234.5)
        );
    }
    let mut poisson = Schedule::new(Arrivals::Poisson, 1234.5, 9).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let exp = Exp::new(1234.5).unwrap();
    let mut sum = 0.0;
    for i in 0..10_000 {
        if i > 0 {
            sum += exp.sample(&mut rng);
        }
        assert_eq!(poisson.next_send(i), Duration::from_secs_f64(sum));
    }
    assert_eq!(
        constant.due_by(Duration::from_millis(999)),
        (0.999f64 * 1234.5).floor() as u64 + 1
    );
}

#[test]
fn a_ramp_from_50_to_200_over_2s_offers_250() {
    let mut s = ramped(Arrivals::Constant, 50.0, 200.0, 2_000, 0);
    assert_eq!(s.expected(Duration::from_secs(1)), 50.0 + 37.5);
    assert_eq!(s.expected(Duration::from_secs(2)), 250.0);
    assert_eq!(s.expected(Duration::from_secs(3)), 450.0);
    // Requests 0..=87 in the first second, 88..=250 in the second.
    assert_eq!(s.due_by(Duration::from_secs(1)), 88);
    assert_eq!(s.due_by(Duration::from_secs(2)), 251);
    assert_eq!(s.next_send(250), Duration::from_secs(2));
    // The first gap is 1/50 s or a little less; the last ones are 1/200 s.
    let first = s.next_send(1).as_secs_f64();
    assert!(first < 0.02 && first > 0.019, "{first}");
    let last = (s.next_send(450) - s.next_send(449)).as_secs_f64();
    assert!((last - 0.005).abs() < 1e-9, "{last}");
}

#[test]
fn a_descending_ramp_slows_down() {
    let mut s = ramped(Arrivals::Constant, 400.0, 100.0, 1_000, 0);
    assert_eq!(s.expected(Duration::from_secs(1)), 250.0);
    let early = s.next_send(2) - s.next_send(1);
    let late = s.next_send(249) - s.next_send(248);
    assert!(early < late, "{early:?} {late:?}");
    assert_eq!(s.next_send(250), Duration::from_secs(1));
    assert_eq!(s.next_send(350), Duration::from_secs(2));
}

/// Poisson arrivals under a ramp: the count in the ramp window is Poisson with mean L(over)
/// (plus request 0, due at once), and the ramp's second half has more than its first.
#[test]
fn poisson_with_a_ramp_counts_l_of_over_within_a_few_sigma() {
    let over = Duration::from_secs(10);
    for seed in 1..=20 {
        let mut s = ramped(Arrivals::Poisson, 500.0, 1500.0, 10_000, seed);
        let mean = s.expected(over);
        assert_eq!(mean, 10_000.0);
        let offsets: Vec<Duration> = (0..20_000).map(|i| s.next_send(i)).collect();
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        let count = |to: Duration| offsets.iter().filter(|&&t| t <= to).count() as f64;
        let n = count(over) - 1.0;
        // sigma = 100; 5 sigma leaves the test a few-in-a-million chance per seed, and the
        // seeds are fixed, so it is the same answer every run.
        assert!((n - mean).abs() < 5.0 * mean.sqrt(), "seed {seed}: {n}");
        let first_half = count(over / 2);
        assert!(
            first_half < n - first_half,
            "seed {seed}: {first_half} of {n}"
        );
        // About L(5 s) = 500 x 5 + 1000 x 25 / 20 = 3,750 of them.
        assert!(
            (first_half - 3_750.0).abs() < 5.0 * 3_750f64.sqrt(),
            "{first_half}"
        );
    }
}

#[test]
fn a_ramped_schedule_is_seeded() {
    let offsets = |seed| {
        let mut s = ramped(Arrivals::Poisson, 10.0, 1000.0, 1_000, seed);
        (0..2_000).map(|i| s.next_send(i)).collect::<Vec<_>>()
    };
    assert_eq!(offsets(5), offsets(5));
    assert_ne!(offsets(5), offsets(6));
}

proptest! {
    #[test]
    fn ramped_offsets_never_go_back(
        poisson in any::<bool>(),
        from in 0.5f64..50_000.0,
        rate in 0.5f64..50_000.0,
        over_ms in 1u64..100_000,
        seed in any::<u64>(),
    ) {
        let arrivals = if poisson { Arrivals::Poisson } else { Arrivals::Constant };
        let mut s = ramped(arrivals, from, rate, over_ms, seed);
        let mut previous = s.next_send(0);
        prop_assert_eq!(previous, Duration::ZERO);
        for i in 1..2_000 {
            let next = s.next_send(i);
            prop_assert!(next >= previous, "{i}: {previous:?} then {next:?}");
            previous = next;
        }
    }

    /// Constant arrivals under a ramp: `due_by` is `floor(L(t)) + 1`, within one of `L(t)`,
    /// and counts exactly the offsets not after `t`.
    #[test]
    fn ramped_due_by_matches_the_intensity(
        (from, rate, over_ms) in constant_ramp(),
        ms in 0u64..120_000,
    ) {
        let mut s = ramped(Arrivals::Constant, from, rate, over_ms, 0);
        let elapsed = Duration::from_millis(ms);
        let n = s.due_by(elapsed);
        let l = s.expected(elapsed);
        prop_assert!((n as f64 - l).abs() <= 1.0, "{n} due, L = {l}");
        prop_assert!(s.next_send(n - 1) <= elapsed + Duration::from_nanos(1));
        prop_assert!(s.next_send(n) + Duration::from_nanos(1) > elapsed);
    }

    /// After the ramp, constant arrivals are `1 / rate` apart.
    #[test]
    fn after_the_ramp_gaps_are_one_over_rate(
        (from, rate, over_ms) in constant_ramp(),
        k in 2u64..1_000,
    ) {
        let mut s = ramped(Arrivals::Constant, from, rate, over_ms, 0);
        let first = s.due_by(Duration::from_millis(over_ms)) + 1;
        let (a, b) = (s.next_send(first + k - 1), s.next_send(first + k));
        let gap = (b - a).as_secs_f64();
        // Each offset is rounded to the nanosecond.
        prop_assert!((gap - 1.0 / rate).abs() <= 2e-9 + b.as_secs_f64() * 1e-12, "{gap}");
    }

    /// A "ramp" from the rate to itself is the unramped schedule, within float rounding.
    #[test]
    fn a_flat_ramp_is_the_plain_schedule(
        poisson in any::<bool>(),
        rate in 0.5f64..100_000.0,
        over_ms in 1u64..100_000,
        seed in any::<u64>(),
    ) {
        let arrivals = if poisson { Arrivals::Poisson } else { Arrivals::Constant };
        let mut flat = ramped(arrivals, rate, rate, over_ms, seed);
        let mut plain = Schedule::new(arrivals, rate, seed).unwrap();
        for i in 0..500 {
            let (f, p) = (flat.next_send(i).as_secs_f64(), plain.next_send(i).as_secs_f64());
            prop_assert!((f - p).abs() <= p * 1e-12 + 2e-9, "{i}: {f} vs {p}");
        }
    }

    /// The shards of a ramped schedule, merged, are the ramped schedule.
    #[test]
    fn shards_partition_a_ramped_schedule(
        poisson in any::<bool>(),
        from in 1.0f64..10_000.0,
        rate in 1.0f64..10_000.0,
        seed in any::<u64>(),
        of in 1u64..5,
    ) {
        let arrivals = if poisson { Arrivals::Poisson } else { Arrivals::Constant };
        let whole = ramped(arrivals, from, rate, 100, seed);
        let mut reference = whole.clone();
        let want: Vec<Duration> = (0..200).map(|i| reference.next_send(i)).collect();
        for part in 0..of {
            let mut shard = Shard::new(whole.clone(), part, of);
            loop {
                let (i, due) = shard.peek();
                if i >= 200 {
                    break;
                }
                prop_assert_eq!(due, want[i as usize]);
                shard.advance();
            }
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// An evenly spaced staged schedule puts in each second the stages' integral over it,
/// within one, including a ramp from 0, a hold at 0 in the middle and a ramp down to 0.
#[test]
fn each_second_holds_the_integral_of_the_stages() {
    let stages: Stages = "3s:0->1000,2s:1000,2s:0,3s:500->0".parse().unwrap();
    let mut s = Schedule::staged(Arrivals::Constant, stages.clone(), 1).unwrap();
    let mut per_second = [0u64; 11];
    let mut in_hold = 0;
    for i in 0.. {
        let at = s.next_send(i);
        if at >= stages.total() {
            break;
        }
        per_second[at.as_secs() as usize] += 1;
        in_hold += u32::from(at > secs(5.0) && at < secs(7.0));
    }
    for (k, &n) in per_second.iter().enumerate().take(10) {
        let want = stages.offered(secs(k as f64 + 1.0)) - stages.offered(secs(k as f64));
        assert!(
            (n as f64 - want).abs() <= 1.0,
            "second {k}: {n} sent, {want} offered"
        );
    }
    // The request the second stage ends on is due at 5 s sharp; none after it until 7 s.
    assert_eq!(in_hold, 0, "nothing in the hold at 0");
    // Due before the end: the integral (due_by counts the one due at the end too).
    let all: u64 = per_second.iter().sum();
    assert_eq!(all, 4_250);
    assert_eq!(s.due_by(stages.total()), 4_251);
}

#[test]
fn poisson_stages_follow_the_intensity() {
    let stages: Stages = "10s:0->2000,10s:2000->500".parse().unwrap();
    let mut s = Schedule::staged(Arrivals::Poisson, stages.clone(), 7).unwrap();
    let mut halves = [0u64; 2];
    for i in 0.. {
        let at = s.next_send(i);
        if at >= stages.total() {
            break;
        }
        halves[usize::from(at >= Duration::from_secs(10))] += 1;
    }
    // 10,000 then 12,500 offered: within 2%.
    assert!((halves[0] as f64 - 10_000.0).abs() < 200.0, "{halves:?}");
    assert!((halves[1] as f64 - 12_500.0).abs() < 250.0, "{halves:?}");
}
