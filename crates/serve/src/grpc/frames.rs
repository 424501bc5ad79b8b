//! The request side of serve's gRPC: every message a client sends is checked, within a
//! bound, before tonic decodes it, so a hostile body ends the call with a non-OK status.
//!
//! Why not leave it to tonic: tonic's reader does check the flag, a 4 MiB bound and a body
//! that ends inside a message, and a unary call answers its error; but tonic's reflection
//! service reads its request stream in a task of its own and takes any read error for the
//! client's end (tonic-reflection 0.14, `server/v1.rs`: `let Ok(req) = req else { return; }`),
//! so the call ended `OK`, whatever the client sent. [`Checked`] stands between hyper's body
//! and tonic: it hands tonic whole messages only, each once checked (so tonic's own checks
//! never see a violation first and every path answers the same code), and records what it
//! refused in a [`Verdict`], which the response side ([`super::status`]) writes into the
//! trailers in place of the `OK`.
//!
//! What each violation gets:
//! - a length prefix past [`Limits::message`], or a stream past [`Limits::stream`]:
//!   `RESOURCE_EXHAUSTED` (gRPC's `doc/statuscodes.md`: a message "larger than configured
//!   limit");
//! - the compressed flag (1) with no `grpc-encoding` other than `identity`: `INTERNAL`; with an
//!   encoding serve does not support (it supports none): `UNIMPLEMENTED` (gRPC's
//!   `doc/compression.md`, test cases 4 and 6; tonic answers the second itself, before the
//!   body is read);
//! - a flag other than 0 or 1, invalid protobuf, a body that ends inside a message:
//!   `INTERNAL`, as tonic, grpc-go and grpc-java answer them.

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};
use tonic::Status;

/// A gRPC message's prefix: the flag byte and a big-endian `u32` length.
const PREFIX: usize = 5;

/// Decodes a message as the call's request, for the verdict only.
type Decode = fn(&[u8]) -> Result<(), prost::DecodeError>;

/// How much one call may send.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// The longest message (its length prefix), in bytes.
    pub message: usize,
    /// The most a stream may carry in all, prefixes included.
    pub stream: usize,
    /// Whether a message must decode as the call's request (`None`: tonic's decoder checks).
    pub protobuf: Option<Decode>,
}

impl Limits {
    /// A reflection request names a file or a symbol, and serve's longest is under 100 bytes:
    /// 64 KiB is far past any real one and small enough that a stream of hostile ones costs
    /// little. A stream of them is bounded too: 1 MiB, thousands of real questions (a client
    /// asks a handful per command). The protobuf is checked here, as the reflection service
    /// drops a decoding error on the floor.
    pub(crate) const REFLECTION: Limits = Limits {
        message: 64 << 10,
        stream: 1 << 20,
        protobuf: Some(reflection_request),
    };

    /// A health request names a service: as small as a reflection question. A unary call
    /// carries one message, but tonic reads its stream to the end: at most one largest
    /// message's worth.
    pub(crate) const HEALTH: Limits = Limits {
        message: 64 << 10,
        stream: (64 << 10) + PREFIX,
        protobuf: None,
    };

    /// A ping carries a payload: tonic's default bound, 4 MiB, and one such message's worth
    /// on the stream.
    pub(crate) const PING: Limits = Limits {
        message: 4 << 20,
        stream: (4 << 20) + PREFIX,
        protobuf: None,
    };

    /// A client stream (`Collect`, `Echo`) carries many pings: each within tonic's 4 MiB,
    /// 64 MiB in all (a thousand messages of 64 KiB; a load test's stream of small ones
    /// never comes near).
    pub(crate) const STREAM: Limits = Limits {
        message: 4 << 20,
        stream: 64 << 20,
        protobuf: None,
    };
}

/// Whether `bytes` decode as a reflection request (v1 and v1alpha share the wire format).
fn reflection_request(bytes: &[u8]) -> Result<(), prost::DecodeError> {
    use prost::Message;
    tonic_reflection::pb::v1::ServerReflectionRequest::decode(bytes).map(drop)
}

/// What the request stream was refused for, if it was: set by [`Checked`], read by the
/// response side once the call's service has ended its answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Verdict(Arc<OnceLock<Status>>);

impl Verdict {
    /// The refusal, if any.
    pub(crate) fn get(&self) -> Option<&Status> {
        self.0.get()
    }
}

/// A request body handed on a whole, checked message at a time (module docs).
pub(crate) struct Checked<B> {
    inner: B,
    limits: Limits,
    /// What a compressed message gets: no encoding is `INTERNAL`, an unknown one
    /// `UNIMPLEMENTED`.
    encoded: bool,
    buf: BytesMut,
    /// Bytes kept so far, at most `limits.stream`.
    read: usize,
    /// The client sent past `limits.stream`.
    over: bool,
    verdict: Verdict,
    done: bool,
}

impl<B> Checked<B> {
    /// `body` of a request with these headers, checked within `limits`.
    pub(crate) fn new(body: B, headers: &http::HeaderMap, limits: Limits) -> Self {
        let encoded = headers
            .get("grpc-encoding")
            .is_some_and(|e| e.as_bytes() != b"identity");
        Checked {
            inner: body,
            limits,
            encoded,
            buf: BytesMut::new(),
            read: 0,
            over: false,
            verdict: Verdict::default(),
            done: false,
        }
    }

    /// Where the refusal, if any, will be.
    pub(crate) fn verdict(&self) -> Verdict {
        self.verdict.clone()
    }

    /// The next whole message in the buffer, checked; `Ok(None)` until one is whole.
    fn next_message(&mut self) -> Result<Option<Bytes>, Status> {
        if self.buf.len() < PREFIX {
            return Ok(None);
        }
        match (self.buf[0], self.encoded) {
            (0, _) => {}
            (1, false) => {
                return Err(Status::internal(
                    "the compressed flag is set and grpc-encoding names no compression",
                ))
            }
            (1, true) => return Err(unsupported_encoding()),
            (flag, _) => {
                return Err(Status::internal(format!(
                    "a message flag must be 0 or 1, not {flag}"
                )))
            }
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > self.limits.message {
            return Err(Status::resource_exhausted(format!(
                "a message of {len} bytes is past this call's bound of {} bytes",
                self.limits.message
            )));
        }
        if self.buf.len() - PREFIX < len {
            return Ok(None);
        }
        let message = self.buf.split_to(PREFIX + len).freeze();
        if let Some(decode) = self.limits.protobuf {
            decode(&message[PREFIX..]).map_err(|e| {
                Status::internal(format!("the message is not a valid request: {e}"))
            })?;
        }
        Ok(Some(message))
    }

    /// Takes one frame of the body: data is kept (up to the stream's bound) until a message
    /// is whole; trailers are handed on, unless they end the stream inside a message.
    fn take(&mut self, frame: Frame<Bytes>) -> Result<Option<Frame<Bytes>>, Status> {
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(trailers) if self.buf.is_empty() => return Ok(Some(trailers)),
            Err(_) => return Err(ended_inside()),
        };
        // Bytes past the stream's bound are not kept: the messages whole within it are
        // still handed on, then the stream is refused.
        let keep = data.len().min(self.limits.stream - self.read);
        self.over |= keep < data.len();
        self.read += keep;
        self.buf.extend_from_slice(&data[..keep]);
        Ok(None)
    }

    /// The refusal of a stream past its bound.
    fn past_bound(&self) -> Status {
        Status::resource_exhausted(format!(
            "the request stream is past this call's bound of {} bytes",
            self.limits.stream
        ))
    }

    /// Ends the stream with `status`, kept for the response side.
    fn refuse(&mut self, status: Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.done = true;
        self.buf = BytesMut::new();
        let _ = self.verdict.0.set(status.clone());
        Poll::Ready(Some(Err(status)))
    }
}

fn ended_inside() -> Status {
    Status::internal("the request ended inside a message")
}

/// An encoding serve does not decode (it decodes none), with the encodings it does accept.
fn unsupported_encoding() -> Status {
    let mut status = Status::unimplemented(
        "the message is compressed in an encoding this server does not support (identity only)",
    );
    let identity = tonic::metadata::MetadataValue::from_static("identity");
    status
        .metadata_mut()
        .insert("grpc-accept-encoding", identity);
    status
}

impl<B> Body for Checked<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let taken = match this.next_message() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(Frame::data(message)))),
                Ok(None) if this.over => Err(this.past_bound()),
                Ok(None) => match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                    Some(Ok(frame)) => this.take(frame),
                    // The client's own failure (a reset): no verdict, the call is over anyway.
                    Some(Err(err)) => {
                        return Poll::Ready(Some(Err(Status::from_error(err.into()))))
                    }
                    None if this.buf.is_empty() => return Poll::Ready(None),
                    None => Err(ended_inside()),
                },
                Err(status) => Err(status),
            };
            match taken {
                Ok(None) => {}
                Ok(Some(trailers)) => return Poll::Ready(Some(Ok(trailers))),
                Err(status) => return this.refuse(status),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.buf.is_empty() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::VecDeque;

    /// A body of the given frames.
    struct Frames(VecDeque<Frame<Bytes>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn data(bytes: &[u8]) -> Frame<Bytes> {
        Frame::data(Bytes::copy_from_slice(bytes))
    }

    fn trailers() -> Frame<Bytes> {
        Frame::trailers(http::HeaderMap::new())
    }

    /// What `frames` read as, with `grpc-encoding: encoding`: the frames handed on (data as
    /// bytes, trailers as `None`), the error, and the verdict.
    async fn read(
        frames: Vec<Frame<Bytes>>,
        encoding: Option<&'static str>,
    ) -> (Vec<Option<Bytes>>, Option<Status>, Option<tonic::Code>) {
        let mut headers = http::HeaderMap::new();
        if let Some(e) = encoding {
            headers.insert("grpc-encoding", http::HeaderValue::from_static(e));
        }
        let mut body = Checked::new(Frames(frames.into()), &headers, Limits::PING);
        let (mut out, mut error) = (Vec::new(), None);
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => out.push(frame.into_data().ok()),
                Err(status) => error = Some(status),
            }
        }
        let verdict = body.verdict().get().map(Status::code);
        (out, error, verdict)
    }

    #[tokio::test]
    async fn messages_are_handed_on_whole_and_in_order_then_the_trailers() {
        let (one, two) = (b"\0\0\0\0\x02hi", b"\0\0\0\0\x01!");
        let split = vec![
            data(&one[..3]),
            data(&[&one[3..], &two[..]].concat()),
            trailers(),
        ];
        let (out, error, verdict) = read(split, None).await;
        let want = vec![
            Some(Bytes::from_static(one)),
            Some(Bytes::from_static(two)),
            None,
        ];
        assert_eq!(out, want);
        assert!(error.is_none() && verdict.is_none());
    }

    #[tokio::test]
    async fn a_compressed_message_in_an_unsupported_encoding_is_unimplemented() {
        let (out, error, verdict) = read(vec![data(b"\x01\0\0\0\0")], Some("gzip")).await;
        let error = error.unwrap();
        assert!(out.is_empty());
        assert_eq!(
            (error.code(), verdict),
            (tonic::Code::Unimplemented, Some(error.code()))
        );
        assert_eq!(
            error.metadata().get("grpc-accept-encoding").unwrap(),
            "identity"
        );
    }

    #[tokio::test]
    async fn messages_within_the_streams_bound_are_handed_on_then_it_is_refused() {
        // Two 1 KiB messages and the start of a third in one chunk, past PING's stream bound
        // by the third only.
        let message = [&[0, 0, 0, 4, 0][..], &[b'x'; 1024][..]].concat();
        let mut chunk = vec![];
        for _ in 0..3 {
            chunk.extend(&message);
        }
        let mut body = Checked::new(
            Frames(vec![data(&chunk)].into()),
            &http::HeaderMap::new(),
            Limits {
                stream: 2 * message.len() + 10,
                ..Limits::PING
            },
        );
        for _ in 0..2 {
            let frame = body.frame().await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), message);
        }
        let refused = body.frame().await.unwrap().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn trailers_inside_a_message_are_internal() {
        let (out, error, verdict) = read(vec![data(b"\0\0\0\0\x09abc"), trailers()], None).await;
        assert!(out.is_empty());
        assert_eq!(error.map(|e| e.code()), Some(tonic::Code::Internal));
        assert_eq!(verdict, Some(tonic::Code::Internal));
    }
}
