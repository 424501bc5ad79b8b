//! The forward stage alone, on paused time, over a stand-in for the stages below: routing,
//! what is refused before anything is sent, the cleaned request, the body's preparation, the
//! total timeout and the caller's deadline, and how each fault is answered and counted.

use super::{handle, Next, Peer};
use crate::attempts::{AttemptBody, Outgoing};
use crate::clock::Clock;
use crate::config::{Limits, ServiceConfig, Upstream};
use crate::fault::Fault;
use crate::request_body::ClientFault;
use crate::response::ERROR_HEADER;
use crate::response_body::ResponseBody;
use crate::service::Service;
use crate::shared::Shared;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// What the stand-in does with the attempts of a request.
#[derive(Clone, Copy, Debug)]
enum Below {
    /// Answer 200 at once.
    Ok,
    /// Never answer.
    Hang,
    /// End with the client's fault.
    ClientFault,
}

/// One request as the stages below received it.
#[derive(Debug)]
struct Received {
    method: String,
    uri: String,
    headers: http::HeaderMap,
    version: http::Version,
    /// `empty`, `replay` or `streaming`.
    body: &'static str,
}

struct Standin {
    below: Below,
    received: Mutex<Vec<Received>>,
    /// Requests whose attempts were dropped before they ended.
    dropped: Mutex<u32>,
}

impl Standin {
    fn new(below: Below) -> Self {
        Self {
            below,
            received: Mutex::default(),
            dropped: Mutex::default(),
        }
    }
}

struct Dropped<'a>(&'a Mutex<u32>, bool);

impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        if !self.1 {
            *self.0.lock().unwrap() += 1;
        }
    }
}

impl Next for Standin {
    fn attempts<'a>(
        &'a self,
        _shared: &'a Arc<Shared>,
        _service: &'a Arc<Service>,
        _handles: &'a crate::metrics::ServiceHandles,
        request: &'a Outgoing,
    ) -> impl Future<Output = Result<Response<ResponseBody>, Fault>> + Send + 'a {
        let body = match &*request.body() {
            AttemptBody::Empty => "empty",
            AttemptBody::Replay(_) => "replay",
            AttemptBody::Streaming(_) => "streaming",
        };
        self.received.lock().unwrap().push(Received {
            method: request.parts.method.to_string(),
            uri: request.parts.uri.to_string(),
            headers: request.parts.headers.clone(),
            version: request.parts.version,
            body,
        });
        let guard = Dropped(&self.dropped, false);
        Box::pin(async move {
            // The whole guard moves in (not just the field the block writes), so it drops
            // with the attempts.
            let mut guard = guard;
            match self.below {
                Below::Ok => {}
                Below::Hang => std::future::pending::<()>().await,
                Below::ClientFault => {
                    guard.1 = true;
                    return Err(Fault::Client(ClientFault::Aborted));
                }
            }
            guard.1 = true;
            let empty = Empty::new().map_err(|never| match never {}).boxed();
            Ok(Response::new(ResponseBody::local(empty)))
        })
    }
}

/// A proxy's shared state with one service, `web`, for host `web.test` under `edit`.
fn shared(edit: impl FnOnce(&mut ServiceConfig)) -> Arc<Shared> {
    let clock = Clock::start();
    let upstreams = vec![Upstream::new("127.0.0.1:9".parse().unwrap())];
    let mut config = ServiceConfig::new("web", upstreams.clone());
    config.hosts = vec!["web.test".into()];
    edit(&mut config);
    let service = Arc::new(Service::new(config, &upstreams, clock, 7, 1).unwrap());
    Arc::new(Shared::new(clock, vec![service], None))
}

fn peer() -> Peer {
    Peer::new("127.0.0.2:5000".parse().unwrap(), &Limits::default())
}

fn get(host: &str, path: &str) -> Request<Full<Bytes>> {
    Request::get(path)
        .header("host", host)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

fn reason(resp: &Response<ResponseBody>) -> &str {
    resp.headers()
        .get(ERROR_HEADER)
        .map_or("", |v| v.to_str().unwrap())
}

fn metric(shared: &Shared, name: &str) -> f64 {
    let text = shared.metrics.encode();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(start_paused = true)]
async fn only_a_routed_clean_request_goes_below() {
    let shared = shared(|_| {});
    let below = Standin::new(Below::Ok);
    let resp = handle(Arc::clone(&shared), &peer(), get("other.test", "/"), &below).await;
    assert_eq!(resp.status(), 404);
    assert_eq!(reason(&resp), "no service for host \"other.test\"");
    let connect = Request::connect("web.test:443")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = handle(Arc::clone(&shared), &peer(), connect, &below).await;
    assert_eq!(resp.status(), 405);
    let climbing = get("web.test", "/a/../../etc/passwd");
    let resp = handle(Arc::clone(&shared), &peer(), climbing, &below).await;
    assert_eq!(resp.status(), 400);
    assert!(
        below.received.lock().unwrap().is_empty(),
        "nothing went below"
    );
}

#[tokio::test(start_paused = true)]
async fn the_request_below_is_cleaned_and_its_body_prepared_for_what_may_follow() {
    let shared = shared(|_| {});
    let below = Standin::new(Below::Ok);
    let mut req = get("web.test:8080", "/a/./b?q=1");
    let h = req.headers_mut();
    h.insert("connection", "keep-alive, x-private".parse().unwrap());
    h.insert("x-private", "secret".parse().unwrap());
    h.insert("te", "gzip".parse().unwrap());
    let resp = handle(Arc::clone(&shared), &peer(), req, &below).await;
    assert_eq!(resp.status(), 200);
    let post = Request::post("/upload")
        .header("host", "web.test")
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap();
    handle(Arc::clone(&shared), &peer(), post, &below).await;
    let received = below.received.lock().unwrap();
    let first = &received[0];
    assert_eq!(
        (first.method.as_str(), first.uri.as_str()),
        ("GET", "/a/b?q=1")
    );
    assert_eq!(first.version, http::Version::HTTP_11);
    for gone in ["connection", "x-private", "te"] {
        assert!(!first.headers.contains_key(gone), "{gone} was forwarded");
    }
    assert_eq!(first.headers["host"], "web.test:8080");
    assert_eq!(first.headers["x-forwarded-for"], "127.0.0.2");
    assert!(first.headers["via"]
        .to_str()
        .unwrap()
        .ends_with("tailguard"));
    // A GET has no body to keep; a POST the default classifier never retries streams once.
    assert_eq!((first.body, received[1].body), ("empty", "streaming"));
}

#[tokio::test(start_paused = true)]
async fn a_retried_method_keeps_a_copy_of_its_body() {
    let shared = shared(|c| {
        c.arm.classifier =
            tailguard_resilience::Classifier::retrying(&[tailguard_resilience::Method::Put]);
    });
    let below = Standin::new(Below::Ok);
    let put = Request::put("/x")
        .header("host", "web.test")
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap();
    handle(Arc::clone(&shared), &peer(), put, &below).await;
    assert_eq!(below.received.lock().unwrap()[0].body, "replay");
}

#[tokio::test(start_paused = true)]
async fn the_total_timeout_or_a_sooner_grpc_deadline_ends_the_attempts() {
    let shared = shared(|c| c.arm.timeouts.total = Some(Duration::from_millis(300)));
    let below = Standin::new(Below::Hang);
    let started = Instant::now();
    let resp = handle(Arc::clone(&shared), &peer(), get("web.test", "/"), &below).await;
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    assert_eq!(
        (resp.status().as_u16(), reason(&resp)),
        (504, "total timeout")
    );

    let call = Request::post("/pkg.Svc/Call")
        .header("host", "web.test")
        .header("content-type", "application/grpc")
        .header("grpc-timeout", "50m")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let started = Instant::now();
    let resp = handle(Arc::clone(&shared), &peer(), call, &below).await;
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    // A gRPC caller hears DEADLINE_EXCEEDED in a trailers-only answer.
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["grpc-status"], "4");
    assert_eq!(
        *below.dropped.lock().unwrap(),
        2,
        "the attempts were dropped, not left"
    );
    let received = below.received.lock().unwrap();
    assert_eq!(
        received[1].version,
        http::Version::HTTP_2,
        "gRPC goes over HTTP/2"
    );
}

#[tokio::test(start_paused = true)]
async fn over_the_in_flight_limit_is_503_and_nothing_goes_below() {
    let shared = shared(|c| c.arm.admission = Some(tailguard_client::AdmissionConfig::cap(1)));
    let below = Arc::new(Standin::new(Below::Hang));
    let held = {
        let (shared, below) = (Arc::clone(&shared), Arc::clone(&below));
        tokio::spawn(async move {
            handle(shared, &peer(), get("web.test", "/"), &*below).await;
        })
    };
    // Let the first request reach the stand-in.
    while below.received.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    let resp = handle(Arc::clone(&shared), &peer(), get("web.test", "/"), &*below).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(reason(&resp), "over maxConcurrentRequests");
    assert_eq!(below.received.lock().unwrap().len(), 1);
    held.abort();
}

#[tokio::test(start_paused = true)]
async fn a_clients_fault_is_answered_as_its_own_and_counted_as_one() {
    let shared = shared(|_| {});
    let below = Standin::new(Below::ClientFault);
    let resp = handle(Arc::clone(&shared), &peer(), get("web.test", "/"), &below).await;
    assert_eq!(resp.status(), 400);
    assert_eq!(reason(&resp), "client: request body aborted before its end");
    let errors = metric(
        &shared,
        "tailguard_proxy_client_errors_total{service=\"web\"",
    );
    assert_eq!(errors, 1.0);
}
