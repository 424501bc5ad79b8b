//! The HTTP/1.1 upstream pool: connections are reused once a response has been read, and a
//! connection the endpoint closes is replaced, counted by real servers on loopback.

use crate::support;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{client, send, start};
use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn service(addr: std::net::SocketAddr) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", vec![Upstream::new(addr)]);
    s.arm.retries = None;
    s.arm.accrual = None;
    s
}

#[tokio::test]
async fn sequential_requests_share_one_upstream_connection() {
    let server = TestServer::builder().spawn();
    let proxy = start(service(server.addr())).await;
    let c = client(false);
    for method in ["GET", "HEAD", "POST"] {
        for _ in 0..10 {
            let (status, _, body) = send(&c, proxy.addr(), method, "/").await;
            assert_eq!(status, 200);
            let expected: &[u8] = if method == "HEAD" { b"" } else { b"ok" };
            assert_eq!(&body[..], expected, "{method}");
        }
    }
    assert_eq!(server.hits(), 30);
    assert_eq!(
        server.connections(),
        1,
        "every response was read to its end, so its connection went back to the pool"
    );
    proxy.shutdown().await;
}

/// Services with the same pool settings share their connections to an endpoint both name;
/// a service with a connection limit keeps its own (the limit is per service, as configured).
#[tokio::test]
async fn services_naming_the_same_endpoint_share_its_connections_unless_limited() {
    let server = TestServer::builder().spawn();
    let routed = |name: &str, limit: Option<usize>| {
        let mut s = service(server.addr());
        s.name = name.to_owned();
        s.path_prefix = Some(format!("/{name}"));
        s.pool.max_per_endpoint = limit;
        s
    };
    let services = vec![routed("a", None), routed("b", None), routed("c", Some(4))];
    let proxy = tailguard_proxy::start(support::config_of(services))
        .await
        .unwrap();
    let c = client(false);
    for path in ["/a", "/b", "/a", "/b"] {
        assert_eq!(send(&c, proxy.addr(), "GET", path).await.0, 200, "{path}");
    }
    assert_eq!(server.connections(), 1, "a and b share one connection");
    for _ in 0..2 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/c").await.0, 200);
    }
    assert_eq!(server.connections(), 2, "c, limited, has its own");
    proxy.shutdown().await;
}

#[tokio::test]
async fn concurrent_requests_open_no_more_connections_than_requests_in_flight() {
    let server = TestServer::builder().spawn();
    let proxy = start(service(server.addr())).await;
    let c = client(false);
    for _ in 0..5 {
        let batch: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                let addr = proxy.addr();
                tokio::spawn(async move { send(&c, addr, "GET", "/").await.0 })
            })
            .collect();
        for r in batch {
            assert_eq!(r.await.unwrap(), 200);
        }
    }
    assert_eq!(server.hits(), 20);
    let conns = server.connections();
    assert!(
        (1..=4).contains(&conns),
        "{conns} connections for 4 in flight"
    );
    proxy.shutdown().await;
}

/// Bodies larger than the socket buffers stream through both ways at once (the backend echoes
/// while it reads) over a pooled HTTP/1.1 connection, from an HTTP/1.1 and from an HTTP/2
/// client, and the connection comes back to the pool for the next request.
#[tokio::test]
async fn large_bodies_stream_both_ways_over_one_pooled_connection() {
    let backend = TestServer::start().await;
    let mut s = service(backend.addr());
    s.protocol = UpstreamProtocol::Http1;
    let proxy = start(s).await;
    let payload: Bytes = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    for h2 in [false, true] {
        let c = client(h2);
        for round in 0..2 {
            let req = Request::post(format!("http://{}/echo", proxy.addr()))
                .body(Full::new(payload.clone()))
                .unwrap();
            let exchange = async {
                let resp = c.request(req).await.unwrap();
                assert_eq!(resp.status(), 200, "h2 {h2}, round {round}");
                resp.into_body().collect().await.unwrap().to_bytes()
            };
            let body = tokio::time::timeout(Duration::from_secs(30), exchange)
                .await
                .unwrap_or_else(|_| panic!("h2 {h2}, round {round}: stalled for 30 s"));
            assert_eq!(body.len(), payload.len(), "h2 {h2}, round {round}");
            assert!(
                body == payload,
                "h2 {h2}, round {round}: echoed bytes differ"
            );
        }
    }
    assert_eq!(backend.hits(), 4);
    assert_eq!(
        backend.connections(),
        1,
        "each echoed body was read to its end, so the connection went back to the pool"
    );
    proxy.shutdown().await;
}

/// A raw HTTP/1.1 server that answers every request with `Connection: close` and closes.
async fn closing_server() -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let listener = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) =
                tailguard_http::tcp::accept(&listener, tailguard_http::Nagle::Off).await
            else {
                continue;
            };
            count.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let reply = "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nbye";
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn a_connection_the_endpoint_closes_is_replaced_for_the_next_request() {
    let (addr, accepted) = closing_server().await;
    let proxy = start(service(addr)).await;
    let c = client(false);
    for _ in 0..5 {
        let (status, _, body) = send(&c, proxy.addr(), "GET", "/").await;
        assert_eq!(status, 200);
        assert_eq!(&body[..], b"bye");
    }
    assert_eq!(accepted.load(Ordering::Relaxed), 5);
    proxy.shutdown().await;
}
