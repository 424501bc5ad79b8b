//! The one configuration vocabulary for the algorithms: balancer, failure accrual, retries,
//! hedging and latency ejection, as written in a proxy file (`client.loadBalancer`,
//! `client.failureAccrual`, `service.retries`, `service.hedge`, `client.outlierDetection`) and
//! in a scenario arm (`balancer`, `accrual`, `retries`, `hedge`, `outlier`). One typed parser
//! for both: a block pasted from one into the other means the same.
//!
//! - Keys are Linkerd 1's, in camelCase, with times in whole milliseconds (`decayTimeMs`); the
//!   scenario spellings are aliases, with times as durations (`tau: 10s`). Giving both
//!   spellings of one setting is an error.
//! - Kinds likewise: `roundRobin` or `round-robin`, `io.l5d.successRate` or `success-rate`.
//! - Strict: a key that does not apply to the chosen kind is an error naming the key and the
//!   kinds it belongs to ([`BALANCER_KEYS`], [`ACCRUAL_KEYS`], [`BACKOFF_KEYS`]).
//!
//! Errors are [`SpecError`]s whose key is relative to the block (`choices`,
//! `backoff.minMs`); the caller puts the block's own place in front.

use crate::RetryConfig;
use serde::{Deserialize, Deserializer};
use std::time::Duration;
use tailguard_balance::load::PeakEwmaConfig;
use tailguard_balance::{ApertureConfig, Choices, LoadKind, Policy, PrequalConfig};
use tailguard_resilience::{
    AccrualConfig, Backoff, HedgeConfig, OutlierConfig, RetryBudgetConfig, TripPolicy,
};
use tailguard_text::duration::Dur;

/// A value that does not fit, at `key` within its block.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", if key.is_empty() { "(block)" } else { key })]
pub struct SpecError {
    /// The key, relative to the block (`kind`, `choices`, `backoff.ms`).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl SpecError {
    fn at(key: &str, message: impl Into<String>) -> Self {
        Self {
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// The same error one block further out (`backoff` + `ms` -> `backoff.ms`).
    fn within(self, block: &str) -> Self {
        Self {
            key: self.key_in(block),
            message: self.message,
        }
    }

    /// The full key, under the block at `block` (`services[web].client.loadBalancer`): the
    /// block itself when the error is about the block as a whole.
    pub fn key_in(&self, block: &str) -> String {
        match self.key.is_empty() {
            true => block.to_owned(),
            false => format!("{block}.{}", self.key),
        }
    }
}

/// A time given in milliseconds under one key or as a duration under another; both is an
/// error.
fn time(
    ms: Option<u64>,
    ms_key: &str,
    dur: Option<Dur>,
    dur_key: &str,
) -> Result<Option<Duration>, SpecError> {
    match (ms, dur) {
        (Some(_), Some(_)) => Err(SpecError::at(
            ms_key,
            format!("given twice, also as `{dur_key}`: give one"),
        )),
        (Some(v), None) => Ok(Some(Duration::from_millis(v))),
        (None, Some(d)) => Ok(Some(d.0)),
        (None, None) => Ok(None),
    }
}

/// Checks each key set against the kinds it belongs to.
fn only(kind: &str, set: &[(&str, bool)], table: &[(&str, &[&str])]) -> Result<(), SpecError> {
    for (key, is_set) in set {
        if !is_set {
            continue;
        }
        let kinds = table
            .iter()
            .find(|(k, _)| k == key)
            .map_or(&[][..], |(_, kinds)| *kinds);
        if !kinds.contains(&kind) {
            return Err(SpecError::at(
                key,
                format!(
                    "does not apply to kind {kind}; it belongs to {}",
                    kinds.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The canonical name of `written` among `(canonical, aliases)`, or an error listing them.
fn canonical(
    written: &str,
    names: &[(&'static str, &[&str])],
    key: &str,
) -> Result<&'static str, SpecError> {
    names
        .iter()
        .find(|(c, aliases)| *c == written || aliases.contains(&written))
        .map(|(c, _)| *c)
        .ok_or_else(|| {
            let all: Vec<&str> = names.iter().map(|(c, _)| *c).collect();
            SpecError::at(
                key,
                format!("`{written}`: expected one of {}", all.join(", ")),
            )
        })
}

/// Balancer kinds, each with its scenario spellings.
pub const BALANCER_KINDS: &[(&str, &[&str])] = &[
    ("roundRobin", &["round-robin"]),
    ("random", &[]),
    ("p2c", &[]),
    ("ewma", &[]),
    ("heap", &[]),
    ("bestOf", &["best-of"]),
    ("fullScan", &["full-scan"]),
    ("aperture", &[]),
    ("prequal", &[]),
];

/// The kinds that take `load`.
const LOAD_AWARE: &[&str] = &["p2c", "bestOf", "fullScan", "aperture"];

/// Each balancer key (canonical spelling) and the kinds it belongs to. The peak-EWMA keys also
/// apply to the load-aware kinds with `load: ewma`.
pub const BALANCER_KEYS: &[(&str, &[&str])] = &[
    ("load", LOAD_AWARE),
    (
        "decayTimeMs",
        &["ewma", "p2c", "bestOf", "fullScan", "aperture"],
    ),
    (
        "defaultRttMs",
        &["ewma", "p2c", "bestOf", "fullScan", "aperture"],
    ),
    (
        "pendingAge",
        &["ewma", "p2c", "bestOf", "fullScan", "aperture"],
    ),
    ("choices", &["bestOf"]),
    ("minAperture", &["aperture"]),
    ("lowLoad", &["aperture"]),
    ("highLoad", &["aperture"]),
    ("windowMs", &["aperture"]),
    ("probes", &["prequal"]),
    ("poolSize", &["prequal"]),
    ("maxAgeMs", &["prequal"]),
    ("maxUses", &["prequal"]),
    ("qRif", &["prequal"]),
    ("probePath", &["prequal"]),
];

/// A balancer block (`client.loadBalancer`, a scenario arm's `balancer`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BalancerSpec {
    /// The kind ([`BALANCER_KINDS`]).
    pub kind: String,
    load: Option<String>,
    decay_time_ms: Option<u64>,
    #[serde(rename = "tau")]
    tau: Option<Dur>,
    default_rtt_ms: Option<u64>,
    #[serde(rename = "default_rtt")]
    default_rtt: Option<Dur>,
    #[serde(alias = "pending_age")]
    pending_age: Option<bool>,
    choices: Option<usize>,
    #[serde(alias = "min_aperture")]
    min_aperture: Option<usize>,
    #[serde(alias = "low_load")]
    low_load: Option<f64>,
    #[serde(alias = "high_load")]
    high_load: Option<f64>,
    window_ms: Option<u64>,
    #[serde(rename = "window")]
    window: Option<Dur>,
    probes: Option<u32>,
    #[serde(alias = "pool")]
    pool_size: Option<usize>,
    max_age_ms: Option<u64>,
    #[serde(rename = "max_age")]
    max_age: Option<Dur>,
    #[serde(alias = "max_uses")]
    max_uses: Option<u32>,
    #[serde(alias = "q_rif")]
    q_rif: Option<f64>,
    /// Where a probing balancer asks an endpoint for its load (the proxy's; the simulator's
    /// servers answer probes without a path).
    #[serde(alias = "probe_path")]
    pub probe_path: Option<String>,
}

impl BalancerSpec {
    /// The balancer `kind` names with default parameters (`proxy --balancer`).
    pub fn of_kind(kind: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            ..Self::default()
        }
    }

    /// The typed balancer.
    ///
    /// # Errors
    /// An unknown kind or load, a key that does not apply to the kind, a setting given twice,
    /// a value out of range.
    pub fn policy(&self) -> Result<Policy, SpecError> {
        let kind = canonical(&self.kind, BALANCER_KINDS, "kind")?;
        let load_name = match self.load.as_deref() {
            None => None,
            Some(l) => Some(canonical(
                l,
                &[
                    ("leastLoaded", &["least-loaded"]),
                    ("ewma", &["peak-ewma", "peakEwma"]),
                ],
                "load",
            )?),
        };
        let times = self.times()?;
        self.keys_apply(kind, load_name, &times)?;
        let dflt = PeakEwmaConfig::default();
        let ewma = PeakEwmaConfig {
            tau: times.tau.unwrap_or(dflt.tau),
            default_rtt: times.rtt.unwrap_or(dflt.default_rtt),
            pending_age: self.pending_age.unwrap_or(dflt.pending_age),
        };
        let load = match load_name {
            Some("ewma") => LoadKind::PeakEwma(ewma),
            _ => LoadKind::Pending,
        };
        Ok(match kind {
            "roundRobin" => Policy::RoundRobin,
            "random" => Policy::Random,
            "heap" => Policy::Heap,
            "p2c" => Policy::p2c(load),
            "ewma" => Policy::p2c(LoadKind::PeakEwma(ewma)),
            "bestOf" => {
                let d = self.choices.unwrap_or(2);
                if d < 2 {
                    return Err(SpecError::at("choices", "must be at least 2"));
                }
                Policy::BestOf {
                    choices: Choices::D(d),
                    load,
                }
            }
            "fullScan" => Policy::BestOf {
                choices: Choices::All,
                load,
            },
            "aperture" => Policy::Aperture {
                config: self.aperture(times.window),
                load,
            },
            _ => Policy::Prequal(self.prequal(times.max_age)?),
        })
    }

    /// The times, each given in milliseconds or as a duration (not both).
    fn times(&self) -> Result<Times, SpecError> {
        Ok(Times {
            tau: time(self.decay_time_ms, "decayTimeMs", self.tau, "tau")?,
            rtt: time(
                self.default_rtt_ms,
                "defaultRttMs",
                self.default_rtt,
                "default_rtt",
            )?,
            window: time(self.window_ms, "windowMs", self.window, "window")?,
            max_age: time(self.max_age_ms, "maxAgeMs", self.max_age, "max_age")?,
        })
    }

    /// Checks that every key set applies to `kind` (the peak EWMA's keys also to a kind whose
    /// `load` is `ewma`).
    fn keys_apply(
        &self,
        kind: &str,
        load_name: Option<&str>,
        times: &Times,
    ) -> Result<(), SpecError> {
        only(
            kind,
            &[
                ("load", self.load.is_some()),
                ("decayTimeMs", times.tau.is_some()),
                ("defaultRttMs", times.rtt.is_some()),
                ("pendingAge", self.pending_age.is_some()),
                ("choices", self.choices.is_some()),
                ("minAperture", self.min_aperture.is_some()),
                ("lowLoad", self.low_load.is_some()),
                ("highLoad", self.high_load.is_some()),
                ("windowMs", times.window.is_some()),
                ("probes", self.probes.is_some()),
                ("poolSize", self.pool_size.is_some()),
                ("maxAgeMs", times.max_age.is_some()),
                ("maxUses", self.max_uses.is_some()),
                ("qRif", self.q_rif.is_some()),
                ("probePath", self.probe_path.is_some()),
            ],
            BALANCER_KEYS,
        )?;
        let ewma_keys = times.tau.is_some() || times.rtt.is_some() || self.pending_age.is_some();
        let is_ewma = kind == "ewma" || load_name == Some("ewma");
        if ewma_keys && !is_ewma {
            let key = if times.tau.is_some() {
                "decayTimeMs"
            } else if times.rtt.is_some() {
                "defaultRttMs"
            } else {
                "pendingAge"
            };
            return Err(SpecError::at(
                key,
                format!("applies to kind ewma, or to kind {kind} with `load: ewma`"),
            ));
        }
        Ok(())
    }

    /// The aperture's settings, defaults for those not given.
    fn aperture(&self, window: Option<Duration>) -> ApertureConfig {
        let d = ApertureConfig::default();
        ApertureConfig {
            min_aperture: self.min_aperture.unwrap_or(d.min_aperture),
            low_load: self.low_load.unwrap_or(d.low_load),
            high_load: self.high_load.unwrap_or(d.high_load),
            window: window.unwrap_or(d.window),
        }
    }

    /// The probing balancer's settings, defaults for those not given, checked.
    fn prequal(&self, max_age: Option<Duration>) -> Result<PrequalConfig, SpecError> {
        let d = PrequalConfig::default();
        let config = PrequalConfig {
            probes_per_query: self.probes.unwrap_or(d.probes_per_query),
            pool_size: self.pool_size.unwrap_or(d.pool_size),
            max_age: max_age.unwrap_or(d.max_age),
            max_uses: self.max_uses.unwrap_or(d.max_uses),
            q_rif: self.q_rif.unwrap_or(d.q_rif),
        };
        config
            .validate()
            .map_err(|e| SpecError::at("", e.to_string()))?;
        Ok(config)
    }
}

/// A balancer's times, as given.
struct Times {
    /// The peak EWMA's decay time.
    tau: Option<Duration>,
    /// The peak EWMA's round trip before any is measured.
    rtt: Option<Duration>,
    /// The aperture's window.
    window: Option<Duration>,
    /// How long a probe result stays usable.
    max_age: Option<Duration>,
}

/// Failure accrual kinds, each with its scenario spelling (`io.l5d.` may be left out).
pub const ACCRUAL_KINDS: &[(&str, &[&str])] = &[
    (
        "io.l5d.consecutiveFailures",
        &["consecutiveFailures", "consecutive"],
    ),
    ("io.l5d.successRate", &["successRate", "success-rate"]),
    (
        "io.l5d.successRateWindowed",
        &["successRateWindowed", "success-rate-windowed"],
    ),
    ("none", &[]),
];

/// Each accrual key and the kinds it belongs to.
pub const ACCRUAL_KEYS: &[(&str, &[&str])] = &[
    ("failures", &["io.l5d.consecutiveFailures"]),
    (
        "successRate",
        &["io.l5d.successRate", "io.l5d.successRateWindowed"],
    ),
    (
        "requests",
        &["io.l5d.successRate", "io.l5d.successRateWindowed"],
    ),
    ("window", &["io.l5d.successRateWindowed"]),
    (
        "backoff",
        &[
            "io.l5d.consecutiveFailures",
            "io.l5d.successRate",
            "io.l5d.successRateWindowed",
        ],
    ),
];

/// Seconds as a number (Linkerd 1's `window: 30`) or a duration (`window: 30s`).
#[derive(Clone, Copy, Debug)]
struct Seconds(Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Secs(u64),
            Dur(Dur),
        }
        Ok(Seconds(match Either::deserialize(de)? {
            Either::Secs(s) => Duration::from_secs(s),
            Either::Dur(d) => d.0,
        }))
    }
}

/// A failure accrual block (`client.failureAccrual`, a scenario arm's `accrual`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AccrualSpec {
    kind: String,
    failures: Option<u32>,
    #[serde(alias = "threshold")]
    success_rate: Option<f64>,
    #[serde(alias = "min_requests")]
    requests: Option<u32>,
    window: Option<Seconds>,
    backoff: Option<BackoffSpec>,
}

impl AccrualSpec {
    /// The typed accrual; `None` for kind `none`.
    ///
    /// # Errors
    /// An unknown kind, a key that does not apply to it, a missing `successRate`, a backoff
    /// that does not fit.
    pub fn config(&self) -> Result<Option<AccrualConfig>, SpecError> {
        let kind = canonical(&self.kind, ACCRUAL_KINDS, "kind")?;
        only(
            kind,
            &[
                ("failures", self.failures.is_some()),
                ("successRate", self.success_rate.is_some()),
                ("requests", self.requests.is_some()),
                ("window", self.window.is_some()),
                ("backoff", self.backoff.is_some()),
            ],
            ACCRUAL_KEYS,
        )?;
        let rate = || {
            self.success_rate
                .ok_or_else(|| SpecError::at("successRate", format!("required for kind {kind}")))
        };
        let policy = match kind {
            "none" => return Ok(None),
            "io.l5d.consecutiveFailures" => TripPolicy::ConsecutiveFailures {
                failures: self.failures.unwrap_or(5),
            },
            "io.l5d.successRate" => TripPolicy::SuccessRate {
                threshold: rate()?,
                requests: self.requests.unwrap_or(20),
            },
            _ => TripPolicy::SuccessRateWindowed {
                threshold: rate()?,
                window: self.window.map_or(Duration::from_secs(30), |w| w.0),
                min_requests: self.requests.unwrap_or(5),
            },
        };
        let backoff = match &self.backoff {
            None => AccrualConfig::default().backoff,
            Some(b) => b.backoff().map_err(|e| e.within("backoff"))?,
        };
        Ok(Some(AccrualConfig { policy, backoff }))
    }
}

/// Backoff kinds, each with its scenario spelling.
pub const BACKOFF_KINDS: &[(&str, &[&str])] = &[
    ("constant", &[]),
    ("jittered", &["equal-jittered", "equalJittered"]),
    ("fullJittered", &["full-jittered"]),
    ("exponential", &[]),
];

/// Each backoff key and the kinds it belongs to (`ms`/`delay`, `minMs`/`start`,
/// `maxMs`/`max`).
pub const BACKOFF_KEYS: &[(&str, &[&str])] = &[
    ("ms", &["constant"]),
    ("minMs", &["jittered", "fullJittered", "exponential"]),
    ("maxMs", &["jittered", "fullJittered", "exponential"]),
];

/// A backoff block (accrual's, or retries').
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackoffSpec {
    kind: String,
    ms: Option<u64>,
    #[serde(rename = "delay")]
    delay: Option<Dur>,
    min_ms: Option<u64>,
    #[serde(rename = "start")]
    start: Option<Dur>,
    max_ms: Option<u64>,
    #[serde(rename = "max")]
    max: Option<Dur>,
}

impl BackoffSpec {
    /// The typed backoff.
    ///
    /// # Errors
    /// An unknown kind, a key that does not apply to it, a missing time.
    pub fn backoff(&self) -> Result<Backoff, SpecError> {
        let kind = canonical(&self.kind, BACKOFF_KINDS, "kind")?;
        let fixed = time(self.ms, "ms", self.delay, "delay")?;
        let min = time(self.min_ms, "minMs", self.start, "start")?;
        let max = time(self.max_ms, "maxMs", self.max, "max")?;
        only(
            kind,
            &[
                ("ms", fixed.is_some()),
                ("minMs", min.is_some()),
                ("maxMs", max.is_some()),
            ],
            BACKOFF_KEYS,
        )?;
        let need = |v: Option<Duration>, key: &str| {
            v.ok_or_else(|| SpecError::at(key, format!("required for kind {kind}")))
        };
        Ok(match kind {
            "constant" => Backoff::Constant(need(fixed, "ms")?),
            "jittered" => Backoff::EqualJittered {
                start: need(min, "minMs")?,
                max: need(max, "maxMs")?,
            },
            "fullJittered" => Backoff::FullJittered {
                start: need(min, "minMs")?,
                max: need(max, "maxMs")?,
            },
            _ => Backoff::Exponential {
                start: need(min, "minMs")?,
                max: need(max, "maxMs")?,
            },
        })
    }
}

/// Linkerd 1's retry budget block (`retries.budget`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BudgetSpec {
    min_retries_per_sec: Option<u32>,
    percent_can_retry: Option<f64>,
    ttl_secs: Option<u64>,
}

/// A retries block (`service.retries`, a scenario arm's `retries`): Linkerd 1's nested
/// `budget`, or the scenario's flat `percent`, `min_per_sec`, `ttl` (not both).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetriesSpec {
    budget: Option<BudgetSpec>,
    #[serde(rename = "percent")]
    percent: Option<f64>,
    #[serde(rename = "min_per_sec")]
    min_per_sec: Option<u32>,
    #[serde(rename = "ttl")]
    ttl: Option<Dur>,
    #[serde(alias = "max_retries")]
    max_retries: Option<u32>,
    backoff: Option<BackoffSpec>,
}

impl RetriesSpec {
    /// The typed retries.
    ///
    /// # Errors
    /// Both budget spellings, a backoff that does not fit.
    pub fn config(&self) -> Result<RetryConfig, SpecError> {
        let flat = self.percent.is_some() || self.min_per_sec.is_some() || self.ttl.is_some();
        if flat && self.budget.is_some() {
            return Err(SpecError::at(
                "budget",
                "given twice, also as percent/min_per_sec/ttl: give one",
            ));
        }
        let d = RetryConfig::default();
        let b = self.budget.clone().unwrap_or_default();
        let budget = RetryBudgetConfig {
            ttl: b
                .ttl_secs
                .map(Duration::from_secs)
                .or(self.ttl.map(|t| t.0))
                .unwrap_or(d.budget.ttl),
            min_per_sec: b
                .min_retries_per_sec
                .or(self.min_per_sec)
                .unwrap_or(d.budget.min_per_sec),
            percent: b
                .percent_can_retry
                .or(self.percent)
                .unwrap_or(d.budget.percent),
        };
        let backoff = match &self.backoff {
            None => None,
            Some(b) => Some(b.backoff().map_err(|e| e.within("backoff"))?),
        };
        Ok(RetryConfig {
            budget,
            max_retries: self.max_retries.unwrap_or(d.max_retries),
            backoff,
        })
    }
}

/// A slow-start block (`client.slowStart`, a scenario arm's `slow_start`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SlowStartSpec {
    window_ms: Option<u64>,
    #[serde(rename = "window")]
    window: Option<Dur>,
    aggression: Option<f64>,
    #[serde(alias = "min_weight_percent")]
    min_weight_percent: Option<f64>,
}

impl SlowStartSpec {
    /// The typed slow start: `windowMs` required, `aggression` 1 and `minWeightPercent` 10 by
    /// default (Envoy's).
    ///
    /// # Errors
    /// No window, a setting given twice, a value out of range.
    pub fn config(&self) -> Result<tailguard_balance::SlowStart, SpecError> {
        let window = time(self.window_ms, "windowMs", self.window, "window")?
            .ok_or_else(|| SpecError::at("windowMs", "required"))?;
        let config = tailguard_balance::SlowStart {
            window,
            aggression: self.aggression.unwrap_or(1.0),
            min_weight: self.min_weight_percent.unwrap_or(10.0) / 100.0,
        };
        config.validate().map_err(|e| {
            let key = match e {
                tailguard_balance::SlowStartError::Window => "windowMs",
                tailguard_balance::SlowStartError::Aggression(_) => "aggression",
                tailguard_balance::SlowStartError::MinWeight(_) => "minWeightPercent",
            };
            SpecError::at(key, e.to_string())
        })?;
        Ok(config)
    }
}

/// A hedging block (`service.hedge`, a scenario arm's `hedge`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HedgeSpec {
    #[serde(alias = "max_extra_load")]
    max_extra_load: Option<f64>,
    #[serde(alias = "min_per_sec")]
    min_per_sec: Option<u32>,
    window_ms: Option<u64>,
    #[serde(rename = "window")]
    window: Option<Dur>,
    #[serde(alias = "min_samples")]
    min_samples: Option<u64>,
    min_delay_ms: Option<u64>,
    #[serde(rename = "min_delay")]
    min_delay: Option<Dur>,
    max_delay_ms: Option<u64>,
    #[serde(rename = "max_delay")]
    max_delay: Option<Dur>,
    /// gRPC methods that may be hedged (the proxy's; the simulator has no gRPC).
    #[serde(alias = "grpc_methods")]
    pub grpc_methods: Option<Vec<String>>,
}

impl HedgeSpec {
    /// The typed hedging settings.
    ///
    /// # Errors
    /// A setting given twice, a value out of range.
    pub fn config(&self) -> Result<HedgeConfig, SpecError> {
        let d = HedgeConfig::default();
        let config = HedgeConfig {
            max_extra_load: self.max_extra_load.unwrap_or(d.max_extra_load),
            min_per_sec: self.min_per_sec.unwrap_or(d.min_per_sec),
            window: time(self.window_ms, "windowMs", self.window, "window")?.unwrap_or(d.window),
            refresh: d.refresh,
            min_samples: self.min_samples.unwrap_or(d.min_samples),
            min_delay: time(self.min_delay_ms, "minDelayMs", self.min_delay, "min_delay")?
                .unwrap_or(d.min_delay),
            max_delay: time(self.max_delay_ms, "maxDelayMs", self.max_delay, "max_delay")?,
        };
        config
            .validate()
            .map_err(|e| SpecError::at("", e.to_string()))?;
        Ok(config)
    }
}

/// A latency ejection block (`client.outlierDetection`, a scenario arm's `outlier`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OutlierSpec {
    interval_ms: Option<u64>,
    #[serde(rename = "interval")]
    interval: Option<Dur>,
    factor: Option<f64>,
    #[serde(alias = "min_requests")]
    min_requests: Option<u32>,
    base_ejection_ms: Option<u64>,
    #[serde(rename = "base_ejection")]
    base_ejection: Option<Dur>,
    max_ejection_ms: Option<u64>,
    #[serde(rename = "max_ejection")]
    max_ejection: Option<Dur>,
    /// Percent, 0 to 100 (Envoy's `max_ejection_percent`).
    max_ejected_percent: Option<f64>,
    /// The scenario spelling, a fraction 0 to 1 as it always was.
    #[serde(rename = "max_ejected_percent")]
    max_ejected_fraction: Option<f64>,
}

impl OutlierSpec {
    /// The typed ejection settings.
    ///
    /// # Errors
    /// A setting given twice, a value out of range.
    pub fn config(&self) -> Result<OutlierConfig, SpecError> {
        let d = OutlierConfig::default();
        let share = match (self.max_ejected_percent, self.max_ejected_fraction) {
            (Some(_), Some(_)) => {
                return Err(SpecError::at(
                    "maxEjectedPercent",
                    "given twice, also as `max_ejected_percent`: give one",
                ))
            }
            (Some(p), None) => p / 100.0,
            (None, Some(f)) => f,
            (None, None) => d.max_ejected_percent,
        };
        let config = OutlierConfig {
            interval: time(self.interval_ms, "intervalMs", self.interval, "interval")?
                .unwrap_or(d.interval),
            factor: self.factor.unwrap_or(d.factor),
            min_requests: self.min_requests.unwrap_or(d.min_requests),
            base_ejection: time(
                self.base_ejection_ms,
                "baseEjectionMs",
                self.base_ejection,
                "base_ejection",
            )?
            .unwrap_or(d.base_ejection),
            max_ejection: time(
                self.max_ejection_ms,
                "maxEjectionMs",
                self.max_ejection,
                "max_ejection",
            )?
            .unwrap_or(d.max_ejection),
            max_ejected_percent: share,
        };
        config
            .validate()
            .map_err(|e| SpecError::at("", e.to_string()))?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests;

/// An adaptive concurrency limit (`service.concurrencyLimit`, a scenario arm's
/// `concurrency_limit`): `kind: gradient` (Netflix's Gradient2) or `kind: aimd`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitSpec {
    kind: String,
    #[serde(alias = "initial_limit")]
    initial_limit: Option<u32>,
    #[serde(alias = "min_limit")]
    min_limit: Option<u32>,
    #[serde(alias = "max_limit")]
    max_limit: Option<u32>,
    smoothing: Option<f64>,
    #[serde(alias = "rtt_tolerance")]
    rtt_tolerance: Option<f64>,
    #[serde(alias = "long_window")]
    long_window: Option<u32>,
    #[serde(alias = "queue_size")]
    queue_size: Option<u32>,
    #[serde(alias = "backoff_ratio")]
    backoff_ratio: Option<f64>,
}

impl LimitSpec {
    /// The typed limit.
    ///
    /// # Errors
    /// An unknown kind, a key of the other kind, a value out of range.
    pub fn config(&self) -> Result<tailguard_resilience::limit::LimitConfig, SpecError> {
        use tailguard_resilience::limit::{Algorithm, LimitConfig};
        only(
            &self.kind,
            &[
                ("smoothing", self.smoothing.is_some()),
                ("rttTolerance", self.rtt_tolerance.is_some()),
                ("longWindow", self.long_window.is_some()),
                ("queueSize", self.queue_size.is_some()),
                ("backoffRatio", self.backoff_ratio.is_some()),
            ],
            &[
                ("smoothing", &["gradient"]),
                ("rttTolerance", &["gradient"]),
                ("longWindow", &["gradient"]),
                ("queueSize", &["gradient"]),
                ("backoffRatio", &["aimd"]),
            ],
        )?;
        let base = match self.kind.as_str() {
            "gradient" => LimitConfig::gradient(),
            "aimd" => LimitConfig::aimd(),
            other => {
                return Err(SpecError::at(
                    "kind",
                    format!("unknown kind {other:?}: gradient or aimd"),
                ))
            }
        };
        let algorithm = match base.algorithm {
            Algorithm::Gradient {
                smoothing,
                rtt_tolerance,
                long_window,
                queue,
            } => Algorithm::Gradient {
                smoothing: self.smoothing.unwrap_or(smoothing),
                rtt_tolerance: self.rtt_tolerance.unwrap_or(rtt_tolerance),
                long_window: self.long_window.unwrap_or(long_window),
                queue: self.queue_size.unwrap_or(queue),
            },
            Algorithm::Aimd { backoff_ratio } => Algorithm::Aimd {
                backoff_ratio: self.backoff_ratio.unwrap_or(backoff_ratio),
            },
        };
        let config = LimitConfig {
            initial: self.initial_limit.unwrap_or(base.initial),
            min: self.min_limit.unwrap_or(base.min),
            max: self.max_limit.unwrap_or(base.max),
            algorithm,
        };
        config
            .validate()
            .map_err(|e| SpecError::at(e.field, e.to_string()))?;
        Ok(config)
    }
}

/// The admission queue (`service.queue`, a scenario arm's `queue`): `{maxSize, maxWaitMs}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueSpec {
    #[serde(alias = "max_size")]
    max_size: u32,
    max_wait_ms: Option<u64>,
    #[serde(rename = "max_wait")]
    max_wait: Option<Dur>,
}

impl QueueSpec {
    /// The typed queue settings.
    ///
    /// # Errors
    /// A wait given twice or not at all, a size or wait out of range.
    pub fn config(&self) -> Result<tailguard_resilience::admission::QueueConfig, SpecError> {
        let max_wait = time(self.max_wait_ms, "maxWaitMs", self.max_wait, "max_wait")?
            .ok_or_else(|| SpecError::at("maxWaitMs", "missing: how long a request may wait"))?;
        if self.max_size > crate::config::MAX_QUEUE {
            return Err(SpecError::at(
                "maxSize",
                format!(
                    "at most {}, got {}",
                    crate::config::MAX_QUEUE,
                    self.max_size
                ),
            ));
        }
        if max_wait > Duration::from_secs(3600) {
            return Err(SpecError::at("maxWaitMs", "at most 1h"));
        }
        Ok(tailguard_resilience::admission::QueueConfig {
            max_size: self.max_size,
            max_wait,
        })
    }
}
