//! Checks on what came back (`--expect-status`, `--expect-body-*`): a failed check makes an
//! answer bad and is counted under its name, exactly; the pre-flight stops on a 4xx it does
//! not allow and on a 5xx every try.

use crate::common;

use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailguard_load::check::{parse_sha256, BodyChecks};
use tailguard_load::{Config, LoadError};
use tailguard_record::Classifier;
use tailguard_testsupport::TestServer;

/// A keep-alive HTTP/1.1 server on 127.0.0.1 that answers the requests it receives, across
/// its connections, with `answers` in turn (status, body; chunked when the body has a `|`, one
/// chunk per part). Returns its URL and the count of requests answered.
fn scripted(answers: &'static [(u16, &'static str)]) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let count = count.clone();
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
                        let i = count.fetch_add(1, Ordering::SeqCst) as usize;
                        let (status, body) = answers[i % answers.len()];
                        if stream.write_all(&response(status, body)).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, served)
}

fn response(status: u16, body: &str) -> Vec<u8> {
    if !body.contains('|') {
        return format!(
            "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes();
    }
    let mut out = format!("HTTP/1.1 {status} X\r\ntransfer-encoding: chunked\r\n\r\n");
    for part in body.split('|') {
        out += &format!("{:x}\r\n{part}\r\n", part.len());
    }
    out += "0\r\n\r\n";
    out.into_bytes()
}

/// Twelve requests, one at a time, through three rounds of four answers: the text `world`
/// split over two chunks, a 200 without it, a 404 and a 503 with it.
const ROUND: &[(u16, &str)] = &[
    (200, "hello wo|rld"),
    (200, "hello there"),
    (404, "hello world"),
    (503, "hello world"),
];

fn twelve(url: &str) -> Config {
    let mut cfg = common::config(url, 0.0, Duration::from_secs(60));
    cfg.duration = None;
    cfg.total_requests = Some(12);
    cfg.concurrency = 1;
    cfg
}

#[test]
fn a_failed_check_is_a_bad_answer_counted_under_its_name() {
    let (url, served) = scripted(ROUND);
    let mut cfg = twelve(&url);
    cfg.body_checks = BodyChecks {
        sha256: None,
        contains: Some(Bytes::from_static(b"world")),
    };
    let (report, text) = common::run(cfg);
    let t = &report.summary.totals;
    // Good: the two 200s with the text and the 404s (4xx is good by default). The body check
    // speaks only of answers their status made good: the 503s are bad by status alone.
    assert_eq!((t.good, t.bad, t.failed), (6, 6, 0), "{t:?}");
    assert_eq!(t.failed_checks.len(), 1, "{t:?}");
    assert_eq!(t.failed_checks["body-contains"], 3);
    assert!(
        text.contains("# failed checks (counted bad): body-contains=3"),
        "{text}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 12);
}

#[test]
fn expected_statuses_and_the_digest_decide_together() {
    let (url, _) = scripted(ROUND);
    let mut cfg = twelve(&url);
    cfg.classifier = Classifier {
        four_xx_bad: false,
        expect: Some("2xx".parse().unwrap()),
    };
    // sha256("hello world"): the 200 saying "hello there" fails it; the 404 and the 503 fail
    // the status check first.
    let hex = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";
    cfg.body_checks = BodyChecks {
        sha256: Some(parse_sha256(hex).unwrap()),
        contains: None,
    };
    cfg.slo = tailguard_load::slo::parse("success>=25%,success>=99%").unwrap();
    let (report, text) = common::run(cfg);
    // The verdicts end the report, and the summary keeps them.
    assert!(text.ends_with("# SLO success>=25%: met (actual 25.000%)\n# SLO success>=99%: MISSED (actual 25.000%)\n"), "{text}");
    let t = &report.summary.totals;
    assert_eq!((t.good, t.bad), (3, 9), "{t:?}");
    assert_eq!(t.failed_checks["status"], 6);
    assert_eq!(t.failed_checks["body-sha256"], 3);
    let json = serde_json::to_value(&report.summary).unwrap();
    assert_eq!(json["failed_checks"]["status"], 6);
    assert_eq!(
        json["slo"][1],
        serde_json::json!({"objective": "success>=99%", "actual": "25.000%", "met": false})
    );
}

fn preflight(url: &str) -> Config {
    let mut cfg = twelve(url);
    cfg.preflight = true;
    cfg
}

fn refusal(cfg: Config) -> String {
    match tailguard_load::run(cfg, &mut Vec::new()) {
        Err(e @ LoadError::Preflight { .. }) => e.to_string(),
        Err(e) => panic!("not a pre-flight refusal: {e}"),
        Ok(r) => panic!("the run went ahead: {:?}", r.summary.totals),
    }
}

#[test]
fn the_preflight_stops_on_a_4xx_it_does_not_allow_and_names_the_flag() {
    let (url, served) = scripted(&[(404, "no such page")]);
    let err = refusal(preflight(&url));
    assert!(err.contains("answered 404 Not Found"), "{err}");
    assert!(
        err.contains("--expect-status 404 (or 4xx) counts it good"),
        "{err}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 1, "refused at once");

    let mut allowed = preflight(&url);
    allowed.classifier.expect = Some("2xx,404".parse().unwrap());
    let (report, _) = common::run(allowed);
    assert_eq!(report.summary.totals.good, 12);

    let mut other = preflight(&url);
    other.classifier.expect = Some("2xx,403".parse().unwrap());
    let err = refusal(other);
    assert!(
        err.contains("--expect-status 2xx,403,404 counts it good"),
        "{err}"
    );
}

#[test]
fn the_preflight_stops_on_a_5xx_only_when_every_try_gets_one() {
    let (url, served) = scripted(&[(503, "")]);
    let err = refusal(preflight(&url));
    assert!(
        err.contains("answered 503 Service Unavailable every time"),
        "{err}"
    );
    assert!(err.ends_with("(10 attempts)"), "{err}");
    assert_eq!(served.load(Ordering::SeqCst), 10);

    // Nine server errors, then an answer: the run goes ahead and counts what it gets.
    let nine: &'static [(u16, &str)] = Box::leak(
        std::iter::repeat_n((503, ""), 9)
            .chain(std::iter::repeat_n((200, "ok"), 13))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let (url, served) = scripted(nine);
    let (report, _) = common::run(preflight(&url));
    assert_eq!(report.summary.totals.good, 12);
    assert_eq!(served.load(Ordering::SeqCst), 10 + 12);

    let mut allowed = preflight(&scripted(&[(503, "")]).0);
    allowed.classifier.expect = Some("5xx".parse().unwrap());
    let (report, _) = common::run(allowed);
    assert_eq!(report.summary.totals.good, 12);
}

/// Body checks over TLS, on HTTP/2 and HTTP/1.1, with a 150 KB body that arrives in many
/// frames and records: the digest and the text are found across every cut, and a text that is
/// not there fails each answer.
#[test]
fn body_checks_hold_over_tls_on_both_versions_with_a_large_body() {
    // 150 KB: the text sits across the middle, far from any frame's start.
    let mut body = "x".repeat(75_000);
    body.push_str("needle-in-the-middle");
    body.push_str(&"y".repeat(75_000));
    let digest: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, body.as_bytes())
        .as_ref()
        .try_into()
        .unwrap();
    let body: &'static str = Box::leak(body.into_boxed_str());
    let server = TestServer::builder().tls().body(body).spawn();
    for protocol in [
        tailguard_load::Protocol::Http2,
        tailguard_load::Protocol::Http1,
    ] {
        for (needle, good) in [(&b"needle-in-the-middle"[..], 20), (b"needle-absent", 0)] {
            let mut cfg = twelve(&server.url("/"));
            cfg.total_requests = Some(20);
            cfg.concurrency = 4;
            cfg.protocol = protocol;
            cfg.insecure = true;
            cfg.body_checks = BodyChecks {
                sha256: Some(digest),
                contains: Some(Bytes::copy_from_slice(needle)),
            };
            let (report, _) = common::run(cfg);
            let t = &report.summary.totals;
            assert_eq!(
                (t.good, t.bad, t.failed),
                (good, 20 - good, 0),
                "{protocol:?}: {t:?}"
            );
            assert_eq!(t.bytes, 20 * body.len() as u64, "{protocol:?}");
        }
    }
}
