//! Running the proxy as a process: a Tokio runtime on `threads` threads, SIGHUP reloads the configuration
//! file (invalid files, and files changing what only a restart applies, are reported and the
//! running configuration kept), SIGTERM and SIGINT drain and exit. The file is read and parsed
//! on a blocking thread, never on the runtime that serves requests.

use crate::config::Config;
use crate::start::{start, StartError};
use std::path::PathBuf;
use tokio::signal::unix::{signal, SignalKind};

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

/// Runs the proxy on `threads` worker threads until SIGTERM or SIGINT.
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
    // One thread: a current-thread runtime, with no cross-thread wake-ups on the request path.
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let runtime = builder.enable_all().build().map_err(StartError::Runtime)?;
    runtime.block_on(serve(source))
}

async fn serve(source: Source) -> Result<(), StartError> {
    let config = source.load_off_runtime().await?;
    let proxy = start(config).await?;
    eprintln!("tailguard proxy listening on {}", proxy.addr());
    let nofile = tailguard_http::fds::current().map_or(u64::MAX, |n| n.soft);
    eprintln!(
        "at most {} connections (file descriptor limit {nofile})",
        proxy.max_connections()
    );
    if let Some(a) = proxy.admin_addr() {
        eprintln!("admin on http://{a}/ (metrics, ready, live, endpoints)");
    }
    let sig = |kind| signal(kind).map_err(StartError::Runtime);
    let (mut hup, mut term, mut int) = (
        sig(SignalKind::hangup())?,
        sig(SignalKind::terminate())?,
        sig(SignalKind::interrupt())?,
    );
    loop {
        tokio::select! {
            _ = hup.recv() => match source.load_off_runtime().await {
                Ok(config) => match proxy.reload(&config).await {
                    Ok(()) => eprintln!("configuration reloaded"),
                    Err(err) => eprintln!("reload refused: {err}"),
                },
                Err(err) => eprintln!("reload refused: {err}"),
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    eprintln!("draining");
    proxy.shutdown().await;
    Ok(())
}
