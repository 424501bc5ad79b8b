//! The schedule driver: keeps a backend's run state equal to what its spec says for now.
//!
//! 1. Compute the state for the current elapsed time ([`Backend::state_at`]) and set the gate.
//! 2. Sleep until the schedule's next boundary ([`tailguard_fleet::Schedule::next_change`]) or
//!    until the spec is changed by the control endpoint, whichever comes first.
//! 3. Repeat.
//!
//! It sleeps on tokio's clock, so tests run it on paused time and the schedule advances
//! exactly, without real waiting.

use crate::state::Backend;
use std::sync::Arc;

/// Runs until the backend is dropped by every other owner (never, while serving).
pub async fn run(backend: Arc<Backend>) {
    loop {
        let changed = backend.changed.notified();
        let elapsed = backend.elapsed();
        backend.gate.set(backend.state_at(elapsed));
        let next = backend
            .spec()
            .schedule
            .next_change(elapsed)
            .and_then(|t| backend.shared.start.checked_add(t));
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = changed => {}
                }
            }
            None => changed.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::RunState;
    use crate::metrics::Metrics;
    use crate::state::Shared;
    use std::time::Duration;
    use tailguard_fleet::{BackendSpec, LatencyDist, Schedule};
    use tokio::time::Instant;

    fn backend(faults: &[&str]) -> Arc<Backend> {
        let mut spec = BackendSpec::new("t", LatencyDist::Fixed(Duration::ZERO));
        spec.schedule = Schedule::parse(faults).unwrap();
        let shared = Shared {
            start: Instant::now(),
            nagle: false,
            overrides: false,
            precise: false,
            serve_abandoned: false,
        };
        let counters = Metrics::default().backend("t");
        let addr = "127.0.0.1:0".parse().unwrap();
        Arc::new(Backend::new((0, addr), spec, 1, shared, counters))
    }

    /// The gate's state at each whole second from 0 to `secs - 1` (paused time: exact).
    async fn states(backend: &Arc<Backend>, secs: u64) -> Vec<RunState> {
        let start = backend.shared.start;
        let mut out = Vec::new();
        for s in 0..secs {
            // Half a second past each boundary, so the driver has certainly run.
            tokio::time::sleep_until(start + Duration::from_millis(s * 1000 + 500)).await;
            out.push(backend.gate.state());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn follows_a_periodic_pause_and_a_down_window() {
        let b = backend(&["every 10s pause 5s", "at 32s down", "at 38s up"]);
        tokio::spawn(run(b.clone()));
        let got = states(&b, 41).await;
        let want = |s: u64| match s {
            32..=37 => RunState::Down,
            _ if s % 10 >= 5 => RunState::Paused,
            _ => RunState::Running,
        };
        assert_eq!(got, (0..41).map(want).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn slow_window_starts_and_ends_exactly() {
        let b = backend(&["from 15s to 45s latency x10"]);
        let spec = b.spec();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let lat = |t: u64, rng: &mut rand::rngs::StdRng| {
            spec.decide(Duration::from_millis(t), rng).latency
        };
        let mut spec10 = BackendSpec::clone(&spec);
        spec10.latency = LatencyDist::Fixed(Duration::from_millis(10));
        let lat10 = |t: u64, rng: &mut rand::rngs::StdRng| {
            spec10.decide(Duration::from_millis(t), rng).latency
        };
        assert_eq!(lat(14_999, &mut rng), Duration::ZERO);
        assert_eq!(lat10(14_999, &mut rng), Duration::from_millis(10));
        assert_eq!(lat10(15_000, &mut rng), Duration::from_millis(100));
        assert_eq!(lat10(44_999, &mut rng), Duration::from_millis(100));
        assert_eq!(lat10(45_000, &mut rng), Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn run_time_changes_wake_the_driver() {
        let b = backend(&[]);
        tokio::spawn(run(b.clone()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(b.gate.state(), RunState::Running);
        let now = b.elapsed();
        b.update(|spec| spec.pause(now, Some(Duration::from_secs(3))));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(b.gate.state(), RunState::Paused);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(b.gate.state(), RunState::Running);
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_waits_exactly_its_latency() {
        let b = backend(&[]);
        let svc = crate::service::BackendService::new(b, Arc::default());
        let arrival = Instant::now();
        let decision = tailguard_fleet::Decision {
            latency: Duration::from_millis(150),
            outcome: tailguard_fleet::Outcome::Respond { status: 200 },
        };
        assert_eq!(svc.act(arrival, decision).await, Some(200));
        assert_eq!(arrival.elapsed(), Duration::from_millis(150));
    }

    use rand::SeedableRng;
}
