//! Running the proxy as a process: a Tokio runtime on `threads` threads, SIGHUP reloads the configuration
//! file (invalid files are reported and the running configuration kept), SIGTERM and SIGINT
//! drain and exit.

use crate::config::Config;
use crate::{start, StartError};
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
}

/// Runs the proxy on `threads` worker threads until SIGTERM or SIGINT.
///
/// # Errors
/// [`StartError`] when the configuration is invalid or a listener cannot bind.
pub fn run(source: Source, threads: usize) -> Result<(), StartError> {
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
    let config = source.load()?;
    let proxy = start(config).await?;
    eprintln!("tailguard proxy listening on {}", proxy.addr());
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
            _ = hup.recv() => match source.load() {
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
