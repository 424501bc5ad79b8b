//! A request body that another attempt can send again, whatever its size hint: the first
//! attempt streams the client's body as it comes and a copy of each frame is kept, up to the
//! service's `retryBufferBytes`; a retry (or a backup) replays the copy and then reads on from
//! the client where the last attempt stopped. linkerd2-proxy's `ReplayBody` works this way.
//!
//! Buffering the whole body before the first attempt would need its length in advance (many
//! clients send none: grpc-go never sends `content-length`, a chunked upload has none), and
//! would deadlock a gRPC stream whose client waits for an answer before it sends more.
//!
//! 1. [`Replay::body`] hands an attempt a [`ReplayBody`]. It yields the frames already copied,
//!    then takes the client's body (only one attempt reads it at a time; a later one waits
//!    until the earlier gives it back by being dropped) and reads on, copying each data frame
//!    and the trailers.
//! 2. A frame that would take the copy past the limit ends the copy (it is freed): the body is
//!    no longer replayable, and the attempt that holds it streams on alone.
//! 3. [`Replay::replayable`]: the copy is whole so far (another attempt can start);
//!    [`Replay::complete`]: the client's body has ended and all of it is copied (two attempts
//!    may send it at once: a hedged request).
//! 4. [`Replay::retire`]: a retry is decided. The attempts so far are abandoned, but a
//!    connection may still be writing one of their bodies (an endpoint may answer before it
//!    read the whole request). Such a body stops reading the client's: the next time it is
//!    polled it hands the client's body over and fails, and a frame it read meanwhile goes
//!    into the copy for the retry, limit or not (one frame at most), so the copy can no longer
//!    outgrow the limit behind the retry's back and leave it nothing to send.
//!
//! A replay that finds the copy gone says so with an error rather than sending a short body.

use crate::body::{BoxError, ProxyBody};
use bytes::Bytes;
use http::HeaderMap;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The shared copy of one request's body (module docs).
#[derive(Debug, Clone)]
pub struct Replay {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    /// The data frames copied so far (while `capped` is false).
    chunks: Vec<Bytes>,
    /// Their bytes.
    len: usize,
    /// The most bytes copied.
    limit: usize,
    /// The body outgrew `limit`: the copy is gone.
    capped: bool,
    /// The client's trailers, once read.
    trailers: Option<HeaderMap>,
    /// The client's body has ended.
    ended: bool,
    /// The client's body, when no attempt is reading it.
    rest: Option<ProxyBody>,
    /// The client's size hint, for a first reader.
    hint: SizeHint,
    /// An attempt waiting for `rest`.
    waiting: Option<Waker>,
    /// Bodies handed out before this many retries were decided are abandoned (step 4).
    generation: u64,
}

impl Replay {
    /// A copy of `body` of at most `limit` bytes.
    pub fn new(body: ProxyBody, limit: usize) -> Self {
        let hint = body.size_hint();
        let state = State {
            chunks: Vec::new(),
            len: 0,
            limit,
            capped: false,
            trailers: None,
            ended: false,
            rest: Some(body),
            hint,
            waiting: None,
            generation: 0,
        };
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Step 1: a body for the next attempt.
    pub fn body(&self) -> ReplayBody {
        ReplayBody {
            generation: self.lock().generation,
            state: Arc::clone(&self.state),
            next: 0,
            inner: None,
            trailers_sent: false,
            finished: false,
        }
    }

    /// Step 4: a retry will send the body again; false when it cannot (the copy is gone).
    pub fn retire(&self) -> bool {
        let mut s = self.lock();
        if s.capped {
            return false;
        }
        s.generation += 1;
        true
    }

    /// Step 3: another attempt can send the body (the copy holds all that was read).
    pub fn replayable(&self) -> bool {
        !self.lock().capped
    }

    /// Step 3: the whole body is copied.
    pub fn complete(&self) -> bool {
        let s = self.lock();
        s.ended && !s.capped
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Every update leaves the state whole; keep what a panicked holder left.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// One attempt's view of a [`Replay`] (module docs).
#[derive(Debug)]
pub struct ReplayBody {
    state: Arc<Mutex<State>>,
    /// Copied chunks this body has yielded.
    next: usize,
    /// The client's body, while this attempt reads it.
    inner: Option<ProxyBody>,
    trailers_sent: bool,
    /// This body read the client's to its end: it is over too, whether or not the copy
    /// outgrew the limit (a body past the limit has no copy to say so).
    finished: bool,
    /// The retries decided before this body was handed out (step 4).
    generation: u64,
}

/// A replay found its copy gone (an invariant broke: the caller checks `replayable`).
#[derive(Debug, thiserror::Error)]
#[error("the request body outgrew the retry buffer and cannot be sent again")]
pub struct NotReplayable;

/// An abandoned attempt's body stopped so that a retry can read the client's (step 4).
#[derive(Debug, thiserror::Error)]
#[error("the request body went to a retry")]
pub struct Superseded;

type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

impl ReplayBody {
    /// The client's body has ended: all of it is in the copy (unless it outgrew it).
    fn end(&mut self) {
        self.inner = None;
        self.finished = true;
        let mut s = lock(&self.state);
        s.ended = true;
        // An attempt waiting for the client's body now finds all of it in the copy.
        if let Some(w) = s.waiting.take() {
            w.wake();
        }
    }

    /// Whether a retry was decided after this body was handed out.
    fn retired(&self, s: &State) -> bool {
        self.generation < s.generation
    }

    /// Step 4: hands the client's body over to a retry.
    fn hand_over(&mut self, s: &mut State) -> Polled {
        if let Some(body) = self.inner.take() {
            s.rest = Some(body);
        }
        if let Some(w) = s.waiting.take() {
            w.wake();
        }
        Poll::Ready(Some(Err(Superseded.into())))
    }

    /// Keeps a copy of `frame` (step 2) and counts it as yielded; for a retired body, keeps it
    /// for the retry whatever the limit, and hands over (step 4).
    fn copy(&mut self, frame: Frame<Bytes>) -> Polled {
        let state = Arc::clone(&self.state);
        let mut s = lock(&state);
        if self.retired(&s) && !s.capped {
            if let Some(data) = frame.data_ref() {
                s.len += data.len();
                s.chunks.push(data.clone());
            } else if let Some(t) = frame.trailers_ref() {
                s.trailers = Some(t.clone());
            }
            if self.inner.as_ref().is_some_and(Body::is_end_stream) {
                self.inner = None;
                s.ended = true;
            }
            return self.hand_over(&mut s);
        }
        self.keep(&mut s, &frame);
        Poll::Ready(Some(Ok(frame)))
    }

    /// Step 2 for `frame`.
    fn keep(&mut self, s: &mut State, frame: &Frame<Bytes>) {
        if let Some(data) = frame.data_ref() {
            if s.capped {
                return;
            }
            if s.len + data.len() > s.limit {
                s.capped = true;
                s.chunks = Vec::new();
                s.len = 0;
                return;
            }
            s.len += data.len();
            s.chunks.push(data.clone());
            self.next = s.chunks.len();
        } else if let Some(t) = frame.trailers_ref() {
            self.trailers_sent = true;
            if !s.capped {
                s.trailers = Some(t.clone());
            }
        }
    }

    /// What the copy has for this body, or `None` when it must read the client's body.
    fn next_copied(&mut self, s: &mut State, cx: &Context<'_>) -> Option<Polled> {
        if self.inner.is_some() && self.retired(s) {
            return Some(self.hand_over(s));
        }
        if self.inner.is_none() && s.capped {
            return Some(Poll::Ready(Some(Err(NotReplayable.into()))));
        }
        if self.next < s.chunks.len() {
            // A body that has ended is replayed in one frame; one still arriving, chunk by
            // chunk as it came. (An HTTP/2 server counts small DATA frames against a budget
            // and answers a flood of them with GOAWAY: a replay must not multiply them.)
            let chunk = if s.ended {
                let rest = &s.chunks[self.next..];
                self.next = s.chunks.len();
                concat(rest)
            } else {
                self.next += 1;
                s.chunks[self.next - 1].clone()
            };
            return Some(Poll::Ready(Some(Ok(Frame::data(chunk)))));
        }
        if s.ended {
            let trailers = s.trailers.clone().filter(|_| !self.trailers_sent);
            self.trailers_sent = true;
            return Some(Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t)))));
        }
        if self.inner.is_none() {
            match s.rest.take() {
                Some(body) => self.inner = Some(body),
                None => {
                    s.waiting = Some(cx.waker().clone());
                    return Some(Poll::Pending);
                }
            }
        }
        None
    }
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        if this.finished {
            // Everything the client sent, trailers included, went through this body.
            return Poll::Ready(None);
        }
        {
            let state = Arc::clone(&this.state);
            let mut s = lock(&state);
            if let Some(polled) = this.next_copied(&mut s, cx) {
                return polled;
            }
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(Some(Err(NotReplayable.into())));
        };
        let mut polled = Pin::new(&mut *inner).poll_frame(cx);
        // An empty DATA frame carries nothing: pass over it rather than forward it.
        while matches!(&polled, Poll::Ready(Some(Ok(f))) if f.data_ref().is_some_and(Bytes::is_empty))
        {
            polled = Pin::new(&mut *inner).poll_frame(cx);
        }
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                let polled = this.copy(frame);
                // A body of known length is over with its last byte: a writer that knows the
                // length (hyper's HTTP/1.1 encoder) stops there without asking for the end.
                if this.inner.as_ref().is_some_and(Body::is_end_stream) {
                    this.end();
                }
                polled
            }
            Poll::Ready(None) => {
                this.end();
                Poll::Ready(None)
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.finished {
            return true;
        }
        let s = lock(&self.state);
        s.ended
            && !s.capped
            && self.next >= s.chunks.len()
            && (self.trailers_sent || s.trailers.is_none())
    }

    fn size_hint(&self) -> SizeHint {
        if self.finished {
            return SizeHint::with_exact(0);
        }
        let s = lock(&self.state);
        if s.ended && !s.capped {
            let left: usize = s.chunks.iter().skip(self.next).map(Bytes::len).sum();
            return SizeHint::with_exact(left as u64);
        }
        match (self.next, &self.inner) {
            (0, None) => s.hint,
            _ => SizeHint::default(),
        }
    }
}

/// `chunks` as one buffer (no copy for one chunk).
fn concat(chunks: &[Bytes]) -> Bytes {
    match chunks {
        [one] => one.clone(),
        many => many.concat().into(),
    }
}

impl Drop for ReplayBody {
    /// Gives the client's body back for the next attempt (step 1).
    fn drop(&mut self) {
        if let Some(body) = self.inner.take() {
            let mut s = lock(&self.state);
            s.rest = Some(body);
            if let Some(w) = s.waiting.take() {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests;
