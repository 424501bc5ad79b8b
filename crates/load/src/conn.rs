//! Connections to a target: TCP (TCP_NODELAY always), optional TLS with ALPN, then an HTTP/1.1
//! or HTTP/2 handshake. The connection's driver runs as its own task.

use crate::config::Protocol;
use crate::target::Target;
use crate::tls;
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::error::Error as _;
use std::future::Future;
use std::pin::Pin;
use tailguard_http::{tcp, Nagle};
use tailguard_record::ErrorKind;
use tokio::io::{AsyncRead, AsyncWrite};

/// The request body type of every request the generator sends.
pub(crate) type ReqBody = Full<Bytes>;

/// An HTTP/1.1 connection's driver: polled by the worker that owns the connection, in the
/// same task as its requests, so a request costs no cross-task wake-ups.
type Driver = Pin<Box<dyn Future<Output = hyper::Result<()>> + Send>>;

/// An open connection, ready to carry requests.
pub(crate) enum Conn {
    /// HTTP/1.1: owned by one worker, which also drives it.
    H1 {
        send: http1::SendRequest<ReqBody>,
        driver: Driver,
    },
    /// HTTP/2: shared by workers; its driver runs as its own task.
    H2(http2::SendRequest<ReqBody>),
}

impl Conn {
    /// True for HTTP/2 (requests then carry an absolute URI).
    pub(crate) fn is_h2(&self) -> bool {
        matches!(self, Conn::H2(_))
    }

    /// Waits until the connection can take a request; an error means it is gone.
    pub(crate) async fn ready(&mut self) -> Result<(), ErrorKind> {
        match self {
            Conn::H1 { send, driver } => tokio::select! {
                biased;
                r = send.ready() => r.map_err(|e| classify(&e)),
                r = driver.as_mut() => Err(ended(r)),
            },
            Conn::H2(s) => s.ready().await.map_err(|e| classify(&e)),
        }
    }

    /// Sends a request and reads the whole response: its status and body length.
    pub(crate) async fn exchange(
        &mut self,
        req: Request<ReqBody>,
    ) -> Result<(u16, u64), ErrorKind> {
        match self {
            Conn::H1 { send, driver } => tokio::select! {
                biased;
                r = read_response(send.send_request(req)) => r,
                r = driver.as_mut() => Err(ended(r)),
            },
            Conn::H2(s) => read_response(s.send_request(req)).await,
        }
    }

    /// A second handle on the same HTTP/2 connection (HTTP/1.1 connections are not shared).
    pub(crate) fn share(&self) -> Option<Conn> {
        match self {
            Conn::H2(s) => Some(Conn::H2(s.clone())),
            Conn::H1 { .. } => None,
        }
    }
}

/// The error kind of a connection whose driver finished while a request needed it.
fn ended(result: hyper::Result<()>) -> ErrorKind {
    match result {
        Ok(()) => ErrorKind::Closed,
        Err(e) => classify(&e),
    }
}

async fn read_response(
    head: impl Future<Output = hyper::Result<Response<Incoming>>>,
) -> Result<(u16, u64), ErrorKind> {
    let resp = head.await.map_err(|e| classify(&e))?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| classify(&e))?;
        if let Some(data) = frame.data_ref() {
            bytes += data.len() as u64;
        }
    }
    Ok((status, bytes))
}

/// Opens connections with one TLS and protocol setup for the whole run.
#[derive(Clone)]
pub(crate) struct Connector {
    protocol: Protocol,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Connector {
    pub(crate) fn new(protocol: Protocol, insecure: bool, any_tls: bool) -> Connector {
        let tls = any_tls.then(|| tls::connector(protocol, insecure));
        Connector { protocol, tls }
    }

    /// Dials `target` and completes the TLS and HTTP handshakes.
    pub(crate) async fn connect(&self, target: &Target) -> Result<Conn, ErrorKind> {
        let tcp = tcp::connect(target.addr, Nagle::Off)
            .await
            .map_err(|_| ErrorKind::Connect)?;
        match (&self.tls, target.tls) {
            (Some(tls), true) => {
                let name = tls::server_name(&target.host)?;
                let stream = tls.connect(name, tcp).await.map_err(|_| ErrorKind::Tls)?;
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                if self.protocol == Protocol::Http2 && !h2 {
                    return Err(ErrorKind::Tls);
                }
                handshake(stream, h2).await
            }
            _ => handshake(tcp, self.protocol == Protocol::Http2).await,
        }
    }
}

async fn handshake<T>(io: T, h2: bool) -> Result<Conn, ErrorKind>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let io = TokioIo::new(io);
    if h2 {
        let (send, conn) = http2::Builder::new(TokioExecutor::new())
            .handshake(io)
            .await
            .map_err(|e| classify(&e))?;
        tokio::spawn(conn);
        Ok(Conn::H2(send))
    } else {
        let (send, conn) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| classify(&e))?;
        Ok(Conn::H1 {
            send,
            driver: Box::pin(conn),
        })
    }
}

/// Maps a hyper error to the error kind reported for the request.
pub(crate) fn classify(err: &hyper::Error) -> ErrorKind {
    if err.is_parse() || err.is_parse_status() || err.is_parse_too_large() {
        return ErrorKind::Protocol;
    }
    let mut source = err.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => {
                    ErrorKind::Reset
                }
                std::io::ErrorKind::ConnectionRefused => ErrorKind::Connect,
                std::io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
                _ => ErrorKind::Other,
            };
        }
        source = s.source();
    }
    if err.is_incomplete_message() || err.is_closed() || err.is_canceled() {
        return ErrorKind::Closed;
    }
    ErrorKind::Other
}
