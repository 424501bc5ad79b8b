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
    /// The connection was refused: the request never reached the endpoint.
    Refused,
    /// The connection was reset or closed before a response.
    Reset,
    /// No response within the attempt timeout.
    Timeout,
}

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
            four_xx_is_failure: false,
        }
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
            AttemptOutcome::Status(s) if s < 400 => true,
            AttemptOutcome::Status(s) if s < 500 => !self.four_xx_is_failure,
            _ => false,
        };
        let retryable = match outcome {
            AttemptOutcome::Refused => true,
            AttemptOutcome::Status(s) if s < 500 => false,
            _ => !success && self.retries(method),
        };
        Class { success, retryable }
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
        ];
        for (c, m, o, success, retryable) in cases {
            assert_eq!(c.classify(m, o), Class { success, retryable }, "{m} {o:?}");
        }
    }

    #[test]
    fn methods_parse_case_insensitively() {
        assert_eq!("get".parse::<Method>(), Ok(Method::Get));
        assert_eq!("PATCH".parse::<Method>(), Ok(Method::Patch));
        assert_eq!("BREW".parse::<Method>(), Ok(Method::Other));
        assert_eq!(Method::Delete.to_string(), "DELETE");
    }
}
