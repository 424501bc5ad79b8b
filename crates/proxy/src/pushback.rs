//! A backend's own word on when to come back: `Retry-After` on a 429 or 503 (RFC 9110
//! section 10.2.3: seconds, or an HTTP-date) and gRPC's `grpc-retry-pushback-ms` (gRFC A6).
//!
//! Read strictly, since a backend may be wrong or hostile: one `Retry-After` header, digits
//! only or an IMF-fixdate (or the two obsolete forms `httpdate` reads); anything else, two of
//! them, or a date already past is no pushback at all. How long is honoured is the caller's
//! cap (`client.pushbackMaxMs`, 10 s by default), so "a year" keeps an endpoint out for ten
//! seconds. gRPC's pushback is stricter by its own rule: a negative or unreadable value means
//! "do not retry".

use http::HeaderMap;
use std::time::{Duration, SystemTime};

/// How long `headers`' `Retry-After` asks to wait from `now` (`None`: it asks nothing
/// readable, or nothing at all).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let mut values = headers.get_all(http::header::RETRY_AFTER).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?.trim();
    let wait = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is "longer than any cap".
        Duration::from_secs(text.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        httpdate::parse_http_date(text)
            .ok()?
            .duration_since(now)
            .ok()?
    };
    (!wait.is_zero()).then_some(wait)
}

/// What a gRPC answer's `grpc-retry-pushback-ms` says about retrying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrpcPushback {
    /// Retry no sooner than this.
    Wait(Duration),
    /// Do not retry (a negative or unreadable value).
    Stop,
}

/// The `grpc-retry-pushback-ms` of `headers` (`None`: there is none).
pub fn grpc_pushback(headers: &HeaderMap) -> Option<GrpcPushback> {
    let value = headers.get("grpc-retry-pushback-ms")?;
    let ms = value
        .to_str()
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok());
    Some(match ms {
        Some(ms) if ms >= 0 => GrpcPushback::Wait(Duration::from_millis(ms.unsigned_abs())),
        _ => GrpcPushback::Stop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(name: &str, values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_nothing_else() {
        let now = httpdate::parse_http_date("Sun, 29 Nov 2026 07:00:00 GMT").unwrap();
        let after = |v: &[&str]| retry_after(&headers("retry-after", v), now);
        assert_eq!(after(&["3"]), Some(Duration::from_secs(3)));
        assert_eq!(after(&[" 120 "]), Some(Duration::from_secs(120)));
        assert_eq!(
            after(&["31536000"]),
            Some(Duration::from_secs(31_536_000)),
            "a year"
        );
        assert_eq!(
            after(&["99999999999999999999999"]),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            after(&["Sun, 29 Nov 2026 07:00:05 GMT"]),
            Some(Duration::from_secs(5))
        );
        for nothing in [
            &["0"][..],
            &["-1"],
            &["1.5"],
            &["soon"],
            &[""],
            &["Sun, 29 Nov 2026 06:59:00 GMT"], // already past
            &["3", "4"],                        // two answers: none
        ] {
            assert_eq!(after(nothing), None, "{nothing:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn grpc_pushback_is_a_wait_or_a_stop() {
        let p = |v: &str| grpc_pushback(&headers("grpc-retry-pushback-ms", &[v]));
        assert_eq!(
            p("250"),
            Some(GrpcPushback::Wait(Duration::from_millis(250)))
        );
        assert_eq!(p("0"), Some(GrpcPushback::Wait(Duration::ZERO)));
        assert_eq!(p("-1"), Some(GrpcPushback::Stop));
        assert_eq!(p("later"), Some(GrpcPushback::Stop));
        assert_eq!(grpc_pushback(&HeaderMap::new()), None);
    }
}
