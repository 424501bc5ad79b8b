//! The event queue: a min-heap on (time, sequence), so events at the same virtual time run in
//! the order they were scheduled and a run is reproducible.

use super::slab::Key;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

/// Something that happens at a virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A client's admission queue has a wait ending now.
    QueueExpiry(u32),
    /// The caller sends a failed request of `client`'s once more, of class `class`.
    CallerRetry { client: u32, class: u8 },
    /// Open loop: the next scheduled request arrives.
    Arrival,
    /// Closed loop: worker `w` sends its next request.
    WorkerSend(u32),
    /// Endpoint `endpoint` finished the attempt; `slot` when it was in service (not refused or
    /// turned away by a full line).
    Done {
        attempt: Key,
        endpoint: u32,
        slot: bool,
    },
    /// The attempt ran out of time.
    AttemptTimeout(Key),
    /// Time to send a backup for the request.
    Hedge(Key),
    /// The request ran out of time.
    RequestTimeout(Key),
    /// A retry's backoff is over.
    Retry(Key),
    /// A load probe from `client` reaches `endpoint`.
    ProbeAt { client: u32, endpoint: u32 },
    /// The endpoint's answer (`rif == u32::MAX`: none) reaches the client.
    ProbeReply {
        client: u32,
        endpoint: u32,
        rif: u32,
        latency_us: u64,
    },
}

#[derive(Debug)]
struct Entry {
    at: Duration,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so the max-heap pops the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Pending events.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl Queue {
    pub(crate) fn push(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    pub(crate) fn pop(&mut self) -> Option<(Duration, Event)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_insertion_order() {
        let mut q = Queue::default();
        let ms = Duration::from_millis;
        q.push(ms(5), Event::WorkerSend(1));
        q.push(ms(1), Event::WorkerSend(2));
        q.push(ms(5), Event::WorkerSend(3));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [
                (ms(1), Event::WorkerSend(2)),
                (ms(5), Event::WorkerSend(1)),
                (ms(5), Event::WorkerSend(3))
            ]
        );
    }
}
