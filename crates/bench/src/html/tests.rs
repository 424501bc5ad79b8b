use super::*;
use crate::results::{ProxyCost, SimPrediction, FORMAT};
use tailguard_histogram::Percentiles;
use tailguard_record::RunSummary;

fn arm(name: &str, group: &str, p99_us: u64) -> ArmRun {
    let latency_us = Percentiles {
        min: 120,
        p50: 260,
        p90: 900,
        p95: 42_140,
        p99: p99_us,
        p999: 1_714_000,
        p9999: 1_900_000,
        max: 2_000_000,
    };
    let intervals = (0..10)
        .map(|i| IntervalPoint {
            start_s: f64::from(i),
            duration_s: 1.0,
            requests: 100,
            success_rate: Some(1.0),
            p50_us: Some(260),
            p99_us: Some(if i == 5 { 900_000 } else { p99_us }),
            max_us: Some(2_000_000),
            drain: false,
        })
        .collect();
    ArmRun {
        name: name.into(),
        group: group.into(),
        via: "client round robin".into(),
        target_rate: 1_000.0,
        achieved_rate: 998.7,
        requests: 9_987,
        good: 9_974,
        success_rate: 0.9987,
        within_deadline_rate: 0.95,
        latency_us,
        mean_us: 3_000.0,
        curve: vec![(0.0, 120), (50.0, 260), (99.0, p99_us), (100.0, 2_000_000)],
        intervals,
        proxy: None,
        sim: None,
        load: RunSummary::default(),
        seconds: Vec::new(),
        overload: None,
    }
}

fn report(arms: Vec<ArmRun>) -> BenchReport {
    BenchReport {
        format: FORMAT,
        tool: "tailguard 0.1.0".into(),
        scenario: "slow-middle".into(),
        description: "one slow backend & two fast ones".into(),
        load: "open loop, 1000 req/s for 10s".into(),
        deadline_ms: 100.0,
        started_unix_s: 1_700_000_000,
        arms,
        notes: vec!["haproxy <not installed>".into()],
        interrupted: false,
        title: None,
    }
}

#[test]
fn table_has_a_row_per_arm_with_readable_numbers() {
    let page = html(&report(vec![
        arm("baseline", "max rate", 5_000),
        arm("proxy", "max rate", 7_000),
    ]));
    assert!(page.contains("<td>baseline</td>"));
    assert!(page.contains("<td>proxy</td>"));
    assert_eq!(page.matches("<tr><td>").count(), 2);
    for cell in [
        "260µs", "42.1ms", "5.00ms", "7.00ms", "1.71s", "2.00s", "999", "99.87%",
    ] {
        assert!(page.contains(&format!(">{cell}</td>")), "{cell} missing");
    }
    assert!(page.contains("<dd>100ms</dd>"), "the deadline");
    assert!(page.contains("2023-11-14 22:13:20 UTC"));
    // Neither proxy nor sim figures: no columns for them.
    assert!(!page.contains("proxy CPU") && !page.contains("sim p99"));
}

#[test]
fn proxy_and_sim_columns_appear_when_an_arm_has_them() {
    let mut proxy = arm("proxy", "g", 7_000);
    proxy.proxy = Some(ProxyCost {
        cpu_us_per_request: Some(12.34),
        cpu_user_us_per_request: Some(4.56),
        rss_kib: Some(12_288),
    });
    proxy.sim = Some(SimPrediction {
        latency_us: Percentiles {
            p50: 300,
            p99: 6_500,
            ..Percentiles::default()
        },
        achieved_rate: 1_000.0,
        success_rate: 1.0,
        within_deadline_rate: 1.0,
        overload: None,
    });
    let page = html(&report(vec![arm("baseline", "g", 5_000), proxy]));
    for cell in ["12.3µs", "4.6µs", "12.0 MiB", "300µs", "6.50ms", "100.00%"] {
        assert!(page.contains(&format!(">{cell}</td>")), "{cell} missing");
    }
    assert!(page.contains(
        "<th>proxy CPU/request</th><th>of which user space</th><th>proxy RSS</th><th>sim p50</th>"
    ));
    // The baseline has none of them.
    assert_eq!(page.matches("<td class=\"num\">–</td>").count(), 6);
    assert!(page.contains("data-series=\"proxy (sim)\""));
}

#[test]
fn text_is_escaped() {
    let mut bad = arm("<script>alert(1)</script>", "a&b", 5_000);
    bad.via = "\"quoted\"".into();
    let page = html(&report(vec![bad]));
    assert!(!page.contains("<script>"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("<h2>a&amp;b</h2>"));
    assert!(page.contains("&quot;quoted&quot;"));
    assert!(page.contains("one slow backend &amp; two fast ones"));
    assert!(page.contains("<li>haproxy &lt;not installed&gt;</li>"));
}

#[test]
fn four_charts_per_group_and_none_without_data() {
    let mut empty = arm("idle", "empty", 5_000);
    empty.intervals.clear();
    empty.curve.clear();
    let page = html(&report(vec![
        arm("baseline", "g", 5_000),
        arm("proxy", "g", 7_000),
        empty,
    ]));
    assert_eq!(page.matches("<svg").count(), 4);
    for name in ["baseline p99", "baseline p50", "proxy p99", "proxy p50"] {
        assert_eq!(page.matches(&format!("data-series=\"{name}\"")).count(), 1);
    }
    // Curve, success and rate charts: one line per arm each.
    assert_eq!(page.matches("data-series=\"proxy\"").count(), 3);
    assert!(!page.contains("data-series=\"idle"));
}

#[test]
fn each_arm_gets_a_card_like_the_live_page() {
    let mut live = arm("proxy", "g", 7_000);
    live.seconds = (1..=5_u32)
        .map(|i| crate::results::SecondPoint {
            at_s: f64::from(i),
            rps: 100.0,
            success: Some(1.0),
            p50_us: Some(260),
            p99_us: Some(7_000),
            p999_us: Some(9_000),
            // The slow backend loses its share.
            backends: vec![
                ("fast".into(), 50 + 8 * u64::from(i), 0),
                ("slow".into(), 50 - 8 * u64::from(i), 0),
            ],
        })
        .collect();
    let page = html(&report(vec![arm("baseline", "g", 5_000), live]));
    assert_eq!(page.matches("<article>").count(), 2, "a card per arm");
    assert!(page.contains("<div class=\"k\">p99</div><div class=\"v\">7.00ms</div>"));
    // The four charts of the live page for the arm with seconds, then the group's four.
    assert_eq!(page.matches("<svg").count(), 8);
    assert!(page.contains("proxy: share of requests by backend"));
    for name in ["fast", "slow", "p99.9", "success", "req/s"] {
        assert!(page.contains(&format!("data-series=\"{name}\"")), "{name}");
    }
}

#[test]
fn the_page_is_self_contained() {
    let page = html(&report(vec![arm("baseline", "g", 5_000)]));
    assert!(page.starts_with("<!doctype html>"));
    for needle in ["src=", "href=", "<script", "<link", "@import", "url("] {
        assert!(!page.contains(needle), "{needle}");
    }
}

#[test]
fn wide_latency_ranges_get_a_log_axis() {
    let mut narrow = arm("a", "g", 400);
    for iv in &mut narrow.intervals {
        iv.p99_us = Some(400);
    }
    let chart = latency_over_time(&[&narrow], 0.0).svg();
    assert!(chart.contains(">0µs</text>"), "a linear axis from zero");
    let wide = arm("a", "g", 5_000);
    let chart = latency_over_time(&[&wide], 0.0).svg();
    assert!(chart.contains(">100µs</text>") && chart.contains(">1s</text>"));
    assert!(!chart.contains(">0µs</text>"), "a log axis has no zero");
}

#[test]
fn numbers_read_well() {
    assert_eq!(percent(1.0), "100.00%");
    assert_eq!(percent(0.99999), ">99.99%");
    assert_eq!(percent(0.9987), "99.87%");
    assert_eq!(percent(0.0), "0.00%");
    assert_eq!(latency_tick(2_500.0), "2.5ms");
    assert_eq!(latency_tick(10_000.0), "10ms");
    assert_eq!(latency_tick(1e6), "1s");
    assert_eq!(latency_tick(250.0), "250µs");
    assert_eq!(latency_tick(0.0), "0µs");
    assert_eq!(rate(998.7), "999");
    assert_eq!(rate(9.87), "9.9");
    assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
    assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
    assert_eq!(utc(4_102_444_799), "2099-12-31 23:59:59 UTC");
}

/// The drain (the last responses, after the sending ended) is a dot apart from the line: two
/// subpaths, the second a lone point, not the line's last segment.
#[test]
fn the_drain_is_drawn_apart_from_the_line() {
    let mut a = arm("a", "g", 400);
    let last = a.intervals.last_mut().unwrap();
    last.drain = true;
    last.p99_us = Some(2_000_000);
    let svg = latency_over_time(&[&a], 0.0).svg();
    let path = svg
        .lines()
        .find(|l| l.contains("data-series=\"a p99\""))
        .unwrap();
    let d = path.split(" d=\"").nth(1).unwrap();
    assert_eq!(d.matches('M').count(), 2, "{d}");
    assert!(d.trim_end_matches("\"/>").ends_with("h0"), "{d}");
    a.intervals.last_mut().unwrap().drain = false;
    let svg = latency_over_time(&[&a], 0.0).svg();
    let path = svg
        .lines()
        .find(|l| l.contains("data-series=\"a p99\""))
        .unwrap();
    assert_eq!(path.matches('M').count(), 1, "{path}");
}
