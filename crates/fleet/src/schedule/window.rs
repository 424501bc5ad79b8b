//! When a fault is active: one span (`from 15s to 45s`) or a periodic window (`every 10s for 5s`).
//!
//! All times are elapsed since the fleet started. Intervals are half-open: a window `[a, b)` is
//! active at `a` and no longer at `b`.

use std::fmt;
use std::time::Duration;
use tailguard_text::duration::format_duration;

/// A time window relative to the fleet's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// `[from, to)`, or `[from, ∞)` when `to` is `None`.
    Span {
        /// Start.
        from: Duration,
        /// End, if any.
        to: Option<Duration>,
    },
    /// `[first + k·period, first + k·period + length)` for k = 0, 1, ..., cut off at `to`.
    Every {
        /// Time between the starts of two occurrences (> 0).
        period: Duration,
        /// Length of each occurrence (0 < length < period).
        length: Duration,
        /// Start of the first occurrence.
        first: Duration,
        /// No occurrence reaches past this time, if given.
        to: Option<Duration>,
    },
}

impl Window {
    /// True when the window is active at `t`.
    pub fn contains(&self, t: Duration) -> bool {
        self.occurrence_end(t).is_some()
    }

    /// When `t` falls in the window: `Some(end of that occurrence)`, where an end of `None`
    /// means the window never closes. `None` when `t` is outside the window.
    pub fn occurrence_end(&self, t: Duration) -> Option<Option<Duration>> {
        match *self {
            Window::Span { from, to } => (t >= from && to.is_none_or(|to| t < to)).then_some(to),
            Window::Every {
                period,
                length,
                first,
                to,
            } => {
                if t < first || to.is_some_and(|to| t >= to) {
                    return None;
                }
                let start = occurrence_start(t, first, period);
                let end = start + length;
                (t < end).then_some(Some(to.map_or(end, |to| end.min(to))))
            }
        }
    }

    /// The first time after `t` at which the window opens or closes, if it ever does again.
    pub fn next_boundary(&self, t: Duration) -> Option<Duration> {
        match *self {
            Window::Span { from, to } => [Some(from), to].into_iter().flatten().find(|b| *b > t),
            Window::Every {
                period,
                length,
                first,
                to,
            } => {
                let next = if t < first {
                    first
                } else {
                    let start = occurrence_start(t, first, period);
                    if t < start + length {
                        start + length
                    } else {
                        start + period
                    }
                };
                match to {
                    Some(to) if to <= t => None,
                    Some(to) => Some(next.min(to)),
                    None => Some(next),
                }
            }
        }
    }

    /// The same window `by` later (for faults written relative to "now").
    pub fn shifted(self, by: Duration) -> Window {
        let add = |t: Duration| t.saturating_add(by);
        match self {
            Window::Span { from, to } => Window::Span {
                from: add(from),
                to: to.map(add),
            },
            Window::Every {
                period,
                length,
                first,
                to,
            } => Window::Every {
                period,
                length,
                first: add(first),
                to: to.map(add),
            },
        }
    }

    /// Closes the window at `at`: nothing of it is active from `at` on (earlier is unchanged).
    pub fn end_at(&mut self, at: Duration) {
        match self {
            Window::Span { to, .. } | Window::Every { to, .. } => {
                *to = Some(to.map_or(at, |to| to.min(at)));
            }
        }
    }
}

/// Start of the occurrence of a periodic window that contains or precedes `t >= first`.
fn occurrence_start(t: Duration, first: Duration, period: Duration) -> Duration {
    let k = (t - first).as_nanos() / period.as_nanos();
    first + Duration::from_nanos((k * period.as_nanos()) as u64)
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: Duration| format_duration(d);
        match *self {
            Window::Span { from, to: None } => write!(f, "from {}", d(from)),
            Window::Span { from, to: Some(to) } => write!(f, "from {} to {}", d(from), d(to)),
            Window::Every {
                period,
                length,
                first,
                to,
            } => {
                write!(f, "every {} for {} from {}", d(period), d(length), d(first))?;
                match to {
                    Some(to) => write!(f, " to {}", d(to)),
                    None => Ok(()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn span_is_half_open() {
        let w = Window::Span {
            from: s(15),
            to: Some(s(45)),
        };
        assert!(!w.contains(s(14)));
        assert_eq!(w.occurrence_end(s(15)), Some(Some(s(45))));
        assert!(!w.contains(s(45)));
        assert_eq!(w.next_boundary(s(0)), Some(s(15)));
        assert_eq!(w.next_boundary(s(15)), Some(s(45)));
        assert_eq!(w.next_boundary(s(45)), None);
    }

    #[test]
    fn every_repeats_and_stops_at_to() {
        let w = Window::Every {
            period: s(10),
            length: s(5),
            first: s(5),
            to: Some(s(32)),
        };
        let active: Vec<u64> = (0..40).filter(|t| w.contains(s(*t))).collect();
        assert_eq!(
            active,
            [5, 6, 7, 8, 9, 15, 16, 17, 18, 19, 25, 26, 27, 28, 29]
        );
        assert_eq!(w.occurrence_end(s(7)), Some(Some(s(10))));
        assert_eq!(w.next_boundary(s(0)), Some(s(5)));
        assert_eq!(w.next_boundary(s(7)), Some(s(10)));
        assert_eq!(w.next_boundary(s(10)), Some(s(15)));
        assert_eq!(w.next_boundary(s(29)), Some(s(30)));
        assert_eq!(w.next_boundary(s(30)), Some(s(32)));
        assert_eq!(w.next_boundary(s(32)), None);
    }

    #[test]
    fn end_at_only_shortens() {
        let mut w = Window::Span {
            from: s(1),
            to: None,
        };
        w.end_at(s(9));
        w.end_at(s(20));
        assert_eq!(
            w,
            Window::Span {
                from: s(1),
                to: Some(s(9))
            }
        );
    }
}
