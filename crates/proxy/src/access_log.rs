//! The access log (`accessLog: {path, format: json, query}`): one JSON line per request, written
//! when its response ends (or is dropped), by a thread of its own.
//!
//! The request path never waits on the log: a line goes into a bounded queue ([`QUEUE`] lines)
//! with `try_send`, and a full queue drops it and counts it
//! (`tailguard_proxy_access_log_dropped_total`). The writer thread opens the file (a FIFO's open
//! waits there for a reader, not on the request path), appends, and flushes whenever the queue
//! runs dry; a write that fails (a reader that went away) drops that line, counted, and the
//! file is opened again for the next. SIGUSR1 asks the writer to reopen the path, for
//! logrotate's `create` mode. With no `accessLog`, nothing of this exists: the request path
//! reads no clock and allocates nothing for it.
//!
//! A line holds `ts` (the request's arrival, RFC 3339 in microseconds, UTC), `duration_ms`
//! (arrival to the response's last byte, or to its drop), `method`, `path` (without the query
//! unless `query: true`), `route`, `status` (the head sent; 0 when none was), `upstream` (the
//! endpoint whose answer was used; null when none), `attempts` (sent, backups included),
//! `retried`, `hedged`, `fault` (why the answer is not the endpoint's own, or why it broke off:
//! the proxy's reason, `response body broken`, `client went away`), `req_body_bytes` and
//! `resp_body_bytes`.

use crate::clock::Clock;
use prometheus_client::metrics::counter::Counter;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Lines the queue holds before it drops.
pub const QUEUE: usize = 10_000;

/// How often an idle writer looks for a reopen request.
const IDLE_LOOK: Duration = Duration::from_millis(200);

/// The running access log.
#[derive(Debug)]
pub struct AccessLog {
    tx: SyncSender<String>,
    reopen: Arc<AtomicBool>,
    query: bool,
    dropped: Counter,
}

impl AccessLog {
    /// Starts the writer of `config`, counting lines it cannot take in `dropped`. A regular
    /// file (or a new one) is opened here, so a path that cannot be written is an error at
    /// start; a FIFO is opened by the writer, which waits for its reader.
    ///
    /// # Errors
    /// When the file cannot be opened for appending.
    pub fn start(
        config: &crate::config::AccessLogConfig,
        dropped: Counter,
    ) -> std::io::Result<Self> {
        use std::os::unix::fs::FileTypeExt;
        let is_fifo = std::fs::metadata(&config.path).is_ok_and(|m| m.file_type().is_fifo());
        let first = if is_fifo {
            None
        } else {
            Some(open(&config.path)?)
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let reopen = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            path: config.path.clone(),
            file: first.map(std::io::BufWriter::new),
            reopen: Arc::clone(&reopen),
            dropped: dropped.clone(),
        };
        std::thread::Builder::new()
            .name("tailguard-access-log".into())
            .spawn(move || writer.run(&rx))?;
        Ok(Self {
            tx,
            reopen,
            query: config.query,
            dropped,
        })
    }

    /// Asks the writer to open the path again before its next line (SIGUSR1).
    pub fn reopen(&self) {
        self.reopen.store(true, Ordering::Release);
    }

    /// Queues `line`, or drops and counts it when the queue is full.
    pub fn write(&self, line: String) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(line) {
            self.dropped.inc();
        }
    }
}

fn open(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// The writer thread's state.
struct Writer {
    path: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
    reopen: Arc<AtomicBool>,
    dropped: Counter,
}

impl Writer {
    fn run(mut self, rx: &Receiver<String>) {
        loop {
            match rx.recv_timeout(IDLE_LOOK) {
                Ok(line) => {
                    self.put(&line);
                    while let Ok(more) = rx.try_recv() {
                        self.put(&more);
                    }
                    self.flush();
                }
                Err(RecvTimeoutError::Timeout) => {
                    if self.reopen.swap(false, Ordering::AcqRel) {
                        self.flush();
                        self.file = None;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush();
                    return;
                }
            }
        }
    }

    fn put(&mut self, line: &str) {
        if self.reopen.swap(false, Ordering::AcqRel) {
            self.flush();
            self.file = None;
        }
        if self.file.is_none() {
            match open(&self.path) {
                Ok(f) => self.file = Some(std::io::BufWriter::with_capacity(64 * 1024, f)),
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), %e, "access log not opened");
                    self.dropped.inc();
                    return;
                }
            }
        }
        let Some(f) = &mut self.file else { return };
        if f.write_all(line.as_bytes()).is_err() {
            // The reader went away (or the disk is full): this line is lost, the next one
            // opens the file again.
            self.dropped.inc();
            self.file = None;
        }
    }

    fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            if f.flush().is_err() {
                self.file = None;
            }
        }
    }
}

/// What the attempts of one request leave for its line: the endpoint whose answer was used,
/// and how many attempts and backups went out. Only a logged request has one.
#[derive(Debug, Default)]
pub struct Trail {
    upstream: Mutex<Option<SocketAddr>>,
    attempts: AtomicU32,
    backups: AtomicU32,
}

impl Trail {
    /// An attempt was sent (`backup`: a hedge or a rescue beside one still out).
    pub fn sent(&self, backup: bool) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        if backup {
            self.backups.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The answer used came from `addr`.
    pub fn answered_by(&self, addr: SocketAddr) {
        *self.upstream.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
    }
}

/// The parts of a line the later stages fill in.
#[derive(Debug)]
pub struct Taps {
    /// For [`crate::attempts::Outgoing::trail`].
    pub trail: Arc<Trail>,
    /// For [`crate::request_body::ClientBody::counting`].
    pub req_bytes: Arc<AtomicU64>,
}

/// One request's line, filled in as it goes and written when its response body drops.
#[derive(Debug)]
pub struct Line {
    log: Arc<AccessLog>,
    clock: Clock,
    ts: SystemTime,
    arrived: Duration,
    method: http::Method,
    path: String,
    route: String,
    status: u16,
    trail: Arc<Trail>,
    fault: Vec<String>,
    req_body_bytes: Arc<AtomicU64>,
    resp_body_bytes: u64,
}

impl Line {
    /// The line of a request that arrived now (`arrived` on `clock`) with `method` to `uri`.
    pub fn new(
        log: &Arc<AccessLog>,
        clock: Clock,
        arrived: Duration,
        method: &http::Method,
        uri: &http::Uri,
    ) -> Self {
        let path = match (log.query, uri.query()) {
            (true, Some(q)) => format!("{}?{q}", uri.path()),
            _ => uri.path().to_owned(),
        };
        #[allow(
            clippy::disallowed_methods,
            reason = "the log line's timestamp is the wall clock's, as every access log's"
        )]
        let ts = SystemTime::now();
        Self {
            log: Arc::clone(log),
            clock,
            ts,
            arrived,
            method: method.clone(),
            path,
            route: String::new(),
            status: 0,
            trail: Arc::default(),
            fault: Vec::new(),
            req_body_bytes: Arc::default(),
            resp_body_bytes: 0,
        }
    }

    /// What the later stages fill in: the attempts' trail and the request body's bytes.
    pub fn taps(&self) -> Taps {
        Taps {
            trail: Arc::clone(&self.trail),
            req_bytes: Arc::clone(&self.req_body_bytes),
        }
    }

    /// The route the request took.
    pub fn route(&mut self, name: &str) {
        name.clone_into(&mut self.route);
    }

    /// The response head's status.
    pub fn status(&mut self, status: u16) {
        self.status = status;
    }

    /// A reason the answer is not simply the endpoint's.
    pub fn fault(&mut self, why: &str) {
        if !self.fault.iter().any(|f| f == why) {
            self.fault.push(why.to_owned());
        }
    }

    /// Whether a fault was noted.
    pub fn has_fault(&self) -> bool {
        !self.fault.is_empty()
    }

    /// `n` more bytes of response body went downstream.
    pub fn body_bytes(&mut self, n: usize) {
        self.resp_body_bytes += n as u64;
    }

    fn render(&self) -> String {
        let attempts = self.trail.attempts.load(Ordering::Relaxed);
        let backups = self.trail.backups.load(Ordering::Relaxed);
        let upstream = *self
            .trail
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let took = self.clock.now().saturating_sub(self.arrived);
        let value = serde_json::json!({
            "ts": humantime::format_rfc3339_micros(self.ts).to_string(),
            "duration_ms": (took.as_secs_f64() * 1e6).round() / 1e3,
            "method": self.method.as_str(),
            "path": self.path,
            "route": self.route,
            "status": self.status,
            "upstream": upstream.map(|a| a.to_string()),
            "attempts": attempts,
            "retried": attempts > backups + 1,
            "hedged": backups > 0,
            "fault": self.fault,
            "req_body_bytes": self.req_body_bytes.load(Ordering::Relaxed),
            "resp_body_bytes": self.resp_body_bytes,
        });
        let mut line = value.to_string();
        line.push('\n');
        line
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let line = self.render();
        self.log.write(line);
    }
}
