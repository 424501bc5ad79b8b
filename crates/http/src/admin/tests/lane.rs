//! The probe lane and the health checks' exemptions, on real sockets. The server runs on its
//! own thread and runtime, so its timeouts are real time: the tests that need one set it short
//! and bound their waits by [`WAIT`].

use super::*;

const PROBE: &[u8] = b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// Limits with `places` connections and a lane of `lane`.
fn small(places: usize, lane: usize) -> Limits {
    Limits {
        max_connections: places,
        probe_lane: lane,
        ..Limits::default()
    }
}

/// Holds every place of a server with `places` connections: each has been answered.
async fn hold(addr: SocketAddr, places: usize) -> Vec<Conn> {
    let mut held = Vec::new();
    for _ in 0..places {
        let mut c = Conn::open(addr).await;
        assert_eq!(c.ask("/").await.0, 200);
        held.push(c);
    }
    held
}

/// Sends `request` on a fresh connection and reads until the server closes it.
async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = tcp::connect(addr, Nagle::Off).await.unwrap();
    s.write_all(request).await.unwrap();
    closed(&mut s).await
}

/// What the server sends until it closes `s` (within [`WAIT`]).
async fn closed(s: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(WAIT, s.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "closed in time");
    String::from_utf8(answer).unwrap()
}

fn status(answer: &str) -> u16 {
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok());
    status.unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

#[tokio::test]
async fn a_health_check_is_answered_while_every_connection_is_taken() {
    let server = server_with(small(2, 8)).await;
    let held = hold(server.addr(), 2).await;
    let answer = exchange(server.addr(), PROBE).await;
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(answer.ends_with("\r\n\r\n/ready"), "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");
    let head = exchange(server.addr(), b"HEAD /live HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&head), 200, "{head}");
    drop(held);
    server.shutdown().await;
}

#[tokio::test]
async fn anything_else_in_the_lane_gets_503_and_the_connection_closes() {
    let server = server_with(small(1, 8)).await;
    let held = hold(server.addr(), 1).await;
    for request in [
        &b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"POST /ready HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n",
    ] {
        let answer = exchange(server.addr(), request).await;
        assert_eq!(status(&answer), 503, "{answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        assert!(answer.contains("retry-after: 1"), "{answer}");
        assert!(
            answer.ends_with("admin: 1 connections open already (the limit); retry later\n"),
            "{answer}"
        );
    }
    drop(held);
    server.shutdown().await;
}

/// A lane connection whose head has not arrived whole within the probe head timeout is
/// closed unanswered, whether silent or trickling. Elapsed time is a lower bound.
#[tokio::test]
async fn a_lane_connection_without_its_head_is_closed_at_the_timeout() {
    let limits = Limits {
        probe_head_timeout: Duration::from_millis(200),
        ..small(1, 8)
    };
    let server = server_with(limits).await;
    let held = hold(server.addr(), 1).await;
    for start in [&b""[..], b"GET /ready HTTP/1.1\r\nHost: x"] {
        let started = tokio::time::Instant::now();
        let mut s = tcp::connect(server.addr(), Nagle::Off).await.unwrap();
        s.write_all(start).await.unwrap();
        assert_eq!(closed(&mut s).await, "", "unanswered");
        assert!(started.elapsed() >= Duration::from_millis(200));
    }
    drop(held);
    server.shutdown().await;
}

/// With the lane full of incomplete heads, a new connection closes the oldest, not the newer
/// one. The head timeout is far past [`WAIT`], so only an eviction closes A in time.
#[tokio::test]
async fn a_full_lane_closes_the_connection_longest_on_its_head() {
    let limits = Limits {
        probe_head_timeout: WAIT * 3,
        ..small(1, 2)
    };
    let server = server_with(limits).await;
    let held = hold(server.addr(), 1).await;
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut s = tcp::connect(server.addr(), Nagle::Off).await.unwrap();
        s.write_all(b"GET /ready HTTP/1.1\r\n").await.unwrap();
        slow.push(s);
    }
    let answer = exchange(server.addr(), PROBE).await;
    assert_eq!(status(&answer), 200, "{answer}");
    assert_eq!(
        closed(&mut slow[0]).await,
        "",
        "the oldest was closed, unanswered"
    );
    let mut buf = [0u8; 16];
    let newer = slow[1].try_read(&mut buf);
    assert!(
        matches!(&newer, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the newer one is still open: {newer:?}"
    );
    drop(held);
    server.shutdown().await;
}

/// While every lane connection is answering a health check, a new one is closed at once:
/// nothing in the lane can make room.
#[tokio::test]
async fn a_lane_of_health_checks_closes_the_newcomer() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (g, e) = (Arc::clone(&gate), Arc::clone(&entered));
    let server = serve_with(listener, small(1, 1), move |req: Request<Incoming>| {
        let (g, e) = (Arc::clone(&g), Arc::clone(&e));
        async move {
            if req.uri().path() == "/ready" {
                e.fetch_add(1, Ordering::SeqCst);
                let _ = g.acquire().await.unwrap();
            }
            Response::new(Full::new(Bytes::from_static(b"ok")))
        }
    })
    .unwrap();
    let addr = server.addr();
    let held = hold(addr, 1).await;
    let waiting = tokio::spawn(async move { exchange(addr, PROBE).await });
    let in_handler = tokio::time::timeout(WAIT, async {
        while entered.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    });
    assert!(in_handler.await.is_ok(), "the probe reached the handler");
    assert_eq!(exchange(addr, PROBE).await, "", "closed unanswered");
    gate.add_permits(1);
    assert_eq!(status(&waiting.await.unwrap()), 200);
    drop(held);
    server.shutdown().await;
}

/// A refusal waits for its turn outside the lane's room, so a probe still gets in; with as
/// many refusals waiting as connections allowed (one here), one more is closed unanswered.
#[tokio::test]
async fn refusals_wait_outside_the_lane_up_to_their_bound() {
    let limits = Limits {
        answers_per_sec: 1,
        answers_burst: 1,
        ..small(1, 1)
    };
    let server = server_with(limits).await;
    let addr = server.addr();
    let held = hold(addr, 1).await;
    // Sent before the probe, so accepted before it.
    let mut refused = Vec::new();
    for path in ["/x", "/y"] {
        let mut s = tcp::connect(addr, Nagle::Off).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        refused.push(tokio::spawn(async move { closed(&mut s).await }));
    }
    assert_eq!(status(&exchange(addr, PROBE).await), 200);
    let done = refused.iter().filter(|r| r.is_finished()).count();
    assert!(done <= 1, "the probe came before the refusal's turn");
    let mut answers = Vec::new();
    for r in refused {
        answers.push(r.await.unwrap());
    }
    answers.sort();
    assert_eq!(answers[0], "", "one closed unanswered");
    assert_eq!(status(&answers[1]), 503, "{}", answers[1]);
    drop(held);
    server.shutdown().await;
}

/// A probe queued in the kernel behind a crowd of silent connections, with its head already
/// sent, is read before the crowd can push it out of a lane of one: the accept loop yields
/// after each lane connection. (Without the yield, the loop accepts the whole queue in a row
/// and closes the probe unread.)
#[tokio::test]
async fn a_probe_queued_behind_a_crowd_is_read_before_the_next_accept() {
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Queued before the server starts: the holder first, then the probe, then the crowd.
    let holder = tcp::connect(addr, Nagle::Off).await.unwrap();
    let mut probe = tcp::connect(addr, Nagle::Off).await.unwrap();
    probe.write_all(PROBE).await.unwrap();
    let mut crowd = Vec::new();
    for _ in 0..50 {
        crowd.push(tcp::connect(addr, Nagle::Off).await.unwrap());
    }
    let server = serve_with(listener, small(1, 1), |_req| async {
        Response::new(Full::new(Bytes::from_static(b"ready")))
    })
    .unwrap();
    let answer = closed(&mut probe).await;
    assert_eq!(status(&answer), 200, "{answer}");
    drop((holder, crowd));
    server.shutdown().await;
}

/// A probe accepted before its head arrived survives newcomers while the lane holds
/// connections that have sent part of a head: those are closed first, oldest first. All are
/// queued before the server starts, so they are accepted in order.
#[tokio::test]
async fn a_probe_whose_head_comes_late_outlasts_the_partial_heads() {
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let holder = tcp::connect(addr, Nagle::Off).await.unwrap();
    let mut probe = tcp::connect(addr, Nagle::Off).await.unwrap();
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut s = tcp::connect(addr, Nagle::Off).await.unwrap();
        s.write_all(b"GET /ready HTTP/1.1\r\n").await.unwrap();
        slow.push(s);
    }
    let limits = Limits {
        probe_head_timeout: WAIT * 3,
        ..small(1, 2)
    };
    let server = serve_with(listener, limits, |_req| async {
        Response::new(Full::new(Bytes::from_static(b"ready")))
    })
    .unwrap();
    // The lane was [probe, slow 0], then each newcomer closed the partial head before it.
    for s in &mut slow[..3] {
        assert_eq!(closed(s).await, "", "closed unanswered");
    }
    probe.write_all(PROBE).await.unwrap();
    let answer = closed(&mut probe).await;
    assert_eq!(status(&answer), 200, "{answer}");
    drop((holder, slow));
    server.shutdown().await;
}

/// Health checks take no place in flight: answered while the other requests fill them.
#[tokio::test]
async fn health_checks_are_answered_with_every_place_in_flight_taken() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (g, e) = (Arc::clone(&gate), Arc::clone(&entered));
    let server = serve_with(
        listener,
        Limits::default(),
        move |req: Request<Incoming>| {
            let (g, e) = (Arc::clone(&g), Arc::clone(&e));
            async move {
                if req.uri().path() == "/slow" {
                    e.fetch_add(1, Ordering::SeqCst);
                    let _ = g.acquire().await.unwrap();
                }
                Response::new(Full::new(Bytes::from_static(b"ok")))
            }
        },
    )
    .unwrap();
    let addr = server.addr();
    let slow: Vec<_> = (0..4)
        .map(|_| tokio::spawn(async move { get(addr, "/slow").await }))
        .collect();
    let all_in = tokio::time::timeout(WAIT, async {
        while entered.load(Ordering::SeqCst) < 4 {
            tokio::task::yield_now().await;
        }
    });
    assert!(all_in.await.is_ok(), "four requests in flight");
    assert_eq!(get(addr, "/other").await.0, 503, "the places are taken");
    assert_eq!(get(addr, "/ready").await, (200, "ok".into()));
    assert_eq!(get(addr, "/live").await, (200, "ok".into()));
    gate.add_permits(4);
    for s in slow {
        assert_eq!(s.await.unwrap().0, 200);
    }
    server.shutdown().await;
}

/// Health checks have their own allowance: answered at once while other answers wait their
/// turns of an exhausted pace (one a second here). Two requests wait from the start; once the
/// first is answered, the other's turn is a second away, and the health checks come first.
#[tokio::test]
async fn health_checks_are_answered_while_the_pace_is_exhausted() {
    let limits = Limits {
        answers_per_sec: 1,
        answers_burst: 1,
        ..Limits::default()
    };
    let server = server_with(limits).await;
    let addr = server.addr();
    assert_eq!(get(addr, "/first").await.0, 200);
    let (done, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..2 {
        let done = done.clone();
        tokio::spawn(async move { done.send(get(addr, "/paced").await.0) });
    }
    let first = tokio::time::timeout(WAIT, answered.recv()).await;
    assert_eq!(first.expect("answered in time"), Some(200));
    for _ in 0..5 {
        assert_eq!(get(addr, "/ready").await.0, 200);
    }
    assert!(answered.try_recv().is_err(), "the health checks came first");
    let second = tokio::time::timeout(WAIT, answered.recv()).await;
    assert_eq!(second.expect("answered in time"), Some(200));
    server.shutdown().await;
}

/// Past their allowance, health checks take turns of the answers' pace: waited for, never
/// refused. Elapsed time is a lower bound.
#[tokio::test]
async fn health_checks_past_their_allowance_wait_for_the_pace() {
    let limits = Limits {
        answers_per_sec: 5,
        answers_burst: 1,
        health_per_sec: 0,
        health_burst: 2,
        ..Limits::default()
    };
    let server = server_with(limits).await;
    let started = tokio::time::Instant::now();
    let mut c = Conn::open(server.addr()).await;
    for _ in 0..5 {
        assert_eq!(c.ask("/live").await.0, 200);
    }
    // Two from the allowance, one from the pace's burst, two at 200 ms each.
    assert!(started.elapsed() >= Duration::from_millis(400));
    server.shutdown().await;
}
