//! How long an endpoint has owed an answer: the silence of an endpoint that stopped answering.
//!
//! # What
//! Per endpoint: the requests still waiting for their answer (`waiting`), `quiet_since` (since
//! when the endpoint has owed one) and `carried` (the silence of requests given up unanswered
//! since its last answer).
//!
//! 1. A request starts at `now`: with none waiting, `quiet_since = now - carried`.
//! 2. A request's answer begins at `now` (a response head, an error status, a refused or reset
//!    connection): `carried = 0` and, while others still wait, `quiet_since = now`.
//! 3. A request is given up unanswered at `now` (a timeout, a backup that won, a cancelled
//!    request): its silence, `now - quiet_since`, is returned to the caller as evidence; when
//!    it was the last one waiting, that silence is `carried` to the next request.
//! 4. `silence(now) = now - quiet_since` while requests wait, else 0.
//!
//! O(1) per event; `now` passed in, no clock read.
//!
//! # Why
//! A round trip is learned only when it ends, so an endpoint that stopped answering (a GC
//! pause, `SIGSTOP`, a full disk) looks as fast as its last answer. Its silence says at once how
//! long it has owed one. An endpoint answering steadily resets it with every answer, so one
//! slow request among answered ones is not a stall. Carrying the silence across requests given
//! up keeps an endpoint whose every request was rescued elsewhere from looking fresh to the
//! next one; the idle time between them is not counted, so an endpoint nobody sent to for an
//! hour does not owe an hour.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_balance::load::Quiet;
//!
//! let ms = Duration::from_millis;
//! let mut q = Quiet::default();
//! q.start(ms(0));
//! q.start(ms(10));
//! assert_eq!(q.silence(ms(50)), ms(50)); // owed an answer since 0
//! q.settle(true, ms(60)); // one answered: the endpoint is alive at 60
//! assert_eq!(q.silence(ms(70)), ms(10));
//! assert_eq!(q.settle(false, ms(100)), Some(ms(40))); // the other given up after 40 ms quiet
//! q.start(ms(500)); // the next request inherits those 40 ms
//! assert_eq!(q.silence(ms(510)), ms(50));
//! ```

use std::time::Duration;

/// The silence of one endpoint (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quiet {
    waiting: u32,
    quiet_since: Duration,
    carried: Duration,
}

impl Quiet {
    /// Step 1: a request was sent at `now`.
    pub fn start(&mut self, now: Duration) {
        if self.waiting == 0 {
            self.quiet_since = now.saturating_sub(self.carried);
        }
        self.waiting = self.waiting.saturating_add(1);
    }

    /// Steps 2 and 3: a request stopped waiting at `now`, `answered` or given up. Returns the
    /// silence a given-up request waited in (`None` when answered, or when nothing waited).
    pub fn settle(&mut self, answered: bool, now: Duration) -> Option<Duration> {
        if self.waiting == 0 {
            return None;
        }
        let silence = self.silence(now);
        self.waiting -= 1;
        if answered {
            self.carried = Duration::ZERO;
            self.quiet_since = self.quiet_since.max(now);
            return None;
        }
        if self.waiting == 0 {
            self.carried = silence;
        }
        Some(silence)
    }

    /// Step 4: how long the endpoint has owed an answer at `now`.
    pub fn silence(&self, now: Duration) -> Duration {
        if self.waiting == 0 {
            return Duration::ZERO;
        }
        now.saturating_sub(self.quiet_since)
    }

    /// Requests waiting for their answer.
    pub fn waiting(&self) -> u32 {
        self.waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn an_answer_while_others_wait_restarts_the_silence_at_the_answer() {
        let mut q = Quiet::default();
        q.start(ms(0));
        q.start(ms(5));
        assert_eq!(q.settle(true, ms(8)), None);
        assert_eq!(q.silence(ms(20)), ms(12));
        assert_eq!(q.settle(true, ms(30)), None);
        assert_eq!(q.silence(ms(40)), Duration::ZERO, "nothing waits");
    }

    #[test]
    fn given_up_requests_carry_their_silence_to_the_next_until_an_answer() {
        let mut q = Quiet::default();
        q.start(ms(0));
        assert_eq!(q.settle(false, ms(60)), Some(ms(60)));
        assert_eq!(
            q.silence(ms(1_000)),
            Duration::ZERO,
            "the idle gap is not owed"
        );
        q.start(ms(1_000));
        assert_eq!(q.silence(ms(1_010)), ms(70));
        assert_eq!(q.settle(false, ms(1_040)), Some(ms(100)));
        q.start(ms(2_000));
        assert_eq!(q.settle(true, ms(2_003)), None);
        q.start(ms(3_000));
        assert_eq!(
            q.silence(ms(3_001)),
            ms(1),
            "an answer clears what was carried"
        );
    }

    #[test]
    fn settling_more_than_was_started_changes_nothing() {
        let mut q = Quiet::default();
        assert_eq!(q.settle(false, ms(5)), None);
        assert_eq!(q.settle(true, ms(5)), None);
        assert_eq!(q, Quiet::default());
    }

    proptest! {
        /// Whatever the events, the silence never exceeds the time since the endpoint last
        /// answered (or since zero), and is zero with nothing waiting.
        #[test]
        fn silence_is_bounded_by_the_time_since_the_last_answer(
            events in proptest::collection::vec((0u8..3, 0u64..50), 1..200),
        ) {
            let mut q = Quiet::default();
            let mut now = Duration::ZERO;
            let mut last_answer = Duration::ZERO;
            for (kind, step) in events {
                now += ms(step);
                match kind {
                    0 => q.start(now),
                    1 => {
                        if q.waiting() > 0 {
                            last_answer = now;
                        }
                        q.settle(true, now);
                    }
                    _ => {
                        q.settle(false, now);
                    }
                }
                let s = q.silence(now);
                if q.waiting() == 0 {
                    prop_assert_eq!(s, Duration::ZERO);
                } else {
                    prop_assert!(s <= now - last_answer, "{s:?} {now:?} {last_answer:?}");
                }
            }
        }
    }
}
