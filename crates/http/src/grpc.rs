//! What tailguard reads of gRPC, one copy for `load`, `serve` and the proxy: whether a message
//! is gRPC, its `grpc-status` (in trailers, or in the headers of a trailers-only response), and
//! the client's `grpc-timeout`.
//!
//! # Example
//! ```
//! use http::HeaderMap;
//! use std::time::Duration;
//! let mut h = HeaderMap::new();
//! h.insert("content-type", "application/grpc+proto".parse().unwrap());
//! h.insert("grpc-timeout", "250m".parse().unwrap());
//! h.insert("grpc-status", "14".parse().unwrap());
//! assert!(tailguard_http::grpc::is_grpc(&h));
//! assert_eq!(tailguard_http::grpc::timeout(&h), Some(Duration::from_millis(250)));
//! assert_eq!(tailguard_http::grpc::status(&h), Some(14));
//! ```

use http::header::CONTENT_TYPE;
use http::HeaderMap;
use std::time::Duration;

/// The code a call gets when its stream ends without a `grpc-status` (gRPC's clients treat a
/// missing status as an error; UNKNOWN is the code for "the server did not say").
pub const MISSING_STATUS: u8 = 2;

/// True when `headers` say `content-type: application/grpc` (with or without a `+suffix` or
/// `;parameters`).
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.len() >= 16
            && v[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

/// The `grpc-status` code in `headers` (trailers, or a trailers-only response's headers);
/// `None` when absent. A value that is not a small number counts as UNKNOWN.
pub fn status(headers: &HeaderMap) -> Option<u8> {
    let v = headers.get("grpc-status")?;
    let parsed = std::str::from_utf8(v.as_bytes())
        .ok()
        .and_then(|s| s.trim().parse::<u8>().ok());
    Some(parsed.unwrap_or(MISSING_STATUS))
}

/// The `grpc-message` in `headers`, percent-decoded (as the gRPC over HTTP/2 spec encodes
/// it), cut to `max` characters; `None` when absent. Bytes that are not UTF-8 are replaced.
pub fn message(headers: &HeaderMap, max: usize) -> Option<String> {
    let raw = headers.get("grpc-message")?.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut bytes = Vec::with_capacity(raw.len().min(4 * max));
    let mut i = 0;
    while i < raw.len() && bytes.len() < 4 * max {
        match (
            raw[i],
            raw.get(i + 1).copied().and_then(hex),
            raw.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                bytes.push(hi << 4 | lo);
                i += 3;
            }
            (b, _, _) => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&bytes).chars().take(max).collect())
}

/// The call's code when `trailers` end its stream: their `grpc-status`, or
/// [`MISSING_STATUS`] when they lack one (trailers are the last word: a missing status is
/// a failure, as gRPC's clients read it).
pub fn status_at_end(trailers: &HeaderMap) -> u8 {
    status(trailers).unwrap_or(MISSING_STATUS)
}

/// The client's deadline from `grpc-timeout` (`1-8 digits` and a unit: `H`, `M`, `S`, `m`,
/// `u`, `n`, as the gRPC over HTTP/2 spec defines it); `None` when absent or malformed (a
/// malformed one is ignored, as gRPC servers do). Sent more than once, the soonest valid one
/// holds: a second header must not buy a call more time than the first gave it.
pub fn timeout(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all("grpc-timeout")
        .iter()
        .filter_map(|v| timeout_of(v.as_bytes()))
        .min()
}

/// One `grpc-timeout` value, if well formed.
fn timeout_of(v: &[u8]) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n * 3600),
        b"M" => Duration::from_secs(n * 60),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `d` as a `grpc-timeout` value: the finest unit whose count fits the spec's 8 digits, the
/// count rounded down (a receiver never gets more time than there is), e.g. `900000u`.
pub fn timeout_value(d: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let units: [(u128, char); 6] = [
        (d.as_nanos(), 'n'),
        (d.as_micros(), 'u'),
        (d.as_millis(), 'm'),
        (u128::from(d.as_secs()), 'S'),
        (u128::from(d.as_secs() / 60), 'M'),
        (u128::from(d.as_secs() / 3600), 'H'),
    ];
    let (n, unit) = units
        .into_iter()
        .find(|(n, _)| *n <= MAX)
        .unwrap_or((MAX, 'H'));
    format!("{n}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn messages_are_percent_decoded_and_cut() {
        let m = |v: &str, max| message(&headers(&[("grpc-message", v)]), max);
        assert_eq!(
            m("symbol%20'a.B'%20not%20found", 100).unwrap(),
            "symbol 'a.B' not found"
        );
        assert_eq!(m("caf%C3%A9 %zz 100%", 100).unwrap(), "café %zz 100%");
        assert_eq!(m("abcdef", 3).unwrap(), "abc");
        assert_eq!(message(&HeaderMap::new(), 10), None);
    }

    #[test]
    fn content_types() {
        for (ct, yes) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC;charset=utf-8", true),
            ("application/grpc-web", false),
            ("application/json", false),
        ] {
            assert_eq!(is_grpc(&headers(&[("content-type", ct)])), yes, "{ct}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn timeouts_by_unit_and_malformed_ones_ignored() {
        let t = |v: &str| timeout(&headers(&[("grpc-timeout", v)]));
        assert_eq!(t("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(t("2M"), Some(Duration::from_secs(120)));
        assert_eq!(t("3S"), Some(Duration::from_secs(3)));
        assert_eq!(t("100m"), Some(Duration::from_millis(100)));
        assert_eq!(t("7u"), Some(Duration::from_micros(7)));
        assert_eq!(t("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "123456789m", "10x", "-1S", "1.5S"] {
            assert_eq!(t(bad), None, "{bad:?}");
        }
        // Sent twice, the soonest valid value holds, whichever came first.
        for values in [
            ["99999999S", "300m"],
            ["300m", "99999999S"],
            ["bad", "300m"],
        ] {
            let mut h = HeaderMap::new();
            for v in values {
                h.append("grpc-timeout", v.parse().unwrap());
            }
            assert_eq!(timeout(&h), Some(Duration::from_millis(300)), "{values:?}");
        }
    }

    #[test]
    fn timeout_values_pick_the_finest_unit_that_fits() {
        let v = |d| timeout_value(d);
        assert_eq!(v(Duration::from_nanos(99_999_999)), "99999999n");
        assert_eq!(v(Duration::from_millis(900)), "900000u");
        assert_eq!(v(Duration::from_secs(1000)), "1000000m");
        assert_eq!(v(Duration::ZERO), "0n");
        assert_eq!(v(Duration::MAX), "99999999H");
    }

    proptest::proptest! {
        /// Written then read back: never more than the time there is, and less by under one
        /// unit of the value (at most a millionth of it, or a whole unit below 100 ms).
        #[test]
        fn a_timeout_value_reads_back_at_most_its_duration(nanos in 0u64..=u64::MAX / 4) {
            let d = Duration::from_nanos(nanos);
            let back = timeout(&headers(&[("grpc-timeout", &timeout_value(d))])).unwrap();
            proptest::prop_assert!(back <= d);
            proptest::prop_assert!(d - back <= d / 1_000_000 + Duration::from_secs(60));
            if d < Duration::from_secs(100) {
                proptest::prop_assert!(d - back < Duration::from_micros(1));
            }
        }
    }

    #[test]
    fn statuses() {
        assert_eq!(status(&headers(&[("grpc-status", "0")])), Some(0));
        assert_eq!(status(&headers(&[("grpc-status", "14")])), Some(14));
        // load once read this as UNKNOWN and the proxy as 14: one reading now, trimmed.
        assert_eq!(status(&headers(&[("grpc-status", " 14 ")])), Some(14));
        assert_eq!(
            status(&headers(&[("grpc-status", "x")])),
            Some(MISSING_STATUS)
        );
        assert_eq!(status(&HeaderMap::new()), None);
    }
}
