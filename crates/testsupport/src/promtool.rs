//! `promtool check metrics`, the Prometheus project's own linter, on an exposition.

use std::io::Write;
use std::process::{Command, Stdio};

/// Fetches `http://{addr}/metrics` with a plain `GET` (no `Accept` header, as curl sends it)
/// and returns the `Content-Type` and the body.
pub fn scrape(addr: std::net::SocketAddr) -> (String, String) {
    use std::io::Read;
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

/// Asserts that `promtool check metrics` accepts `exposition` with no lint at all. Fails,
/// naming the Debian package, when promtool is not installed (`.ci/run` installs it).
pub fn assert_clean(exposition: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool: {e}; install it: apt-get install -y prometheus"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {}\n{said}\n--- exposition ---\n{exposition}",
        out.status
    );
}
