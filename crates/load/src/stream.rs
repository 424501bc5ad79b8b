//! Streaming gRPC calls: the messages a call sends, paced by `--stream-interval`, while its
//! answers are read; every message counted and timed as it goes.
//!
//! A call is one request of the run (`-r` counts calls; its latency runs from its due time to
//! its last frame). Its messages are figures of their own ([`tailguard_record::Messages`]):
//! - bidirectional: each reply from the send of the message it answers (the n-th reply answers
//!   the n-th message, as an echo does; replies past the messages sent are counted, not timed);
//! - server streaming: each message from the call's send, and the first one apart (time to
//!   first message);
//! - client streaming: counted; the one answer's time is the call's.
//!
//! Sending and reading run together on the worker's task: a server may answer before it has
//! read everything, or only after. When the answer ends first (the server finished or failed
//! the call), the sending stops there.

use crate::clock::Clock;
use crate::conn::{Conn, HyperConn, Reply};
use crate::grpc::CallKind;
use crate::request::{ReqBody, Template};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::HeaderMap;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tailguard_record::{ErrorKind, Outcome, Stats};

/// What each streaming call of a run sends.
#[derive(Debug)]
pub(crate) struct Plan {
    pub kind: CallKind,
    /// The call's request messages, framed; a client stream sends them in turn.
    pub messages: Vec<Bytes>,
    /// Messages each call sends (client and bidirectional streams).
    pub count: usize,
    /// The pause between two sends.
    pub interval: Duration,
}

impl Plan {
    /// The plan of a run's streaming calls; `None` for unary calls and HTTP.
    pub(crate) fn of(cfg: &crate::Config) -> Option<Plan> {
        let call = cfg.grpc.as_ref().filter(|c| c.kind != CallKind::Unary)?;
        let count = match cfg.stream_messages {
            Some(n) => n as usize,
            None => call.messages.len(),
        };
        Some(Plan {
            kind: call.kind,
            messages: call.messages.clone(),
            count,
            interval: cfg.stream_interval,
        })
    }
}

/// Makes one streaming call on `conn` (HTTP/2), sent at `sent` on the run's clock; its
/// messages are counted into `stats` as they go.
pub(crate) async fn call(
    conn: &mut Conn,
    template: &Template,
    spare: Option<HeaderMap>,
    plan: &Plan,
    clock: Clock,
    sent: Duration,
    stats: &Mutex<Stats>,
) -> Result<Reply, ErrorKind> {
    let Conn::Hyper(HyperConn::H2(send)) = conn else {
        return Err(ErrorKind::Protocol);
    };
    // Send times of the messages not answered yet (bidirectional streams).
    let unanswered = Mutex::new(Unanswered::default());
    let (request, sending) = match plan.kind.client_streams() {
        true => {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let body = ReqBody::Stream(rx);
            (template.build_with(true, spare, body), Some(tx))
        }
        false => (template.build(true, spare), None),
    };
    let send_all = async {
        let Some(tx) = sending else { return };
        let mut first = None;
        for i in 0..plan.count {
            if let (Some(first), false) = (first, plan.interval.is_zero()) {
                // Due `interval` apart from the first send: a late wake-up is not carried
                // into the next message's time.
                let due = first + plan.interval.saturating_mul(i as u32);
                tokio::time::sleep_until(tokio::time::Instant::from_std(clock.origin() + due))
                    .await;
            }
            let message = plan.messages[i % plan.messages.len()].clone();
            let at = clock.elapsed();
            first = first.or(Some(at));
            if plan.kind == CallKind::Bidi {
                lock(&unanswered).sent(at);
            }
            if tx.send(message).await.is_err() {
                // The call is over: its stream was dropped.
                return;
            }
            lock(stats).messages_mut().sent += 1;
        }
        // Dropping the sender ends the request stream.
    };
    let receive = async {
        let response = send
            .send_request(request)
            .await
            .map_err(|e| tailguard_http::error::kind(&e))?;
        if !plan.kind.client_streams() {
            // The one request message went out with the request.
            lock(stats).messages_mut().sent += 1;
        }
        read(response, plan.kind, clock, sent, &unanswered, stats).await
    };
    tokio::pin!(send_all, receive);
    let mut sending_done = false;
    loop {
        tokio::select! {
            r = &mut receive => return r,
            () = &mut send_all, if !sending_done => sending_done = true,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads a streaming call's answer to its end: each message as its last byte arrives, then the
/// status from the trailers (or from the head of a trailers-only answer).
async fn read(
    response: hyper::Response<hyper::body::Incoming>,
    kind: CallKind,
    clock: Clock,
    sent: Duration,
    unanswered: &Mutex<Unanswered>,
    stats: &Mutex<Stats>,
) -> Result<Reply, ErrorKind> {
    let (parts, mut body) = response.into_parts();
    let mut spare = parts.headers;
    let http_status = parts.status.as_u16();
    let mut grpc_status = (http_status == 200)
        .then(|| tailguard_http::grpc::status(&spare))
        .flatten();
    spare.clear();
    let mut bytes = 0u64;
    let mut split = Splitter::default();
    let mut received = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| tailguard_http::error::kind(&e))?;
        if let Some(data) = frame.data_ref() {
            bytes += data.len() as u64;
            let whole = split.feed(data);
            if whole == 0 {
                continue;
            }
            let now = clock.elapsed();
            let mut stats = lock(stats);
            let m = stats.messages_mut();
            for _ in 0..whole {
                received += 1;
                m.received += 1;
                match kind {
                    CallKind::Bidi => {
                        if let Some(at) = lock(unanswered).answered() {
                            m.latency.record(now.saturating_sub(at));
                        }
                    }
                    CallKind::ServerStream => {
                        let latency = now.saturating_sub(sent);
                        m.latency.record(latency);
                        if received == 1 {
                            m.first.record(latency);
                        }
                    }
                    CallKind::ClientStream | CallKind::Unary => {}
                }
            }
        } else if let Some(trailers) = frame.trailers_ref() {
            grpc_status = grpc_status.or_else(|| tailguard_http::grpc::status(trailers));
        }
    }
    let outcome = match (http_status == 200, grpc_status) {
        (false, _) => Outcome::Status(http_status),
        (true, Some(code)) => Outcome::Grpc(code),
        (true, None) => return Err(ErrorKind::Protocol),
    };
    Ok(Reply {
        outcome,
        bytes,
        failed_check: None,
        spare,
    })
}

/// The most send times one bidirectional call keeps for replies to come (1 MiB): a server
/// that reads and does not answer cannot make a call hold more.
pub(crate) const MAX_UNANSWERED: usize = 1 << 16;

/// The send times of a bidirectional call's messages not answered yet, oldest first. Past
/// [`MAX_UNANSWERED`], later sends are not timed for the rest of the call (their replies are
/// counted, not timed), so the n-th reply still meets the n-th send.
#[derive(Debug, Default)]
pub(crate) struct Unanswered {
    times: VecDeque<Duration>,
    full: bool,
}

impl Unanswered {
    fn sent(&mut self, at: Duration) {
        self.full |= self.times.len() >= MAX_UNANSWERED;
        if !self.full {
            self.times.push_back(at);
        }
    }

    /// The send time of the message the next reply answers, if it was kept.
    fn answered(&mut self) -> Option<Duration> {
        self.times.pop_front()
    }
}

/// Finds where gRPC messages end in a stream of data frames, holding no message: only the
/// 5-byte prefix being read and the bytes left of the current message.
#[derive(Debug, Default)]
struct Splitter {
    prefix: [u8; 5],
    /// Bytes of the prefix read so far (5: reading the message).
    have: usize,
    /// Bytes left of the message being read.
    left: u64,
}

impl Splitter {
    /// Takes the next data; returns how many messages ended in it.
    fn feed(&mut self, mut data: &[u8]) -> usize {
        let mut ended = 0;
        while !data.is_empty() {
            if self.have < 5 {
                let n = (5 - self.have).min(data.len());
                self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
                self.have += n;
                data = &data[n..];
                if self.have == 5 {
                    let len = [
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ];
                    self.left = u64::from(u32::from_be_bytes(len));
                    if self.left == 0 {
                        ended += 1;
                        self.have = 0;
                    }
                }
                continue;
            }
            let n = usize::try_from(self.left)
                .unwrap_or(usize::MAX)
                .min(data.len());
            data = &data[n..];
            self.left -= n as u64;
            if self.left == 0 {
                ended += 1;
                self.have = 0;
            }
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn framed(messages: &[&[u8]]) -> Vec<u8> {
        messages
            .iter()
            .flat_map(|m| crate::grpc::frame(m).to_vec())
            .collect()
    }

    #[test]
    fn messages_end_where_their_length_says() {
        let wire = framed(&[b"abc", b"", b"de"]);
        let mut s = Splitter::default();
        assert_eq!(s.feed(&wire), 3);
        let mut s = Splitter::default();
        assert_eq!(s.feed(&wire[..7]), 0, "a prefix and two bytes of three");
        assert_eq!(s.feed(&wire[7..8]), 1);
        assert_eq!(s.feed(&wire[8..]), 2);
    }

    #[test]
    fn past_the_bound_replies_are_counted_untimed_and_never_misread() {
        let mut u = Unanswered::default();
        let ms = Duration::from_millis;
        for i in 0..(MAX_UNANSWERED as u64 + 10) {
            u.sent(ms(i));
        }
        assert_eq!(u.answered(), Some(ms(0)));
        // Room again, but the call's later sends stay untimed: reply n still meets send n.
        u.sent(ms(999_999));
        let mut last = None;
        while let Some(at) = u.answered() {
            last = Some(at);
        }
        assert_eq!(last, Some(ms(MAX_UNANSWERED as u64 - 1)));
        assert_eq!(u.answered(), None);
    }

    proptest! {
        /// However the bytes are cut into frames, every message is found once.
        #[test]
        fn any_cut_finds_every_message(
            lens in proptest::collection::vec(0usize..40, 0..20),
            cuts in proptest::collection::vec(1usize..17, 1..50),
        ) {
            let messages: Vec<Vec<u8>> = lens.iter().map(|&n| vec![7u8; n]).collect();
            let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
            let wire = framed(&refs);
            let mut s = Splitter::default();
            let (mut at, mut found, mut cut) = (0, 0, cuts.iter().cycle());
            while at < wire.len() {
                let n = (*cut.next().unwrap()).min(wire.len() - at);
                found += s.feed(&wire[at..at + n]);
                at += n;
            }
            prop_assert_eq!(found, messages.len());
        }
    }
}
