//! A backend connection's hyper service: routes each request by protocol to the one core,
//! [`BackendService`].
//!
//! - gRPC (`content-type: application/grpc*`) goes to [`crate::grpc`];
//! - an HTTP/1.1 `Upgrade: h2c` request (RFC 7540 section 3.2) switches the connection to
//!   HTTP/2. The switch itself (the `101`, taking the connection over, the request replayed as
//!   stream 1) is [`tailguard_http::h2c`], shared with the proxy's listener. What is the
//!   backend's own: the HTTP/2 connection runs in a task of its own, so it watches the
//!   connection's kill switch and the backend's down state itself, as
//!   [`crate::listener::serve_connection`] does for others. Requests with a body, or whose
//!   headers would not fit one frame, are answered over HTTP/1.1 instead (the RFC lets a
//!   server ignore the upgrade);
//! - everything else is plain HTTP, answered by the core.
//!
//! A HEAD request gets the GET's answer without its body, so that HTTP/2 ends its stream with
//! the HEADERS frame (hyper's HTTP/2 server would send a body it is given, even for HEAD).

use crate::grpc;
use crate::io::ConnCtl;
use crate::service::{BackendService, RespBody, RespFuture};
use crate::state::Backend;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::io;
use std::sync::Arc;
use tailguard_http::{h2c, server};
use tokio::time::Instant;

/// One connection's service (cloned for h2 streams and an h2c upgrade; they share the core).
#[derive(Clone, Debug)]
pub(crate) struct Router {
    core: BackendService,
}

impl Router {
    /// The service of a new connection to `backend`.
    pub(crate) fn new(backend: Arc<Backend>, ctl: Arc<ConnCtl>) -> Self {
        Router {
            core: BackendService::new(backend, ctl),
        }
    }
}

impl hyper::service::Service<Request<Incoming>> for Router {
    type Response = Response<RespBody>;
    type Error = std::convert::Infallible;
    type Future = RespFuture;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        if req.uri().path() == PROBE_PATH {
            return RespFuture::Ready(Some(probe(&self.core.backend)));
        }
        let head = req.method() == Method::HEAD;
        let arrival = Instant::now();
        let answer = if grpc::is_grpc(&req) {
            RespFuture::Waiting(Box::pin(grpc::handle(self.core.clone(), req, arrival)))
        } else if h2c::is_upgrade(&req) {
            RespFuture::Waiting(Box::pin(upgrade(self.clone(), req)))
        } else {
            self.core.answer(req, arrival)
        };
        if head {
            answer.headless()
        } else {
            answer
        }
    }
}

/// Where a backend answers load probes: requests in flight and a latency estimate, as JSON
/// ([`tailguard_fleet::probe::ProbeAnswer`]). Not a request of the backend's: no decision, no
/// worker, not counted; a paused backend answers when it resumes, a down one refuses.
pub const PROBE_PATH: &str = "/.well-known/tailguard/load";

fn probe(backend: &Backend) -> Response<RespBody> {
    let answer = backend.probe();
    let body = serde_json::to_vec(&answer).unwrap_or_default();
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from(body))));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// Answers `101` and continues the connection as HTTP/2, or answers over HTTP/1.1 when the
/// request cannot be carried over.
async fn upgrade(router: Router, mut req: Request<Incoming>) -> Response<RespBody> {
    let Some((resp, upgrade)) = h2c::accept(&mut req) else {
        return router.core.handle(req, Instant::now()).await;
    };
    tokio::spawn(async move {
        if let Err(err) = serve_h2(router, upgrade).await {
            tracing::debug!(%err, "h2c upgrade failed");
        }
    });
    resp.map(|()| Either::Left(Full::new(Bytes::new())))
}

async fn serve_h2(router: Router, upgrade: h2c::Upgrade) -> io::Result<()> {
    let ctl: Arc<ConnCtl> = router.core.ctl.clone();
    let backend = router.core.backend.clone();
    let serve = async move {
        let io = upgrade.io().await?;
        server::h2_builder()
            .serve_connection(TokioIo::new(io), router)
            .await
            .map_err(io::Error::other)
    };
    tokio::select! {
        res = serve => res,
        () = ctl.killed() => Ok(()),
        () = backend.gate.down() => Ok(()),
    }
}
