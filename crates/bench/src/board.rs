//! The live page of a bench or demo run: every arm side by side while it runs, from the same
//! per-second figures the proxy's dashboard keeps ([`tailguard_record::live`]).
//!
//! Each arm feeds its own [`Live`] from the load generator's records (latency from the
//! scheduled send, every request counted) and names its fleet's [`Tally`], so each backend's
//! share is what the backends themselves received: the same measure for client round robin and
//! for a proxy (whose retries then count too). Once a second [`Board::tick`] closes the second
//! of every running arm under one sample number, so `?since=` means the same moment for all.
//! Times are seconds since each arm started: arms that ran one after another still line up.
//!
//! The page (`/`) and its figures (`/live.json?since=N`) are served by the project's one admin
//! server, on 127.0.0.1 unless asked otherwise. A finished arm keeps its charts and shows the
//! whole run's figures; its seconds go into the saved report ([`ArmRun::seconds`]).

use crate::results::{ArmRun, SecondPoint};
use bytes::Bytes;
use http_body_util::Full;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tailguard_http::admin::{self, AdminServer};
use tailguard_record::live::{Board as Samples, EndpointCounts, EndpointWindow, Live, Window};
use tailguard_serve::Tally;
use tokio::time::Instant;

/// How often the figures close a second.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// The page, with the shared style and chart script inlined at start.
const PAGE: &str = include_str!("board.html");

/// The live figures of a run.
#[derive(Debug)]
pub(crate) struct Board {
    started: Instant,
    boot: u64,
    head: Mutex<Head>,
    arms: Mutex<Vec<Arc<Arm>>>,
    samples: Samples,
    finished: AtomicBool,
}

/// What the run is.
#[derive(Clone, Debug, Default, Serialize)]
struct Head {
    scenario: String,
    description: String,
    load: String,
    /// Arms planned, as `group/name`, so the page can show the ones still to come.
    planned: Vec<(String, String)>,
    /// True when the arms run at the same time.
    together: bool,
}

/// One arm's live figures.
#[derive(Debug)]
pub(crate) struct Arm {
    name: String,
    group: String,
    via: String,
    started: Instant,
    planned: Duration,
    live: Arc<Live>,
    state: Mutex<ArmState>,
}

#[derive(Debug)]
enum ArmState {
    Running {
        tally: Tally,
        /// Backend name -> latency as configured, for the table.
        specs: Vec<(String, String)>,
        seconds: Vec<SecondPoint>,
    },
    Done {
        elapsed: Duration,
        whole: Whole,
        last: Vec<Backend>,
    },
}

/// A finished arm's figures over the whole run.
#[derive(Clone, Debug, Serialize)]
struct Whole {
    requests: u64,
    rps: f64,
    success: f64,
    within_deadline: f64,
    p50_us: u64,
    p99_us: u64,
    p999_us: u64,
    max_us: u64,
}

/// One backend as the page shows it.
#[derive(Clone, Debug, Serialize)]
struct Backend {
    name: String,
    latency: String,
    requests: u64,
    failed: u64,
    window: Option<EndpointWindow>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Arm {
    /// A request of this arm ended after `latency`, good or not.
    pub(crate) fn record(&self, latency: Duration, good: bool) {
        self.live.record(latency, good);
    }
}

impl Board {
    pub(crate) fn new(scenario: &str, description: &str) -> Arc<Board> {
        let boot = std::process::id() as u64 ^ epoch_nanos();
        Arc::new(Board {
            started: Instant::now(),
            boot,
            head: Mutex::new(Head {
                scenario: scenario.to_owned(),
                description: description.to_owned(),
                ..Head::default()
            }),
            arms: Mutex::new(Vec::new()),
            samples: Samples::default(),
            finished: AtomicBool::new(false),
        })
    }

    /// The load in words and the arms to come (`(group, name)`), for the page's heading.
    pub(crate) fn plan(&self, load: &str, planned: Vec<(String, String)>, together: bool) {
        let mut head = lock(&self.head);
        head.load = load.to_owned();
        head.planned = planned;
        head.together = together;
    }

    /// An arm starts now over the fleet counted by `tally`, for `planned`.
    pub(crate) fn start(
        &self,
        (group, name, via): (&str, &str, &str),
        planned: Duration,
        tally: Tally,
        specs: Vec<(String, String)>,
    ) -> Arc<Arm> {
        let now = Instant::now();
        let arm = Arc::new(Arm {
            name: name.to_owned(),
            group: group.to_owned(),
            via: via.to_owned(),
            started: now,
            planned,
            live: Arc::new(Live::new(Duration::ZERO)),
            state: Mutex::new(ArmState::Running {
                tally,
                specs,
                seconds: Vec::new(),
            }),
        });
        lock(&self.arms).push(Arc::clone(&arm));
        arm
    }

    /// `arm` ended with the figures of `run`; returns its seconds for the report.
    pub(crate) fn finish(&self, arm: &Arm, run: &ArmRun) -> Vec<SecondPoint> {
        let mut state = lock(&arm.state);
        let ArmState::Running {
            tally,
            specs,
            seconds,
        } = &mut *state
        else {
            return Vec::new();
        };
        let seconds = std::mem::take(seconds);
        let last = backends(tally, specs, &arm.live.endpoint_windows());
        let l = &run.latency_us;
        *state = ArmState::Done {
            elapsed: arm.started.elapsed(),
            whole: Whole {
                requests: run.requests,
                rps: run.achieved_rate,
                success: run.success_rate,
                within_deadline: run.within_deadline_rate,
                p50_us: l.p50,
                p99_us: l.p99,
                p999_us: l.p999,
                max_us: l.max,
            },
            last,
        };
        seconds
    }

    /// The run is over: the page stops asking.
    pub(crate) fn close(&self) {
        self.finished.store(true, Ordering::Relaxed);
    }

    /// Closes the second that ends at `now` for every running arm.
    pub(crate) fn tick(&self, now: Instant) {
        let seq = self.samples.next_seq();
        let arms: Vec<Arc<Arm>> = lock(&self.arms).clone();
        for arm in arms {
            let mut state = lock(&arm.state);
            let ArmState::Running { tally, seconds, .. } = &mut *state else {
                continue;
            };
            let at = now.saturating_duration_since(arm.started);
            let served = tally.served();
            let counts: Vec<EndpointCounts> = served
                .iter()
                .map(|s| EndpointCounts {
                    addr: s.name.clone(),
                    attempts: s.requests,
                    failures: s.failed,
                })
                .collect();
            arm.live.tick(at, seq, &counts, 0);
            if let Some(sample) = arm.live.last_sample() {
                seconds.push(SecondPoint::from(&sample));
            }
        }
        self.samples.publish(seq);
    }

    /// `/live.json`: the run, then every arm with its samples after `since`.
    fn json(&self, since: u64) -> String {
        let upto = self.samples.published();
        let head = lock(&self.head).clone();
        let mut arms: Vec<Arc<Arm>> = lock(&self.arms).clone();
        // In the planned order (arms that run at once start in any order), unplanned ones last.
        let rank = |a: &Arm| {
            head.planned
                .iter()
                .position(|(g, n)| *g == a.group && *n == a.name)
                .unwrap_or(usize::MAX)
        };
        arms.sort_by_key(|a| rank(a));
        let views: Vec<ArmView> = arms
            .iter()
            .map(|arm| {
                let state = lock(&arm.state);
                let (running, elapsed, whole, list) = match &*state {
                    ArmState::Running { tally, specs, .. } => (
                        true,
                        arm.started.elapsed(),
                        None,
                        backends(tally, specs, &arm.live.endpoint_windows()),
                    ),
                    ArmState::Done {
                        elapsed,
                        whole,
                        last,
                        ..
                    } => (false, *elapsed, Some(whole.clone()), last.clone()),
                };
                ArmView {
                    group: arm.group.clone(),
                    name: arm.name.clone(),
                    via: arm.via.clone(),
                    state: if running { "running" } else { "done" },
                    elapsed_ms: millis(elapsed),
                    planned_ms: millis(arm.planned),
                    window: arm.live.window(),
                    whole,
                    backends: list,
                    history: arm.live.history(since, upto),
                }
            })
            .collect();
        let view = BoardView {
            boot: self.boot,
            at_ms: millis(self.started.elapsed()),
            tick_ms: millis(TICK),
            window_s: tailguard_record::live::WINDOW,
            history_len: tailguard_record::live::HISTORY,
            finished: self.finished.load(Ordering::Relaxed),
            head,
            arms: views,
        };
        serde_json::to_string(&view).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Serves the page on `listener` (call on the runtime that runs the ticker).
    pub(crate) fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<AdminServer> {
        let page: Arc<str> = tailguard_report::web::inline(PAGE).into();
        let board = Arc::downgrade(self);
        admin::serve(
            listener,
            move |req: hyper::Request<hyper::body::Incoming>| {
                let reply = route(&board, &page, req.uri());
                async move { reply }
            },
        )
    }
}

fn route(board: &Weak<Board>, page: &str, uri: &http::Uri) -> http::Response<Full<Bytes>> {
    let reply = |status: http::StatusCode, kind: &str, body: String| {
        http::Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, kind)
            .header(http::header::CACHE_CONTROL, "no-store")
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    let Some(board) = board.upgrade() else {
        return reply(
            http::StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "the run is over\n".into(),
        );
    };
    match uri.path() {
        "/" => reply(
            http::StatusCode::OK,
            "text/html; charset=utf-8",
            page.to_owned(),
        ),
        "/live.json" => match since(uri.query()) {
            Ok(since) => reply(http::StatusCode::OK, "application/json", board.json(since)),
            Err(why) => reply(http::StatusCode::BAD_REQUEST, "text/plain", why),
        },
        _ => reply(
            http::StatusCode::NOT_FOUND,
            "text/plain",
            "try / (the live page) or /live.json\n".into(),
        ),
    }
}

/// `since=N` from the query (0 when absent).
fn since(query: Option<&str>) -> Result<u64, String> {
    for pair in query.unwrap_or("").split('&') {
        if let Some(v) = pair.strip_prefix("since=") {
            return v
                .parse()
                .map_err(|_| format!("since must be a sample number, not {v:?}\n"));
        }
    }
    Ok(0)
}

/// Keeps closing seconds until the board is gone.
pub(crate) async fn ticker(board: Weak<Board>) {
    let mut every = tokio::time::interval(TICK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        let now = every.tick().await;
        let Some(board) = board.upgrade() else {
            return;
        };
        board.tick(now);
    }
}

fn backends(
    tally: &Tally,
    specs: &[(String, String)],
    windows: &HashMap<String, EndpointWindow>,
) -> Vec<Backend> {
    tally
        .served()
        .into_iter()
        .map(|s| Backend {
            latency: specs
                .iter()
                .find(|(n, _)| *n == s.name)
                .map(|(_, l)| l.clone())
                .unwrap_or_default(),
            window: windows.get(&s.name).cloned(),
            name: s.name,
            requests: s.requests,
            failed: s.failed,
        })
        .collect()
}

#[derive(Serialize)]
struct BoardView {
    boot: u64,
    at_ms: u64,
    tick_ms: u64,
    window_s: usize,
    history_len: usize,
    finished: bool,
    #[serde(flatten)]
    head: Head,
    arms: Vec<ArmView>,
}

#[derive(Serialize)]
struct ArmView {
    group: String,
    name: String,
    via: String,
    state: &'static str,
    elapsed_ms: u64,
    planned_ms: u64,
    window: Window,
    whole: Option<Whole>,
    backends: Vec<Backend>,
    history: tailguard_record::live::History,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A number that differs between runs, so the page knows a new run from the old one.
#[allow(clippy::disallowed_methods)] // An identity, not timing.
fn epoch_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        assert!(out.starts_with(b"HTTP/1.1 200"));
    }

    fn run(requests: u64) -> ArmRun {
        let mut arm = crate::saved::from_load("x", Default::default())
            .arms
            .remove(0);
        arm.requests = requests;
        arm.achieved_rate = 2.5;
        arm.success_rate = 1.0;
        arm.latency_us.p99 = 7_000;
        arm
    }

    fn json(board: &Board, since: u64) -> Value {
        serde_json::from_str(&board.json(since)).unwrap()
    }

    // long: one board's life, second by second, checked as it goes; split, the steps would
    // each rebuild the board.
    #[tokio::test]
    async fn each_second_of_each_arm_with_its_backends_then_the_whole_run() {
        let fleet = tailguard_fleet::Fleet::from_yaml_str(
            "backends: [{name: a, latency: 0ms}, {name: b, latency: 0ms}]",
            "test",
        )
        .unwrap();
        let mut opts = tailguard_serve::ServeOptions::new(fleet);
        opts.listen = "127.0.0.1:0".parse().unwrap();
        opts.control = None;
        let fleet = tailguard_serve::start(opts).await.unwrap();
        let board = Board::new("demo", "two arms");
        board.plan(
            "closed loop",
            vec![("g".into(), "one".into()), ("g".into(), "two".into())],
            true,
        );
        let specs = vec![("a".to_owned(), "0s".to_owned())];
        let one = board.start(("g", "one", "direct"), TICK * 5, fleet.tally(), specs);
        // Arms that run at once start in any order; the page lists them as planned.
        let other = Board::new("demo", "");
        other.plan(
            "",
            vec![("g".into(), "one".into()), ("g".into(), "two".into())],
            true,
        );
        other.start(("g", "two", "x"), TICK, fleet.tally(), Vec::new());
        other.start(("g", "one", "x"), TICK, fleet.tally(), Vec::new());
        let names: Vec<Value> = json(&other, 0)["arms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].clone())
            .collect();
        assert_eq!(names, ["one", "two"]);
        let b = json(&board, 0);
        assert_eq!(b["scenario"], "demo");
        assert_eq!(b["together"], true);
        assert_eq!(b["planned"][1][1], "two");
        assert_eq!(
            b["arms"].as_array().unwrap().len(),
            1,
            "two has not started"
        );

        let backends = fleet.backends();
        for _ in 0..3 {
            get(backends[0].1).await;
        }
        get(backends[1].1).await;
        for ms in [1, 2, 3, 4] {
            one.record(Duration::from_millis(ms), ms != 4);
        }
        board.tick(one.started + TICK);
        let b = json(&board, 0);
        let arm = &b["arms"][0];
        assert_eq!(arm["state"], "running");
        assert_eq!(arm["window"]["requests"], 4);
        assert_eq!(arm["window"]["success"], 0.75);
        let list = arm["backends"].as_array().unwrap();
        assert_eq!(list[0]["name"], "a");
        assert_eq!(list[0]["latency"], "0s");
        assert_eq!(list[0]["requests"], 3);
        assert_eq!(list[0]["window"]["share"], 0.75);
        assert_eq!(list[1]["requests"], 1);
        let history = arm["history"].as_array().unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0]["endpoints"][0], serde_json::json!(["a", 3, 0]));
        // Asked for the samples after the last one: none.
        assert_eq!(json(&board, 1)["arms"][0]["history"], serde_json::json!([]));

        let seconds = board.finish(&one, &run(4));
        assert_eq!(seconds.len(), 1);
        assert_eq!(seconds[0].backends[1], ("b".to_owned(), 1, 0));
        assert_eq!(seconds[0].at_s, 1.0);
        // A finished arm is not ticked again and shows its whole run.
        board.tick(one.started + TICK * 2);
        board.close();
        let b = json(&board, 0);
        let arm = &b["arms"][0];
        assert_eq!(arm["state"], "done");
        assert_eq!(arm["whole"]["p99_us"], 7_000);
        assert_eq!(arm["whole"]["rps"], 2.5);
        assert_eq!(arm["history"].as_array().unwrap().len(), 1);
        assert_eq!(b["finished"], true);
    }

    #[tokio::test]
    async fn the_page_its_figures_and_nothing_else() {
        let board = Board::new("demo", "");
        let listener = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let server = board.serve(listener).unwrap();
        let addr = server.addr();
        let fetch = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
                .await
                .unwrap()
                .unwrap();
            out
        };
        let page = fetch("/").await;
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(page.contains("const TG =") && !page.contains("/*SCRIPT*/"));
        assert!(fetch("/live.json?since=0")
            .await
            .contains("\"scenario\":\"demo\""));
        assert!(fetch("/live.json?since=x")
            .await
            .starts_with("HTTP/1.1 400"));
        assert!(fetch("/backends").await.starts_with("HTTP/1.1 404"));
        server.shutdown().await;
    }
}
