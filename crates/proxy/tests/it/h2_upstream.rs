//! HTTP/2 to the upstreams, now driven on the `h2` crate by the request's own task
//! (`upstream::h2_stream`): what hyper's client did for the proxy must still hold.
//!
//! - A request body larger than the stream's and the connection's windows (2 and 5 MiB) reaches
//!   the endpoint whole, sent as the windows open, and the response's own body comes back
//!   whole past the windows too.
//! - A request body still streaming when the response head comes goes on being sent (a
//!   bidirectional stream), and when the client resets its stream, the endpoint's stream is
//!   reset too: the endpoint's request body ends in an error, not waiting forever.

use crate::support;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::bounded;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// An HTTP/2 backend: `/count` reads the request body to its end and answers its length,
/// followed by as many bytes of its own; `/hold` answers its head at once, echoes each chunk
/// of the request body back, and reports on `ended` how the request body ended (`Ok` with the
/// bytes read, or `Err` when the stream was reset).
async fn backend(ended: mpsc::UnboundedSender<Result<usize, String>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let ended = ended.clone();
            let service = service_fn(move |req: Request<Incoming>| {
                let ended = ended.clone();
                async move { Ok::<_, Infallible>(answer(req, ended).await) }
            });
            tokio::spawn(
                tailguard_http::server::h2_builder()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

async fn answer(
    req: Request<Incoming>,
    ended: mpsc::UnboundedSender<Result<usize, String>>,
) -> Response<Body> {
    if req.uri().path() == "/count" {
        let got = req.into_body().collect().await.map(|b| b.to_bytes().len());
        let n = got.unwrap_or(0);
        let body = Full::new(Bytes::from(vec![b'x'; n])).map_err(|never| match never {});
        return Response::builder()
            .header("x-count", n)
            .body(body.boxed())
            .unwrap();
    }
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    tokio::spawn(async move {
        let mut body = req.into_body();
        let mut read = 0;
        let end = loop {
            match body.frame().await {
                None => break Ok(read),
                Some(Err(e)) => break Err(e.to_string()),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        read += data.len();
                        let _ = tx.send(Ok(Frame::data(data))).await;
                    }
                }
            }
        };
        let _ = ended.send(end);
    });
    let stream = tokio_stream_of(rx);
    Response::new(StreamBody::new(stream).boxed())
}

/// The frames of `rx` as a stream, for `StreamBody`.
fn tokio_stream_of<T>(mut rx: mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn proxy_to(backend: SocketAddr) -> tailguard_proxy::Proxy {
    let mut service = ServiceConfig::new("web", vec![Upstream::new(backend)]);
    service.protocol = UpstreamProtocol::Http2;
    support::start(service).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_larger_than_the_windows_go_through_whole() {
    let (ended, _seen) = mpsc::unbounded_channel();
    let proxy = proxy_to(backend(ended).await).await;
    let stream = bounded(TcpStream::connect(proxy.addr())).await.unwrap();
    let (mut tx, conn) = bounded(hyper::client::conn::http2::handshake(
        TokioExecutor::new(),
        TokioIo::new(stream),
    ))
    .await
    .unwrap();
    tokio::spawn(conn);
    // 8 MiB in 64 KiB chunks, streamed (no length), past both 2 MiB and 5 MiB windows.
    const SIZE: usize = 8 * 1024 * 1024;
    let (chunks, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    tokio::spawn(async move {
        for _ in 0..SIZE / (64 * 1024) {
            let chunk = Bytes::from(vec![b'y'; 64 * 1024]);
            if chunks.send(Ok(Frame::data(chunk))).await.is_err() {
                return;
            }
        }
    });
    let req = Request::builder()
        .method("POST")
        .uri(format!("http://{}/count", proxy.addr()))
        .body(StreamBody::new(tokio_stream_of(rx)))
        .unwrap();
    let resp = bounded(tx.send_request(req)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-count"], SIZE.to_string().as_str());
    let body = bounded(resp.into_body().collect())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(body.len(), SIZE, "the response body, past the windows too");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_call_goes_on_after_the_head_and_a_reset_reaches_the_endpoint() {
    let (ended, mut seen) = mpsc::unbounded_channel();
    let proxy = proxy_to(backend(ended).await).await;
    let stream = bounded(TcpStream::connect(proxy.addr())).await.unwrap();
    let (client, conn) = bounded(h2::client::handshake(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut client = bounded(client.ready()).await.unwrap();
    let req = Request::builder()
        .method("POST")
        .uri(format!("http://{}/hold", proxy.addr()))
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(req, false).unwrap();
    send.send_data(Bytes::from_static(b"one"), false).unwrap();
    let resp = bounded(response).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    // The head has come; the body is still streaming both ways.
    let echo = bounded(body.data()).await.unwrap().unwrap();
    assert_eq!(echo, "one");
    send.send_data(Bytes::from_static(b"two"), false).unwrap();
    let echo = bounded(body.data()).await.unwrap().unwrap();
    assert_eq!(
        echo, "two",
        "the request body went on after the response head"
    );
    // The client gives up: the endpoint's stream must be reset, not left open.
    send.send_reset(h2::Reason::CANCEL);
    let end = bounded(seen.recv()).await.unwrap();
    assert!(end.is_err(), "the endpoint's request body ended {end:?}");
    // And the proxy carries on.
    let (response, mut send) = client
        .send_request(
            Request::builder()
                .method("POST")
                .uri(format!("http://{}/count", proxy.addr()))
                .body(())
                .unwrap(),
            false,
        )
        .unwrap();
    send.send_data(Bytes::from_static(b"abc"), true).unwrap();
    let resp = bounded(response).await.unwrap();
    assert_eq!(resp.headers()["x-count"], "3");
    drop(body);
    // Bounded: nothing here may hang past the test client's limit.
    let _ = tokio::time::timeout(Duration::from_secs(5), proxy.shutdown()).await;
}
