//! Traces (`tracing: {otlpEndpoint, sampleRate, serviceName}`): W3C Trace Context in, a SERVER
//! span per request and a CLIENT span per attempt out, exported over OTLP/HTTP (JSON) through
//! a bounded queue.
//!
//! - **Off** (no `tracing` key, the default): nothing here exists; `traceparent` and
//!   `tracestate` pass through unchanged, as every other end-to-end header does.
//! - **Sampling**: a request whose `traceparent` is valid follows its parent's decision (the
//!   `sampled` flag); one without (or with an invalid one) starts a trace, sampled when its
//!   new trace id falls under `sampleRate` (default 0: only requests whose parent is sampled).
//!   A request not sampled passes its `traceparent` through unchanged.
//! - **A sampled request** gets a SERVER span (its parent the caller's span, if any) from its
//!   arrival to its response's last byte, and each attempt a CLIENT span, child of the SERVER
//!   span, from its send to its answer's head (or its failure); the attempt carries a
//!   `traceparent` naming its own CLIENT span, so the backend's spans hang under the attempt
//!   that reached it (a retry and a hedge are told apart). `tracestate` passes unchanged.
//!   Names and attributes follow OpenTelemetry's HTTP conventions (`http.request.method`,
//!   `url.path`, `http.route`, `http.response.status_code`, `server.address`, `server.port`,
//!   `http.request.resend_count`, `error.type`).
//! - **Export**: finished spans go into a queue of [`QUEUE`] with no wait (a full queue drops
//!   and counts them, `tailguard_proxy_trace_spans_dropped_total`); one task sends them in
//!   batches of up to [`BATCH`] at least every [`FLUSH`], one request at a time, each bounded
//!   by [`EXPORT_TIMEOUT`]; a batch the collector refuses, or one that fails or times out
//!   (a collector that is down or hangs), is dropped and counted. Exported spans count in
//!   `tailguard_proxy_trace_spans_exported_total`.
//!
//! Ids come from SplitMix64 over a counter seeded once (the configuration's `seed`, else
//! drawn), so no lock is taken for them; the wall clock is read only for sampled spans.

use bytes::Bytes;
use http::header::HeaderValue;
use http::HeaderMap;
use http_body_util::Full;
use prometheus_client::metrics::counter::Counter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// Spans the queue holds before it drops.
pub const QUEUE: usize = 8192;
/// Spans sent in one export request at most.
pub const BATCH: usize = 512;
/// How long a span waits for its batch at most.
pub const FLUSH: Duration = Duration::from_millis(500);
/// How long one export may take before it is given up.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The header naming the caller's span.
pub const TRACEPARENT: &str = "traceparent";

/// A parsed `traceparent`: version 00, a trace id and a parent span id that are not all
/// zeros, and the flags (W3C Trace Context, level 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The caller's span.
    pub span_id: [u8; 8],
    /// Whether the caller sampled the trace.
    pub sampled: bool,
}

impl Parent {
    /// Parses one `traceparent` value; `None` for anything that is not a valid version-00
    /// header (a future version's longer header is read by its first four fields, as the
    /// specification asks).
    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?.trim();
        let mut fields = text.split('-');
        let (version, trace, span, flags) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let version = u8::from_str_radix(hex_exact(version, 2)?, 16).ok()?;
        if version == 0xff || (version == 0 && (fields.next().is_some() || text.len() != 55)) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        decode(hex_exact(trace, 32)?, &mut trace_id)?;
        decode(hex_exact(span, 16)?, &mut span_id)?;
        let flags = u8::from_str_radix(hex_exact(flags, 2)?, 16).ok()?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

/// `s` when it is exactly `n` lowercase hex digits.
fn hex_exact(s: &str, n: usize) -> Option<&str> {
    (s.len() == n
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(s)
}

fn decode(hex: &str, out: &mut [u8]) -> Option<()> {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The `traceparent` of a sampled span.
pub fn traceparent(trace_id: &[u8; 16], span_id: &[u8; 8]) -> HeaderValue {
    let text = format!("00-{}-{}-01", hex(trace_id), hex(span_id));
    HeaderValue::from_str(&text).expect("hex digits and dashes are a valid header value")
}

/// SplitMix64: a well-mixed 64-bit value from a counter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The running tracer: sampling, ids, and the exporter's queue.
#[derive(Debug)]
pub struct Tracer {
    rate: f64,
    next: AtomicU64,
    tx: mpsc::Sender<Span>,
    dropped: Counter,
}

/// What a sampled request's stages share: its trace, its SERVER span, and the tracer.
#[derive(Debug)]
pub struct Traced {
    tracer: Arc<Tracer>,
    /// The trace.
    pub trace_id: [u8; 16],
    /// The request's SERVER span.
    pub span_id: [u8; 8],
    attempts: AtomicU64,
}

/// One finished span, waiting for export.
#[derive(Debug)]
pub struct Span {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: String,
    /// 2 SERVER, 3 CLIENT.
    kind: u8,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<(&'static str, Value)>,
    error: bool,
}

/// An attribute's value.
#[derive(Clone, Debug)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

#[allow(
    clippy::disallowed_methods,
    reason = "a span's times are the wall clock's, as every tracer's"
)]
fn wall() -> SystemTime {
    SystemTime::now()
}

impl Tracer {
    /// A tracer sampling new traces at `rate`, drawing ids from `seed`, exporting to `config`'s
    /// endpoint from a task spawned here (on the calling runtime); `dropped` and `exported`
    /// count what the queue and the collector did not take, and what they did.
    pub fn start(
        config: &crate::config::TracingConfig,
        seed: u64,
        dropped: Counter,
        exported: Counter,
    ) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let exporter = Exporter {
            endpoint: config.otlp_endpoint.clone(),
            service_name: config.service_name.clone(),
            dropped: dropped.clone(),
            exported,
        };
        tokio::spawn(exporter.run(rx));
        Arc::new(Self {
            rate: config.sample_rate,
            next: AtomicU64::new(seed),
            tx,
            dropped,
        })
    }

    fn draw(&self) -> u64 {
        mix(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn span_id(&self) -> [u8; 8] {
        loop {
            let id = self.draw();
            if id != 0 {
                return id.to_be_bytes();
            }
        }
    }

    /// The trace of a request with `headers`, when it is sampled: its parent's decision, or
    /// for a new trace `sampleRate`'s (a fraction of the trace ids' space).
    pub fn sample(self: &Arc<Self>, headers: &HeaderMap) -> Option<(Traced, Option<[u8; 8]>)> {
        let parent = headers
            .get(TRACEPARENT)
            .and_then(|v| Parent::parse(v.as_bytes()));
        let (trace_id, parent_span) = match parent {
            Some(p) if p.sampled => (p.trace_id, Some(p.span_id)),
            Some(_) => return None,
            None => {
                let (hi, lo) = (self.draw(), self.draw());
                // The top 53 bits of the id's low half as a fraction of one.
                let at = (lo >> 11) as f64 / (1u64 << 53) as f64;
                if at >= self.rate {
                    return None;
                }
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&hi.to_be_bytes());
                id[8..].copy_from_slice(&lo.to_be_bytes());
                (id, None)
            }
        };
        let traced = Traced {
            tracer: Arc::clone(self),
            trace_id,
            span_id: self.span_id(),
            attempts: AtomicU64::new(0),
        };
        Some((traced, parent_span))
    }

    fn finish(&self, span: Span) {
        if self.tx.try_send(span).is_err() {
            self.dropped.inc();
        }
    }
}

/// A request's SERVER span, open: ended (and queued) when it drops, with the response's
/// body (see [`crate::response_body::ResponseBody::trace`]).
#[derive(Debug)]
pub struct ServerSpan {
    traced: Arc<Traced>,
    parent: Option<[u8; 8]>,
    start: SystemTime,
    method: http::Method,
    path: String,
    route: Option<String>,
    status: u16,
}

impl ServerSpan {
    /// The SERVER span of a sampled request with `method` to `uri`, starting now.
    pub fn new(
        traced: Traced,
        parent: Option<[u8; 8]>,
        method: &http::Method,
        uri: &http::Uri,
    ) -> Self {
        Self {
            traced: Arc::new(traced),
            parent,
            start: wall(),
            method: method.clone(),
            path: uri.path().to_owned(),
            route: None,
            status: 0,
        }
    }

    /// What the attempts need of it.
    pub fn traced(&self) -> Arc<Traced> {
        Arc::clone(&self.traced)
    }

    /// The route the request took.
    pub fn route(&mut self, name: &str) {
        self.route = Some(name.to_owned());
    }

    /// The status of the head sent (0: none was).
    pub fn status(&mut self, status: u16) {
        self.status = status;
    }
}

impl Drop for ServerSpan {
    fn drop(&mut self) {
        let t = &self.traced;
        let name = match &self.route {
            Some(r) => format!("{} {r}", self.method),
            None => self.method.to_string(),
        };
        let mut attributes = vec![
            ("http.request.method", Value::Str(self.method.to_string())),
            ("url.path", Value::Str(std::mem::take(&mut self.path))),
            (
                "http.response.status_code",
                Value::Int(i64::from(self.status)),
            ),
            (
                "tailguard.attempts",
                Value::Int(t.attempts.load(Ordering::Relaxed) as i64),
            ),
        ];
        if let Some(r) = self.route.take() {
            attributes.push(("http.route", Value::Str(r)));
        }
        t.tracer.finish(Span {
            trace_id: t.trace_id,
            span_id: t.span_id,
            parent: self.parent,
            name,
            kind: 2,
            start: self.start,
            end: wall(),
            attributes,
            error: self.status == 0 || self.status >= 500,
        });
    }
}

/// One attempt's CLIENT span, open.
#[derive(Debug)]
pub struct ClientSpan {
    span_id: [u8; 8],
    start: SystemTime,
    resend: u64,
}

impl Traced {
    /// A CLIENT span for the next attempt, starting now, and the `traceparent` it sends.
    pub fn attempt(&self) -> (ClientSpan, HeaderValue) {
        let span_id = self.tracer.span_id();
        let resend = self.attempts.fetch_add(1, Ordering::Relaxed);
        let header = traceparent(&self.trace_id, &span_id);
        let span = ClientSpan {
            span_id,
            start: wall(),
            resend,
        };
        (span, header)
    }

    /// Ends attempt `span` to `addr` of a `method` request (`backup`: a hedge or a rescue):
    /// answered with `status`, or failed for `error`.
    pub fn attempted(
        &self,
        span: ClientSpan,
        method: &http::Method,
        addr: std::net::SocketAddr,
        backup: bool,
        outcome: Result<u16, String>,
    ) {
        let mut attributes = vec![
            ("http.request.method", Value::Str(method.to_string())),
            ("server.address", Value::Str(addr.ip().to_string())),
            ("server.port", Value::Int(i64::from(addr.port()))),
            ("tailguard.backup", Value::Bool(backup)),
        ];
        if span.resend > 0 {
            attributes.push(("http.request.resend_count", Value::Int(span.resend as i64)));
        }
        let error = match outcome {
            Ok(status) => {
                attributes.push(("http.response.status_code", Value::Int(i64::from(status))));
                status >= 500
            }
            Err(why) => {
                attributes.push(("error.type", Value::Str(why)));
                true
            }
        };
        self.tracer.finish(Span {
            trace_id: self.trace_id,
            span_id: span.span_id,
            parent: Some(self.span_id),
            name: method.to_string(),
            kind: 3,
            start: span.start,
            end: wall(),
            attributes,
            error,
        });
    }
}

/// The task that sends batches of spans to the collector.
struct Exporter {
    endpoint: http::Uri,
    service_name: String,
    dropped: Counter,
    exported: Counter,
}

impl Exporter {
    async fn run(self, mut rx: mpsc::Receiver<Span>) {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(EXPORT_TIMEOUT));
        let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_max_idle_per_host(1)
                .build(connector);
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            // The first span of a batch is waited for without limit; the rest at most FLUSH.
            match rx.recv().await {
                Some(s) => batch.push(s),
                None => return,
            }
            let until = tokio::time::Instant::now() + FLUSH;
            while batch.len() < BATCH {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(s)) => batch.push(s),
                    Ok(None) | Err(_) => break,
                }
            }
            let n = batch.len() as u64;
            let body = self.encode(&batch);
            batch.clear();
            let req = http::Request::post(self.endpoint.clone())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)));
            let Ok(req) = req else {
                self.dropped.inc_by(n);
                continue;
            };
            let sent = tokio::time::timeout(EXPORT_TIMEOUT, async {
                let resp = client.request(req).await.ok()?;
                let ok = resp.status().is_success();
                // Read (and bound) the answer so the connection can be used again.
                let _ = http_body_util::BodyExt::collect(http_body_util::Limited::new(
                    resp.into_body(),
                    64 * 1024,
                ))
                .await;
                Some(ok)
            })
            .await;
            match sent {
                Ok(Some(true)) => {
                    self.exported.inc_by(n);
                }
                _ => {
                    self.dropped.inc_by(n);
                    tracing::debug!(spans = n, "trace export failed; spans dropped");
                }
            }
        }
    }

    /// An OTLP/JSON `ExportTraceServiceRequest` of `spans`.
    fn encode(&self, spans: &[Span]) -> Vec<u8> {
        let nanos = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
                .to_string()
        };
        let value = |v: &Value| match v {
            Value::Str(s) => serde_json::json!({"stringValue": s}),
            Value::Int(i) => serde_json::json!({"intValue": i.to_string()}),
            Value::Bool(b) => serde_json::json!({"boolValue": b}),
        };
        let spans: Vec<serde_json::Value> = spans
            .iter()
            .map(|s| {
                let attributes: Vec<serde_json::Value> = s
                    .attributes
                    .iter()
                    .map(|(k, v)| serde_json::json!({"key": k, "value": value(v)}))
                    .collect();
                let mut span = serde_json::json!({
                    "traceId": hex(&s.trace_id),
                    "spanId": hex(&s.span_id),
                    "name": s.name,
                    "kind": s.kind,
                    "startTimeUnixNano": nanos(s.start),
                    "endTimeUnixNano": nanos(s.end.max(s.start)),
                    "attributes": attributes,
                    "status": {"code": if s.error { 2 } else { 0 }},
                });
                if let Some(p) = s.parent {
                    span["parentSpanId"] = serde_json::Value::String(hex(&p));
                }
                span
            })
            .collect();
        let request = serde_json::json!({
            "resourceSpans": [{
                "resource": {"attributes": [
                    {"key": "service.name", "value": {"stringValue": self.service_name}}
                ]},
                "scopeSpans": [{
                    "scope": {"name": "tailguard", "version": env!("CARGO_PKG_VERSION")},
                    "spans": spans,
                }],
            }],
        });
        serde_json::to_vec(&request).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_is_read_strictly() {
        let p = Parent::parse(GOOD.as_bytes()).unwrap();
        assert!(p.sampled);
        assert_eq!(hex(&p.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&p.span_id), "00f067aa0ba902b7");
        assert!(
            !Parent::parse(GOOD.replace("-01", "-00").as_bytes())
                .unwrap()
                .sampled
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        ] {
            assert_eq!(Parent::parse(bad.as_bytes()), None, "{bad}");
        }
        // A later version's header is read by its first four fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert!(Parent::parse(later.as_bytes()).is_some());
        let round = traceparent(&p.trace_id, &p.span_id);
        assert_eq!(round.to_str().unwrap(), GOOD);
    }

    #[tokio::test]
    async fn sampling_follows_the_parent_then_the_rate() {
        let dropped = Counter::default();
        let config = |rate| crate::config::TracingConfig {
            otlp_endpoint: "http://127.0.0.1:1/v1/traces".parse().unwrap(),
            sample_rate: rate,
            service_name: "t".into(),
        };
        let never = Tracer::start(&config(0.0), 1, dropped.clone(), Counter::default());
        let mut headers = HeaderMap::new();
        assert!(never.sample(&headers).is_none(), "rate 0 and no parent");
        headers.insert(TRACEPARENT, HeaderValue::from_static(GOOD));
        let (t, parent) = never.sample(&headers).unwrap();
        assert_eq!(hex(&t.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.map(|p| hex(&p)).as_deref(), Some("00f067aa0ba902b7"));
        let unsampled = GOOD.replace("-01", "-00");
        headers.insert(TRACEPARENT, HeaderValue::from_str(&unsampled).unwrap());
        assert!(never.sample(&headers).is_none(), "the parent said no");
        let half = Tracer::start(&config(0.5), 7, dropped, Counter::default());
        let empty = HeaderMap::new();
        let sampled = (0..10_000)
            .filter(|_| half.sample(&empty).is_some())
            .count();
        assert!(
            (4_700..=5_300).contains(&sampled),
            "{sampled} of 10,000 at 0.5"
        );
    }
}
