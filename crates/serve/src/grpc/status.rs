//! The response side of serve's gRPC: a status the client can read. Every `grpc-message` is
//! cut to [`MAX_MESSAGE`] bytes, in the trailers and in a trailers-only answer's headers, and
//! a request stream that [`super::frames`] refused gets its refusal in the trailers in place
//! of the `OK` the service ended with.
//!
//! Why bound the message: it may quote the client (reflection's "symbol '...' not found",
//! "no method ..."), so an unknown 60 KB symbol came back as a 60 KB trailer block, past the
//! header list a client accepts (hyper's HTTP/2 client refuses one over 16 KiB by default),
//! and the client saw a protocol error instead of the status. 1 KiB keeps every message
//! serve writes itself and the start of any quote.
//!
//! `grpc-message` is percent-encoded UTF-8 (gRPC's `PROTOCOL-HTTP2.md`): the cut falls before
//! a byte that starts a character, never inside a `%XX` or between the bytes of one
//! character, so the value still decodes to valid UTF-8; `...` marks it.

use super::frames::Verdict;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tonic::Status;

/// The longest `grpc-message` value serve sends, in bytes as sent (percent-encoded).
pub(crate) const MAX_MESSAGE: usize = 1024;

/// What marks a cut message.
const CUT: &[u8] = b"...";

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// `resp` with its status settled: a refusal in `verdict` in place of the status the service
/// ended with, and every `grpc-message` bounded.
pub(crate) fn settle(
    resp: Response<tonic::body::Body>,
    verdict: Verdict,
) -> Response<tonic::body::Body> {
    let (mut parts, body) = resp.into_parts();
    if parts.headers.contains_key(GRPC_STATUS) {
        // Trailers-only: the status is in the headers and the body is empty.
        overrule(&mut parts.headers, &verdict);
        return Response::from_parts(parts, body);
    }
    let body = tonic::body::Body::new(Settled {
        inner: body,
        verdict,
    });
    Response::from_parts(parts, body)
}

/// Writes the verdict's status over `block`'s, if there is one, and bounds the message.
fn overrule(block: &mut HeaderMap, verdict: &Verdict) {
    if let Some(status) = verdict.get() {
        block.remove(GRPC_MESSAGE);
        block.remove(GRPC_DETAILS);
        if status.add_header(block).is_err() {
            block.insert(GRPC_STATUS, HeaderValue::from(status.code() as i32));
        }
    }
    bound_message(block);
}

/// Cuts `block`'s `grpc-message` to [`MAX_MESSAGE`] bytes (module docs).
fn bound_message(block: &mut HeaderMap) {
    let Some(value) = block.get(GRPC_MESSAGE) else {
        return;
    };
    if value.len() <= MAX_MESSAGE {
        return;
    }
    let text = value.as_bytes();
    let keep = cut(text, MAX_MESSAGE - CUT.len());
    let cut_text = [&text[..keep], CUT].concat();
    match HeaderValue::from_bytes(&cut_text) {
        Ok(value) => block.insert(GRPC_MESSAGE, value),
        Err(_) => block.remove(GRPC_MESSAGE),
    };
}

/// The longest prefix of percent-encoded `text`, at most `max` bytes, that ends before a
/// byte starting a character (a `%XX` or a plain byte that is not a UTF-8 continuation).
fn cut(text: &[u8], max: usize) -> usize {
    let (mut at, mut keep) = (0, 0);
    while at <= max && at < text.len() {
        let (byte, width) = decoded(text, at);
        if !(0x80..0xc0).contains(&byte) {
            keep = at;
        }
        at += width;
    }
    if at <= max {
        keep = at;
    }
    keep
}

/// The byte `text` encodes at `at`, and how many bytes of `text` encode it.
fn decoded(text: &[u8], at: usize) -> (u8, usize) {
    let hex = |b: u8| char::from(b).to_digit(16);
    match (text[at], text.get(at + 1..at + 3)) {
        (b'%', Some(&[hi, lo])) => match (hex(hi), hex(lo)) {
            (Some(hi), Some(lo)) => ((hi * 16 + lo) as u8, 3),
            _ => (b'%', 1),
        },
        (byte, _) => (byte, 1),
    }
}

/// A gRPC answer's body with its trailers settled ([`settle`]).
struct Settled {
    inner: tonic::body::Body,
    verdict: Verdict,
}

impl Body for Settled {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        Poll::Ready(frame.map(|frame| {
            frame.map(|frame| match frame.into_trailers() {
                Ok(mut trailers) => {
                    overrule(&mut trailers, &self.verdict);
                    Frame::trailers(trailers)
                }
                Err(frame) => frame,
            })
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_falls_before_a_character_and_within_the_bound() {
        assert_eq!(cut(b"abcdef", 4), 4);
        assert_eq!(cut(b"abc", 10), 3);
        // `é` is %C3%A9: never between the two, never inside one.
        let e = b"a%C3%A9%C3%A9";
        for (max, want) in [(1, 1), (3, 1), (6, 1), (7, 7), (12, 7), (13, 13)] {
            assert_eq!(cut(e, max), want, "{max}");
        }
        // A stray `%` or raw byte is its own character.
        assert_eq!(cut(b"%zz%4", 3), 3);
        assert_eq!(cut(&[b'a', 0xc3, 0xa9, b'b'], 2), 1);
    }

    #[test]
    fn a_long_message_is_cut_and_marked_and_a_short_one_kept() {
        let mut block = HeaderMap::new();
        let long = "%E2%82%AC".repeat(500);
        block.insert(GRPC_MESSAGE, HeaderValue::from_str(&long).unwrap());
        bound_message(&mut block);
        let value = block[GRPC_MESSAGE].as_bytes();
        assert!(value.len() <= MAX_MESSAGE, "{}", value.len());
        assert!(value.ends_with(b"%AC..."), "{value:?}");
        assert_eq!((value.len() - CUT.len()) % 9, 0);
        block.insert(GRPC_MESSAGE, HeaderValue::from_static("short"));
        bound_message(&mut block);
        assert_eq!(block[GRPC_MESSAGE], "short");
    }
}
