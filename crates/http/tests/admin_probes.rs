//! Tier 2: the admin server answers `/ready` while clients hold every connection it has
//! (issue 43, item 2).
//!
//! The attack of the issue: clients that each send `GET /ready HTTP/1.1\r\nHost: x\r\n`, then
//! one byte every 0.5 s (the head never ends), and reconnect whatever is closed; 33 of them
//! (one more than the admin server's connections), then 1,000. Before the probe lane, every
//! probe got `503 admin: 32 connections open already`. And a flood of whole requests (64
//! clients asking for an expensive page back to back, as `admin_hammer.rs` in the proxy does),
//! which must still cost no more answers than the pace gives. The probe is a kubelet's: a fresh
//! connection every 100 ms, `GET /ready` with `Connection: close`, a 1 s timeout; every one
//! must get 200.
//!
//! Each phase lasts `TAILGUARD_PROBE_PHASE_SECS` seconds (10 by default; the issue asks for
//! 60). The tests print the probes sent, their latencies and the CPU the admin thread
//! (`tg-admin`) took, read from `/proc/self/task/<tid>/stat` for the thread's id (the two
//! tests run alongside, each with threads of the same names).

use bytes::Bytes;
use http_body_util::Full;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailguard_http::admin::Limits;
use tailguard_http::{admin, fds, tcp, Nagle};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

const PROBE_EVERY: Duration = Duration::from_millis(100);
/// kubelet's default `timeoutSeconds`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const SLOW_BYTE_EVERY: Duration = Duration::from_millis(500);
const PROBE: &[u8] = b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
const SLOW_HEAD: &[u8] = b"GET /ready HTTP/1.1\r\nHost: x\r\n";
const PAGE: &[u8] = b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n";

/// A probe's status (or what went wrong) and how long it took.
type Probe = (Result<u16, String>, Duration);

fn phase() -> Duration {
    let secs = std::env::var("TAILGUARD_PROBE_PHASE_SECS").ok();
    Duration::from_secs(secs.and_then(|s| s.parse().ok()).unwrap_or(10))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What the attacking clients do.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Send the start of a head, then a byte every [`SLOW_BYTE_EVERY`].
    Slow,
    /// Ask for an expensive page back to back on a keep-alive connection.
    Hammer,
}

/// Attacking clients on a thread of their own (as another process would be), until stopped;
/// each reconnects as soon as its connection is closed.
struct Attack {
    stop: Arc<AtomicBool>,
    counts: Arc<[AtomicU64; 2]>,
    thread: std::thread::JoinHandle<()>,
    /// The attacking thread's id, for its CPU time.
    tid: u32,
}

impl Attack {
    fn start(addr: SocketAddr, kind: Kind, clients: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<[AtomicU64; 2]> = Arc::default();
        let (s, c) = (Arc::clone(&stop), Arc::clone(&counts));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("attackers".into())
            .spawn(move || {
                tid_tx.send(tid()).unwrap();
                runtime().block_on(async move {
                    let all: Vec<_> = (0..clients)
                        .map(|_| tokio::spawn(client(kind, addr, Arc::clone(&s), Arc::clone(&c))))
                        .collect();
                    for one in all {
                        one.await.unwrap();
                    }
                })
            })
            .unwrap();
        Self {
            stop,
            counts,
            thread,
            tid: tid_rx.recv().unwrap(),
        }
    }

    /// Stops the clients: how many connections they opened and answers they read.
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        let [connects, answers] = &*self.counts;
        (
            connects.load(Ordering::Relaxed),
            answers.load(Ordering::Relaxed),
        )
    }
}

/// One attacking client: connects, attacks until the server closes the connection, and
/// reconnects at once. Counts connections and answers.
async fn client(kind: Kind, addr: SocketAddr, stop: Arc<AtomicBool>, counts: Arc<[AtomicU64; 2]>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(s) = tcp::connect(addr, Nagle::Off).await else {
            // Out of ports or descriptors for a moment: not a spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        counts[0].fetch_add(1, Ordering::Relaxed);
        match kind {
            Kind::Slow => trickle(s, &stop).await,
            Kind::Hammer => hammer(s, &stop, &counts[1]).await,
        }
    }
}

/// Sends the start of a head and then a byte every [`SLOW_BYTE_EVERY`], until closed.
async fn trickle(mut s: TcpStream, stop: &AtomicBool) {
    if s.write_all(SLOW_HEAD).await.is_err() {
        return;
    }
    let mut tick = tokio::time::interval(SLOW_BYTE_EVERY);
    tick.tick().await;
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Relaxed) {
        tokio::select! {
            r = s.read(&mut buf) => if !matches!(r, Ok(n) if n > 0) { return },
            _ = tick.tick() => if s.write_all(b"x").await.is_err() { return },
        }
    }
}

/// Asks for the page and reads the answer, back to back, until closed.
async fn hammer(s: TcpStream, stop: &AtomicBool, answers: &AtomicU64) {
    let mut s = BufReader::new(s);
    while !stop.load(Ordering::Relaxed) {
        let asked = async {
            s.get_mut().write_all(PAGE).await?;
            read_answer(&mut s).await
        };
        match tokio::time::timeout(Duration::from_secs(10), asked).await {
            Ok(Ok(_)) => answers.fetch_add(1, Ordering::Relaxed),
            _ => return,
        };
    }
}

/// Reads one answer with a `content-length`: its status.
async fn read_answer(s: &mut BufReader<TcpStream>) -> std::io::Result<u16> {
    let mut line = String::new();
    let (mut status, mut length) = (0, 0);
    loop {
        line.clear();
        if s.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            break;
        }
        if status == 0 {
            status = line
                .split(' ')
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
        } else if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    s.read_exact(&mut body).await?;
    Ok(status)
}

/// One probe as kubelet sends it: its status (or what went wrong) and how long it took.
async fn probe(addr: SocketAddr) -> Probe {
    let started = Instant::now();
    let asked = tokio::time::timeout(PROBE_TIMEOUT, async {
        let mut s = tcp::connect(addr, Nagle::Off)
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(PROBE).await.map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&answer);
        let status = text.split(' ').nth(1).and_then(|s| s.parse().ok());
        status.ok_or_else(|| format!("not an HTTP answer: {text:?}"))
    })
    .await;
    let status = asked.unwrap_or_else(|_| Err("timed out".into()));
    (status, started.elapsed())
}

/// Probes every [`PROBE_EVERY`] for `length` from a thread of its own (as kubelet would, from
/// another process): each probe's outcome and latency, and the thread's CPU time.
fn probes(addr: SocketAddr, length: Duration) -> (Vec<Probe>, Option<Duration>) {
    let thread = std::thread::Builder::new().name("prober".into());
    let prober = thread.spawn(move || {
        let out = runtime().block_on(async move {
            let end = Instant::now() + length;
            let mut tick = tokio::time::interval(PROBE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut out = Vec::new();
            while Instant::now() < end {
                tick.tick().await;
                out.push(probe(addr).await);
            }
            out
        });
        let stat = std::fs::read_to_string("/proc/thread-self/stat");
        (out, stat.ok().map(|stat| cpu(&stat)))
    });
    prober.unwrap().join().unwrap()
}

/// The CPU time in a thread's `stat` line: utime and stime (fields 14 and 15, after the
/// name in parentheses), in the kernel's USER_HZ of 100 a second.
fn cpu(stat: &str) -> Duration {
    let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The id the kernel gives the calling thread, from `/proc/thread-self` (a link to
/// `<pid>/task/<tid>`).
fn tid() -> u32 {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    let name = link.file_name().unwrap().to_str().unwrap();
    name.parse().unwrap()
}

/// The CPU time of this process's thread `tid`, from `/proc/self/task/<tid>/stat`, or `None`
/// when it cannot be read. By id, not by name: the other test of this file runs alongside
/// with threads of the same names, which come and go.
fn thread_cpu(tid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    Some(cpu(&stat))
}

/// Waits (10 s at most) until a request that is not a health check is refused for the
/// connections: the slow clients hold every one.
async fn until_connections_are_full(addr: SocketAddr) {
    let full = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let Ok(mut s) = tcp::connect(addr, Nagle::Off).await else {
                continue;
            };
            let _ = s
                .write_all(b"GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await;
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer).await;
            if String::from_utf8_lossy(&answer).contains("connections open already") {
                return;
            }
        }
    });
    assert!(
        full.await.is_ok(),
        "the slow clients never filled the slots"
    );
}

/// What one phase saw.
struct Phase {
    /// The failed probes' outcomes.
    failed: Vec<String>,
    /// Answers the attacking clients read, and in how long.
    answers: (u64, Duration),
}

/// One phase: `clients` attacking clients of `kind`, and the probes.
fn run_phase(server: &Server, kind: Kind, clients: usize, length: Duration) -> Phase {
    let addr = server.admin.addr();
    let started = Instant::now();
    let attack = Attack::start(addr, kind, clients);
    runtime().block_on(until_connections_are_full(addr));
    let (admin, attackers) = (thread_cpu(server.tid), thread_cpu(attack.tid));
    let wall = Instant::now();
    let (results, prober) = probes(addr, length);
    let wall = wall.elapsed().as_secs_f64();
    let share = |d: Duration| d.as_secs_f64() / wall * 100.0;
    // A share this process could not read is shown as unknown: it is reported, not asserted.
    let since = |tid: u32, before: Option<Duration>| {
        let used = thread_cpu(tid)?.checked_sub(before?)?;
        Some(format!("{:.1}%", share(used)))
    };
    let unknown = || "an unknown share".to_string();
    let admin = since(server.tid, admin).unwrap_or_else(unknown);
    let attackers = since(attack.tid, attackers).unwrap_or_else(unknown);
    let (connects, answers) = attack.stop();
    let attacked = started.elapsed();
    let mut latencies: Vec<Duration> = results.iter().map(|r| r.1).collect();
    latencies.sort();
    let ok = results.iter().filter(|r| r.0 == Ok(200)).count();
    eprintln!(
        "{clients} clients ({kind:?}), {wall:.1} s: {} probes, {ok} x 200; latency p50 {:?}, \
         p99 {:?}, max {:?}; the admin thread {admin} of a core, the attackers' \
         {attackers} ({connects} connections, {:.0} a second; {answers} answers in \
         {attacked:.1?}), the prober's {}",
        results.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 99 / 100],
        latencies[latencies.len() - 1],
        connects as f64 / wall,
        prober.map_or_else(unknown, |p| format!("{:.1}%", share(p))),
    );
    let failed = results
        .into_iter()
        .filter_map(|(r, took)| (r != Ok(200)).then(|| format!("{r:?} after {took:?}")))
        .collect();
    Phase {
        failed,
        answers: (answers, attacked),
    }
}

/// An admin server and the id of its thread (`tg-admin`), for its CPU time.
struct Server {
    admin: admin::AdminServer,
    tid: u32,
}

/// An admin server (default limits, `/page` expensive) whose handler answers `/ready`, a
/// 16 KiB `/page`, its thread's id at `/tid`, and 404 otherwise; on a runtime that outlives
/// the test.
fn server(rt: &tokio::runtime::Runtime) -> Server {
    let listener = rt
        .block_on(tcp::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let limits = Limits::default().expensive(&["/page"]);
    let _guard = rt.enter();
    let admin = admin::serve_with(listener, limits, |req: hyper::Request<_>| async move {
        let (status, body) = match req.uri().path() {
            "/ready" => (200, Bytes::from_static(b"ready\n")),
            "/page" => (200, Bytes::from(vec![b'x'; 16 * 1024])),
            // The handler runs on the admin server's thread.
            "/tid" => (200, Bytes::from(tid().to_string())),
            _ => (404, Bytes::from_static(b"no\n")),
        };
        let mut resp = hyper::Response::new(Full::new(body));
        *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        resp
    })
    .unwrap();
    let addr = admin.addr();
    let answer = rt.block_on(async move {
        let mut s = tcp::connect(addr, Nagle::Off).await.unwrap();
        s.write_all(b"GET /tid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        answer
    });
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    let tid = body.parse().unwrap();
    Server { admin, tid }
}

fn assert_every_probe_answered(failed: &[String]) {
    let shown: Vec<_> = failed.iter().take(20).collect();
    assert!(
        failed.is_empty(),
        "{} probes failed: {shown:#?}",
        failed.len()
    );
}

#[test]
#[ignore = "tier 2: wall-clock probes against 1,000 reconnecting clients for 20 s or more"]
fn ready_answers_every_probe_while_slow_clients_hold_every_connection() {
    let limit = fds::raise().unwrap();
    assert!(
        limit.soft >= 4096,
        "1,000 clients need descriptors: {limit:?}"
    );
    let rt = runtime();
    let server = server(&rt);
    let mut failed = Vec::new();
    for clients in [33, 1000] {
        let phase = run_phase(&server, Kind::Slow, clients, phase());
        failed.extend(
            phase
                .failed
                .into_iter()
                .map(|f| format!("{clients} clients: {f}")),
        );
    }
    drop(server);
    assert_every_probe_answered(&failed);
}

/// A flood of whole requests keeps the cost the pace allows: the attackers get no more
/// answers than it gives (the probes' own come from the health allowance), and the probes
/// still get in, past the refusals waiting for their turns.
#[test]
#[ignore = "tier 2: wall-clock probes against 64 clients hammering a page for 10 s or more"]
fn ready_answers_every_probe_while_64_clients_hammer_a_page() {
    let rt = runtime();
    let server = server(&rt);
    let phase = run_phase(&server, Kind::Hammer, 64, phase());
    drop(server);
    let (answers, attacked) = phase.answers;
    let pace = Limits::default();
    let most =
        f64::from(pace.answers_burst) + f64::from(pace.answers_per_sec) * attacked.as_secs_f64();
    assert!(answers as f64 <= most, "{answers} answers in {attacked:?}");
    assert_every_probe_answered(&phase.failed);
}
