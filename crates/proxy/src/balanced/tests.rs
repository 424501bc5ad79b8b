//! The balanced stage alone, on paused time, over a scripted stand-in for the upstream stage:
//! whose fault each end is, and what the endpoint's accrual and counters hear of it.

use super::Balancer;
use crate::attempts::{AttemptBody, Attempted, Balanced, Outgoing, Turn};
use crate::body::BoxError;
use crate::clock::Clock;
use crate::config::{ServiceConfig, Upstream};
use crate::endpoints::EndpointView;
use crate::fault::{Failure, Fault, ProxyFault};
use crate::request_body::{ClientFault, FaultCell};
use crate::response::Reply;
use crate::service::Service;
use crate::shared::Shared;
use crate::upstream::{PoolExhausted, SendError, Stage, UpstreamBody};
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Frame;
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_resilience::Method;

/// What the stand-in upstream does with the next attempt.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// No connection: nothing sent.
    Refused,
    /// The pool is at its limit: nothing sent.
    Exhausted,
    /// Sent, then the connection broke.
    Broken,
    /// Sent, never answered.
    Hang,
    /// Answered with this status.
    Answer(u16),
    /// Answered 200 with a message and trailers carrying this `grpc-status`.
    Grpc(u8),
}

struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    /// Requests built, i.e. attempts that had a connection.
    made: AtomicUsize,
}

impl Scripted {
    fn new(steps: &[Step]) -> Self {
        Self {
            steps: Mutex::new(steps.iter().copied().collect()),
            made: AtomicUsize::new(0),
        }
    }
}

impl Stage for Scripted {
    fn send<'a>(
        &'a self,
        _addr: SocketAddr,
        _h2: bool,
        make: &'a dyn crate::upstream::Make,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, SendError>> + Send + 'a {
        let step = self.steps.lock().unwrap().pop_front().expect("scripted");
        Box::pin(async move {
            let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
            match step {
                Step::Refused => return Err(SendError::Connect(refused.into())),
                Step::Exhausted => {
                    return Err(SendError::Exhausted(PoolExhausted {
                        max: 1,
                        waited: Duration::from_secs(1),
                    }))
                }
                _ => {}
            }
            drop(make.request(false));
            self.made.fetch_add(1, Ordering::Relaxed);
            match step {
                Step::Broken => Err(SendError::Http("connection reset by peer".into())),
                Step::Hang => std::future::pending().await,
                Step::Answer(s) => {
                    let body = Empty::new().map_err(|never| match never {}).boxed();
                    let mut resp = Response::new(UpstreamBody::given(body));
                    *resp.status_mut() = http::StatusCode::from_u16(s).unwrap();
                    Ok(resp)
                }
                Step::Grpc(code) => {
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", code.to_string().parse().unwrap());
                    let frames: Vec<Result<Frame<Bytes>, BoxError>> = vec![
                        Ok(Frame::data(Bytes::from_static(b"\0\0\0\0\0"))),
                        Ok(Frame::trailers(trailers)),
                    ];
                    let body = StreamBody::new(futures_util::stream::iter(frames)).boxed();
                    Ok(Response::new(UpstreamBody::given(body)))
                }
                Step::Refused | Step::Exhausted => unreachable!(),
            }
        })
    }
}

/// A service of one endpoint under `edit`'s arm, and what every connection shares.
fn service(edit: impl FnOnce(&mut ServiceConfig)) -> (Arc<Shared>, Arc<Service>) {
    let clock = Clock::start();
    let upstreams = vec![Upstream::new("127.0.0.1:9".parse().unwrap())];
    let mut config = ServiceConfig::new("web", upstreams.clone());
    edit(&mut config);
    let service = Arc::new(Service::new(config, &upstreams, clock, 7, 1).unwrap());
    let shared = Arc::new(Shared::new(clock, vec![Arc::clone(&service)], None));
    (shared, service)
}

fn request(reply: Reply, fault: Option<FaultCell>) -> Outgoing {
    let (parts, ()) = Request::get("/").body(()).unwrap().into_parts();
    Outgoing {
        parts,
        body: Mutex::new(AttemptBody::Empty),
        method: Method::Get,
        h2: reply == Reply::Grpc,
        reply,
        fault,
        deadline: None,
        hedge: true,
        retry: None,
        trail: None,
        trace: None,
        admission: None,
        arrived: None,
        answered: Default::default(),
    }
}

/// One attempt of `request` through the balanced stage over `upstream`; its end and the
/// endpoint as the admin page shows it afterwards.
async fn attempt(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    upstream: &Scripted,
    request: &Outgoing,
) -> (Attempted, EndpointView) {
    let endpoints = service.endpoints();
    let stage = Balancer {
        shared,
        service,
        endpoints: &endpoints,
        upstream,
    };
    let mut slot = usize::MAX;
    let attempt = stage.attempt(request, Turn::First, shared.clock.now(), &mut slot);
    assert_eq!(slot, 0);
    let done = attempt.await;
    let view = endpoints.views(shared.clock.now()).remove(0);
    (done, view)
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_endpoint_is_its_own_fault_and_got_nothing() {
    let (shared, service) = service(|_| {});
    let upstream = Scripted::new(&[Step::Refused]);
    let (done, view) = attempt(&shared, &service, &upstream, &request(Reply::Http, None)).await;
    match done.result {
        Err(Fault::Endpoint(f)) => {
            assert_eq!(
                f.failure,
                Failure::Unreachable(
                    crate::fault::Reason::ConnectionRefused,
                    "connection refused".into()
                )
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(done.class.retryable && !done.class.success);
    assert_eq!(
        upstream.made.load(Ordering::Relaxed),
        0,
        "no request was built"
    );
    assert_eq!((view.failures, view.pending), (1, 0));
    assert_eq!(view.last_error.unwrap().what, "connection refused");
}

#[tokio::test(start_paused = true)]
async fn the_attempt_timeout_ends_a_silent_endpoint_as_its_fault() {
    let (shared, service) = service(|c| {
        c.arm.timeouts.attempt = Some(Duration::from_millis(100));
    });
    let upstream = Scripted::new(&[Step::Hang]);
    let started = tokio::time::Instant::now();
    let (done, view) = attempt(&shared, &service, &upstream, &request(Reply::Http, None)).await;
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    match done.result {
        Err(Fault::Endpoint(f)) => assert_eq!(f.failure, Failure::Timeout),
        other => panic!("{other:?}"),
    }
    assert_eq!((view.failures, view.pending), (1, 0));
    assert_eq!(view.last_error.unwrap().what, "timeout");
}

#[tokio::test(start_paused = true)]
async fn a_clients_fault_never_reaches_the_endpoint() {
    let (shared, service) = service(|_| {});
    let cell = FaultCell::default();
    cell.set(ClientFault::Aborted).unwrap();
    let upstream = Scripted::new(&[Step::Broken, Step::Answer(200)]);
    let request = request(Reply::Http, Some(cell));
    for _ in 0..2 {
        // Whether the upstream request failed or the endpoint answered a request it never got
        // whole, the client's fault decides.
        let (done, view) = attempt(&shared, &service, &upstream, &request).await;
        assert!(matches!(
            done.result,
            Err(Fault::Client(ClientFault::Aborted))
        ));
        assert_eq!(done.class, Attempted::FINAL);
        assert_eq!((view.successes, view.failures, view.pending), (0, 0, 0));
        assert!(view.last_error.is_none());
    }
}

#[tokio::test(start_paused = true)]
async fn a_pool_at_its_limit_is_the_proxys_fault() {
    let (shared, service) = service(|_| {});
    let upstream = Scripted::new(&[Step::Exhausted]);
    let (done, view) = attempt(&shared, &service, &upstream, &request(Reply::Http, None)).await;
    assert!(matches!(
        done.result,
        Err(Fault::Proxy(ProxyFault::PoolExhausted { .. }))
    ));
    assert_eq!(done.class, Attempted::FINAL);
    assert_eq!((view.successes, view.failures, view.pending), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_broken_connection_and_an_answer_are_the_endpoints_to_account_for() {
    let (shared, service) = service(|_| {});
    let upstream = Scripted::new(&[Step::Broken, Step::Answer(503), Step::Answer(200)]);
    let request = request(Reply::Http, None);
    let (done, view) = attempt(&shared, &service, &upstream, &request).await;
    assert!(matches!(done.result, Err(Fault::Endpoint(_))));
    assert_eq!(view.failures, 1);
    assert!(view
        .last_error
        .unwrap()
        .what
        .starts_with("connection reset"));
    let (done, view) = attempt(&shared, &service, &upstream, &request).await;
    assert_eq!(done.result.unwrap().status(), 503, "an answer is forwarded");
    assert!(!done.class.success && done.class.retryable);
    assert_eq!(view.failures, 2);
    let (done, view) = attempt(&shared, &service, &upstream, &request).await;
    assert!(done.class.success);
    assert_eq!((view.successes, view.failures, view.pending), (1, 2, 0));
}

#[tokio::test(start_paused = true)]
async fn a_grpc_status_already_delivered_decides_the_attempt() {
    let (shared, service) = service(|_| {});
    let upstream = Scripted::new(&[Step::Grpc(14), Step::Grpc(0)]);
    let request = request(Reply::Grpc, None);
    let (done, view) = attempt(&shared, &service, &upstream, &request).await;
    assert!(!done.class.success && done.class.retryable, "UNAVAILABLE");
    assert_eq!(view.last_error.unwrap().what, "gRPC 14 (UNAVAILABLE)");
    // The peeked frames still reach the client.
    let body = done.result.unwrap().into_body().collect().await.unwrap();
    let trailers = body.trailers().cloned().unwrap();
    assert_eq!(trailers["grpc-status"], "14");
    assert_eq!(body.to_bytes().len(), 5);
    let (done, view) = attempt(&shared, &service, &upstream, &request).await;
    assert!(done.class.success);
    assert_eq!((view.successes, view.failures), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn an_attempt_dropped_midway_is_cancelled_not_failed() {
    let (shared, service) = service(|_| {});
    let upstream = Scripted::new(&[Step::Hang]);
    let endpoints = service.endpoints();
    let stage = Balancer {
        shared: &shared,
        service: &service,
        endpoints: &endpoints,
        upstream: &upstream,
    };
    let request = request(Reply::Http, None);
    let attempt = stage.attempt(&request, Turn::First, shared.clock.now(), &mut 0);
    assert_eq!(endpoints.pending(0), 1, "in flight from the pick");
    let given_up = tokio::time::timeout(Duration::from_secs(5), attempt).await;
    assert!(given_up.is_err());
    let view = endpoints.views(shared.clock.now()).remove(0);
    assert_eq!((view.successes, view.failures, view.pending), (0, 0, 0));
}

/// A request without a body goes to the lean client as the head written from its parts
/// (`Make::bare`): the same bytes, and the same `HEAD` and close, as the lean client writes
/// for the request made the long way (`Make::request`), with or without a `Host`, whatever
/// the method, values repeated, a close asked. A body, a deadline to forward, a trace or a
/// `Transfer-Encoding` take the long way.
#[test]
fn a_bare_head_is_the_head_the_lean_client_writes() {
    use crate::upstream::Make as _;
    let (_shared, service) = service(|_| {});
    let endpoints = service.endpoints();
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        ("GET", "/", &[("host", "example.test")]),
        ("GET", "/a?b=c&d", &[]),
        ("HEAD", "/h", &[("accept", "*/*"), ("host", "h.test")]),
        (
            "DELETE",
            "/x",
            &[
                ("cookie", "a=1"),
                ("x-b", "2"),
                ("cookie", "b=2"),
                ("connection", "keep-alive, close"),
            ],
        ),
        ("OPTIONS", "*", &[("content-length", "0")]),
    ];
    for (method, target, headers) in cases {
        let mut req = Request::builder().method(*method).uri(*target);
        for (n, v) in *headers {
            req = req.header(*n, *v);
        }
        let mut sent = request(Reply::Http, None);
        sent.parts = req.body(()).unwrap().into_parts().0;
        let make = super::Make {
            request: &sent,
            endpoints: &endpoints,
            slot: 0,
            traceparent: None,
            picked: tokio::time::Instant::now(),
        };
        let mut bare = Vec::new();
        let flags = make.bare(&mut bare).expect("no body, deadline or trace");
        let (long, long_flags) = crate::upstream::written(make.request(false));
        assert_eq!(
            String::from_utf8_lossy(&bare),
            String::from_utf8_lossy(&long),
            "{method} {target}"
        );
        if *target == "/a?b=c&d" {
            assert!(
                bare.ends_with(b"host: 127.0.0.1:9\r\n\r\n"),
                "the endpoint's host, last"
            );
        }
        assert_eq!(flags, long_flags, "{method} {target}");
    }
    let mut with_te = request(Reply::Http, None);
    with_te
        .parts
        .headers
        .insert("transfer-encoding", "chunked".parse().unwrap());
    let mut with_body = request(Reply::Http, None);
    with_body.body = Mutex::new(AttemptBody::Streaming(None));
    let traceparent =
        http::HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    let plain = request(Reply::Http, None);
    let mut with_deadline = request(Reply::Http, None);
    with_deadline.deadline = Some(crate::deadline::Deadline {
        at: tokio::time::Instant::now() + Duration::from_secs(1),
        why: crate::deadline::HTTP_HEADER,
        caller: crate::deadline::Caller {
            grpc: None,
            http: Some(Duration::from_secs(1)),
        },
    });
    let mut total_timeout = request(Reply::Http, None);
    total_timeout.deadline = Some(crate::deadline::Deadline {
        caller: crate::deadline::Caller::default(),
        ..with_deadline.deadline.unwrap()
    });
    let long_way = [
        (&with_te, None),
        (&with_body, None),
        (&plain, Some(&traceparent)),
        (&with_deadline, None),
    ];
    for (sent, traceparent) in long_way {
        let make = super::Make {
            request: sent,
            endpoints: &endpoints,
            slot: 0,
            traceparent,
            picked: tokio::time::Instant::now(),
        };
        assert_eq!(make.bare(&mut Vec::new()), None);
    }
    // A deadline the caller did not send (the total timeout) adds no header: bare.
    let make = super::Make {
        request: &total_timeout,
        endpoints: &endpoints,
        slot: 0,
        traceparent: None,
        picked: tokio::time::Instant::now(),
    };
    assert!(make.bare(&mut Vec::new()).is_some());
}
