//! Tier 2: the admin port hammered (64 clients fetching `/dashboard.json` back to back, as
//! `wrk -c200` did in issue 28) must not hurt the data plane: an open-loop load through the
//! proxy keeps its p99 within 2x of the p99 without hammering, measured in the same test.
//!
//! Each piece runs on a thread of its own, as separate processes would: the backends, the
//! proxy (one current-thread runtime, as `tailguard proxy` runs by default), the open-loop
//! load (500 requests a second over 50 connections, latency from each request's scheduled
//! time) and the hammer. Quiet and hammered phases alternate, and the medians of their p99s
//! are compared, so a noisy neighbour on the machine weighs on both alike.
//!
//! Before the admin server paced its answers (refusals included), its thread answered 23,000
//! refusals a second and took a whole core of this 2-core machine: the hammered p99 was 1.5-2.3x
//! the quiet one, and the test failed in CI. Paced, the hammer gets at most the pace's answers
//! (checked), and the two p99s are alike.

// The integration tests' support: this binary uses a part of it.
#[allow(dead_code)]
#[path = "it/support/mod.rs"]
mod support;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{config, AsUpstream};
use tailguard_http::admin::Limits;
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::client::H1;
use tailguard_testsupport::TestServer;
use tokio::time::Instant;

const RATE: u32 = 500;
const CONNECTIONS: usize = 50;
const PHASE: Duration = Duration::from_secs(3);
const ROUNDS: usize = 3;
const HAMMERS: usize = 64;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A proxy on a thread of its own; stops when dropped.
struct ProxyThread {
    addr: SocketAddr,
    admin: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProxyThread {
    fn start(service: ServiceConfig) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime().block_on(async move {
                let proxy = tailguard_proxy::start(config(service)).await.unwrap();
                tx.send((proxy.addr(), proxy.admin_addr().unwrap()))
                    .unwrap();
                let _ = stopped.await;
                proxy.shutdown().await;
            })
        });
        let (addr, admin) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Self {
            addr,
            admin,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ProxyThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `RATE` requests a second for `PHASE` through `addr`; each request's latency from the time
/// it was due (so a stalled proxy's queue counts), sorted.
fn open_loop(addr: SocketAddr) -> Vec<Duration> {
    runtime().block_on(async move {
        let interval = Duration::from_secs(1) / RATE;
        let total = (PHASE.as_secs_f64() * f64::from(RATE)) as usize;
        let start = Instant::now() + Duration::from_millis(50);
        let workers: Vec<_> = (0..CONNECTIONS)
            .map(|w| {
                tokio::spawn(async move {
                    let mut c = H1::connect(addr).await;
                    let mut out = Vec::new();
                    for i in (w..total).step_by(CONNECTIONS) {
                        let due = start + interval * i as u32;
                        tokio::time::sleep_until(due).await;
                        assert_eq!(c.get("/").await.0, 200);
                        out.push(due.elapsed());
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.await.unwrap());
        }
        all.sort();
        all
    })
}

fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `HAMMERS` clients asking for `/dashboard.json` back to back (reconnecting when refused)
/// until stopped; counts answers by status class.
struct Hammer {
    stop: Arc<AtomicBool>,
    started: std::time::Instant,
    thread: std::thread::JoinHandle<[u64; 3]>,
}

impl Hammer {
    fn start(admin: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            runtime().block_on(async move {
                let counts: Arc<[AtomicU64; 3]> = Arc::default();
                let clients: Vec<_> = (0..HAMMERS)
                    .map(|_| tokio::spawn(hammer(admin, Arc::clone(&flag), Arc::clone(&counts))))
                    .collect();
                for c in clients {
                    c.await.unwrap();
                }
                [0, 1, 2].map(|i| counts[i].load(Ordering::Relaxed))
            })
        });
        #[allow(clippy::disallowed_methods, reason = "a test's wall clock")]
        let started = std::time::Instant::now();
        Self {
            stop,
            started,
            thread,
        }
    }

    /// Stops it: how many answers were 200, 429 and 503, and how long it hammered.
    fn stop(self) -> ([u64; 3], Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let counts = self.thread.join().unwrap();
        (counts, self.started.elapsed())
    }
}

async fn hammer(admin: SocketAddr, stop: Arc<AtomicBool>, counts: Arc<[AtomicU64; 3]>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(Ok(stream)) = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(admin),
        )
        .await
        else {
            continue;
        };
        let Ok((mut send, conn)) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
        else {
            continue;
        };
        tokio::spawn(conn);
        while !stop.load(Ordering::Relaxed) {
            let req = hyper::Request::get("/dashboard.json")
                .header("host", "admin")
                .body(Empty::<Bytes>::new())
                .unwrap();
            let asked = tokio::time::timeout(Duration::from_secs(10), async {
                let resp = send.send_request(req).await.ok()?;
                let status = resp.status().as_u16();
                resp.into_body().collect().await.ok()?;
                Some(status)
            });
            let slot = match asked.await {
                Ok(Some(200)) => 0,
                Ok(Some(429)) => 1,
                Ok(Some(_)) => 2,
                _ => break,
            };
            counts[slot].fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
#[ignore = "tier 2: wall-clock latency percentiles under load, on a real clock and real sockets"]
fn a_hammered_admin_port_keeps_the_data_plane_p99_within_2x() {
    let backends: Vec<TestServer> = (0..3).map(|_| TestServer::builder().spawn()).collect();
    let upstreams = backends.iter().map(|b| b.upstream()).collect();
    let proxy = ProxyThread::start(ServiceConfig::new("web", upstreams));
    open_loop(proxy.addr); // connections, pools and the dashboard's history warm up
    let (mut quiet, mut hammered) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let q = open_loop(proxy.addr);
        let hammer = Hammer::start(proxy.admin);
        let h = open_loop(proxy.addr);
        let ([ok, limited, refused], hammered_for) = hammer.stop();
        eprintln!(
            "round {round}: quiet p50 {:?} p99 {:?}; hammered p50 {:?} p99 {:?}; \
             admin answers: {ok} x 200, {limited} x 429, {refused} x 503",
            q[q.len() / 2],
            p99(&q),
            h[h.len() / 2],
            p99(&h)
        );
        assert!(ok > 0, "the hammer got pages");
        // Every answer, refusals included, took a turn of the admin server's pace: the flood
        // cost the admin thread a bounded share of a core (it took a whole one unpaced).
        let pace = Limits::default();
        let most = f64::from(pace.answers_burst)
            + f64::from(pace.answers_per_sec) * hammered_for.as_secs_f64();
        let answers = (ok + limited + refused) as f64;
        assert!(answers <= most, "{answers} answers in {hammered_for:?}");
        quiet.push(p99(&q));
        hammered.push(p99(&h));
    }
    let (q, h) = (median(quiet), median(hammered));
    eprintln!("median p99: quiet {q:?}, hammered {h:?}");
    assert!(
        h <= q * 2,
        "hammered p99 {h:?} is more than twice the quiet {q:?}"
    );
}
