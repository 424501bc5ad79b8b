use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn config(min_per_sec: u32, percent: f64) -> RetryBudgetConfig {
    RetryBudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec,
        percent,
    }
}

#[test]
fn fresh_budget_holds_exactly_the_reserve() {
    let mut b = RetryBudget::new(RetryBudgetConfig::default());
    assert_eq!(b.balance(Duration::ZERO), 100);
    for _ in 0..100 {
        assert!(b.try_withdraw(Duration::ZERO));
    }
    assert!(!b.try_withdraw(Duration::ZERO));
}

#[test]
fn deposits_expire_after_ttl_and_the_reserve_stays() {
    let mut b = RetryBudget::new(config(1, 0.5));
    for _ in 0..10 {
        b.deposit(Duration::ZERO);
    }
    assert_eq!(b.balance(Duration::from_secs(5)), 15);
    assert_eq!(b.balance(Duration::from_secs(10)), 10);
}

#[test]
fn zero_percent_spends_only_the_reserve() {
    let mut b = RetryBudget::new(config(2, 0.0));
    for _ in 0..1_000 {
        b.deposit(Duration::ZERO);
    }
    assert_eq!(b.balance(Duration::ZERO), 20);
}

#[test]
fn validate_names_the_broken_constraint() {
    let mut c = RetryBudgetConfig::default();
    assert_eq!(c.validate(), Ok(()));
    c.percent = -0.1;
    assert_eq!(c.validate(), Err(BudgetError::Percent(-0.1)));
    c.percent = 0.2;
    c.ttl = Duration::from_millis(10);
    assert_eq!(
        c.validate(),
        Err(BudgetError::Ttl(Duration::from_millis(10)))
    );
}

proptest! {
    /// With no reserve, N requests allow exactly floor(N * percent) retries.
    #[test]
    fn share_of_requests_is_exact(n in 0u32..2_000, percent in prop::sample::select(vec![0.1, 0.2, 0.25, 0.5, 1.0])) {
        let mut b = RetryBudget::new(config(0, percent));
        for _ in 0..n {
            b.deposit(Duration::ZERO);
        }
        let want = (f64::from(n) * percent + 1e-9).floor() as u64;
        prop_assert_eq!(b.balance(Duration::ZERO), want);
        let mut granted = 0;
        while b.try_withdraw(Duration::ZERO) {
            granted += 1;
        }
        prop_assert_eq!(granted, want);
    }

    /// For every retry granted, the ten-slot window ending at its slot holds no more retries
    /// than the reserve plus the share of the requests deposited in that window.
    #[test]
    fn retries_never_exceed_the_budget(
        events in proptest::collection::vec((0u64..3_000, any::<bool>()), 1..600),
        min_per_sec in 0u32..5,
        percent in prop::sample::select(vec![0.0, 0.1, 0.2, 0.5]),
    ) {
        let cfg = config(min_per_sec, percent);
        let mut b = RetryBudget::new(cfg);
        let slot_ms = 1_000; // ttl 10 s / 10 slots
        let mut per_slot: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
        let mut now_ms = 0;
        for (gap, is_request) in events {
            now_ms += gap;
            let now = Duration::from_millis(now_ms);
            let entry = per_slot.entry(now_ms / slot_ms).or_default();
            if is_request {
                b.deposit(now);
                entry.0 += 1;
            } else if b.try_withdraw(now) {
                entry.1 += 1;
            }
        }
        let reserve = i64::from(min_per_sec) * 10;
        let slots: Vec<u64> = per_slot.iter().filter(|(_, e)| e.1 > 0).map(|(s, _)| *s).collect();
        for &end in &slots {
            let (mut requests, mut retries) = (0i64, 0i64);
            for (_, (q, r)) in per_slot.range(end.saturating_sub(9)..=end) {
                requests += q;
                retries += r;
            }
            let allowed = reserve as f64 + percent * requests as f64 + 1e-9;
            prop_assert!(retries as f64 <= allowed,
                "slot {end}: {retries} retries > {allowed} allowed");
        }
    }
}

#[test]
fn without_the_floor_only_the_share_of_requests_pays() {
    // A floor of 10 a second over 10 s (100 retries) and 20% of requests: 10 requests earn 2.
    let mut b = RetryBudget::new(config(10, 0.2));
    for _ in 0..10 {
        b.deposit(Duration::ZERO);
    }
    let now = Duration::from_millis(1);
    assert!(b.try_withdraw_with(now, false));
    assert!(b.try_withdraw_with(now, false));
    assert!(!b.try_withdraw_with(now, false), "the floor was spent");
    // With the floor counted again, its 100 are there.
    assert_eq!(b.balance(now), 100);
    assert!(b.try_withdraw_with(now, true));
}
