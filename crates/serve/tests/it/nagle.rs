//! Seed 001: with `--nagle` a response written in two parts waits for the client's delayed
//! ACK (about 40 ms on Linux); with the default TCP_NODELAY it does not.

use crate::common;

use common::{addr, ms, serve_with};
use std::time::Duration;
use tailguard_testsupport::bounded;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Median time of `n` sequential keep-alive requests on one raw connection (after warm-up).
async fn median_ms(nagle: bool, n: usize) -> f64 {
    let running = serve_with("backends: [{latency: 0s, body: {size: 200}}]", |o| {
        o.nagle = nagle
    })
    .await;
    let mut stream = TcpStream::connect(addr(&running, 0)).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut lat = Vec::new();
    let mut buf = vec![0u8; 4096];
    for i in 0..n + 3 {
        let sent = Instant::now();
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .unwrap();
        let mut got = 0;
        // Headers (about 110 bytes) plus the 200-byte body.
        while !(got > 200 && buf[..got].ends_with(&[b'x'; 200])) {
            let r = bounded(stream.read(&mut buf[got..])).await.unwrap();
            assert!(r > 0, "server closed");
            got += r;
        }
        if i >= 3 {
            lat.push(ms(sent.elapsed()));
        }
    }
    lat.sort_by(f64::total_cmp);
    lat[lat.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nagle_adds_the_delayed_ack_and_nodelay_does_not() {
    let fast = median_ms(false, 15).await;
    assert!(fast < 5.0, "TCP_NODELAY median {fast} ms");
    let slow = tokio::time::timeout(Duration::from_secs(5), median_ms(true, 15))
        .await
        .unwrap();
    eprintln!("median per request: TCP_NODELAY {fast:.3} ms, Nagle {slow:.3} ms");
    assert!(
        (30.0..80.0).contains(&slow),
        "Nagle median {slow} ms, expected about 40 ms"
    );
}
