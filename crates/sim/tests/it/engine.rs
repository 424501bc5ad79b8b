//! The simulator's semantics, one small scenario each: retries, budgets, accrual, refusals,
//! timeouts, capacity queues, pauses, hedging, closed loops, ramps, and determinism.

use std::time::Duration;
use tailguard_sim::{render, run, ArmResult, Overrides, Report, Scenario};

fn sim(yaml: &str) -> Report {
    let scenario = Scenario::from_yaml_str(yaml, "test").unwrap_or_else(|e| panic!("{e}"));
    run(&scenario).unwrap()
}

fn arm<'a>(report: &'a Report, name: &str) -> &'a ArmResult {
    report.arms.iter().find(|a| a.name == name).unwrap()
}

fn ms(v: u64) -> u64 {
    v * 1_000
}

/// Every attempt is a first attempt, a retry or a hedge.
fn assert_conserved(report: &Report) {
    for a in &report.arms {
        let attempts: u64 = a.attempts.iter().sum();
        assert_eq!(
            attempts,
            a.requests + a.stats.retries + a.stats.hedges,
            "{}",
            a.name
        );
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let mut s = Scenario::builtin("slow-middle").unwrap();
    let o = Overrides {
        duration: Some(Duration::from_secs(16)),
        arrivals: Some(tailguard_sim::Arrivals::Poisson),
        arms: vec!["round-robin".into(), "p2c-peak-ewma+hedge".into()],
        ..Overrides::default()
    };
    s.apply(&o).unwrap();
    let (a, b) = (run(&s).unwrap(), run(&s).unwrap());
    assert_eq!(render::json(&a), render::json(&b));
    assert_eq!(render::text(&a), render::text(&b));
    assert_eq!(render::svg(&a), render::svg(&b));
    assert_eq!(render::html(&a), render::html(&b));
    let one_thread = tailguard_sim::run_on(&s, 1).unwrap();
    assert_eq!(
        render::json(&one_thread),
        render::json(&a),
        "threads change nothing"
    );
    s.seed += 1;
    assert_ne!(render::json(&run(&s).unwrap()), render::json(&a));
    assert_conserved(&a);
}

const TWO_ENDPOINTS_ONE_FAILING: &str = "
fleet:
  backends:
    - {name: bad, latency: 10ms, fail: {error: 1.0, status: 503}}
    - {name: good, latency: 10ms}
load: {rate: 100, duration: 10s}
arms:
  - {name: plain, balancer: {kind: round-robin}}
  - {name: retries, balancer: {kind: random}, retries: {percent: 0.5}}
  - {name: capped, balancer: {kind: round-robin}, retries: {percent: 0.2, min_per_sec: 0}}
  - {name: post, balancer: {kind: round-robin}, retries: {}, classifier: retryable-read-5xx}
  - name: accrual
    balancer: {kind: round-robin}
    accrual: {kind: consecutive, failures: 5, backoff: {kind: constant, delay: 5s}}
";

#[test]
fn retries_go_elsewhere_and_accrual_removes_the_failing_endpoint() {
    let r = sim(TWO_ENDPOINTS_ONE_FAILING);
    assert_conserved(&r);
    assert!((arm(&r, "plain").success_rate() - 0.5).abs() < 0.01);
    let retries = arm(&r, "retries");
    assert_eq!(
        retries.success_rate(),
        1.0,
        "every retry went to the good endpoint"
    );
    assert_eq!(retries.stats.retries, retries.attempts[0]);
    // Accrual: five failures trip it at 0.1 s; the probe at 5.1 s fails and trips it again.
    let accrual = arm(&r, "accrual");
    assert_eq!(accrual.attempts[0], 6, "{:?}", accrual.attempts);
    assert_eq!(accrual.stats.trips, 2);
}

#[test]
fn the_budget_bounds_retries_and_the_method_decides() {
    let all_fail = TWO_ENDPOINTS_ONE_FAILING.replace(
        "- {name: good, latency: 10ms}",
        "- {name: good, latency: 10ms, fail: {error: 1.0}}",
    );
    let r = sim(&all_fail);
    let capped = arm(&r, "capped");
    // 20% of 1,000 requests, no reserve: at most 200 retries.
    assert!(capped.stats.retries <= 200, "{}", capped.stats.retries);
    assert!(capped.stats.retries >= 150, "{}", capped.stats.retries);
    assert!(capped.stats.retries_refused > 0);
    let post = all_fail.replace(
        "load: {rate: 100, duration: 10s}",
        "load: {rate: 100, duration: 10s, method: POST}",
    );
    assert_eq!(
        arm(&sim(&post), "post").stats.retries,
        0,
        "POST is never retried on a 5xx"
    );
}

#[test]
fn refused_connections_are_retried_whatever_the_method() {
    let r = sim("
fleet:
  backends:
    - {name: down, latency: 10ms, schedule: ['at 0s down']}
    - {name: up, latency: 10ms}
load: {rate: 50, duration: 4s, method: POST}
arms: [{name: a, balancer: {kind: random}, retries: {}}]
");
    let a = &r.arms[0];
    assert_eq!(a.success_rate(), 1.0);
    assert!(a.stats.retries > 0);
    assert!(a.latency.max_us() < ms(11), "a refusal costs no time");
}

#[test]
fn attempt_timeouts_retry_and_total_timeouts_bound_latency() {
    let r = sim("
fleet:
  backends:
    - {name: slow, latency: 2s}
    - {name: fast, latency: 10ms}
load: {rate: 20, duration: 5s}
arms:
  - {name: per-try, balancer: {kind: round-robin}, retries: {}, timeouts: {attempt: 100ms}}
  - {name: total, balancer: {kind: round-robin}, timeouts: {total: 50ms}}
");
    let per_try = arm(&r, "per-try");
    assert_eq!(per_try.success_rate(), 1.0);
    assert!(
        per_try.latency.max_us() <= ms(111),
        "{}",
        per_try.latency.max_us()
    );
    let total = arm(&r, "total");
    assert!((total.success_rate() - 0.5).abs() < 0.02);
    assert!(total.latency.max_us() <= ms(51));
}

#[test]
fn capacity_queues_requests_past_saturation() {
    let text = |rate: u32| {
        format!(
            "fleet: {{backends: [{{latency: 10ms}}]}}\nservers: {{concurrency: 1}}\n\
             load: {{rate: {rate}, duration: 5s}}\narms: [{{name: a, balancer: {{kind: heap}}}}]\n"
        )
    };
    let under = sim(&text(50));
    assert!(under.arms[0].latency.max_us() <= ms(11));
    let over = sim(&text(200)); // twice the capacity: the queue grows for 5 s
    assert!(over.arms[0].latency.max_us() > ms(2_000));
    assert_eq!(over.arms[0].requests, 1_000);
}

#[test]
fn a_backends_own_capacity_bounds_its_line_and_a_neighbour_takes_workers() {
    // Two workers of 10 ms each: 200 req/s. 300 req/s offered for 4 s.
    let text = |capacity: &str, schedule: &str| {
        format!(
            "fleet: {{backends: [{{latency: 10ms, capacity: {capacity}, schedule: [{schedule}]}}]}}\n\
             load: {{rate: 300, duration: 4s}}\narms: [{{name: a, balancer: {{kind: heap}}}}]\n"
        )
    };
    // An unbounded line grows by 100 requests a second: the last waits about 2 s.
    let queued = sim(&text("2", ""));
    let a = &queued.arms[0];
    assert!(a.latency.max_us() > ms(1_500), "{}", a.latency.max_us());
    assert_eq!(a.success_rate(), 1.0);
    // A line of 10 sheds the excess at once with its status; what it admits waits 60 ms at most.
    let shed = sim(&text("{workers: 2, queue: 10, status: 503}", ""));
    let a = &shed.arms[0];
    assert!(a.latency.max_us() <= ms(61), "{}", a.latency.max_us());
    let rejected = 1.0 - a.success_rate();
    assert!(
        (0.30..0.36).contains(&rejected),
        "one in three shed: {rejected}"
    );
    // Enough workers: every request at its 10 ms.
    let ample = sim(&text("4", ""));
    assert!(ample.arms[0].latency.max_us() <= ms(11));
    // A neighbour takes three quarters of six workers for a second: the line forms (100
    // requests, half a second's wait at its end) then drains in a third of a second.
    let neighbour = sim(&text("6", "'from 1s to 2s capacity x0.25'"));
    let a = &neighbour.arms[0];
    assert!(a.latency.max_us() > ms(300), "{}", a.latency.max_us());
    assert!(a.latency.max_us() < ms(700), "{}", a.latency.max_us());
    assert!(a.latency.quantile_us(0.5) <= ms(11));
}

#[test]
fn a_capacity_fault_needs_a_capacity() {
    let err = Scenario::from_yaml_str(
        "fleet: {backends: [{latency: 1ms, schedule: ['from 1s capacity 2']}]}\n\
         load: {rate: 10, duration: 1s}\narms: [{name: a, balancer: {kind: heap}}]\n",
        "t.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("needs the backend's `capacity`"), "{err}");
}

#[test]
fn a_paused_endpoint_answers_when_it_resumes() {
    let r = sim("fleet: gc-pause\nload: {rate: 10, duration: 20s}\narms: [{name: a, balancer: {kind: round-robin}}]\n");
    let a = &r.arms[0];
    assert_eq!(a.success_rate(), 1.0);
    let max = a.latency.max_us();
    assert!(max >= ms(4_900) && max <= ms(5_010), "{max}"); // 3 significant digits
                                                            // Half the requests arrive during a pause and wait uniformly up to 5 s.
    assert_eq!(a.latency.quantile_us(0.25), 0);
    assert!((a.latency.quantile(0.75).as_millis() as i64 - 2_500).abs() < 200);
}

#[test]
fn hedging_cuts_the_tail_within_its_budget() {
    let r = sim("
fleet:
  backends:
    - {name: slow, latency: 500ms}
    - {name: fast, replicas: 19, latency: {uniform: {min: 9ms, max: 11ms}}}
load: {rate: 200, duration: 10s}
arms:
  - {name: plain, balancer: {kind: round-robin}}
  - {name: hedged, balancer: {kind: round-robin}, hedge: {max_extra_load: 0.1, min_per_sec: 10}}
");
    assert_conserved(&r);
    let (plain, hedged) = (arm(&r, "plain"), arm(&r, "hedged"));
    assert!(plain.latency.quantile_us(0.99) >= ms(499));
    assert!(
        hedged.latency.quantile_us(0.99) < ms(50),
        "{}",
        hedged.latency.quantile_us(0.99)
    );
    // 10% of 2,000 requests plus 10/s over 10 s.
    assert!(hedged.stats.hedges <= 300, "{}", hedged.stats.hedges);
}

#[test]
fn closed_loop_workers_wait_for_responses_and_intervals() {
    let r = sim("
fleet: {backends: [{name: fast, latency: 1ms}, {name: slow, latency: 300ms}]}
load: {loop: closed, workers: 4, interval: 100ms, duration: 10s}
arms: [{name: fast-only, balancer: {kind: p2c, load: peak-ewma}}, {name: rr, balancer: {kind: round-robin}}]
");
    // At most one send per 100 ms per worker: 4 workers x 10 s x 10/s.
    assert!(arm(&r, "fast-only").requests <= 400);
    assert!(arm(&r, "fast-only").requests >= 360);
    // Round robin waits 300 ms every other request: about 4 x 10 s / 0.4 s x 2.
    let rr = arm(&r, "rr").requests;
    assert!((190..=210).contains(&rr), "{rr}");
}

/// An open loop ramping from 100 to 300 req/s over 4 s offers L(t) = 100 t + 25 t² requests by
/// t <= 4 s, then 300 a second: the run sends that many, fewer in the climb's first half.
#[test]
fn a_ramped_open_loop_sends_what_the_ramp_offers() {
    let requests = |arrivals: &str, duration: &str| {
        let r = sim(&format!(
            "fleet: {{backends: [{{name: e, replicas: 2, latency: 1ms}}]}}\n\
             load: {{arrivals: {arrivals}, rate: 300, ramp: {{from: 100, over: 4s}}, \
             duration: {duration}}}\n\
             arms: [{{name: rr, balancer: {{kind: round-robin}}}}]\n"
        ));
        arm(&r, "rr").requests
    };
    // L(4 s) = 4 s x (100 + 300) / 2; L(2 s) = 200 + 100; L(6 s) = 800 + 600.
    for (duration, offered) in [("4s", 800), ("2s", 300), ("6s", 1400), ("1s", 125)] {
        let sent = requests("constant", duration);
        assert!(
            sent.abs_diff(offered) <= 1,
            "{duration}: {sent} of {offered}"
        );
    }
    let (first, whole) = (requests("constant", "2s"), requests("constant", "4s"));
    assert!(first < whole - first, "{first} then {}", whole - first);
    // Poisson: Poisson(800) plus request 0; 5 sigma is about 141.
    let poisson = requests("poisson", "4s");
    assert!(poisson.abs_diff(800) < 141, "{poisson}");
    let first = requests("poisson", "2s");
    assert!(first < poisson - first, "{first} then {}", poisson - first);
}

#[test]
fn independent_clients_keep_their_own_state() {
    let r = sim("
fleet: {backends: [{name: e, replicas: 40, latency: 5ms}]}
load: {rate: 200, duration: 2s, clients: 10}
arms:
  - {name: aperture, balancer: {kind: aperture}}
  - {name: rr, balancer: {kind: round-robin}}
");
    assert!(arm(&r, "aperture").endpoints_per_client < 10.0);
    assert_eq!(arm(&r, "rr").endpoints_per_client, 40.0);
}

#[test]
fn probing_keeps_the_tail_where_p2c_queues_and_does_not_sinkhole() {
    let mut s = Scenario::builtin("capacity").unwrap();
    let o = Overrides {
        duration: Some(Duration::from_secs(10)),
        arms: vec!["p2c-peak-ewma".into(), "prequal".into()],
        ..Overrides::default()
    };
    s.apply(&o).unwrap();
    let r = run(&s).unwrap();
    let (ewma, prequal) = (arm(&r, "p2c-peak-ewma"), arm(&r, "prequal"));
    let p99 = |a: &ArmResult| a.latency.quantile_us(0.99);
    assert!(
        p99(prequal) * 3 < p99(ewma) * 2,
        "prequal p99 {} vs p2c peak EWMA {}",
        p99(prequal),
        p99(ewma)
    );
    // Three probes per request, sent while the clients balance.
    assert!(
        prequal.stats.probes >= 3 * prequal.requests - 30,
        "{}",
        prequal.stats.probes
    );
    assert_eq!(ewma.stats.probes, 0);
    // The backend that fails fast gets well under its fair share (5%).
    let broken = r.endpoints.iter().position(|n| n == "broken").unwrap();
    let share = prequal.attempts[broken] as f64 / prequal.attempts.iter().sum::<u64>() as f64;
    assert!(share < 0.01, "broken's share {share}");
    assert!(prequal.success_rate() > 0.99);
}

/// Three backends of 4 workers at 10 ms (1,200 req/s) offered twice that, every request with a
/// 100 ms budget: with no bound the backends' lines grow and almost nothing is answered in
/// time (1.6% of capacity); a cap of 16 attempts in flight, or the gradient limit, keeps the
/// lines short and the goodput at capacity (1.00), refusing the excess.
#[test]
fn a_bound_on_attempts_in_flight_keeps_goodput_under_overload() {
    let report = sim("
name: overload
fleet:
  seed: 7
  backends:
    - {name: b, replicas: 3, latency: 10ms, capacity: 4}
load: {loop: open, arrivals: poisson, rate: 2400, duration: 20s}
deadline: 100ms
arms:
  - {name: none, balancer: {kind: p2c, load: least-loaded}, timeouts: {total: 100ms}}
  - name: cap16
    balancer: {kind: p2c, load: least-loaded}
    timeouts: {total: 100ms}
    max_concurrent_requests: 16
    queue: {max_size: 100, max_wait: 50ms}
  - name: gradient
    balancer: {kind: p2c, load: least-loaded}
    timeouts: {total: 100ms}
    concurrency_limit: {kind: gradient}
    queue: {max_size: 100, max_wait: 50ms}
");
    let goodput = |a: &ArmResult| a.within_deadline as f64 / 20.0 / 1200.0;
    let none = arm(&report, "none");
    assert_eq!(none.refused, 0);
    assert!(goodput(none) < 0.3, "no bound: {}", goodput(none));
    for name in ["cap16", "gradient"] {
        let a = arm(&report, name);
        assert!(goodput(a) > 0.9, "{name}: goodput {}", goodput(a));
        assert!(a.refused > a.requests / 3, "{name}: refused {}", a.refused);
        // What was admitted was answered within the budget: at most the queue's 50 ms wait
        // (a full FIFO queue under sustained overload: everyone waits about that long) and a
        // short line at the backends.
        let p99 = a.latency.quantile_us(0.99);
        assert!(p99 < ms(100), "{name}: p99 {p99} µs");
    }
}

#[test]
fn admission_settings_that_cannot_work_are_named() {
    let err = |arm: &str| {
        Scenario::from_yaml_str(
            &format!(
                "fleet: {{backends: [{{latency: 1ms}}]}}\nload: {{rate: 10, duration: 1s}}\narms: [{arm}]\n"
            ),
            "t.yaml",
        )
        .unwrap_err()
        .to_string()
    };
    let e = err("{name: a, balancer: {kind: heap}, queue: {max_size: 5, max_wait: 1s}}");
    assert!(
        e.contains("queue and criticality need max_concurrent_requests or concurrency_limit"),
        "{e}"
    );
    let e = err("{name: a, balancer: {kind: heap}, concurrency_limit: {kind: vegas}}");
    assert!(
        e.contains("concurrency_limit.kind: unknown kind \"vegas\": gradient or aimd"),
        "{e}"
    );
    let e =
        err("{name: a, balancer: {kind: heap}, concurrency_limit: {kind: aimd, smoothing: 0.5}}");
    assert!(e.contains("concurrency_limit.smoothing"), "{e}");
    let e =
        err("{name: a, balancer: {kind: heap}, concurrency_limit: {kind: gradient, minLimit: 50}}");
    assert!(
        e.contains("initialLimit must be minLimit to maxLimit, got 20"),
        "{e}"
    );
    let e = err("{name: a, balancer: {kind: heap}, max_concurrent_requests: 0}");
    assert!(
        e.contains("maxConcurrentRequests must be at least 1"),
        "{e}"
    );
}

/// The same overload with 20% of requests critical and each request due within 100 ms: the
/// critical ones go first and nearly all are answered in time; a queue that would let a request
/// wait a second refuses, as soon as its deadline cannot be met, the ones that would time out.
#[test]
fn critical_requests_go_first_and_hopeless_waits_are_refused_early() {
    let report = sim("
name: overload-critical
fleet:
  seed: 7
  backends:
    - {name: b, replicas: 3, latency: 10ms, capacity: 4}
load: {loop: open, arrivals: poisson, rate: 2400, duration: 20s, critical: 0.2, request_deadline: 100ms}
deadline: 100ms
arms:
  - {name: none, balancer: {kind: p2c, load: least-loaded}}
  - name: gradient
    balancer: {kind: p2c, load: least-loaded}
    concurrency_limit: {kind: gradient}
    queue: {max_size: 1000, max_wait: 1s}
    criticality: true
  - name: gradient-short
    balancer: {kind: p2c, load: least-loaded}
    concurrency_limit: {kind: gradient}
    queue: {max_size: 100, max_wait: 20ms}
    criticality: true
");
    let none = arm(&report, "none");
    let gradient = arm(&report, "gradient");
    assert_eq!(
        none.critical, gradient.critical,
        "the same requests are critical"
    );
    let share = none.critical as f64 / none.requests as f64;
    assert!((0.18..0.22).contains(&share), "{share}");
    let critical_success = |a: &ArmResult| a.critical_within_deadline as f64 / a.critical as f64;
    let in_time = |a: &ArmResult| a.within_deadline as f64 / (a.requests - a.refused) as f64;
    let goodput = |a: &ArmResult| a.within_deadline as f64 / 20.0 / 1200.0;
    // No bound: 66 of 9,664 critical requests in time.
    assert!(critical_success(none) < 0.1, "{}", critical_success(none));
    let short = arm(&report, "gradient-short");
    for a in [gradient, short] {
        assert!(
            critical_success(a) > 0.99,
            "{}: {}",
            a.name,
            critical_success(a)
        );
    }
    // A queue that lets a request wait a second: each is refused once its deadline cannot be
    // met (position / limit x round trip + the typical attempt), so most of what is admitted
    // is answered in time (88%: the rule counts the typical attempt, and about half of those
    // admitted at the edge take longer) and goodput holds (0.88 of capacity).
    assert!(in_time(gradient) > 0.85, "{}", in_time(gradient));
    assert!(goodput(gradient) > 0.85, "{}", goodput(gradient));
    // A short queue: goodput at capacity, everything admitted in time (p99 50 ms: the 20 ms
    // wait and a line of the limit's making at the backends).
    assert!(goodput(short) > 0.95, "{}", goodput(short));
    assert!(in_time(short) > 0.99, "{}", in_time(short));
}

/// Twice the capacity for 15 s, then half of it, every failed request sent once more 100 ms
/// later (the load model for the metastable case). With no bound almost nothing is
/// answered in time during the overload (1.2% of capacity, 35,844 second sends); the gradient
/// limit with a short queue keeps goodput at capacity (0.999) and every critical request in
/// time. Both are back to the unloaded latency a second after the overload: the simulated
/// servers skip requests whose client hung up, so the retries' work leaves with them and no
/// backlog outlasts the demand (a server that serves abandoned work is the model the
/// metastable case still needs).
#[test]
fn caller_retries_under_overload_and_the_recovery_after() {
    let report = metastable("");
    let none = arm(&report, "none");
    let gradient = arm(&report, "gradient");
    assert!(none.caller_retries > 30_000, "{}", none.caller_retries);
    assert!(
        none.goodput(0, 15) / 1200.0 < 0.05,
        "{}",
        none.goodput(0, 15)
    );
    assert!(
        gradient.goodput(0, 15) / 1200.0 > 0.95,
        "{}",
        gradient.goodput(0, 15)
    );
    assert_eq!(gradient.critical_within_deadline, gradient.critical);
    // Half the capacity afterwards: every request answered, p99 back within twice the
    // unloaded 10 ms one second after the overload.
    for a in [none, gradient] {
        assert!(
            (590.0..620.0).contains(&a.goodput(17, 30)),
            "{}: {}",
            a.name,
            a.goodput(17, 30)
        );
        assert_eq!(
            a.recovery(15, Duration::from_millis(20)),
            Some(1),
            "{}",
            a.name
        );
    }
}

/// The metastable failure: the same overload against servers that serve what their clients
/// abandoned (a server that does not notice a hung-up client). With no bound the lines the
/// overload and its second sends built outlast it: at half the capacity afterwards nothing is
/// answered in time for the rest of the run (0 a second, p99 at the 100 ms deadline); the
/// gradient limit keeps the lines short, so there is nothing to outlast: 605 a second in time,
/// back within twice the unloaded p99 one second after.
#[test]
fn served_abandoned_work_makes_the_unbounded_overload_outlast_its_demand() {
    let report = metastable("servers: {abandoned: serve}");
    let none = arm(&report, "none");
    let gradient = arm(&report, "gradient");
    // No bound: nothing in time during the overload's second half of the run either, at
    // half the capacity: the backlog of abandoned work never drains within the run.
    assert!(none.goodput(17, 30) < 10.0, "{}", none.goodput(17, 30));
    assert_eq!(none.recovery(15, Duration::from_millis(20)), None);
    // The limit: goodput through the overload, every request after it, back in a second.
    assert!(
        gradient.goodput(0, 15) / 1200.0 > 0.95,
        "{}",
        gradient.goodput(0, 15)
    );
    assert!(
        (590.0..620.0).contains(&gradient.goodput(17, 30)),
        "{}",
        gradient.goodput(17, 30)
    );
    assert_eq!(gradient.recovery(15, Duration::from_millis(20)), Some(1));
    assert_eq!(gradient.critical_within_deadline, gradient.critical);
}

/// `tailguard sim overload`: the figures per arm, and its attacks.
#[test]
fn the_overload_scenario_keeps_goodput_and_critical_requests_under_the_limit() {
    let scenario = tailguard_sim::Scenario::builtin("overload").unwrap();
    let report = run(&scenario).unwrap();
    let critical_success =
        |a: &ArmResult| a.critical_within_deadline as f64 / a.critical.max(1) as f64;
    let admitted_p99 = |a: &ArmResult| {
        let mut h = tailguard_histogram::Histogram::compact();
        for s in a.timeline.iter().take(30) {
            h.merge(&s.latency);
        }
        h.quantile(0.99)
    };
    let by_name = |n: &str| arm(&report, n);
    let none = by_name("no-limit");
    assert!(
        none.goodput(0, 30) / 1200.0 < 0.05,
        "{}",
        none.goodput(0, 30)
    );
    assert!(
        none.goodput(32, 60) < 10.0,
        "metastable: {}",
        none.goodput(32, 60)
    );
    assert_eq!(none.recovery(30, Duration::from_millis(20)), None);
    for name in ["max-16", "gradient", "gradient-criticality"] {
        let a = by_name(name);
        assert!(
            a.goodput(0, 30) / 1200.0 > 0.95,
            "{name}: {}",
            a.goodput(0, 30)
        );
        assert_eq!(a.recovery(30, Duration::from_millis(20)), Some(1), "{name}");
        // No refusals at half the capacity once recovered.
        let refused_after: u64 = a.timeline.iter().skip(32).map(|s| s.refused).sum();
        assert_eq!(refused_after, 0, "{name}");
        // Admitted p99 during the overload: at most 10 ms in the queue, and the limit keeps
        // the backends' lines short: within three times the unloaded 10 ms.
        assert!(
            admitted_p99(a) <= Duration::from_millis(30),
            "{name}: {:?}",
            admitted_p99(a)
        );
    }
    let gc = by_name("gradient-criticality");
    assert!(critical_success(gc) > 0.99, "{}", critical_success(gc));
    // The report's own figures (the JSON's `goodput_ratio`, `critical_success`, `recovery_s`)
    // say the same: the overload is seconds 0-30, measured against 1,200 req/s.
    let (o, window) = report.overload.expect("an overload scenario");
    assert_eq!(window, (0, 30));
    let f = gc.overload(&o, window);
    assert!(
        f.goodput_ratio >= 0.90 && f.critical_success >= 0.99,
        "{f:?}"
    );
    assert_eq!(f.recovery_s, Some(1));
    assert!(f.admitted_p99 <= Duration::from_millis(30), "{f:?}");
    assert_eq!(f.refused_after, 0, "{f:?}");
    assert_eq!(none.overload(&o, window).recovery_s, None);
    let json: serde_json::Value =
        serde_json::from_str(&tailguard_sim::render::json(&report)).unwrap();
    let best = &json["arms"][3];
    assert_eq!(best["name"], "gradient-criticality");
    assert_eq!(best["recovery_s"], 1);
    assert!(best["goodput_ratio"].as_f64().unwrap() >= 0.9);
    assert!(json["arms"][0]["recovery_s"].is_null());
    assert_eq!(json["overload"]["to_s"], 30);
    assert!(
        critical_success(by_name("gradient")) < 0.6,
        "without criticality"
    );

    // Attack: every request critical. Criticality buys nothing then, and costs nothing.
    let mut all = scenario.clone();
    all.load.critical = 1.0;
    let report = run(&all).unwrap();
    let (g, gc) = (
        arm(&report, "gradient"),
        arm(&report, "gradient-criticality"),
    );
    let ratio = gc.goodput(0, 30) / g.goodput(0, 30);
    assert!((0.95..1.05).contains(&ratio), "{ratio}");
}

/// Attack: every endpoint refusing at once (an instant 503). Nothing succeeds either way; the
/// limit learns nothing from failures (only successes are samples) and refuses nothing, so it
/// is no worse than no limit: the same requests, the same second sends, no refusals of its own.
#[test]
fn every_endpoint_refusing_costs_the_limited_arm_nothing_more() {
    let report = sim("
name: all-refuse
fleet:
  seed: 7
  backends:
    - {name: b, replicas: 3, latency: 1ms, capacity: 4, fail: {error: 1.0, status: 503}}
load: {loop: open, arrivals: poisson, rate: 600, duration: 10s, critical: 0.2, request_deadline: 100ms, retry_after: 100ms}
deadline: 100ms
arms:
  - {name: none, balancer: {kind: p2c, load: peak-ewma}}
  - name: gradient
    balancer: {kind: p2c, load: peak-ewma}
    concurrency_limit: {kind: gradient}
    queue: {max_size: 100, max_wait: 20ms}
    criticality: true
");
    let (none, gradient) = (arm(&report, "none"), arm(&report, "gradient"));
    assert_eq!((none.successes, gradient.successes), (0, 0));
    assert_eq!(gradient.refused, 0);
    assert_eq!(gradient.requests, none.requests);
    assert_eq!(gradient.caller_retries, none.caller_retries);
}

/// Twice the capacity for 15 s, then half, 20% critical, 100 ms deadlines, every failure sent
/// again 100 ms later, with `servers` (a line of the scenario, or none); arms `none` and
/// `gradient` (with a 20 ms queue and criticality).
fn metastable(servers: &str) -> Report {
    sim(&format!(
        "
name: metastable
fleet:
  seed: 7
  backends:
    - {{name: b, replicas: 3, latency: 10ms, capacity: 4}}
{servers}
load:
  loop: open
  arrivals: poisson
  stages: '15s:2400,15s:600'
  duration: 30s
  critical: 0.2
  request_deadline: 100ms
  retry_after: 100ms
deadline: 100ms
arms:
  - {{name: none, balancer: {{kind: p2c, load: least-loaded}}}}
  - name: gradient
    balancer: {{kind: p2c, load: least-loaded}}
    concurrency_limit: {{kind: gradient}}
    queue: {{max_size: 100, max_wait: 20ms}}
    criticality: true
"
    ))
}
