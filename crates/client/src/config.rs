//! What one arm of a comparison does on the client side, as typed configuration.
//!
//! Built once at the edge (from a scenario file, or from the proxy's configuration) and
//! validated there; [`super::Client`] then runs it.
//!
//! # Example
//! ```
//! use tailguard_balance::{LoadKind, Policy};
//! use tailguard_client::{ArmConfig, RetryConfig};
//!
//! let mut arm = ArmConfig::new("proxy", Policy::p2c(LoadKind::peak_ewma()));
//! arm.retries = Some(RetryConfig::default());
//! assert!(arm.validate().is_ok());
//! assert_eq!(arm.summary(), "p2c peak-ewma (tau 10s, default rtt 30ms) + retries (20% + 10/s, at most 3)");
//! ```

use std::time::Duration;
use tailguard_balance::{Policy, PolicyError};
use tailguard_resilience::{
    AccrualConfig, AccrualError, Backoff, BackoffError, BudgetError, Classifier, HedgeConfig,
    HedgeError, OutlierConfig, OutlierError, RetryBudgetConfig,
};
use tailguard_text::duration::format_duration;

/// Per-attempt and per-request deadlines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// One attempt fails (as retryable) when it takes longer than this.
    pub attempt: Option<Duration>,
    /// The request fails, whatever is in flight, when it takes longer than this.
    pub total: Option<Duration>,
}

/// Retrying failed attempts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryConfig {
    /// The budget every retry draws from.
    pub budget: RetryBudgetConfig,
    /// Retries per request at most (the budget usually binds first).
    pub max_retries: u32,
    /// Wait before each retry (none: at once, as Linkerd 1 does).
    pub backoff: Option<Backoff>,
}

impl Default for RetryConfig {
    /// The default budget, at most 3 retries per request, no backoff.
    fn default() -> Self {
        Self {
            budget: RetryBudgetConfig::default(),
            max_retries: 3,
            backoff: None,
        }
    }
}

/// Everything one arm of a comparison does on the client side.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmConfig {
    /// The arm's name in reports.
    pub name: String,
    /// How to pick an endpoint.
    pub policy: Policy,
    /// Which attempts succeeded, and which failures may be retried.
    pub classifier: Classifier,
    /// Retries, if any.
    pub retries: Option<RetryConfig>,
    /// Failure accrual, if any.
    pub accrual: Option<AccrualConfig>,
    /// Hedged requests, if any.
    pub hedge: Option<HedgeConfig>,
    /// Latency outlier ejection, if any.
    pub outlier: Option<OutlierConfig>,
    /// Rescue the attempts of a stalled endpoint: a first attempt still out after the backup
    /// delay, whose endpoint has said nothing for that long (it answered no request in that
    /// time), gets a backup to another endpoint, charged to the retry budget (so it needs
    /// `retries`). See [`super::Client::may_backup`].
    pub rescue: bool,
    /// The longest a backend's own pushback (`Retry-After` on a 429 or 503, gRPC's
    /// `grpc-retry-pushback-ms`) is honoured; `None`: pushback is ignored. See
    /// [`super::Client::on_pushback`].
    pub pushback_max: Option<Duration>,
    /// Slow start for endpoints that join the set, or come back from failure accrual; `None`
    /// (the default): off. Applied by the load-aware pickers (P2C, best-of, full scan).
    pub slow_start: Option<tailguard_balance::SlowStart>,
    /// Active health checks (`None`, the default: off). The client keeps their verdicts
    /// ([`super::Client::on_health_check`]); the caller runs the checks.
    pub health_check: Option<tailguard_resilience::HealthCheckConfig>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// What a failed (or overloaded) attempt costs the load estimate at least, instead of
    /// its own round trip (`None`: its round trip, however short). See [`super::Client`].
    pub failure_penalty: Option<Duration>,
    /// How many attempts may be in flight, and who waits past that (`None`: no bound).
    pub admission: Option<AdmissionConfig>,
}

/// A service's bound on attempts in flight (first attempts, retries and backups alike): a
/// hard cap, an adaptive limit under it, and a queue for first attempts past it (see
/// [`tailguard_resilience::admission`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionConfig {
    /// The hard cap (`maxConcurrentRequests`), checked first.
    pub max_in_flight: Option<u32>,
    /// The adaptive limit (`concurrencyLimit`), under the cap.
    pub limit: Option<tailguard_resilience::limit::LimitConfig>,
    /// Who waits, and how long (a size of 0: nobody waits).
    pub queue: tailguard_resilience::admission::QueueConfig,
    /// Requests' criticality is honoured (critical first, sheddable refused first); `false`:
    /// every request is `default`.
    pub criticality: bool,
}

/// The most requests a queue may hold.
pub const MAX_QUEUE: u32 = 1_000_000;

impl AdmissionConfig {
    /// A hard cap of `max` attempts in flight alone: no adaptive limit, nobody waits.
    pub fn cap(max: u32) -> Self {
        AdmissionConfig {
            max_in_flight: Some(max),
            limit: None,
            queue: tailguard_resilience::admission::QueueConfig {
                max_size: 0,
                max_wait: Duration::ZERO,
            },
            criticality: false,
        }
    }

    /// The limit at `now`: the adaptive one's (if any) under the cap (if any).
    pub fn bound(&self, adaptive: Option<u32>) -> u32 {
        let cap = self.max_in_flight.unwrap_or(u32::MAX);
        adaptive.map_or(cap, |l| l.min(cap))
    }

    fn validate(&self) -> Result<(), ArmError> {
        if self.max_in_flight == Some(0) {
            return Err(ArmError::Admission(
                "maxConcurrentRequests must be at least 1".into(),
            ));
        }
        if let Some(l) = &self.limit {
            l.validate()
                .map_err(|e| ArmError::Admission(format!("concurrencyLimit: {e}")))?;
        }
        if self.queue.max_size > MAX_QUEUE {
            return Err(ArmError::Admission(format!(
                "queue: maxSize must be at most {MAX_QUEUE}, got {}",
                self.queue.max_size
            )));
        }
        if self.queue.max_wait > Duration::from_secs(3600) {
            return Err(ArmError::Admission(
                "queue: maxWaitMs must be at most 1h".into(),
            ));
        }
        Ok(())
    }
}

/// The default [`ArmConfig::failure_penalty`]: one second. Peak EWMA jumps to any larger
/// sample and decays on read with its time constant, so an endpoint charged this is passed
/// over for about `tau x ln(penalty / healthy rtt)` unless every other endpoint costs more;
/// the decay is logarithmic in the penalty, so its exact size matters little once it is far
/// above the healthy round trip. (Linkerd 2's load biaser charges 5 s for a 429.)
pub const DEFAULT_FAILURE_PENALTY: Duration = Duration::from_secs(1);

/// The default [`ArmConfig::pushback_max`]: ten seconds. A backend asking for longer (a year,
/// by mistake or malice) is taken at its word for this long, then asked again.
pub const DEFAULT_PUSHBACK_MAX: Duration = Duration::from_secs(10);

/// An [`ArmConfig`] with a broken part.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ArmError {
    /// The balancer.
    #[error("balancer: {0}")]
    Policy(#[from] PolicyError),
    /// Failure accrual.
    #[error(transparent)]
    Accrual(#[from] AccrualError),
    /// The retry budget.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The retry backoff.
    #[error("retry backoff: {0}")]
    Backoff(#[from] BackoffError),
    /// Hedging.
    #[error(transparent)]
    Hedge(#[from] HedgeError),
    /// Outlier ejection.
    #[error(transparent)]
    Outlier(#[from] OutlierError),
    /// A timeout of zero would fail every request.
    #[error("timeouts must be above zero")]
    ZeroTimeout,
    /// A failure penalty above an hour would keep an endpoint out for good.
    #[error("failure penalty must be at most 1h")]
    Penalty,
    /// Slow start.
    #[error(transparent)]
    SlowStart(#[from] tailguard_balance::SlowStartError),
    /// Health checks.
    #[error("health check: {0}")]
    HealthCheck(#[from] tailguard_resilience::HealthCheckError),
    /// A pushback cap above an hour would let one answer keep an endpoint out for good.
    #[error("pushback cap must be at most 1h")]
    PushbackMax,
    /// The admission settings.
    #[error("{0}")]
    Admission(String),
}

impl ArmConfig {
    /// An arm that only balances: no retries, accrual, hedging, ejection or timeouts.
    pub fn new(name: impl Into<String>, policy: Policy) -> Self {
        Self {
            name: name.into(),
            policy,
            classifier: Classifier::default(),
            retries: None,
            accrual: None,
            hedge: None,
            outlier: None,
            rescue: false,
            pushback_max: Some(DEFAULT_PUSHBACK_MAX),
            slow_start: None,
            health_check: None,
            timeouts: Timeouts::default(),
            failure_penalty: Some(DEFAULT_FAILURE_PENALTY),
            admission: None,
        }
    }

    /// Checks every part.
    ///
    /// # Errors
    /// The first [`ArmError`] found.
    pub fn validate(&self) -> Result<(), ArmError> {
        self.policy.validate()?;
        if let Some(r) = &self.retries {
            r.budget.validate()?;
            if let Some(b) = &r.backoff {
                b.validate()?;
            }
        }
        if let Some(a) = &self.accrual {
            a.validate()?;
        }
        if let Some(h) = &self.hedge {
            h.validate()?;
        }
        if let Some(o) = &self.outlier {
            o.validate()?;
        }
        if let Some(s) = &self.slow_start {
            s.validate()?;
        }
        if let Some(h) = &self.health_check {
            h.validate()?;
        }
        let t = self.timeouts;
        if t.attempt.is_some_and(|d| d.is_zero()) || t.total.is_some_and(|d| d.is_zero()) {
            return Err(ArmError::ZeroTimeout);
        }
        if self
            .failure_penalty
            .is_some_and(|d| d > Duration::from_secs(3600))
        {
            return Err(ArmError::Penalty);
        }
        if self
            .pushback_max
            .is_some_and(|d| d > Duration::from_secs(3600))
        {
            return Err(ArmError::PushbackMax);
        }
        if let Some(a) = &self.admission {
            a.validate()?;
        }
        Ok(())
    }
}

impl ArmConfig {
    /// The arm in words: `p2c peak-ewma (...) + retries (20% + 10/s) + accrual (...)`.
    pub fn summary(&self) -> String {
        let mut parts = vec![self.policy.to_string()];
        if let Some(r) = &self.retries {
            let b = r.budget;
            parts.push(format!(
                "retries ({:.0}% + {}/s, at most {})",
                b.percent * 100.0,
                b.min_per_sec,
                r.max_retries
            ));
        }
        if let Some(a) = &self.accrual {
            parts.push(format!("accrual ({})", accrual_words(a)));
        }
        if let Some(o) = &self.outlier {
            parts.push(format!("ejection (>{}x median)", o.factor));
        }
        if let Some(h) = &self.hedge {
            parts.push(format!("hedge (p{:.0})", (1.0 - h.max_extra_load) * 100.0));
        }
        if self.rescue && self.retries.is_some() {
            parts.push("rescue".to_owned());
        }
        if let Some(s) = &self.slow_start {
            parts.push(format!("slow start ({})", format_duration(s.window)));
        }
        if let Some(h) = &self.health_check {
            let what = h.grpc_service.as_ref().map_or_else(
                || format!("GET {}", h.path),
                |s| format!("gRPC health `{s}`"),
            );
            parts.push(format!(
                "health checks ({what} every {})",
                format_duration(h.interval)
            ));
        }
        if let Some(a) = &self.admission {
            let mut words = Vec::new();
            if let Some(m) = a.max_in_flight {
                words.push(format!("at most {m}"));
            }
            if let Some(l) = &a.limit {
                let kind = match l.algorithm {
                    tailguard_resilience::limit::Algorithm::Gradient { .. } => "gradient",
                    tailguard_resilience::limit::Algorithm::Aimd { .. } => "aimd",
                };
                words.push(format!("{kind} limit from {}", l.initial));
            }
            if a.queue.max_size > 0 {
                words.push(format!(
                    "queue {} x {}",
                    a.queue.max_size,
                    format_duration(a.queue.max_wait)
                ));
            }
            if a.criticality {
                words.push("criticality".to_owned());
            }
            parts.push(format!("in flight ({})", words.join(", ")));
        }
        if let Some(t) = self.timeouts.attempt {
            parts.push(format!("attempt timeout {}", format_duration(t)));
        }
        if let Some(t) = self.timeouts.total {
            parts.push(format!("total timeout {}", format_duration(t)));
        }
        parts.join(" + ")
    }
}

fn accrual_words(a: &AccrualConfig) -> String {
    use tailguard_resilience::TripPolicy::*;
    let trip = match a.policy {
        ConsecutiveFailures { failures } => format!("{failures} failures in a row"),
        SuccessRate {
            threshold,
            requests,
        } => format!("success rate < {threshold} over {requests}"),
        SuccessRateWindowed {
            threshold, window, ..
        } => format!(
            "success rate < {threshold} over {}",
            format_duration(window)
        ),
    };
    let backoff = match a.backoff {
        Backoff::Constant(d) => format!("{} backoff", format_duration(d)),
        Backoff::Exponential { start, max }
        | Backoff::EqualJittered { start, max }
        | Backoff::FullJittered { start, max } => format!(
            "backoff {} to {}",
            format_duration(start),
            format_duration(max)
        ),
    };
    format!("{trip}, {backoff}")
}
