//! `--replay FILE`: recorded traffic sent again at its recorded times.
//!
//! The file holds one request per line, vegeta's JSON target plus its time: `{"offset_ms":
//! 12.5, "method": "GET", "url": "...", "header": {"K": ["v"]}, "body": "<base64>"}` (only
//! `offset_ms` and `url` are required). Before anything is sent a first pass reads it through:
//! every line must parse, offsets must not decrease, each origin (scheme and host) resolves
//! once, and the requests due in each report interval are counted. During the run a reader
//! thread reads it again, a line at a time, into a short queue per worker thread, whose pacer
//! releases each request at its offset divided by `--speed`: memory stays bounded whatever
//! the file's length.
//!
//! Latency is measured from that due time (coordinated omission corrected): a request that
//! waited for a busy connection (`--concurrency`) is late and counted late, and the queues
//! keep the file's order, so nothing is reordered (a replay runs on one worker thread unless
//! `--threads` says otherwise; with several, each keeps its share's order).

use crate::config::Config;
use crate::pacer::{PacerState, Source};
use crate::request::Template;
use crate::target::{RequestSpec, Target};
use crate::worker::{Job, Replayed};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tailguard_text::lines::Lines;

pub use crate::config::ReplaySpec;

/// The longest line: a 64 MiB body in base64, and the rest of the request.
pub const MAX_LINE_BYTES: usize = 96 << 20;

/// The most origins (scheme and host) a replay reaches.
pub const MAX_ORIGINS: usize = 1_000;

/// The latest offset: 30 days.
pub const MAX_OFFSET: Duration = Duration::from_secs(30 * 24 * 3600);

/// The most report intervals a replay spans (its due counts are kept per interval).
pub const MAX_INTERVALS: usize = 1_000_000;

/// Requests the reader hands a thread's pacer at once. The reader wakes once per batch, not
/// once per request (a wake-up per request cost the worker thread its CPU: send lag p99 1.1 ms
/// at 2,000 req/s, against 0.3 ms for the same schedule without a file); and a batch is small,
/// because a woken reader builds its batch at one go (about 5 µs per line in a release build),
/// and Linux lets it finish its time slice before a pacer woken on the same core. With 256
/// lines per batch that made the pacer late by 1-2 ms, 13 to 16 times in a 3 s replay at 2,000
/// req/s (`perf sched`); with 16, 1 to 3 times (docs/load.md, "Replaying traffic").
const BATCH: usize = 16;

/// Batches the reader keeps ready ahead of each thread's pacer (1,024 requests).
const BATCHES_AHEAD: usize = 64;

/// `--speed`: 0.001 to 1,000.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.001..=1000.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: the speed is a factor from 0.001 to 1000")),
    }
}

/// A replay file that cannot be used: the file, the line (0 for the whole file), why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}{}: {reason}", path.display(), if *line > 0 { format!(":{line}") } else { String::new() })]
pub struct ReplayError {
    /// The file.
    pub path: PathBuf,
    /// The line, from 1; 0 for the whole file.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// One line of the file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    offset_ms: f64,
    #[serde(default)]
    method: Option<String>,
    url: String,
    #[serde(default)]
    header: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    body: Option<String>,
}

/// A line read: when it is due (speed applied), its origin, its request.
struct Parsed {
    due: Duration,
    origin: usize,
    target: Target,
}

/// The origins met so far, by scheme and authority, each resolved once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Origins {
    index: HashMap<(bool, String), usize>,
    /// One target per origin (the URL it was first met with).
    pub first: Vec<Target>,
}

impl Origins {
    /// The origin of `url` and its target, resolving a new origin (at most [`MAX_ORIGINS`]).
    fn target(&mut self, url: &str, resolve: bool) -> Result<(usize, Target), String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| format!("bad URL {url:?}: {e}"))?;
        let tls = uri.scheme_str() == Some("https");
        let authority = uri.authority().map(ToString::to_string).unwrap_or_default();
        let key = (tls, authority);
        if let Some(&o) = self.index.get(&key) {
            let mut t = self.first[o].clone();
            t.url = url.to_string();
            t.path = uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
            return Ok((o, t));
        }
        if !resolve {
            return Err(format!(
                "{url:?}: an origin the first pass did not see (did the file change?)"
            ));
        }
        if self.first.len() >= MAX_ORIGINS {
            return Err(format!("more than {MAX_ORIGINS} origins (scheme and host)"));
        }
        let t = Target::parse(url).map_err(|e| e.to_string())?;
        self.index.insert(key, self.first.len());
        self.first.push(t.clone());
        Ok((self.first.len() - 1, t))
    }
}

/// Reads one line into its due time, origin and request.
fn parse(text: &str, speed: f64, origins: &mut Origins, resolve: bool) -> Result<Parsed, String> {
    let line: Line = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if !(line.offset_ms.is_finite() && line.offset_ms >= 0.0) {
        return Err(format!("offset_ms {} is not a time from 0", line.offset_ms));
    }
    let offset = Duration::from_secs_f64(line.offset_ms / 1000.0);
    if offset > MAX_OFFSET {
        return Err(format!("offset_ms {} is past 30 days", line.offset_ms));
    }
    let (method, headers, body) =
        crate::requests::json_parts(line.method.as_deref(), &line.header, line.body.as_deref())?;
    let (origin, mut target) = origins.target(&line.url, resolve)?;
    target.spec = Some(Arc::new(RequestSpec {
        method,
        headers,
        body,
        name: String::new(),
        weight: 1,
    }));
    Ok(Parsed {
        due: offset.div_f64(speed),
        origin,
        target,
    })
}

/// What the first pass found.
#[derive(Debug)]
pub(crate) struct Scan {
    /// Requests in the file (within `--total-requests`).
    pub count: u64,
    /// When the last one is due (speed applied).
    pub last_due: Duration,
    /// The origins, each named by its scheme and host, carrying its first `GET` or `HEAD` (what
    /// the pre-flight may send), else its first request.
    pub targets: Vec<Target>,
    /// The origins as the reader meets them again.
    pub origins: Origins,
    /// Requests due in each report interval.
    pub due_per_interval: Vec<u64>,
}

fn open(path: &Path) -> Result<Lines<std::io::BufReader<std::fs::File>>, String> {
    let file = crate::files::open_regular(path).map_err(|e| e.to_string())?;
    Ok(Lines::new(
        std::io::BufReader::with_capacity(256 * 1024, file),
        MAX_LINE_BYTES,
    ))
}

/// The first pass: checks every line and counts what is due when.
pub(crate) fn scan(
    spec: &ReplaySpec,
    interval: Duration,
    total: Option<u64>,
) -> Result<Scan, ReplayError> {
    let error = |line: usize, reason: String| ReplayError {
        path: spec.path.clone(),
        line,
        reason,
    };
    let mut lines = open(&spec.path).map_err(|e| error(0, e))?;
    let mut origins = Origins::default();
    let mut targets: Vec<Target> = Vec::new();
    let mut due_per_interval: Vec<u64> = Vec::new();
    let (mut count, mut last_due, mut last_line) = (0u64, Duration::ZERO, 0usize);
    while total.is_none_or(|n| count < n) {
        let (n, text) = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => return Err(error(0, e)),
        };
        if text.trim().is_empty() {
            continue;
        }
        let p = parse(text, spec.speed, &mut origins, true).map_err(|e| error(n, e))?;
        if p.due < last_due {
            return Err(error(
                n,
                format!("its offset is before line {last_line}'s: offsets must not decrease"),
            ));
        }
        let k = (p.due.as_nanos() / interval.as_nanos().max(1)) as usize;
        if k >= MAX_INTERVALS {
            return Err(error(
                n,
                format!("the replay spans more than {MAX_INTERVALS} report intervals: give a longer --interval"),
            ));
        }
        if k >= due_per_interval.len() {
            due_per_interval.resize(k + 1, 0);
        }
        due_per_interval[k] += 1;
        let spec_of = |t: &Target| t.spec.as_ref().map(|s| s.method.clone());
        let safe = |t: &Target| matches!(spec_of(t), Some(m) if m == http::Method::GET || m == http::Method::HEAD);
        let named = |mut t: Target| {
            let mut s = (*t.spec.take().expect("parsed with a spec")).clone();
            s.name = format!("{}://{}", if t.tls { "https" } else { "http" }, t.authority);
            t.spec = Some(Arc::new(s));
            t
        };
        if p.origin == targets.len() {
            targets.push(named(p.target));
        } else if safe(&p.target) && !safe(&targets[p.origin]) {
            targets[p.origin] = named(p.target);
        }
        (count, last_due, last_line) = (count + 1, p.due, n);
    }
    if count == 0 {
        return Err(error(0, "no request in the file".into()));
    }
    Ok(Scan {
        count,
        last_due,
        targets,
        origins,
        due_per_interval,
    })
}

/// A request on its way to a thread's pacer.
#[derive(Debug)]
pub(crate) struct Item {
    pub index: u64,
    pub due: Duration,
    pub request: Box<Replayed>,
}

/// A batch of requests for one thread, in order.
pub(crate) type Batch = Vec<Item>;

/// A replay under way: each thread's stream, the reader filling them, and the requests due in
/// each report interval.
pub(crate) struct Started {
    pub streams: Vec<Stream>,
    pub reader: std::thread::JoinHandle<Result<u64, String>>,
    pub due_per_interval: Vec<u64>,
}

/// Starts the reader of the file `scan` went through, streaming to `threads` pacers; returns
/// once the reader has filled the queues (or read the whole file, or stopped), so that the
/// run's clock starts with [`BATCHES_AHEAD`] batches built: reading them would otherwise take
/// the first milliseconds of the schedule from the pacers.
pub(crate) async fn start(
    cfg: &Config,
    spec: &ReplaySpec,
    scan: Scan,
    threads: usize,
    state: Arc<PacerState>,
) -> Started {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads.max(1))
        .map(|_| tokio::sync::mpsc::channel(BATCHES_AHEAD))
        .unzip();
    let (primed, ready) = tokio::sync::oneshot::channel();
    let reader = start_reader(
        cfg.clone(),
        spec.clone(),
        scan.origins,
        senders,
        primed,
        state,
    );
    // An error: the reader ended without saying so (the file ended, or a line it could not
    // read, which `reader` returns).
    let _ = ready.await;
    Started {
        streams: receivers.into_iter().map(Stream::new).collect(),
        reader,
        due_per_interval: scan.due_per_interval,
    }
}

/// A thread's share of a replay, as the reader streams it, a batch at a time: its pacer's
/// [`Source`].
pub(crate) struct Stream {
    rx: tokio::sync::mpsc::Receiver<Batch>,
    batch: std::collections::VecDeque<Item>,
}

impl Stream {
    fn new(rx: tokio::sync::mpsc::Receiver<Batch>) -> Stream {
        Stream {
            rx,
            batch: std::collections::VecDeque::new(),
        }
    }
}

impl Source for Stream {
    async fn next_due(&mut self) -> Option<(u64, Duration)> {
        while self.batch.is_empty() {
            self.batch = self.rx.recv().await?.into();
        }
        self.batch.front().map(|i| (i.index, i.due))
    }

    fn release(&mut self, now: Duration) -> Job {
        let item = self.batch.pop_front().expect("next_due gave it");
        Job {
            index: item.index,
            scheduled: item.due,
            released: now,
            request: Some(item.request),
            again: false,
        }
    }
}

/// Streams the file to the pacers (request `i` to thread `i % threads`) on a thread of its
/// own, until the file ends, the count is reached, the pacers are gone or `stop` is set;
/// `primed` is sent when a queue is first full. Ends with the requests it read, or the line it
/// could not.
fn start_reader(
    cfg: Config,
    spec: ReplaySpec,
    mut origins: Origins,
    senders: Vec<tokio::sync::mpsc::Sender<Batch>>,
    primed: tokio::sync::oneshot::Sender<()>,
    stop: Arc<PacerState>,
) -> std::thread::JoinHandle<Result<u64, String>> {
    std::thread::Builder::new()
        .name("tailguard-replay".into())
        .spawn(move || {
            let mut lines = open(&spec.path)?;
            let mut batches: Vec<Batch> =
                senders.iter().map(|_| Vec::with_capacity(BATCH)).collect();
            let mut primed = Some(primed);
            let mut index = 0u64;
            // Sends thread `t`'s batch; false when its pacer is gone.
            let mut send = |t: usize, batch: &mut Batch| {
                if batch.is_empty() {
                    return true;
                }
                if senders[t].capacity() == 0 {
                    if let Some(primed) = primed.take() {
                        // The queues are full: the run may start (a run gone is no error).
                        let _ = primed.send(());
                    }
                }
                senders[t].blocking_send(std::mem::take(batch)).is_ok()
            };
            while cfg.total_requests.is_none_or(|n| index < n) {
                if stop.stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let Some((n, text)) = lines.next_line()? else {
                    break;
                };
                if text.trim().is_empty() {
                    continue;
                }
                let p = parse(text, spec.speed, &mut origins, false)
                    .map_err(|e| format!("{}:{n}: {e}", spec.path.display()))?;
                let template = Template::new(&cfg, &p.target)
                    .map_err(|e| format!("{}:{n}: {e}", spec.path.display()))?;
                let t = (index % senders.len() as u64) as usize;
                batches[t].push(Item {
                    index,
                    due: p.due,
                    request: Box::new(Replayed {
                        template,
                        origin: p.origin,
                    }),
                });
                index += 1;
                if batches[t].len() >= BATCH && !send(t, &mut batches[t]) {
                    return Ok(index);
                }
            }
            for (t, batch) in batches.iter_mut().enumerate() {
                send(t, batch);
            }
            Ok(index)
        })
        .expect("spawn the replay reader")
}
