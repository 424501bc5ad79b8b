//! A request's life: attempts, retries, hedges, timeouts, and the final outcome.
//!
//! 1. A request arrives: the client deposits into its budgets, a total timeout is armed, and
//!    the first attempt goes out.
//! 2. Each attempt goes to the endpoint the client picks; an attempt timeout is armed; the
//!    first attempt also arms the hedge timer when the arm hedges and the method may be
//!    repeated.
//! 3. An attempt ends (response, refusal, reset, timeout). A success ends the request. A
//!    retryable failure is retried on another endpoint when retries remain, the total deadline
//!    has not passed and the budget allows; otherwise the request fails once nothing else is in
//!    flight for it.
//! 4. The hedge timer fires while the request is still waiting: one backup attempt to another
//!    endpoint, if the hedge budget allows. The first success wins.
//! 5. The request ends: its latency is recorded, its other attempts are cancelled (the
//!    balancer and accrual hear of it), and a closed-loop worker schedules its next send.

use super::queue::Event;
use super::slab::Key;
use super::Engine;
use std::time::Duration;
use tailguard_resilience::{AttemptOutcome, Ticket};

/// One request in flight.
#[derive(Debug)]
pub(crate) struct Request {
    client: usize,
    worker: Option<u32>,
    /// When it was due (open loop) or sent (closed loop).
    scheduled: Duration,
    /// The newest attempt; attempts link to their predecessors.
    head: Option<Key>,
    /// Attempts still waiting for an outcome.
    outstanding: u32,
    /// Retries waiting for their backoff.
    pending_retries: u32,
    retries: u32,
    hedged: bool,
    last_endpoint: usize,
}

/// One attempt of a request.
#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) request: Key,
    pub(crate) endpoint: usize,
    sent: Duration,
    ticket: Option<Ticket>,
    /// What the endpoint decided (known once service starts).
    pub(crate) outcome: AttemptOutcome,
    /// False once the attempt ended or was cancelled.
    pub(crate) live: bool,
    previous: Option<Key>,
}

impl Engine<'_> {
    /// Step 1.
    pub(super) fn new_request(&mut self, client: usize, worker: Option<u32>) {
        self.clients[client].on_request(self.now);
        let key = self.requests.insert(Request {
            client,
            worker,
            scheduled: self.now,
            head: None,
            outstanding: 0,
            pending_retries: 0,
            retries: 0,
            hedged: false,
            last_endpoint: usize::MAX,
        });
        if let Some(total) = self.arm_config().timeouts.total {
            self.queue
                .push(self.now + total, Event::RequestTimeout(key));
        }
        self.send_attempt(key, None);
    }

    /// Step 2.
    fn send_attempt(&mut self, key: Key, avoid: Option<usize>) {
        let now = self.now;
        let attempt_timeout = self.arm_config().timeouts.attempt;
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        let client = &mut self.clients[req.client];
        let endpoint = client.pick(now, avoid, &mut self.rng);
        let ticket = client.on_send(endpoint, now);
        let first = req.head.is_none();
        let attempt = self.attempts.insert(Attempt {
            request: key,
            endpoint,
            sent: now,
            ticket,
            outcome: AttemptOutcome::Timeout,
            live: true,
            previous: req.head,
        });
        req.head = Some(attempt);
        req.outstanding += 1;
        req.last_endpoint = endpoint;
        let n = self.out.attempts.len();
        self.used[req.client * n + endpoint] = true;
        self.out.attempts[endpoint] += 1;
        if let Some(t) = attempt_timeout {
            self.queue.push(now + t, Event::AttemptTimeout(attempt));
        }
        if first {
            self.arm_hedge(key);
        }
        self.server_accept(endpoint, attempt);
    }

    fn arm_hedge(&mut self, key: Key) {
        let method = self.scenario.load.method;
        if !self.arm_config().classifier.retries(method) {
            return;
        }
        let Some(req) = self.requests.get(key) else {
            return;
        };
        if let Some(delay) = self.clients[req.client].hedge_delay(self.now) {
            self.queue.push(self.now + delay, Event::Hedge(key));
        }
    }

    /// Step 3: an endpoint's answer (or a timeout) reaches the client.
    pub(super) fn complete_attempt(&mut self, attempt: Key, outcome: AttemptOutcome) {
        let Some(a) = self.attempts.get_mut(attempt).filter(|a| a.live) else {
            return;
        };
        a.live = false;
        let (key, endpoint, sent, ticket) = (a.request, a.endpoint, a.sent, a.ticket);
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        req.outstanding -= 1;
        let method = self.scenario.load.method;
        let class = self.clients[req.client].on_complete(
            endpoint,
            ticket,
            sent,
            method,
            outcome,
            self.now,
            &mut self.rng,
        );
        if class.success {
            self.finish_request(key, true);
        } else if !(class.retryable && self.try_retry(key, endpoint)) {
            let req = &self.requests.get(key).expect("still open");
            if req.outstanding == 0 && req.pending_retries == 0 {
                self.finish_request(key, false);
            }
        }
    }

    /// Step 3: retry `key` away from `failed` if the arm, the deadline and the budget allow.
    fn try_retry(&mut self, key: Key, failed: usize) -> bool {
        let Some(retry) = self.arm_config().retries else {
            return false;
        };
        let total = self.arm_config().timeouts.total;
        let req = self.requests.get_mut(key).expect("still open");
        let time_left = total.is_none_or(|t| self.now < req.scheduled + t);
        if req.retries >= retry.max_retries || !time_left {
            return false;
        }
        if !self.clients[req.client].may_retry(self.now) {
            return false;
        }
        req.retries += 1;
        match retry.backoff {
            Some(b) => {
                req.pending_retries += 1;
                let delay = b.delay(req.retries, &mut self.rng);
                self.queue.push(self.now + delay, Event::Retry(key));
            }
            None => self.send_attempt(key, Some(failed)),
        }
        true
    }

    pub(super) fn on_retry(&mut self, key: Key) {
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        req.pending_retries -= 1;
        let avoid = req.last_endpoint;
        self.send_attempt(key, Some(avoid));
    }

    /// Step 4.
    pub(super) fn on_hedge(&mut self, key: Key) {
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        if req.hedged || req.outstanding == 0 {
            return;
        }
        if self.clients[req.client].may_hedge(self.now) {
            req.hedged = true;
            let avoid = req.last_endpoint;
            self.send_attempt(key, Some(avoid));
        }
    }

    pub(super) fn on_attempt_timeout(&mut self, attempt: Key) {
        self.complete_attempt(attempt, AttemptOutcome::Timeout);
    }

    pub(super) fn on_request_timeout(&mut self, key: Key) {
        if self.requests.get(key).is_some() {
            self.finish_request(key, false);
        }
    }

    /// Step 5.
    fn finish_request(&mut self, key: Key, success: bool) {
        let req = self.requests.remove(key).expect("finished once");
        let latency = self.now.saturating_sub(req.scheduled);
        self.out.latency.record(latency);
        self.out.requests += 1;
        if success {
            self.out.successes += 1;
            if latency <= self.scenario.deadline {
                self.out.within_deadline += 1;
            }
        }
        let mut next = req.head;
        while let Some(k) = next {
            let a = self
                .attempts
                .remove(k)
                .expect("attempts live as long as their request");
            if a.live {
                self.clients[req.client].on_cancel(a.endpoint, a.ticket, a.sent, self.now);
            }
            next = a.previous;
        }
        if let Some(worker) = req.worker {
            self.worker_next(worker);
        }
    }

    /// Requests that can never end (an endpoint paused for good, and no timeout) fail when the
    /// event queue runs dry.
    pub(super) fn abandon_stuck(&mut self) {
        let stuck: Vec<Key> = self.requests.keys().collect();
        for key in stuck {
            self.finish_request(key, false);
        }
    }
}
