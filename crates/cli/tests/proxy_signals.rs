//! `tailguard proxy` as a process: SIGHUP reloads the configuration file without dropping a
//! request in flight, SIGTERM drains (the request in flight completes, new connections are
//! refused) and exits 0.
//!
//! Readiness comes from the proxy's own stderr lines ("listening on", "configuration
//! reloaded", "draining"), read with deadlines; the child is killed when a test ends however it
//! ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tailguard_testsupport::TestServer;

/// How long any single wait in these tests may take before it fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// A moment `DEADLINE` from now, on the real clock: the waits below are on a real process.
#[derive(Clone, Copy)]
struct Deadline(Instant);

impl Deadline {
    #[allow(clippy::disallowed_methods)] // a real child process runs on the real clock
    fn start() -> Self {
        Self(Instant::now() + DEADLINE)
    }

    #[allow(clippy::disallowed_methods)] // as above
    fn left(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    fn passed(self) -> bool {
        self.left().is_zero()
    }
}

/// A running `tailguard proxy --config FILE`; killed on drop.
struct Proxy {
    child: Child,
    lines: Receiver<String>,
    addr: SocketAddr,
    config: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

fn yaml(upstreams: &[SocketAddr]) -> String {
    let list: Vec<String> = upstreams.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "admin: {{ip: 127.0.0.1, port: 0}}\n\
         servers: [{{ip: 127.0.0.1, port: 0}}]\n\
         limits: {{drainMs: 10000}}\n\
         services:\n  - name: web\n    upstreams: [{}]\n    client:\n      \
         loadBalancer: {{kind: roundRobin}}\n      failureAccrual: {{kind: none}}\n",
        list.join(", ")
    )
}

impl Proxy {
    fn start(tag: &str, upstreams: &[SocketAddr]) -> Self {
        let config = std::env::temp_dir().join(format!(
            "tailguard-proxy-signals-{tag}-{}.yaml",
            std::process::id()
        ));
        std::fs::write(&config, yaml(upstreams)).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
            .args(["proxy", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tailguard proxy");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut proxy = Self {
            child,
            lines,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            config,
        };
        let line = proxy.wait_for("tailguard proxy listening on ");
        proxy.addr = line.rsplit(' ').next().unwrap().parse().unwrap();
        proxy
    }

    /// The first stderr line starting with `prefix`, within the deadline.
    fn wait_for(&self, prefix: &str) -> String {
        let until = Deadline::start();
        loop {
            match self.lines.recv_timeout(until.left()) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!("no stderr line starting with {prefix:?}: {e}"),
            }
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {name} failed");
    }

    fn rewrite(&self, upstreams: &[SocketAddr]) {
        std::fs::write(&self.config, yaml(upstreams)).unwrap();
    }

    fn exit_status(&mut self) -> ExitStatus {
        let until = Deadline::start();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(!until.passed(), "the proxy did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// One `GET /` on a fresh connection; the status code, or an error string.
fn get(addr: SocketAddr) -> Result<u16, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {text:?}"))
}

fn in_background(addr: SocketAddr) -> JoinHandle<Result<u16, String>> {
    std::thread::spawn(move || get(addr))
}

/// Polls until `server` has seen `n` requests.
fn wait_hits(server: &TestServer, n: u64) {
    let until = Deadline::start();
    while server.hits() < n {
        assert!(!until.passed(), "{} of {n} requests arrived", server.hits());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn proxy_sighup_reloads_the_file_and_keeps_the_request_in_flight() {
    let slow = TestServer::builder()
        .delay(Duration::from_millis(1500))
        .spawn();
    let added = TestServer::builder().spawn();
    let proxy = Proxy::start("hup", &[slow.addr()]);
    let in_flight = in_background(proxy.addr);
    wait_hits(&slow, 1);
    proxy.rewrite(&[slow.addr(), added.addr()]);
    proxy.signal("HUP");
    proxy.wait_for("configuration reloaded");
    // Round robin over the new set: the added upstream takes every other request.
    let fast: Vec<_> = (0..4).map(|_| in_background(proxy.addr)).collect();
    for r in fast {
        assert_eq!(r.join().unwrap(), Ok(200));
    }
    assert_eq!(added.hits(), 2, "round robin gives the added upstream half");
    assert_eq!(slow.hits(), 3, "the request in flight and two of the four");
    assert_eq!(
        in_flight.join().unwrap(),
        Ok(200),
        "reload dropped the request"
    );
    // An invalid file is refused and the running configuration kept.
    std::fs::write(&proxy.config, "servers: [oops").unwrap();
    proxy.signal("HUP");
    proxy.wait_for("reload refused: ");
    assert_eq!(get(proxy.addr), Ok(200));
}

#[test]
fn proxy_sigterm_drains_the_request_in_flight_refuses_new_ones_and_exits_0() {
    let slow = TestServer::builder()
        .delay(Duration::from_millis(1500))
        .spawn();
    let mut proxy = Proxy::start("term", &[slow.addr()]);
    let in_flight = in_background(proxy.addr);
    wait_hits(&slow, 1);
    proxy.signal("TERM");
    proxy.wait_for("draining");
    let until = Deadline::start();
    while TcpStream::connect(proxy.addr).is_ok() {
        assert!(!until.passed(), "the listener still accepts");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        in_flight.join().unwrap(),
        Ok(200),
        "drain dropped the request"
    );
    let status = proxy.exit_status();
    assert_eq!(status.code(), Some(0), "{status}");
}
