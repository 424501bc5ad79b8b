//! The event loop's own delay (`tailguard_proxy_event_loop_delay_seconds`): a stall of the loop
//! shows in it. Real time on purpose (a stall is a wall-clock event), checked one way only: a
//! busy machine can make the loop later, never earlier, so the test cannot flake by load.

use crate::support;

use std::future::Future;
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

/// A proxy (and its backend) whose event-loop checks have begun: three samples in.
async fn checking() -> (TestServer, Proxy) {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let sampled = eventually(Duration::from_secs(5), async || over_50ms(&proxy).1 >= 3).await;
    assert!(sampled, "no samples: {:?}", over_50ms(&proxy));
    (backend, proxy)
}

#[tokio::test(flavor = "current_thread")]
async fn a_stalled_event_loop_shows_in_its_delay_histogram() {
    let (_backend, proxy) = checking().await;
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

/// Write system calls this thread has made (`/proc/thread-self/io`).
fn writes_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The delay's checks wake nothing: each is armed while an earlier one is pending, so tokio's
/// timer does not write to the runtime's eventfd for it. Armed one at a time (as before), an
/// idle proxy made a write every 10 ms. The proxy's tasks run on this test's one thread, whose
/// own counter is read, over a window of real time with nothing to do (the window is what is
/// observed, not a wait for something).
#[tokio::test(flavor = "current_thread")]
async fn an_idle_proxy_writes_nothing_for_its_event_loop_checks() {
    // The checks under way, and the window's own timer armed, before counting.
    let (_backend, proxy) = checking().await;
    let mut window = std::pin::pin!(tokio::time::sleep(Duration::from_millis(300)));
    std::future::poll_fn(|cx| {
        let _ = window.as_mut().poll(cx);
        std::task::Poll::Ready(())
    })
    .await;
    let (before, checks_before) = (writes_by_this_thread(), over_50ms(&proxy).1);
    window.await;
    let (writes, checks) = (
        writes_by_this_thread() - before,
        over_50ms(&proxy).1 - checks_before,
    );
    assert!(checks >= 5, "{checks} checks in 300 ms");
    assert!(writes <= 3, "{writes} writes over {checks} checks");
    proxy.shutdown().await;
}
