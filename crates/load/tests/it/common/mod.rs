//! Helpers shared by the load generator's integration tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_load::{Config, Report, Target};
use tailguard_record::Record;

/// A quiet configuration against `url`: 1 s intervals, no output files, no pre-flight request
/// (tests count requests and connections exactly; `preflight.rs` tests the check itself).
pub fn config(url: &str, rate: f64, duration: Duration) -> Config {
    let mut cfg = Config::new(vec![Target::parse(url).expect("test URL")]);
    cfg.rate = rate;
    cfg.duration = Some(duration);
    cfg.interval = Duration::from_secs(1);
    cfg.threads = 1;
    cfg.quiet = true;
    cfg.preflight = false;
    cfg
}

/// Runs `cfg`, returning the report and the text it printed.
pub fn run(cfg: Config) -> (Report, String) {
    let mut out = Vec::new();
    let report = tailguard_load::run(cfg, &mut out).expect("run succeeds");
    (report, String::from_utf8(out).expect("utf-8 report"))
}

/// Installs a hook that keeps every record, and returns where they go.
pub fn keep_records(cfg: &mut Config) -> Arc<Mutex<Vec<Record>>> {
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    cfg.on_record = Some(Arc::new(move |r: &Record| sink.lock().unwrap().push(*r)));
    records
}

/// Held by the tests that time a run on the wall clock (tier 2): one at a time, so a test that
/// keeps a core busy (an interim flood) does not stretch another's send lag. The rate and
/// replay accuracy test once failed at 1.17 ms of send lag p99 (its bound is 1 ms) while the
/// flood test ran beside it on the 2-core machine.
pub static WALL_CLOCK: Mutex<()> = Mutex::new(());

/// Takes [`WALL_CLOCK`] (a test that panicked while holding it does not block the rest).
pub fn wall_clock() -> std::sync::MutexGuard<'static, ()> {
    WALL_CLOCK.lock().unwrap_or_else(|p| p.into_inner())
}
