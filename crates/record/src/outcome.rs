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
    /// The TLS handshake failed.
    Tls,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::Connect,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Closed,
        ErrorKind::Protocol,
        ErrorKind::Tls,
        ErrorKind::Other,
    ];

    /// A stable lower-case name, used in reports, JSON and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Tls => "tls",
            ErrorKind::Other => "other",
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
    /// No (complete) response.
    Error(ErrorKind),
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
/// slow_cooker; `four_xx_bad` moves 4xx to bad.
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
}
