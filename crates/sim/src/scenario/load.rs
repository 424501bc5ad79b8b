//! The `load:` part of a scenario: who sends, how often, for how long.
//!
//! ```yaml
//! load:
//!   loop: open            # open (default): arrivals on a schedule, whatever the responses
//!   arrivals: constant    # or poisson
//!   rate: 1000            # requests per second, all clients together
//!   ramp: {from: 500, over: 30s}   # optional: the rate climbs linearly from 500 to `rate`
//!                         # over 30s, then holds (open loop only; a `from` above `rate` descends)
//!   # stages: '30s:2400,30s:600'   # instead of `rate`: k6's stages, as `tailguard load --stages`
//!   duration: 60s
//!   clients: 1            # independent client-side balancers (e.g. 50 proxies)
//!   method: GET
//!   critical: 0.2         # optional: this share of requests is critical (the rest default),
//!   sheddable: 0.1        #   this share sheddable (admission serves critical first)
//!   request_deadline: 100ms   # optional: each request's own deadline (the proxy's
//!                         #   x-tailguard-timeout-ms): it fails at it, and admission knows it
//!   retry_after: 100ms    # optional (open loop): the caller sends a failed, timed-out or
//!                         #   refused request once more this long after (its class kept)
//! ---
//! load:
//!   loop: closed          # slow_cooker's loop: each worker sends, waits for the response,
//!   workers: 50           # and waits until `interval` after its previous send
//!   interval: 100ms
//!   duration: 60s
//! ```

use serde::Deserialize;
use std::fmt;
use std::time::Duration;
use tailguard_pacing::{Arrivals, Ramp, Stages};
use tailguard_resilience::Method;
use tailguard_text::duration::format_duration;
use tailguard_text::duration::Dur;

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadShape {
    /// Open loop: `rate` requests per second on a schedule; latency counts from the schedule.
    Open {
        /// Constant or Poisson.
        arrivals: Arrivals,
        /// Requests per second, all clients together (after the ramp, if any).
        rate: f64,
        /// A linear climb of the rate at the start: `from` to `rate` over `over`.
        ramp: Option<Ramp>,
    },
    /// Closed loop: `workers` each send, wait for the response, and wait until `interval`
    /// after their previous send (slow_cooker's `-qps` ticker per worker).
    Closed {
        /// Concurrent workers.
        workers: u32,
        /// Shortest time between two sends of a worker.
        interval: Duration,
    },
}

/// The traffic of a scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// Open or closed loop.
    pub shape: LoadShape,
    /// Requests are sent during this long; the run then drains.
    pub duration: Duration,
    /// Independent client-side balancers sharing the traffic (each with its own state).
    pub clients: u32,
    /// The request method (the classifier decides retries from it).
    pub method: Method,
    /// The share of requests marked critical.
    pub critical: f64,
    /// The share of requests marked sheddable.
    pub sheddable: f64,
    /// Each request's own deadline, from its arrival.
    pub request_deadline: Option<Duration>,
    /// Open loop: the caller sends a request that failed once more, this long after.
    pub retry_after: Option<Duration>,
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let length = format_duration(self.duration);
        match self.shape {
            LoadShape::Open {
                arrivals,
                rate,
                ramp: None,
            } => write!(
                f,
                "open loop, {arrivals} arrivals at {rate} req/s for {length}"
            )?,
            LoadShape::Open {
                arrivals,
                rate,
                ramp: Some(Ramp { from, over }),
            } => write!(
                f,
                "open loop, {arrivals} arrivals from {from} to {rate} req/s over {}, then {rate} \
                 req/s, for {length}",
                format_duration(over)
            )?,
            LoadShape::Closed { workers, interval } => write!(
                f,
                "closed loop, {workers} workers each sending at most once per {}, for {length}",
                format_duration(interval)
            )?,
        }
        let s = if self.clients == 1 { "" } else { "s" };
        write!(f, ", {} client{s}, {}", self.clients, self.method)?;
        if self.critical > 0.0 || self.sheddable > 0.0 {
            write!(
                f,
                ", {}% critical, {}% sheddable",
                self.critical * 100.0,
                self.sheddable * 100.0
            )?;
        }
        if let Some(d) = self.request_deadline {
            write!(f, ", each request due within {}", format_duration(d))?;
        }
        match self.retry_after {
            Some(d) => write!(f, ", a failed one sent again {} later", format_duration(d)),
            None => Ok(()),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum LoopName {
    #[default]
    Open,
    Closed,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum ArrivalsName {
    #[default]
    Constant,
    Poisson,
}

/// `load:` as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoadSpec {
    #[serde(default, rename = "loop")]
    kind: LoopName,
    arrivals: Option<ArrivalsName>,
    rate: Option<f64>,
    ramp: Option<RampSpec>,
    workers: Option<u32>,
    interval: Option<Dur>,
    duration: Dur,
    clients: Option<u32>,
    method: Option<String>,
    critical: Option<f64>,
    sheddable: Option<f64>,
    request_deadline: Option<Dur>,
    retry_after: Option<Dur>,
    stages: Option<String>,
}

/// `load.ramp:` as written.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RampSpec {
    from: f64,
    over: Dur,
}

impl RampSpec {
    fn into_ramp(self) -> Result<Ramp, String> {
        if !tailguard_pacing::rate_in_range(self.from) {
            return Err(format!(
                "load: ramp.from must be from {} to {}, got {}",
                tailguard_pacing::MIN_RATE,
                tailguard_pacing::MAX_RATE,
                tailguard_pacing::show_rate(self.from)
            ));
        }
        if self.over.0.is_zero() {
            return Err("load: ramp.over must be longer than zero".into());
        }
        Ok(Ramp {
            from: self.from,
            over: self.over.0,
        })
    }
}

impl LoadSpec {
    /// The typed load and its stages, if any; `Err` names the field that does not fit.
    pub(crate) fn into_load(self) -> Result<(Load, Option<Stages>), String> {
        let stages = match &self.stages {
            None => None,
            Some(_) if self.kind == LoopName::Closed => {
                return Err("load: `stages` needs `loop: open`".into())
            }
            Some(_) if self.rate.is_some() || self.ramp.is_some() => {
                return Err(
                    "load: `stages` and `rate` (or `ramp`) both shape the rate: give one".into(),
                )
            }
            Some(text) => Some(
                text.parse::<Stages>()
                    .map_err(|e| format!("load: stages: {e}"))?,
            ),
        };
        let shape = match (self.kind, &stages) {
            (LoopName::Open, Some(st)) => LoadShape::Open {
                arrivals: match self.arrivals.unwrap_or_default() {
                    ArrivalsName::Constant => Arrivals::Constant,
                    ArrivalsName::Poisson => Arrivals::Poisson,
                },
                rate: st.peak(),
                ramp: None,
            },
            (LoopName::Open, None) => self.open_shape()?,
            (LoopName::Closed, _) => self.closed_shape()?,
        };
        let clients = self.clients.unwrap_or(1);
        if clients == 0 {
            return Err("load: clients must be at least 1".into());
        }
        let share = |v: Option<f64>, key: &str| match v.unwrap_or(0.0) {
            x if (0.0..=1.0).contains(&x) => Ok(x),
            x => Err(format!("load: {key} must be a share from 0 to 1, got {x}")),
        };
        let (critical, sheddable) = (
            share(self.critical, "critical")?,
            share(self.sheddable, "sheddable")?,
        );
        if critical + sheddable > 1.0 {
            return Err(format!(
                "load: critical and sheddable add up to {}, more than every request",
                critical + sheddable
            ));
        }
        if self.request_deadline.is_some_and(|d| d.0.is_zero()) {
            return Err("load: request_deadline must be longer than zero".into());
        }
        if self.retry_after.is_some() && self.kind == LoopName::Closed {
            return Err(
                "load: `retry_after` needs `loop: open` (a worker sends its next request itself)"
                    .into(),
            );
        }
        let load = Load {
            retry_after: self.retry_after.map(|d| d.0),
            critical,
            sheddable,
            request_deadline: self.request_deadline.map(|d| d.0),
            shape,
            duration: self.duration.0,
            clients,
            method: self
                .method
                .as_deref()
                .unwrap_or("GET")
                .parse()
                .unwrap_or(Method::Other),
        };
        Ok((load, stages))
    }

    fn open_shape(&self) -> Result<LoadShape, String> {
        if self.workers.is_some() || self.interval.is_some() {
            return Err("load: `workers` and `interval` need `loop: closed`".into());
        }
        let rate = self.rate.ok_or("load: an open loop needs `rate`")?;
        if !tailguard_pacing::rate_in_range(rate) {
            return Err(format!(
                "load: rate must be from {} to {}, got {}",
                tailguard_pacing::MIN_RATE,
                tailguard_pacing::MAX_RATE,
                tailguard_pacing::show_rate(rate)
            ));
        }
        let arrivals = match self.arrivals.unwrap_or_default() {
            ArrivalsName::Constant => Arrivals::Constant,
            ArrivalsName::Poisson => Arrivals::Poisson,
        };
        let ramp = self.ramp.map(RampSpec::into_ramp).transpose()?;
        Ok(LoadShape::Open {
            arrivals,
            rate,
            ramp,
        })
    }

    fn closed_shape(&self) -> Result<LoadShape, String> {
        if self.rate.is_some() || self.arrivals.is_some() {
            return Err("load: `rate` and `arrivals` need `loop: open`".into());
        }
        if self.ramp.is_some() {
            return Err(
                "load: `ramp` needs `loop: open` (a closed loop has no rate to ramp)".into(),
            );
        }
        let workers = self.workers.ok_or("load: a closed loop needs `workers`")?;
        if workers == 0 {
            return Err("load: workers must be at least 1".into());
        }
        let interval = self.interval.map_or(Duration::ZERO, |d| d.0);
        Ok(LoadShape::Closed { workers, interval })
    }
}
