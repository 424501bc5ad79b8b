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
//!     timeouts: {attempt: 1s, total: 3s}
//!     failure_penalty: 1s                 # the default; 0s charges a failure its own rtt
//! ```
//! Balancer kinds: `round-robin`, `random`, `heap`, `p2c`, `best-of` (with `choices: D`),
//! `full-scan`, `aperture` (with `min_aperture`, `low_load`, `high_load`, `window`). Load:
//! `least-loaded` (default) or `peak-ewma` (with `tau`, `default_rtt`). Accrual kinds:
//! `consecutive` (`failures`), `success-rate` (`threshold`, `requests`),
//! `success-rate-windowed` (`threshold`, `window`, `min_requests`). Backoff kinds: `constant`
//! (`delay`), `exponential`, `equal-jittered`, `full-jittered` (`start`, `max`).

use crate::client::{ArmConfig, RetryConfig, Timeouts};
use serde::Deserialize;
use std::time::Duration;
use tailguard_balance::load::PeakEwmaConfig;
use tailguard_balance::{ApertureConfig, Choices, LoadKind, Policy, PrequalConfig};
use tailguard_resilience::{
    AccrualConfig, Backoff, Classifier, HedgeConfig, OutlierConfig, RetryBudgetConfig, TripPolicy,
};
use tailguard_text::duration::Dur;

/// One arm as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArmSpec {
    name: String,
    balancer: BalancerSpec,
    #[serde(default)]
    classifier: Option<ClassifierName>,
    #[serde(default)]
    four_xx_is_failure: bool,
    #[serde(default)]
    retries: Option<RetrySpec>,
    #[serde(default)]
    accrual: Option<AccrualSpec>,
    #[serde(default)]
    hedge: Option<HedgeSpec>,
    #[serde(default)]
    outlier: Option<OutlierSpec>,
    #[serde(default)]
    timeouts: Option<TimeoutSpec>,
    #[serde(default)]
    failure_penalty: Option<Dur>,
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

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum BalancerKind {
    RoundRobin,
    Random,
    Heap,
    P2c,
    BestOf,
    FullScan,
    Aperture,
    Prequal,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum LoadName {
    #[default]
    LeastLoaded,
    PeakEwma,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BalancerSpec {
    kind: BalancerKind,
    #[serde(default)]
    load: Option<LoadName>,
    tau: Option<Dur>,
    default_rtt: Option<Dur>,
    choices: Option<usize>,
    min_aperture: Option<usize>,
    low_load: Option<f64>,
    high_load: Option<f64>,
    window: Option<Dur>,
    probes: Option<u32>,
    pool: Option<usize>,
    max_age: Option<Dur>,
    max_uses: Option<u32>,
    q_rif: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetrySpec {
    percent: Option<f64>,
    min_per_sec: Option<u32>,
    ttl: Option<Dur>,
    max_retries: Option<u32>,
    backoff: Option<BackoffSpec>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum AccrualKind {
    Consecutive,
    SuccessRate,
    SuccessRateWindowed,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccrualSpec {
    kind: AccrualKind,
    failures: Option<u32>,
    threshold: Option<f64>,
    requests: Option<u32>,
    window: Option<Dur>,
    min_requests: Option<u32>,
    backoff: Option<BackoffSpec>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum BackoffKind {
    Constant,
    Exponential,
    EqualJittered,
    FullJittered,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackoffSpec {
    kind: BackoffKind,
    delay: Option<Dur>,
    start: Option<Dur>,
    max: Option<Dur>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HedgeSpec {
    max_extra_load: Option<f64>,
    min_per_sec: Option<u32>,
    window: Option<Dur>,
    min_samples: Option<u64>,
    min_delay: Option<Dur>,
    max_delay: Option<Dur>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutlierSpec {
    interval: Option<Dur>,
    factor: Option<f64>,
    min_requests: Option<u32>,
    base_ejection: Option<Dur>,
    max_ejection: Option<Dur>,
    max_ejected_percent: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutSpec {
    attempt: Option<Dur>,
    total: Option<Dur>,
}

fn d(v: Option<Dur>, default: Duration) -> Duration {
    v.map_or(default, |x| x.0)
}

impl ArmSpec {
    /// The typed arm; `Err` names the field that does not fit.
    pub(crate) fn into_config(self) -> Result<ArmConfig, String> {
        let at = |e: String| format!("arm `{}`: {e}", self.name);
        let mut arm = ArmConfig::new(self.name.clone(), self.balancer.policy().map_err(at)?);
        arm.classifier = match self.classifier {
            None => Classifier::default(),
            Some(ClassifierName::NonRetryable5xx) => Classifier::non_retryable_5xx(),
            Some(ClassifierName::RetryableRead5xx) => Classifier::retryable_read_5xx(),
            Some(ClassifierName::RetryableIdempotent5xx) => Classifier::retryable_idempotent_5xx(),
        };
        arm.classifier.four_xx_is_failure = self.four_xx_is_failure;
        arm.retries = self
            .retries
            .map(RetrySpec::config)
            .transpose()
            .map_err(at)?;
        arm.accrual = self
            .accrual
            .map(AccrualSpec::config)
            .transpose()
            .map_err(at)?;
        arm.hedge = self.hedge.map(HedgeSpec::config);
        arm.outlier = self.outlier.map(OutlierSpec::config);
        arm.timeouts = self.timeouts.map_or_else(Timeouts::default, |t| Timeouts {
            attempt: t.attempt.map(|x| x.0),
            total: t.total.map(|x| x.0),
        });
        if let Some(p) = self.failure_penalty {
            arm.failure_penalty = Some(p.0).filter(|d| !d.is_zero());
        }
        arm.validate().map_err(|e| at(e.to_string()))?;
        Ok(arm)
    }
}

impl BalancerSpec {
    fn policy(&self) -> Result<Policy, String> {
        use BalancerKind::*;
        let load = self.load_kind()?;
        let only = |field: &str, set: bool, allowed: bool| {
            if set && !allowed {
                Err(format!("balancer: `{field}` does not apply to this kind"))
            } else {
                Ok(())
            }
        };
        let aperture_fields = self.min_aperture.is_some()
            || self.low_load.is_some()
            || self.high_load.is_some()
            || self.window.is_some();
        only("choices", self.choices.is_some(), self.kind == BestOf)?;
        only(
            "min_aperture/low_load/high_load/window",
            aperture_fields,
            self.kind == Aperture,
        )?;
        let prequal_fields = self.probes.is_some()
            || self.pool.is_some()
            || self.max_age.is_some()
            || self.max_uses.is_some()
            || self.q_rif.is_some();
        only(
            "probes/pool/max_age/max_uses/q_rif",
            prequal_fields,
            self.kind == Prequal,
        )?;
        let load_aware = matches!(self.kind, P2c | BestOf | FullScan | Aperture);
        only("load", self.load.is_some(), load_aware)?;
        Ok(match self.kind {
            RoundRobin => Policy::RoundRobin,
            Random => Policy::Random,
            Heap => Policy::Heap,
            P2c => Policy::p2c(load),
            BestOf => Policy::BestOf {
                choices: Choices::D(self.choices.ok_or("balancer: best-of needs `choices`")?),
                load,
            },
            FullScan => Policy::BestOf {
                choices: Choices::All,
                load,
            },
            Aperture => Policy::Aperture {
                config: self.aperture(),
                load,
            },
            Prequal => {
                let dflt = PrequalConfig::default();
                let config = PrequalConfig {
                    probes_per_query: self.probes.unwrap_or(dflt.probes_per_query),
                    pool_size: self.pool.unwrap_or(dflt.pool_size),
                    max_age: d(self.max_age, dflt.max_age),
                    max_uses: self.max_uses.unwrap_or(dflt.max_uses),
                    q_rif: self.q_rif.unwrap_or(dflt.q_rif),
                };
                config.validate().map_err(|e| format!("balancer: {e}"))?;
                Policy::Prequal(config)
            }
        })
    }

    fn load_kind(&self) -> Result<LoadKind, String> {
        let ewma_fields = self.tau.is_some() || self.default_rtt.is_some();
        match self.load.unwrap_or_default() {
            LoadName::LeastLoaded if ewma_fields => {
                Err("balancer: `tau` and `default_rtt` apply to `load: peak-ewma` only".into())
            }
            LoadName::LeastLoaded => Ok(LoadKind::Pending),
            LoadName::PeakEwma => {
                let dflt = PeakEwmaConfig::default();
                Ok(LoadKind::PeakEwma(PeakEwmaConfig {
                    tau: d(self.tau, dflt.tau),
                    default_rtt: d(self.default_rtt, dflt.default_rtt),
                }))
            }
        }
    }

    fn aperture(&self) -> ApertureConfig {
        let dflt = ApertureConfig::default();
        ApertureConfig {
            min_aperture: self.min_aperture.unwrap_or(dflt.min_aperture),
            low_load: self.low_load.unwrap_or(dflt.low_load),
            high_load: self.high_load.unwrap_or(dflt.high_load),
            window: d(self.window, dflt.window),
        }
    }
}

impl RetrySpec {
    fn config(self) -> Result<RetryConfig, String> {
        let dflt = RetryConfig::default();
        let budget = RetryBudgetConfig {
            ttl: d(self.ttl, dflt.budget.ttl),
            min_per_sec: self.min_per_sec.unwrap_or(dflt.budget.min_per_sec),
            percent: self.percent.unwrap_or(dflt.budget.percent),
        };
        Ok(RetryConfig {
            budget,
            max_retries: self.max_retries.unwrap_or(dflt.max_retries),
            backoff: self.backoff.map(|b| b.backoff("retries")).transpose()?,
        })
    }
}

impl AccrualSpec {
    fn config(self) -> Result<AccrualConfig, String> {
        let dflt = AccrualConfig::default();
        let need = |v: Option<f64>| v.ok_or("accrual: success-rate kinds need `threshold`");
        let policy = match self.kind {
            AccrualKind::Consecutive => TripPolicy::ConsecutiveFailures {
                failures: self.failures.unwrap_or(5),
            },
            AccrualKind::SuccessRate => TripPolicy::SuccessRate {
                threshold: need(self.threshold)?,
                requests: self.requests.unwrap_or(20),
            },
            AccrualKind::SuccessRateWindowed => TripPolicy::SuccessRateWindowed {
                threshold: need(self.threshold)?,
                window: d(self.window, Duration::from_secs(30)),
                min_requests: self.min_requests.unwrap_or(5),
            },
        };
        let backoff = match self.backoff {
            Some(b) => b.backoff("accrual")?,
            None => dflt.backoff,
        };
        Ok(AccrualConfig { policy, backoff })
    }
}

impl BackoffSpec {
    fn backoff(self, owner: &str) -> Result<Backoff, String> {
        let need = |v: Option<Dur>, f: &str| {
            v.map(|x| x.0)
                .ok_or_else(|| format!("{owner}: this backoff needs `{f}`"))
        };
        Ok(match self.kind {
            BackoffKind::Constant => Backoff::Constant(need(self.delay, "delay")?),
            BackoffKind::Exponential => Backoff::Exponential {
                start: need(self.start, "start")?,
                max: need(self.max, "max")?,
            },
            BackoffKind::EqualJittered => Backoff::EqualJittered {
                start: need(self.start, "start")?,
                max: need(self.max, "max")?,
            },
            BackoffKind::FullJittered => Backoff::FullJittered {
                start: need(self.start, "start")?,
                max: need(self.max, "max")?,
            },
        })
    }
}

impl HedgeSpec {
    fn config(self) -> HedgeConfig {
        let dflt = HedgeConfig::default();
        HedgeConfig {
            max_extra_load: self.max_extra_load.unwrap_or(dflt.max_extra_load),
            min_per_sec: self.min_per_sec.unwrap_or(dflt.min_per_sec),
            window: d(self.window, dflt.window),
            refresh: dflt.refresh,
            min_samples: self.min_samples.unwrap_or(dflt.min_samples),
            min_delay: d(self.min_delay, dflt.min_delay),
            max_delay: self.max_delay.map(|v| v.0),
        }
    }
}

impl OutlierSpec {
    fn config(self) -> OutlierConfig {
        let dflt = OutlierConfig::default();
        OutlierConfig {
            interval: d(self.interval, dflt.interval),
            factor: self.factor.unwrap_or(dflt.factor),
            min_requests: self.min_requests.unwrap_or(dflt.min_requests),
            base_ejection: d(self.base_ejection, dflt.base_ejection),
            max_ejection: d(self.max_ejection, dflt.max_ejection),
            max_ejected_percent: self.max_ejected_percent.unwrap_or(dflt.max_ejected_percent),
        }
    }
}
