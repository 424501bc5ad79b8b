//! One scheduled fault, written as a short sentence and parsed once into a [`Fault`].
//!
//! ```text
//! fault   = window effect [window-options]
//! window  = "from" T ["to" T] | "at" T | "every" P ["for" L] ["from" T] ["to" T]
//! effect  = "latency" ("x" N | "+" D | D)       multiply, add to, or replace the latency
//!         | "fail" PCT ["status" CODE]           error probability (and status)
//!         | "close" PCT | "reset" PCT            close / reset probability
//!         | "pause" [D]                          stop reading and answering, like SIGSTOP
//!         | "down"                               refuse connections
//!         | "capacity" ("x" N | N)                 multiply or set the workers (see `capacity`)
//! ```
//! `every 10s pause 5s` pauses 5 s at the end of each 10 s period (from 5 s to 10 s, 15 s to
//! 20 s, ...); add `from T` to choose the first start. `at 30s down` lasts until an `at 40s up`
//! later in the same schedule (likewise `at T pause` and `at T resume`); see
//! [`super::Schedule`].
//!
//! # Example
//! ```
//! use tailguard_fleet::{Effect, Fault};
//! let fault: Fault = "from 15s to 45s latency x10".parse().unwrap();
//! assert_eq!(fault.effect, Effect::LatencyScale(10.0));
//! assert_eq!(fault.to_string(), "from 15s to 45s latency x10");
//! ```

use super::Window;
use crate::Ratio;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use tailguard_text::duration::{format_duration, parse_duration};

/// A fault sentence that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("fault `{text}`: {reason}")]
pub struct FaultError {
    /// The sentence.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// What a fault does while its window is active.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Effect {
    /// Multiply the sampled latency.
    LatencyScale(f64),
    /// Add to the sampled latency.
    LatencyAdd(Duration),
    /// Replace the sampled latency.
    LatencySet(Duration),
    /// Replace the error probability (and the status, if given).
    Fail {
        /// Error probability.
        rate: Ratio,
        /// Error status; the backend's own when `None`.
        status: Option<u16>,
    },
    /// Replace the close probability.
    Close(Ratio),
    /// Replace the reset probability.
    Reset(Ratio),
    /// Stop reading and answering (SIGSTOP-like).
    Pause,
    /// Refuse connections.
    Down,
    /// Multiply the backend's workers (a noisy neighbour); at least one remains.
    CapacityScale(f64),
    /// Set the backend's workers.
    CapacitySet(u32),
}

/// An effect and when it is active.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fault {
    /// When.
    pub window: Window,
    /// What.
    pub effect: Effect,
}

/// A parsed sentence: a fault, or the end of an open-ended pause or down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Line {
    Fault(Fault),
    /// `at T up` (`pause == false`) or `at T resume` (`pause == true`).
    End {
        at: Duration,
        pause: bool,
    },
}

impl FromStr for Fault {
    type Err = FaultError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match parse_line(text)? {
            Line::Fault(fault) => Ok(fault),
            Line::End { .. } => Err(FaultError {
                text: text.to_owned(),
                reason: "`up`/`resume` only ends an earlier `at ... down`/`pause` in a schedule"
                    .to_owned(),
            }),
        }
    }
}

/// The window words seen so far.
#[derive(Default)]
struct Words {
    from: Option<Duration>,
    to: Option<Duration>,
    at: Option<Duration>,
    every: Option<Duration>,
    length: Option<Duration>,
}

pub(crate) fn parse_line(text: &str) -> Result<Line, FaultError> {
    let fail = |reason: String| FaultError {
        text: text.to_owned(),
        reason,
    };
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut words = Words::default();
    let mut effect = None;
    let mut i = 0;
    while i < tokens.len() {
        let word = tokens[i];
        let slot = match word {
            "from" => &mut words.from,
            "to" => &mut words.to,
            "at" => &mut words.at,
            "every" => &mut words.every,
            "for" => &mut words.length,
            _ if effect.is_none() => {
                let (parsed, used) = parse_effect(&tokens[i..]).map_err(fail)?;
                effect = Some(parsed);
                i += used;
                continue;
            }
            _ => return Err(fail(format!("unexpected `{word}`"))),
        };
        let value = tokens
            .get(i + 1)
            .ok_or_else(|| fail(format!("`{word}` needs a time")))?;
        let value = parse_duration(value).map_err(|e| fail(e.to_string()))?;
        if slot.replace(value).is_some() {
            return Err(fail(format!("`{word}` given twice")));
        }
        i += 2;
    }
    let effect = effect.ok_or_else(|| fail("no effect: add e.g. `latency x10`".to_owned()))?;
    build(words, effect).map_err(fail)
}

/// A parsed effect; `Pause` may carry its own length.
enum Parsed {
    Effect(Effect),
    Pause(Option<Duration>),
    End { pause: bool },
}

fn parse_effect(tokens: &[&str]) -> Result<(Parsed, usize), String> {
    let arg = |n: usize| tokens.get(n).copied();
    let need = |n: usize, what: &str| arg(n).ok_or_else(|| format!("`{}` needs {what}", tokens[0]));
    let pct = |t: &str| Ratio::parse_percent(t).map_err(|e| e.to_string());
    let effect = match tokens[0] {
        "latency" => (Parsed::Effect(latency(need(1, "`xN`, `+D` or `D`")?)?), 2),
        "fail" => {
            let rate = pct(need(1, "a percentage")?)?;
            if arg(2) == Some("status") {
                let code = need(3, "a status")?;
                let status = code
                    .parse::<u16>()
                    .map_err(|_| format!("status: `{code}` is not an HTTP status"))
                    .and_then(|s| crate::failure::failure_status(s).map_err(|e| e.to_string()))?;
                let status = Some(status);
                (Parsed::Effect(Effect::Fail { rate, status }), 4)
            } else {
                (Parsed::Effect(Effect::Fail { rate, status: None }), 2)
            }
        }
        "close" => (
            Parsed::Effect(Effect::Close(pct(need(1, "a percentage")?)?)),
            2,
        ),
        "reset" => (
            Parsed::Effect(Effect::Reset(pct(need(1, "a percentage")?)?)),
            2,
        ),
        "pause" => match arg(1).map(parse_duration) {
            Some(Ok(d)) => (Parsed::Pause(Some(d)), 2),
            _ => (Parsed::Pause(None), 1),
        },
        "down" => (Parsed::Effect(Effect::Down), 1),
        "capacity" => (
            Parsed::Effect(capacity(need(1, "`xN` or a number of workers")?)?),
            2,
        ),
        "up" => (Parsed::End { pause: false }, 1),
        "resume" => (Parsed::End { pause: true }, 1),
        other => {
            return Err(format!(
                "unknown effect `{other}`: use latency, fail, close, reset, pause, down or capacity"
            ))
        }
    };
    Ok(effect)
}

/// The largest factor of a `latency xN` or `capacity xN` fault.
pub const MAX_FACTOR: f64 = 1_000_000.0;

fn latency(arg: &str) -> Result<Effect, String> {
    let factor = arg
        .strip_prefix('x')
        .or_else(|| arg.strip_prefix('*'))
        .or_else(|| arg.strip_prefix('×'));
    if let Some(factor) = factor {
        return factor
            .parse::<f64>()
            .ok()
            .filter(|f| (0.0..=MAX_FACTOR).contains(f))
            .map(Effect::LatencyScale)
            .ok_or_else(|| {
                format!("`{arg}` is not a factor (from 0, at most {MAX_FACTOR}): write e.g. `x10`")
            });
    }
    let (text, effect): (_, fn(Duration) -> Effect) = match arg.strip_prefix('+') {
        Some(add) => (add, Effect::LatencyAdd),
        None => (arg, Effect::LatencySet),
    };
    match parse_duration(text).map_err(|e| e.to_string())? {
        d if d > crate::limits::MAX_LATENCY => Err(format!("`{arg}`: at most 1h")),
        d => Ok(effect(d)),
    }
}

fn capacity(arg: &str) -> Result<Effect, String> {
    if let Some(factor) = arg.strip_prefix('x').or_else(|| arg.strip_prefix('*')) {
        return factor
            .parse::<f64>()
            .ok()
            .filter(|f| *f > 0.0 && *f <= MAX_FACTOR)
            .map(Effect::CapacityScale)
            .ok_or_else(|| {
                format!(
                    "`{arg}` is not a factor (above 0, at most {MAX_FACTOR}): write e.g. `x0.25`"
                )
            });
    }
    arg.parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .map(Effect::CapacitySet)
        .ok_or_else(|| format!("`{arg}` is neither `xN` nor a number of workers from 1"))
}

fn build(words: Words, parsed: Parsed) -> Result<Line, String> {
    let (effect, pause_len) = match parsed {
        Parsed::Effect(effect) => (effect, None),
        Parsed::Pause(len) => (Effect::Pause, len),
        Parsed::End { pause } => {
            return match (words.at, words.from, words.to, words.every) {
                (Some(at), None, None, None) => Ok(Line::End { at, pause }),
                _ => Err("`up` and `resume` take only `at T`".to_owned()),
            }
        }
    };
    let window = match words.every {
        Some(period) => every(period, &words, pause_len)?,
        None => span(&words, pause_len)?,
    };
    Ok(Line::Fault(Fault { window, effect }))
}

fn every(period: Duration, words: &Words, pause_len: Option<Duration>) -> Result<Window, String> {
    if words.at.is_some() {
        return Err("`every` cannot be combined with `at`: use `from`".to_owned());
    }
    let length = match (words.length, pause_len) {
        (Some(_), Some(_)) => return Err("give the length once: `for L` or `pause L`".to_owned()),
        (Some(l), None) | (None, Some(l)) => l,
        (None, None) => return Err("`every` needs a length: `for 2s` or `pause 5s`".to_owned()),
    };
    if length.is_zero() || length >= period {
        return Err("an `every` window's length must be above 0 and below its period".to_owned());
    }
    let first = words.from.unwrap_or(period - length);
    if words.to.is_some_and(|to| to <= first) {
        return Err("`to` must come after the first start".to_owned());
    }
    Ok(Window::Every {
        period,
        length,
        first,
        to: words.to,
    })
}

fn span(words: &Words, pause_len: Option<Duration>) -> Result<Window, String> {
    if words.length.is_some() {
        return Err("`for` goes with `every`; a span uses `from A to B`".to_owned());
    }
    let from = match (words.from, words.at) {
        (Some(t), None) | (None, Some(t)) => t,
        (Some(_), Some(_)) => return Err("give `from` or `at`, not both".to_owned()),
        (None, None) => return Err("no time: start with `from`, `at` or `every`".to_owned()),
    };
    let to = match (words.to, pause_len) {
        (Some(_), Some(_)) => return Err("give the end once: `to T` or `pause D`".to_owned()),
        (to, None) => to,
        // The end must be a time the grammar can write back (at most 2^64 - 1 ns).
        (None, Some(len)) => Some(
            from.checked_add(len)
                .filter(|t| u64::try_from(t.as_nanos()).is_ok())
                .ok_or("the window would end past the longest duration (584 years)")?,
        ),
    };
    if to.is_some_and(|to| to <= from) {
        return Err("`to` must come after `from`".to_owned());
    }
    Ok(Window::Span { from, to })
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Effect::LatencyScale(x) => write!(f, "latency x{x}"),
            Effect::LatencyAdd(d) => write!(f, "latency +{}", format_duration(*d)),
            Effect::LatencySet(d) => write!(f, "latency {}", format_duration(*d)),
            Effect::Fail { rate, status: None } => write!(f, "fail {rate}"),
            Effect::Fail {
                rate,
                status: Some(s),
            } => write!(f, "fail {rate} status {s}"),
            Effect::Close(r) => write!(f, "close {r}"),
            Effect::Reset(r) => write!(f, "reset {r}"),
            Effect::Pause => f.write_str("pause"),
            Effect::Down => f.write_str("down"),
            Effect::CapacityScale(x) => write!(f, "capacity x{x}"),
            Effect::CapacitySet(n) => write!(f, "capacity {n}"),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.window, self.effect)
    }
}
