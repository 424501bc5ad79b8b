//! The pacers: one per worker thread, each releasing its share of the schedule at the due times.
//!
//! Each worker thread runs a pacer task next to its workers, on the same single-threaded
//! runtime, over one [`Shard`] of the schedule (request `i` belongs to thread `i % threads`).
//! A released request goes to an idle worker of the same thread, so an open-loop request costs
//! no hand-off between threads. An earlier design paced from a dedicated thread and handed each
//! request to the worker runtimes through a shared queue: every request then paid a sleep and
//! wake-up of the pacer thread, an `eventfd` write to wake a runtime and a futex, 55-58 µs
//! of CPU per request at 10,000 req/s on one thread, 52-54 µs now: most of it is this VM waking
//! idle threads (see docs/load.md).
//!
//! Why a `timerfd` and not a Tokio timer: Tokio's timer wheel has 1 ms granularity, so a
//! generator sleeping on it sends in 1 ms bursts and adds up to 1 ms of its own lag to every
//! latency measured from the schedule, more than a loopback round trip. A `timerfd` is a
//! high-resolution kernel timer the runtime's `epoll` watches like a socket: the thread sleeps
//! in the same `epoll_wait` as its I/O and wakes at the due time to the microsecond. When the
//! thread is busy, the due requests are found on the pacer's next turn and released together.
//! The pacer's own lateness (due time to release) is recorded, so a generator that cannot keep
//! up says so.

use crate::clock::Clock;
use crate::worker::Job;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tailguard_histogram::Histogram;
use tailguard_pacing::Shard;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Longest single sleep, so a stop request is noticed quickly even at low rates.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// How often a pacer publishes its lateness (so the per-request path takes no lock).
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// What the pacers share with the rest of the run.
#[derive(Debug, Default)]
pub(crate) struct PacerState {
    /// Set to stop early (Ctrl-C).
    pub stop: AtomicBool,
    /// Due time to release, per request, since the last interval.
    pub lateness: Mutex<Histogram>,
    /// Requests released so far, all pacers together (published with the lateness, so up to
    /// [`FLUSH_EVERY`] behind).
    pub released: AtomicU64,
}

/// When the schedule ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub total: Option<u64>,
    pub duration: Option<Duration>,
}

impl Limits {
    /// True when request `index`, due at `due`, is past the end of the run.
    fn past(&self, index: u64, due: Duration) -> bool {
        self.total.is_some_and(|n| index >= n) || self.duration.is_some_and(|d| due >= d)
    }
}

/// Where a pacer's requests and their due times come from: a shard of the schedule, or a
/// replay's stream.
pub(crate) trait Source {
    /// The next request's index and due time; `None` when there is none left.
    async fn next_due(&mut self) -> Option<(u64, Duration)>;
    /// Takes the request [`next_due`](Self::next_due) gave, released at `now`.
    fn release(&mut self, now: Duration) -> Job;
    /// Notified when a request may have become due sooner than the pacer planned for (a
    /// second send: [`crate::resend`]); `None` when the source's times are all known ahead.
    fn woken(&self) -> Option<&tokio::sync::Notify> {
        None
    }
}

impl Source for Shard {
    async fn next_due(&mut self) -> Option<(u64, Duration)> {
        Some(self.peek())
    }

    fn release(&mut self, now: Duration) -> Job {
        let (index, due) = self.peek();
        self.advance();
        Job {
            index,
            scheduled: due,
            released: now,
            request: None,
            again: false,
        }
    }
}

/// Releases the requests of `source` into `jobs` at their due times; returns (closing `jobs`
/// for this thread's workers) when the source or the schedule ends, the run is stopped or
/// `jobs` is closed.
///
/// With a `busy_poll` window, the last stretch before each due time is spent polling (the
/// runtime's I/O included, so responses are still read the moment they arrive) instead of
/// sleeping: the thread is awake at the due time, and this machine's wake-up latency (about
/// 60 µs on the project's VM) leaves the send lag and the latency measured from the schedule,
/// at the price of a busy core (docs/load.md, "How it keeps time").
pub(crate) async fn run(
    mut source: impl Source,
    limits: Limits,
    busy_poll: Duration,
    clock: Clock,
    jobs: async_channel::Sender<Job>,
    state: &PacerState,
) {
    let mut alarm = Alarm::new();
    let mut lateness = Histogram::new();
    let mut flushed = Duration::ZERO;
    let mut released = 0u64;
    'run: while !state.stop.load(Ordering::Relaxed) {
        let now = clock.elapsed();
        let next_due = loop {
            let Some((index, due)) = source.next_due().await else {
                break 'run;
            };
            if limits.past(index, due) {
                break 'run;
            }
            if due > now {
                break due;
            }
            lateness.record(now - due);
            if jobs.try_send(source.release(now)).is_err() {
                break 'run;
            }
            released += 1;
        };
        if now.saturating_sub(flushed) >= FLUSH_EVERY {
            state
                .lateness
                .lock()
                .expect("not poisoned")
                .merge(&lateness);
            lateness.reset();
            state.released.fetch_add(released, Ordering::Relaxed);
            released = 0;
            flushed = now;
        }
        let wait = next_due - now;
        if wait <= busy_poll {
            // Each yield lets the runtime poll its I/O (without blocking) before this task
            // runs again.
            while clock.elapsed() < next_due {
                tokio::task::yield_now().await;
            }
            continue;
        }
        let nap = (wait - busy_poll).min(MAX_SLEEP);
        match source.woken() {
            None => alarm.sleep(nap).await,
            Some(woken) => {
                tokio::select! {
                    () = alarm.sleep(nap) => {}
                    () = woken.notified() => {}
                }
            }
        }
    }
    // The thread's workers take what is queued, then stop.
    jobs.close();
    state.released.fetch_add(released, Ordering::Relaxed);
    state
        .lateness
        .lock()
        .expect("not poisoned")
        .merge(&lateness);
}

/// A high-resolution one-shot timer on the thread's runtime: a `timerfd` watched by its
/// `epoll`, or a Tokio sleep (1 ms resolution) where a `timerfd` cannot be made.
struct Alarm {
    fd: Option<AsyncFd<Timer>>,
}

/// A `timerfd`, with the raw descriptor `AsyncFd` registers.
struct Timer(TimerFd);

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Alarm {
    // `AsyncFd::with_interest` is deprecated in favour of an `unsafe` constructor whose contract
    // is that the descriptor stays open and the same while registered. `Timer` owns its
    // descriptor (an `OwnedFd` inside `TimerFd`, closed only when the `AsyncFd` drops it), so
    // the contract holds, and this crate forbids `unsafe`.
    #[allow(deprecated)]
    fn new() -> Alarm {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(std::io::Error::from)
        .and_then(|t| AsyncFd::with_interest(Timer(t), Interest::READABLE));
        match fd {
            Ok(fd) => Alarm { fd: Some(fd) },
            Err(err) => {
                crate::say(&format!(
                    "warning: no high-resolution timer ({err}): requests are paced to the millisecond"
                ));
                Alarm { fd: None }
            }
        }
    }

    /// Sleeps for `d` (at least a nanosecond: a zero `timerfd` setting disarms it).
    ///
    /// Setting the timer resets its expiration count, so it becomes readable again only when
    /// this setting expires; a wake-up left over from an earlier setting at worst ends a sleep
    /// early, and the pacer then finds nothing due and sleeps again.
    async fn sleep(&mut self, d: Duration) {
        let Some(fd) = &self.fd else {
            tokio::time::sleep(d).await;
            return;
        };
        let d = d.max(Duration::from_nanos(1));
        let armed = fd.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(d)),
            TimerSetTimeFlags::empty(),
        );
        if armed.is_err() {
            tokio::time::sleep(d).await;
            return;
        }
        match fd.readable().await {
            Ok(mut guard) => guard.clear_ready(),
            Err(_) => tokio::time::sleep(d).await,
        }
    }
}
