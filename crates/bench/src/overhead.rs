//! Seed 003, proxy overhead: one zero-latency backend; each path's maximum closed-loop rate
//! (direct, tailguard, and HAProxy and nginx when installed), then every path at 75% of the
//! lowest maximum, open loop: latency, proxy CPU per request and proxy memory.

use crate::error::BenchError;
use crate::live::{self, ArmPlan, FleetSpec, Path, Runtimes, Traffic};
use crate::options::Options;
use crate::peers::Peer;
use crate::results::ArmRun;
use crate::run::Run;
use std::time::Duration;
use tailguard_fleet::Fleet;

/// Connections, as in the seed's fortio runs.
const CONNECTIONS: usize = 32;

pub(crate) fn run(opts: &Options, rts: &Runtimes, run: &mut Run<'_>) -> Result<(), BenchError> {
    let fleet = FleetSpec {
        fleet: Fleet::builtin("echo").expect("echo is built in"),
        nagle: false,
        serve_abandoned: false,
    };
    let paths = paths(opts, run);
    let max_len = opts.duration.unwrap_or(Duration::from_secs(10));
    let fixed_len = opts.duration.unwrap_or(Duration::from_secs(20));
    let base = max_rate_traffic(opts, max_len);
    run.report.load = describe_load(opts.grpc, max_len, fixed_len);
    let rounds = opts.rounds.unwrap_or(DEFAULT_ROUNDS).max(1);
    if rounds > 1 {
        run.report.notes.push(format!(
            "each row is the median of {rounds} interleaved rounds (max rate: by req/s; fixed \
             rate: by p99), so a noisy moment of the machine does not decide a comparison"
        ));
    }
    run.console.plan(
        (max_len.as_secs().saturating_add(fixed_len.as_secs()))
            .saturating_mul((paths.len() * rounds) as u64),
    );
    let rounds = Rounds {
        rts,
        fleet: &fleet,
        paths: &paths,
        count: rounds,
    };
    let pinned = rts.pinned();
    run.report.notes.extend(pinned.clone());
    let Some(max) = rounds.phase(run, "max rate", &base, BY_RATE)? else {
        return Ok(());
    };
    if pinned.is_some() {
        run.report.notes.extend(held_by_the_load_side(&paths, &max));
    }
    let lowest = max.iter().fold(f64::INFINITY, |m, &r| m.min(r));
    let fixed = (0.75 * lowest).floor().max(1.0);
    let traffic = Traffic {
        rate: fixed,
        duration: fixed_len,
        ..base.clone()
    };
    let group = format!("fixed {fixed} req/s");
    rounds.phase(run, &group, &traffic, BY_P99)?;
    Ok(())
}

/// The paths to compare: direct, tailguard, and each peer proxy that is installed; notes what
/// the report must say about them.
fn paths(opts: &Options, run: &mut Run<'_>) -> Vec<(String, Path)> {
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
    paths
}

/// The maximum-rate phase's traffic (closed loop, as fast as the path answers); the fixed-rate
/// phase is the same at a rate.
fn max_rate_traffic(opts: &Options, duration: Duration) -> Traffic {
    Traffic {
        rate: 0.0,
        closed_interval: None,
        concurrency: CONNECTIONS,
        duration,
        arrivals: tailguard_pacing::Arrivals::Constant,
        ramp: None,
        method: "GET".to_owned(),
        timeout: Duration::from_secs(10),
        interval: opts.interval.unwrap_or(Duration::from_secs(5)),
        deadline: Duration::from_secs(1),
        unit: opts.unit,
        drain_limit: Some(Duration::from_secs(15)),
        grpc: opts.grpc,
        clients: 1,
        callers: Default::default(),
    }
}

/// The report's description of the load of both phases.
fn describe_load(grpc: bool, max_len: Duration, fixed_len: Duration) -> String {
    let carrier = if grpc {
        format!(
            "gRPC ping (tailguard.serve.v1.Ping/Ping), {CONNECTIONS} calls in flight on one \
             HTTP/2 connection"
        )
    } else {
        format!("{CONNECTIONS} connections")
    };
    format!(
        "{carrier}; maximum rate (closed loop) for {}s per path, then 75% of the lowest maximum \
         (open loop) for {}s per path",
        max_len.as_secs_f64(),
        fixed_len.as_secs_f64()
    )
}

/// Rounds of the seed's runs: every round has an arm of each path, interleaved.
const DEFAULT_ROUNDS: usize = 3;

/// How a phase picks each path's median run, and what its notes call the figure.
#[derive(Clone, Copy)]
struct Median {
    what: &'static str,
    key: fn(&ArmRun) -> f64,
}

const BY_RATE: Median = Median {
    what: "req/s",
    key: |a| a.achieved_rate,
};

const BY_P99: Median = Median {
    what: "p99 µs",
    key: |a| a.latency_us.p99 as f64,
};

/// The paths of one run and how many interleaved rounds each phase has.
struct Rounds<'a> {
    rts: &'a Runtimes,
    fleet: &'a FleetSpec,
    paths: &'a [(String, Path)],
    count: usize,
}

impl Rounds<'_> {
    /// Runs the rounds of one phase and records each path's median run. Returns each recorded
    /// run's achieved rate, or `None` when Ctrl-C stopped the phase (what was measured is
    /// recorded).
    fn phase(
        &self,
        run: &mut Run<'_>,
        group: &str,
        traffic: &Traffic,
        median: Median,
    ) -> Result<Option<Vec<f64>>, BenchError> {
        let mut runs: Vec<Vec<live::Outcome>> = self.paths.iter().map(|_| Vec::new()).collect();
        let mut stopped = false;
        'rounds: for _ in 0..self.count {
            for ((name, path), done) in self.paths.iter().zip(runs.iter_mut()) {
                if run.stopped() {
                    stopped = true;
                    break 'rounds;
                }
                let plan = ArmPlan {
                    name: name.clone(),
                    group: group.to_owned(),
                    path: path.clone(),
                    fleet: self.fleet,
                    traffic: traffic.clone(),
                    prefix: String::new(),
                    overload: None,
                };
                let outcome = live::run_arm(self.rts, run.console, &plan)?;
                let interrupted = outcome.interrupted;
                done.push(outcome);
                if interrupted {
                    stopped = true;
                    break 'rounds;
                }
            }
        }
        let by_round: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| r.iter().map(|o| (median.key)(&o.arm)).collect())
            .collect();
        let mut rates = Vec::new();
        let mut spread = Vec::new();
        for ((runs, values), (name, _)) in runs.into_iter().zip(&by_round).zip(self.paths) {
            if values.len() > 1 {
                let values: Vec<String> = values.iter().map(|v| format!("{v:.0}")).collect();
                spread.push(format!("{name} {}", values.join(" / ")));
            }
            if let Some(middle) = median_by(runs, median.key) {
                rates.push(middle.arm.achieved_rate);
                if run.record(middle) {
                    stopped = true;
                }
            }
        }
        if !spread.is_empty() {
            run.report.notes.push(format!(
                "{group}, {} per round: {}",
                median.what,
                spread.join("; ")
            ));
        }
        run.report
            .notes
            .extend(round_by_round(group, median, self.paths, &by_round));
        if stopped || run.halt() {
            return Ok(None);
        }
        Ok(Some(rates))
    }
}

/// tailguard's figure over each peer's, round by round: the two runs of a round are minutes
/// apart at most, so a ratio within a round is spared the machine's slower and faster spells
/// that a ratio of the medians (runs from different rounds) is not. `None` without tailguard,
/// a peer or two rounds.
fn round_by_round(
    group: &str,
    median: Median,
    paths: &[(String, Path)],
    by_round: &[Vec<f64>],
) -> Option<String> {
    let ours = paths.iter().position(|(name, _)| name == "tailguard")?;
    let mut peers = Vec::new();
    for ((name, path), theirs) in paths.iter().zip(by_round) {
        if !matches!(path, Path::Peer(_)) {
            continue;
        }
        let mut ratios: Vec<f64> = by_round[ours]
            .iter()
            .zip(theirs)
            .filter(|&(_, &t)| t > 0.0)
            .map(|(&o, &t)| o / t)
            .collect();
        if ratios.len() < 2 {
            continue;
        }
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        ratios.sort_by(f64::total_cmp);
        let middle = ratios[(ratios.len() - 1) / 2];
        peers.push(format!("{name} {} (median {middle:.2})", each.join(" / ")));
    }
    (!peers.is_empty()).then(|| {
        format!(
            "{group}, tailguard's {} over each peer's within each round: {}",
            median.what,
            peers.join("; ")
        )
    })
}

/// A proxy whose maximum came this close to the direct path's may have been held by the load
/// generator's and backend's CPUs rather than by its own.
const CEILING: f64 = 0.95;

/// Pinned, the direct path's maximum is what the load side can drive: a note for each proxy
/// that came within [`CEILING`] of it, whose own maximum is then not known.
fn held_by_the_load_side(paths: &[(String, Path)], max: &[f64]) -> Vec<String> {
    let Some((&direct, proxies)) = max.split_first() else {
        return Vec::new();
    };
    paths
        .iter()
        .skip(1)
        .zip(proxies)
        .filter(|&(_, &rate)| rate >= CEILING * direct)
        .map(|((name, _), rate)| {
            format!(
                "{name}'s maximum ({rate:.0} req/s) is within {:.0}% of the direct path's \
                 ({direct:.0}): the load generator's and backend's CPUs may have held it, not \
                 the proxy's",
                (1.0 - CEILING) * 100.0
            )
        })
        .collect()
}

/// The run with the median `key` (the lower middle one of an even count).
fn median_by(mut runs: Vec<live::Outcome>, key: fn(&ArmRun) -> f64) -> Option<live::Outcome> {
    if runs.is_empty() {
        return None;
    }
    runs.sort_by(|a, b| key(&a.arm).total_cmp(&key(&b.arm)));
    let middle = (runs.len() - 1) / 2;
    Some(runs.swap_remove(middle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Vec<(String, Path)> {
        vec![
            ("direct".to_owned(), Path::ClientRoundRobin),
            (
                "tailguard".to_owned(),
                Path::ProxyProcess("tailguard".into()),
            ),
            ("haproxy".to_owned(), Path::Peer(Peer::Haproxy)),
            ("nginx".to_owned(), Path::Peer(Peer::Nginx)),
        ]
    }

    #[test]
    fn each_round_compares_the_runs_next_to_each_other_in_time() {
        // A fast spell in rounds 1-2 and a slow one after: the medians (54 against 60) say
        // 0.90, the rounds say tailguard was within 3% in four of five.
        let rounds = vec![
            vec![75.0, 75.0, 75.0, 75.0, 75.0],
            vec![66.0, 66.0, 53.0, 52.0, 54.0],
            vec![67.0, 66.0, 60.0, 54.0, 55.0],
            vec![0.0, 64.0, 56.0, 52.0, 54.0],
        ];
        let note = round_by_round("max rate", BY_RATE, &paths(), &rounds).expect("a note");
        assert_eq!(
            note,
            "max rate, tailguard's req/s over each peer's within each round: haproxy 0.99 / \
             1.00 / 0.88 / 0.96 / 0.98 (median 0.98); nginx 1.03 / 0.95 / 1.00 / 1.00 \
             (median 1.00)"
        );
    }

    #[test]
    fn no_note_without_a_peer_or_a_second_round() {
        let rounds = vec![vec![75.0, 75.0], vec![66.0, 60.0]];
        assert_eq!(round_by_round("g", BY_RATE, &paths()[..2], &rounds), None);
        let one = vec![vec![75.0], vec![66.0], vec![67.0], vec![60.0]];
        assert_eq!(round_by_round("g", BY_RATE, &paths(), &one), None);
    }

    #[test]
    fn a_proxy_near_the_direct_maximum_is_noted() {
        let notes = held_by_the_load_side(&paths(), &[70_000.0, 67_000.0, 60_000.0, 66_400.0]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "tailguard's maximum (67000 req/s) is within 5% of the direct path's (70000)"
            ),
            "{}",
            notes[0]
        );
    }
}
