//! Admission under a concurrency limit: who goes now, who waits, and who is refused when a
//! service has more requests than its limit lets in flight.
//!
//! # What
//! A request arriving while fewer than `limit` attempts are in flight goes at once. Otherwise it
//! waits in a bounded queue, one per class of criticality (`critical`, `default`,
//! `sheddable`; the header `x-tailguard-criticality` or the same gRPC metadata): critical
//! requests go first, each class in arrival order. It is refused:
//! - when the queue is full and holds nothing of a lower class (else the newest request of the
//!   lowest class there is refused in its place);
//! - when it has waited `max_wait`;
//! - as soon as its remaining deadline is below its expected wait: `position / limit x rtt +
//!   p50` (its place in line, the limiter's round trip, the typical attempt), when the caller
//!   has a deadline and an estimate. Without a deadline, never by this rule.
//!
//! A retry or a backup does not wait: it goes only while there is room and no one waits
//! ([`Admission::try_extra`]), so extra attempts never push first attempts back.
//!
//! Tickets name the waiting requests; the caller keeps what each stands for (a channel in the
//! proxy, an event in the simulator). Pure: `now` is passed in.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::admission::{Admission, Arrival, Criticality, QueueConfig};
//!
//! let cfg = QueueConfig { max_size: 10, max_wait: Duration::from_millis(50) };
//! let mut a = Admission::new(cfg);
//! let now = Duration::ZERO;
//! assert_eq!(a.arrive(now, Criticality::Default, None, 1, None).0, Arrival::Admitted);
//! let (queued, _) = a.arrive(now, Criticality::Critical, None, 1, None);
//! let Arrival::Queued(ticket) = queued else { panic!() };
//! let mut go = Vec::new();
//! a.release(1, &mut go); // the first one ended: the critical one goes
//! assert_eq!(go, [ticket]);
//! ```

use std::collections::VecDeque;
use std::time::Duration;

/// How much a request matters when there is not room for all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Criticality {
    /// Served first, refused last.
    Critical = 0,
    /// Every request without a class.
    Default = 1,
    /// Refused first.
    Sheddable = 2,
}

impl Criticality {
    /// The three, most critical first.
    pub const ALL: [Criticality; 3] = [
        Criticality::Critical,
        Criticality::Default,
        Criticality::Sheddable,
    ];

    /// The class a header value names (`critical`, `default`, `sheddable`, any case); `None`
    /// for anything else (the caller treats it as default).
    pub fn parse(value: &[u8]) -> Option<Criticality> {
        Self::ALL
            .into_iter()
            .find(|c| value.eq_ignore_ascii_case(c.name().as_bytes()))
    }

    /// As the header spells it.
    pub fn name(self) -> &'static str {
        match self {
            Criticality::Critical => "critical",
            Criticality::Default => "default",
            Criticality::Sheddable => "sheddable",
        }
    }
}

/// The queue's settings (`queue: {maxSize, maxWaitMs}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Requests waiting at most (0: none wait).
    pub max_size: u32,
    /// The longest a request waits.
    pub max_wait: Duration,
}

/// A waiting request's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// What became of an arriving request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// It goes now (and counts in flight until [`Admission::release`]).
    Admitted,
    /// It waits under this ticket.
    Queued(Ticket),
    /// It is refused now.
    Refused(Refusal),
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The queue was full of requests that matter as much or more.
    QueueFull,
    /// A more critical request took its place in the queue.
    Displaced,
    /// It waited `max_wait`.
    Waited,
    /// Its deadline would pass before its turn.
    Deadline,
}

impl Refusal {
    /// Its name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::QueueFull => "queue-full",
            Refusal::Displaced => "displaced",
            Refusal::Waited => "waited",
            Refusal::Deadline => "deadline",
        }
    }
}

/// What an expected wait is made of: the service's round trip under its limit and its typical
/// attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The limiter's round trip (the long-term one).
    pub rtt: Duration,
    /// The typical (median) attempt.
    pub p50: Duration,
}

impl Estimate {
    /// The wait expected at `position` (1: next) under `limit`.
    pub fn wait(&self, position: usize, limit: u32) -> Duration {
        let turns = position as f64 / f64::from(limit.max(1));
        self.rtt.mul_f64(turns) + self.p50
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiting {
    ticket: Ticket,
    since: Duration,
    deadline: Option<Duration>,
}

/// One service's admission (see the module docs).
#[derive(Clone, Debug)]
pub struct Admission {
    cfg: QueueConfig,
    in_flight: u32,
    queues: [VecDeque<Waiting>; 3],
    next: u64,
}

impl Admission {
    /// Nothing in flight, nobody waiting.
    pub fn new(cfg: QueueConfig) -> Self {
        Admission {
            cfg,
            in_flight: 0,
            queues: Default::default(),
            next: 0,
        }
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Requests waiting.
    pub fn waiting(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// A request of `class` arrives at `now`, with its deadline (a time, not a timeout), under
    /// `limit`. Returns what became of it, and the ticket of a lower-class request it
    /// displaced from a full queue (refused: [`Refusal::Displaced`]).
    pub fn arrive(
        &mut self,
        now: Duration,
        class: Criticality,
        deadline: Option<Duration>,
        limit: u32,
        estimate: Option<Estimate>,
    ) -> (Arrival, Option<Ticket>) {
        if self.in_flight < limit && self.waiting() == 0 {
            self.in_flight += 1;
            return (Arrival::Admitted, None);
        }
        // Full: the newest of a lower class would give up its place, if there is one.
        let mut displace = None;
        if self.waiting() >= self.cfg.max_size as usize {
            let lower = Criticality::ALL
                .into_iter()
                .rev()
                .take_while(|&c| c > class)
                .find(|&c| !self.queues[c as usize].is_empty());
            match lower {
                Some(c) => displace = Some(c),
                None => return (Arrival::Refused(Refusal::QueueFull), None),
            }
        }
        // Lower classes wait behind it: displacing one does not change its place.
        let position = self.ahead_of(class) + 1;
        if let (Some(deadline), Some(e)) = (deadline, estimate) {
            if deadline.saturating_sub(now) < e.wait(position, limit) {
                return (Arrival::Refused(Refusal::Deadline), None);
            }
        }
        let displaced = displace
            .and_then(|c| self.queues[c as usize].pop_back())
            .map(|w| w.ticket);
        let ticket = Ticket(self.next);
        self.next += 1;
        self.queues[class as usize].push_back(Waiting {
            ticket,
            since: now,
            deadline,
        });
        (Arrival::Queued(ticket), displaced)
    }

    /// A retry or a backup at `now` under `limit`: it goes (counted in flight) only while there
    /// is room and no one waits.
    pub fn try_extra(&mut self, limit: u32) -> bool {
        let room = self.in_flight < limit && self.waiting() == 0;
        if room {
            self.in_flight += 1;
        }
        room
    }

    /// An admitted attempt ended; the requests that go now (most critical first, in order) are
    /// pushed to `go`, each counted in flight, while there is room under `limit`.
    pub fn release(&mut self, limit: u32, go: &mut Vec<Ticket>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.admit_waiting(limit, go);
    }

    /// Lets waiting requests go while there is room under `limit` (after the limit rose).
    pub fn admit_waiting(&mut self, limit: u32, go: &mut Vec<Ticket>) {
        while self.in_flight < limit {
            let Some(next) = self.queues.iter_mut().find_map(VecDeque::pop_front) else {
                break;
            };
            self.in_flight += 1;
            go.push(next.ticket);
        }
    }

    /// Refuses, at `now`, every waiting request past `max_wait` or whose remaining deadline is
    /// below its expected wait; pushes each ticket and why to `refused`.
    pub fn expire(
        &mut self,
        now: Duration,
        limit: u32,
        estimate: Option<Estimate>,
        refused: &mut Vec<(Ticket, Refusal)>,
    ) {
        let max_wait = self.cfg.max_wait;
        let mut position = 0usize;
        for queue in &mut self.queues {
            queue.retain(|w| {
                position += 1;
                let why = if now.saturating_sub(w.since) >= max_wait {
                    Some(Refusal::Waited)
                } else {
                    match (w.deadline, estimate) {
                        (Some(d), Some(e)) if d.saturating_sub(now) < e.wait(position, limit) => {
                            Some(Refusal::Deadline)
                        }
                        _ => None,
                    }
                };
                match why {
                    Some(why) => {
                        refused.push((w.ticket, why));
                        position -= 1;
                        false
                    }
                    None => true,
                }
            });
        }
    }

    /// The earliest time a waiting request passes `max_wait` (when to call [`Self::expire`]).
    pub fn next_expiry(&self) -> Option<Duration> {
        self.queues
            .iter()
            .filter_map(|q| q.front())
            .map(|w| w.since + self.cfg.max_wait)
            .min()
    }

    /// Forgets a waiting request its caller gave up on (its client went away).
    pub fn cancel(&mut self, ticket: Ticket) {
        for q in &mut self.queues {
            q.retain(|w| w.ticket != ticket);
        }
    }

    /// Requests waiting ahead of a new one of `class`.
    fn ahead_of(&self, class: Criticality) -> usize {
        self.queues[..=class as usize]
            .iter()
            .map(VecDeque::len)
            .sum()
    }
}

#[cfg(test)]
mod tests;
