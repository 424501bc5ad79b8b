//! The live gate on paused time: who waits, who goes first, and that every place comes back
//! whatever way a waiting request ends.

use super::*;
use tailguard_resilience::admission::QueueConfig;

fn gated(max: u32, queue: u32, wait_ms: u64, criticality: bool) -> Arc<Gated> {
    let mut cfg = AdmissionConfig::cap(max);
    cfg.queue = QueueConfig {
        max_size: queue,
        max_wait: Duration::from_millis(wait_ms),
    };
    cfg.criticality = criticality;
    Arc::new(Gated::new(cfg, Clock::start()))
}

/// Lets spawned tasks run until none can make progress.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_queue_the_cap_refuses_at_once() {
    let g = gated(2, 0, 0, false);
    let a = g.enter(Criticality::Default, None).await.unwrap();
    let _b = g.enter(Criticality::Default, None).await.unwrap();
    assert_eq!(
        g.enter(Criticality::Critical, None).await.unwrap_err(),
        Refusal::QueueFull
    );
    assert!(g.extra().is_none(), "no room for a retry either");
    drop(a);
    assert_eq!(g.figures(), (2, 1, 0));
    let c = g.extra();
    assert!(c.is_some(), "a freed place takes a retry");
}

#[tokio::test(start_paused = true)]
async fn critical_requests_go_first_and_fifo_within_a_class() {
    let g = gated(1, 10, 1_000, true);
    let first = g.enter(Criticality::Default, None).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (name, class) in [
        ("default-1", Criticality::Default),
        ("sheddable", Criticality::Sheddable),
        ("critical-1", Criticality::Critical),
        ("default-2", Criticality::Default),
        ("critical-2", Criticality::Critical),
    ] {
        let (g, order) = (Arc::clone(&g), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let place = g.enter(class, None).await.unwrap();
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(1)).await;
            drop(place);
        }));
        settle().await;
    }
    assert_eq!(g.figures(), (1, 1, 5));
    assert!(g.extra().is_none(), "a retry never jumps the queue");
    drop(first);
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order,
        [
            "critical-1",
            "critical-2",
            "default-1",
            "default-2",
            "sheddable"
        ]
    );
    assert_eq!(g.figures(), (1, 0, 0), "every place came back");
}

#[tokio::test(start_paused = true)]
async fn a_wait_ends_at_max_wait_and_a_full_queue_sheds_the_lowest_class() {
    let g = gated(1, 1, 50, true);
    let held = g.enter(Criticality::Default, None).await.unwrap();
    let sheddable = {
        let g = Arc::clone(&g);
        tokio::spawn(async move { g.enter(Criticality::Sheddable, None).await.map(drop) })
    };
    settle().await;
    // The queue (one) is full: a default request displaces the sheddable one.
    let default = {
        let g = Arc::clone(&g);
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let r = g.enter(Criticality::Default, None).await.map(drop);
            (r, started.elapsed())
        })
    };
    settle().await;
    assert_eq!(sheddable.await.unwrap(), Err(Refusal::Displaced));
    // Another default finds the queue full of its own class.
    assert_eq!(
        g.enter(Criticality::Default, None).await.unwrap_err(),
        Refusal::QueueFull
    );
    let (r, waited) = default.await.unwrap();
    assert_eq!(r, Err(Refusal::Waited));
    assert_eq!(waited, Duration::from_millis(50));
    drop(held);
    assert_eq!(g.figures(), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_request_that_leaves_while_waiting_takes_no_place_with_it() {
    let g = gated(1, 4, 10_000, false);
    let held = g.enter(Criticality::Default, None).await.unwrap();
    let gone = {
        let g = Arc::clone(&g);
        tokio::spawn(async move { g.enter(Criticality::Default, None).await.map(drop) })
    };
    settle().await;
    assert_eq!(g.figures(), (1, 1, 1));
    gone.abort();
    settle().await;
    assert_eq!(g.figures(), (1, 1, 0), "it left the queue");
    drop(held);
    assert_eq!(g.figures(), (1, 0, 0));
    // And one that is sent a place in the same moment it leaves gives it back.
    let held = g.enter(Criticality::Default, None).await.unwrap();
    let waiter = {
        let g = Arc::clone(&g);
        tokio::spawn(async move { g.enter(Criticality::Default, None).await.map(drop) })
    };
    settle().await;
    drop(held); // the place is sent to the waiter...
    waiter.abort(); // ...which is gone before it runs
    settle().await;
    assert_eq!(g.figures(), (1, 0, 0), "the place came back");
    assert!(g.extra().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_deadline_too_near_for_the_expected_wait_is_refused_at_once() {
    let g = gated(1, 10, 10_000, false);
    // Teach it that an attempt takes 100 ms.
    g.learn(Some(Duration::from_millis(100)));
    let _held = g.enter(Criticality::Default, None).await.unwrap();
    // One turn ahead of 100 ms plus the typical 100 ms: 200 ms expected; 50 ms left.
    let soon = Some(g.clock.now() + Duration::from_millis(50));
    assert_eq!(
        g.enter(Criticality::Default, soon).await.unwrap_err(),
        Refusal::Deadline
    );
    // Without a deadline it waits (and is refused only by maxWait).
    let waiter = {
        let g = Arc::clone(&g);
        tokio::spawn(async move { g.enter(Criticality::Default, None).await.map(drop) })
    };
    settle().await;
    assert_eq!(g.figures().2, 1);
    waiter.abort();
}

#[test]
fn criticality_reads_the_header_in_any_case_and_defaults_otherwise() {
    let mut h = http::HeaderMap::new();
    assert_eq!(criticality(&h), Criticality::Default);
    h.insert(CRITICALITY, http::HeaderValue::from_static("CRITICAL"));
    assert_eq!(criticality(&h), Criticality::Critical);
    h.insert(CRITICALITY, http::HeaderValue::from_static("sheddable"));
    assert_eq!(criticality(&h), Criticality::Sheddable);
    h.insert(CRITICALITY, http::HeaderValue::from_static("urgent!"));
    assert_eq!(criticality(&h), Criticality::Default);
}
