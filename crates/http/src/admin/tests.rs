use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

mod lane;

/// Every wait in these tests ends within this.
const WAIT: Duration = Duration::from_secs(10);

async fn server_with(limits: Limits) -> AdminServer {
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    serve_with(listener, limits, |req: Request<Incoming>| async move {
        let path = req.uri().path().to_owned();
        Response::new(Full::new(Bytes::from(path)))
    })
    .unwrap()
}

async fn ok_server() -> AdminServer {
    server_with(Limits::default()).await
}

/// A keep-alive HTTP/1.1 connection that asks one thing at a time.
struct Conn(BufReader<TcpStream>);

impl Conn {
    async fn open(addr: SocketAddr) -> Self {
        Self(BufReader::new(
            tcp::connect(addr, Nagle::Off).await.unwrap(),
        ))
    }

    /// Sends `GET path` and reads the answer: its status and body.
    async fn ask(&mut self, path: &str) -> (u16, String) {
        let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        self.0.get_mut().write_all(req.as_bytes()).await.unwrap();
        tokio::time::timeout(WAIT, self.answer())
            .await
            .expect("answered in time")
    }

    async fn answer(&mut self) -> (u16, String) {
        let mut line = String::new();
        self.0.read_line(&mut line).await.unwrap();
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok());
        let status = status.unwrap_or_else(|| panic!("not an HTTP answer: {line:?}"));
        let mut length = 0;
        loop {
            line.clear();
            self.0.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        self.0.read_exact(&mut body).await.unwrap();
        (status, String::from_utf8(body).unwrap())
    }
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    Conn::open(addr).await.ask(path).await
}

#[tokio::test]
async fn serves_the_handler_on_a_thread_of_its_own() {
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let server = serve(listener, |_req| async {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        Response::new(Full::new(Bytes::from(name)))
    })
    .unwrap();
    assert_eq!(get(server.addr(), "/").await, (200, "tg-admin".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let server = ok_server().await;
    let addr = server.addr();
    assert_eq!(get(addr, "/metrics").await, (200, "/metrics".into()));
    server.shutdown().await;
    assert!(tcp::connect(addr, Nagle::Off).await.is_err());
}

#[tokio::test]
async fn drop_stops_accepting_at_once() {
    let server = ok_server().await;
    let addr = server.addr();
    drop(server);
    assert!(tcp::connect(addr, Nagle::Off).await.is_err());
}

/// A client that connects and never finishes its headers is cut off at the header read
/// timeout (a short one: the server runs on its own runtime, on the real clock).
#[tokio::test]
async fn a_silent_client_is_cut_off() {
    let limits = Limits {
        header_read_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let server = server_with(limits).await;
    let mut s = tcp::connect(server.addr(), Nagle::Off).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(WAIT, s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was closed by the server");
    server.shutdown().await;
}

#[tokio::test]
async fn the_connection_past_the_limit_is_refused_with_503() {
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let server = server_with(limits).await;
    let mut open = vec![
        Conn::open(server.addr()).await,
        Conn::open(server.addr()).await,
    ];
    for c in &mut open {
        assert_eq!(c.ask("/").await.0, 200);
    }
    let (status, body) = get(server.addr(), "/").await;
    assert_eq!(status, 503);
    assert_eq!(
        body,
        "admin: 2 connections open already (the limit); retry later\n"
    );
    // A place frees when a connection closes (once the server has seen it close).
    drop(open.pop());
    let mut answers = Vec::new();
    let freed = tokio::time::timeout(WAIT, async {
        loop {
            let (status, _) = get(server.addr(), "/").await;
            answers.push(status);
            if status == 200 {
                return;
            }
        }
    })
    .await;
    assert!(freed.is_ok(), "{answers:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_request_past_the_in_flight_limit_is_refused_with_503() {
    let entered = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let limits = Limits {
        max_in_flight: 2,
        ..Limits::default()
    };
    let (e, g) = (Arc::clone(&entered), Arc::clone(&gate));
    let server = serve_with(listener, limits, move |_req| {
        let (e, g) = (Arc::clone(&e), Arc::clone(&g));
        async move {
            e.fetch_add(1, Ordering::SeqCst);
            let _ = g.acquire().await.unwrap();
            Response::new(Full::new(Bytes::from_static(b"slow")))
        }
    })
    .unwrap();
    let addr = server.addr();
    let slow: Vec<_> = (0..2)
        .map(|_| tokio::spawn(async move { get(addr, "/slow").await }))
        .collect();
    let both_in = tokio::time::timeout(WAIT, async {
        while entered.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
    });
    assert!(
        both_in.await.is_ok(),
        "the two slow requests reached the handler"
    );
    let (status, body) = get(addr, "/").await;
    assert_eq!(status, 503);
    assert_eq!(
        body,
        "admin: 2 requests in flight already (the limit); retry later\n"
    );
    assert_eq!(
        entered.load(Ordering::SeqCst),
        2,
        "the refused one never ran"
    );
    gate.add_permits(2);
    for s in slow {
        assert_eq!(s.await.unwrap(), (200, "slow".into()));
    }
    server.shutdown().await;
}

/// Every answer takes a turn of the pace, refusals included: a client asking in a tight
/// loop, or reconnecting after each 503, is slowed to the rate instead of keeping the admin
/// thread busy. Elapsed time is a lower bound (the pace's own).
#[tokio::test]
async fn answers_and_refusals_are_paced() {
    let limits = Limits {
        answers_per_sec: 100,
        answers_burst: 5,
        max_connections: 1,
        ..Limits::default()
    };
    let server = server_with(limits).await;
    let started = tokio::time::Instant::now();
    let mut c = Conn::open(server.addr()).await;
    for _ in 0..30 {
        assert_eq!(c.ask("/small").await.0, 200);
    }
    // 30 requests, 5 at once: 25 turns at 10 ms.
    let paced = started.elapsed();
    assert!(paced >= Duration::from_millis(250), "{paced:?}");
    for _ in 0..20 {
        let (status, body) = get(server.addr(), "/small").await;
        assert_eq!(status, 503, "{body}");
    }
    // 20 more connections, each refused in the probe lane after its turn. The bucket holds at
    // most its burst (5) and a part of a token, however slow the machine was between the two
    // loops: at least 14 turns of 10 ms. A lower bound only, so a busy machine cannot fail it.
    let refused = started.elapsed() - paced;
    assert!(refused >= Duration::from_millis(140), "{refused:?}");
    drop(c);
    server.shutdown().await;
}

/// A client that connects and says nothing is cut off at the header read timeout too, though
/// hyper's own timeout starts only once it knows the protocol; a request that takes longer
/// than that to answer is not.
#[tokio::test]
async fn a_client_that_says_nothing_is_cut_off() {
    let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let limits = Limits {
        header_read_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let server = serve_with(listener, limits, |_req| async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        Response::new(Full::new(Bytes::from_static(b"slow")))
    })
    .unwrap();
    let mut s = tcp::connect(server.addr(), Nagle::Off).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(WAIT, s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was closed by the server");
    assert_eq!(get(server.addr(), "/").await, (200, "slow".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn expensive_pages_past_the_rate_get_429_and_cheap_ones_do_not() {
    let limits = Limits {
        expensive_per_sec: 1,
        expensive_burst: 2,
        expensive_max_wait: Duration::ZERO,
        ..Limits::default()
    }
    .expensive(&["/big"]);
    let server = server_with(limits).await;
    let mut c = Conn::open(server.addr()).await;
    assert_eq!(c.ask("/big").await.0, 200);
    assert_eq!(c.ask("/big").await.0, 200);
    let (status, body) = c.ask("/big").await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        "admin: at most 1 a second of /big together; retry later\n"
    );
    for _ in 0..10 {
        assert_eq!(c.ask("/small").await.0, 200);
    }
    server.shutdown().await;
}

/// Past the rate, a request waits for its turn when it comes within the bound (a script
/// polling in a loop is paced, not failed); one more than the bound holds is refused at once.
#[tokio::test]
async fn expensive_pages_past_the_rate_wait_their_turn_within_the_bound() {
    let limits = Limits {
        expensive_per_sec: 20,
        expensive_burst: 1,
        expensive_max_wait: Duration::from_millis(200),
        ..Limits::default()
    }
    .expensive(&["/big"]);
    let server = server_with(limits.clone()).await;
    let addr = server.addr();
    let mut c = Conn::open(addr).await;
    let started = tokio::time::Instant::now();
    for _ in 0..5 {
        assert_eq!(c.ask("/big").await.0, 200);
    }
    // One at once, then one every 50 ms: the limiter's own pacing, a lower bound.
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    drop(c);
    server.shutdown().await;
    // At once, ten: one now, four waiting 50 to 200 ms, and the rest refused without waiting.
    let server = server_with(limits).await;
    let addr = server.addr();
    let asked: Vec<_> = (0..10)
        .map(|_| tokio::spawn(async move { get(addr, "/big").await.0 }))
        .collect();
    let mut statuses = Vec::new();
    for a in asked {
        statuses.push(a.await.unwrap());
    }
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    let limited = statuses.iter().filter(|&&s| s == 429).count();
    assert!((5..=6).contains(&ok) && ok + limited == 10, "{statuses:?}");
    server.shutdown().await;
}
