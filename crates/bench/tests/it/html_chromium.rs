//! The HTML report in a real browser: headless Chromium loads a synthetic report, takes a
//! screenshot and dumps the DOM after load.
//!
//! The browser comes from `tailguard_testsupport::browser` (Chromium at `/usr/bin/chromium`,
//! or `TAILGUARD_SKIP_BROWSER=1` to skip). The page and the screenshots are removed after a
//! pass, kept after a failure or with `TAILGUARD_KEEP_HTML=1`.

use std::path::{Path, PathBuf};
use tailguard_bench::html::html;
use tailguard_bench::results::{ArmRun, BenchReport, IntervalPoint, ProxyCost, SimPrediction};
use tailguard_histogram::Percentiles;
use tailguard_record::RunSummary;
use tailguard_testsupport::browser::{
    self, chromium, clean, network_references, png_size, workdir,
};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 2000;
const CHARTS_PER_GROUP: usize = 4;

/// Two groups; the proxy arms see a latency spike and failures from second 10 to 13.
fn report() -> BenchReport {
    let arms = vec![
        arm("baseline", "1000 req/s", 0, 2_000, false),
        arm("proxy", "1000 req/s", 1, 2_400, true),
        arm("p2c-peak-ewma", "1000 req/s", 2, 1_800, true),
        arm("baseline", "max rate", 3, 9_000, false),
        arm("proxy", "max rate", 4, 11_000, true),
    ];
    BenchReport {
        format: tailguard_bench::results::FORMAT,
        tool: "tailguard test".into(),
        scenario: "slow-middle".into(),
        description: "One backend turns slow for three seconds.".into(),
        load: "open loop, 1000 req/s for 20s; then closed loop, 16 workers".into(),
        deadline_ms: 50.0,
        started_unix_s: 1_700_000_000,
        arms,
        notes: vec!["peer proxies not installed: haproxy, nginx".into()],
        interrupted: false,
        title: None,
    }
}

fn arm(name: &str, group: &str, seed: u64, p99_us: u64, spike: bool) -> ArmRun {
    let intervals: Vec<IntervalPoint> = (0..20u64)
        .map(|s| {
            let hit = spike && (10..13).contains(&s);
            let wobble = (s * 37 + seed * 11) % 17 * 20;
            IntervalPoint {
                start_s: s as f64,
                duration_s: 1.0,
                requests: if hit { 700 } else { 990 + wobble / 20 },
                success_rate: Some(if hit { 0.82 } else { 1.0 }),
                p50_us: Some(300 + wobble),
                p99_us: Some(if hit { 400_000 } else { p99_us + wobble * 10 }),
                max_us: Some(if hit { 900_000 } else { p99_us * 3 }),
                drain: false,
            }
        })
        .collect();
    let latency_us = Percentiles {
        min: 90,
        p50: 310,
        p90: 900,
        p95: 1_400,
        p99: p99_us,
        p999: if spike { 400_000 } else { p99_us * 2 },
        p9999: if spike { 800_000 } else { p99_us * 3 },
        max: if spike { 900_000 } else { p99_us * 3 },
    };
    let l = latency_us;
    let curve = vec![
        (0.0, l.min),
        (50.0, l.p50),
        (90.0, l.p90),
        (95.0, l.p95),
        (99.0, l.p99),
        (99.9, l.p999),
        (99.99, l.p9999),
        (100.0, l.max),
    ];
    ArmRun {
        name: name.into(),
        group: group.into(),
        via: if spike {
            "tailguard proxy"
        } else {
            "client round robin"
        }
        .into(),
        target_rate: 1_000.0,
        achieved_rate: 987.6,
        requests: 19_752,
        good: 19_500,
        success_rate: 0.987,
        within_deadline_rate: 0.97,
        latency_us,
        mean_us: 2_000.0,
        curve,
        intervals,
        proxy: spike.then_some(ProxyCost {
            cpu_us_per_request: Some(14.2),
            cpu_user_us_per_request: Some(5.1),
            rss_kib: Some(10_240),
        }),
        sim: spike.then_some(SimPrediction {
            latency_us: Percentiles {
                p50: 290,
                p99: p99_us / 2,
                max: 600_000,
                ..latency_us
            },
            achieved_rate: 1_000.0,
            success_rate: 0.99,
            within_deadline_rate: 0.98,
            overload: None,
        }),
        load: RunSummary::default(),
        seconds: Vec::new(),
        overload: None,
    }
}

/// Writes `body` as `name` in `dir`.
fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// Takes a screenshot of `page` and returns the PNG's bytes.
fn screenshot(browser: &str, dir: &Path, page: &Path, png: &str) -> Vec<u8> {
    let url = format!("file://{}", page.display());
    browser::screenshot(browser, dir, &url, (WIDTH, HEIGHT), &dir.join(png), &[])
}

#[test]
#[ignore = "tier 2: headless chromium"]
fn screenshot_of_the_report_is_not_blank() {
    let Some(browser) = chromium() else { return };
    let dir = workdir("screenshot");
    let report = write(&dir, "report.html", &html(&report()));
    let blank = write(
        &dir,
        "blank.html",
        "<!doctype html><html><head><meta charset=\"utf-8\"></head><body></body></html>",
    );
    let shot = screenshot(browser, &dir, &report, "report.png");
    let empty = screenshot(browser, &dir, &blank, "blank.png");
    assert_eq!(png_size(&shot), (WIDTH, HEIGHT));
    assert_eq!(png_size(&empty), (WIDTH, HEIGHT));
    // A page of one colour compresses to almost nothing; tables and charts do not.
    assert!(
        shot.len() > 20_000 && shot.len() > 4 * empty.len(),
        "screenshot {} bytes, blank page {} bytes: the report looks empty ({})",
        shot.len(),
        empty.len(),
        dir.display()
    );
    clean(&dir);
}

#[test]
#[ignore = "tier 2: headless chromium"]
fn dom_after_load_has_every_chart_and_series() {
    let Some(browser) = chromium() else { return };
    let dir = workdir("dom");
    let report = report();
    let page = html(&report);
    let path = write(&dir, "report.html", &page);
    let url = format!("file://{}", path.display());
    let out = browser::run(
        browser,
        &dir,
        &url,
        (WIDTH, HEIGHT),
        &["--dump-dom".to_owned()],
    );
    let dom = out.stdout;
    assert!(
        dom.contains("<h1>tailguard bench: slow-middle</h1>"),
        "the page did not load; stderr:\n{}",
        out.stderr
    );
    let groups = report.groups();
    assert_eq!(groups.len(), 2);
    assert_eq!(dom.matches("<svg").count(), CHARTS_PER_GROUP * groups.len());
    assert_eq!(dom.matches("<table>").count(), groups.len());
    for arm in &report.arms {
        let row = format!("<tr><td>{}</td><td>{}</td>", arm.name, arm.via);
        assert!(dom.contains(&row), "no table row for {}", arm.name);
        for series in [format!("{} p99", arm.name), format!("{} p50", arm.name)] {
            assert!(
                dom.contains(&format!("<path class=\"series\" data-series=\"{series}\"")),
                "no line {series}"
            );
        }
    }
    // Latency, curve, success and rate charts: each arm is a line in the last three.
    for name in ["baseline", "proxy", "p2c-peak-ewma"] {
        let arms = report.arms.iter().filter(|a| a.name == name).count();
        let lines = dom.matches(&format!("data-series=\"{name}\"")).count();
        assert_eq!(lines, 3 * arms, "{name}");
    }
    let sim = report.arms.iter().filter(|a| a.sim.is_some()).count();
    assert_eq!(dom.matches(" (sim)\"").count(), sim);
    assert_eq!(network_references(&page), Vec::<String>::new());
    assert_eq!(network_references(&dom), Vec::<String>::new());
    clean(&dir);
}
