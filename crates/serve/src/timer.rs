//! Sleeping to a deadline with sub-millisecond precision.
//!
//! tokio's timer wheel has 1 ms granularity and rounds every deadline up to the next tick, so
//! a backend configured for 20 ms would answer in 20 to 21 ms (DESIGN.md, "Timer precision").
//! Here the coarse part of a wait stays on tokio's timer (cheap, and it follows tokio's paused
//! clock in tests) and only the last [`FINE`] goes to one dedicated thread that waits on a
//! condition variable with a timeout (a high-resolution kernel timer, tens of microseconds of
//! slack) and wakes the task at its deadline. No CPU is spent spinning. The thread is shared
//! by the process and started on first use.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The stretch before a deadline handed to the precise thread: more than tokio's rounding.
pub const FINE: Duration = Duration::from_millis(2);

/// Sleeps until `deadline`: on tokio's timer up to `FINE` before it, then on the precise
/// thread when `precise` (else tokio's timer all the way, e.g. under a paused test clock).
pub async fn sleep_until(deadline: tokio::time::Instant, precise: bool) {
    if !precise {
        return tokio::time::sleep_until(deadline).await;
    }
    if let Some(coarse) = deadline.checked_sub(FINE) {
        tokio::time::sleep_until(coarse).await;
    }
    Fine {
        deadline: deadline.into_std(),
    }
    .await;
}

/// The last stretch of a wait, on the precise thread.
struct Fine {
    deadline: Instant,
}

impl Future for Fine {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if now() >= self.deadline {
            return Poll::Ready(());
        }
        // Registering on every poll is harmless: a stale entry only causes a spurious wake.
        wheel().register(self.deadline, cx.waker().clone());
        Poll::Pending
    }
}

struct Entry {
    deadline: Instant,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.deadline.cmp(&other.deadline)
    }
}

/// The precise thread's queue: earliest deadline on top.
struct Wheel {
    queue: Mutex<BinaryHeap<Reverse<Entry>>>,
    wake: Condvar,
}

fn wheel() -> &'static Arc<Wheel> {
    static WHEEL: OnceLock<Arc<Wheel>> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let wheel = Arc::new(Wheel {
            queue: Mutex::new(BinaryHeap::new()),
            wake: Condvar::new(),
        });
        let worker = wheel.clone();
        std::thread::Builder::new()
            .name("tailguard-timer".into())
            .spawn(move || worker.run())
            .map_err(|err| tracing::error!(%err, "cannot start the precise timer thread"))
            .ok();
        wheel
    })
}

#[allow(clippy::disallowed_methods)] // Reason: this adapter is the clock for response deadlines.
fn now() -> Instant {
    Instant::now()
}

impl Wheel {
    fn register(&self, deadline: Instant, waker: Waker) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = queue
            .peek()
            .is_none_or(|Reverse(top)| deadline < top.deadline);
        queue.push(Reverse(Entry { deadline, waker }));
        drop(queue);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// 1. Wake every entry that is due. 2. Wait until the earliest remaining deadline or a new
    ///    earlier registration. 3. Repeat.
    fn run(&self) {
        let mut due = Vec::new();
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let t = now();
            while queue.peek().is_some_and(|Reverse(top)| top.deadline <= t) {
                if let Some(Reverse(entry)) = queue.pop() {
                    due.push(entry.waker);
                }
            }
            if !due.is_empty() {
                drop(queue);
                due.drain(..).for_each(Waker::wake);
                queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            queue = match queue.peek().map(|Reverse(top)| top.deadline - t) {
                Some(wait) => match self.wake.wait_timeout(queue, wait) {
                    Ok((q, _)) => q,
                    Err(poisoned) => poisoned.into_inner().0,
                },
                None => self.wake.wait(queue).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "current_thread")]
    async fn a_precise_sleep_never_wakes_early() {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(5);
        super::sleep_until(deadline, true).await;
        assert!(tokio::time::Instant::now() >= deadline);
    }
}
