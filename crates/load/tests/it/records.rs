//! `--output`: every request's record as NDJSON; read back, the records give the run's counts,
//! percentiles and names exactly.

use crate::common;

use std::time::Duration;
use tailguard_record::records;
use tailguard_testsupport::TestServer;

#[test]
fn the_records_file_reproduces_the_run_exactly() {
    let server = TestServer::builder().spawn();
    server.set_path("/down", Some((503, Duration::ZERO)));
    let path = std::env::temp_dir().join(format!("tg-it-records-{}.ndjson", std::process::id()));
    let mut cfg = common::config(&server.url("/"), 2000.0, Duration::from_millis(500));
    cfg.targets
        .push(tailguard_load::Target::parse(&server.url("/down")).unwrap());
    cfg.classifier.expect = Some("2xx".parse().unwrap());
    cfg.concurrency = 4;
    cfg.output = Some(path.clone());
    let (report, text) = common::run(cfg);
    let run = &report.summary;
    let file = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    // A header, a line per request, an end line.
    assert_eq!(lines.len() as u64, run.totals.requests + 2);
    assert!(records::is_records(lines[0]));
    assert_eq!(
        lines.last().unwrap(),
        &format!(
            "{{\"end\":true,\"records\":{},\"dropped\":0,\"duration_s\":{},\"send_phase_s\":{},\"target_rate\":{}}}",
            run.totals.requests,
            serde_json::to_string(&run.duration_s).unwrap(),
            serde_json::to_string(&run.send_phase_s).unwrap(),
            serde_json::to_string(&run.totals.target_rate).unwrap()
        )
    );
    let written = run.records.as_ref().unwrap();
    assert_eq!((written.written, written.dropped), (run.totals.requests, 0));
    assert!(text.contains(&format!(
        "# per-request records: {} written to",
        run.totals.requests
    )));

    let back = records::read(file.as_bytes()).unwrap().summary();
    let (a, b) = (&run.totals, &back.totals);
    assert_eq!(
        (a.requests, a.good, a.bad, a.failed),
        (b.requests, b.good, b.bad, b.failed)
    );
    assert_eq!(
        a.bad,
        a.requests / 2,
        "every /down answer failed its status check"
    );
    assert_eq!(a.failed_checks, b.failed_checks);
    assert_eq!(a.status_codes, b.status_codes);
    assert_eq!(a.errors, b.errors);
    assert_eq!(a.latency_us, b.latency_us);
    assert_eq!(a.service_time_us, b.service_time_us);
    assert_eq!(a.send_lag_us, b.send_lag_us);
    assert_eq!((a.late_sends, a.bytes), (b.late_sends, b.bytes));
    assert_eq!(
        (a.target_rate, a.achieved_rate),
        (b.target_rate, b.achieved_rate)
    );
    assert_eq!(run.histogram, back.histogram);
    assert_eq!(run.per_target, back.per_target);
    assert_eq!(run.per_name, back.per_name);
}
