//! `--replay`: recorded requests sent again exactly, at their offsets (over `--speed`), in
//! their order, latency measured from their due times; a file that cannot be replayed is
//! refused before anything is sent, with its line.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;
use tailguard_load::replay::ReplaySpec;
use tailguard_load::{Config, LoadError};
use tailguard_testsupport::TestServer;

fn file(tag: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("tg-it-replay-{tag}-{}.jsonl", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

fn replay(path: &std::path::Path, speed: f64) -> Config {
    // The URL is a placeholder: a replay's targets come from its file.
    let mut cfg = common::config("http://127.0.0.1:1/", 1.0, Duration::from_secs(1));
    cfg.targets.clear();
    cfg.duration = None;
    cfg.replay = Some(ReplaySpec {
        path: path.to_path_buf(),
        speed,
    });
    cfg.interval = Duration::from_millis(100);
    cfg
}

#[test]
fn recorded_requests_go_again_exactly_in_order_at_their_times() {
    let server = TestServer::builder().record().spawn();
    let base = server.url("");
    let text = format!(
        "{{\"offset_ms\": 0, \"url\": \"{base}/a\"}}\n\
         {{\"offset_ms\": 40, \"method\": \"POST\", \"url\": \"{base}/b?x=1\", \"header\": {{\"X-K\": [\"1\", \"2\"]}}, \"body\": \"aGVsbG8=\"}}\n\
         \n\
         {{\"offset_ms\": 40, \"method\": \"DELETE\", \"url\": \"{base}/c\"}}\n\
         {{\"offset_ms\": 250.5, \"url\": \"{base}/d\"}}\n"
    );
    let path = file("exact", &text);
    let mut cfg = replay(&path, 2.0);
    let records = common::keep_records(&mut cfg);
    let (report, out) = common::run(cfg);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(report.summary.totals.good, 4, "{out}");
    let got = server.received();
    let seen: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET", "/a"),
            ("POST", "/b?x=1"),
            ("DELETE", "/c"),
            ("GET", "/d")
        ]
    );
    assert_eq!(got[1].body.as_ref(), b"hello");
    assert_eq!(got[1].headers.get_all("x-k").iter().count(), 2);
    // Due at the offsets over the speed, to the nanosecond.
    let mut due: Vec<Duration> = records
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.scheduled)
        .collect();
    due.sort();
    let ms = |v: f64| Duration::from_secs_f64(v / 1000.0 / 2.0);
    assert_eq!(due, [ms(0.0), ms(40.0), ms(40.0), ms(250.5)]);
    // Per 100 ms interval: 3 due in the first, 1 in the second.
    let targets: Vec<u64> = report
        .summary
        .intervals
        .iter()
        .map(|iv| iv.target)
        .collect();
    assert_eq!(&targets[..2], [3, 1], "{out}");
    assert_eq!(
        report.summary.per_name.len(),
        0,
        "one origin: its totals are its figures"
    );
}

#[test]
fn a_busy_connection_makes_later_requests_late_never_reordered() {
    // The first answer takes 300 ms; with one connection, the next two (due at 10 and 20 ms)
    // wait for it: their latency counts the wait, and they still go in order.
    let slow = TestServer::builder()
        .record()
        .stall_after(1, Duration::from_millis(300))
        .spawn();
    let base = slow.url("");
    let text: String = (0..3)
        .map(|i| format!("{{\"offset_ms\": {}, \"url\": \"{base}/{i}\"}}\n", i * 10))
        .collect();
    let path = file("late", &text);
    let mut cfg = replay(&path, 1.0);
    cfg.concurrency = 1;
    let records = common::keep_records(&mut cfg);
    let (report, _) = common::run(cfg);
    std::fs::remove_file(&path).unwrap();
    let paths: Vec<String> = slow.received().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/0", "/1", "/2"]);
    let recs = records.lock().unwrap();
    for r in recs.iter().filter(|r| r.scheduled > Duration::ZERO) {
        assert!(r.latency() >= Duration::from_millis(270), "{r:?}");
        assert!(r.send_lag() >= Duration::from_millis(270), "{r:?}");
    }
    assert!(
        report.summary.totals.late_sends >= 2,
        "{:?}",
        report.summary.totals
    );
}

#[test]
fn a_file_that_cannot_be_replayed_is_refused_with_its_line() {
    let cases = [
        ("{\"offset_ms\": 5, \"url\": \"http://127.0.0.1:1/\"}\n{\"offset_ms\": 4, \"url\": \"http://127.0.0.1:1/\"}\n", ":2: its offset is before line 1's"),
        ("{\"offset_ms\": 0, \"url\": \"http://127.0.0.1:1/\", \"methd\": \"GET\"}\n", ":1: unknown field `methd`"),
        ("{\"offset_ms\": -1, \"url\": \"http://127.0.0.1:1/\"}\n", ":1: offset_ms -1 is not a time from 0"),
        ("{\"offset_ms\": 0, \"url\": \"ftp://127.0.0.1:1/\"}\n", ":1: bad URL"),
        ("\n\n", "no request in the file"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = file(&format!("bad{i}"), text);
        let err = match tailguard_load::run(replay(&path, 1.0), &mut Vec::new()) {
            Err(e @ LoadError::Replay(_)) => e.to_string(),
            Err(e) => panic!("not a replay error: {e}"),
            Ok(_) => panic!("{text:?} was replayed"),
        };
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains(want), "{err}");
        assert!(err.starts_with(&path.display().to_string()), "{err}");
    }
}

/// 2,000 req/s replayed for 3 s: the send lag (due to sent) stays within 1 ms at p99, or,
/// when the machine itself cannot keep that (a shared 2-core VM: CI once saw 3.1, 3.0 and 1.4
/// ms in three tries while nothing else ran), within 1.5x of what plain open-loop pacing at the
/// same rate, concurrency and length achieves right after it: replaying must pace no worse
/// than `--rate` does. Wall clock, so tier 2, run by
/// `counts::rate_accuracy_at_1000_and_10000_per_second` after its rates, so that no other
/// paced run competes for the CPU.
pub fn replay_send_lag_p99_is_within_a_millisecond_at_2000_per_second() {
    let server = TestServer::builder().spawn();
    let url = server.url("/");
    let text: String = (0..6_000)
        .map(|i| {
            format!(
                "{{\"offset_ms\": {}, \"url\": \"{url}\"}}\n",
                f64::from(i) * 0.5
            )
        })
        .collect();
    let path = file("lag", &text);
    // A test build on a shared 2-core machine: the best of up to three tries (release builds
    // here: medians of ten runs' p99 0.81 ms, plain pacing 0.61 ms; docs/load.md).
    let mut seen = Vec::new();
    for _ in 0..3 {
        let mut cfg = replay(&path, 1.0);
        cfg.concurrency = 20;
        cfg.interval = Duration::from_secs(1);
        let (report, _) = common::run(cfg);
        let t = &report.summary.totals;
        assert_eq!(t.good, 6_000);
        let replayed = t.send_lag_us.unwrap().p99;
        if replayed <= 1_000 {
            seen.push((replayed, None));
            break;
        }
        // Over the bound: how well plain pacing does on this machine now.
        let mut cfg = common::config(&url, 2_000.0, Duration::from_secs(3));
        cfg.concurrency = 20;
        let (report, _) = common::run(cfg);
        let paced = report.summary.totals.send_lag_us.unwrap().p99;
        seen.push((replayed, Some(paced)));
        if replayed * 2 <= paced * 3 {
            break;
        }
    }
    std::fs::remove_file(&path).unwrap();
    let last = seen.last().copied();
    assert!(
        last.is_some_and(|(r, p)| r <= 1_000 || p.is_some_and(|p| r * 2 <= p * 3)),
        "send lag p99 of each try, µs (replayed, then plain pacing when over 1 ms): {seen:?}"
    );
}
