//! `--threads`: each serving thread accepts on its own listener (`SO_REUSEPORT`) and keeps its
//! own upstream connections.

mod support;

use support::AsUpstream;
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::client::H1;
use tailguard_testsupport::{bounded, TestServer};

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
