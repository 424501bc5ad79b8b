//! The open-loop load generator behind `tailguard load`.
//!
//! Requests are released on a schedule ([`tailguard_pacing`]) by a pacer on each worker thread,
//! whatever the server does, and each one's latency is measured from the time it was *due*:
//! when a server stalls, the requests due during the stall are counted with the wait they
//! would have seen (no coordinated omission). At most `concurrency` requests are in flight;
//! requests due while every connection is busy wait their turn, and the wait is counted too.
//! Service time (from the actual send) and send lag are kept beside latency, so a slow client
//! is told apart from a slow server.
//!
//! `--rate 0` switches to a closed loop: `concurrency` workers each send their next request
//! as soon as the previous one completes, for maximum throughput.
//!
//! # Example
//! ```no_run
//! use std::time::Duration;
//! use tailguard_load::{run, Config, Target};
//!
//! let mut cfg = Config::new(vec![Target::parse("http://127.0.0.1:9000/").unwrap()]);
//! cfg.rate = 1000.0;
//! cfg.duration = Some(Duration::from_secs(10));
//! let report = run(cfg, &mut std::io::stdout()).unwrap();
//! if let Some(latency) = report.summary.totals.latency_us {
//!     println!("p99 = {}µs", latency.p99);
//! }
//! ```

#![warn(missing_docs)]

pub mod check;
mod clock;
pub mod config;
mod conn;
pub mod files;
pub mod grpc;
mod metrics;
pub mod output;
mod pacer;
mod pick;
mod preflight;
pub mod reflection;
pub mod replay;
mod reporter;
mod request;
pub mod requests;
mod resend;
mod run;
mod selfcheck;
pub mod slo;
mod stream;
pub mod sweep;
pub mod target;
mod threads;
mod tls;
mod worker;

pub use config::{Config, ConfigError, H1Client, Part, Protocol, RecordHook};
pub use run::{run, LoadError, Report};
pub use target::Target;

/// Writes `tailguard: {line}` to stderr; a closed stderr is not an error worth stopping for.
pub(crate) fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "tailguard: {line}");
}

/// The User-Agent sent unless `--header` sets one, and the producer named in logs.
pub const USER_AGENT: &str = concat!("tailguard/", env!("CARGO_PKG_VERSION"));
