//! The pacer: a dedicated thread that releases each request at its scheduled time.
//!
//! Why a thread and not a Tokio timer: Tokio's timer wheel has 1 ms granularity, so a
//! generator sleeping on it sends in 1 ms bursts and adds up to 1 ms of its own lag to every
//! latency measured from the schedule, more than a loopback round trip. The pacer sets its
//! timer slack to 1 µs (the default 50 µs slack is what makes plain sleeps late) and sleeps
//! with the OS until each due time, then hands the request to the I/O runtime through a
//! queue. Measured here: such a sleep wakes 10 µs late at the median, 15 µs at p90, on an idle
//! core; spinning the last microseconds would buy a few of them for a busy core, which on a
//! small machine the server under test needs more. Its own lateness (due time to hand-off) is
//! recorded, so a generator that cannot keep up says so.

use crate::clock::Clock;
use crate::worker::Job;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_histogram::Histogram;
use tailguard_pacing::Schedule;

/// Below this much time to go, the pacer spins instead of sleeping (less than a sleep's
/// own overshoot, so a sleep could only make it later).
const SPIN: Duration = Duration::from_micros(2);
/// Longest single sleep, so a stop request is noticed quickly even at low rates.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// What the pacer shares with the rest of the run.
#[derive(Debug, Default)]
pub(crate) struct PacerState {
    /// Set to stop early (Ctrl-C).
    pub stop: AtomicBool,
    /// Requests handed to the workers so far.
    pub dispatched: AtomicU64,
    /// Due time to hand-off, per request, since the last interval.
    pub lateness: Mutex<Histogram>,
}

/// When the pacer stops.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub total: Option<u64>,
    pub duration: Option<Duration>,
}

/// Starts the pacer thread; it closes `jobs` when the schedule ends.
pub(crate) fn spawn(
    mut schedule: Schedule,
    limits: Limits,
    clock: Clock,
    jobs: async_channel::Sender<Job>,
    state: Arc<PacerState>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("tailguard-pacer".into())
        .spawn(move || {
            if let Err(err) = nix::sys::prctl::set_timerslack(1_000) {
                tracing::debug!(%err, "cannot lower the pacer's timer slack");
            }
            let mut lateness = Histogram::new();
            let mut flushed = Duration::ZERO;
            let mut index = 0u64;
            while !state.stop.load(Ordering::Relaxed) {
                if limits.total.is_some_and(|n| index >= n) {
                    break;
                }
                let due = schedule.next_send(index);
                if limits.duration.is_some_and(|d| due >= d) {
                    break;
                }
                if !wait_until(&clock, due, &state.stop) {
                    break;
                }
                let late = clock.elapsed().saturating_sub(due);
                lateness.record(late);
                if jobs
                    .try_send(Job {
                        index,
                        scheduled: due,
                    })
                    .is_err()
                {
                    break;
                }
                index += 1;
                state.dispatched.store(index, Ordering::Relaxed);
                flush_lateness(&state, &mut lateness, &mut flushed, clock.elapsed());
            }
            state
                .lateness
                .lock()
                .expect("not poisoned")
                .merge(&lateness);
        })
        .expect("spawn the pacer thread")
}

/// Publishes lateness every 100 ms, so the per-request path takes no lock.
fn flush_lateness(
    state: &PacerState,
    local: &mut Histogram,
    flushed: &mut Duration,
    now: Duration,
) {
    if now.saturating_sub(*flushed) >= Duration::from_millis(100) {
        state.lateness.lock().expect("not poisoned").merge(local);
        local.reset();
        *flushed = now;
    }
}

/// Sleeps then spins until `due`; false when stopped first.
fn wait_until(clock: &Clock, due: Duration, stop: &AtomicBool) -> bool {
    loop {
        let now = clock.elapsed();
        if now >= due {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = due - now;
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(MAX_SLEEP));
        } else {
            std::hint::spin_loop();
        }
    }
}
