//! How a request ended, and whether that counts as good, bad or failed.

use std::fmt;

/// Why a request got no HTTP response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// The connection could not be established (refused, unreachable).
    Connect,
    /// No complete response within the timeout.
    Timeout,
    /// The peer reset the connection.
    Reset,
    /// The peer closed the connection before a complete response.
    Closed,
    /// The peer sent something that is not valid HTTP.
    Protocol,
    /// The peer sent more interim (1xx) responses than a reader takes before the final one
    /// (16 heads or 16 KiB): a flood that would otherwise hold the request past its timeout.
    InterimFlood,
    /// The TLS handshake failed.
    Tls,
    /// Anything else.
    Other,
    /// Never sent: no connection was free within the timeout of its due time (every one was
    /// busy: the concurrency cap), or the run's end came first. Its latency is at least the
    /// timeout; it has no service time and no send lag.
    NoConnection,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::Connect,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Closed,
        ErrorKind::Protocol,
        ErrorKind::InterimFlood,
        ErrorKind::Tls,
        ErrorKind::Other,
        ErrorKind::NoConnection,
    ];

    /// A stable lower-case name, used in reports, JSON and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed",
            ErrorKind::Protocol => "protocol",
            ErrorKind::InterimFlood => "interim-flood",
            ErrorKind::Tls => "tls",
            ErrorKind::Other => "other",
            ErrorKind::NoConnection => "no-connection",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The end of one request: an HTTP status, or an error without a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete HTTP response with this status code.
    Status(u16),
    /// A complete gRPC response (HTTP 200) ending with this `grpc-status` code (0 = OK).
    Grpc(u8),
    /// No (complete) response.
    Error(ErrorKind),
}

/// The gRPC status codes' names, by code (`grpc-status`), as the gRPC spec spells them.
pub const GRPC_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The name of gRPC status `code` (`UNKNOWN` beyond the 17 the spec defines, as gRPC reads
/// an unknown code).
pub fn grpc_name(code: u8) -> &'static str {
    GRPC_NAMES
        .get(usize::from(code))
        .copied()
        .unwrap_or("UNKNOWN")
}

/// The HTTP status a gRPC status stands for, per gRPC's HTTP mapping (`UNAVAILABLE` is 503,
/// `NOT_FOUND` 404, `RESOURCE_EXHAUSTED` 429...): a gRPC outcome is classed as that status.
pub fn grpc_as_http(code: u8) -> u16 {
    match code {
        0 => 200,
        1 => 499,
        3 | 9 | 11 => 400,
        4 => 504,
        5 => 404,
        6 | 10 => 409,
        7 => 403,
        8 => 429,
        12 => 501,
        14 => 503,
        16 => 401,
        _ => 500, // UNKNOWN, INTERNAL, DATA_LOSS and codes gRPC does not define
    }
}

/// slow_cooker's three buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// 1xx to 4xx (or to 3xx when 4xx counts as bad).
    Good,
    /// 5xx and anything outside 100..=599.
    Bad,
    /// No HTTP response at all.
    Failed,
}

/// Decides good, bad or failed. Good = 1xx-4xx, bad = 5xx, failed = no response, as in
/// slow_cooker; `four_xx_bad` moves 4xx to bad. A gRPC status is classed as the HTTP status
/// it maps to ([`grpc_as_http`]): `OK` good, `UNAVAILABLE` bad, `INVALID_ARGUMENT` as a 400.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classifier {
    /// Count 4xx responses as bad.
    pub four_xx_bad: bool,
}

impl Classifier {
    /// The class of `outcome`.
    pub fn classify(self, outcome: Outcome) -> Class {
        match outcome {
            Outcome::Error(_) => Class::Failed,
            Outcome::Grpc(code) => self.classify(Outcome::Status(grpc_as_http(code))),
            Outcome::Status(s) if (100..400).contains(&s) => Class::Good,
            Outcome::Status(s) if (400..500).contains(&s) && !self.four_xx_bad => Class::Good,
            Outcome::Status(_) => Class::Bad,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_slow_cooker() {
        let table = [
            (Outcome::Status(100), false, Class::Good),
            (Outcome::Status(200), false, Class::Good),
            (Outcome::Status(404), false, Class::Good),
            (Outcome::Status(404), true, Class::Bad),
            (Outcome::Status(399), true, Class::Good),
            (Outcome::Status(500), false, Class::Bad),
            (Outcome::Status(99), false, Class::Bad),
            (Outcome::Status(600), false, Class::Bad),
            (Outcome::Error(ErrorKind::Reset), false, Class::Failed),
            (Outcome::Grpc(0), true, Class::Good),
            (Outcome::Grpc(14), false, Class::Bad),
            (Outcome::Grpc(3), false, Class::Good),
            (Outcome::Grpc(3), true, Class::Bad),
            (Outcome::Grpc(200), false, Class::Bad),
        ];
        for (outcome, four_xx_bad, want) in table {
            let c = Classifier { four_xx_bad };
            assert_eq!(
                c.classify(outcome),
                want,
                "{outcome:?} four_xx_bad={four_xx_bad}"
            );
        }
    }

    #[test]
    fn grpc_names_and_mapping_follow_the_spec() {
        assert_eq!(grpc_name(0), "OK");
        assert_eq!(grpc_name(14), "UNAVAILABLE");
        assert_eq!(grpc_name(16), "UNAUTHENTICATED");
        assert_eq!(grpc_name(99), "UNKNOWN");
        assert_eq!(grpc_as_http(12), 501);
        assert_eq!(grpc_as_http(4), 504);
    }
}
