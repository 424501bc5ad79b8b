//! Balancer scenarios (the `sim` format): every selected arm live, in turn, each on a fresh
//! fleet, then the simulator's prediction for the same arms and load next to the live rows.

use crate::error::BenchError;
use crate::live::{self, ArmPlan, FleetSpec, Path, Runtimes, Traffic, MAX_PROXIES};
use crate::options::Options;
use crate::results::SimPrediction;
use crate::run::Run;
use std::time::Duration;

/// How long an arm may run past its end to finish what was scheduled.
const DRAIN_LIMIT: Duration = Duration::from_secs(15);
use tailguard_client::ArmConfig;
use tailguard_sim::scenario::LoadShape;
use tailguard_sim::Scenario;

/// The arms run live by default, per built-in scenario (the seed's comparison; the extras
/// stay in `sim`, or run with `--arms all`).
pub(crate) fn default_arms(scenario: &str) -> Option<&'static [&'static str]> {
    match scenario {
        "add-steps" => Some(&["baseline", "proxy"]),
        "slow-middle" => Some(&[
            "round-robin",
            "p2c-least-loaded",
            "heap-least-loaded",
            "p2c-peak-ewma",
        ]),
        "gc-pause" => Some(&["direct"]),
        "capacity" | "antagonist" => Some(&["p2c-peak-ewma", "prequal"]),
        _ => None,
    }
}

/// The default interval report period of a scenario: 1 s where the story is in the seconds.
pub(crate) fn default_interval(scenario: &str) -> Duration {
    match scenario {
        "gc-pause" => Duration::from_secs(1),
        _ => Duration::from_secs(5),
    }
}

/// True when an arm is what a client does without a proxy: plain round robin, nothing else.
/// Such an arm runs in the load generator itself, over every backend.
fn is_client_round_robin(arm: &ArmConfig) -> bool {
    arm.policy == tailguard_balance::Policy::RoundRobin
        && arm.retries.is_none()
        && arm.accrual.is_none()
        && arm.hedge.is_none()
        && arm.outlier.is_none()
}

/// Picks the arms to run: the named ones, all, or the scenario's defaults.
fn select(scenario: &Scenario, opts: &Options) -> Result<Vec<ArmConfig>, BenchError> {
    let names: Vec<String> = match &opts.arms {
        Some(list) if list.iter().any(|a| a == "all") => {
            return Ok(scenario.arms.clone());
        }
        Some(list) => list.clone(),
        None => match default_arms(&scenario.name) {
            Some(d) => d.iter().map(|s| (*s).to_owned()).collect(),
            None => return Ok(scenario.arms.clone()),
        },
    };
    names
        .iter()
        .map(|n| {
            scenario
                .arms
                .iter()
                .find(|a| &a.name == n)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = scenario.arms.iter().map(|a| a.name.as_str()).collect();
                    BenchError::Invalid(format!(
                        "scenario {} has no arm {n:?} (arms: {}, or all)",
                        scenario.name,
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

fn traffic(scenario: &Scenario, opts: &Options) -> Traffic {
    let duration = opts.duration.unwrap_or(scenario.load.duration);
    let mut t = Traffic {
        rate: 0.0,
        closed_interval: None,
        concurrency: 64,
        duration,
        arrivals: tailguard_pacing::Arrivals::Constant,
        ramp: None,
        method: scenario.load.method.to_string(),
        timeout: Duration::from_secs(10),
        interval: opts
            .interval
            .unwrap_or_else(|| default_interval(&scenario.name)),
        deadline: scenario.deadline,
        unit: opts.unit,
        drain_limit: Some(DRAIN_LIMIT),
        grpc: false,
        clients: usize::try_from(scenario.load.clients).unwrap_or(usize::MAX),
        callers: crate::live::Callers {
            stages: scenario.stages.clone(),
            critical: scenario.load.critical,
            request_deadline: scenario.load.request_deadline,
            retry_after: scenario.load.retry_after,
            per_second: scenario.overload.is_some(),
        },
    };
    if let Some(st) = &scenario.stages {
        // The stages set the length (a --duration does not cut them).
        t.duration = st.total();
    }
    match scenario.load.shape {
        LoadShape::Open {
            arrivals,
            rate,
            ramp,
        } => {
            t.rate = rate;
            t.arrivals = arrivals;
            t.ramp = ramp;
            // Room for ten seconds of arrivals in flight (a 5 s pause included): a stalled
            // backend's queue is latency the report must show, not a connection cap. A ramp
            // from above the rate peaks at its start.
            let peak = ramp.map_or(rate, |r| r.from.max(rate));
            t.concurrency = ((peak * 10.0) as usize).clamp(64, 4096);
        }
        LoadShape::Closed { workers, interval } => {
            t.concurrency = workers as usize;
            t.closed_interval = (!interval.is_zero()).then_some(interval);
        }
    }
    t
}

/// The simulator's figures per arm name, or why there are none.
type Prediction = Result<Vec<(String, SimPrediction)>, String>;

/// Runs `scenario` live.
pub(crate) fn run(
    scenario: &Scenario,
    opts: &Options,
    rts: &Runtimes,
    run: &mut Run<'_>,
) -> Result<(), BenchError> {
    let arms = select(scenario, opts)?;
    let traffic = traffic(scenario, opts);
    let fleet = FleetSpec {
        fleet: scenario.fleet.clone(),
        nagle: false,
        serve_abandoned: scenario.servers.serve_abandoned,
    };
    describe_load(scenario, &traffic, run);
    let together = opts.together && arms.len() > 1;
    plan_progress(scenario, &arms, &traffic, together, rts, run);
    if together {
        run.report.notes.push(
            "the arms ran at the same time, each on its own fleet (as seed 000's two clusters did)"
                .to_owned(),
        );
    }
    let prediction = opts.predict.then(|| predict(scenario, &arms, &traffic));
    let overload = match scenario.overload {
        None => None,
        Some(_) => match measure_capacity(scenario, &fleet, &traffic, opts, rts, run)? {
            Some(o) => Some(o),
            None => return Ok(()),
        },
    };
    let plans = plan_arms(scenario, &arms, &fleet, &traffic, together, overload);
    if together {
        run_together(rts, run, &plans, prediction.as_ref())?;
    } else {
        run_in_turn(rts, run, &plans, prediction.as_ref())?;
    }
    if let Some(Err(e)) = prediction {
        run.report
            .notes
            .push(format!("no simulator prediction: {e}"));
    }
    Ok(())
}

/// An overload scenario's reference (capacity, unloaded p99) and the seconds offered over it.
type Reference = (tailguard_sim::Overload, (usize, usize));

/// How long the capacity run lasts.
const CAPACITY_RUN: Duration = Duration::from_secs(5);

/// An overload scenario's reference, measured in the same run before the arms: its fleet
/// driven direct (client round robin), closed loop, with one request in flight per worker
/// (every backend's `capacity.workers`, 12 for three of 4): the achieved rate is the
/// capacity, its p99 the unloaded p99. Recorded as its own row; `None` when the run was
/// stopped.
fn measure_capacity(
    scenario: &Scenario,
    fleet: &FleetSpec,
    traffic: &Traffic,
    opts: &Options,
    rts: &Runtimes,
    run: &mut Run<'_>,
) -> Result<Option<Reference>, BenchError> {
    if run.halt() {
        return Ok(None);
    }
    let workers: u32 = scenario
        .fleet
        .backends
        .iter()
        .map(|b| b.capacity.map_or(1, |c| c.workers))
        .sum();
    let mut t = traffic.clone();
    t.rate = 0.0;
    t.ramp = None;
    t.closed_interval = None;
    t.concurrency = workers.max(1) as usize;
    // A shorter --duration shortens it too (the stages' arms keep their length).
    t.duration = opts.duration.map_or(CAPACITY_RUN, |d| d.min(CAPACITY_RUN));
    t.callers = crate::live::Callers::default();
    let plan = ArmPlan {
        name: "capacity".to_owned(),
        group: "capacity".to_owned(),
        path: Path::ClientRoundRobin,
        fleet,
        traffic: t,
        prefix: String::new(),
        overload: None,
    };
    let done = live::run_arm(rts, run.console, &plan)?;
    let capacity = done.arm.achieved_rate;
    let unloaded = Duration::from_micros(done.arm.latency_us.p99.max(1));
    run.report.notes.push(format!(
        "capacity measured first: {} in flight, direct, closed loop for {}s: {capacity:.0} req/s, \
         p99 {} (the overload figures are against these)",
        plan.traffic.concurrency,
        plan.traffic.duration.as_secs_f64(),
        tailguard_report::Unit::Auto.format(done.arm.latency_us.p99)
    ));
    if run.record(done) {
        run.report.interrupted = true;
        return Ok(None);
    }
    let o = tailguard_sim::Overload {
        capacity,
        unloaded_p99: unloaded,
    };
    let seconds = traffic.duration.as_secs_f64().ceil() as usize;
    let rate_at = |t: f64| match &scenario.stages {
        Some(s) => s.rate_at(Duration::from_secs_f64(t)),
        None => traffic.rate,
    };
    let window = tailguard_sim::results::overload_window(seconds, capacity, rate_at);
    Ok(Some((o, window)))
}

/// Puts the load, the deadline and how many clients it models in the report.
fn describe_load(scenario: &Scenario, traffic: &Traffic, run: &mut Run<'_>) {
    run.report.load = describe(scenario, traffic);
    run.report.deadline_ms = scenario.deadline.as_secs_f64() * 1e3;
    if scenario.load.clients > 1 {
        let clients = scenario.load.clients;
        let proxies = traffic.clients.clamp(1, MAX_PROXIES);
        run.report.notes.push(format!(
            "the scenario models {clients} independent clients: each proxy arm runs {proxies} \
             proxies, each with its own balancer, and the load goes to them round robin (client \
             round robin is one client whatever their number)"
        ));
    }
}

/// Tells the console's bar and the live page which arms will run, and for how long.
fn plan_progress(
    scenario: &Scenario,
    arms: &[ArmConfig],
    traffic: &Traffic,
    together: bool,
    rts: &Runtimes,
    run: &mut Run<'_>,
) {
    run.console
        .plan(traffic.duration.as_secs().saturating_mul(arms.len() as u64));
    rts.board.plan(
        &run.report.load,
        arms.iter()
            .map(|a| (scenario.name.clone(), a.name.clone()))
            .collect(),
        together,
    );
}

/// One plan per arm: client round robin runs in the load generator, the rest through proxies.
fn plan_arms<'a>(
    scenario: &Scenario,
    arms: &[ArmConfig],
    fleet: &'a FleetSpec,
    traffic: &Traffic,
    together: bool,
    overload: Option<Reference>,
) -> Vec<ArmPlan<'a>> {
    arms.iter()
        .map(|arm| ArmPlan {
            name: arm.name.clone(),
            group: scenario.name.clone(),
            path: if is_client_round_robin(arm) {
                Path::ClientRoundRobin
            } else {
                Path::Proxy(Box::new(arm.clone()))
            },
            fleet,
            traffic: traffic.clone(),
            prefix: if together {
                format!("{} | ", arm.name)
            } else {
                String::new()
            },
            overload,
        })
        .collect()
}

/// Runs every arm at the same time, each on its own thread and fleet, then records them in
/// order; fails with the first arm's error, after recording the others.
fn run_together(
    rts: &Runtimes,
    run: &mut Run<'_>,
    plans: &[ArmPlan<'_>],
    prediction: Option<&Prediction>,
) -> Result<(), BenchError> {
    if run.halt() {
        return Ok(());
    }
    let console = run.console;
    let outcomes: Vec<Result<live::Outcome, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .iter()
            .map(|plan| s.spawn(move || live::run_arm(rts, console, plan)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Invalid("an arm panicked".into())))
            })
            .collect()
    });
    let proxies = plans
        .iter()
        .filter(|p| matches!(p.path, Path::Proxy(_)))
        .count();
    let mut first_error = None;
    for outcome in outcomes {
        match outcome {
            Ok(mut done) => {
                // Proxies in this process share one runtime thread: its CPU is theirs
                // together, not one arm's.
                if proxies > 1 {
                    done.arm.proxy = None;
                }
                finish(run, done, prediction);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(())
}

/// Runs the arms one after another until one fails or Ctrl-C stops the run.
fn run_in_turn(
    rts: &Runtimes,
    run: &mut Run<'_>,
    plans: &[ArmPlan<'_>],
    prediction: Option<&Prediction>,
) -> Result<(), BenchError> {
    for plan in plans {
        if run.halt() {
            break;
        }
        let done = live::run_arm(rts, run.console, plan)?;
        if finish(run, done, prediction) {
            run.report.interrupted = true;
            break;
        }
    }
    Ok(())
}

/// Records an arm with the simulator's figures for it and any note its intervals call for;
/// true when the run is to stop.
fn finish(run: &mut Run<'_>, mut done: live::Outcome, prediction: Option<&Prediction>) -> bool {
    if let Some(Ok(p)) = prediction {
        done.arm.sim = p
            .iter()
            .find(|(n, _)| *n == done.arm.name)
            .map(|(_, s)| s.clone());
    }
    if let Some(note) = hidden_by_totals(&done.arm) {
        run.report.notes.push(note);
    }
    run.record(done)
}

/// Seed 004's point, when an arm shows it: intervals far apart that one end-of-run figure
/// (the mean most of all) blurs into one number.
fn hidden_by_totals(arm: &crate::results::ArmRun) -> Option<String> {
    let full: Vec<u64> = arm
        .intervals
        .iter()
        .filter(|i| i.duration_s >= 0.5)
        .filter_map(|i| i.p99_us)
        .collect();
    let worst = *full.iter().max()?;
    let best = *full.iter().min()?;
    (worst >= 100 * best.max(1_000)).then(|| {
        let f = |us: u64| tailguard_report::Unit::Auto.format(us);
        format!(
            "{}: interval p99 ranged from {} to {}; the run's mean latency, {}, shows neither",
            arm.name,
            f(best),
            f(worst),
            f(arm.mean_us as u64)
        )
    })
}

fn describe(scenario: &Scenario, t: &Traffic) -> String {
    let length = format!("{}s per arm", t.duration.as_secs_f64());
    match scenario.load.shape {
        LoadShape::Open {
            arrivals,
            rate,
            ramp: None,
        } => format!("open loop, {arrivals} arrivals at {rate} req/s, {length}"),
        LoadShape::Open {
            arrivals,
            rate,
            ramp: Some(r),
        } => format!(
            "open loop, {arrivals} arrivals from {} to {rate} req/s over {}s, then {rate} req/s, \
             {length}",
            r.from,
            r.over.as_secs_f64()
        ),
        LoadShape::Closed { workers, interval } => format!(
            "closed loop, {workers} workers each sending at most once per {}ms, {length}",
            interval.as_millis()
        ),
    }
}

/// The simulator on the same arms and load length.
fn predict(scenario: &Scenario, arms: &[ArmConfig], t: &Traffic) -> Prediction {
    let mut s = scenario.clone();
    s.arms = arms.to_vec();
    s.load.duration = t.duration;
    let report = tailguard_sim::run(&s).map_err(|e| e.to_string())?;
    Ok(report
        .arms
        .iter()
        .map(|a| {
            let overload = report
                .overload
                .map(|(o, window)| crate::results::OverloadRun::of(&a.timeline, &o, window));
            (
                a.name.clone(),
                SimPrediction {
                    latency_us: a.latency.percentiles(),
                    achieved_rate: a.achieved_rate(),
                    success_rate: a.success_rate(),
                    within_deadline_rate: a.within_deadline_rate(),
                    overload,
                },
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pick_the_seed_arms_and_names_are_checked() {
        let s = Scenario::builtin("add-steps").unwrap();
        let opts = Options::default();
        let arms = select(&s, &opts).unwrap();
        let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["baseline", "proxy"]);
        assert!(is_client_round_robin(&arms[0]));
        assert!(!is_client_round_robin(&arms[1]));
        let bad = Options {
            arms: Some(vec!["nope".into()]),
            ..Options::default()
        };
        let err = select(&s, &bad).unwrap_err().to_string();
        assert!(
            err.contains("no arm \"nope\"") && err.contains("baseline"),
            "{err}"
        );
    }

    #[test]
    fn closed_loop_keeps_the_worker_pace() {
        let s = Scenario::builtin("add-steps").unwrap();
        let t = traffic(&s, &Options::default());
        assert_eq!(t.rate, 0.0);
        assert_eq!(t.concurrency, 50);
        assert_eq!(t.closed_interval, Some(Duration::from_millis(100)));
        let s = Scenario::builtin("slow-middle").unwrap();
        let t = traffic(&s, &Options::default());
        assert_eq!((t.rate, t.concurrency), (1000.0, 4096));
        assert_eq!(
            (t.ramp, t.offered(), t.mean_rate()),
            (None, 60_000.0, 1000.0)
        );
    }

    #[test]
    fn a_scenario_ramp_reaches_the_live_load_and_its_description() {
        let text = "fleet: echo\n\
                    load: {arrivals: poisson, rate: 60, ramp: {from: 20, over: 10s}, duration: 20s}\n\
                    arms: [{name: rr, balancer: {kind: round-robin}}]\n";
        let s = Scenario::from_yaml_str(text, "ramp.yaml").unwrap();
        let t = traffic(&s, &Options::default());
        let ramp = tailguard_pacing::Ramp {
            from: 20.0,
            over: Duration::from_secs(10),
        };
        assert_eq!((t.rate, t.ramp), (60.0, Some(ramp)));
        // 10 s x (20 + 60) / 2 in the climb, then 10 s x 60.
        assert_eq!((t.offered(), t.mean_rate()), (1_000.0, 50.0));
        assert_eq!(
            describe(&s, &t),
            "open loop, poisson arrivals from 20 to 60 req/s over 10s, then 60 req/s, 20s per arm"
        );
    }
}
