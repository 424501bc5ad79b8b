//! A backend's fault schedule: which faults are active at an elapsed time, and until when.
//!
//! The schedule is a list of [`Fault`] sentences (see [`fault`] for the grammar). Queries take
//! the elapsed time as an argument and read no clock, so the live server (crates/serve), the
//! simulator and paused-time tests all ask the same questions:
//! - [`Schedule::effects`]: the active effects, in the order written (latency effects compose
//!   in that order: `latency x10` then `latency +5ms` is `10·l + 5 ms`);
//! - [`Schedule::paused_until`] and [`Schedule::is_down`] for the SIGSTOP-like pause and for
//!   refusing connections;
//! - [`Schedule::next_change`] so a driver sleeps until the next boundary instead of polling.
//!
//! `at T down` is open-ended until a later `at T' up` in the same list closes it (likewise
//! `at T pause` and `at T resume`).
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_fleet::Schedule;
//! let s = Schedule::parse(&["every 10s pause 5s", "at 30s down", "at 40s up"]).unwrap();
//! let t = Duration::from_secs;
//! assert_eq!(s.paused_until(t(6)), Some(t(10)));
//! assert!(s.is_down(t(35)) && !s.is_down(t(40)));
//! ```

pub mod fault;
mod window;

pub use fault::{Effect, Fault, FaultError, MAX_FACTOR};
pub use window::Window;

use fault::Line;
use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// Chained pause windows are followed at most this many times before the pause is taken to
/// never end (two overlapping periodic pauses can cover all time).
const MAX_CHAIN: usize = 10_000;

/// Faults in the order they were written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    faults: Vec<Fault>,
}

impl Schedule {
    /// Parses fault sentences, pairing `at T up` / `at T resume` with the open-ended
    /// `down` / `pause` before them.
    ///
    /// # Errors
    /// [`FaultError`] for the first sentence that does not parse or pair.
    pub fn parse<S: AsRef<str>>(lines: &[S]) -> Result<Schedule, FaultError> {
        let mut schedule = Schedule::default();
        for text in lines {
            let text = text.as_ref();
            match fault::parse_line(text)? {
                Line::Fault(f) => schedule.faults.push(f),
                Line::End { at, pause } => {
                    schedule
                        .close_open(at, pause)
                        .map_err(|reason| FaultError {
                            text: text.to_owned(),
                            reason,
                        })?
                }
            }
        }
        Ok(schedule)
    }

    /// Ends the latest open-ended pause (or down) that started before `at`.
    fn close_open(&mut self, at: Duration, pause: bool) -> Result<(), String> {
        let wanted = if pause { Effect::Pause } else { Effect::Down };
        let open = self.faults.iter_mut().rev().find(|f| {
            f.effect == wanted && matches!(f.window, Window::Span { from, to: None } if from < at)
        });
        match open {
            Some(fault) => {
                fault.window.end_at(at);
                Ok(())
            }
            None => Err(format!(
                "no open-ended `at T {wanted}` before {} to end",
                tailguard_text::duration::format_duration(at)
            )),
        }
    }

    /// The faults.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// Appends a fault (the control endpoint's run-time changes go through here).
    pub fn push(&mut self, fault: Fault) {
        self.faults.push(fault);
    }

    /// Ends every fault with effect `kind` (compared by variant) from `at` on, scheduled
    /// occurrences included.
    pub fn end_all(&mut self, kind: Effect, at: Duration) {
        let same = |e: &Effect| std::mem::discriminant(e) == std::mem::discriminant(&kind);
        for fault in self.faults.iter_mut().filter(|f| same(&f.effect)) {
            fault.window.end_at(at);
        }
    }

    /// The effects active at `t`, in the order written.
    pub fn effects(&self, t: Duration) -> impl Iterator<Item = &Effect> + '_ {
        self.faults
            .iter()
            .filter(move |f| f.window.contains(t))
            .map(|f| &f.effect)
    }

    /// True when a `down` fault is active at `t`.
    pub fn is_down(&self, t: Duration) -> bool {
        self.effects(t).any(|e| *e == Effect::Down)
    }

    /// When paused at `t`: the time the pause ends, following back-to-back and overlapping
    /// pause windows; `Duration::MAX` when it never ends. `None` when not paused at `t`.
    pub fn paused_until(&self, t: Duration) -> Option<Duration> {
        let pauses: Vec<&Window> = self
            .faults
            .iter()
            .filter(|f| f.effect == Effect::Pause)
            .map(|f| &f.window)
            .collect();
        let mut end = t;
        for _ in 0..MAX_CHAIN {
            let mut later = None;
            for w in &pauses {
                match w.occurrence_end(end) {
                    Some(None) => return Some(Duration::MAX),
                    Some(Some(e)) => later = later.max(Some(e)),
                    None => {}
                }
            }
            match later {
                Some(e) => end = e,
                None => return (end > t).then_some(end),
            }
        }
        Some(Duration::MAX)
    }

    /// The first time after `t` at which any fault starts or ends.
    pub fn next_change(&self, t: Duration) -> Option<Duration> {
        self.faults
            .iter()
            .filter_map(|f| f.window.next_boundary(t))
            .min()
    }
}

/// One sentence, parsed while the YAML reader still knows its line.
struct LineDe(Line);

impl<'de> Deserialize<'de> for LineDe {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        // Failing inside `visit_str` (not after it) lets serde_yaml_ng point at this element.
        de.deserialize_str(LineVisitor)
    }
}

struct LineVisitor;

impl Visitor<'_> for LineVisitor {
    type Value = LineDe;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a fault such as 'from 15s to 45s latency x10'")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<LineDe, E> {
        fault::parse_line(text).map(LineDe).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_seq(ScheduleVisitor)
    }
}

struct ScheduleVisitor;

impl<'de> Visitor<'de> for ScheduleVisitor {
    type Value = Schedule;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of faults such as ['from 15s to 45s latency x10']")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Schedule, A::Error> {
        let mut schedule = Schedule::default();
        while let Some(LineDe(line)) = seq.next_element()? {
            match line {
                Line::Fault(f) => schedule.faults.push(f),
                Line::End { at, pause } => schedule
                    .close_open(at, pause)
                    .map_err(serde::de::Error::custom)?,
            }
        }
        Ok(schedule)
    }
}

#[cfg(test)]
mod tests;
