//! Every policy's read-only load accessor: what it reports, and that reading it changes nothing.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Duration;
use tailguard_balance::load::PeakEwmaConfig;
use tailguard_balance::{ApertureConfig, Choices, LoadKind, Policy};

fn policies() -> Vec<(Policy, bool)> {
    let ewma = LoadKind::PeakEwma(PeakEwmaConfig::default());
    let aperture = ApertureConfig::default();
    vec![
        (Policy::RoundRobin, false),
        (Policy::Random, false),
        (Policy::Heap, true),
        (Policy::p2c(LoadKind::Pending), true),
        (Policy::p2c(ewma), true),
        (
            Policy::BestOf {
                choices: Choices::All,
                load: LoadKind::Pending,
            },
            true,
        ),
        (
            Policy::Aperture {
                config: aperture,
                load: ewma,
            },
            true,
        ),
    ]
}

#[test]
fn snapshot_reports_pending_per_endpoint_for_load_aware_policies() {
    let ms = Duration::from_millis;
    for (policy, tracks) in policies() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut b = policy.build(3, Duration::ZERO, &mut rng).unwrap();
        b.start(1, ms(1));
        b.start(1, ms(1));
        b.start(2, ms(1));
        let now = ms(2);
        let seen: Vec<_> = (0..3).map(|i| b.snapshot(i, now)).collect();
        assert!(b.snapshot(3, now).is_none(), "{policy}: out of range");
        if !tracks {
            assert!(seen.iter().all(Option::is_none), "{policy}: {seen:?}");
            continue;
        }
        let pending: Vec<u32> = seen.iter().map(|s| s.unwrap().pending).collect();
        assert_eq!(pending, [0, 2, 1], "{policy}");
        let cost: Vec<f64> = seen.iter().map(|s| s.unwrap().cost).collect();
        assert!(cost[0] < cost[2] && cost[2] < cost[1], "{policy}: {cost:?}");
        // Reading again gives the same answer: the snapshot changed nothing.
        assert_eq!(b.snapshot(1, now), seen[1], "{policy}");
    }
}
