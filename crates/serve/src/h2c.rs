//! HTTP/2 over cleartext by upgrade (`Upgrade: h2c`, RFC 7540 section 3.2), on a backend.
//!
//! The switch itself (the `101`, taking the connection over, the request replayed as stream 1)
//! is [`tailguard_http::h2c`], shared with the proxy's listener. What is the backend's own: the
//! HTTP/2 connection runs in a task of its own, so it watches the connection's kill switch and
//! the backend's down state itself, as [`crate::listener::serve_connection`] does for others.
//!
//! Requests with a body, or whose headers would not fit one frame, are answered over HTTP/1.1
//! instead (the RFC lets a server ignore the upgrade).

use crate::io::ConnCtl;
use crate::service::{BackendService, RespBody};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::io;
use std::sync::Arc;
use tailguard_http::h2c;
use tokio::time::Instant;

pub use tailguard_http::h2c::is_upgrade;

/// Answers `101` and continues the connection as HTTP/2, or answers over HTTP/1.1 when the
/// request cannot be carried over.
pub async fn upgrade(svc: BackendService, mut req: Request<Incoming>) -> Response<RespBody> {
    let Some((resp, upgrade)) = h2c::accept(&mut req) else {
        return svc.handle(req, Instant::now()).await;
    };
    tokio::spawn(async move {
        if let Err(err) = serve_h2(svc, upgrade).await {
            tracing::debug!(%err, "h2c upgrade failed");
        }
    });
    resp.map(|()| Either::Left(Full::new(Bytes::new())))
}

async fn serve_h2(svc: BackendService, upgrade: h2c::Upgrade) -> io::Result<()> {
    let ctl: Arc<ConnCtl> = svc.ctl.clone();
    let backend = svc.backend.clone();
    let serve = async move {
        let io = upgrade.io().await?;
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(io), svc)
            .await
            .map_err(io::Error::other)
    };
    tokio::select! {
        res = serve => res,
        () = ctl.killed() => Ok(()),
        () = backend.gate.down() => Ok(()),
    }
}
