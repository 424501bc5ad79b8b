//! Reading a [`LatencyDist`] from a fleet file, a flag or a control request.
//!
//! A plain duration is `fixed`; otherwise a mapping with exactly one key names the shape.
//! Each shape's parameters are checked here, so the error carries the YAML line and field.

use super::{LatencyDist, PercentileTable, Replay};
use crate::limits::MAX_LATENCY;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;
use tailguard_text::duration::Dur;

const SHAPES: &[&str] = &[
    "fixed",
    "uniform",
    "normal",
    "lognormal",
    "percentiles",
    "replay",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUniform {
    min: Dur,
    max: Dur,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNormal {
    mean: Dur,
    sd: Dur,
    min: Option<Dur>,
    max: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLogNormal {
    median: Dur,
    sigma: f64,
    max: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReplay {
    file: Option<PathBuf>,
    values: Option<Vec<Dur>>,
    #[serde(default = "default_unit")]
    unit: String,
}

fn default_unit() -> String {
    "ms".to_owned()
}

impl<'de> Deserialize<'de> for LatencyDist {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let dist = de.deserialize_any(DistVisitor)?;
        within_an_hour(&dist)?;
        Ok(dist)
    }
}

/// Refuses a distribution whose parameters exceed [`MAX_LATENCY`] (a recorded replay is
/// data: its outliers are clamped when drawn instead).
fn within_an_hour<E: de::Error>(dist: &LatencyDist) -> Result<(), E> {
    let params: Vec<Duration> = match dist {
        LatencyDist::Fixed(d) => vec![*d],
        LatencyDist::Uniform { min, max } => vec![*min, *max],
        LatencyDist::Normal { mean, sd, min, max } => [Some(*mean), Some(*sd), Some(*min), *max]
            .into_iter()
            .flatten()
            .collect(),
        LatencyDist::LogNormal { median, max, .. } => {
            [Some(*median), *max].into_iter().flatten().collect()
        }
        LatencyDist::Percentiles(table) => table.points().iter().map(|(_, d)| *d).collect(),
        LatencyDist::Replay(_) => Vec::new(),
    };
    match params.iter().find(|d| **d > MAX_LATENCY) {
        Some(d) => Err(E::custom(format!(
            "latency values must be at most 1h, got {}",
            tailguard_text::duration::format_duration(*d)
        ))),
        None => Ok(()),
    }
}

struct DistVisitor;

impl<'de> Visitor<'de> for DistVisitor {
    type Value = LatencyDist;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as `20ms`, or a mapping with one of the keys ")?;
        f.write_str(&SHAPES.join(", "))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LatencyDist, E> {
        tailguard_text::duration::parse_duration(v)
            .map(LatencyDist::Fixed)
            .map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<LatencyDist, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<LatencyDist, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LatencyDist, A::Error> {
        let Some(shape) = map.next_key::<String>()? else {
            return Err(de::Error::custom("empty latency mapping: name one shape"));
        };
        let dist = match shape.as_str() {
            "fixed" => LatencyDist::Fixed(map.next_value::<Dur>()?.0),
            "uniform" => uniform(map.next_value()?)?,
            "normal" => normal(map.next_value()?)?,
            "lognormal" => lognormal(map.next_value()?)?,
            "percentiles" => percentiles(map.next_value()?)?,
            "replay" => replay(map.next_value()?)?,
            other => return Err(de::Error::unknown_variant(other, SHAPES)),
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "latency has two shapes (`{shape}` and `{extra}`): give exactly one"
            )));
        }
        Ok(dist)
    }
}

fn uniform<E: de::Error>(raw: RawUniform) -> Result<LatencyDist, E> {
    if raw.min.0 > raw.max.0 {
        return Err(E::custom("uniform: min is larger than max"));
    }
    Ok(LatencyDist::Uniform {
        min: raw.min.0,
        max: raw.max.0,
    })
}

fn normal<E: de::Error>(raw: RawNormal) -> Result<LatencyDist, E> {
    let min = raw.min.map_or(Duration::ZERO, |d| d.0);
    let max = raw.max.map(|d| d.0);
    if max.is_some_and(|max| max < min) {
        return Err(E::custom("normal: max is smaller than min"));
    }
    Ok(LatencyDist::Normal {
        mean: raw.mean.0,
        sd: raw.sd.0,
        min,
        max,
    })
}

fn lognormal<E: de::Error>(raw: RawLogNormal) -> Result<LatencyDist, E> {
    if !(raw.sigma.is_finite() && raw.sigma >= 0.0) {
        return Err(E::custom("lognormal: sigma must be a finite number >= 0"));
    }
    if raw.median.0.is_zero() {
        return Err(E::custom("lognormal: median must be above 0"));
    }
    Ok(LatencyDist::LogNormal {
        median: raw.median.0,
        sigma: raw.sigma,
        max: raw.max.map(|d| d.0),
    })
}

fn percentiles<E: de::Error>(raw: BTreeMap<String, Dur>) -> Result<LatencyDist, E> {
    let points = raw
        .iter()
        .map(|(key, d)| PercentileTable::parse_key(key).map(|p| (p, d.0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(E::custom)?;
    PercentileTable::new(points)
        .map(LatencyDist::Percentiles)
        .map_err(E::custom)
}

/// Reads the replay file now, relative to the current directory, so a parsed fleet never
/// holds an unread reference (a scenario embedding the fleet gets the same values).
fn replay<E: de::Error>(raw: RawReplay) -> Result<LatencyDist, E> {
    let replay = match (raw.file, raw.values) {
        (Some(path), None) => Replay::from_file(&path, &raw.unit),
        (None, Some(values)) => Replay::new(values.into_iter().map(|d| d.0).collect(), "values"),
        _ => return Err(E::custom("replay: give exactly one of `file` and `values`")),
    };
    replay.map(LatencyDist::Replay).map_err(E::custom)
}

/// Parses the fleet-file form (`20ms`, `{normal: {mean: 20ms, sd: 2ms}}`), as flags and the
/// control endpoint write it.
impl FromStr for LatencyDist {
    type Err = crate::FleetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::error::from_yaml(text, "latency")
    }
}
