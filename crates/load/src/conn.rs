//! Connections to a target: TCP (TCP_NODELAY always), then either the lean HTTP/1.1 client
//! ([`tailguard_http::h1`], plain TCP, read on the worker's own task) or, over TLS with ALPN, for
//! HTTP/2 and with `--h1-client hyper`, a hyper handshake ([`tailguard_http::client`]) whose
//! driver runs as its own task on the worker thread's current-thread runtime, so the driver and
//! its requests share a thread and a request costs no cross-thread wake-up.

use crate::check::BodyChecks;
use crate::config::{H1Client, Protocol};
use crate::request::{ReqBody, Template};
use crate::target::Target;
use crate::tls;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use tailguard_http::client::{self, Writes};
use tailguard_http::error;
use tailguard_http::{grpc, h1};
use tailguard_http::{tcp, Nagle};
use tailguard_record::{Check, ErrorKind, Outcome};
use tokio::io::{AsyncRead, AsyncWrite};

/// What a completed exchange gives back.
pub(crate) struct Reply {
    /// The HTTP status, or for a gRPC call answered with HTTP 200, its `grpc-status`.
    pub outcome: Outcome,
    /// Body bytes read.
    pub bytes: u64,
    /// The first body check the answer failed.
    pub failed_check: Option<Check>,
    /// The response's header map, emptied: the next request reuses its memory (hyper encodes a
    /// request's headers, then parses the response into that same map).
    pub spare: HeaderMap,
}

/// An open connection, ready to carry requests.
pub(crate) enum Conn {
    /// hyper's HTTP/1.1 or HTTP/2 client.
    Hyper(HyperConn),
    /// The lean HTTP/1.1 client (plain TCP): owned by one worker.
    Lean(h1::Connection),
}

/// A connection through hyper's client.
pub(crate) enum HyperConn {
    /// HTTP/1.1: owned by one worker, its requests' interim responses bounded.
    H1(http1::SendRequest<ReqBody>, client::Interim),
    /// HTTP/2: shared by workers.
    H2(http2::SendRequest<ReqBody>),
}

impl Conn {
    /// Waits until the connection can take a request; an error means it is gone.
    pub(crate) async fn ready(&mut self) -> Result<(), ErrorKind> {
        match self {
            Conn::Hyper(c) => c.ready().await.map_err(|e| error::kind(&e)),
            Conn::Lean(c) if c.is_open() => Ok(()),
            Conn::Lean(_) => Err(ErrorKind::Closed),
        }
    }

    /// Sends the request of `template` and reads the whole response: its status (with
    /// `grpc`, the gRPC status of an HTTP 200), body length and `checks`. `spare` is an
    /// emptied header map for hyper to build the request in; it comes back in the reply.
    pub(crate) async fn exchange(
        &mut self,
        template: &Template,
        spare: Option<HeaderMap>,
        grpc: bool,
        checks: &BodyChecks,
    ) -> Result<Reply, ErrorKind> {
        match self {
            Conn::Lean(c) => {
                let response = c
                    .exchange(template.wire(), template.is_head())
                    .await
                    .map_err(|e| e.kind())?;
                debug_assert!(!checks.any(), "a body check sends through hyper");
                Ok(Reply {
                    outcome: Outcome::Status(response.status),
                    bytes: response.body_bytes,
                    failed_check: None,
                    spare: spare.unwrap_or_default(),
                })
            }
            Conn::Hyper(c) => {
                let request = template.build(c.is_h2(), spare);
                let response = c.send(request).await.map_err(|e| c.kind(&e))?;
                if c.flooded() {
                    // The flood and the final head came in one read.
                    return Err(ErrorKind::InterimFlood);
                }
                read_reply(response, grpc, checks)
                    .await
                    .map_err(|e| match e {
                        ReadError::Http(e) => error::kind(&e),
                        ReadError::NoGrpcStatus => ErrorKind::Protocol,
                    })
            }
        }
    }

    /// A second handle on the same HTTP/2 connection (HTTP/1.1 connections are not shared).
    pub(crate) fn share(&self) -> Option<Conn> {
        match self {
            Conn::Hyper(HyperConn::H2(s)) => Some(Conn::Hyper(HyperConn::H2(s.clone()))),
            _ => None,
        }
    }
}

impl HyperConn {
    /// True for HTTP/2 (requests then carry an absolute URI).
    pub(crate) fn is_h2(&self) -> bool {
        matches!(self, HyperConn::H2(_))
    }

    /// Waits until hyper can take a request.
    pub(crate) async fn ready(&mut self) -> hyper::Result<()> {
        match self {
            // After a response, hyper's dispatcher usually wants the next request already.
            HyperConn::H1(s, _) if s.is_ready() => Ok(()),
            HyperConn::H1(s, _) => s.ready().await,
            HyperConn::H2(s) => s.ready().await,
        }
    }

    /// Sends a request and waits for the response head, keeping hyper's error (the pre-flight
    /// explains it; [`Conn::exchange`] classifies it).
    pub(crate) async fn send(
        &mut self,
        req: Request<ReqBody>,
    ) -> hyper::Result<Response<Incoming>> {
        match self {
            HyperConn::H1(s, interim) => {
                let mut req = req;
                interim.watch(&mut req);
                s.send_request(req).await
            }
            HyperConn::H2(s) => s.send_request(req).await,
        }
    }

    /// The error kind of `e`, a failed [`HyperConn::send`]: an interim flood when the
    /// connection was dropped for one.
    pub(crate) fn kind(&self, e: &hyper::Error) -> ErrorKind {
        match self.flooded() {
            true => ErrorKind::InterimFlood,
            false => error::kind(e),
        }
    }

    /// The last request's interim responses passed their bound (its answer, if one came in
    /// the same read, is not to be believed).
    pub(crate) fn flooded(&self) -> bool {
        matches!(self, HyperConn::H1(_, interim) if interim.flooded())
    }
}

/// Why a response could not be read to its end.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The connection or stream failed.
    Http(hyper::Error),
    /// A gRPC call answered HTTP 200 without a `grpc-status`: not a gRPC server.
    NoGrpcStatus,
}

/// Reads a response to its end: body length, the body `checks`, and for a gRPC call the status
/// from the trailers (or from the headers of a trailers-only answer).
pub(crate) async fn read_reply(
    response: Response<Incoming>,
    grpc: bool,
    checks: &BodyChecks,
) -> Result<Reply, ReadError> {
    let (parts, mut body) = response.into_parts();
    let mut spare = parts.headers;
    let http_status = parts.status.as_u16();
    let mut grpc_status = (grpc && http_status == 200)
        .then(|| grpc::status(&spare))
        .flatten();
    // Header values point into the connection's read buffer: release them now, not when the
    // next request is built.
    spare.clear();
    let mut bytes = 0u64;
    let mut check = checks.start();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ReadError::Http)?;
        if let Some(data) = frame.data_ref() {
            bytes += data.len() as u64;
            if let Some(c) = &mut check {
                c.feed(data);
            }
        } else if let Some(trailers) = frame.trailers_ref() {
            grpc_status = grpc_status.or_else(|| grpc::status(trailers));
        }
    }
    let outcome = match (grpc && http_status == 200, grpc_status) {
        (false, _) => Outcome::Status(http_status),
        (true, Some(code)) => Outcome::Grpc(code),
        (true, None) => return Err(ReadError::NoGrpcStatus),
    };
    Ok(Reply {
        outcome,
        bytes,
        failed_check: check.and_then(|c| c.finish()),
        spare,
    })
}

/// Request bodies up to this size are copied into hyper's write buffer, so an HTTP/1.1
/// request leaves in one plain `write` ([`Writes::Flat`]); larger ones go out with `writev`,
/// uncopied.
const FLATTEN_MAX: usize = 16 * 1024;

/// Opens connections with one TLS and protocol setup for the whole run.
#[derive(Clone)]
pub(crate) struct Connector {
    protocol: Protocol,
    tls: Option<tokio_rustls::TlsConnector>,
    /// HTTP/1.1 writes: one flat buffer (small bodies) rather than hyper's queue of buffers.
    flatten: bool,
    /// HTTP/1.1 on plain TCP goes through the lean client.
    lean: bool,
}

impl Connector {
    /// `body_len` is the request body's size (it decides how hyper writes HTTP/1.1 requests);
    /// the lean client is used when `h1_client` asks for it and every template allows it.
    pub(crate) fn new(
        protocol: Protocol,
        insecure: bool,
        any_tls: bool,
        body_len: usize,
        h1_client: H1Client,
        templates: &[Template],
    ) -> Connector {
        let tls = any_tls.then(|| tls::connector(protocol, insecure));
        let flatten = body_len <= FLATTEN_MAX;
        let lean = h1_client == H1Client::Lean
            && protocol != Protocol::Http2
            && templates.iter().all(Template::lean);
        Connector {
            protocol,
            tls,
            flatten,
            lean,
        }
    }

    /// Dials `target` and completes the TLS and HTTP handshakes.
    ///
    /// Boxed: the dial and handshake futures (TLS, HTTP/2) take about 8 KB, and every request's
    /// future would otherwise carry that space and copy it when it starts, though a connection
    /// is opened once per many requests.
    pub(crate) fn connect<'a>(
        &'a self,
        target: &'a Target,
    ) -> Pin<Box<dyn Future<Output = Result<Conn, ErrorKind>> + Send + 'a>> {
        Box::pin(async move {
            if self.lean && !target.tls {
                let tcp = tcp::connect(target.addr, Nagle::Off)
                    .await
                    .map_err(|_| ErrorKind::Connect)?;
                return Ok(Conn::Lean(h1::Connection::new(tcp)));
            }
            let conn = self.dial(target).await.map_err(|e| e.kind())?;
            Ok(Conn::Hyper(conn))
        })
    }

    /// Dials `target` through hyper's client, keeping the cause of a failure (the pre-flight
    /// check explains it).
    pub(crate) async fn dial(&self, target: &Target) -> Result<HyperConn, DialError> {
        let tcp = tcp::connect(target.addr, Nagle::Off)
            .await
            .map_err(DialError::Connect)?;
        match (&self.tls, target.tls) {
            (Some(tls), true) => {
                let name = tls::server_name(&target.host).map_err(|_| DialError::ServerName)?;
                let stream = tls.connect(name, tcp).await.map_err(DialError::Tls)?;
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                if self.protocol == Protocol::Http2 && !h2 {
                    return Err(DialError::NoH2);
                }
                self.handshake(stream, h2, target.addr)
                    .await
                    .map_err(DialError::Http)
            }
            _ => self
                .handshake(tcp, self.protocol == Protocol::Http2, target.addr)
                .await
                .map_err(DialError::Http),
        }
    }

    /// The HTTP version this connector speaks on plain TCP.
    pub(crate) fn protocol(&self) -> Protocol {
        self.protocol
    }

    async fn handshake<T>(
        &self,
        io: T,
        h2: bool,
        peer: SocketAddr,
    ) -> Result<HyperConn, hyper::Error>
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let io = TokioIo::new(io);
        if h2 {
            Ok(HyperConn::H2(client::h2(io, peer).await?))
        } else {
            let writes = if self.flatten {
                Writes::Flat
            } else {
                Writes::Vectored
            };
            let (send, interim) = client::h1(io, writes, peer).await?;
            Ok(HyperConn::H1(send, interim))
        }
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub(crate) enum DialError {
    /// The TCP connection failed.
    Connect(std::io::Error),
    /// The host is not a valid TLS server name.
    ServerName,
    /// The TLS handshake failed (the rustls error is inside).
    Tls(std::io::Error),
    /// `--h2` over TLS, and the server did not choose `h2` by ALPN.
    NoH2,
    /// The HTTP/1.1 or HTTP/2 handshake failed.
    Http(hyper::Error),
}

impl DialError {
    /// The error kind a request that met this failure is counted under.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            DialError::Connect(_) => ErrorKind::Connect,
            DialError::ServerName | DialError::Tls(_) | DialError::NoH2 => ErrorKind::Tls,
            DialError::Http(e) => error::kind(e),
        }
    }
}
