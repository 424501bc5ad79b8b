use super::*;
use http_body_util::BodyExt;
use std::collections::VecDeque;

/// A client body that yields `steps` in order: a chunk, or (None) one `Pending`.
struct Scripted {
    steps: VecDeque<Option<&'static str>>,
    trailers: Option<HeaderMap>,
}

impl Body for Scripted {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        match self.steps.pop_front() {
            Some(Some(s)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(s.as_bytes()))))),
            Some(None) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t)))),
        }
    }
}

fn replay(steps: &[Option<&'static str>], limit: usize) -> Replay {
    let mut t = HeaderMap::new();
    t.insert("grpc-x", "1".parse().unwrap());
    let body = Scripted {
        steps: steps.iter().copied().collect(),
        trailers: Some(t),
    };
    Replay::new(body.boxed(), limit)
}

/// Reads `body`'s next frame, waiting if need be.
async fn next(body: &mut ReplayBody) -> Option<Frame<Bytes>> {
    body.frame().await.map(|r| r.unwrap())
}

async fn all(mut body: ReplayBody) -> (String, bool) {
    let mut text = String::new();
    let mut trailers = false;
    while let Some(f) = next(&mut body).await {
        match f.into_data() {
            Ok(d) => text.push_str(std::str::from_utf8(&d).unwrap()),
            Err(f) => trailers = f.is_trailers(),
        }
    }
    (text, trailers)
}

#[tokio::test]
async fn a_retry_replays_what_was_read_then_reads_on() {
    let r = replay(&[Some("ab"), Some(""), Some("cd"), None, Some("ef")], 100);
    let mut first = r.body();
    assert_eq!(next(&mut first).await.unwrap().into_data().unwrap(), "ab");
    drop(first); // the attempt failed after one chunk
    assert!(r.replayable() && !r.complete());
    assert_eq!(all(r.body()).await, ("abcdef".into(), true));
    assert!(r.complete());
    // A backup of a complete body: everything from the copy in one frame, trailers included.
    let (mut a, b) = (r.body(), r.body());
    assert_eq!(a.size_hint().exact(), Some(6));
    assert_eq!(next(&mut a).await.unwrap().into_data().unwrap(), "abcdef");
    assert!(a.is_end_stream() || next(&mut a).await.unwrap().is_trailers());
    assert_eq!(all(b).await, ("abcdef".into(), true));
}

#[tokio::test]
async fn a_body_past_the_limit_streams_on_but_is_not_replayable() {
    let r = replay(&[Some("abcd"), Some("efgh")], 6);
    assert_eq!(all(r.body()).await, ("abcdefgh".into(), true));
    assert!(!r.replayable() && !r.complete());
    let err = r.body().frame().await.unwrap().unwrap_err();
    assert!(err.to_string().contains("retry buffer"), "{err}");
}

/// A client body that knows its end, as HTTP/2's (END_STREAM on the last DATA frame) and a
/// sized HTTP/1.1 body do: `is_end_stream` turns true with the last chunk.
struct Sized(VecDeque<&'static str>);

impl Body for Sized {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Polled {
        let chunk = self
            .0
            .pop_front()
            .map(|s| Ok(Frame::data(Bytes::from_static(s.as_bytes()))));
        Poll::Ready(chunk)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

/// The attempt that read a body past the limit ends it as the client did: it says so after
/// the last chunk and then yields nothing more (it used to fail with "outgrew the retry
/// buffer", and an HTTP/2 upstream reset every gRPC call with a message over 64 KiB).
#[tokio::test]
async fn a_body_past_the_limit_that_knows_its_end_ends_there() {
    let r = Replay::new(Sized(["abcd", "efgh"].into()).boxed(), 6);
    let mut body = r.body();
    assert_eq!(next(&mut body).await.unwrap().into_data().unwrap(), "abcd");
    assert!(!body.is_end_stream());
    assert_eq!(next(&mut body).await.unwrap().into_data().unwrap(), "efgh");
    assert!(body.is_end_stream(), "over with its last chunk");
    assert!(body.frame().await.is_none(), "and nothing after it");
    assert!(!r.replayable() && !r.complete());
    // Under the limit, the same body ends the same way.
    let r = Replay::new(Sized(["abcd", "efgh"].into()).boxed(), 100);
    let mut body = r.body();
    assert_eq!(all_of(&mut body).await, "abcdefgh");
    assert!(body.is_end_stream() && r.complete());
}

async fn all_of(body: &mut ReplayBody) -> String {
    let mut text = String::new();
    while !body.is_end_stream() {
        let Some(frame) = next(body).await else { break };
        text.push_str(std::str::from_utf8(&frame.into_data().unwrap()).unwrap());
    }
    text
}

#[tokio::test]
async fn a_second_reader_waits_until_the_first_gives_the_body_back() {
    let r = replay(&[Some("ab"), None, Some("cd")], 100);
    let mut first = r.body();
    assert_eq!(next(&mut first).await.unwrap().into_data().unwrap(), "ab");
    let second = tokio::spawn(all(r.body()));
    tokio::task::yield_now().await;
    assert!(
        !second.is_finished(),
        "the body is still held by the first attempt"
    );
    drop(first);
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), second).await;
    assert_eq!(got.unwrap().unwrap(), ("abcd".into(), true));
}

#[tokio::test]
async fn a_waiting_reader_wakes_when_the_first_reads_to_the_end() {
    let r = replay(&[Some("ab"), None, Some("cd")], 100);
    let mut first = r.body();
    assert_eq!(next(&mut first).await.unwrap().into_data().unwrap(), "ab");
    let second = tokio::spawn(all(r.body()));
    tokio::task::yield_now().await;
    // The first attempt reads the rest and keeps its body (as a connection still writing it).
    while next(&mut first).await.is_some() {}
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), second).await;
    assert_eq!(got.unwrap().unwrap(), ("abcd".into(), true));
    drop(first);
}

#[tokio::test]
async fn a_retry_keeps_what_the_abandoned_attempt_reads_even_past_the_limit() {
    // The endpoint answered after "ab"; its connection still writes the body when the retry
    // is decided, and the next chunk would outgrow the copy.
    let r = replay(&[Some("ab"), Some("cdef"), Some("gh")], 5);
    let mut first = r.body();
    assert_eq!(next(&mut first).await.unwrap().into_data().unwrap(), "ab");
    assert!(r.retire());
    let second = r.body();
    let err = first.frame().await.unwrap().unwrap_err();
    assert!(err.to_string().contains("went to a retry"), "{err}");
    assert!(
        r.replayable(),
        "the frame the first read went into the copy"
    );
    // The retry sends all of it, and only then does the copy outgrow the limit.
    assert_eq!(all(second).await, ("abcdefgh".into(), true));
    assert!(!r.replayable());
    assert!(!r.retire(), "no second retry of a body past the limit");
    drop(first);
}

#[tokio::test]
async fn a_retired_attempt_hands_the_body_over_before_reading_more() {
    let r = replay(&[Some("ab"), None, Some("cd")], 100);
    let mut first = r.body();
    assert_eq!(next(&mut first).await.unwrap().into_data().unwrap(), "ab");
    assert!(r.retire());
    let second = tokio::spawn(all(r.body()));
    tokio::task::yield_now().await;
    // The connection polls the abandoned body once more: it fails and hands the body over.
    assert!(first.frame().await.unwrap().is_err());
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), second).await;
    assert_eq!(got.unwrap().unwrap(), ("abcd".into(), true));
}
