//! The files a proxy is configured with besides its YAML (file discovery's endpoint list, the
//! TLS certificate and key) are read like it: a FIFO is refused at start, naming the key and
//! the path, instead of blocking start (and, on reload, the proxy) for good.
//!
//! Each start runs in a task of its own and is waited for with a deadline; a start still
//! blocked then is released by opening the FIFO for writing (its reader sees end of file), so
//! the test fails by itself rather than hanging.

use crate::support;

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::config;
use tailguard_proxy::config::{Discovery, ServiceConfig, TlsConfig, Upstream};
use tailguard_proxy::StartError;

fn mkfifo(tag: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("tailguard-proxy-fifo-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let status = Command::new("mkfifo").arg(&path).status().expect("mkfifo");
    assert!(status.success());
    path
}

/// Opens `fifo` for writing and closes it: a reader blocked in `open` or `read` goes on.
fn release(fifo: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo);
}

/// Starts a proxy on `config`; the error it refuses with, within 10 s.
async fn start_error(fifo: &Path, config: tailguard_proxy::config::Config) -> String {
    let task = tokio::spawn(tailguard_proxy::start(config));
    let outcome = tokio::time::timeout(Duration::from_secs(10), task).await;
    release(fifo);
    let _ = std::fs::remove_file(fifo);
    match outcome {
        Ok(Ok(Err(err))) => {
            assert!(matches!(
                err,
                StartError::Discovery { .. } | StartError::Tls(_)
            ));
            err.to_string()
        }
        Ok(Ok(Ok(_))) => panic!("started on a FIFO"),
        Ok(Err(join)) => panic!("start panicked: {join}"),
        Err(_) => panic!("start still blocked on the FIFO after 10 s"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_as_the_discovery_file_is_refused_at_start_naming_it() {
    let fifo = mkfifo("discovery");
    let mut service = ServiceConfig::new("web", Vec::<Upstream>::new());
    service.discovery = Discovery::File {
        path: fifo.clone(),
        interval: Duration::from_secs(1),
    };
    let err = start_error(&fifo, config(service)).await;
    let want = format!(
        "services[web].namer: {path}: not a regular file (a FIFO)",
        path = fifo.display()
    );
    assert!(err.starts_with(&want), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_as_the_tls_certificate_is_refused_at_start_naming_it() {
    let fifo = mkfifo("cert");
    let up = Upstream::new("127.0.0.1:9".parse().unwrap());
    let mut config = config(ServiceConfig::new("web", vec![up]));
    config.tls = Some(TlsConfig {
        cert: fifo.clone(),
        key: fifo.clone(),
    });
    let err = start_error(&fifo, config).await;
    let want = format!(
        "servers[0].tls.certPath (--tls-cert): {path}: not a regular file (a FIFO)",
        path = fifo.display()
    );
    assert!(err.starts_with(&want), "{err}");
}
