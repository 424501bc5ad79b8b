//! Seed 001, Nagle's algorithm: small responses at low and high rates from a backend that
//! writes each response in two parts, with TCP_NODELAY on (the default everywhere in
//! tailguard) and off. With Nagle on, the second part waits for the client's delayed ACK
//! (tens of milliseconds) whenever nothing else is in flight: a cliff at low rates that busy
//! traffic hides.
//!
//! Two shapes, two runs. HTTP/1.1 on a pool of four connections: a connection reused within
//! the delayed-ACK time waits for it, so the cliff is at the *high* rates (Linux ACKs at once
//! on a connection idle longer). gRPC on one multiplexed HTTP/2 connection, as in the seed: the
//! held-back part of a response waits until the client sends again (its next call carries the
//! ACK), at most the delayed-ACK time: long at *low* rates, negligible at high ones.

use crate::error::BenchError;
use crate::live::{self, ArmPlan, FleetSpec, Path, Runtimes, Traffic};
use crate::options::Options;
use crate::run::Run;
use std::time::Duration;
use tailguard_fleet::Fleet;

/// A small keep-alive pool, as a client library keeps per backend. A connection reused within
/// the delayed-ACK time (about 40 ms) waits for it with Nagle on; one idle longer does not.
pub(crate) const CONNECTIONS: usize = 4;

/// The seed's rates.
pub(crate) const RATES: [f64; 4] = [10.0, 100.0, 1_000.0, 10_000.0];

/// gRPC calls in flight at most on the one connection.
pub(crate) const STREAMS: usize = 100;

pub(crate) fn run(opts: &Options, rts: &Runtimes, run: &mut Run<'_>) -> Result<(), BenchError> {
    let rates = rates(opts)?;
    let arms = arms();
    let len = opts.duration.unwrap_or(Duration::from_secs(5));
    run.report.load = describe_load(&rates, len);
    run.console
        .plan(len.as_secs().saturating_mul(4 * rates.len() as u64));
    for (grpc, rate) in [false, true]
        .into_iter()
        .flat_map(|g| rates.iter().map(move |r| (g, *r)))
    {
        for (name, fleet) in &arms {
            let plan = ArmPlan {
                name: (*name).to_owned(),
                group: if grpc {
                    format!("gRPC {rate} req/s")
                } else {
                    format!("{rate} req/s")
                },
                path: Path::ClientRoundRobin,
                fleet,
                traffic: traffic(opts, grpc, rate, len),
                prefix: String::new(),
                overload: None,
            };
            if run.halt() {
                return Ok(());
            }
            if run.record(live::run_arm(rts, run.console, &plan)?) {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The rates to run (`--rates` or the seed's), each checked to be one the pacer can keep.
fn rates(opts: &Options) -> Result<Vec<f64>, BenchError> {
    let rates = opts.rates.clone().unwrap_or_else(|| RATES.to_vec());
    if let Some(bad) = rates.iter().find(|r| !tailguard_pacing::rate_in_range(**r)) {
        return Err(BenchError::Invalid(format!(
            "--rates: each rate must be from {} to {}, got {}",
            tailguard_pacing::MIN_RATE,
            tailguard_pacing::MAX_RATE,
            tailguard_pacing::show_rate(*bad)
        )));
    }
    Ok(rates)
}

/// The two arms: the same small-body backend with TCP_NODELAY on and off.
fn arms() -> [(&'static str, FleetSpec); 2] {
    // A small body after the headers: the second write Nagle holds back.
    let echo = Fleet::from_yaml_str(
        "backends: [{name: small, latency: 0s, body: {size: 200}}]",
        "nagle",
    )
    .expect("the nagle fleet is valid");
    [
        (
            "nodelay",
            FleetSpec {
                fleet: echo.clone(),
                nagle: false,
                serve_abandoned: false,
            },
        ),
        (
            "nagle",
            FleetSpec {
                fleet: echo,
                nagle: true,
                serve_abandoned: false,
            },
        ),
    ]
}

/// The report's description of the load.
fn describe_load(rates: &[f64], len: Duration) -> String {
    format!(
        "open loop at {} req/s, {}s each, one backend writing responses in two parts; HTTP/1.1 \
         on {CONNECTIONS} connections, then gRPC on one HTTP/2 connection",
        rates
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        len.as_secs_f64()
    )
}

/// One arm's traffic: `rate` for `len`, over the HTTP/1.1 pool or as gRPC calls.
fn traffic(opts: &Options, grpc: bool, rate: f64, len: Duration) -> Traffic {
    Traffic {
        rate,
        closed_interval: None,
        concurrency: if grpc { STREAMS } else { CONNECTIONS },
        duration: len,
        arrivals: tailguard_pacing::Arrivals::Constant,
        ramp: None,
        method: "GET".to_owned(),
        timeout: Duration::from_secs(10),
        interval: opts.interval.unwrap_or(len),
        deadline: Duration::from_secs(1),
        unit: opts.unit,
        // A path with Nagle on may fall far behind: bound the wait.
        drain_limit: Some(Duration::from_secs(3)),
        grpc,
        clients: 1,
        callers: Default::default(),
    }
}
