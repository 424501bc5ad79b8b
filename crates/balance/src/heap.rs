//! Heap least loaded: always the endpoint with the fewest requests in flight.
//!
//! # What
//! A binary min-heap of endpoints keyed by pending requests (Finagle's `HeapBalancer`, Linkerd
//! 1's `heap`). The root is the least loaded endpoint; a request start or end moves one endpoint
//! by O(log n).
//!
//! Health is checked lazily, since readiness arrives as a predicate rather than as events:
//! 1. Before each pick, every penalized endpoint that is ready again loses its penalty.
//! 2. While the root is not ready, it gets a large penalty (Finagle's `Penalty`) that sinks it
//!    below every healthy endpoint, and joins the penalized list.
//! 3. When every endpoint is penalized, the root is the least loaded of all: pick it anyway.
//!
//! # Why
//! Exact least-loaded choice at O(log n). Deterministic ties make a single heap balancer hit the
//! same endpoint when loads are equal, and many heap balancers in separate clients herd onto the
//! same idle endpoint; P2C trades a little precision for randomness that avoids both.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{all_ready, Balance, HeapLeastLoaded};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(0);
//! let now = Duration::ZERO;
//! let mut heap = HeapLeastLoaded::new(2);
//! let first = heap.pick(now, &all_ready, &mut rng).unwrap();
//! heap.start(first, now);
//! let second = heap.pick(now, &all_ready, &mut rng).unwrap();
//! assert_ne!(first, second); // the idle one
//! ```

use crate::load::Snapshot;
use crate::{Balance, Ready};
use rand::RngCore;
use std::time::Duration;

/// Added to the key of an endpoint that is not ready, so it sinks below any healthy one.
const PENALTY: u64 = 1 << 32;

/// Least-loaded picking with a min-heap on pending requests.
#[derive(Clone, Debug)]
pub struct HeapLeastLoaded {
    /// Endpoint ids in heap order.
    heap: Vec<usize>,
    /// Position of each endpoint in `heap`.
    pos: Vec<usize>,
    pending: Vec<u32>,
    penalized: Vec<bool>,
    /// The penalized endpoints, to re-check before each pick.
    down: Vec<usize>,
}

impl HeapLeastLoaded {
    /// A heap over `n` idle endpoints.
    pub fn new(n: usize) -> Self {
        Self {
            heap: (0..n).collect(),
            pos: (0..n).collect(),
            pending: vec![0; n],
            penalized: vec![false; n],
            down: Vec::with_capacity(n),
        }
    }

    /// Requests in flight to `endpoint`.
    pub fn pending(&self, endpoint: usize) -> u32 {
        self.pending[endpoint]
    }

    fn key(&self, endpoint: usize) -> u64 {
        let penalty = if self.penalized[endpoint] { PENALTY } else { 0 };
        u64::from(self.pending[endpoint]) + penalty
    }

    fn set_penalty(&mut self, endpoint: usize, on: bool) {
        self.penalized[endpoint] = on;
        let at = self.pos[endpoint];
        self.sift_up(at);
        self.sift_down(self.pos[endpoint]);
    }

    /// Step 1: lift the penalty of endpoints that are ready again.
    fn revive(&mut self, ready: Ready<'_>) {
        let mut k = 0;
        while k < self.down.len() {
            let endpoint = self.down[k];
            if ready(endpoint) {
                self.down.swap_remove(k);
                self.set_penalty(endpoint, false);
            } else {
                k += 1;
            }
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a]] = a;
        self.pos[self.heap[b]] = b;
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.key(self.heap[at]) >= self.key(self.heap[parent]) {
                break;
            }
            self.swap(at, parent);
            at = parent;
        }
    }

    fn sift_down(&mut self, mut at: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut least = at;
            for child in [l, r] {
                if child < n && self.key(self.heap[child]) < self.key(self.heap[least]) {
                    least = child;
                }
            }
            if least == at {
                return;
            }
            self.swap(at, least);
            at = least;
        }
    }
}

impl Balance for HeapLeastLoaded {
    fn len(&self) -> usize {
        self.heap.len()
    }

    fn pick(&mut self, _now: Duration, ready: Ready<'_>, _rng: &mut dyn RngCore) -> Option<usize> {
        if self.heap.is_empty() {
            return None;
        }
        self.revive(ready);
        // Step 2: sink roots that are not ready; step 3: stop when all are penalized.
        while !ready(self.heap[0]) && self.down.len() < self.heap.len() {
            let root = self.heap[0];
            self.down.push(root);
            self.set_penalty(root, true);
        }
        Some(self.heap[0])
    }

    fn start(&mut self, endpoint: usize, _now: Duration) {
        self.pending[endpoint] += 1;
        self.sift_down(self.pos[endpoint]);
    }

    fn end(&mut self, endpoint: usize, _rtt: Duration, _now: Duration) {
        self.pending[endpoint] = self.pending[endpoint].saturating_sub(1);
        self.sift_up(self.pos[endpoint]);
    }

    /// The heap's key without the penalty of down endpoints: requests in flight.
    fn snapshot(&self, endpoint: usize, _now: Duration) -> Option<Snapshot> {
        let pending = *self.pending.get(endpoint)?;
        Some(Snapshot {
            cost: f64::from(pending),
            pending,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::all_ready;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn check_heap(h: &HeapLeastLoaded) {
        for at in 1..h.heap.len() {
            assert!(h.key(h.heap[at]) >= h.key(h.heap[(at - 1) / 2]));
            assert_eq!(h.pos[h.heap[at]], at);
        }
    }

    #[test]
    fn picks_the_exact_least_loaded() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let now = Duration::ZERO;
        let mut h = HeapLeastLoaded::new(4);
        for (endpoint, load) in [(0, 3), (1, 1), (2, 2), (3, 5)] {
            for _ in 0..load {
                h.start(endpoint, now);
            }
        }
        check_heap(&h);
        assert_eq!(h.pick(now, &all_ready, &mut rng), Some(1));
        h.end(0, Duration::ZERO, now);
        h.end(0, Duration::ZERO, now);
        h.end(0, Duration::ZERO, now);
        check_heap(&h);
        assert_eq!(h.pick(now, &all_ready, &mut rng), Some(0));
    }

    #[test]
    fn down_endpoints_sink_and_come_back() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let now = Duration::ZERO;
        let mut h = HeapLeastLoaded::new(3);
        h.start(1, now);
        h.start(2, now);
        assert_eq!(h.pick(now, &|i| i != 0, &mut rng), Some(1));
        check_heap(&h);
        assert_eq!(h.pick(now, &all_ready, &mut rng), Some(0));
        assert_eq!(h.pick(now, &|_| false, &mut rng), Some(0));
        assert!(h.down.len() == 3);
        assert_eq!(h.pick(now, &|i| i == 2, &mut rng), Some(2));
        check_heap(&h);
    }
}
