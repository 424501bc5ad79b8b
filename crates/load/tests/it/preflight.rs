//! The pre-flight request: a run that cannot succeed stops before the clock starts, with the
//! cause and the fix; a run that can (slow, a server that drops one connection in two)
//! goes ahead.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailguard_load::{Config, LoadError, Protocol};
use tailguard_testsupport::TestServer;

fn checked(url: &str) -> Config {
    let mut cfg = common::config(url, 50.0, Duration::from_secs(60));
    cfg.preflight = true;
    cfg.total_requests = Some(3);
    cfg.duration = None;
    cfg
}

fn refusal(cfg: Config) -> String {
    match tailguard_load::run(cfg, &mut Vec::new()) {
        Err(e @ LoadError::Preflight { .. }) => e.to_string(),
        Err(e) => panic!("not a pre-flight refusal: {e}"),
        Ok(r) => panic!("the run went ahead: {:?}", r.summary.totals),
    }
}

/// A plain TCP server on 127.0.0.1: the first `drop_first` connections are closed unanswered,
/// later ones get `reply` to every request head. Returns its port and the connection count.
fn raw_server(drop_first: u64, reply: &'static [u8]) -> (u16, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let n = count.fetch_add(1, Ordering::SeqCst);
            if n < drop_first {
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            }
            std::thread::spawn(move || {
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        if stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                    if reply.starts_with(b"HTTP/1.1 400") {
                        return;
                    }
                }
            });
        }
    });
    (port, accepted)
}

#[test]
fn a_self_signed_certificate_names_insecure() {
    let server = TestServer::builder().tls().spawn();
    let err = refusal(checked(&server.url("/")));
    assert!(err.contains("certificate is not trusted"), "{err}");
    assert!(
        err.contains("--insecure accepts self-signed test servers"),
        "{err}"
    );
    assert_eq!(server.hits(), 0);

    let mut cfg = checked(&server.url("/"));
    cfg.insecure = true;
    let (report, _) = common::run(cfg);
    assert_eq!(report.summary.totals.good, 3);
    assert_eq!(
        server.hits(),
        4,
        "the pre-flight request, then three counted"
    );
}

#[test]
fn https_to_a_plain_port_and_http_to_a_tls_port_name_the_scheme() {
    let plain = TestServer::builder().spawn();
    let url = plain.url("/").replace("http://", "https://");
    let err = refusal(checked(&url));
    assert!(
        err.contains("is it a plain HTTP port? use http://"),
        "{err}"
    );

    let tls = TestServer::builder().tls().spawn();
    let url = tls.url("/").replace("https://", "http://");
    let err = refusal(checked(&url));
    assert!(
        err.contains("if the port speaks TLS, use https://"),
        "{err}"
    );
}

#[test]
fn h2_prior_knowledge_to_an_http1_only_server_names_the_fix() {
    // What nginx without `http2 on` does with the HTTP/2 preface: a 400 and a close.
    let (port, _) = raw_server(
        0,
        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    );
    let mut cfg = checked(&format!("http://127.0.0.1:{port}/"));
    cfg.protocol = Protocol::Http2;
    let err = refusal(cfg);
    assert!(err.contains("no HTTP/2 answer"), "{err}");
    assert!(err.contains("drop --h2"), "{err}");
}

#[test]
fn a_closed_port_is_one_line_naming_the_address() {
    let server = TestServer::builder().spawn();
    let (url, addr) = (server.url("/"), server.addr());
    drop(server);
    let err = refusal(checked(&url));
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with(&format!(
            "pre-flight request to {url} failed: cannot connect to {addr}: "
        )),
        "{err}"
    );
}

#[test]
fn a_server_dropping_some_connections_is_still_measured() {
    let (port, accepted) = raw_server(2, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    let (report, _) = common::run(checked(&format!("http://127.0.0.1:{port}/")));
    assert_eq!(report.summary.totals.good, 3);
    assert!(
        accepted.load(Ordering::SeqCst) >= 3,
        "two dropped, then served"
    );

    // Dropping every connection is refused after three tries.
    let (port, accepted) = raw_server(u64::MAX, b"");
    let err = refusal(checked(&format!("http://127.0.0.1:{port}/")));
    assert!(
        err.contains("closed the connection without a response"),
        "{err}"
    );
    assert!(err.ends_with("(3 attempts)"), "{err}");
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[test]
fn slow_and_failing_answers_are_measured_not_refused() {
    let slow = TestServer::builder()
        .delay(Duration::from_millis(300))
        .spawn();
    let mut cfg = checked(&slow.url("/"));
    cfg.timeout = Duration::from_millis(50);
    let (report, _) = common::run(cfg);
    assert_eq!(report.summary.totals.errors.get("timeout"), Some(&3));

    // A server error on the first try is measured (the checks tests cover a 5xx on every try).
    let failing = TestServer::builder().status(503).spawn();
    let mut cfg = checked(&failing.url("/"));
    cfg.total_requests = Some(1);
    cfg.preflight = false;
    let (report, _) = common::run(cfg);
    assert_eq!(report.summary.totals.bad, 1);
}

/// A plain TCP server on 127.0.0.1 that answers each connection's first request head with
/// `reply` and closes it. Returns its port.
fn closing_server(reply: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let reply = reply.clone();
            std::thread::spawn(move || {
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = stream.write_all(&reply);
            });
        }
    });
    port
}

/// A head and then the close is named as such (it read "closed the connection without a
/// response"); an interim flood is named and refused at once.
#[test]
fn a_broken_off_body_and_an_interim_flood_are_named() {
    let port = closing_server(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n".to_vec());
    let err = refusal(checked(&format!("http://127.0.0.1:{port}/")));
    assert!(
        err.contains("answered 200 OK and then broke off its body"),
        "{err}"
    );
    let flood = [
        b"HTTP/1.1 100 Continue\r\n\r\n".repeat(17),
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
    ]
    .concat();
    let err = refusal(checked(&format!(
        "http://127.0.0.1:{}/",
        closing_server(flood)
    )));
    assert!(
        err.contains("more than 16 interim (1xx) responses"),
        "{err}"
    );
    assert!(!err.contains("attempts)"), "refused at once: {err}");
}
