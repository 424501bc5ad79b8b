//! `tailguard load` ends when it says it will and prints no figure it did not measure, whatever
//! the server does: one that accepts connections and never answers, one that is not there, and
//! a user who presses Ctrl-C (SIGINT) at any moment. Servers on 127.0.0.1.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use tailguard_testsupport::process::{drain, lines, output_within, wait_or_kill};
use tailguard_testsupport::{Deadline, TestServer};

/// A server that accepts every connection, reads nothing and never answers; stops (closing
/// every connection) when dropped.
struct BlackHole {
    addr: SocketAddr,
    accepted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BlackHole {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (accepted, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (count, stopped) = (accepted.clone(), stop.clone());
        let thread = thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((s, _)) => {
                        held.push(s);
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    // Non-blocking accept: a short real wait between polls of a real socket.
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        BlackHole {
            addr,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn temp_json(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tg-bounds-{tag}-{}.json", std::process::id()))
}

/// Runs tailguard to its end (killed after 60 s: a hang fails the test); exit code, stdout,
/// stderr and the wall time it took.
#[allow(clippy::disallowed_methods)] // How long a real process ran, on the wall clock.
fn tailguard(args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailguard"));
    cmd.args(args);
    let (status, out, err) = output_within(cmd, Duration::from_secs(60));
    let status = status.unwrap_or_else(|| panic!("{args:?} still ran after 60 s: {err}"));
    (status.code(), out, err, started.elapsed())
}

/// Ctrl-C, as a terminal sends it.
fn sigint(child: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    let v = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let _ = std::fs::remove_file(path);
    v
}

/// The issue's case: 10 connections to a server that never answers, 50 req/s for 2 s, a 1 s
/// timeout. Before, every due request waited its turn for a connection and then its own
/// timeout (the same command with `-d 5s --timeout 2s` took 50 s). Now the run ends by the
/// duration plus the timeout, and each of the 100 due requests is accounted for: a timeout, or
/// `no-connection` (never sent: no connection was free within the timeout).
#[test]
fn a_server_that_never_answers_cannot_stretch_the_run() {
    let hole = BlackHole::start();
    let json = temp_json("stall");
    let (code, out, err, took) = tailguard(&[
        "load",
        "-r",
        "50",
        "-c",
        "10",
        "-d",
        "2s",
        "-i",
        "1s",
        "--timeout",
        "1s",
        "--no-preflight",
        "--json",
        json.to_str().unwrap(),
        &hole.url(),
    ]);
    assert_eq!(code, Some(3), "every request failed\n{out}\n{err}");
    let s = read_json(&json);
    let duration = s["duration_s"].as_f64().unwrap();
    assert!(duration <= 3.2, "ran {duration} s, past 2 s + 1 s\n{out}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(s["requests"], 100, "{out}");
    assert_eq!(s["failed"], 100);
    let errors = &s["errors"];
    let timeouts = errors["timeout"].as_u64().unwrap();
    let unsent = errors["no-connection"].as_u64().unwrap();
    assert_eq!(timeouts + unsent, 100, "{errors}");
    // 10 connections, each holding one request for a 1 s timeout in a 3 s run.
    assert!((10..=30).contains(&timeouts), "{errors}");
    assert_eq!(s["unsent"], 0);
    assert_eq!(s["interrupted"], false);
    assert_eq!(s["planned_duration_s"], 2.0);
    // Every due request waited at least the timeout: the latency says so (within the
    // histogram's 3 significant digits: a 1.000 s wait can read back as 999,936 µs).
    assert!(
        s["latency_us"]["min"].as_u64().unwrap() >= 999_000,
        "{}",
        s["latency_us"]
    );
    // The achieved rate counts what was sent.
    let achieved = s["achieved_rate"].as_f64().unwrap();
    assert!(achieved < 20.0, "{achieved}");
    assert!(out.contains("no-connection="), "{out}");
    // Intervals with due requests and no answer are gaps: never marked faster.
    for line in out.lines().filter(|l| l.starts_with("20")) {
        let after = line.rsplit(']').next().unwrap();
        let change = after.split_whitespace().nth(1).unwrap_or("");
        assert!(
            !change.starts_with('-'),
            "a gap marked faster: {line}\n{out}"
        );
    }
}

/// Ctrl-C while the pre-flight request waits on a server that never answers: the run ends at
/// once, says nothing was sent, and exits 130. Before, the handler came after the pre-flight,
/// so SIGINT was ignored until its timeout.
#[test]
#[allow(clippy::disallowed_methods)] // How long a real process took to end, on the wall clock.
fn sigint_during_the_preflight_ends_the_run_at_once() {
    let hole = BlackHole::start();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args([
            "load",
            "-r",
            "10",
            "-d",
            "5s",
            "--timeout",
            "30s",
            &hole.url(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tailguard");
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    // The pre-flight request's connection is in: the pre-flight is under way.
    let deadline = Deadline::after(Duration::from_secs(10));
    while hole.accepted.load(Ordering::SeqCst) == 0 {
        assert!(!deadline.passed(), "no pre-flight connection");
        thread::sleep(Duration::from_millis(10));
    }
    let sent = Instant::now();
    sigint(&child);
    let status = wait_or_kill(&mut child, Duration::from_secs(20)).expect("tailguard ends");
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(status.code(), Some(130), "{out}\n{err}");
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    assert!(
        err.contains("interrupted before the run began: nothing was sent"),
        "{err}"
    );
}

/// Ctrl-C in the middle of a run: the report and the JSON say the run was interrupted, and
/// what it was meant to be.
#[test]
fn an_interrupted_run_says_so_in_its_report_and_json() {
    let server = TestServer::builder().spawn();
    let json = temp_json("interrupted");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["load", "-r", "100", "-d", "60s", "-i", "1s", "--json"])
        .arg(&json)
        .arg(server.url("/"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tailguard");
    let stdout = lines(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    // The first interval line: the run is sending.
    let mut seen = Vec::new();
    loop {
        let line = stdout
            .recv_timeout(Duration::from_secs(20))
            .expect("an interval line");
        let interval = line.starts_with("20");
        seen.push(line);
        if interval {
            break;
        }
    }
    sigint(&child);
    let status = wait_or_kill(&mut child, Duration::from_secs(20)).expect("tailguard ends");
    let rest: Vec<String> = stdout.iter().collect();
    let text = seen
        .iter()
        .chain(&rest)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(status.code(), Some(130), "{text}\n{}", err.join().unwrap());
    assert!(text.contains("# interrupted after"), "{text}");
    assert!(text.contains("of a planned 60s"), "{text}");
    let s = read_json(&json);
    assert_eq!(s["interrupted"], true);
    assert_eq!(s["planned_duration_s"], 60.0);
    assert!(s["duration_s"].as_f64().unwrap() < 30.0);
    // One final report, not two.
    assert_eq!(text.matches("# rate: target").count(), 1, "{text}");
}

/// Every request failed before an answer (nothing listens): no latency was measured, so the
/// table shows `-`, the JSON `null`, and a latency objective is missed for want of data.
#[test]
fn no_figure_and_no_met_objective_from_no_data() {
    let closed_port = tailguard_testsupport::ClosedPort::new();
    let closed = closed_port.addr();
    let json = temp_json("nodata");
    let (code, out, err, _) = tailguard(&[
        "load",
        "-n",
        "5",
        "-q",
        "--slo",
        "p99<=5ms,success>=99%",
        "--no-preflight",
        "--json",
        json.to_str().unwrap(),
        &format!("http://{closed}/"),
    ]);
    assert_eq!(code, Some(3), "{out}\n{err}");
    assert!(
        out.contains("# SLO p99<=5ms: MISSED (actual no data)"),
        "{out}"
    );
    assert!(
        out.contains("# SLO success>=99%: MISSED (actual 0.000%)"),
        "{out}"
    );
    assert!(out.contains("     p99          -            -"), "{out}");
    assert!(out.contains("     max          -            -"), "{out}");
    let s = read_json(&json);
    assert_eq!(s["requests"], 5);
    assert!(s["latency_us"].is_null(), "{}", s["latency_us"]);
    assert!(s["service_time_us"].is_null());
    assert_eq!(s["success_rate"], 0.0);
}

/// `report` of saved load runs tells what the runs were: their real start, load model, no
/// deadline, a title naming the target, and the change between two runs.
#[test]
fn reports_of_load_runs_tell_their_real_metadata_and_the_change() {
    let server = TestServer::builder().spawn();
    let url = server.url("/");
    let dir = std::env::temp_dir().join(format!("tg-bounds-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b, html) = (dir.join("a.json"), dir.join("b.json"), dir.join("r.html"));
    for path in [&a, &b] {
        let (code, out, err, _) = tailguard(&[
            "load",
            "-r",
            "200",
            "-d",
            "2s",
            "-i",
            "500ms",
            "-q",
            "--json",
            path.to_str().unwrap(),
            &url,
        ]);
        assert_eq!(code, Some(0), "{out}\n{err}");
    }
    let (code, out, err, _) = tailguard(&[
        "report",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.starts_with("# tailguard report: 2 runs side by side"),
        "{out}"
    );
    assert!(out.contains("# note: change b vs a: p50 "), "{out}");
    assert!(
        out.contains("run-to-run noise") || out.contains("within the noise"),
        "{out}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let model = "open loop, constant arrivals at 200 req/s, concurrency 10, 2s";
    assert!(page.contains(model), "{page}");
    assert!(page.contains("<dt>deadline</dt><dd>none</dd>"));
    assert!(!page.contains("1970-01-01"));
    assert!(!page.contains("within deadline"));
    assert!(!page.contains("tailguard bench: load"));
    assert!(page.contains("<title>tailguard report: 2 runs side by side</title>"));
    // One run alone: its own title, naming the target.
    let (_, out, _, _) = tailguard(&["report", a.to_str().unwrap()]);
    assert!(
        out.starts_with(&format!("# tailguard load: {url}: a saved")),
        "{out}"
    );
    // `load --html` writes the same page directly.
    let direct = dir.join("direct.html");
    let (code, out, err, _) = tailguard(&[
        "load",
        "-r",
        "100",
        "-n",
        "50",
        "-q",
        "--html",
        direct.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let page = std::fs::read_to_string(&direct).unwrap();
    assert!(
        page.contains(&format!("<title>tailguard load: {url}</title>")),
        "{page}"
    );
    assert!(page.contains("open loop, constant arrivals at 100 req/s, concurrency 10, 50 requests"));
    // An unwritable path is bad input, found before anything is sent.
    let (code, _, err, _) = tailguard(&["load", "-n", "5", "--html", "/nonexistent/x.html", &url]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot write /nonexistent/x.html"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--sweep` finds the knee of a backend whose capacity is known: 8 workers at 10 ms each
/// serve 800 req/s; with `--slo p99<=50ms` the knee must be found within 10% of that. Below
/// it every request meets the objective; past it the line grows for the whole step, so the
/// p99 passes 50 ms a little above 800 req/s. A measurement of real capacity on the wall
/// clock, so tier 2: on two busy cores the knee moves (687 req/s under `stress --cpu 2`). The
/// knee's arithmetic is tier 1 (`crates/load/src/sweep/tests.rs`).
#[test]
#[ignore = "tier 2: measures a real backend's capacity on the wall clock"]
fn a_sweep_finds_the_knee_of_a_known_capacity() {
    let dir = std::env::temp_dir().join(format!("tg-bounds-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fleet = dir.join("fleet.yaml");
    std::fs::write(
        &fleet,
        "backends: [{latency: 10ms, capacity: {workers: 8}}]\n",
    )
    .unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args([
            "serve",
            "--no-control",
            "--listen",
            "127.0.0.1:0",
            "--fleet",
        ])
        .arg(&fleet)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run tailguard serve");
    let lines = lines(serve.stdout.take().unwrap());
    let url = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .expect("serve prints its backend");
        if let Some(at) = line.find("http://") {
            break line[at..].split_whitespace().next().unwrap().to_owned() + "/";
        }
    };
    let (json, html) = (dir.join("sweep.json"), dir.join("sweep.html"));
    let (code, out, err, _) = tailguard(&[
        "load",
        "--sweep",
        "400..1200",
        "--sweep-steps",
        "9",
        "-d",
        "2s",
        "-c",
        "100",
        "--slo",
        "p99<=50ms",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        &url,
    ]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(code, Some(0), "{out}\n{err}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(s["knee"]["knee"], "between", "{out}");
    let knee = s["knee"]["met"].as_f64().unwrap();
    assert!((720.0..=880.0).contains(&knee), "knee {knee}\n{out}");
    assert!(
        out.contains(&format!(
            "# knee: {knee} req/s is the highest rate that met p99<=50ms"
        )),
        "{out}"
    );
    // The climb stopped at the first miss: 1000 req/s and above were never run.
    let rates: Vec<f64> = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["rate"].as_f64().unwrap())
        .collect();
    assert!(rates.iter().all(|&r| r < 1000.0), "{rates:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Latency by offered rate") && page.contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A sweep without an objective has no knee to find: bad input, nothing sent.
#[test]
fn a_sweep_needs_an_objective() {
    let (code, _, err, _) = tailguard(&["load", "--sweep", "10..100", "http://127.0.0.1:9/"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--sweep needs --slo"), "{err}");
    let (code, _, err, _) = tailguard(&[
        "load",
        "--sweep",
        "100..10",
        "--slo",
        "p99<=1s",
        "http://127.0.0.1:9/",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("FROM must be below TO"), "{err}");
}
