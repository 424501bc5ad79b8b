//! The built-in fleets, written in the fleet file format so each one is also an example of it.
//!
//! - `add-steps` (seed 000, linkerd-examples add-steps): ten servers at 0, 10, 20, 40, 80, 160,
//!   320, 640 ms, 1 s and 2 s; the 1 s one succeeds 60% of the time and the 2 s one 40%, and a
//!   failure (500) takes the full latency, as the original Go servers did.
//! - `slow-middle` (seed 002, Finagle's load-balancer simulation): eleven backends with latency
//!   median 167 ms, sd 5 ms, max 200 ms (a clamped normal), the middle one (index 5) x10 from
//!   15 s to 45 s.
//! - `echo` (seed 003): one zero-latency backend echoing the request body.
//! - `gc-pause` (seed 004): one zero-latency backend paused 5 s out of every 10 s, like the
//!   `kill -STOP` / `kill -CONT` loop of the slow_cooker post.
//! - `stall`: three backends, `a` and `b` log-normal around 5 ms, `c` ten times slower and
//!   failing 20%; `a` paused (SIGSTOP-like) from 10 s to 14 s: the fault the proxy's defaults
//!   must survive (`tailguard sim stall`).

/// Names of the built-in fleets.
pub(crate) const NAMES: &[&str] = &["add-steps", "slow-middle", "echo", "gc-pause", "stall"];

/// The YAML text of a built-in fleet.
pub fn yaml(name: &str) -> Option<&'static str> {
    match name {
        "add-steps" => Some(ADD_STEPS),
        "slow-middle" => Some(SLOW_MIDDLE),
        "echo" => Some(ECHO),
        "gc-pause" => Some(GC_PAUSE),
        "stall" => Some(STALL),
        _ => None,
    }
}

const ADD_STEPS: &str = "\
# Seed 000: ten servers from 0 to 2 s; the slowest two also fail (500, after the full latency).
seed: 0
backends:
  - {name: step-0ms, latency: 0ms}
  - {name: step-10ms, latency: 10ms}
  - {name: step-20ms, latency: 20ms}
  - {name: step-40ms, latency: 40ms}
  - {name: step-80ms, latency: 80ms}
  - {name: step-160ms, latency: 160ms}
  - {name: step-320ms, latency: 320ms}
  - {name: step-640ms, latency: 640ms}
  - {name: step-1s, latency: 1s, fail: {error: 0.4}}
  - {name: step-2s, latency: 2s, fail: {error: 0.6}}
";

const SLOW_MIDDLE: &str = "\
# Seed 002: eleven backends, median 167 ms, sd 5 ms, max 200 ms; b5 x10 from 15 s to 45 s.
seed: 0
backends:
  - {name: b0, latency: &steady {normal: {mean: 167ms, sd: 5ms, max: 200ms}}}
  - {name: b1, latency: *steady}
  - {name: b2, latency: *steady}
  - {name: b3, latency: *steady}
  - {name: b4, latency: *steady}
  - {name: b5, latency: *steady, schedule: ['from 15s to 45s latency x10']}
  - {name: b6, latency: *steady}
  - {name: b7, latency: *steady}
  - {name: b8, latency: *steady}
  - {name: b9, latency: *steady}
  - {name: b10, latency: *steady}
";

const ECHO: &str = "\
# Seed 003: one fast echo backend.
backends:
  - {name: echo, latency: 0s, body: echo}
";

const GC_PAUSE: &str = "\
# Seed 004: paused (SIGSTOP-like) from 5 s to 10 s of every 10 s.
backends:
  - {name: gc, latency: 0s, schedule: ['every 10s pause 5s']}
";

const STALL: &str = "\
# a and b fast (log-normal, median 5 ms); c ten times slower and failing 20%; a paused 10-14 s.
seed: 0
backends:
  - name: a
    latency: &fast {lognormal: {median: 5ms, sigma: 0.5, max: 1s}}
    schedule: ['at 10s pause', 'at 14s resume']
  - {name: b, latency: *fast}
  - {name: c, latency: {lognormal: {median: 50ms, sigma: 0.5, max: 2s}}, fail: {error: 0.2}}
";
