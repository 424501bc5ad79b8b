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
pub use crate::config::ErrorDetail;
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
    /// request may go to another endpoint whatever its method. The reason a client is told,
    /// and why in a few words (the detail).
    Unreachable(Reason, String),
    /// The connection failed with the request on it, or the response body failed midway.
    Broken(Reason, String),
    /// No response within the attempt timeout, or a response body idle too long.
    Timeout,
}

/// The reasons a client is told when the proxy answers itself (`x-tailguard-error`, the body,
/// `grpc-message`): a fixed list, so that no endpoint address or error chain reaches a client
/// unless `limits.clientErrorDetail: full` asks for it. `/endpoints` and the logs keep the
/// detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The service has no endpoint.
    NoEndpoint,
    /// The endpoint refused the connection (or the network would not reach it).
    ConnectionRefused,
    /// No connection (or TLS handshake) within the connect timeout.
    ConnectTimeout,
    /// The endpoint closed or reset the connection, or the stream, with the request on it.
    ConnectionReset,
    /// No answer within the attempt timeout.
    AttemptTimeout,
    /// The request's total timeout passed.
    TotalTimeout,
    /// The endpoint's connection limit was reached and none was freed in time.
    ConnectionLimit,
    /// The service's `maxConcurrentRequests` was reached (and nobody may wait).
    InFlightLimit,
    /// The service's `concurrencyLimit` was reached (and nobody may wait).
    ConcurrencyLimit,
    /// The service's admission queue was full.
    QueueFull,
    /// A more critical request took this one's place in the full queue.
    Displaced,
    /// The request waited `queue.maxWaitMs` without a place.
    QueueWait,
    /// The request's deadline was too near for its expected wait in the queue.
    QueueDeadline,
    /// The endpoint spoke badly: a malformed response, a TLS or HTTP/2 protocol failure.
    UpstreamProtocol,
    /// Every endpoint asked to be left alone (`Retry-After`) for a while yet.
    PushedBack,
    /// The service's `rateLimit` was reached.
    RateLimited,
}

impl Reason {
    /// The words a client reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoEndpoint => "no endpoint",
            Reason::ConnectionRefused => "connection refused",
            Reason::ConnectTimeout => "connect timeout",
            Reason::ConnectionReset => "connection reset",
            Reason::AttemptTimeout => "attempt timeout",
            Reason::TotalTimeout => "total timeout",
            Reason::ConnectionLimit => "connection limit",
            Reason::InFlightLimit => "over maxConcurrentRequests",
            Reason::ConcurrencyLimit => "over concurrencyLimit",
            Reason::QueueFull => "admission queue full",
            Reason::Displaced => "displaced by a more critical request",
            Reason::QueueWait => "waited queue.maxWaitMs",
            Reason::QueueDeadline => "deadline too near to wait",
            Reason::UpstreamProtocol => "upstream protocol error",
            Reason::PushedBack => "every endpoint asked to wait (Retry-After)",
            Reason::RateLimited => "over rateLimit",
        }
    }

    /// Why a connection with the request on it failed, read from the error: the connection
    /// closed or reset (an I/O error, a response cut short, an HTTP/2 stream or connection
    /// reset other than for a protocol error), or else the endpoint's protocol.
    pub fn broken(e: &(dyn std::error::Error + 'static)) -> Reason {
        use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
        for err in std::iter::successors(Some(e), |err| err.source()) {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if matches!(
                    io.kind(),
                    ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
                ) {
                    return Reason::ConnectionReset;
                }
            }
            if let Some(h) = err.downcast_ref::<hyper::Error>() {
                if h.is_incomplete_message() || h.is_closed() || h.is_canceled() {
                    return Reason::ConnectionReset;
                }
            }
            if let Some(h2) = err.downcast_ref::<::h2::Error>() {
                let protocol = h2.reason() == Some(::h2::Reason::PROTOCOL_ERROR);
                if h2.is_io() || ((h2.is_reset() || h2.is_go_away()) && !protocol) {
                    return Reason::ConnectionReset;
                }
            }
            if let Some(tailguard_http::h1::parse::Error::Closed) =
                err.downcast_ref::<tailguard_http::h1::parse::Error>()
            {
                return Reason::ConnectionReset;
            }
        }
        Reason::UpstreamProtocol
    }
}

impl EndpointFault {
    /// The attempt's outcome as the classifier and accrual read it.
    pub fn outcome(&self) -> AttemptOutcome {
        match self.failure {
            Failure::Unreachable(..) => AttemptOutcome::Refused,
            Failure::Broken(..) => AttemptOutcome::Reset,
            Failure::Timeout => AttemptOutcome::Timeout,
        }
    }

    /// Why, in words, when there is more to say than the outcome.
    pub fn why(&self) -> Option<&str> {
        match &self.failure {
            Failure::Unreachable(_, why) | Failure::Broken(_, why) => Some(why),
            Failure::Timeout => None,
        }
    }

    /// The reason a client is told.
    pub fn reason(&self) -> Reason {
        match &self.failure {
            Failure::Unreachable(r, _) | Failure::Broken(r, _) => *r,
            Failure::Timeout => Reason::AttemptTimeout,
        }
    }

    fn answer(&self, reply: Reply, detail: ErrorDetail) -> Response<ProxyBody> {
        let addr = self.addr;
        let status = match &self.failure {
            Failure::Unreachable(..) | Failure::Broken(..) => StatusCode::BAD_GATEWAY,
            Failure::Timeout => StatusCode::GATEWAY_TIMEOUT,
        };
        let why = self.why().unwrap_or("attempt timeout");
        match detail {
            ErrorDetail::Reason => reply.error(status, self.reason().as_str()),
            ErrorDetail::Full => reply.error(status, &format!("upstream {addr}: {why}")),
        }
    }
}

/// One of the proxy's own limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyFault {
    /// The service has no endpoints.
    NoEndpoints,
    /// The service's admission refused the request (no room and no wait, a full queue, a
    /// wait over, a deadline too near); `adaptive` when its bound is `concurrencyLimit`.
    Overloaded {
        /// Why.
        why: tailguard_resilience::admission::Refusal,
        /// The bound adapts (`concurrencyLimit`), rather than only `maxConcurrentRequests`.
        adaptive: bool,
        /// The queue has room for nobody (`queue` absent or `maxSize: 0`).
        no_queue: bool,
    },
    /// The endpoint is at its connection limit and none was freed in time (nothing sent).
    PoolExhausted {
        /// The endpoint.
        addr: SocketAddr,
        /// The limit and the wait, in words.
        why: String,
    },
    /// The request's time ran out: the total timeout, or the caller's own deadline (named).
    Deadline(&'static str),
    /// Every endpoint asked to be left alone; the first may be asked again after this long.
    PushedBack(std::time::Duration),
    /// The service's rate limit refused the request; a token comes after this long.
    RateLimited(std::time::Duration),
}

impl ProxyFault {
    fn answer(&self, reply: Reply, detail: ErrorDetail) -> Response<ProxyBody> {
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        match (self, detail) {
            (ProxyFault::NoEndpoints, _) => reply.error(unavailable, Reason::NoEndpoint.as_str()),
            // 503 (gRPC UNAVAILABLE) with `Retry-After: 1` (gRPC: a pushback of 1 s): the
            // service is overloaded now; a caller that waits a moment is welcome back.
            (
                ProxyFault::Overloaded {
                    why,
                    adaptive,
                    no_queue,
                },
                _,
            ) => {
                use tailguard_resilience::admission::Refusal;
                let reason = match why {
                    Refusal::QueueFull if *no_queue && *adaptive => Reason::ConcurrencyLimit,
                    Refusal::QueueFull if *no_queue => Reason::InFlightLimit,
                    Refusal::QueueFull => Reason::QueueFull,
                    Refusal::Displaced => Reason::Displaced,
                    Refusal::Waited => Reason::QueueWait,
                    Refusal::Deadline => Reason::QueueDeadline,
                };
                let mut resp = reply.error(unavailable, reason.as_str());
                let (name, value) = match reply {
                    Reply::Http => ("retry-after", 1),
                    Reply::Grpc => ("grpc-retry-pushback-ms", 1000),
                };
                resp.headers_mut()
                    .insert(name, http::HeaderValue::from(value));
                resp
            }
            (ProxyFault::PoolExhausted { .. }, ErrorDetail::Reason) => {
                reply.error(unavailable, Reason::ConnectionLimit.as_str())
            }
            (ProxyFault::PoolExhausted { addr, why }, ErrorDetail::Full) => {
                reply.error(unavailable, &format!("upstream {addr}: {why}"))
            }
            // `total timeout`, or the header whose deadline passed (`grpc-timeout`,
            // `x-tailguard-timeout-ms`): fixed words either way.
            (ProxyFault::Deadline(why), _) => reply.error(StatusCode::GATEWAY_TIMEOUT, why),
            // 429 with the seconds to a token (at least 1); gRPC: RESOURCE_EXHAUSTED, as
            // gRPC's own rate limiters answer.
            (ProxyFault::RateLimited(wait), _) => {
                let too_many = StatusCode::TOO_MANY_REQUESTS;
                let mut resp = reply.error(too_many, Reason::RateLimited.as_str());
                let h = resp.headers_mut();
                match reply {
                    Reply::Http => {
                        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                        h.insert("retry-after", http::HeaderValue::from(secs));
                    }
                    Reply::Grpc => {
                        h.insert("grpc-status", http::HeaderValue::from_static("8"));
                    }
                }
                resp
            }
            // Passed on: HTTP's `Retry-After` in whole seconds (at least 1), gRPC's pushback.
            (ProxyFault::PushedBack(left), _) => {
                let mut resp = reply.error(unavailable, Reason::PushedBack.as_str());
                let (name, value) = match reply {
                    Reply::Http => ("retry-after", left.as_secs_f64().ceil().max(1.0) as u64),
                    Reply::Grpc => ("grpc-retry-pushback-ms", left.as_millis().max(1) as u64),
                };
                resp.headers_mut()
                    .insert(name, http::HeaderValue::from(value));
                resp
            }
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
            SendError::Connect(_) => {
                let (reason, why) = connect_failure(e);
                Failure::Unreachable(reason, why)
            }
            SendError::Http(inner) => Failure::Broken(
                Reason::broken(&**inner),
                tailguard_http::error_chain(&**inner),
            ),
        };
        Fault::Endpoint(EndpointFault { addr, failure })
    }

    /// The proxy's answer, in the form the client expects: 400 or 408 (marked as the client's,
    /// [`crate::response::ClientsFault`]), 502 or 504 for the endpoint's failure, 503 or 504 for
    /// a limit; with a [`Reason`] from the fixed list, or (`detail` full) the endpoint and why.
    pub fn answer(&self, reply: Reply, detail: ErrorDetail) -> Response<ProxyBody> {
        match self {
            Fault::Client(f) => reply.client_fault(f.status(), &f.to_string()),
            Fault::Endpoint(f) => f.answer(reply, detail),
            Fault::Proxy(f) => f.answer(reply, detail),
        }
    }
}

/// Why no connection was made: the reason, and a few words (`connection refused`, `connect
/// timeout (1s)`, or the whole error chain for anything rarer). A refusal by the operating
/// system (no route, say) reads as refused; anything not of I/O (TLS, ALPN, the HTTP/2
/// handshake) as the endpoint's protocol.
fn connect_failure(e: &(dyn std::error::Error + 'static)) -> (Reason, String) {
    match tailguard_http::error::io_cause(e) {
        Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            (Reason::ConnectionRefused, "connection refused".to_owned())
        }
        Some(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            (Reason::ConnectTimeout, io.to_string())
        }
        Some(_) => (Reason::ConnectionRefused, tailguard_http::error_chain(e)),
        None => (Reason::UpstreamProtocol, tailguard_http::error_chain(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailguard_resilience::admission::Refusal;

    fn overloaded(why: Refusal, adaptive: bool, no_queue: bool) -> ProxyFault {
        ProxyFault::Overloaded {
            why,
            adaptive,
            no_queue,
        }
    }

    #[test]
    fn an_overloaded_service_asks_to_come_back_in_a_second() {
        let fault = Fault::Proxy(overloaded(Refusal::Waited, true, false));
        let http = fault.answer(Reply::Http, ErrorDetail::Reason);
        assert_eq!(http.status(), 503);
        assert_eq!(http.headers()["retry-after"], "1");
        let grpc = fault.answer(Reply::Grpc, ErrorDetail::Reason);
        assert_eq!(grpc.headers()["grpc-status"], "14");
        assert_eq!(grpc.headers()["grpc-retry-pushback-ms"], "1000");
    }

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
                endpoint(Failure::Unreachable(
                    Reason::ConnectionRefused,
                    "connection refused".into(),
                )),
                502,
            ),
            (
                endpoint(Failure::Broken(
                    Reason::ConnectionReset,
                    "connection reset".into(),
                )),
                502,
            ),
            (endpoint(Failure::Timeout), 504),
            (Fault::Proxy(ProxyFault::NoEndpoints), 503),
            (
                Fault::Proxy(overloaded(Refusal::QueueFull, false, true)),
                503,
            ),
            (
                Fault::Proxy(overloaded(Refusal::Deadline, true, false)),
                503,
            ),
            (Fault::Proxy(ProxyFault::Deadline("grpc-timeout")), 504),
        ];
        for (fault, status) in cases {
            let resp = fault.answer(Reply::Http, ErrorDetail::Full);
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
        let refused = endpoint(Failure::Unreachable(
            Reason::ConnectionRefused,
            "connection refused".into(),
        ));
        assert_eq!(
            reason(&refused.answer(Reply::Http, ErrorDetail::Full)),
            "upstream 127.0.0.1:9: connection refused"
        );
    }

    /// By default a client reads one reason from the fixed list: no address, no error chain,
    /// in the header, the body and `grpc-message` alike.
    #[test]
    fn by_default_clients_read_a_reason_from_the_list_only() {
        let addr: SocketAddr = "10.1.2.3:8080".parse().unwrap();
        let endpoint = |failure| Fault::Endpoint(EndpointFault { addr, failure });
        let cases = [
            (
                endpoint(Failure::Broken(
                    Reason::UpstreamProtocol,
                    "invalid response head: token; 2 attempts in 3 ms".into(),
                )),
                "upstream protocol error",
            ),
            (endpoint(Failure::Timeout), "attempt timeout"),
            (
                Fault::Proxy(ProxyFault::PoolExhausted {
                    addr,
                    why: "connection limit reached (4 per endpoint, waited 1s)".into(),
                }),
                "connection limit",
            ),
            (Fault::Proxy(ProxyFault::NoEndpoints), "no endpoint"),
            (
                Fault::Proxy(overloaded(Refusal::QueueFull, false, true)),
                "over maxConcurrentRequests",
            ),
            (
                Fault::Proxy(overloaded(Refusal::QueueFull, true, true)),
                "over concurrencyLimit",
            ),
            (
                Fault::Proxy(overloaded(Refusal::QueueFull, true, false)),
                "admission queue full",
            ),
            (
                Fault::Proxy(overloaded(Refusal::Displaced, true, false)),
                "displaced by a more critical request",
            ),
            (
                Fault::Proxy(overloaded(Refusal::Waited, true, false)),
                "waited queue.maxWaitMs",
            ),
            (
                Fault::Proxy(overloaded(Refusal::Deadline, false, false)),
                "deadline too near to wait",
            ),
            (
                Fault::Proxy(ProxyFault::Deadline("total timeout")),
                "total timeout",
            ),
        ];
        for (fault, want) in cases {
            let resp = fault.answer(Reply::Http, ErrorDetail::Reason);
            assert_eq!(reason(&resp), want, "{fault:?}");
            let grpc = fault.answer(Reply::Grpc, ErrorDetail::Reason);
            assert_eq!(grpc.headers()["grpc-message"], want.replace('%', "%25"));
            assert_eq!(reason(&grpc), want);
        }
    }

    #[test]
    fn a_broken_connection_is_told_apart_from_a_protocol_error() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(Reason::broken(&reset), Reason::ConnectionReset);
        let closed = tailguard_http::h1::parse::Error::Closed;
        assert_eq!(Reason::broken(&closed), Reason::ConnectionReset);
        let bad = tailguard_http::h1::parse::Error::ContentLength;
        assert_eq!(Reason::broken(&bad), Reason::UpstreamProtocol);
        let protocol = ::h2::Error::from(::h2::Reason::PROTOCOL_ERROR);
        assert_eq!(Reason::broken(&protocol), Reason::UpstreamProtocol);
    }

    #[test]
    fn only_what_an_endpoint_did_has_an_attempt_outcome() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let f = |failure| EndpointFault { addr, failure }.outcome();
        assert_eq!(
            f(Failure::Unreachable(
                Reason::ConnectionRefused,
                String::new()
            )),
            AttemptOutcome::Refused
        );
        assert_eq!(
            f(Failure::Broken(Reason::ConnectionReset, String::new())),
            AttemptOutcome::Reset
        );
        assert_eq!(f(Failure::Timeout), AttemptOutcome::Timeout);
    }
}
