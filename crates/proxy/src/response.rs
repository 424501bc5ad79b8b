//! Every response the proxy makes itself, in one place: the status, a one-line reason in the
//! body and in `x-tailguard-error`, and, for a gRPC request, the same verdict as a gRPC
//! trailers-only response (HTTP 200, `grpc-status`, `grpc-message`), since a gRPC client reads
//! the call's outcome from `grpc-status` and turns any other HTTP status into UNKNOWN or
//! UNAVAILABLE without the reason.

use crate::body::ProxyBody;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};

/// The header naming why the proxy answered itself.
pub const ERROR_HEADER: &str = "x-tailguard-error";

/// How the client expects errors: as an HTTP status, or as a gRPC status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// An HTTP status with the reason in the body.
    Http,
    /// A gRPC trailers-only response.
    Grpc,
}

/// Marks (as a response extension) an answer to a request the client failed (a malformed,
/// aborted, idle or too slow body): not the service's failure, so the dashboard does not count
/// it as one, as accrual and the endpoint's success rate never see it.
#[derive(Clone, Copy, Debug)]
pub struct ClientsFault;

impl Reply {
    /// The proxy's own answer `status` with `reason`, in this form.
    pub fn error(self, status: StatusCode, reason: &str) -> Response<ProxyBody> {
        match self {
            Reply::Http => local(status, reason),
            Reply::Grpc => grpc(status, reason),
        }
    }

    /// The proxy's answer to a request the client failed, marked [`ClientsFault`].
    pub fn client_fault(self, status: StatusCode, reason: &str) -> Response<ProxyBody> {
        let mut resp = self.error(status, reason);
        resp.extensions_mut().insert(ClientsFault);
        resp
    }
}

/// A plain response the proxy makes itself.
pub fn local(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("{reason}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(reason) {
        resp.headers_mut().insert(ERROR_HEADER, v);
    }
    resp
}

/// The gRPC code for a proxy error with HTTP `status`: gRPC's HTTP-to-gRPC mapping
/// (`doc/http-grpc-status-mapping.md`), except that a timeout is DEADLINE_EXCEEDED (the proxy
/// knows the deadline passed) and 408 (the client's own slowness) is CANCELLED.
pub fn grpc_code(status: StatusCode) -> u8 {
    match status.as_u16() {
        400 => 13,             // INTERNAL
        401 => 16,             // UNAUTHENTICATED
        403 => 7,              // PERMISSION_DENIED
        404 => 12,             // UNIMPLEMENTED
        405 => 12,             // UNIMPLEMENTED
        408 => 1,              // CANCELLED
        429 | 502 | 503 => 14, // UNAVAILABLE
        504 => 4,              // DEADLINE_EXCEEDED
        _ => 2,                // UNKNOWN
    }
}

fn grpc(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    let mut resp = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    h.insert(
        "grpc-status",
        HeaderValue::from(i32::from(grpc_code(status))),
    );
    // grpc-message is percent-encoded (gRPC over HTTP/2 spec); the reasons are ASCII, so only
    // the few characters outside the unreserved set need escaping.
    if let Ok(v) = HeaderValue::from_str(&percent_encode(reason)) {
        h.insert("grpc-message", v);
    }
    if let Ok(v) = HeaderValue::from_str(reason) {
        h.insert(ERROR_HEADER, v);
    }
    resp
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn answers_plain_or_as_grpc() {
        use http::StatusCode;
        let plain = super::local(StatusCode::GATEWAY_TIMEOUT, "total timeout");
        assert_eq!(plain.status(), 504);
        let grpc = super::Reply::Grpc.error(StatusCode::GATEWAY_TIMEOUT, "total timeout");
        assert_eq!(grpc.status(), 200);
        assert_eq!(grpc.headers()["grpc-status"], "4"); // DEADLINE_EXCEEDED
    }

    use super::*;
    use hyper::body::Body;

    #[test]
    fn grpc_errors_are_trailers_only_responses_with_the_mapped_code() {
        let cases = [
            (502, "14"),
            (503, "14"),
            (504, "4"),
            (404, "12"),
            (400, "13"),
        ];
        for (status, code) in cases {
            let r = Reply::Grpc.error(StatusCode::from_u16(status).unwrap(), "why: 100%");
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()["grpc-status"], code, "{status}");
            assert_eq!(r.headers()["grpc-message"], "why: 100%25");
            assert_eq!(r.headers()[ERROR_HEADER], "why: 100%");
            assert!(r.body().is_end_stream(), "trailers-only: no body");
        }
    }
}
