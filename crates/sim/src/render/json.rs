//! The JSON report: `{"scenario", "seed", "load", "deadline_us", "arms": [...]}`, each arm with
//! `name`, `latency_us` {p50, p90, p95, p99, p999, p9999, max}, `success_rate`,
//! `success_within_deadline`, `achieved_rate` and `endpoint_share` (endpoint name to share of
//! attempts, in fleet order), plus what retries, hedging and accrual did; an overload
//! scenario's arms add `goodput_ratio`, `critical_success`, `recovery_s` (null: never) and
//! `admitted_p99_us` (the requests sent that ended during the overload) and `refused_after`
//! (refusals after the recovery),
//! and the report `overload: {capacity, unloaded_p99_us, from_s, to_s}`.

use super::Report;
use crate::ArmResult;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tailguard_histogram::duration_us;

#[derive(Serialize)]
struct JsonReport<'a> {
    scenario: &'a str,
    description: &'a str,
    seed: u64,
    load: &'a str,
    deadline_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    overload: Option<JsonOverload>,
    arms: Vec<JsonArm<'a>>,
}

#[derive(Serialize)]
struct JsonOverload {
    capacity: f64,
    unloaded_p99_us: u64,
    from_s: usize,
    to_s: usize,
}

#[derive(Serialize)]
struct LatencyUs {
    p50: u64,
    p90: u64,
    p95: u64,
    p99: u64,
    p999: u64,
    p9999: u64,
    max: u64,
}

#[derive(Serialize)]
struct JsonArm<'a> {
    name: &'a str,
    description: &'a str,
    requests: u64,
    latency_us: LatencyUs,
    success_rate: f64,
    success_within_deadline: f64,
    achieved_rate: f64,
    endpoint_share: Shares<'a>,
    attempts: u64,
    retries: u64,
    retries_refused: u64,
    hedges: u64,
    probes: u64,
    probes_distrusted: u64,
    accrual_trips: u64,
    endpoints_per_client: f64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    overload: Option<ArmOverload>,
}

#[derive(Serialize)]
struct ArmOverload {
    goodput_ratio: f64,
    critical_success: f64,
    recovery_s: Option<usize>,
    admitted_p99_us: u64,
    refused_after: u64,
}

/// Endpoint name to share, serialized as an object in fleet order.
struct Shares<'a> {
    names: &'a [String],
    shares: Vec<f64>,
}

impl Serialize for Shares<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.names.len()))?;
        for (name, share) in self.names.iter().zip(&self.shares) {
            map.serialize_entry(name, share)?;
        }
        map.end()
    }
}

fn arm<'a>(report: &'a Report, a: &'a ArmResult) -> JsonArm<'a> {
    let p = a.latency.percentiles();
    JsonArm {
        name: &a.name,
        description: &a.description,
        requests: a.requests,
        latency_us: LatencyUs {
            p50: p.p50,
            p90: p.p90,
            p95: p.p95,
            p99: p.p99,
            p999: p.p999,
            p9999: p.p9999,
            max: p.max,
        },
        success_rate: a.success_rate(),
        success_within_deadline: a.within_deadline_rate(),
        achieved_rate: a.achieved_rate(),
        endpoint_share: Shares {
            names: &report.endpoints,
            shares: a.shares(),
        },
        attempts: a.attempts.iter().sum(),
        retries: a.stats.retries,
        retries_refused: a.stats.retries_refused,
        hedges: a.stats.hedges,
        probes: a.stats.probes,
        probes_distrusted: a.stats.probes_distrusted,
        accrual_trips: a.stats.trips,
        endpoints_per_client: a.endpoints_per_client,
        overload: report.overload.map(|(o, window)| {
            let f = a.overload(&o, window);
            ArmOverload {
                goodput_ratio: f.goodput_ratio,
                critical_success: f.critical_success,
                recovery_s: f.recovery_s,
                admitted_p99_us: duration_us(f.admitted_p99),
                refused_after: f.refused_after,
            }
        }),
    }
}

/// The report as pretty-printed JSON, ending with a newline.
pub fn json(report: &Report) -> String {
    let doc = JsonReport {
        scenario: &report.scenario,
        description: &report.description,
        seed: report.seed,
        load: &report.load,
        deadline_us: duration_us(report.deadline),
        overload: report.overload.map(|(o, (from_s, to_s))| JsonOverload {
            capacity: o.capacity,
            unloaded_p99_us: duration_us(o.unloaded_p99),
            from_s,
            to_s,
        }),
        arms: report.arms.iter().map(|a| arm(report, a)).collect(),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("plain data serializes");
    text.push('\n');
    text
}
