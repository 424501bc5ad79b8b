//! A backend's capacity: how many requests it serves at once, and the line the others wait in.
//!
//! Without a capacity a backend gives each request its latency whatever the load, so a
//! balancer that sends everything to the fastest backend looks perfect. Real servers have a
//! fixed number of workers and queue the rest, so latency grows with load. With
//! `capacity: {workers: 8, queue: 64, status: 503}`:
//!
//! 1. a request that finds a free worker starts its service at once: the backend's `decide` at
//!    that moment gives its latency and outcome, and the worker is busy until the response
//!    leaves (a paused backend's workers stay busy through the pause);
//! 2. otherwise it waits in a FIFO line; when a worker frees, the first request still waiting
//!    starts (one whose client has gone is skipped, as a server skips a request whose client hung
//!    up);
//! 3. when `queue` requests already wait, a new one is rejected at once with `status`: a fast
//!    failure, as an overloaded server sheds load.
//!
//! A schedule can change the number of workers for a window (`from 20s to 40s capacity x0.25`:
//! a noisy neighbour takes three quarters of the machine); a lower number takes effect as
//! workers free, a higher one as soon as anything happens at the backend.
//!
//! [`Line`] is that protocol as a pure state machine: `serve` runs it live per backend and `sim`
//! in virtual time, so a fleet file means the same in both.
//!
//! # Example
//! ```
//! use tailguard_fleet::capacity::{Arrival, Capacity, Line};
//! let cap = Capacity { workers: 1, queue: Some(1), status: 503 };
//! let mut line = Line::default();
//! assert_eq!(line.arrive(&cap, 1, "a"), Arrival::Start("a"));
//! assert_eq!(line.arrive(&cap, 1, "b"), Arrival::Wait);
//! assert_eq!(line.arrive(&cap, 1, "c"), Arrival::Reject("c", 503));
//! assert_eq!(line.finish(1, |_| true), vec!["b"]);
//! ```

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::VecDeque;
use std::fmt;

/// How many requests a backend serves at once, and what happens to the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Requests served at once (at least 1).
    pub workers: u32,
    /// Requests that may wait for a worker (`None`: any number).
    pub queue: Option<u32>,
    /// The status a request gets when the line is full (default 503).
    pub status: u16,
}

impl Capacity {
    /// `workers` at once, an unbounded line.
    pub fn new(workers: u32) -> Capacity {
        Capacity {
            workers: workers.max(1),
            queue: None,
            status: 503,
        }
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} workers", self.workers)?;
        if let Some(q) = self.queue {
            write!(f, ", queue {q} then {}", self.status)?;
        }
        Ok(())
    }
}

/// `8`, or `{workers: 8, queue: 64, status: 503}` (`queue` and `status` optional).
impl<'de> Deserialize<'de> for Capacity {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(CapacityVisitor)
    }
}

struct CapacityVisitor;

fn workers<E: de::Error>(v: u64) -> Result<u32, E> {
    u32::try_from(v)
        .ok()
        .filter(|w| *w >= 1)
        .ok_or_else(|| E::custom(format!("workers must be from 1 to {}, not {v}", u32::MAX)))
}

impl<'de> Visitor<'de> for CapacityVisitor {
    type Value = Capacity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number of workers, or {workers: N, queue: N, status: CODE}")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Capacity, E> {
        Ok(Capacity::new(workers(v)?))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Capacity, E> {
        let v = u64::try_from(v).map_err(|_| E::custom("workers must be at least 1"))?;
        self.visit_u64(v)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Capacity, A::Error> {
        let (mut w, mut queue, mut status) = (None, None, 503);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "workers" => w = Some(workers(map.next_value()?)?),
                "queue" => queue = Some(map.next_value()?),
                "status" => {
                    status = crate::failure::failure_status(map.next_value()?)
                        .map_err(de::Error::custom)?;
                }
                other => {
                    return Err(de::Error::unknown_field(
                        other,
                        &["workers", "queue", "status"],
                    ))
                }
            }
        }
        let workers = w.ok_or_else(|| de::Error::missing_field("workers"))?;
        Ok(Capacity {
            workers,
            queue,
            status,
        })
    }
}

/// What became of a request that arrived at a backend with a capacity.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival<T> {
    /// A worker took it: its service starts now.
    Start(T),
    /// It waits in line; [`Line::finish`] hands it out when its turn comes.
    Wait,
    /// The line is full: answer it at once with this status.
    Reject(T, u16),
}

/// One backend's busy workers and waiting requests (see the module docs).
#[derive(Debug)]
pub struct Line<T> {
    busy: u32,
    waiting: VecDeque<T>,
}

impl<T> Default for Line<T> {
    fn default() -> Self {
        Line {
            busy: 0,
            waiting: VecDeque::new(),
        }
    }
}

impl<T> Line<T> {
    /// A request arrives while the backend has `workers` workers (its capacity as the schedule
    /// has it now).
    pub fn arrive(&mut self, capacity: &Capacity, workers: u32, request: T) -> Arrival<T> {
        if self.busy < workers && self.waiting.is_empty() {
            self.busy += 1;
            return Arrival::Start(request);
        }
        if capacity
            .queue
            .is_some_and(|q| self.waiting.len() >= q as usize)
        {
            return Arrival::Reject(request, capacity.status);
        }
        self.waiting.push_back(request);
        Arrival::Wait
    }

    /// A request's service ended: its worker frees. Returns the waiting requests that start
    /// now, oldest first (several when the schedule raised the number of workers); `live` says
    /// whether a waiting request's client still wants it (the others are dropped).
    pub fn finish(&mut self, workers: u32, live: impl FnMut(&T) -> bool) -> Vec<T> {
        self.busy = self.busy.saturating_sub(1);
        self.admit(workers, live)
    }

    /// Starts waiting requests while workers are free (after the schedule raised their number).
    pub fn admit(&mut self, workers: u32, mut live: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut started = Vec::new();
        while self.busy < workers {
            let Some(next) = self.waiting.pop_front() else {
                break;
            };
            if live(&next) {
                self.busy += 1;
                started.push(next);
            }
        }
        started
    }

    /// Requests in service.
    pub fn busy(&self) -> u32 {
        self.busy
    }

    /// Requests waiting for a worker (some of which may have been given up).
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Drops the waiting requests whose client has gone.
    pub fn forget(&mut self, mut live: impl FnMut(&T) -> bool) {
        self.waiting.retain(|r| live(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(workers: u32, queue: Option<u32>) -> Capacity {
        Capacity {
            workers,
            queue,
            status: 503,
        }
    }

    #[test]
    fn workers_then_a_fifo_line_then_rejection() {
        let c = cap(2, Some(2));
        let mut line = Line::default();
        assert_eq!(line.arrive(&c, 2, 1), Arrival::Start(1));
        assert_eq!(line.arrive(&c, 2, 2), Arrival::Start(2));
        assert_eq!(line.arrive(&c, 2, 3), Arrival::Wait);
        assert_eq!(line.arrive(&c, 2, 4), Arrival::Wait);
        assert_eq!(line.arrive(&c, 2, 5), Arrival::Reject(5, 503));
        assert_eq!((line.busy(), line.waiting()), (2, 2));
        // Request 3's client hung up: 4 goes first.
        assert_eq!(line.finish(2, |r| *r != 3), vec![4]);
        assert_eq!(line.finish(2, |_| true), Vec::<i32>::new());
        assert_eq!(line.finish(2, |_| true), Vec::<i32>::new());
        assert_eq!(line.busy(), 0);
    }

    #[test]
    fn fewer_workers_take_effect_as_they_free_and_more_at_once() {
        let c = cap(4, None);
        let mut line = Line::default();
        for r in 0..4 {
            assert_eq!(line.arrive(&c, 4, r), Arrival::Start(r));
        }
        // A neighbour takes half the machine: nothing starts until two have finished.
        assert_eq!(line.arrive(&c, 2, 4), Arrival::Wait);
        assert_eq!(line.arrive(&c, 2, 5), Arrival::Wait);
        assert!(line.finish(2, |_| true).is_empty());
        assert!(line.finish(2, |_| true).is_empty());
        assert_eq!(line.finish(2, |_| true), vec![4]);
        // It leaves: the waiting request starts without waiting for another to finish.
        assert_eq!(line.admit(4, |_| true), vec![5]);
        assert_eq!(line.busy(), 3);
    }

    #[test]
    fn a_new_request_never_overtakes_the_line() {
        let c = cap(1, None);
        let mut line = Line::default();
        assert_eq!(line.arrive(&c, 1, 'a'), Arrival::Start('a'));
        assert_eq!(line.arrive(&c, 1, 'b'), Arrival::Wait);
        // A worker is free under a raised capacity, but `b` waited first.
        assert_eq!(line.arrive(&c, 2, 'c'), Arrival::Wait);
        assert_eq!(line.admit(2, |_| true), vec!['b']);
    }

    #[test]
    fn read_from_a_number_or_a_mapping() {
        let c: Capacity = serde_yaml_ng::from_str("8").unwrap();
        assert_eq!(c, Capacity::new(8));
        let c: Capacity = serde_yaml_ng::from_str("{workers: 2, queue: 10, status: 429}").unwrap();
        assert_eq!(
            c,
            Capacity {
                workers: 2,
                queue: Some(10),
                status: 429
            }
        );
        assert_eq!(c.to_string(), "2 workers, queue 10 then 429");
        for bad in [
            "0",
            "-1",
            "{queue: 3}",
            "{workers: 1, status: 99}",
            "{workers: 1, cpu: 2}",
        ] {
            assert!(serde_yaml_ng::from_str::<Capacity>(bad).is_err(), "{bad}");
        }
    }
}
