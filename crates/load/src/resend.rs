//! The caller's own retry (`--retry-after D`, the simulator's `retry_after`): in an open loop,
//! a request that failed (a 5xx, an error, a timeout: anything not good) is sent once more, `D`
//! after it ended, as a new request of the schedule: its latency counts from that due time, and
//! a second send that fails is not sent a third time. It models the clients that make an
//! overload outlast its demand (the metastable failure): a tool that only ever sends its
//! schedule cannot show it.
//!
//! Each worker thread keeps its own [`Resends`]: its workers push the failures they saw, its
//! pacer releases them, merged with its shard of the schedule by due time ([`WithResends`]),
//! and is woken when one arrives. At most [`MAX_PENDING`] wait; past that a failure is not
//! sent again.

use crate::pacer::Source;
use crate::worker::Job;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The most second sends a thread keeps waiting.
pub const MAX_PENDING: usize = 1_000_000;

/// One thread's failed requests waiting to be sent again.
#[derive(Debug)]
pub(crate) struct Resends {
    after: Duration,
    /// (due, request index), soonest first.
    heap: Mutex<BinaryHeap<Reverse<(Duration, u64)>>>,
    wake: Notify,
}

impl Resends {
    pub(crate) fn new(after: Duration) -> Self {
        Resends {
            after,
            heap: Mutex::new(BinaryHeap::new()),
            wake: Notify::new(),
        }
    }

    /// Request `index` failed at `ended`: it is due again `after` later.
    pub(crate) fn push(&self, index: u64, ended: Duration) {
        let mut heap = self.heap.lock().expect("never poisoned");
        if heap.len() >= MAX_PENDING {
            return;
        }
        heap.push(Reverse((ended + self.after, index)));
        drop(heap);
        self.wake.notify_one();
    }

    fn peek(&self) -> Option<(Duration, u64)> {
        self.heap
            .lock()
            .expect("never poisoned")
            .peek()
            .map(|r| r.0)
    }

    fn pop(&self) -> Option<(Duration, u64)> {
        self.heap.lock().expect("never poisoned").pop().map(|r| r.0)
    }
}

/// A pacer's source with its thread's second sends merged in by due time.
pub(crate) struct WithResends<S> {
    pub source: S,
    pub resends: Arc<Resends>,
    /// Whether the request [`Source::next_due`] gave is a second send.
    again: bool,
}

impl<S> WithResends<S> {
    pub(crate) fn new(source: S, resends: Arc<Resends>) -> Self {
        WithResends {
            source,
            resends,
            again: false,
        }
    }
}

impl<S: Source> Source for WithResends<S> {
    async fn next_due(&mut self) -> Option<(u64, Duration)> {
        let scheduled = self.source.next_due().await;
        let resend = self.resends.peek();
        let (next, again) = match (scheduled, resend) {
            (Some((_, due)), Some((again_due, j))) if again_due < due => ((j, again_due), true),
            (Some(s), _) => (s, false),
            (None, Some((due, j))) => ((j, due), true),
            (None, None) => return None,
        };
        self.again = again;
        Some(next)
    }

    fn release(&mut self, now: Duration) -> Job {
        if !self.again {
            return self.source.release(now);
        }
        let (due, index) = self.resends.pop().expect("next_due saw it");
        Job {
            index,
            scheduled: due,
            released: now,
            request: None,
            again: true,
        }
    }

    fn woken(&self) -> Option<&Notify> {
        Some(&self.resends.wake)
    }
}
