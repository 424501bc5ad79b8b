//! The caller's deadline, end to end: read from the request, capping the proxy's own
//! timeouts, and forwarded with each attempt as the time that remains.
//!
//! - gRPC callers send `grpc-timeout` (`100m`); HTTP callers may send
//!   [`HTTP_HEADER`] (`x-tailguard-timeout-ms: 250`, whole milliseconds, at most 8 digits): the
//!   time they still give the request. A relative time, so no clocks need to agree (Linkerd
//!   1's `l5d-ctx-deadline` carries absolute times).
//! - The request's deadline is the sooner of the caller's and the service's total timeout.
//! - Each attempt carries, in whichever of the two headers the caller sent, the time left when
//!   it is sent (rounded down): a backend behind the proxy knows how long it has.
//! - A malformed value is ignored and not forwarded, as gRPC servers ignore one; a header sent
//!   more than once gives the soonest of its valid values, and each attempt carries that one.

use http::{HeaderMap, HeaderName, HeaderValue};
use std::time::Duration;
use tokio::time::Instant;

/// An HTTP caller's deadline header: the milliseconds it still gives the request.
pub const HTTP_HEADER: &str = "x-tailguard-timeout-ms";

/// gRPC's deadline header.
pub const GRPC_HEADER: &str = "grpc-timeout";

/// What the caller said about its deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// `grpc-timeout`, if well formed.
    pub grpc: Option<Duration>,
    /// [`HTTP_HEADER`], if well formed.
    pub http: Option<Duration>,
}

impl Caller {
    /// Reads both headers, removing malformed ones (they are not forwarded).
    pub fn read(headers: &mut HeaderMap) -> Self {
        // Most requests carry neither: one pass over the few names present, no lookups (a
        // lookup by name parses and hashes it, four of them per request). Compared as names,
        // not as strings: neither is a standard header, so a standard one differs at its
        // representation, where comparing it with a string reads its text from http's table
        // (about 4 L1 data misses a GET in callgrind's model).
        const GRPC: HeaderName = HeaderName::from_static(GRPC_HEADER);
        const HTTP: HeaderName = HeaderName::from_static(HTTP_HEADER);
        let named = |k: &HeaderName| *k == GRPC || *k == HTTP;
        if !headers.keys().any(named) {
            return Self::default();
        }
        let grpc = tailguard_http::grpc::timeout(headers);
        if grpc.is_none() {
            headers.remove(GRPC_HEADER);
        }
        // Sent more than once, the soonest valid value holds (a second header must not buy
        // more time than the first gave), and one value goes on (`stamp`).
        let http = headers
            .get_all(HTTP_HEADER)
            .iter()
            .filter_map(|v| millis(v.as_bytes()))
            .min();
        if http.is_none() {
            headers.remove(HTTP_HEADER);
        }
        Self { grpc, http }
    }

    /// The sooner of the two, and the header that said it.
    pub fn limit(self) -> Option<(Duration, &'static str)> {
        match (self.grpc, self.http) {
            (Some(g), Some(h)) if h < g => Some((h, HTTP_HEADER)),
            (Some(g), _) => Some((g, GRPC_HEADER)),
            (None, Some(h)) => Some((h, HTTP_HEADER)),
            (None, None) => None,
        }
    }
}

fn millis(v: &[u8]) -> Option<Duration> {
    if v.is_empty() || v.len() > 8 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(v).ok()?.parse().ok()?;
    Some(Duration::from_millis(n))
}

/// A request's deadline: when its time is up, why, and which headers carry what remains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    /// When.
    pub at: Instant,
    /// What set it: `grpc-timeout`, [`HTTP_HEADER`] or `total timeout`.
    pub why: &'static str,
    /// The caller's headers, rewritten on each attempt.
    pub caller: Caller,
}

impl Deadline {
    /// The time left at `now` (zero once past).
    pub fn left(&self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }

    /// Whether something that takes until `until` still ends before the deadline, with at
    /// least a millisecond to spare for the attempt itself.
    pub fn allows(&self, until: Instant) -> bool {
        until + Duration::from_millis(1) <= self.at
    }

    /// Whether [`Deadline::stamp`] writes a header: the caller sent one.
    pub fn stamps(&self) -> bool {
        self.caller.grpc.is_some() || self.caller.http.is_some()
    }

    /// Writes the time left at `now` into the headers the caller sent.
    pub fn stamp(&self, headers: &mut HeaderMap, now: Instant) {
        let left = self.left(now);
        if self.caller.grpc.is_some() {
            let v = tailguard_http::grpc::timeout_value(left);
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.insert(GRPC_HEADER, v);
            }
        }
        if self.caller.http.is_some() {
            let ms = left.as_millis().min(99_999_999) as u64;
            headers.insert(HTTP_HEADER, HeaderValue::from(ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn the_sooner_header_sets_it_and_malformed_ones_are_dropped() {
        let mut h = headers(&[(HTTP_HEADER, "250"), (GRPC_HEADER, "1S")]);
        let c = Caller::read(&mut h);
        assert_eq!(c.limit(), Some((Duration::from_millis(250), HTTP_HEADER)));
        for bad in ["", "-1", "1.5", "123456789", " 5", "0x10"] {
            let mut h = headers(&[(HTTP_HEADER, bad), (GRPC_HEADER, "5x")]);
            assert_eq!(Caller::read(&mut h), Caller::default(), "{bad:?}");
            assert!(h.is_empty(), "{bad:?}: not forwarded");
        }
        let mut h = headers(&[(GRPC_HEADER, "100m")]);
        let c = Caller::read(&mut h);
        assert_eq!(c.limit(), Some((Duration::from_millis(100), GRPC_HEADER)));
    }

    /// Two deadline headers: the soonest valid value, in whichever order (the first used to
    /// win: `99999999` then `300` gave the request 27 hours).
    #[test]
    fn the_soonest_of_repeated_headers_holds() {
        for (name, values, want) in [
            (HTTP_HEADER, ["99999999", "300"], 300),
            (HTTP_HEADER, ["300", "99999999"], 300),
            (HTTP_HEADER, ["x", "300"], 300),
            (GRPC_HEADER, ["99999999S", "300m"], 300),
        ] {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(http::HeaderName::from_static(name), v.parse().unwrap());
            }
            let c = Caller::read(&mut h);
            let got = c.limit().map(|(d, _)| d);
            assert_eq!(got, Some(Duration::from_millis(want)), "{name}: {values:?}");
            let d = Deadline {
                at: Instant::now() + Duration::from_millis(want),
                why: name,
                caller: c,
            };
            d.stamp(&mut h, Instant::now());
            assert_eq!(h.get_all(name).iter().count(), 1, "one value goes on");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_attempt_carries_what_remains_in_the_callers_headers() {
        let now = Instant::now();
        let caller = Caller {
            grpc: Some(Duration::from_secs(1)),
            http: Some(Duration::from_secs(1)),
        };
        let d = Deadline {
            at: now + Duration::from_millis(700),
            why: HTTP_HEADER,
            caller,
        };
        let mut h = HeaderMap::new();
        d.stamp(&mut h, now + Duration::from_micros(200_500));
        assert_eq!(h[GRPC_HEADER], "499500u");
        assert_eq!(h[HTTP_HEADER], "499");
        d.stamp(&mut h, now + Duration::from_secs(2));
        assert_eq!(h[GRPC_HEADER], "0n");
        assert_eq!(h[HTTP_HEADER], "0");
        assert!(d.allows(now + Duration::from_millis(699)));
        assert!(!d.allows(now + Duration::from_micros(699_500)));
        // Only the headers the caller sent.
        let only_grpc = Deadline {
            caller: Caller {
                http: None,
                ..caller
            },
            ..d
        };
        let mut h = HeaderMap::new();
        only_grpc.stamp(&mut h, now);
        assert!(h.get(HTTP_HEADER).is_none());
    }
}
