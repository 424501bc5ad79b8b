//! How to run a scenario.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tailguard_report::Unit;

/// How to run a scenario.
#[derive(Clone, Debug)]
pub struct Options {
    /// Arms to run by name (`all` for every arm); `None`: the scenario's seed comparison.
    pub arms: Option<Vec<String>>,
    /// Load length per arm (per phase and rate for `overhead` and `nagle`).
    pub duration: Option<Duration>,
    /// Interval report period (default 5 s, 1 s for `gc-pause`).
    pub interval: Option<Duration>,
    /// Latency units.
    pub unit: Unit,
    /// Run the simulator on the same arms and show its prediction.
    pub predict: bool,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// `overhead`: run the tailguard arm as this binary's `proxy` subcommand in a child process
    /// (its own CPU and memory); `None`: in this process (CPU only).
    pub proxy_exe: Option<PathBuf>,
    /// `overhead`: include HAProxy and nginx when installed.
    pub peers: bool,
    /// `overhead`: gRPC ping calls on one HTTP/2 connection instead of HTTP/1.1 requests.
    pub grpc: bool,
    /// `nagle`: the rates to try (default 10, 100, 1,000 and 10,000 req/s).
    pub rates: Option<Vec<f64>>,
    /// `overhead`: interleaved rounds per phase, each path's median reported (default 3).
    pub rounds: Option<usize>,
    /// `overhead`: the proxy under test on a CPU of its own, the load generator and the
    /// backend on the others (needs two CPUs).
    pub pin: bool,
    /// Run a balancer scenario's arms at the same time, each on its own fleet (as seed 000's
    /// two clusters ran), instead of one after another.
    pub together: bool,
    /// Serve the live page here while the run lasts; `None`: no page.
    pub live: Option<SocketAddr>,
    /// When the live page's port is taken, take any free port on the same host instead of
    /// failing (for the default address; an address given is kept to).
    pub live_fallback: bool,
    /// Set to stop between arms (Ctrl-C); the load generator stops itself on Ctrl-C.
    pub stop: Arc<AtomicBool>,
}

/// Where the live page is served unless told otherwise.
pub const LIVE_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9902);

impl Default for Options {
    fn default() -> Self {
        Options {
            arms: None,
            duration: None,
            interval: None,
            unit: Unit::Auto,
            predict: true,
            progress: false,
            proxy_exe: None,
            peers: true,
            grpc: false,
            rates: None,
            rounds: None,
            pin: false,
            together: false,
            live: None,
            live_fallback: false,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}
