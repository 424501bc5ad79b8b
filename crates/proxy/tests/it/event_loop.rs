//! The event loop's own delay (`tailguard_proxy_event_loop_delay_seconds`): a stall of the loop
//! shows in it. Real time on purpose (a stall is a wall-clock event), checked one way only: a
//! busy machine can make the loop later, never earlier, so the test cannot flake by load.

use crate::support;

use std::time::Duration;
use support::{eventually, start, AsUpstream};
use tailguard_proxy::config::ServiceConfig;
use tailguard_proxy::Proxy;
use tailguard_testsupport::TestServer;

const NAME: &str = "tailguard_proxy_event_loop_delay_seconds";

/// Samples of the delay histogram above its bucket between 50 and 60 ms (51.2 ms), and all
/// samples.
fn over_50ms(proxy: &Proxy) -> (u64, u64) {
    let text = proxy.metrics_text();
    let mut below = None;
    let mut count = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(&format!("{NAME}_bucket{{le=\"")) {
            let (le, value) = rest.split_once("\"} ").unwrap();
            let le: f64 = le.parse().unwrap_or(f64::INFINITY);
            if (0.05..0.06).contains(&le) {
                below = Some(value.trim().parse::<u64>().unwrap());
            }
        } else if let Some(value) = line.strip_prefix(&format!("{NAME}_count ")) {
            count = value.trim().parse().unwrap();
        }
    }
    let below = below.unwrap_or_else(|| panic!("no bucket near 50 ms in\n{text}"));
    (count - below, count)
}

#[tokio::test(flavor = "current_thread")]
async fn a_stalled_event_loop_shows_in_its_delay_histogram() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let sampled = eventually(Duration::from_secs(5), async || over_50ms(&proxy).1 >= 3).await;
    assert!(sampled, "no samples: {:?}", over_50ms(&proxy));
    let (before, _) = over_50ms(&proxy);
    // The runtime's one thread blocked for 100 ms (the fault under test, not a wait): the
    // check due in the meantime runs at least 90 ms late.
    std::thread::sleep(Duration::from_millis(100));
    let seen = eventually(Duration::from_secs(5), async || {
        over_50ms(&proxy).0 > before
    })
    .await;
    assert!(seen, "the stall did not show: {:?}", over_50ms(&proxy));
    proxy.shutdown().await;
}
