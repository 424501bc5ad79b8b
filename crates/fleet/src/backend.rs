//! One backend's behaviour and the decision it makes for each request.
//!
//! [`BackendSpec::decide`] is the whole request model: draw a latency from the distribution,
//! apply the latency effects active at that time, then draw the outcome from the failure mix
//! (as changed by active `fail`/`close`/`reset` effects). It draws from the RNG the same way
//! whatever the effects, so a seeded simulation and a seeded live backend make the same
//! decisions for the same arrival times.
//!
//! The protocol for a request arriving at elapsed time `t` (the live server and the simulator
//! both follow it):
//! 1. if [`BackendSpec::is_down`] at `t`, the connection is refused;
//! 2. if [`BackendSpec::paused_until`] at `t` is `Some(r)`, nothing happens until `r`, and the
//!    request is then handled as if it arrived at `r`;
//! 3. otherwise `decide(t)` gives a latency and an outcome; a response that falls due during a
//!    pause leaves when the pause ends.
//!
//! # Example
//! ```
//! use rand::SeedableRng;
//! use std::time::Duration;
//! use tailguard_fleet::{BackendSpec, LatencyDist, Outcome, Schedule};
//! let mut spec = BackendSpec::new("slow", LatencyDist::Fixed(Duration::from_millis(10)));
//! spec.schedule = Schedule::parse(&["from 15s to 45s latency x10"]).unwrap();
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let d = spec.decide(Duration::from_secs(20), &mut rng);
//! assert_eq!(d.latency, Duration::from_millis(100));
//! assert_eq!(d.outcome, Outcome::Respond { status: 200 });
//! ```

pub use crate::limits::{scale_latency, MAX_BODY_BYTES, MAX_LATENCY};
use crate::{Capacity, Effect, Failure, Fault, LatencyDist, Outcome, Schedule, Window};
use rand::Rng;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The decision for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// How long to wait before acting.
    pub latency: Duration,
    /// What to do then.
    pub outcome: Outcome,
}

/// The response body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Body {
    /// The backend's name and a newline (tells which backend answered).
    #[default]
    Name,
    /// Echo the request body.
    Echo,
    /// This text.
    Text(String),
    /// This many bytes of `x`.
    Size(usize),
}

/// A body flag that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a body: {reason}")]
pub struct BodyError {
    text: String,
    reason: &'static str,
}

impl FromStr for Body {
    type Err = BodyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |reason| BodyError {
            text: text.to_owned(),
            reason,
        };
        let usage = "use name, echo, size:BYTES or text:TEXT";
        match text.split_once(':') {
            None if text == "name" => Ok(Body::Name),
            None if text == "echo" => Ok(Body::Echo),
            Some(("text", t)) => Ok(Body::Text(t.to_owned())),
            Some(("size", n)) => match n.trim().parse::<u64>() {
                Ok(n) => size(n).map_err(bad),
                Err(_) => Err(bad(usage)),
            },
            _ => Err(bad(usage)),
        }
    }
}

/// A `size` body of `n` bytes, at most [`MAX_BODY_BYTES`].
fn size(n: u64) -> Result<Body, &'static str> {
    match usize::try_from(n) {
        Ok(n) if n <= MAX_BODY_BYTES => Ok(Body::Size(n)),
        _ => Err("size must be at most 16777216 bytes (16 MiB)"),
    }
}

/// `name`, `echo`, `size:N`, `text:T`, or a one-key mapping `{size: N}` / `{text: T}`.
impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(BodyVisitor)
    }
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = Body;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("name, echo, {text: TEXT} or {size: BYTES}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Body, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Body, A::Error> {
        let body = match map.next_key::<String>()?.as_deref() {
            Some("text") => Body::Text(map.next_value()?),
            Some("size") => size(map.next_value()?).map_err(de::Error::custom)?,
            Some(other) => return Err(de::Error::unknown_variant(other, &["text", "size"])),
            None => return Err(de::Error::custom("empty body mapping")),
        };
        if map.next_key::<String>()?.is_some() {
            return Err(de::Error::custom(
                "body: give exactly one of `text` and `size`",
            ));
        }
        Ok(body)
    }
}

impl fmt::Display for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Name => f.write_str("name"),
            Body::Echo => f.write_str("echo"),
            Body::Text(t) => write!(f, "text:{t}"),
            Body::Size(n) => write!(f, "size:{n}"),
        }
    }
}

/// One backend: its name and behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendSpec {
    /// Unique within the fleet.
    pub name: String,
    /// Latency before every response (failures included).
    pub latency: LatencyDist,
    /// Failure mix.
    pub failure: Failure,
    /// Scheduled faults.
    pub schedule: Schedule,
    /// Response body.
    pub body: Body,
    /// Requests served at once, the others waiting (`None`: every request at once, its latency
    /// whatever the load).
    pub capacity: Option<Capacity>,
}

impl BackendSpec {
    /// A backend with this latency that never fails.
    pub fn new(name: impl Into<String>, latency: LatencyDist) -> BackendSpec {
        BackendSpec {
            name: name.into(),
            latency,
            failure: Failure::default(),
            schedule: Schedule::default(),
            body: Body::default(),
            capacity: None,
        }
    }

    /// The workers at `elapsed`, the schedule's `capacity` effects applied (`None`: no
    /// capacity). A scaled capacity keeps at least one worker.
    pub fn workers(&self, elapsed: Duration) -> Option<u32> {
        let base = self.capacity?.workers;
        let mut workers = base;
        for effect in self.schedule.effects(elapsed) {
            match *effect {
                Effect::CapacityScale(x) => {
                    workers = ((f64::from(base) * x).round() as u32).max(1);
                }
                Effect::CapacitySet(n) => workers = n,
                _ => {}
            }
        }
        Some(workers)
    }

    /// What this backend does with a request that arrives `elapsed` after the fleet started.
    pub fn decide<R: Rng + ?Sized>(&self, elapsed: Duration, rng: &mut R) -> Decision {
        let mut latency = self.latency.sample(rng).min(MAX_LATENCY);
        let mut failure = self.failure;
        for effect in self.schedule.effects(elapsed) {
            match *effect {
                Effect::LatencyScale(x) => latency = scale_latency(latency, x),
                Effect::LatencyAdd(d) => latency = latency.saturating_add(d).min(MAX_LATENCY),
                Effect::LatencySet(d) => latency = d.min(MAX_LATENCY),
                Effect::Fail { rate, status } => failure = failure.with_error(rate, status),
                Effect::Close(p) => failure = failure.with_close(p),
                Effect::Reset(p) => failure = failure.with_reset(p),
                Effect::Pause
                | Effect::Down
                | Effect::CapacityScale(_)
                | Effect::CapacitySet(_) => {}
            }
        }
        Decision {
            latency,
            outcome: failure.draw(rng),
        }
    }

    /// If the backend is paused (SIGSTOP-like) at `elapsed`, the elapsed time at which it
    /// resumes (`Duration::MAX` if never).
    pub fn paused_until(&self, elapsed: Duration) -> Option<Duration> {
        self.schedule.paused_until(elapsed)
    }

    /// True when the backend is down (refusing connections) at `elapsed`.
    pub fn is_down(&self, elapsed: Duration) -> bool {
        self.schedule.is_down(elapsed)
    }

    /// Pauses from `at`, for `length` or until [`BackendSpec::resume`].
    pub fn pause(&mut self, at: Duration, length: Option<Duration>) {
        self.push_span(at, length, Effect::Pause);
    }

    /// Ends every pause from `at` on, scheduled ones included.
    pub fn resume(&mut self, at: Duration) {
        self.schedule.end_all(Effect::Pause, at);
    }

    /// Goes down from `at`, for `length` or until [`BackendSpec::come_up`].
    pub fn go_down(&mut self, at: Duration, length: Option<Duration>) {
        self.push_span(at, length, Effect::Down);
    }

    /// Ends every down window from `at` on, scheduled ones included.
    pub fn come_up(&mut self, at: Duration) {
        self.schedule.end_all(Effect::Down, at);
    }

    fn push_span(&mut self, at: Duration, length: Option<Duration>, effect: Effect) {
        let to = length.map(|l| at.saturating_add(l));
        self.schedule.push(Fault {
            window: Window::Span { from: at, to },
            effect,
        });
    }
}
