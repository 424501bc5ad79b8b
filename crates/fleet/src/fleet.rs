//! A fleet: the backends one `tailguard serve` process runs, or one simulation models.
//!
//! The file format (YAML; a scenario embeds the same mapping under `fleet:`):
//! ```yaml
//! seed: 7                      # optional, default 0: seeds every backend's RNG
//! backends:
//!   - name: fast               # optional, default b<index>
//!     latency: 10ms            # see LatencyDist; default 0s
//!   - name: flaky
//!     replicas: 3              # optional: flaky-0, flaky-1, flaky-2
//!     latency: {normal: {mean: 167ms, sd: 5ms, max: 200ms}}
//!     fail: {error: 0.1, status: 503, close: 0.01, reset: 0.01}
//!     schedule: ["from 15s to 45s latency x10", "every 10s pause 5s"]
//!     body: echo               # name (default), echo, {text: ...} or {size: BYTES}
//!   - name: busy
//!     latency: 20ms            # each request's service time, once a worker takes it
//!     capacity: {workers: 8, queue: 64, status: 503}   # or just 8: see `capacity`
//!     schedule: ["from 20s to 40s capacity x0.25"]    # a noisy neighbour
//! ```
//! Unknown keys are errors, and every error names the file, line and field.
//!
//! # Example
//! ```
//! use tailguard_fleet::Fleet;
//! let fleet = Fleet::from_yaml_str("backends: [{latency: 5ms}, {latency: 50ms}]", "inline").unwrap();
//! assert_eq!(fleet.backends[1].name, "b1");
//! let err = Fleet::from_yaml_str("backends: [{latency: 5 ms}, {latncy: 1s}]", "f.yaml").unwrap_err();
//! assert!(err.to_string().starts_with("f.yaml:1:"), "{err}");
//! ```

use crate::error::{from_yaml, FleetError};
use crate::{BackendSpec, Body, Capacity, Effect, Failure, LatencyDist, Schedule};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// Backends and the seed their RNGs derive from.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "RawFleet")]
pub struct Fleet {
    /// Seeds every backend's RNG (see [`Fleet::backend_seed`]).
    pub seed: u64,
    /// The backends, in file order (replicas expanded).
    pub backends: Vec<BackendSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFleet {
    #[serde(default)]
    seed: u64,
    backends: Vec<RawBackend>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBackend {
    name: Option<String>,
    #[serde(default)]
    latency: LatencyDist,
    #[serde(default)]
    fail: Option<Failure>,
    #[serde(default)]
    schedule: Schedule,
    #[serde(default)]
    body: Body,
    #[serde(default = "one")]
    replicas: usize,
    #[serde(default)]
    capacity: Option<Capacity>,
}

fn one() -> usize {
    1
}

/// The most backends a fleet holds, replicas counted: one `serve` process listens on a port
/// each, and a simulation keeps state per client and backend.
pub const MAX_BACKENDS: usize = 10_000;

impl TryFrom<RawFleet> for Fleet {
    type Error = String;

    fn try_from(raw: RawFleet) -> Result<Self, Self::Error> {
        if raw.backends.is_empty() {
            return Err("backends: a fleet needs at least one backend".to_owned());
        }
        let mut backends = Vec::new();
        for (i, b) in raw.backends.into_iter().enumerate() {
            if b.replicas == 0 {
                return Err(format!("backends[{i}].replicas: must be at least 1"));
            }
            if b.replicas > MAX_BACKENDS - backends.len() {
                return Err(format!(
                    "backends[{i}].replicas: a fleet has at most {MAX_BACKENDS} backends"
                ));
            }
            let rescales = b
                .schedule
                .faults()
                .iter()
                .any(|f| matches!(f.effect, Effect::CapacityScale(_) | Effect::CapacitySet(_)));
            if rescales && b.capacity.is_none() {
                return Err(format!(
                    "backends[{i}].schedule: a `capacity` fault needs the backend's `capacity`"
                ));
            }
            let base = b.name.clone();
            for r in 0..b.replicas {
                let name = match (&base, b.replicas) {
                    (Some(n), 1) => n.clone(),
                    (Some(n), _) => format!("{n}-{r}"),
                    (None, _) => format!("b{}", backends.len()),
                };
                backends.push(BackendSpec {
                    name,
                    latency: b.latency.clone(),
                    failure: b.fail.unwrap_or_default(),
                    schedule: b.schedule.clone(),
                    body: b.body.clone(),
                    capacity: b.capacity,
                });
            }
        }
        let mut seen = HashSet::new();
        if let Some(dup) = backends.iter().find(|b| !seen.insert(b.name.as_str())) {
            return Err(format!("backends: two backends are named `{}`", dup.name));
        }
        Ok(Fleet {
            seed: raw.seed,
            backends,
        })
    }
}

impl Fleet {
    /// A built-in fleet: `add-steps`, `slow-middle`, `echo` or `gc-pause`.
    pub fn builtin(name: &str) -> Option<Fleet> {
        let text = crate::builtin::yaml(name)?;
        Fleet::from_yaml_str(text, name).ok()
    }

    /// The names [`Fleet::builtin`] knows.
    pub fn builtin_names() -> &'static [&'static str] {
        crate::builtin::NAMES
    }

    /// Parses fleet YAML; `origin` (usually the file name) starts every error message.
    ///
    /// # Errors
    /// [`FleetError::Document`] naming origin, line, column and field.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Fleet, FleetError> {
        from_yaml(text, origin)
    }

    /// Reads and parses a fleet file.
    ///
    /// # Errors
    /// [`FleetError::Read`] when the file cannot be read, else as [`Fleet::from_yaml_str`].
    pub fn from_file(path: &Path) -> Result<Fleet, FleetError> {
        let text = tailguard_text::yaml::read_file(path).map_err(|source| FleetError::Read {
            path: path.to_owned(),
            source,
        })?;
        Fleet::from_yaml_str(&text, &path.display().to_string())
    }

    /// A built-in name, or else a file path (what `tailguard serve --fleet` accepts).
    ///
    /// # Errors
    /// [`FleetError::Unknown`] when `name` is neither; else as [`Fleet::from_file`].
    pub fn load(name: &str) -> Result<Fleet, FleetError> {
        if let Some(fleet) = Fleet::builtin(name) {
            return Ok(fleet);
        }
        let path = Path::new(name);
        if !path.exists() {
            return Err(FleetError::Unknown {
                name: name.to_owned(),
                builtins: Fleet::builtin_names().join(", "),
            });
        }
        Fleet::from_file(path)
    }

    /// A fleet of one backend.
    pub fn single(backend: BackendSpec, seed: u64) -> Fleet {
        Fleet {
            seed,
            backends: vec![backend],
        }
    }

    /// The RNG seed of backend `index`: `seed` and `index` mixed by SplitMix64, so backends
    /// draw independent streams and a fleet reproduces run to run.
    pub fn backend_seed(&self, index: usize) -> u64 {
        derive_seed(self.seed, index as u64)
    }
}

/// A child seed: `seed` and `index` mixed by SplitMix64 (for per-backend, per-connection
/// streams that do not overlap in practice).
pub fn derive_seed(seed: u64, index: u64) -> u64 {
    splitmix64(seed ^ splitmix64(index))
}

/// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
