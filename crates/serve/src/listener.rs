//! A backend's accept loop and connection tasks.
//!
//! While running it accepts; while paused it stops accepting (new connections wait in the
//! kernel's backlog, as they would for a stopped process); while down it closes the listener,
//! so connections are refused, and binds the same address again when the backend comes up.

use crate::gate::RunState;
use crate::io::{ConnCtl, GatedIo};
use crate::route::Router;
use crate::state::Backend;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;
use tailguard_http::fds::AcceptBackoff;
use tailguard_http::{preface, server, tcp, Nagle};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// How long to wait before trying again to bind an address that comes back up.
const REBIND_RETRY: Duration = Duration::from_millis(50);

/// Accepts connections on `listener` for `backend` until the task is aborted; when descriptors
/// run out, pauses ([`AcceptBackoff`]) rather than spins.
pub async fn accept_loop(backend: Arc<Backend>, listener: TcpListener) {
    let mut listener = Some(listener);
    let mut state = backend.gate.subscribe();
    let mut backoff = AcceptBackoff::default();
    let nagle = if backend.shared.nagle {
        Nagle::On
    } else {
        Nagle::Off
    };
    loop {
        let now = *state.borrow_and_update();
        match (now, &listener) {
            (RunState::Down, _) => {
                listener = None;
                backend.listening.send_replace(false);
                let _ = state.changed().await;
            }
            (RunState::Paused, _) => {
                let _ = state.changed().await;
            }
            (RunState::Running, None) => match tcp::bind(backend.addr).await {
                Ok(l) => {
                    listener = Some(l);
                    backend.listening.send_replace(true);
                }
                Err(err) => {
                    tracing::warn!(%err, addr = %backend.addr, "rebinding failed; retrying");
                    tokio::time::sleep(REBIND_RETRY).await;
                }
            },
            (RunState::Running, Some(l)) => {
                tokio::select! {
                    accepted = tcp::accept(l, nagle) => match accepted {
                        Ok((stream, _)) => {
                            backoff.accepted();
                            tokio::spawn(serve_connection(backend.clone(), stream));
                        }
                        Err(err) => {
                            let pause = backoff.failed(&err, Instant::now());
                            if !pause.is_zero() {
                                tokio::select! {
                                    () = tokio::time::sleep(pause) => {}
                                    _ = state.changed() => {}
                                }
                            }
                        }
                    },
                    _ = state.changed() => {}
                }
            }
        }
    }
}

/// Serves one connection with HTTP/1.1 (with h2c upgrade) or prior-knowledge HTTP/2 (after
/// [`preface::check`]), until the peer leaves, the service asks to close or reset it, or the
/// backend goes down.
///
/// The connection runs in its own task and this one only watches (and aborts it): watching
/// from the same task would poll the kill and down futures on every wake of a busy connection.
pub async fn serve_connection(backend: Arc<Backend>, stream: TcpStream) {
    let ctl = Arc::new(ConnCtl::default());
    let io = GatedIo::new(
        stream,
        backend.gate.clone(),
        ctl.clone(),
        backend.shared.nagle,
    );
    let svc = Router::new(backend.clone(), ctl.clone());
    let mut conn = tokio::spawn(async move {
        // hyper takes a PING or HEADERS where the client's first SETTINGS frame belongs; the
        // check refuses that with GOAWAY.
        let io = match preface::check(io, preface::NotHttp::Close).await {
            Ok(io) => io,
            Err(err) => {
                tracing::debug!(%err, "connection refused at its preface");
                return;
            }
        };
        let builder = server::builder();
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
        if let Err(err) = conn.await {
            tracing::debug!(%err, "connection ended with an error");
        }
    });
    tokio::select! {
        _ = &mut conn => {}
        () = ctl.killed() => conn.abort(),
        () = backend.gate.down() => conn.abort(),
    }
}
