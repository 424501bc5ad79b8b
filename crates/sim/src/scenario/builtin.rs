//! The built-in scenarios, written in the scenario format so each is also an example of it.
//!
//! - `slow-middle` (seed 002, "Beyond Round Robin"): 11 endpoints, one x10 from 15 s to 45 s,
//!   1,000 req/s for 60 s; the four anchor balancers, then extras.
//! - `add-steps` (seed 000, "Making Things Faster by Adding More Steps"): 10 endpoints from 0 to
//!   2 s, the two slowest failing; slow_cooker's closed loop of 50 workers at 10 req/s each;
//!   round robin against the seed's Linkerd config, then extras.
//! - `herd` (scale on paper): 50 independent client-side balancers over 1,000 endpoints that
//!   serve one request at a time, at about 60% of capacity; full scan against P2C and aperture.
//! - `capacity`: 20 backends with real capacity (workers and a line), mixed sizes, one of them
//!   failing fast, at 90% of the good ones' capacity from 10 clients; P2C against probing.
//! - `capacity-ramp`: the same fleet and clients, the offered load climbing from 50% to 95% of
//!   the good backends' capacity over 30 s.
//! - `antagonist`: 20 equal backends at 85% load; a noisy neighbour takes three quarters of two
//!   of them for 10 s.
//! - `stall`: three backends, one ten times slower and failing 20%, one paused for 4 s; the
//!   proxy's defaults before and after the silence was priced and stalled requests rescued.
//! - `overload`: three backends of 4 workers at 10 ms offered twice their capacity for 30 s,
//!   then half for 30 s, 20% critical, 100 ms deadlines, failures sent again, abandoned work
//!   served; no bound, a cap of 16, the gradient limit, and the gradient limit with criticality
//!   (issue 48).

/// Names of the built-in scenarios.
pub(crate) const NAMES: &[&str] = &[
    "slow-middle",
    "add-steps",
    "herd",
    "gc-pause",
    "capacity",
    "capacity-ramp",
    "antagonist",
    "stall",
    "overload",
];

/// The YAML text of a built-in scenario.
pub(crate) fn yaml(name: &str) -> Option<&'static str> {
    match name {
        "slow-middle" => Some(SLOW_MIDDLE),
        "add-steps" => Some(ADD_STEPS),
        "herd" => Some(HERD),
        "gc-pause" => Some(GC_PAUSE),
        "capacity" => Some(CAPACITY),
        "capacity-ramp" => Some(CAPACITY_RAMP),
        "antagonist" => Some(ANTAGONIST),
        "stall" => Some(STALL),
        "overload" => Some(OVERLOAD),
        _ => None,
    }
}

const SLOW_MIDDLE: &str = "\
name: slow-middle
description: >-
  Seed 002: 11 endpoints (median 167 ms, sd 5 ms, max 200 ms), one x10 from 15 s to 45 s,
  1,000 req/s for 60 s
fleet: slow-middle
load: {loop: open, arrivals: constant, rate: 1000, duration: 60s}
deadline: 1s
arms:
  - {name: round-robin, balancer: {kind: round-robin}}
  - {name: p2c-least-loaded, balancer: {kind: p2c, load: least-loaded}}
  - {name: heap-least-loaded, balancer: {kind: heap}}
  - {name: p2c-peak-ewma, balancer: {kind: p2c, load: peak-ewma}}
  # Extras: more choices, a full scan, ejection, hedging.
  - {name: best-of-3-peak-ewma, balancer: {kind: best-of, choices: 3, load: peak-ewma}}
  - {name: full-scan-peak-ewma, balancer: {kind: full-scan, load: peak-ewma}}
  - name: round-robin+ejection
    balancer: {kind: round-robin}
    outlier: {interval: 1s, factor: 3, min_requests: 5, base_ejection: 30s}
  - name: round-robin+hedge
    balancer: {kind: round-robin}
    hedge: {max_extra_load: 0.05}
  - name: p2c-peak-ewma+hedge
    balancer: {kind: p2c, load: peak-ewma}
    hedge: {max_extra_load: 0.05}
  # Beyond the anchors: the probing balancer, alone and with backups (5% plus a floor of 20/s:
  # the p95 delay spends the 5% on requests just past it, and the floor is the headroom that
  # covers the slow endpoint's share).
  - {name: prequal, balancer: {kind: prequal}}
  - name: prequal+hedge
    balancer: {kind: prequal}
    hedge: {max_extra_load: 0.05, min_per_sec: 20}
";

const ADD_STEPS: &str = "\
name: add-steps
description: >-
  Seed 000: 10 endpoints at 0, 10, 20, 40, 80, 160, 320, 640 ms, 1 s (60% success) and
  2 s (40% success); 50 closed-loop workers, each at most 10 req/s
fleet: add-steps
load: {loop: closed, workers: 50, interval: 100ms, duration: 60s}
deadline: 1s
arms:
  - {name: baseline, balancer: {kind: round-robin}}
  - name: proxy
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s}
    accrual: &seed-accrual
      kind: success-rate
      threshold: 0.9
      requests: 20
      backoff: {kind: constant, delay: 10s}
  # Extras: each part alone, then additions to the proxy.
  - {name: peak-ewma-only, balancer: {kind: p2c, load: peak-ewma}}
  - name: round-robin+retries+accrual
    balancer: {kind: round-robin}
    classifier: retryable-read-5xx
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s}
    accrual: *seed-accrual
  - name: proxy+best-of-3
    balancer: {kind: best-of, choices: 3, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s}
    accrual: *seed-accrual
  - name: proxy+full-scan
    balancer: {kind: full-scan, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s}
    accrual: *seed-accrual
  - name: proxy+ejection
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s}
    accrual: *seed-accrual
    outlier: {interval: 1s, factor: 3, min_requests: 5, base_ejection: 30s}
  - name: proxy+hedge
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s}
    accrual: *seed-accrual
    hedge: {max_extra_load: 0.05}
";

const HERD: &str = "\
name: herd
description: >-
  50 client-side balancers over 1,000 endpoints serving one request at a time (900 at about
  10 ms, 100 at about 30 ms), at about 60% of capacity
fleet:
  seed: 0
  backends:
    - {name: fast, replicas: 900, latency: {lognormal: {median: 10ms, sigma: 0.3, max: 100ms}}}
    - {name: slow, replicas: 100, latency: {lognormal: {median: 30ms, sigma: 0.3, max: 300ms}}}
servers: {concurrency: 1}
load: {loop: open, arrivals: poisson, rate: 50000, duration: 5s, clients: 50}
deadline: 100ms
arms:
  - {name: random, balancer: {kind: random}}
  - {name: round-robin, balancer: {kind: round-robin}}
  - {name: p2c-least-loaded, balancer: {kind: p2c, load: least-loaded}}
  - {name: p2c-peak-ewma, balancer: {kind: p2c, load: peak-ewma}}
  - {name: full-scan-least-loaded, balancer: {kind: full-scan, load: least-loaded}}
  - {name: full-scan-peak-ewma, balancer: {kind: full-scan, load: peak-ewma}}
  - {name: aperture-least-loaded, balancer: {kind: aperture, load: least-loaded}}
  - {name: aperture-peak-ewma, balancer: {kind: aperture, load: peak-ewma}}
";

const GC_PAUSE: &str = "\
name: gc-pause
description: >-
  Seed 004: one zero-latency backend paused 5 s out of every 10 s (kill -STOP, kill -CONT);
  100 req/s for 30 s. Per-interval percentiles show each pause; one end-of-run mean hides it.
fleet: gc-pause
load: {loop: open, arrivals: constant, rate: 100, duration: 30s}
deadline: 1s
arms:
  - {name: direct, balancer: {kind: round-robin}}
";

/// The fleet `capacity` and `capacity-ramp` share (a macro, so `concat!` can put it in both).
macro_rules! capacity_fleet {
    () => {
        "\
fleet:
  seed: 7
  backends:
    - {name: big, replicas: 10, latency: &svc {lognormal: {median: 20ms, sigma: 0.3, max: 200ms}}, capacity: 4}
    - {name: small, replicas: 9, latency: *svc, capacity: 2}
    - {name: broken, latency: 1ms, capacity: 2, fail: {error: 0.9, status: 503}}
"
    };
}

/// The arms `capacity` and `antagonist` compare: the load-blind baseline, P2C on two load
/// signals, and probing (a macro, like the fleet above).
macro_rules! probing_arms {
    () => {
        "\
arms:
  - {name: round-robin, balancer: {kind: round-robin}}
  - {name: p2c-least-loaded, balancer: {kind: p2c, load: least-loaded}}
  - {name: p2c-peak-ewma, balancer: {kind: p2c, load: peak-ewma}}
  - {name: prequal, balancer: {kind: prequal}}
"
    };
}

const CAPACITY: &str = concat!(
    "\
name: capacity
description: >-
  20 backends with capacity (service about 20 ms; ten of 4 workers, nine of 2, one of 2 that
  fails 90% of requests in 1 ms), 2,610 req/s from 10 clients: 90% of the good backends'
  capacity
",
    capacity_fleet!(),
    "\
load: {loop: open, arrivals: poisson, rate: 2610, duration: 30s, clients: 10}
deadline: 200ms
",
    probing_arms!(),
    "  # Extras: the paper's other end of the RIF band, and reuse.
  - {name: prequal-q0.6, balancer: {kind: prequal, q_rif: 0.6}}
  - {name: prequal-reuse3, balancer: {kind: prequal, max_uses: 3}}
"
);

const CAPACITY_RAMP: &str = concat!(
    "\
name: capacity-ramp
description: >-
  The capacity fleet (20 backends, 2,900 req/s of good capacity) as the offered load climbs
  from 1,450 to 2,755 req/s (50% to 95%) over 30 s, from 10 clients
",
    capacity_fleet!(),
    "\
load:
  loop: open
  arrivals: poisson
  rate: 2755
  ramp: {from: 1450, over: 30s}
  duration: 30s
  clients: 10
deadline: 200ms
arms:
  - {name: p2c-least-loaded, balancer: {kind: p2c, load: least-loaded}}
  - {name: p2c-peak-ewma, balancer: {kind: p2c, load: peak-ewma}}
  - {name: prequal, balancer: {kind: prequal}}
"
);

const ANTAGONIST: &str = concat!(
    "\
name: antagonist
description: >-
  20 backends of 4 workers (service about 20 ms) at 85% load from 10 clients; from 10 s to 20 s
  a noisy neighbour takes three quarters of two of them
fleet:
  seed: 7
  backends:
    - {name: steady, replicas: 18, latency: &svc {lognormal: {median: 20ms, sigma: 0.3, max: 200ms}}, capacity: 4}
    - {name: shared, replicas: 2, latency: *svc, capacity: 4, schedule: ['from 10s to 20s capacity x0.25']}
load: {loop: open, arrivals: poisson, rate: 3400, duration: 30s, clients: 10}
deadline: 200ms
",
    probing_arms!()
);

const STALL: &str = "\
name: stall
description: >-
  Three backends: a and b log-normal (median 5 ms), c ten times slower and failing 20%; a
  paused (SIGSTOP-like) from 10 s to 14 s; 200 req/s for 30 s. The proxy's default before
  this release, whose pick kept choosing the stalled a, and after (the silence priced,
  requests at a silent endpoint rescued).
fleet: stall
load: {loop: open, arrivals: constant, rate: 200, duration: 30s}
deadline: 1s
arms:
  - {name: round-robin, balancer: {kind: round-robin}}
  - name: proxy-before
    balancer: {kind: p2c, load: peak-ewma, pending_age: false}
    classifier: retryable-read-5xx
    retries: {}
    accrual: {kind: io.l5d.consecutiveFailures}
  - name: proxy
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {}
    accrual: {kind: io.l5d.consecutiveFailures}
    rescue_stalled: true
  # Extras: each half alone, and hedging on top.
  - name: proxy-price-only
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {}
    accrual: {kind: io.l5d.consecutiveFailures}
  - name: proxy+hedge
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {}
    accrual: {kind: io.l5d.consecutiveFailures}
    hedge: {max_extra_load: 0.05}
    rescue_stalled: true
";

const OVERLOAD: &str = "\
name: overload
description: >-
  Three backends of 4 workers at 10 ms (1,200 req/s) offered 2,400 req/s for 30 s, then 600 for
  30 s; 20% of requests critical, each due within 100 ms, every failure sent again 100 ms later;
  the servers serve work whose client hung up
fleet:
  seed: 7
  backends:
    - {name: b, replicas: 3, latency: 10ms, capacity: 4}
servers: {abandoned: serve}
load:
  loop: open
  arrivals: poisson
  stages: '30s:2400,30s:600'
  duration: 60s
  critical: 0.2
  request_deadline: 100ms
  retry_after: 100ms
deadline: 100ms
overload: {capacity: 1200, unloaded_p99: 10ms}
arms:
  - {name: no-limit, balancer: {kind: p2c, load: peak-ewma}}
  - name: max-16
    balancer: {kind: p2c, load: peak-ewma}
    max_concurrent_requests: 16
    queue: {max_size: 100, max_wait: 10ms}
  - name: gradient
    balancer: {kind: p2c, load: peak-ewma}
    concurrency_limit: {kind: gradient, rtt_tolerance: 1.0, queue_size: 1}
    queue: {max_size: 100, max_wait: 10ms}
  - name: gradient-criticality
    balancer: {kind: p2c, load: peak-ewma}
    concurrency_limit: {kind: gradient, rtt_tolerance: 1.0, queue_size: 1}
    queue: {max_size: 100, max_wait: 10ms}
    criticality: true
";
