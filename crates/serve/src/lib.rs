//! Test backends that misbehave on purpose, behind `tailguard serve`.
//!
//! One process runs a whole fleet ([`tailguard_fleet::Fleet`]): each backend listens on its own
//! port (consecutive from `--listen`), speaks HTTP/1.1, HTTP/2 (prior knowledge and h2c
//! upgrade) and gRPC on it, and behaves as its [`tailguard_fleet::BackendSpec`] says: the same
//! `decide` / `paused_until` / `is_down` the simulator uses, with elapsed time read from tokio's
//! clock and a seeded RNG per connection. A control endpoint shows counts and behaviour and
//! changes backends at run time ([`control`]).
//!
//! Layers, bottom up: [`io`] (pause gating, Nagle demo writes, resets), [`timer`]
//! (microsecond-precise latency waits), [`gate`] and [`driver`] (run state from the schedule),
//! [`listener`] (accept, down/up), `route` (each request to its protocol: gRPC, h2c upgrade,
//! plain HTTP), [`service`] (the one core: decide, wait, answer), [`grpc`], [`overrides`]
//! (`?delay=`), [`control`] and [`metrics`].
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use tailguard_fleet::Fleet;
//! use tailguard_serve::{start, ServeOptions};
//! let mut options = ServeOptions::new(Fleet::builtin("echo").unwrap());
//! options.listen = "127.0.0.1:0".parse().unwrap();
//! options.control = None;
//! let running = start(options).await.unwrap();
//! assert_eq!(running.backends()[0].0, "echo");
//! # }
//! ```
#![warn(missing_docs)]

/// The behaviour model, re-exported so the CLI needs only this crate.
pub use route::PROBE_PATH;
pub use tailguard_fleet as fleet;

mod control;
mod driver;
mod gate;
pub mod grpc;
mod io;
mod listener;
mod metrics;
mod overrides;
mod route;
mod service;
mod state;
mod timer;

use control::Control;
use metrics::Metrics;
use state::{Backend, Shared};
use std::net::SocketAddr;
use std::sync::Arc;
use tailguard_fleet::Fleet;
use tokio::task::JoinHandle;

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A backend's address could not be bound.
    #[error("cannot listen on {addr} for backend `{backend}`: {source}")]
    Bind {
        /// The backend.
        backend: String,
        /// Its address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The control endpoint's address could not be bound.
    #[error("cannot listen on {addr} for the control endpoint: {source}")]
    Control {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Consecutive ports from `--listen` run past 65535.
    #[error("{count} backends from port {port} run past port 65535")]
    Ports {
        /// Backends in the fleet.
        count: usize,
        /// The first port.
        port: u16,
    },
    /// The runtime or the signal handler could not be set up.
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
}

/// How to serve a fleet.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The fleet.
    pub fleet: Fleet,
    /// Address of the first backend; the others take the next ports (port 0: any free port).
    pub listen: SocketAddr,
    /// Control endpoint address; `None` for none.
    pub control: Option<SocketAddr>,
    /// When the control address is taken (another `serve` holds it), take any free port on the
    /// same host instead of failing. For the default address; an address given is kept to.
    pub control_fallback: bool,
    /// Nagle demo: TCP_NODELAY off and responses written in two parts (seed 001).
    pub nagle: bool,
    /// Honour `?delay=`, `?status=` and friends.
    pub overrides: bool,
    /// Finish each latency wait on the precise timer thread (the `timer` module, microseconds of
    /// slack). Off: tokio's timer all the way (1 ms granularity), so that a test on tokio's
    /// paused clock drives every wait.
    pub precise_timer: bool,
    /// A backend with a capacity serves a request whose client hung up to its end, holding
    /// its worker (the simulator's `servers: {abandoned: serve}`): work nobody waits for any
    /// more still costs capacity, as in a server that does not notice its client left. Off:
    /// the request leaves the line (or frees its worker) when its connection or stream does.
    pub serve_abandoned: bool,
}

impl ServeOptions {
    /// Defaults: backends from 127.0.0.1:9000, control on 127.0.0.1:9900, TCP_NODELAY on,
    /// no query overrides.
    pub fn new(fleet: Fleet) -> ServeOptions {
        ServeOptions {
            fleet,
            listen: SocketAddr::from(([127, 0, 0, 1], 9000)),
            control: Some(SocketAddr::from(([127, 0, 0, 1], 9900))),
            control_fallback: false,
            nagle: false,
            overrides: false,
            precise_timer: true,
            serve_abandoned: false,
        }
    }
}

/// A fleet being served; dropping it stops accepting (open connections finish on their own).
#[derive(Debug)]
pub struct Running {
    backends: Vec<Arc<Backend>>,
    control: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    /// The control endpoint's server (stops accepting when dropped).
    control_server: Option<tailguard_http::admin::AdminServer>,
}

impl Running {
    /// `(name, address)` of every backend, in fleet order.
    pub fn backends(&self) -> Vec<(String, SocketAddr)> {
        self.backends
            .iter()
            .map(|b| (b.name().to_owned(), b.addr))
            .collect()
    }

    /// A handle on every backend's request counts, the ones the control endpoint shows, for a
    /// live view of the fleet (as `bench` draws it).
    pub fn tally(&self) -> Tally {
        Tally(self.backends.clone())
    }

    /// Backend `i` as the control endpoint's `GET /backends/{i}` shows it, read in this
    /// process: a test on a paused clock reads it without waiting on the control endpoint's
    /// thread (time would run on while it waits).
    pub fn describe(&self, i: usize) -> Option<serde_json::Value> {
        self.backends.get(i).map(|b| control::describe(b))
    }

    /// The control endpoint's address.
    pub fn control(&self) -> Option<SocketAddr> {
        self.control
    }

    /// What `tailguard serve` prints at start: one line per backend, then the control URL.
    pub fn banner(&self) -> String {
        let width = self
            .backends
            .iter()
            .map(|b| b.name().len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for b in &self.backends {
            let spec = b.spec();
            out += &format!(
                "{:width$}  http://{}  latency {}",
                b.name(),
                b.addr,
                spec.latency
            );
            if spec.failure != tailguard_fleet::Failure::default() {
                out += &format!("  fail {}", spec.failure);
            }
            for fault in spec.schedule.faults() {
                out += &format!("  [{fault}]");
            }
            out.push('\n');
        }
        if let Some(addr) = self.control {
            out += &format!("control  http://{addr}/backends  (metrics: http://{addr}/metrics)\n");
        }
        out
    }
}

/// Every backend's requests so far (see [`Running::tally`]); holding it keeps no port open.
#[derive(Clone, Debug)]
pub struct Tally(Vec<Arc<Backend>>);

/// One backend's requests decided so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The backend's name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// Requests decided (answered or to be answered, closed or reset).
    pub requests: u64,
    /// Of which answered 5xx, closed or reset.
    pub failed: u64,
}

impl Tally {
    /// Each backend's counts now, in fleet order.
    pub fn served(&self) -> Vec<Served> {
        self.0
            .iter()
            .map(|b| {
                let (ok, error, close, reset) = b.counters.totals();
                Served {
                    name: b.name().to_owned(),
                    addr: b.addr,
                    requests: ok + error + close + reset,
                    failed: error + close + reset,
                }
            })
            .collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Binds every backend (and the control endpoint), then serves them on the current runtime.
/// The fleet's clock starts once everything is bound.
///
/// # Errors
/// [`ServeError`] when an address cannot be bound; nothing is left running then.
pub async fn start(options: ServeOptions) -> Result<Running, ServeError> {
    let listeners = bind_all(&options).await?;
    let control = match options.control {
        Some(addr) => Some(bind_control(addr, options.control_fallback).await?),
        None => None,
    };
    let shared = Shared {
        start: tokio::time::Instant::now(),
        nagle: options.nagle,
        overrides: options.overrides,
        precise: options.precise_timer,
        serve_abandoned: options.serve_abandoned,
    };
    let metrics = Arc::new(Metrics::default());
    let mut running = Running {
        backends: Vec::new(),
        control: control.as_ref().map(|(_, addr)| *addr),
        tasks: Vec::new(),
        control_server: None,
    };
    let specs = options.fleet.backends.iter().zip(listeners).enumerate();
    for (i, (spec, (listener, addr))) in specs {
        let counters = metrics.backend(&spec.name);
        let seed = options.fleet.backend_seed(i);
        let backend = Backend::new((i, addr), spec.clone(), seed, shared, counters);
        let backend = Arc::new(backend);
        running
            .tasks
            .push(tokio::spawn(driver::run(backend.clone())));
        let accept = listener::accept_loop(backend.clone(), listener);
        running.tasks.push(tokio::spawn(accept));
        running.backends.push(backend);
    }
    if let Some((listener, addr)) = control {
        let backends = running.backends.clone();
        let ctl = Arc::new(Control { backends, metrics });
        let server =
            control::serve(ctl, listener).map_err(|source| ServeError::Control { addr, source })?;
        running.control_server = Some(server);
    }
    Ok(running)
}

async fn bind_control(
    addr: SocketAddr,
    fallback: bool,
) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
    let error = |source| ServeError::Control { addr, source };
    let listener = match tailguard_http::tcp::bind(addr).await {
        Err(e) if fallback && e.kind() == std::io::ErrorKind::AddrInUse => {
            tailguard_http::tcp::bind(SocketAddr::new(addr.ip(), 0))
                .await
                .map_err(error)?
        }
        other => other.map_err(error)?,
    };
    let bound = listener.local_addr().map_err(error)?;
    Ok((listener, bound))
}

async fn bind_all(
    options: &ServeOptions,
) -> Result<Vec<(tokio::net::TcpListener, SocketAddr)>, ServeError> {
    let count = options.fleet.backends.len();
    let base = options.listen.port();
    if base != 0 && usize::from(base) + count - 1 > usize::from(u16::MAX) {
        return Err(ServeError::Ports { count, port: base });
    }
    let mut out = Vec::with_capacity(count);
    for (i, spec) in options.fleet.backends.iter().enumerate() {
        let mut addr = options.listen;
        if base != 0 {
            addr.set_port(base + i as u16);
        }
        let bind_err = |source| ServeError::Bind {
            backend: spec.name.clone(),
            addr,
            source,
        };
        let listener = tailguard_http::tcp::bind(addr).await.map_err(bind_err)?;
        let bound = listener.local_addr().map_err(bind_err)?;
        out.push((listener, bound));
    }
    Ok(out)
}

/// Runs `tailguard serve`: builds a runtime with `threads` workers (1: single-threaded), serves
/// the fleet, prints the banner to stdout, and returns on Ctrl-C.
///
/// # Errors
/// [`ServeError`] when the runtime cannot start or an address cannot be bound.
pub fn run(options: ServeOptions, threads: usize) -> Result<(), ServeError> {
    // One thread: a current-thread runtime, which spent about 10% less CPU per request than a
    // one-worker multi-threaded runtime in bench/serve on a busy machine.
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .map_err(ServeError::Runtime)?;
    runtime.block_on(async {
        let running = start(options).await?;
        // A closed stdout (`| head`) does not stop the backends: they serve on regardless.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), running.banner().as_bytes());
        tokio::signal::ctrl_c().await.map_err(ServeError::Runtime)?;
        drop(running);
        Ok(())
    })
}
