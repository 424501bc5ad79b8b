//! Latency is measured truthfully: a fixed server delay reads as that delay, and a stalled
//! server shows up in the latency of every request due during the stall (coordinated omission
//! corrected), while service time does not.

use crate::common;

use std::time::Duration;
use tailguard_testsupport::TestServer;

#[test]
fn fixed_five_ms_server_reads_five_ms() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(5))
        .spawn();
    let cfg = common::config(&server.url("/"), 200.0, Duration::from_secs(2));
    let (report, _) = common::run(cfg);
    let t = &report.summary.totals;
    let (latency, service) = (t.latency_us.unwrap(), t.service_time_us.unwrap());
    assert_eq!(t.good, 400);
    // Tokio's timer in the test server rounds sleeps up to the next millisecond tick, so the
    // server takes 5 to 6 ms; loopback and scheduling add tens of microseconds.
    assert!(latency.min >= 4_990, "min {}", latency.min);
    assert!((5_000..6_600).contains(&latency.p50), "p50 {}", latency.p50);
    assert!((5_000..6_600).contains(&service.p50));
    // The p90 bound leaves room for a busy 2-core machine running other tests beside this one.
    assert!(latency.p90 < 9_000, "p90 {}", latency.p90);
}

#[test]
fn a_stall_is_charged_to_every_request_due_during_it() {
    // 1000 req/s for 3 s; request 1000 (due at 1.0 s) stalls the server for 1 s.
    let server = TestServer::builder()
        .stall_after(1_000, Duration::from_secs(1))
        .spawn();
    let mut cfg = common::config(&server.url("/"), 1000.0, Duration::from_secs(3));
    cfg.concurrency = 10;
    let records = common::keep_records(&mut cfg);
    let (report, _) = common::run(cfg);
    let records = records.lock().unwrap();
    assert_eq!(records.len(), 3_000, "no request is skipped");
    assert_eq!(report.summary.totals.good, 3_000);

    // Every request due between the stall's start and 50 ms before its end waited for the end.
    let stall_start = records
        .iter()
        .find(|r| r.scheduled.as_millis() == 999)
        .unwrap()
        .scheduled;
    let mut charged = 0;
    for r in records.iter() {
        let due = r.scheduled;
        if due > stall_start
            && due + Duration::from_millis(50) < stall_start + Duration::from_secs(1)
        {
            let waited = stall_start + Duration::from_secs(1) - due;
            assert!(r.latency() + Duration::from_millis(5) >= waited, "{r:?}");
            charged += 1;
        }
    }
    assert!(charged >= 900, "{charged}");

    // Corrected latency shows the stall at p90; service time does not (only the requests on
    // the 10 busy connections were in the server during it).
    let t = &report.summary.totals;
    let (latency, service) = (t.latency_us.unwrap(), t.service_time_us.unwrap());
    assert!(latency.p90 >= 500_000, "latency p90 {}", latency.p90);
    assert!(service.p99 < 50_000, "service p99 {}", service.p99);
    assert!(service.max >= 900_000, "the stalled requests themselves");
    assert!(t.late_sends >= 900);
}
