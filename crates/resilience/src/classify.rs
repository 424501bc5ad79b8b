//! Response classification: did an attempt succeed, and may it be retried?
//!
//! # What
//! Linkerd 1's response classifiers, as one configurable [`Classifier`]:
//! - success: a response with status 1xx to 4xx (slow_cooker's "good"); 4xx can be counted as
//!   failures instead ([`Classifier::four_xx_is_failure`]);
//! - failure: a 5xx, a reset or closed connection, a timeout, a refused connection;
//! - retryable: a refused connection always (the request never reached the endpoint, Finagle's
//!   "requeue"); any other failure only when the request method is in the classifier's
//!   retryable set. Presets: [`Classifier::non_retryable_5xx`] (Linkerd 1's default),
//!   [`Classifier::retryable_read_5xx`] (GET, HEAD, OPTIONS, TRACE: the seed's config),
//!   [`Classifier::retryable_idempotent_5xx`] (adds PUT and DELETE: tailguard's default).
//! - gRPC: a call's outcome is its `grpc-status` ([`AttemptOutcome::Grpc`]), judged by the
//!   HTTP status gRPC's own mapping gives the code (`google/rpc/code.proto`: UNAVAILABLE is 503,
//!   INVALID_ARGUMENT 400, ...), so a caller's mistake counts like a 4xx and a server's like a
//!   5xx. Every gRPC call is a POST, so retryability is by code, not by method: a set of codes
//!   (Linkerd 1's `io.l5d.h2.grpc.retryableStatusCodes`), UNAVAILABLE alone by default, as
//!   gRPC's own retry policy examples use.
//!
//! # Why
//! Retrying is only safe when repeating the request cannot do harm: reads, and idempotent
//! writes. A request whose body is streamed cannot be replayed either; the proxy checks that
//! before asking.
//!
//! # Example
//! ```
//! use tailguard_resilience::{AttemptOutcome, Classifier, Method};
//!
//! let c = Classifier::retryable_read_5xx();
//! let class = c.classify(Method::Get, AttemptOutcome::Status(503));
//! assert!(!class.success && class.retryable);
//! assert!(!c.classify(Method::Post, AttemptOutcome::Status(503)).retryable);
//! assert!(c.classify(Method::Post, AttemptOutcome::Refused).retryable);
//! assert!(c.classify(Method::Get, AttemptOutcome::Status(404)).success);
//! // gRPC UNAVAILABLE: a failure, retryable whatever the method (gRPC calls are POSTs).
//! assert!(c.classify(Method::Post, AttemptOutcome::Grpc(14)).retryable);
//! assert!(c.classify(Method::Post, AttemptOutcome::Grpc(5)).success); // NOT_FOUND: the caller's
//! ```

use std::fmt;
use std::str::FromStr;

/// An HTTP request method, as far as retry safety is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// OPTIONS.
    Options,
    /// TRACE.
    Trace,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// POST.
    Post,
    /// PATCH.
    Patch,
    /// CONNECT.
    Connect,
    /// Any other method (never retried).
    Other,
}

const METHODS: [(Method, &str); 9] = [
    (Method::Get, "GET"),
    (Method::Head, "HEAD"),
    (Method::Options, "OPTIONS"),
    (Method::Trace, "TRACE"),
    (Method::Put, "PUT"),
    (Method::Delete, "DELETE"),
    (Method::Post, "POST"),
    (Method::Patch, "PATCH"),
    (Method::Connect, "CONNECT"),
];

impl Method {
    /// Reads: GET, HEAD, OPTIONS, TRACE.
    pub const READS: &'static [Method] =
        &[Method::Get, Method::Head, Method::Options, Method::Trace];
    /// Idempotent methods (RFC 9110): the reads plus PUT and DELETE.
    pub const IDEMPOTENT: &'static [Method] = &[
        Method::Get,
        Method::Head,
        Method::Options,
        Method::Trace,
        Method::Put,
        Method::Delete,
    ];

    /// The method's name in upper case (`OTHER` for [`Method::Other`]).
    pub fn as_str(self) -> &'static str {
        METHODS
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("OTHER", |(_, name)| name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl FromStr for Method {
    type Err = std::convert::Infallible;

    /// Case-insensitive; unknown names are [`Method::Other`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let found = METHODS
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(s));
        Ok(found.map_or(Method::Other, |(m, _)| *m))
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// An HTTP response with this status.
    Status(u16),
    /// A gRPC call that ended with this `grpc-status` code (0 is OK).
    Grpc(u8),
    /// The connection was refused: the request never reached the endpoint.
    Refused,
    /// The connection was reset or closed before a response.
    Reset,
    /// No response within the attempt timeout.
    Timeout,
}

impl AttemptOutcome {
    /// True for an explicit "too busy" answer: HTTP 429 or gRPC RESOURCE_EXHAUSTED. Not a
    /// failure of the endpoint (accrual ignores it unless 4xx count as failures), but a load
    /// signal: the balancer charges it like a failure (see `tailguard_client`), as Linkerd 2's
    /// load biaser scores a 429 as a long round trip.
    pub fn is_overload(self) -> bool {
        matches!(self, AttemptOutcome::Status(429) | AttemptOutcome::Grpc(8))
    }
}

/// The HTTP status gRPC's mapping (`google/rpc/code.proto`) gives a `grpc-status` code; codes
/// above 16 are unknown, which the mapping treats as UNKNOWN (500).
///
/// ```
/// assert_eq!(tailguard_resilience::grpc_http_status(14), 503); // UNAVAILABLE
/// assert_eq!(tailguard_resilience::grpc_http_status(3), 400); // INVALID_ARGUMENT
/// ```
pub fn grpc_http_status(code: u8) -> u16 {
    const MAP: [u16; 17] = [
        200, // OK
        499, // CANCELLED (by the caller)
        500, // UNKNOWN
        400, // INVALID_ARGUMENT
        504, // DEADLINE_EXCEEDED
        404, // NOT_FOUND
        409, // ALREADY_EXISTS
        403, // PERMISSION_DENIED
        429, // RESOURCE_EXHAUSTED
        400, // FAILED_PRECONDITION
        409, // ABORTED
        400, // OUT_OF_RANGE
        501, // UNIMPLEMENTED
        500, // INTERNAL
        503, // UNAVAILABLE
        500, // DATA_LOSS
        401, // UNAUTHENTICATED
    ];
    MAP.get(usize::from(code)).copied().unwrap_or(500)
}

/// The gRPC code UNAVAILABLE, the one retried by default.
pub const GRPC_UNAVAILABLE: u8 = 14;

/// The verdict on one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    /// A good response.
    pub success: bool,
    /// A failure that may be retried on another endpoint.
    pub retryable: bool,
}

/// Which attempts succeed and which failures may be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classifier {
    retryable: u16,
    /// Bit `c` set: a failed gRPC call with code `c` may be retried.
    grpc_retryable: u32,
    /// Count 4xx responses as failures (they never are retryable).
    pub four_xx_is_failure: bool,
}

impl Default for Classifier {
    /// Retry failures of idempotent methods.
    fn default() -> Self {
        Self::retryable_idempotent_5xx()
    }
}

impl Classifier {
    /// A classifier retrying failures of `methods`.
    pub fn retrying(methods: &[Method]) -> Self {
        let retryable = methods.iter().fold(0, |acc, m| acc | m.bit());
        Self {
            retryable: retryable & !Method::Other.bit(),
            grpc_retryable: 1 << GRPC_UNAVAILABLE,
            four_xx_is_failure: false,
        }
    }

    /// This classifier, retrying failed gRPC calls whose code is in `codes` (whatever their
    /// method), and no others. Codes above 31 are ignored.
    pub fn with_grpc_retryable(mut self, codes: &[u8]) -> Self {
        self.grpc_retryable = codes
            .iter()
            .filter(|c| **c < 32)
            .fold(0, |acc, c| acc | 1 << c);
        self
    }

    /// This classifier, retrying every failed gRPC call (Linkerd 1's
    /// `io.l5d.h2.grpc.alwaysRetryable`).
    pub fn with_grpc_always_retryable(mut self) -> Self {
        self.grpc_retryable = !1;
        self
    }

    /// True when some failed gRPC calls may be retried (so a gRPC request body is worth
    /// buffering).
    pub fn retries_grpc(&self) -> bool {
        self.grpc_retryable != 0
    }

    /// The gRPC codes retried, in order.
    pub fn grpc_retryable_codes(&self) -> Vec<u8> {
        (0..32)
            .filter(|c| self.grpc_retryable & 1 << c != 0)
            .collect()
    }

    /// Never retries (except refused connections).
    pub fn non_retryable_5xx() -> Self {
        Self::retrying(&[])
    }

    /// Retries failures of reads: GET, HEAD, OPTIONS, TRACE.
    pub fn retryable_read_5xx() -> Self {
        Self::retrying(Method::READS)
    }

    /// Retries failures of idempotent methods: the reads, PUT, DELETE.
    pub fn retryable_idempotent_5xx() -> Self {
        Self::retrying(Method::IDEMPOTENT)
    }

    /// True when failures of `method` may be retried.
    pub fn retries(&self, method: Method) -> bool {
        self.retryable & method.bit() != 0
    }

    /// Classifies one attempt of a `method` request.
    pub fn classify(&self, method: Method, outcome: AttemptOutcome) -> Class {
        let success = match outcome {
            AttemptOutcome::Status(s) => self.http_success(s),
            AttemptOutcome::Grpc(c) => self.http_success(grpc_http_status(c)),
            _ => false,
        };
        let retryable = match outcome {
            AttemptOutcome::Refused => true,
            AttemptOutcome::Status(s) if s < 500 => false,
            AttemptOutcome::Grpc(c) => {
                !success && u32::from(c) < 32 && self.grpc_retryable & 1 << c != 0
            }
            _ => !success && self.retries(method),
        };
        Class { success, retryable }
    }
}

impl Classifier {
    fn http_success(&self, status: u16) -> bool {
        status < 400 || (status < 500 && !self.four_xx_is_failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AttemptOutcome::*;

    #[test]
    fn classification_table() {
        let read = Classifier::retryable_read_5xx();
        let idem = Classifier::retryable_idempotent_5xx();
        let none = Classifier::non_retryable_5xx();
        let strict = Classifier {
            four_xx_is_failure: true,
            ..read
        };
        // (classifier, method, outcome, success, retryable)
        let cases = [
            (read, Method::Get, Status(200), true, false),
            (read, Method::Get, Status(500), false, true),
            (read, Method::Head, Reset, false, true),
            (read, Method::Get, Timeout, false, true),
            (read, Method::Put, Status(502), false, false),
            (idem, Method::Put, Status(502), false, true),
            (idem, Method::Post, Status(502), false, false),
            (idem, Method::Post, Refused, false, true),
            (none, Method::Get, Status(500), false, false),
            (none, Method::Get, Refused, false, true),
            (read, Method::Get, Status(404), true, false),
            (strict, Method::Get, Status(404), false, false),
            (idem, Method::Other, Status(503), false, false),
            // gRPC: by code, whatever the method.
            (read, Method::Post, Grpc(0), true, false),
            (read, Method::Post, Grpc(14), false, true),
            (none, Method::Post, Grpc(14), false, true),
            (read, Method::Post, Grpc(13), false, false),
            (read, Method::Post, Grpc(4), false, false),
            (read, Method::Post, Grpc(3), true, false),
            (strict, Method::Post, Grpc(3), false, false),
            (read, Method::Post, Grpc(8), true, false),
            (read, Method::Post, Grpc(200), false, false),
        ];
        for (c, m, o, success, retryable) in cases {
            assert_eq!(c.classify(m, o), Class { success, retryable }, "{m} {o:?}");
        }
    }

    #[test]
    fn grpc_retryable_codes_are_configurable() {
        let c = Classifier::default().with_grpc_retryable(&[4, 14, 99]);
        assert_eq!(c.grpc_retryable_codes(), vec![4, 14]);
        assert!(c.classify(Method::Post, Grpc(4)).retryable);
        let never = Classifier::default().with_grpc_retryable(&[]);
        assert!(!never.retries_grpc());
        assert!(!never.classify(Method::Post, Grpc(14)).retryable);
        let always = Classifier::default().with_grpc_always_retryable();
        assert!(always.classify(Method::Post, Grpc(13)).retryable);
        assert!(
            !always.classify(Method::Post, Grpc(0)).retryable,
            "OK is no failure"
        );
        assert!(
            !always.classify(Method::Post, Grpc(5)).retryable,
            "NOT_FOUND is the caller's"
        );
    }

    #[test]
    fn every_grpc_code_maps_to_the_status_of_its_kind() {
        for code in 0..=20u8 {
            let s = grpc_http_status(code);
            let blame_server = matches!(code, 2 | 4 | 12 | 13 | 14 | 15) || code > 16;
            assert_eq!(s >= 500, blame_server, "code {code} -> {s}");
        }
        assert!(AttemptOutcome::Grpc(8).is_overload());
        assert!(AttemptOutcome::Status(429).is_overload());
        assert!(!AttemptOutcome::Grpc(14).is_overload());
    }

    #[test]
    fn methods_parse_case_insensitively() {
        assert_eq!("get".parse::<Method>(), Ok(Method::Get));
        assert_eq!("PATCH".parse::<Method>(), Ok(Method::Patch));
        assert_eq!("BREW".parse::<Method>(), Ok(Method::Other));
        assert_eq!(Method::Delete.to_string(), "DELETE");
    }
}
