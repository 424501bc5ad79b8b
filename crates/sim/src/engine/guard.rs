//! A runaway arm stopped: more requests than the simulator runs, or requests at one instant
//! without end.

use std::time::Duration;

/// The most requests sent at one virtual instant (ten times the most workers that may start
/// together): a closed loop of zero-latency backends and no interval would otherwise send
/// forever without time moving on.
const MAX_AT_ONCE: u64 = 100_000;

/// Counts an arm's requests, to stop one that runs away.
#[derive(Default)]
pub(super) struct Guard {
    sent: u64,
    at: Duration,
    at_once: u64,
}

impl Guard {
    /// One more request at `now`; `Err` when the arm has gone past a limit.
    pub(super) fn count(&mut self, now: Duration) -> Result<(), String> {
        self.sent += 1;
        if now == self.at {
            self.at_once += 1;
        } else {
            (self.at, self.at_once) = (now, 1);
        }
        if self.sent as f64 > crate::scenario::limits::MAX_REQUESTS {
            return Err(format!(
                "more than {:e} requests: lower the rate or the duration",
                crate::scenario::limits::MAX_REQUESTS
            ));
        }
        if self.at_once > MAX_AT_ONCE {
            return Err(format!(
                "more than {MAX_AT_ONCE} requests at one instant ({:?}): virtual time does not \
                 move on (zero latency and no interval?)",
                now
            ));
        }
        Ok(())
    }
}
