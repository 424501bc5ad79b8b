//! The control endpoint of a fleet: counts, current behaviour, and run-time changes.
//!
//! HTTP/1.1 on 127.0.0.1 by default. A backend is named by its name or its index.
//! - `GET /backends`: every backend's address, state, request counts and behaviour (JSON);
//! - `GET /backends/{id}`: one backend;
//! - `POST /backends/{id}` with a JSON change (any subset), answered with the new state:
//!   ```json
//!   {"latency": "2s", "fail": {"error": 0.5, "status": 503},
//!    "pause": "5s", "down": true, "faults": ["from 0s to 10s latency x10"], "restore": true}
//!   ```
//!   `latency` and `fail` take the fleet-file forms; `pause`/`down` take a duration (for that
//!   long), `true` (until `false`) or `false` (end now, scheduled ones included); `faults` are
//!   fault sentences with times relative to now; `restore` puts back the fleet file's spec
//!   (applied first). Every change edits the backend's [`tailguard_fleet::BackendSpec`], so the
//!   live backend still does exactly what `decide` says.
//! - `GET /metrics`: Prometheus text, or OpenMetrics when the `Accept` header asks for it.
//!
//! # Example
//! ```text
//! curl -s -d '{"latency": {"normal": {"mean": "500ms", "sd": "50ms"}}}' 127.0.0.1:9900/backends/b5
//! ```

use crate::metrics::Metrics;
use crate::state::Backend;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tailguard_fleet::{Failure, Fault, LatencyDist};
use tailguard_http::admin::{self, AdminServer, Limits};
use tailguard_text::duration::{format_duration, parse_duration};
use tokio::net::TcpListener;

/// Longest wait for a listener to close or reopen before answering a change.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Largest change request accepted.
const MAX_BODY: usize = 64 * 1024;

/// What the control endpoint serves.
#[derive(Debug)]
pub struct Control {
    /// The fleet's backends, in order.
    pub backends: Vec<Arc<Backend>>,
    /// The fleet's metrics.
    pub metrics: Arc<Metrics>,
}

/// A run-time change, as posted.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    restore: Option<bool>,
    latency: Option<LatencyDist>,
    fail: Option<Failure>,
    pause: Option<Hold>,
    down: Option<Hold>,
    faults: Option<Vec<String>>,
}

/// `"5s"` (for that long), `true` (until ended) or `false` (end now).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Hold {
    Toggle(bool),
    For(String),
}

/// Serves the control endpoint on `listener` (the shared admin server of `tailguard_http`,
/// on its own thread and within its default limits, `/metrics` its expensive page) until the
/// returned server is dropped.
pub(crate) fn serve(control: Arc<Control>, listener: TcpListener) -> std::io::Result<AdminServer> {
    let limits = Limits::default().expensive(&["/metrics"]);
    admin::serve_with(listener, limits, move |req| {
        let control = control.clone();
        async move { control.route(req).await }
    })
}

impl Control {
    async fn route(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let path: Vec<&str> = req
            .uri()
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        match (req.method(), path.as_slice()) {
            (&Method::GET, []) => text(StatusCode::OK, HELP.to_owned()),
            (&Method::GET, ["metrics"]) => self.metrics.response(req.headers()),
            (&Method::GET, ["backends"]) => self.list(),
            (&Method::GET, ["backends", id]) => match self.find(id) {
                Some(b) => jsonr(StatusCode::OK, &describe(b)),
                None => not_found(id),
            },
            (&Method::POST | &Method::PATCH, ["backends", id]) => match self.find(id).cloned() {
                Some(backend) => change(&backend, req).await,
                None => not_found(id),
            },
            _ => text(
                StatusCode::NOT_FOUND,
                format!("no route {} {}\n\n{HELP}", req.method(), req.uri().path()),
            ),
        }
    }

    fn list(&self) -> Response<Full<Bytes>> {
        let all: Vec<Value> = self.backends.iter().map(|b| describe(b)).collect();
        let elapsed = self
            .backends
            .first()
            .map(|b| b.elapsed())
            .unwrap_or_default();
        let body = json!({"elapsed": format_duration(elapsed), "backends": all});
        jsonr(StatusCode::OK, &body)
    }

    fn find(&self, id: &str) -> Option<&Arc<Backend>> {
        self.backends
            .iter()
            .find(|b| b.name() == id)
            .or_else(|| id.parse::<usize>().ok().and_then(|i| self.backends.get(i)))
    }
}

const HELP: &str = "\
tailguard serve control endpoint
GET  /backends          every backend: address, state, counts, behaviour
GET  /backends/{id}     one backend (name or index)
POST /backends/{id}     change it: {\"latency\": \"2s\", \"fail\": {\"error\": 0.5}, \"pause\": \"5s\",
                        \"down\": true, \"faults\": [\"from 0s to 10s latency x10\"], \"restore\": true}
GET  /metrics           Prometheus text
";

/// Applies a posted change and answers with the backend's new state, once the change holds:
/// a script that sets `down` and then connects must be refused.
async fn change(backend: &Backend, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match read_change(req).await.and_then(|c| apply(backend, c)) {
        Ok(()) => {
            backend.settle(SETTLE_LIMIT).await;
            jsonr(StatusCode::OK, &describe(backend))
        }
        Err(message) => jsonr(StatusCode::BAD_REQUEST, &json!({"error": message})),
    }
}

async fn read_change(req: Request<Incoming>) -> Result<Change, String> {
    let body = http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the change: {e}"))?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| format!("bad change: {e}"))
}

/// Applies a change: parse everything first, so a bad field changes nothing.
fn apply(backend: &Backend, change: Change) -> Result<(), String> {
    // Whole milliseconds keep the schedule readable ("from 12.345s"); nobody needs finer.
    let now = std::time::Duration::from_millis(backend.elapsed().as_millis() as u64);
    let pause = change.pause.map(hold).transpose()?;
    let down = change.down.map(hold).transpose()?;
    let faults = change
        .faults
        .unwrap_or_default()
        .iter()
        .map(|text| text.parse::<Fault>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    if change.restore == Some(true) {
        backend.restore();
    }
    backend.update(|spec| {
        if let Some(latency) = change.latency {
            spec.latency = latency;
        }
        if let Some(fail) = change.fail {
            spec.failure = fail;
        }
        match pause {
            Some(HoldAction::For(length)) => spec.pause(now, Some(length)),
            Some(HoldAction::UntilEnded) => spec.pause(now, None),
            Some(HoldAction::End) => spec.resume(now),
            None => {}
        }
        match down {
            Some(HoldAction::For(length)) => spec.go_down(now, Some(length)),
            Some(HoldAction::UntilEnded) => spec.go_down(now, None),
            Some(HoldAction::End) => spec.come_up(now),
            None => {}
        }
        for fault in faults {
            spec.schedule.push(Fault {
                window: fault.window.shifted(now),
                effect: fault.effect,
            });
        }
    });
    Ok(())
}

/// What a `pause` or `down` field asks for.
enum HoldAction {
    For(std::time::Duration),
    UntilEnded,
    End,
}

fn hold(h: Hold) -> Result<HoldAction, String> {
    match h {
        Hold::Toggle(true) => Ok(HoldAction::UntilEnded),
        Hold::Toggle(false) => Ok(HoldAction::End),
        Hold::For(text) => parse_duration(&text)
            .map(HoldAction::For)
            .map_err(|e| e.to_string()),
    }
}

/// The JSON view of a backend.
pub fn describe(backend: &Backend) -> Value {
    let spec = backend.spec();
    let (ok, error, close, reset) = backend.counters.totals();
    json!({
        "index": backend.index,
        "name": backend.name(),
        "addr": backend.addr.to_string(),
        "state": backend.gate.state().as_str(),
        "requests": {
            "ok": ok, "error": error, "close": close, "reset": reset,
            "in_flight": backend.counters.in_flight.get(),
        },
        "latency": spec.latency.to_string(),
        "fail": spec.failure.to_string(),
        "schedule": spec.schedule.faults().iter().map(ToString::to_string).collect::<Vec<_>>(),
        "body": spec.body.to_string(),
        "capacity": spec.capacity.map(|c| json!({
            "workers": spec.workers(backend.elapsed()).unwrap_or(c.workers),
            "configured": c.to_string(),
            "busy": backend.load().map_or(0, |(busy, _)| busy),
            "waiting": backend.load().map_or(0, |(_, waiting)| waiting),
        })),
    })
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    resp
}

fn jsonr(status: StatusCode, value: &Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string() + "\n")));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

fn not_found(id: &str) -> Response<Full<Bytes>> {
    jsonr(
        StatusCode::NOT_FOUND,
        &json!({"error": format!("no backend `{id}`")}),
    )
}
