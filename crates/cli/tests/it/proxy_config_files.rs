//! `tailguard proxy` reads its configuration only from regular files, without ever blocking:
//! a FIFO (or any other non-regular file) as the configuration path is refused at start (exit
//! 2, naming the path) and on SIGHUP (logged, the running configuration kept), and SIGTERM
//! still drains and exits. Before, opening a FIFO blocked the reload for good and SIGTERM was
//! never acted on.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{get, Proxy, DEADLINE};
use tailguard_testsupport::{Deadline, TestServer};

/// Makes a FIFO at `path` (coreutils' `mkfifo`, as the other tests use `kill`).
fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn temp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "tailguard-config-files-{tag}-{}.yaml",
        std::process::id()
    ))
}

#[test]
fn a_fifo_as_the_configuration_is_refused_at_start_with_exit_2_naming_it() {
    let fifo = temp("start");
    mkfifo(&fifo);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["proxy", "--config"])
        .arg(&fifo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tailguard proxy");
    let until = Deadline::after(DEADLINE);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if until.passed() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&fifo);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let status = status.unwrap_or_else(|| panic!("still running after {DEADLINE:?}: {stderr}"));
    assert_eq!(status.code(), Some(2), "{stderr}");
    let named = format!("{}: not a regular file (a FIFO)", fifo.display());
    assert!(stderr.contains(&named), "{stderr}");
}

#[test]
fn a_fifo_swapped_in_is_refused_on_reload_and_sigterm_still_exits() {
    let backend = TestServer::builder().spawn();
    let mut proxy = Proxy::start("fifo-reload", &[backend.addr()]);
    mkfifo(&proxy.config);
    proxy.signal("HUP");
    let line = proxy.wait_for("reload refused: ");
    let named = format!("{}: not a regular file (a FIFO)", proxy.config.display());
    assert!(line.contains(&named), "{line}");
    assert_eq!(get(proxy.addr), Ok(200), "serving on the old configuration");
    proxy.signal("TERM");
    proxy.wait_for("draining");
    let status = proxy.exit_status();
    assert_eq!(status.code(), Some(0), "{status}");
}
