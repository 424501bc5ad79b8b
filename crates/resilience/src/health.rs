//! Active health checks: what a run of check results says about an endpoint.
//!
//! # What
//! Envoy's and HAProxy's rule, with time passed in by the caller that runs the checks:
//! 1. An endpoint starts *unchecked* and is in rotation until its first check fails: a first
//!    failure marks it unhealthy at once; a first success, healthy.
//! 2. Then thresholds of consecutive results: a healthy endpoint turns unhealthy after
//!    `unhealthy_threshold` failures in a row, an unhealthy one healthy after
//!    `healthy_threshold` successes in a row. A result of the other kind resets the streak.
//! 3. Checks run every `interval`, jittered by ±10% ([`jittered`], from the caller's seeded
//!    RNG) so that the checks of many proxies do not arrive together; a check not answered
//!    within `timeout` failed.
//!
//! What counts as a pass (a 2xx, or gRPC's SERVING) and the panic rule (every endpoint
//! unhealthy: health is ignored) belong to the caller; see `tailguard_client::Client`.

use rand::{Rng, RngCore};
use std::time::Duration;

/// Active health check settings (`client.healthCheck`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheckConfig {
    /// The path of an HTTP check (a 2xx passes); ignored for a gRPC check.
    pub path: String,
    /// A gRPC check instead: `grpc.health.v1.Health/Check` for this service name (`""`: the
    /// server as a whole); SERVING passes.
    pub grpc_service: Option<String>,
    /// Time between checks of one endpoint (jittered by ±10%).
    pub interval: Duration,
    /// A check not answered within this failed.
    pub timeout: Duration,
    /// Consecutive passes that bring an unhealthy endpoint back.
    pub healthy_threshold: u32,
    /// Consecutive failures that take a healthy endpoint out.
    pub unhealthy_threshold: u32,
}

impl Default for HealthCheckConfig {
    /// `GET /health` every 5 s, 1 s to answer, back after 2 passes, out after 3 failures.
    fn default() -> Self {
        Self {
            path: "/health".to_owned(),
            grpc_service: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
        }
    }
}

/// A [`HealthCheckConfig`] that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HealthCheckError {
    /// The interval must be between 10 ms and an hour.
    #[error("intervalMs must be between 10 and 3600000")]
    Interval,
    /// The timeout must be above zero and at most the interval.
    #[error("timeoutMs must be above zero and at most intervalMs")]
    Timeout,
    /// Thresholds must be between 1 and 100.
    #[error("healthyThreshold and unhealthyThreshold must be between 1 and 100")]
    Threshold,
    /// An HTTP check's path must start with `/` and be at most 1 KiB of visible ASCII.
    #[error("path must start with / and be at most 1024 visible ASCII characters")]
    Path,
}

impl HealthCheckConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// The first [`HealthCheckError`] found.
    pub fn validate(&self) -> Result<(), HealthCheckError> {
        let ms = Duration::from_millis;
        if self.interval < ms(10) || self.interval > Duration::from_secs(3600) {
            return Err(HealthCheckError::Interval);
        }
        if self.timeout.is_zero() || self.timeout > self.interval {
            return Err(HealthCheckError::Timeout);
        }
        let range = 1..=100;
        if !range.contains(&self.healthy_threshold) || !range.contains(&self.unhealthy_threshold) {
            return Err(HealthCheckError::Threshold);
        }
        let path_ok = self.path.starts_with('/')
            && self.path.len() <= 1024
            && self.path.bytes().all(|b| b.is_ascii_graphic());
        if self.grpc_service.is_none() && !path_ok {
            return Err(HealthCheckError::Path);
        }
        Ok(())
    }
}

/// What the checks say about one endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HealthState {
    /// Not checked yet: in rotation until its first check fails.
    #[default]
    Unchecked,
    /// Passing.
    Healthy,
    /// Failing: out of rotation (unless every endpoint is).
    Unhealthy,
}

/// One endpoint's check results (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Health {
    state: HealthState,
    /// Consecutive results against the current state.
    streak: u32,
}

impl Health {
    /// The state now.
    pub fn state(&self) -> HealthState {
        self.state
    }

    /// In rotation by its checks: not (yet) unhealthy.
    pub fn is_healthy(&self) -> bool {
        self.state != HealthState::Unhealthy
    }

    /// Steps 1 and 2: one check's result; returns the new state when it changed.
    pub fn record(&mut self, passed: bool, config: &HealthCheckConfig) -> Option<HealthState> {
        let next = match (self.state, passed) {
            (HealthState::Unchecked, true) => HealthState::Healthy,
            (HealthState::Unchecked, false) => HealthState::Unhealthy,
            (HealthState::Healthy, true) | (HealthState::Unhealthy, false) => {
                self.streak = 0;
                return None;
            }
            (HealthState::Healthy, false) => {
                self.streak += 1;
                if self.streak < config.unhealthy_threshold {
                    return None;
                }
                HealthState::Unhealthy
            }
            (HealthState::Unhealthy, true) => {
                self.streak += 1;
                if self.streak < config.healthy_threshold {
                    return None;
                }
                HealthState::Healthy
            }
        };
        *self = Health {
            state: next,
            streak: 0,
        };
        Some(next)
    }
}

/// Step 3: `interval` jittered uniformly by ±10% with `rng`.
pub fn jittered(interval: Duration, rng: &mut dyn RngCore) -> Duration {
    interval.mul_f64(rng.random_range(0.9..=1.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn config() -> HealthCheckConfig {
        HealthCheckConfig::default()
    }

    #[test]
    fn the_first_failure_takes_a_new_endpoint_out_then_thresholds_rule() {
        let c = config();
        let mut h = Health::default();
        assert!(h.is_healthy(), "unchecked is in rotation");
        assert_eq!(h.record(false, &c), Some(HealthState::Unhealthy));
        assert!(!h.is_healthy());
        assert_eq!(h.record(true, &c), None, "one pass of two");
        assert_eq!(h.record(false, &c), None, "resets the streak");
        assert_eq!(h.record(true, &c), None);
        assert_eq!(h.record(true, &c), Some(HealthState::Healthy));
        // Healthy: three failures in a row to go out; a pass between resets.
        assert_eq!(h.record(false, &c), None);
        assert_eq!(h.record(false, &c), None);
        assert_eq!(h.record(true, &c), None);
        assert_eq!(h.record(false, &c), None);
        assert_eq!(h.record(false, &c), None);
        assert_eq!(h.record(false, &c), Some(HealthState::Unhealthy));
        let mut fresh = Health::default();
        assert_eq!(fresh.record(true, &c), Some(HealthState::Healthy));
    }

    #[test]
    fn a_flapping_endpoint_needs_its_thresholds_each_way() {
        let c = config();
        let mut h = Health::default();
        h.record(true, &c);
        // Pass, fail, pass, fail...: never three failures in a row, stays healthy.
        for i in 0..50 {
            assert_eq!(h.record(i % 2 == 0, &c), None);
        }
        assert!(h.is_healthy());
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let interval = Duration::from_secs(5);
        let draws: Vec<Duration> = (0..1_000).map(|_| jittered(interval, &mut rng)).collect();
        assert!(draws
            .iter()
            .all(|d| *d >= Duration::from_millis(4_500) && *d <= Duration::from_millis(5_500)));
        let spread = draws
            .iter()
            .max()
            .unwrap()
            .saturating_sub(*draws.iter().min().unwrap());
        assert!(spread > Duration::from_millis(900), "{spread:?}");
    }

    #[test]
    fn validate_refuses_what_cannot_work() {
        assert_eq!(config().validate(), Ok(()));
        let with = |f: fn(&mut HealthCheckConfig)| {
            let mut c = config();
            f(&mut c);
            c.validate()
        };
        assert_eq!(
            with(|c| c.interval = Duration::ZERO),
            Err(HealthCheckError::Interval)
        );
        assert_eq!(
            with(|c| c.timeout = Duration::from_secs(6)),
            Err(HealthCheckError::Timeout)
        );
        assert_eq!(
            with(|c| c.healthy_threshold = 0),
            Err(HealthCheckError::Threshold)
        );
        assert_eq!(
            with(|c| c.path = "health".into()),
            Err(HealthCheckError::Path)
        );
        assert_eq!(
            with(|c| c.path = "/a b".into()),
            Err(HealthCheckError::Path)
        );
        assert_eq!(
            with(|c| {
                c.path = String::new();
                c.grpc_service = Some(String::new());
            }),
            Ok(()),
            "a gRPC check needs no path"
        );
    }
}
