//! Speed benchmark: the 60 s `slow-middle` scenario with five arms, in release mode.
//!
//! Run with `cargo bench -p tailguard-sim --bench slow_middle`. Target: well under one second
//! of wall time per run (60,000 requests per arm, 300,000 in all). Prints the best and median
//! of several runs on one thread (the cost of the simulation itself) and on every core (what
//! `tailguard sim` does), and the simulated requests per wall second.

use std::time::{Duration, Instant};
use tailguard_sim::{run_on, Overrides, Scenario};

const RUNS: usize = 7;
const ARMS: [&str; 5] = [
    "round-robin",
    "p2c-least-loaded",
    "heap-least-loaded",
    "p2c-peak-ewma",
    "best-of-3-peak-ewma",
];

#[allow(clippy::disallowed_methods)] // a benchmark measures wall time by definition
fn now() -> Instant {
    Instant::now()
}

fn main() {
    let mut scenario = Scenario::builtin("slow-middle").expect("built-in scenario");
    let arms = Overrides {
        arms: ARMS.iter().map(|a| a.to_string()).collect(),
        ..Overrides::default()
    };
    scenario.apply(&arms).expect("the arms exist");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, cores] {
        measure(&scenario, threads);
    }
}

fn measure(scenario: &Scenario, threads: usize) {
    let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
    let mut requests = 0;
    for _ in 0..RUNS {
        let start = now();
        let report = run_on(scenario, threads).expect("scenario runs");
        times.push(start.elapsed());
        requests = report.arms.iter().map(|a| a.requests).sum::<u64>();
    }
    times.sort();
    let median = times[RUNS / 2];
    println!(
        "slow-middle, 60 s, {} arms, {requests} requests, {threads} thread(s): best {:.1} ms, \
         median {:.1} ms, {:.2} M simulated requests per wall second",
        ARMS.len(),
        times[0].as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        requests as f64 / median.as_secs_f64() / 1e6
    );
}
