//! Seed 003, proxy overhead: one zero-latency backend; each path's maximum closed-loop rate
//! (direct, tailguard, and HAProxy and nginx when installed), then every path at 75% of the
//! lowest maximum, open loop: latency, proxy CPU per request and proxy memory.

use crate::live::{self, ArmPlan, FleetSpec, Path, Runtimes, Traffic};
use crate::peers::Peer;
use crate::{BenchError, Options, Run};
use std::time::Duration;
use tailguard_fleet::Fleet;

/// Connections, as in the seed's fortio runs.
const CONNECTIONS: usize = 32;

pub(crate) fn run(opts: &Options, rts: &Runtimes, run: &mut Run<'_>) -> Result<(), BenchError> {
    let fleet = FleetSpec {
        fleet: Fleet::builtin("echo").expect("echo is built in"),
        nagle: false,
    };
    let mut paths: Vec<(String, Path)> = vec![("direct".to_owned(), Path::ClientRoundRobin)];
    paths.push(match &opts.proxy_exe {
        Some(exe) => ("tailguard".to_owned(), Path::ProxyProcess(exe.clone())),
        None => {
            let service = tailguard_proxy::config::ServiceConfig::new("bench", Vec::new());
            ("tailguard".to_owned(), Path::Proxy(Box::new(service.arm)))
        }
    });
    if opts.proxy_exe.is_none() {
        run.report.notes.push(
            "tailguard ran in this process: its CPU is its runtime thread's, its memory is not \
             measured separately"
                .to_owned(),
        );
    }
    for peer in Peer::ALL {
        if !opts.peers {
            break;
        }
        if peer.installed().is_some() {
            paths.push((peer.name().to_owned(), Path::Peer(peer)));
        } else {
            run.report.notes.push(format!(
                "{} is not installed (apt-get install -y {}): no {} arm",
                peer.name(),
                peer.name(),
                peer.name()
            ));
        }
    }
    let max_len = opts.duration.unwrap_or(Duration::from_secs(10));
    let fixed_len = opts.duration.unwrap_or(Duration::from_secs(20));
    let base = Traffic {
        rate: 0.0,
        closed_interval: None,
        concurrency: CONNECTIONS,
        duration: max_len,
        arrivals: tailguard_pacing::Arrivals::Constant,
        method: "GET".to_owned(),
        timeout: Duration::from_secs(10),
        interval: opts.interval.unwrap_or(Duration::from_secs(5)),
        deadline: Duration::from_secs(1),
        unit: opts.unit,
        drain_limit: Some(Duration::from_secs(15)),
    };
    run.report.load = format!(
        "{CONNECTIONS} connections; maximum rate (closed loop) for {}s per path, then 75% of \
         the lowest maximum (open loop) for {}s per path",
        max_len.as_secs_f64(),
        fixed_len.as_secs_f64()
    );
    run.console
        .plan((max_len.as_secs() + fixed_len.as_secs()) * paths.len() as u64);
    let mut lowest = f64::INFINITY;
    for (name, path) in &paths {
        let plan = ArmPlan {
            name: name.clone(),
            group: "max rate".to_owned(),
            path: path.clone(),
            fleet: &fleet,
            traffic: base.clone(),
        };
        if run.halt() {
            return Ok(());
        }
        let done = live::run_arm(rts, run.console, &plan)?;
        lowest = lowest.min(done.arm.achieved_rate);
        if run.record(done) {
            return Ok(());
        }
    }
    let fixed = (0.75 * lowest).floor().max(1.0);
    for (name, path) in &paths {
        let plan = ArmPlan {
            name: name.clone(),
            group: format!("fixed {fixed} req/s"),
            path: path.clone(),
            fleet: &fleet,
            traffic: Traffic {
                rate: fixed,
                duration: fixed_len,
                ..base.clone()
            },
        };
        if run.halt() {
            break;
        }
        if run.record(live::run_arm(rts, run.console, &plan)?) {
            break;
        }
    }
    Ok(())
}
