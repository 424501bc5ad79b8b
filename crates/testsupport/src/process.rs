//! A real process in a test: its output read while it runs, its end awaited for a bounded
//! time.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::Duration;

const POLL: Duration = Duration::from_millis(20);

/// Reads `pipe` to its end on a thread of its own, so a full pipe never stalls the child.
pub fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The exit status of `child`, or `None` after killing it when it outlives `limit`.
///
/// # Panics
/// When the child's status cannot be read.
pub fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = crate::Deadline::after(limit);
    loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            return Some(status);
        }
        if deadline.passed() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        // A real sleep is the point here: the child is a real process.
        thread::sleep(POLL);
    }
}

/// Runs `cmd` (stdin closed) to its end, its output read while it runs: the exit status,
/// stdout and stderr, or `None` after killing it when it outlives `limit`.
///
/// # Panics
/// When the command cannot be started.
pub fn output_within(
    mut cmd: std::process::Command,
    limit: Duration,
) -> (Option<ExitStatus>, String, String) {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let out = drain(child.stdout.take().expect("piped"));
    let err = drain(child.stderr.take().expect("piped"));
    let status = wait_or_kill(&mut child, limit);
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    (status, out, err)
}

/// Reads `pipe` line by line on its own thread while the process runs: each line arrives on
/// the receiver, which disconnects when the pipe closes.
pub fn lines(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// A Go tool `name` on the PATH or where `go install` puts it (`$GOPATH/bin`, `~/go/bin`).
///
/// # Panics
/// When it is missing, naming the module to install (.ci/run installs it).
pub fn go_tool(name: &str, module: &str) -> std::path::PathBuf {
    use std::path::PathBuf;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join("go"));
    let gopath = std::env::var_os("GOPATH").map(PathBuf::from);
    std::env::split_paths(&path)
        .chain(gopath.into_iter().chain(home).map(|d| d.join("bin")))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is missing: go install {module}"))
}

/// Runs h2spec (the HTTP/2 conformance suite, v2.2.1) against 127.0.0.1:`port`, on a blocking
/// thread within 120 s, and asserts that all 145 of its cases pass.
///
/// # Panics
/// When h2spec is missing, fails a case, or does not finish in time.
pub async fn h2spec_passes(port: u16) {
    let h2spec = go_tool(
        "h2spec",
        "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible",
    );
    let mut cmd = std::process::Command::new(h2spec);
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-o", "5"]);
    let (status, out, err) =
        tokio::task::spawn_blocking(move || output_within(cmd, Duration::from_secs(120)))
            .await
            .expect("h2spec's thread");
    let summary = out.lines().last().unwrap_or_default().to_owned();
    assert!(
        status.is_some_and(|s| s.success()),
        "h2spec failed: {summary}\n{}\n{err}",
        out.split("Failures:").nth(1).unwrap_or_default()
    );
    assert_eq!(
        summary, "145 tests, 145 passed, 0 skipped, 0 failed",
        "{out}"
    );
}
