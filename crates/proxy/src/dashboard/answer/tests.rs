use super::*;
use std::sync::Arc;
use tailguard_record::live::{EndpointSecond, Sample, Window};

fn sample(seq: u64, endpoints: usize) -> Sample {
    Sample {
        seq,
        at_ms: seq * 1000,
        rps: 100.0,
        success: Some(1.0),
        p50_us: Some(150),
        p99_us: Some(1700),
        p999_us: Some(2000),
        retries: 0,
        endpoints: (0..endpoints)
            .map(|i| EndpointSecond {
                addr: Arc::from(format!("127.0.0.1:{}", 9000 + i)),
                attempts: 10,
                failures: 0,
            })
            .collect(),
    }
}

fn service(name: &str, samples: u64, endpoints: usize) -> ServiceBoard {
    ServiceBoard {
        routes: Vec::new(),
        name: name.into(),
        client: "p2c".into(),
        cost_unit: None,
        window: Window::default(),
        in_flight: 0,
        retries_left: None,
        health_panic: false,
        endpoints: Vec::new(),
        endpoints_omitted: 0,
        history: (1..=samples).map(|i| sample(i, endpoints)).collect(),
        history_omitted: 0,
    }
}

fn board(services: Vec<ServiceBoard>) -> Board {
    Board {
        boot: 1,
        at_ms: 0,
        tick_ms: 1000,
        window_s: WINDOW,
        history_len: HISTORY,
        draining: false,
        cut: None,
        services,
    }
}

fn parse(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("valid JSON")
}

#[test]
fn an_answer_within_the_cap_is_whole() {
    let out = render(board(vec![service("web", 300, 3)]), MAX_ANSWER_BYTES);
    let v = parse(&out);
    assert!(v["cut"].is_null());
    assert_eq!(v["services"][0]["history"].as_array().unwrap().len(), 300);
    assert_eq!(v["services"][0]["history_omitted"], 0);
}

#[test]
fn an_answer_past_the_cap_loses_its_history_then_services_and_says_so() {
    let cap = 20_000;
    let whole = render(
        board(vec![service("a", 300, 3), service("b", 300, 3)]),
        usize::MAX,
    );
    assert!(whole.len() > cap);
    let out = render(board(vec![service("a", 300, 3), service("b", 300, 3)]), cap);
    assert!(out.len() <= cap, "{}", out.len());
    let v = parse(&out);
    assert_eq!(
        v["cut"],
        format!("history left out: the answer would pass {cap} bytes")
    );
    assert_eq!(v["services"][1]["history_omitted"], 300);
    // Services themselves, when even they do not fit.
    let many: Vec<_> = (0..1000).map(|i| service(&format!("s{i}"), 0, 0)).collect();
    let out = render(board(many), cap);
    assert!(out.len() <= cap, "{}", out.len());
    let v = parse(&out);
    let shown = v["services"].as_array().unwrap().len();
    assert!(shown > 0 && shown < 1000, "{shown}");
    let said = format!(
        "{} services left out: the answer would pass {cap} bytes",
        1000 - shown
    );
    assert_eq!(v["cut"], said);
}

#[test]
fn the_point_budget_keeps_the_newest_samples_of_every_service_alike() {
    // Two services of 300 samples with 3 entries each: 4 points a sample.
    assert_eq!(newest_within(&[(300, 900), (300, 900)], 10_000), 300);
    assert_eq!(newest_within(&[(300, 900), (300, 900)], 2_400), 300);
    assert_eq!(newest_within(&[(300, 900), (300, 900)], 2_399), 299);
    assert_eq!(newest_within(&[(300, 900), (10, 30)], 440), 100);
    assert_eq!(newest_within(&[(0, 0)], 0), HISTORY);
    assert_eq!(newest_within(&[(300, 0)], 0), 0);
}
