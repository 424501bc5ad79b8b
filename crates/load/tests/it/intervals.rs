//! The interval lines read right: a stall is a marked gap with `-` for values it does not have,
//! the completions after it are marked and the stall is not the baseline of what follows, and a short
//! tail folds into the last line.

use crate::common;

use std::time::Duration;
use tailguard_testsupport::TestServer;

fn interval_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("20")).collect()
}

#[test]
fn a_stall_is_a_marked_gap_then_marked_completions_then_nothing() {
    // 200 req/s in 0.5 s intervals; request 500 (due at 2.495 s) stalls the server for 1.2 s,
    // so nothing completes in [2.5 s, 3.5 s) and the stalled requests complete in [3.5 s, 4 s).
    // Five normal intervals before: a baseline one noisy interval cannot move.
    let server = TestServer::builder()
        .stall_after(500, Duration::from_millis(1_200))
        .spawn();
    let mut cfg = common::config(&server.url("/"), 200.0, Duration::from_secs(5));
    cfg.interval = Duration::from_millis(500);
    cfg.concurrency = 400;
    cfg.quiet = false;
    let (report, text) = common::run(cfg);
    assert_eq!(report.summary.totals.good, 1_000, "{text}");
    let lines = interval_lines(&text);
    assert_eq!(lines.len(), 10, "{text}");
    let gaps: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(" - [        -        -        -        - ]        - "))
        .collect();
    assert!(!gaps.is_empty(), "no gap line:\n{text}");
    for &g in &gaps {
        assert!(lines[g].contains("0/0/0"), "{}", lines[g]);
        assert!(
            lines[g].ends_with("+++++"),
            "the gap is marked: {}",
            lines[g]
        );
    }
    let after = gaps[gaps.len() - 1] + 1;
    assert!(
        lines[after].ends_with("+++++"),
        "the stalled requests' completions are marked:\n{text}"
    );
    // The stall is not the baseline of what follows (it would read as five halvings; a noisy
    // p99 of a hundred samples on a busy machine may still move the marker a little).
    assert!(
        !lines[after + 1].ends_with("-----"),
        "the normal interval after them is judged against normal ones:\n{text}"
    );
    assert!(!text.contains("0µs [      0µs"), "{text}");
}

#[test]
fn a_short_tail_folds_into_the_last_line() {
    // Sending ends at 2 s; the last responses take 20 ms more. Without folding, a third line
    // of 0.02 s would hold them.
    let server = TestServer::builder()
        .delay(Duration::from_millis(20))
        .spawn();
    let mut cfg = common::config(&server.url("/"), 100.0, Duration::from_secs(2));
    cfg.quiet = false;
    let (report, text) = common::run(cfg);
    assert_eq!(report.summary.totals.good, 200);
    let lines = interval_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    let last = &report.summary.intervals[1];
    assert!(
        last.duration_s > 1.0 && last.duration_s < 1.1,
        "the tail is in the last line: {}s",
        last.duration_s
    );
    let counted: u64 = report
        .summary
        .intervals
        .iter()
        .map(|i| i.totals.requests)
        .sum();
    assert_eq!(counted, 200);
}
