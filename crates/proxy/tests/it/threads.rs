//! `--threads`: each serving thread accepts on its own listener (`SO_REUSEPORT`) and keeps its
//! own upstream connections.

use crate::support;

use support::AsUpstream;
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::client::H1;
use tailguard_testsupport::{bounded, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Requests one after another, each on a connection of its own (kept open): the upstream
/// connections the backend sees are one per serving thread that took a connection, since each
/// thread reuses its own pool's connection and never another thread's.
async fn upstream_connections(threads: usize) -> u64 {
    let backend = TestServer::start().await;
    let config = support::config(ServiceConfig::new("web", vec![backend.upstream()]));
    let proxy = tailguard_proxy::start_on(config, threads).await.unwrap();
    let mut clients = Vec::new();
    for _ in 0..32 {
        let mut c = H1::connect(proxy.addr()).await;
        assert_eq!(c.get("/").await.0, 200);
        clients.push(c);
    }
    assert_eq!(backend.hits(), 32);
    drop(clients);
    bounded(proxy.shutdown()).await;
    backend.connections()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_serving_thread_takes_connections_and_keeps_its_own_upstream_pool() {
    assert_eq!(upstream_connections(1).await, 1, "one thread, one pool");
    // 32 connections spread by the kernel over two listeners: all on one has odds of 2^-31.
    assert_eq!(upstream_connections(2).await, 2, "two threads, a pool each");
}

/// What the proxy answers `bytes` with on a connection of their own: the status line's code,
/// or 0 when it closed without answering.
async fn raw(addr: std::net::SocketAddr, bytes: &[u8]) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let _ = bounded(s.read_to_end(&mut got)).await;
    let text = String::from_utf8_lossy(&got);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Two serving threads under hostile clients (malformed heads, conflicting lengths, a
/// request body whose coding does not end in chunked, connections that send half a head and leave), then a reload that swaps
/// the backend: every thread refuses the bad requests, goes on serving, and takes the reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_threads_refuse_hostile_clients_and_all_take_a_reload() {
    let (old, new) = (TestServer::start().await, TestServer::start().await);
    let config = |b: &TestServer| support::config(ServiceConfig::new("web", vec![b.upstream()]));
    let proxy = tailguard_proxy::start_on(config(&old), 2).await.unwrap();
    let addr = proxy.addr();
    let hostile: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip\r\n\r\nabc",
        b"GET / HTTP/1.1\r\nhost: x\r\nx-half: ",
    ];
    // 16 connections of each: 64 spread over both listeners.
    for _ in 0..16 {
        for bytes in hostile {
            let half = bytes.ends_with(b": ");
            if half {
                // Half a head, then the client leaves: nothing reaches the backend.
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                s.write_all(bytes).await.unwrap();
                drop(s);
                continue;
            }
            let status = raw(addr, bytes).await;
            assert!(
                status == 400 || status == 0,
                "{:?}: {status}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    assert_eq!(old.hits(), 0, "no hostile request reached the backend");
    for _ in 0..32 {
        let mut c = H1::connect(addr).await;
        assert_eq!(c.get("/").await.0, 200);
    }
    assert_eq!(old.hits(), 32);
    bounded(proxy.reload(&config(&new))).await.unwrap();
    for _ in 0..32 {
        let mut c = H1::connect(addr).await;
        assert_eq!(c.get("/").await.0, 200);
    }
    assert_eq!(
        (old.hits(), new.hits()),
        (32, 32),
        "every thread took the reload"
    );
    bounded(proxy.shutdown()).await;
}
