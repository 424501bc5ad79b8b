//! Running the proxy as a process: `threads` serving threads, each with its own runtime and
//! listener ([`crate::start_on`]); SIGHUP reloads the configuration file (invalid files, and
//! files changing what only a restart applies, are reported and the running configuration
//! kept), SIGTERM and SIGINT drain and exit. The file is read and parsed
//! on a blocking thread, never on the runtime that serves requests, and read bounded
//! ([`crate::config_file`]: a regular file only, within a timeout).
//!
//! A reload in progress never holds up SIGTERM: the signal loop keeps listening while a
//! reload runs, a signal to stop abandons it, and the runtime is shut down without waiting
//! for whatever it left on the blocking pool.

use crate::config::Config;
use crate::start::{start_on, StartError};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// How long the process waits, once drained, for blocking work it leaves behind (an
/// abandoned reload's parse) before it exits anyway.
const EXIT_WAIT: Duration = Duration::from_millis(100);

/// Where the configuration comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Built from flags: SIGHUP has nothing to re-read.
    Fixed(Box<Config>),
    /// A YAML file, re-read on SIGHUP.
    File(PathBuf),
}

impl Source {
    fn load(&self) -> Result<Config, StartError> {
        match self {
            Source::Fixed(c) => Ok((**c).clone()),
            Source::File(path) => Ok(crate::yaml::load(path)?),
        }
    }

    /// [`Source::load`] on the blocking pool, so a slow file never stalls serving.
    async fn load_off_runtime(&self) -> Result<Config, StartError> {
        let source = self.clone();
        match tokio::task::spawn_blocking(move || source.load()).await {
            Ok(result) => result,
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
}

/// The largest `threads` accepted.
pub const MAX_THREADS: usize = 1024;

/// Runs the proxy on `threads` serving threads until SIGTERM or SIGINT.
///
/// # Errors
/// [`StartError`] when the configuration is invalid or a listener cannot bind.
pub fn run(source: Source, threads: usize) -> Result<(), StartError> {
    if threads > MAX_THREADS {
        return Err(StartError::Runtime(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{threads} threads: at most {MAX_THREADS}"),
        )));
    }
    // A current-thread runtime per serving thread: no work stealing, no cross-thread wake-up
    // on the request path ([`crate::start_on`]).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(StartError::Runtime)?;
    let result = runtime.block_on(serve(source, threads));
    // Dropping a runtime waits for every blocking task; a stuck one must not keep the
    // drained process alive.
    runtime.shutdown_timeout(EXIT_WAIT);
    result
}

async fn serve(source: Source, threads: usize) -> Result<(), StartError> {
    // The handlers first: a SIGHUP that arrives while the proxy starts is held for the loop
    // below, not left to its default action (which ends the process); SIGTERM and SIGINT end
    // the start at once, as their default actions did.
    let mut signals = Signals::install()?;
    let starting = async { start_on(source.load_off_runtime().await?, threads).await };
    let proxy = tokio::select! {
        proxy = starting => proxy?,
        () = signals.stop() => {
            eprintln!("stopped while starting");
            return Ok(());
        }
    };
    eprintln!("tailguard proxy listening on {}", proxy.addr());
    let nofile = tailguard_http::fds::current().map_or(u64::MAX, |n| n.soft);
    eprintln!(
        "at most {} connections (file descriptor limit {nofile})",
        proxy.max_connections()
    );
    if let Some(a) = proxy.admin_addr() {
        eprintln!("admin on http://{a}/ (metrics, ready, live, endpoints)");
    }
    signals.serve(&source, &proxy).await;
    eprintln!("draining");
    proxy.shutdown().await;
    Ok(())
}

/// A reload in progress.
type Reloading<'a> = Pin<Box<dyn Future<Output = Result<(), StartError>> + 'a>>;

/// The signals the proxy acts on, taken from their default actions at start.
struct Signals {
    hup: Signal,
    term: Signal,
    int: Signal,
    /// Reopens the access log (logrotate's `postrotate`).
    usr1: Signal,
}

impl Signals {
    fn install() -> Result<Self, StartError> {
        let sig = |kind| signal(kind).map_err(StartError::Runtime);
        Ok(Signals {
            hup: sig(SignalKind::hangup())?,
            term: sig(SignalKind::terminate())?,
            int: sig(SignalKind::interrupt())?,
            usr1: sig(SignalKind::user_defined1())?,
        })
    }

    /// Until SIGTERM or SIGINT.
    async fn stop(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// Reloads on SIGHUP until SIGTERM or SIGINT, which abandon a reload in progress.
    async fn serve(mut self, source: &Source, proxy: &crate::start::Proxy) {
        // The reload in progress, if any: polled beside the signals, dropped by a signal to
        // stop.
        let mut reloading: Option<Reloading<'_>> = None;
        loop {
            tokio::select! {
                _ = self.hup.recv() => {
                    if reloading.is_some() {
                        eprintln!("reload already in progress; SIGHUP ignored");
                    } else {
                        reloading = Some(Box::pin(reload(source, proxy)));
                    }
                }
                Some(done) = maybe(&mut reloading) => {
                    reloading = None;
                    match done {
                        Ok(()) => eprintln!("configuration reloaded"),
                        Err(err) => eprintln!("reload refused: {err}"),
                    }
                }
                _ = self.usr1.recv() => proxy.shared().reopen_access_log(),
                _ = self.term.recv() => break,
                _ = self.int.recv() => break,
            }
        }
        if reloading.is_some() {
            eprintln!("reload abandoned: shutting down");
        }
    }
}

async fn reload(source: &Source, proxy: &crate::start::Proxy) -> Result<(), StartError> {
    let config = source.load_off_runtime().await?;
    proxy.reload(&config).await
}

/// The output of `f` when there is one to wait for; pending for ever otherwise (so a
/// `select!` branch on it is disabled by its pattern).
async fn maybe<F: Future + Unpin>(f: &mut Option<F>) -> Option<F::Output> {
    match f {
        Some(f) => Some(f.await),
        None => std::future::pending().await,
    }
}
