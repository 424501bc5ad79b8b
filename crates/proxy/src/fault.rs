//! Whose fault: why a request (or one attempt of it) ended without an upstream response to
//! forward, as a type every stage of the request path returns (`Result<Response, Fault>`).
//!
//! - [`Fault::Client`]: the client's own body failed (malformed, aborted, idle, too slow).
//!   Answered 400 or 408; the endpoint never hears of it.
//! - [`Fault::Endpoint`]: the endpoint could not be reached, broke the connection with the
//!   request on it, or did not answer within the attempt timeout. The only fault that reaches
//!   the endpoint's accrual, load estimate, success rate and ejection:
//!   [`crate::in_flight::InFlight::failed`] takes an [`EndpointFault`] and nothing else.
//! - [`Fault::Proxy`]: the proxy's own limits (no endpoints, a pool at its connection limit,
//!   too many requests in flight, the total timeout or the caller's deadline). Answered 503 or
//!   504; nobody's accrual hears of it.
//!
//! A response the endpoint sent (a 503 included) is not a fault: it is forwarded, and its
//! status is what the classifier judges.

use crate::body::ProxyBody;
use crate::request_body::ClientFault;
use crate::response::Reply;
use crate::upstream::SendError;
use http::{Response, StatusCode};
use std::net::SocketAddr;
use tailguard_resilience::AttemptOutcome;

/// Why a request or an attempt ended without a response to forward; see the module docs.
#[derive(Debug)]
pub enum Fault {
    /// The client's: its request body failed.
    Client(ClientFault),
    /// The endpoint's: the only kind its accrual and load estimate hear of.
    Endpoint(EndpointFault),
    /// The proxy's own limits.
    Proxy(ProxyFault),
}

/// What went wrong with an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointFault {
    /// The endpoint.
    pub addr: SocketAddr,
    /// What it did.
    pub failure: Failure,
}

/// An endpoint's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection could be made (refused, connect timeout): nothing was sent, so the
    /// request may go to another endpoint whatever its method. Why, in a few words.
    Unreachable(String),
    /// The connection failed with the request on it, or the response body failed midway.
    Broken(String),
    /// No response within the attempt timeout, or a response body idle too long.
    Timeout,
}

impl EndpointFault {
    /// The attempt's outcome as the classifier and accrual read it.
    pub fn outcome(&self) -> AttemptOutcome {
        match self.failure {
            Failure::Unreachable(_) => AttemptOutcome::Refused,
            Failure::Broken(_) => AttemptOutcome::Reset,
            Failure::Timeout => AttemptOutcome::Timeout,
        }
    }

    /// Why, in words, when there is more to say than the outcome.
    pub fn why(&self) -> Option<&str> {
        match &self.failure {
            Failure::Unreachable(why) | Failure::Broken(why) => Some(why),
            Failure::Timeout => None,
        }
    }

    fn answer(&self, reply: Reply) -> Response<ProxyBody> {
        let addr = self.addr;
        match &self.failure {
            Failure::Unreachable(why) | Failure::Broken(why) => {
                reply.error(StatusCode::BAD_GATEWAY, &format!("upstream {addr}: {why}"))
            }
            Failure::Timeout => reply.error(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("upstream {addr}: attempt timeout"),
            ),
        }
    }
}

/// One of the proxy's own limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyFault {
    /// The service has no endpoints.
    NoEndpoints,
    /// The service is at its in-flight limit.
    InFlightLimit,
    /// The endpoint is at its connection limit and none was freed in time (nothing sent).
    PoolExhausted {
        /// The endpoint.
        addr: SocketAddr,
        /// The limit and the wait, in words.
        why: String,
    },
    /// The request's time ran out: the total timeout, or the caller's own deadline (named).
    Deadline(&'static str),
}

impl ProxyFault {
    fn answer(&self, reply: Reply) -> Response<ProxyBody> {
        match self {
            ProxyFault::NoEndpoints => reply.error(StatusCode::SERVICE_UNAVAILABLE, "no endpoints"),
            ProxyFault::InFlightLimit => reply.error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many requests in flight",
            ),
            ProxyFault::PoolExhausted { addr, why } => reply.error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("upstream {addr}: {why}"),
            ),
            ProxyFault::Deadline(why) => reply.error(StatusCode::GATEWAY_TIMEOUT, why),
        }
    }
}

impl Fault {
    /// An upstream request to `addr` that failed with `e`: the endpoint's fault, except a pool
    /// at its limit (the proxy's).
    pub fn upstream(addr: SocketAddr, e: &SendError) -> Self {
        let failure = match e {
            SendError::Exhausted(limit) => {
                return Fault::Proxy(ProxyFault::PoolExhausted {
                    addr,
                    why: limit.to_string(),
                })
            }
            SendError::Connect(_) => Failure::Unreachable(connect_failure(e)),
            SendError::Http(inner) => Failure::Broken(tailguard_http::error_chain(&**inner)),
        };
        Fault::Endpoint(EndpointFault { addr, failure })
    }

    /// The proxy's answer, in the form the client expects: 400 or 408 (marked as the client's,
    /// [`crate::response::ClientsFault`]), 502 or 504 naming the endpoint, 503 or 504 naming the
    /// limit.
    pub fn answer(&self, reply: Reply) -> Response<ProxyBody> {
        match self {
            Fault::Client(f) => reply.client_fault(f.status(), &f.to_string()),
            Fault::Endpoint(f) => f.answer(reply),
            Fault::Proxy(f) => f.answer(reply),
        }
    }
}

/// Why no connection was made, in a few words: `connection refused`, `connect timeout (1s)`,
/// or the whole error chain for anything rarer.
fn connect_failure(e: &(dyn std::error::Error + 'static)) -> String {
    match tailguard_http::error::io_cause(e) {
        Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused".to_owned()
        }
        Some(io) if io.kind() == std::io::ErrorKind::TimedOut => io.to_string(),
        _ => tailguard_http::error_chain(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(resp: &Response<ProxyBody>) -> &str {
        resp.headers()[crate::response::ERROR_HEADER]
            .to_str()
            .unwrap()
    }

    #[test]
    fn each_fault_is_answered_with_its_status_and_names_who() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let endpoint = |failure| Fault::Endpoint(EndpointFault { addr, failure });
        let cases = [
            (Fault::Client(ClientFault::Aborted), 400),
            (
                endpoint(Failure::Unreachable("connection refused".into())),
                502,
            ),
            (endpoint(Failure::Broken("connection reset".into())), 502),
            (endpoint(Failure::Timeout), 504),
            (Fault::Proxy(ProxyFault::NoEndpoints), 503),
            (Fault::Proxy(ProxyFault::InFlightLimit), 503),
            (Fault::Proxy(ProxyFault::Deadline("grpc-timeout")), 504),
        ];
        for (fault, status) in cases {
            let resp = fault.answer(Reply::Http);
            assert_eq!(resp.status(), status, "{fault:?}");
            let marked = resp
                .extensions()
                .get::<crate::response::ClientsFault>()
                .is_some();
            assert_eq!(marked, matches!(fault, Fault::Client(_)), "{fault:?}");
            if let Fault::Endpoint(_) = fault {
                assert!(reason(&resp).starts_with("upstream 127.0.0.1:9: "));
            }
        }
        let refused = endpoint(Failure::Unreachable("connection refused".into()));
        assert_eq!(
            reason(&refused.answer(Reply::Http)),
            "upstream 127.0.0.1:9: connection refused"
        );
    }

    #[test]
    fn only_what_an_endpoint_did_has_an_attempt_outcome() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let f = |failure| EndpointFault { addr, failure }.outcome();
        assert_eq!(
            f(Failure::Unreachable(String::new())),
            AttemptOutcome::Refused
        );
        assert_eq!(f(Failure::Broken(String::new())), AttemptOutcome::Reset);
        assert_eq!(f(Failure::Timeout), AttemptOutcome::Timeout);
    }
}
