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
