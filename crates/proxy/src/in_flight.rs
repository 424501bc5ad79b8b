//! One attempt in flight, as the balancer, failure accrual and metrics hear of it: the answer
//! the endpoint gave or the endpoint's own fault, once, with its round trip; or its
//! cancellation when it is dropped unfinished (the client's fault, the proxy's own limit, the
//! total timeout, a client that went away), so the balancer's pending count never leaks.
//!
//! Whose fault is in the types: [`InFlight::answered`] takes what the endpoint answered,
//! [`InFlight::failed`] an [`EndpointFault`]; a client's or the proxy's fault has no way in
//! and ends the attempt by dropping it.

use crate::clock::Clock;
use crate::endpoints::Endpoints;
use crate::fault::EndpointFault;
use crate::service::Service;
use crate::shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use tailguard_client::Sent;
use tailguard_resilience::accrual::Transition;
use tailguard_resilience::{AttemptOutcome, Class, Method};

/// What an endpoint answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP status.
    Status(u16),
    /// A gRPC call's `grpc-status` (a missing one read as gRPC reads it).
    Grpc(u8),
}

impl Answer {
    fn outcome(self) -> AttemptOutcome {
        match self {
            Answer::Status(s) => AttemptOutcome::Status(s),
            Answer::Grpc(code) => AttemptOutcome::Grpc(code),
        }
    }
}

/// One attempt in flight: reports its end once ([`InFlight::answered`],
/// [`InFlight::failed`]), or, dropped unfinished, its cancellation.
#[derive(Debug)]
pub struct InFlight {
    pub(crate) shared: Arc<Shared>,
    pub(crate) service: Arc<Service>,
    pub(crate) endpoints: Arc<Endpoints>,
    pub(crate) attempt: Option<(usize, Sent)>,
    pub(crate) slot: usize,
    pub(crate) method: Method,
    pub(crate) sent: Duration,
    pub(crate) clock: Clock,
}

impl InFlight {
    /// The endpoint answered, `rtt` after the attempt was sent: reported to the balancer,
    /// accrual and metrics; the classifier's verdict.
    pub fn answered(self, answer: Answer, rtt: Duration) -> Class {
        let now = self.clock.now();
        self.finish(answer.outcome(), rtt, None, None, now)
    }

    /// [`InFlight::answered`] just now (`rtt` read from the clock a moment ago: it is not read
    /// again), the answer also asking to be left alone for `wait` (`Retry-After`; `None`: it
    /// did not ask).
    pub fn answered_pushed(self, answer: Answer, rtt: Duration, wait: Option<Duration>) -> Class {
        let now = self.sent + rtt;
        self.finish(answer.outcome(), rtt, None, wait, now)
    }

    /// The endpoint failed the attempt, `rtt` after it was sent (the endpoint's fault only).
    pub fn failed(self, fault: &EndpointFault, rtt: Duration) -> Class {
        let now = self.clock.now();
        self.failed_at(fault, rtt, now)
    }

    /// [`InFlight::failed`] just now (`rtt` read from the clock a moment ago: it is not read
    /// again).
    pub fn failed_after(self, fault: &EndpointFault, rtt: Duration) -> Class {
        let now = self.sent + rtt;
        self.failed_at(fault, rtt, now)
    }

    fn failed_at(self, fault: &EndpointFault, rtt: Duration, now: Duration) -> Class {
        // `/endpoints` shows the cause (`connect timeout (1s)`, a TLS certificate's problem),
        // not only the outcome accrual reads.
        self.finish(fault.outcome(), rtt, fault.why(), None, now)
    }

    /// The endpoint began to answer before the outcome is known (a stream's head, its status
    /// still to come in the trailers): from now on the attempt is in flight but not waiting.
    pub fn answer_began(&mut self) {
        if let Some(a) = &mut self.attempt {
            self.endpoints.answer(a, self.clock.now());
        }
    }

    fn finish(
        mut self,
        outcome: AttemptOutcome,
        rtt: Duration,
        why: Option<&str>,
        wait: Option<Duration>,
        now: Duration,
    ) -> Class {
        let attempt = self.attempt.take().expect("finished once");
        let end =
            self.endpoints
                .complete_pushed(attempt, rtt, self.method, outcome, wait, now, why);
        record(&self, outcome, rtt, end.transition);
        end.class
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(a) = self.attempt.take() {
            self.endpoints.cancel(a, self.clock.now());
        }
    }
}

fn record(p: &InFlight, outcome: AttemptOutcome, rtt: Duration, change: Option<Transition>) {
    let m = &p.shared.metrics;
    let service = &p.service.config.name;
    let handles = p.endpoints.handles(p.slot, m, service);
    handles.latency.observe(rtt.as_secs_f64());
    let status = match outcome {
        AttemptOutcome::Status(s) => Some(s),
        AttemptOutcome::Grpc(code) => {
            m.grpc_attempt(service, p.endpoints.addr(p.slot), code);
            Some(tailguard_resilience::grpc_http_status(code))
        }
        _ => None,
    };
    handles.attempts(m, status).inc();
    let (state, what) = match change {
        None => return,
        Some(Transition::Tripped { .. }) => ("dead", "out of rotation"),
        Some(Transition::Revived) => ("alive", "back in rotation"),
    };
    let endpoint = p.endpoints.addr(p.slot);
    tracing::info!(%endpoint, %service, "failure accrual: endpoint {what}");
    handles.accrual(m, state);
}
