//! One request on an HTTP/2 upstream connection, over the `h2` crate itself: the request's
//! body is sent by the request's own task while it waits for the response head (a task of its
//! own only when the body is still streaming once the head has come), and the response body
//! is read from the stream, its flow-control window given back as it goes.
//!
//! Through hyper's client every request was handed over a channel to the connection's task,
//! which spawned a task to wait for the response and another to send the body: two tasks
//! and the moves into them per call, the largest share of a gRPC call's cost in the proxy.

use crate::body::{BoxError, ProxyBody};
use ::h2::client::SendRequest;
use ::h2::{RecvStream, SendStream};
use bytes::Bytes;
use http::header::CONTENT_LENGTH;
use http::{HeaderValue, Request, Response};
use hyper::body::{Body, Frame, SizeHint};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::sync::oneshot;

/// Sends `req` on `tx` and waits for the response head, sending the body meanwhile.
///
/// # Errors
/// The stream's or the connection's error.
pub(super) async fn send(
    tx: &mut SendRequest<Bytes>,
    req: Request<ProxyBody>,
) -> Result<Response<RecvBody>, ::h2::Error> {
    // Hop-by-hop headers, the ones HTTP/2 forbids among them, went at the forward stage
    // (`hygiene::strip_hop_by_hop`, which leaves `te` only as `trailers`).
    let (mut parts, body) = req.into_parts();
    if let Some(len) = body.size_hint().exact() {
        let payload = !matches!(
            parts.method,
            http::Method::GET | http::Method::HEAD | http::Method::DELETE | http::Method::CONNECT
        );
        if (len != 0 || payload) && !parts.headers.contains_key(CONTENT_LENGTH) {
            parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
        }
    }
    let eos = body.is_end_stream();
    let (mut response, stream) = tx.send_request(Request::from_parts(parts, ()), eos)?;
    let mut pump = (!eos).then(|| Pump {
        body,
        stream,
        done: false,
    });
    let head = poll_fn(|cx| {
        if let Some(p) = pump.as_mut().filter(|p| !p.done) {
            // The body's failure is the stream's: it was reset; the response says why.
            let _ = p.poll_send(cx);
        }
        Pin::new(&mut response).poll(cx)
    })
    .await?;
    let mut cancel = None;
    if let Some(p) = pump.filter(|p| !p.done) {
        // The body is still streaming (a client or bidirectional stream): it goes on in a
        // task of its own, reset if the response is dropped before its end.
        let (tx, rx) = oneshot::channel();
        cancel = Some(tx);
        tokio::spawn(Streaming {
            pump: p,
            cancel: Some(rx),
        });
    }
    let length = head
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    Ok(head.map(|stream| RecvBody::new(stream, length, cancel)))
}

/// A request body being sent on its stream, as the stream's window allows.
struct Pump {
    body: ProxyBody,
    stream: SendStream<Bytes>,
    done: bool,
}

impl Pump {
    /// Sends what the body has, as far as the window allows; ready when the body has been
    /// sent whole, or the stream ended (reset, or the body failed: then reset).
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let result = self.poll_inner(cx);
        if let Poll::Ready(r) = result {
            self.done = true;
            if let Err(err) = r {
                tracing::debug!(%err, "request body not sent whole");
                self.stream.send_reset(::h2::Reason::CANCEL);
            }
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn poll_inner(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        loop {
            // Room in the window before more of the body is read (hyper's rule).
            self.stream.reserve_capacity(1);
            if self.stream.capacity() == 0 {
                loop {
                    match ready!(self.stream.poll_capacity(cx)) {
                        Some(Ok(0)) => {}
                        Some(Ok(_)) => break,
                        Some(Err(e)) => return Poll::Ready(Err(e.into())),
                        None => return Poll::Ready(Err("the stream ended".into())),
                    }
                }
            } else if let Poll::Ready(reason) = self.stream.poll_reset(cx) {
                let reason = reason?;
                // NO_ERROR: the endpoint answered without the rest of the body.
                return Poll::Ready(if reason == ::h2::Reason::NO_ERROR {
                    Ok(())
                } else {
                    Err(format!("the endpoint reset the stream: {reason}").into())
                });
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                None => {
                    self.stream.send_data(Bytes::new(), true)?;
                    return Poll::Ready(Ok(()));
                }
                Some(Err(e)) => return Poll::Ready(Err(e)),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let end = self.body.is_end_stream();
                        self.stream.send_data(data, end)?;
                        if end {
                            return Poll::Ready(Ok(()));
                        }
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            self.stream.send_trailers(trailers)?;
                            return Poll::Ready(Ok(()));
                        }
                    }
                },
            }
        }
    }
}

/// A request body still streaming after the response head came: sent until it ends, or reset
/// when its response is dropped before the end (the client went away, or the attempt lost).
struct Streaming {
    pump: Pump,
    /// Told when the response was dropped early; `None` once the response has ended whole.
    cancel: Option<oneshot::Receiver<()>>,
}

impl Future for Streaming {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if let Some(rx) = this.cancel.as_mut() {
            match Pin::new(rx).poll(cx) {
                Poll::Ready(Ok(())) => {
                    this.pump.stream.send_reset(::h2::Reason::CANCEL);
                    return Poll::Ready(());
                }
                Poll::Ready(Err(_)) => this.cancel = None,
                Poll::Pending => {}
            }
        }
        this.pump.poll_send(cx)
    }
}

/// A response body read from its HTTP/2 stream: data, then trailers if any.
#[derive(Debug)]
pub struct RecvBody {
    stream: RecvStream,
    data_done: bool,
    /// What `content-length` says is left to come, for the size hint.
    length: Option<u64>,
    /// Tells the request body's task, if any, that the response was dropped early.
    cancel: Option<oneshot::Sender<()>>,
}

impl Drop for RecvBody {
    fn drop(&mut self) {
        if let Some(tx) = self.cancel.take() {
            if !self.stream.is_end_stream() {
                let _ = tx.send(());
            }
        }
    }
}

impl RecvBody {
    fn new(stream: RecvStream, length: Option<u64>, cancel: Option<oneshot::Sender<()>>) -> Self {
        Self {
            data_done: stream.is_end_stream(),
            stream,
            length,
            cancel,
        }
    }
}

impl Body for RecvBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if !self.data_done {
            match ready!(self.stream.poll_data(cx)) {
                Some(Ok(data)) => {
                    // The window is given back as the data leaves: a slow reader holds the
                    // endpoint back by its own pace.
                    let _ = self.stream.flow_control().release_capacity(data.len());
                    if let Some(left) = self.length.as_mut() {
                        *left = left.saturating_sub(data.len() as u64);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                None => self.data_done = true,
            }
        }
        match ready!(self.stream.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e.into()))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stream.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.length
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
