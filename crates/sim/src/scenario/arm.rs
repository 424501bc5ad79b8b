//! The `arms:` part of a scenario file, and its conversion into [`ArmConfig`].
//!
//! ```yaml
//! arms:
//!   - name: proxy
//!     balancer: {kind: p2c, load: peak-ewma, tau: 10s, default_rtt: 30ms}
//!     classifier: retryable-read-5xx      # or non-retryable-5xx, retryable-idempotent-5xx
//!     four_xx_is_failure: false
//!     retries: {percent: 0.2, min_per_sec: 10, ttl: 10s, max_retries: 3}
//!     accrual: {kind: success-rate, threshold: 0.9, requests: 20,
//!               backoff: {kind: constant, delay: 10s}}
//!     hedge: {max_extra_load: 0.05}
//!     outlier: {factor: 3, interval: 10s, base_ejection: 30s}
//!     rescue_stalled: true                # a backup for an attempt at a silent endpoint
//!     slow_start: {window: 30s, aggression: 1, min_weight_percent: 10}
//!     timeouts: {attempt: 1s, total: 3s}
//!     failure_penalty: 1s                 # the default; 0s charges a failure its own rtt
//!     max_concurrent_requests: 16         # attempts in flight at most (first, retries, backups)
//!     concurrency_limit: {kind: gradient} # or aimd: an adaptive limit under the cap
//!     queue: {max_size: 100, max_wait: 50ms}   # first attempts past the bound wait (else refused)
//!     criticality: true                   # critical first, sheddable refused first (else all default)
//! ```
//! The `balancer`, `accrual`, `retries`, `hedge` and `outlier` blocks are the proxy's
//! (`client.loadBalancer`, `client.failureAccrual`, `service.retries`, `service.hedge`,
//! `client.outlierDetection`), parsed by the same code ([`tailguard_client::spec`]): either
//! spelling works in either place (`{kind: ewma, decayTimeMs: 10000}` here, `{kind: p2c,
//! load: peak-ewma, tau: 10s}` in a proxy file), and the blocks may go by the proxy's names
//! here too. A key that does not apply to the chosen kind is an error naming the kinds it
//! belongs to. The proxy's `probePath` and `grpcMethods` are accepted and have no effect in
//! the simulator.

use crate::client::spec::{
    AccrualSpec, BalancerSpec, HedgeSpec, LimitSpec, OutlierSpec, QueueSpec, RetriesSpec,
    SlowStartSpec, SpecError,
};
use crate::client::{AdmissionConfig, ArmConfig, Timeouts};
use serde::Deserialize;
use tailguard_resilience::Classifier;
use tailguard_text::duration::Dur;

/// One arm as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArmSpec {
    name: String,
    #[serde(alias = "loadBalancer")]
    balancer: BalancerSpec,
    #[serde(default)]
    classifier: Option<ClassifierName>,
    #[serde(default)]
    four_xx_is_failure: bool,
    #[serde(default)]
    retries: Option<RetriesSpec>,
    #[serde(default, alias = "failureAccrual")]
    accrual: Option<AccrualSpec>,
    #[serde(default)]
    hedge: Option<HedgeSpec>,
    #[serde(default, alias = "outlierDetection")]
    outlier: Option<OutlierSpec>,
    #[serde(default, alias = "rescueStalled")]
    rescue_stalled: bool,
    #[serde(default, alias = "slowStart")]
    slow_start: Option<SlowStartSpec>,
    #[serde(default)]
    timeouts: Option<TimeoutSpec>,
    #[serde(default)]
    failure_penalty: Option<Dur>,
    #[serde(default, alias = "maxConcurrentRequests")]
    max_concurrent_requests: Option<u32>,
    #[serde(default, alias = "concurrencyLimit")]
    concurrency_limit: Option<LimitSpec>,
    #[serde(default)]
    queue: Option<QueueSpec>,
    #[serde(default)]
    criticality: bool,
}

#[derive(Clone, Copy, Debug, Deserialize)]
enum ClassifierName {
    #[serde(rename = "non-retryable-5xx")]
    NonRetryable5xx,
    #[serde(rename = "retryable-read-5xx")]
    RetryableRead5xx,
    #[serde(rename = "retryable-idempotent-5xx")]
    RetryableIdempotent5xx,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutSpec {
    attempt: Option<Dur>,
    total: Option<Dur>,
}

impl ArmSpec {
    /// The typed arm; `Err` names the field that does not fit.
    pub(crate) fn into_config(self) -> Result<ArmConfig, String> {
        let at = |e: String| format!("arm `{}`: {e}", self.name);
        let block = |name: &'static str| {
            move |e: SpecError| at(format!("{}: {}", e.key_in(name), e.message))
        };
        let policy = self.balancer.policy().map_err(block("balancer"))?;
        let mut arm = ArmConfig::new(self.name.clone(), policy);
        arm.classifier = match self.classifier {
            None => Classifier::default(),
            Some(ClassifierName::NonRetryable5xx) => Classifier::non_retryable_5xx(),
            Some(ClassifierName::RetryableRead5xx) => Classifier::retryable_read_5xx(),
            Some(ClassifierName::RetryableIdempotent5xx) => Classifier::retryable_idempotent_5xx(),
        };
        arm.classifier.four_xx_is_failure = self.four_xx_is_failure;
        arm.retries = self
            .retries
            .as_ref()
            .map(RetriesSpec::config)
            .transpose()
            .map_err(block("retries"))?;
        arm.accrual = match &self.accrual {
            None => None,
            Some(a) => a.config().map_err(block("accrual"))?,
        };
        arm.hedge = self
            .hedge
            .as_ref()
            .map(HedgeSpec::config)
            .transpose()
            .map_err(block("hedge"))?;
        arm.outlier = self
            .outlier
            .as_ref()
            .map(OutlierSpec::config)
            .transpose()
            .map_err(block("outlier"))?;
        arm.rescue = self.rescue_stalled;
        arm.slow_start = self
            .slow_start
            .as_ref()
            .map(SlowStartSpec::config)
            .transpose()
            .map_err(block("slow_start"))?;
        arm.timeouts = self.timeouts.map_or_else(Timeouts::default, |t| Timeouts {
            attempt: t.attempt.map(|x| x.0),
            total: t.total.map(|x| x.0),
        });
        if let Some(p) = self.failure_penalty {
            arm.failure_penalty = Some(p.0).filter(|d| !d.is_zero());
        }
        let limit = self
            .concurrency_limit
            .as_ref()
            .map(LimitSpec::config)
            .transpose()
            .map_err(block("concurrency_limit"))?;
        let queue = self
            .queue
            .as_ref()
            .map(QueueSpec::config)
            .transpose()
            .map_err(block("queue"))?;
        if self.max_concurrent_requests.is_some() || limit.is_some() {
            arm.admission = Some(AdmissionConfig {
                max_in_flight: self.max_concurrent_requests,
                limit,
                queue: queue.unwrap_or(tailguard_resilience::admission::QueueConfig {
                    max_size: 0,
                    max_wait: std::time::Duration::ZERO,
                }),
                criticality: self.criticality,
            });
        } else if queue.is_some() || self.criticality {
            return Err(at(
                "queue and criticality need max_concurrent_requests or concurrency_limit: nothing to wait for"
                    .into(),
            ));
        }
        arm.validate().map_err(|e| at(e.to_string()))?;
        Ok(arm)
    }
}
