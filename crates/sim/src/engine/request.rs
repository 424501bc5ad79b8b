//! A request in flight and its attempts: what the engine (`mod.rs`) keeps of each.

use super::slab::Key;
use crate::client::Sent;
use std::time::Duration;
use tailguard_resilience::AttemptOutcome;

/// One request in flight.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) client: usize,
    pub(super) worker: Option<u32>,
    /// When it was due (open loop) or sent (closed loop).
    pub(super) scheduled: Duration,
    /// The newest attempt; attempts link to their predecessors.
    pub(super) head: Option<Key>,
    /// Attempts still waiting for an outcome.
    pub(super) outstanding: u32,
    /// Retries waiting for their backoff.
    pub(super) pending_retries: u32,
    pub(super) retries: u32,
    pub(super) hedged: bool,
    /// A backup was asked for once (later asks are for a rescue only).
    pub(super) asked: bool,
    pub(super) last_endpoint: usize,
    /// Waiting for admission under this ticket (not sent yet).
    pub(super) ticket: Option<tailguard_resilience::admission::Ticket>,
    /// How much it matters (the load's share of critical and sheddable requests).
    pub(super) class: tailguard_resilience::admission::Criticality,
    /// The caller's second send of a request that failed (never sent a third time).
    pub(super) again: bool,
}

/// One attempt of a request.
#[derive(Debug)]
pub(super) struct Attempt {
    pub(super) request: Key,
    pub(super) endpoint: usize,
    pub(super) sent: Duration,
    /// The client's record of the attempt, handed back with its end.
    pub(super) handle: Sent,
    /// What the endpoint decided (known once service starts).
    pub(super) outcome: AttemptOutcome,
    /// False once the attempt ended or was cancelled.
    pub(super) live: bool,
    pub(super) previous: Option<Key>,
    /// Requests in flight at the endpoint when this one arrived (for its latency estimate).
    pub(super) rif_at_arrival: u32,
    /// It holds a place under the client's admission bound, given back when it ends.
    pub(super) slot: bool,
}
