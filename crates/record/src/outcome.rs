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
/// With `expect` (`--expect-status`), an HTTP status is good exactly when the set holds it,
/// and a gRPC status too when the set names any gRPC status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classifier {
    /// Count 4xx responses as bad.
    pub four_xx_bad: bool,
    /// The statuses that count as good (and nothing else does).
    pub expect: Option<StatusSet>,
}

impl Classifier {
    /// The class of `outcome`.
    pub fn classify(self, outcome: Outcome) -> Class {
        if self.rejects(outcome) {
            return Class::Bad;
        }
        match outcome {
            Outcome::Error(_) => Class::Failed,
            Outcome::Status(_) | Outcome::Grpc(_)
                if self.expect.is_some_and(|e| e.decides(outcome)) =>
            {
                Class::Good
            }
            Outcome::Grpc(code) => self.classify(Outcome::Status(grpc_as_http(code))),
            Outcome::Status(s) if (100..400).contains(&s) => Class::Good,
            Outcome::Status(s) if (400..500).contains(&s) && !self.four_xx_bad => Class::Good,
            Outcome::Status(_) => Class::Bad,
        }
    }

    /// True when `--expect-status` decides `outcome` and does not allow it: a failed status
    /// check (counted under [`Check::Status`]).
    pub fn rejects(self, outcome: Outcome) -> bool {
        self.expect
            .is_some_and(|e| e.decides(outcome) && !e.allows(outcome))
    }
}

/// A set of statuses (`--expect-status 2xx,304,OK`): HTTP codes 100 to 599, singly, by class
/// (`2xx`) or by range (`200-204`), and gRPC statuses by name (`OK`, `NOT_FOUND`).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusSet {
    /// Bit `s` for HTTP status `s` (0 to 639).
    http: [u64; 10],
    /// Bit `c` for gRPC status code `c`.
    grpc: u32,
}

impl std::fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string())
    }
}

impl StatusSet {
    fn has_http(&self, s: u16) -> bool {
        let s = usize::from(s);
        s < 640 && self.http[s / 64] & (1 << (s % 64)) != 0
    }

    fn add_http(&mut self, s: u16) {
        let s = usize::from(s);
        self.http[s / 64] |= 1 << (s % 64);
    }

    /// True when the set speaks about `outcome`: any HTTP status; a gRPC status only when the
    /// set names a gRPC status (else a gRPC outcome is classed as usual).
    pub fn decides(&self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Status(_) => true,
            Outcome::Grpc(_) => self.grpc != 0,
            Outcome::Error(_) => false,
        }
    }

    /// True when the set holds `outcome`'s status.
    pub fn allows(&self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Status(s) => self.has_http(s),
            Outcome::Grpc(c) => c < 32 && self.grpc & (1 << c) != 0,
            Outcome::Error(_) => false,
        }
    }
}

impl std::str::FromStr for StatusSet {
    type Err = String;

    /// Comma-separated: `200`, `2xx`, `200-299`, or a gRPC status name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut set = StatusSet::default();
        let code = |t: &str| -> Result<u16, String> {
            match t.parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(format!(
                    "{t:?} is not a status: give 100 to 599, a class such as 2xx, a range such as 200-204, or a gRPC status name such as OK"
                )),
            }
        };
        for token in s.split(',').map(str::trim) {
            if token.is_empty() {
                return Err(format!("{s:?} has an empty item"));
            }
            if let Some(c) = GRPC_NAMES
                .iter()
                .position(|n| n.eq_ignore_ascii_case(token))
            {
                set.grpc |= 1 << c;
            } else if let Some(class) = token
                .strip_suffix("xx")
                .or_else(|| token.strip_suffix("XX"))
            {
                let first = code(&format!("{class}00"))?;
                (first..first + 100).for_each(|c| set.add_http(c));
            } else if let Some((a, b)) = token.split_once('-') {
                let (a, b) = (code(a.trim())?, code(b.trim())?);
                if a > b {
                    return Err(format!(
                        "{token:?}: the range's first status must not be above its last"
                    ));
                }
                (a..=b).for_each(|c| set.add_http(c));
            } else {
                set.add_http(code(token)?);
            }
        }
        Ok(set)
    }
}

impl fmt::Display for StatusSet {
    /// The set in its shortest form: whole classes as `2xx`, runs as `200-204`, gRPC names.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items = Vec::new();
        let mut s = 100u16;
        while s <= 599 {
            if s.is_multiple_of(100) && (s..s + 100).all(|c| self.has_http(c)) {
                items.push(format!("{}xx", s / 100));
                s += 100;
            } else if self.has_http(s) {
                let mut end = s;
                while end < 599 && self.has_http(end + 1) && !(end + 1).is_multiple_of(100) {
                    end += 1;
                }
                items.push(if end == s {
                    s.to_string()
                } else {
                    format!("{s}-{end}")
                });
                s = end + 1;
            } else {
                s += 1;
            }
        }
        for (c, name) in GRPC_NAMES.iter().enumerate() {
            if self.grpc & (1 << c) != 0 {
                items.push((*name).to_string());
            }
        }
        f.write_str(&items.join(","))
    }
}

/// A check on an answer (`--expect-*`) that it can fail: the answer then counts as bad, under
/// the check's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// `--expect-status`: a status the set does not hold.
    Status,
    /// `--expect-body-sha256`: the body's SHA-256 differs.
    BodySha256,
    /// `--expect-body-contains`: the body lacks the text.
    BodyContains,
}

impl Check {
    /// Every check, in report order.
    pub const ALL: [Check; 3] = [Check::Status, Check::BodySha256, Check::BodyContains];

    /// The flag's name without `--expect-`: `status`, `body-sha256`, `body-contains`.
    pub fn name(self) -> &'static str {
        match self {
            Check::Status => "status",
            Check::BodySha256 => "body-sha256",
            Check::BodyContains => "body-contains",
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
            let c = Classifier {
                four_xx_bad,
                expect: None,
            };
            assert_eq!(
                c.classify(outcome),
                want,
                "{outcome:?} four_xx_bad={four_xx_bad}"
            );
        }
    }

    #[test]
    fn an_expected_status_set_decides_alone() {
        let set: StatusSet = "2xx, 304,404-405,not_found".parse().unwrap();
        assert_eq!(set.to_string(), "2xx,304,404-405,NOT_FOUND");
        let c = Classifier {
            four_xx_bad: false,
            expect: Some(set),
        };
        let table = [
            (Outcome::Status(204), Class::Good, false),
            (Outcome::Status(304), Class::Good, false),
            (Outcome::Status(301), Class::Bad, true),
            (Outcome::Status(404), Class::Good, false),
            (Outcome::Status(403), Class::Bad, true),
            (Outcome::Status(503), Class::Bad, true),
            (Outcome::Grpc(5), Class::Good, false),
            (Outcome::Grpc(0), Class::Bad, true),
            (Outcome::Error(ErrorKind::Reset), Class::Failed, false),
        ];
        for (outcome, class, rejected) in table {
            assert_eq!(c.classify(outcome), class, "{outcome:?}");
            assert_eq!(c.rejects(outcome), rejected, "{outcome:?}");
        }
        // Without a gRPC name, gRPC statuses are classed as usual.
        let http_only = Classifier {
            four_xx_bad: false,
            expect: Some("200".parse().unwrap()),
        };
        assert_eq!(http_only.classify(Outcome::Grpc(0)), Class::Good);
        assert_eq!(http_only.classify(Outcome::Grpc(14)), Class::Bad);
        assert!(!http_only.rejects(Outcome::Grpc(14)));
        for bad in ["", "2xx,", "99", "600", "6xx", "205-200", "OKAY", "2xy"] {
            assert!(bad.parse::<StatusSet>().is_err(), "{bad:?}");
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
