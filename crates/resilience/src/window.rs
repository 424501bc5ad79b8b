//! A sliding time window of counters, kept in ten fixed slots.
//!
//! Adding at `now` lands in the slot of `now`; a sum covers the current slot and the nine before
//! it, so a value counts for between 0.9 and 1.0 of the window. Finagle's `WindowedAdder` and
//! tower's retry budget use the same slotted design: constant memory, no allocation, O(1) add.

use std::time::Duration;

/// Slots per window.
pub(crate) const SLOTS: u64 = 10;

/// `K` counters summed over a sliding window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Window<const K: usize> {
    slot_ns: u64,
    slots: [[i64; K]; SLOTS as usize],
    /// Absolute number of the newest slot (time / slot length).
    current: u64,
}

impl<const K: usize> Window<K> {
    /// An empty window of length `window` (at least ten nanoseconds).
    pub(crate) fn new(window: Duration) -> Self {
        let ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        Self {
            slot_ns: (ns / SLOTS).max(1),
            slots: [[0; K]; SLOTS as usize],
            current: 0,
        }
    }

    /// Forgets the slots that fell out of the window by `now`.
    fn advance(&mut self, now: Duration) {
        let slot = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX) / self.slot_ns;
        if slot <= self.current {
            return;
        }
        let stale = (slot - self.current).min(SLOTS);
        for k in 1..=stale {
            self.slots[((self.current + k) % SLOTS) as usize] = [0; K];
        }
        self.current = slot;
    }

    /// Adds `values` at `now`.
    pub(crate) fn add(&mut self, now: Duration, values: [i64; K]) {
        self.advance(now);
        let slot = &mut self.slots[(self.current % SLOTS) as usize];
        for (s, v) in slot.iter_mut().zip(values) {
            *s += v;
        }
    }

    /// The sums over the window ending at `now`.
    pub(crate) fn sum(&mut self, now: Duration) -> [i64; K] {
        self.advance(now);
        let mut out = [0; K];
        for slot in &self.slots {
            for (o, v) in out.iter_mut().zip(slot) {
                *o += v;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_expire_after_one_window() {
        let s = Duration::from_secs;
        let mut w = Window::<1>::new(s(10));
        w.add(s(0), [5]);
        w.add(s(5), [2]);
        assert_eq!(w.sum(s(9)), [7]);
        assert_eq!(w.sum(s(10)), [2]); // the slot of t=0 is gone
        assert_eq!(w.sum(s(15)), [0]);
        w.add(s(1_000), [1]);
        assert_eq!(w.sum(s(1_000)), [1]);
    }

    #[test]
    fn time_going_backwards_adds_to_the_current_slot() {
        let mut w = Window::<2>::new(Duration::from_secs(1));
        w.add(Duration::from_millis(900), [1, 1]);
        w.add(Duration::from_millis(100), [0, 1]);
        assert_eq!(w.sum(Duration::from_millis(950)), [1, 2]);
    }
}
