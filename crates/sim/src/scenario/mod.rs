//! Scenario files: the fleet, the load, and the arms to compare.
//!
//! One format for two engines: `tailguard sim` runs a scenario in virtual time, and
//! `tailguard bench` is meant to run the same file live on loopback.
//!
//! ```yaml
//! name: slow-middle
//! description: one text line for reports
//! seed: 1                      # optional, default 1 (the command line can override it)
//! fleet: slow-middle           # a built-in fleet, a fleet file (relative to this file),
//!                              # or an inline fleet mapping (the fleet file schema)
//! servers: {concurrency: 32}   # optional: requests each endpoint serves at once, others queue
//!                              # (and probe_delay: a load probe's round trip, default 1ms)
//! load: {loop: open, arrivals: constant, rate: 1000, duration: 60s}    # see [`load`]
//! deadline: 1s                 # success within this counts as "within deadline"
//! arms:                        # see [`arm`]
//!   - {name: round-robin, balancer: {kind: round-robin}}
//!   - {name: peak-ewma, balancer: {kind: p2c, load: peak-ewma}}
//! ```
//! Unknown keys are errors; every error names the origin, and the line when there is one.
//!
//! # Example
//! ```
//! use tailguard_sim::Scenario;
//!
//! let s = Scenario::builtin("slow-middle").unwrap();
//! assert_eq!(s.fleet.backends.len(), 11);
//! assert_eq!(s.arms[0].name, "round-robin");
//! let text = "fleet: echo\nload: {rate: 10, duration: 1s}\narms: [{name: rr, balancer: {kind: round-robin}}]";
//! let tiny = Scenario::from_yaml_str(text, "inline").unwrap();
//! assert_eq!(tiny.load.clients, 1);
//! ```

pub mod arm;
mod builtin;
pub mod limits;
pub mod load;
mod overrides;

pub use load::{Load, LoadShape};
pub use overrides::Overrides;

use crate::client::ArmConfig;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tailguard_fleet::{Fleet, FleetError};
use tailguard_text::duration::Dur;
use tailguard_text::yaml::DocumentError;

/// A scenario that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Not YAML, not the scenario schema, or a value that does not fit (its message starts
    /// with where: `scenario.yaml:3:7: arms[1].balancer: ...`).
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// The file could not be read.
    #[error("cannot read scenario {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither a built-in scenario nor a file.
    #[error("`{name}` is neither a scenario file nor a built-in scenario (built-ins: {builtins})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-in names.
        builtins: String,
    },
    /// The fleet named by the scenario.
    #[error(transparent)]
    Fleet(#[from] FleetError),
}

/// Endpoint capacity: the fleet model says how long one request takes; this says how many an
/// endpoint works on at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Servers {
    /// Requests served at once per endpoint (others wait in a FIFO queue); `None`: unlimited.
    pub concurrency: Option<u32>,
    /// A load probe's round trip (a probing balancer's; half to reach the endpoint, half back).
    pub probe_delay: Duration,
    /// A request whose client hung up while it waited in an endpoint's line is served anyway
    /// (`abandoned: serve`: a server that does not notice, the work the metastable failure is
    /// made of), rather than skipped (`skip`, the default).
    pub serve_abandoned: bool,
}

/// A load probe's round trip unless the scenario says otherwise: a small RPC on a data centre
/// network.
pub const DEFAULT_PROBE_DELAY: Duration = Duration::from_millis(1);

/// A typed scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// One line for reports.
    pub description: String,
    /// Seeds arrivals, endpoint behaviour and balancer choices.
    pub seed: u64,
    /// The endpoints.
    pub fleet: Fleet,
    /// Endpoint capacity.
    pub servers: Servers,
    /// The traffic.
    pub load: Load,
    /// The offered rate's stages, in place of `load`'s rate (which is then their peak).
    pub stages: Option<tailguard_pacing::Stages>,
    /// Success within this counts as success within the deadline.
    pub deadline: Duration,
    /// The arms to compare, in report order.
    pub arms: Vec<ArmConfig>,
    /// What the backends serve, for the overload figures (`None`: not an overload scenario).
    pub overload: Option<crate::results::Overload>,
}

/// `overload:` as written: the fleet's capacity and its unloaded p99.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OverloadSpec {
    capacity: f64,
    unloaded_p99: Dur,
}

/// `fleet:` as written: a name (built-in or file) or an inline fleet.
#[derive(Clone, Debug)]
enum FleetRef {
    Name(String),
    Inline(Box<Fleet>),
}

impl<'de> Deserialize<'de> for FleetRef {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(FleetRefVisitor)
    }
}

struct FleetRefVisitor;

impl<'de> Visitor<'de> for FleetRefVisitor {
    type Value = FleetRef;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a built-in fleet name, a fleet file, or a fleet mapping")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<FleetRef, E> {
        Ok(FleetRef::Name(v.to_owned()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FleetRef, A::Error> {
        let fleet = Fleet::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(FleetRef::Inline(Box::new(fleet)))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServersSpec {
    concurrency: Option<u32>,
    probe_delay: Option<Dur>,
    abandoned: Option<AbandonedName>,
}

/// `servers.abandoned:` as written.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum AbandonedName {
    Skip,
    Serve,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioSpec {
    name: Option<String>,
    #[serde(default)]
    description: String,
    seed: Option<u64>,
    fleet: FleetRef,
    servers: Option<ServersSpec>,
    load: load::LoadSpec,
    deadline: Option<Dur>,
    arms: Vec<arm::ArmSpec>,
    overload: Option<OverloadSpec>,
}

impl Scenario {
    /// The names of the built-in scenarios.
    pub fn builtin_names() -> &'static [&'static str] {
        builtin::NAMES
    }

    /// A built-in scenario.
    pub fn builtin(name: &str) -> Option<Scenario> {
        Scenario::from_yaml_str(builtin::yaml(name)?, name).ok()
    }

    /// The YAML text of a built-in scenario (a starting point for your own).
    pub fn builtin_yaml(name: &str) -> Option<&'static str> {
        builtin::yaml(name)
    }

    /// A built-in name, else a scenario file.
    ///
    /// # Errors
    /// [`ScenarioError::Unknown`] when `name` is neither; else as [`Scenario::from_file`].
    pub fn load(name: &str) -> Result<Scenario, ScenarioError> {
        if let Some(text) = builtin::yaml(name) {
            return Scenario::from_yaml_str(text, name);
        }
        let path = Path::new(name);
        if !path.exists() {
            return Err(ScenarioError::Unknown {
                name: name.to_owned(),
                builtins: builtin::NAMES.join(", "),
            });
        }
        Scenario::from_file(path)
    }

    /// Reads a scenario file; a fleet file it names is found relative to it.
    ///
    /// # Errors
    /// [`ScenarioError::Read`], or as [`Scenario::from_yaml_str`].
    pub fn from_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = tailguard_text::yaml::read_file(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        let origin = path.display().to_string();
        parse(&text, &origin, path.parent())
    }

    /// Parses scenario YAML; `origin` starts every error message. Fleet files are looked up
    /// relative to the working directory.
    ///
    /// # Errors
    /// [`ScenarioError`] naming the origin, line and field.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        parse(text, origin, None)
    }
}

fn parse(text: &str, origin: &str, dir: Option<&Path>) -> Result<Scenario, ScenarioError> {
    let spec: ScenarioSpec = tailguard_text::yaml::from_yaml(text, origin)?;
    let invalid =
        |message: String| ScenarioError::from(DocumentError::invalid(origin.to_owned(), message));
    let fleet = match spec.fleet {
        FleetRef::Inline(f) => *f,
        FleetRef::Name(name) => match Fleet::builtin(&name) {
            Some(f) => f,
            None => Fleet::from_file(&dir.unwrap_or(Path::new("")).join(&name))?,
        },
    };
    if spec.arms.is_empty() {
        return Err(invalid("arms: a scenario needs at least one arm".into()));
    }
    let mut arms = Vec::with_capacity(spec.arms.len());
    for a in spec.arms {
        let arm = a.into_config().map_err(invalid)?;
        if arms.iter().any(|b: &ArmConfig| b.name == arm.name) {
            return Err(invalid(format!("arms: two arms are named `{}`", arm.name)));
        }
        arms.push(arm);
    }
    let concurrency = spec.servers.as_ref().and_then(|s| s.concurrency);
    if concurrency == Some(0) {
        return Err(invalid("servers: concurrency must be at least 1".into()));
    }
    let probe_delay = spec
        .servers
        .as_ref()
        .and_then(|s| s.probe_delay)
        .map_or(DEFAULT_PROBE_DELAY, |d| d.0);
    let (load, stages) = spec.load.into_load().map_err(invalid)?;
    let overload = match spec.overload {
        None => None,
        Some(o) if !(o.capacity.is_finite() && o.capacity > 0.0) => {
            return Err(invalid(format!(
                "overload: capacity must be a positive rate (req/s), got {}",
                o.capacity
            )))
        }
        Some(o) if o.unloaded_p99.0.is_zero() => {
            return Err(invalid("overload: unloaded_p99 must be above zero".into()))
        }
        Some(o) => Some(crate::results::Overload {
            capacity: o.capacity,
            unloaded_p99: o.unloaded_p99.0,
        }),
    };
    let scenario = Scenario {
        name: spec.name.unwrap_or_else(|| origin.to_owned()),
        description: spec.description,
        seed: spec.seed.unwrap_or(1),
        fleet,
        servers: Servers {
            concurrency,
            probe_delay,
            serve_abandoned: spec.servers.as_ref().and_then(|s| s.abandoned)
                == Some(AbandonedName::Serve),
        },
        load,
        stages,
        deadline: spec.deadline.map_or(Duration::from_secs(1), |d| d.0),
        arms,
        overload,
    };
    let backends = scenario.fleet.backends.len();
    limits::check(scenario.arms.len(), backends, &scenario.load).map_err(invalid)?;
    Ok(scenario)
}

#[cfg(test)]
mod tests;
