//! Prometheus's own tool in tests: `promtool check metrics` on an exposition, and any other
//! check (`check config`, `check rules`), each run bounded.

use crate::process::{drain, wait_or_kill};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

/// Fetches `http://{addr}/metrics` with a plain `GET` (no `Accept` header, as curl sends it)
/// and returns the `Content-Type` and the body.
pub fn scrape(addr: std::net::SocketAddr) -> (String, String) {
    let mut conn = std::net::TcpStream::connect(addr).expect("connect to the metrics port");
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw)
        .expect("read the metrics response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let kind = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    (kind, body.to_owned())
}

/// The longest a promtool run may take before it is killed and the test fails.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Runs `promtool` with `args`, `input` on its standard input, for at most [`LIMIT`];
/// returns whether it succeeded and what it printed (standard output, then error). Fails,
/// naming the Debian package, when promtool is not installed (`.ci/run` installs it).
pub fn run(args: &[&str], input: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool: {e}; install it: apt-get install -y prometheus"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    // Written and read on threads of their own: a full pipe never stalls the wait below.
    let writer = thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let Some(status) = wait_or_kill(&mut child, LIMIT) else {
        panic!("promtool {args:?} still running after {LIMIT:?}: killed");
    };
    let _ = writer.join();
    let said = format!("{}{}", stdout.join().unwrap(), stderr.join().unwrap());
    (status.success(), said)
}

/// Asserts that `promtool check metrics` accepts `exposition` with no lint at all.
pub fn assert_clean(exposition: &str) {
    let (ok, said) = run(&["check", "metrics"], exposition);
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics failed:\n{said}\n--- exposition ---\n{exposition}"
    );
}
