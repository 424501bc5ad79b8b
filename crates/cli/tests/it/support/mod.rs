//! `tailguard proxy` as a child process for the CLI tests: started on a YAML file, its stderr
//! read line by line with deadlines, killed on drop; and bounded plain-socket clients.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::Duration;
use tailguard_testsupport::{Deadline, TestServer};

/// How long any single wait in these tests may take before it fails.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A running `tailguard proxy --config FILE`; killed on drop.
pub struct Proxy {
    pub child: Child,
    lines: Receiver<String>,
    /// Every line read so far, in order.
    seen: RefCell<Vec<String>>,
    pub addr: SocketAddr,
    pub config: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

pub const LIMITS: &str = "{drainMs: 10000}";

pub fn yaml(upstreams: &[SocketAddr]) -> String {
    yaml_with(upstreams, LIMITS)
}

pub fn yaml_with(upstreams: &[SocketAddr], limits: &str) -> String {
    let list: Vec<String> = upstreams.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "admin: {{ip: 127.0.0.1, port: 0}}\n\
         servers: [{{ip: 127.0.0.1, port: 0}}]\n\
         limits: {limits}\n\
         services:\n  - name: web\n    upstreams: [{}]\n    client:\n      \
         loadBalancer: {{kind: roundRobin}}\n      failureAccrual: {{kind: none}}\n",
        list.join(", ")
    )
}

impl Proxy {
    pub fn start(tag: &str, upstreams: &[SocketAddr]) -> Self {
        Self::start_with(tag, &yaml(upstreams), None)
    }

    /// Runs the proxy on `yaml`, under `prlimit --nofile=SOFT:HARD` if `nofile` is given.
    pub fn start_with(tag: &str, yaml: &str, nofile: Option<(u64, u64)>) -> Self {
        let config = std::env::temp_dir().join(format!(
            "tailguard-proxy-signals-{tag}-{}.yaml",
            std::process::id()
        ));
        std::fs::write(&config, yaml).unwrap();
        let mut command = match nofile {
            None => Command::new(env!("CARGO_BIN_EXE_tailguard")),
            Some((soft, hard)) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={soft}:{hard}"))
                    .arg(env!("CARGO_BIN_EXE_tailguard"));
                c
            }
        };
        let mut child = command
            .args(["proxy", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tailguard proxy");
        let stderr = child.stderr.take().unwrap();
        let lines = tailguard_testsupport::process::lines(stderr);
        let mut proxy = Self {
            child,
            lines,
            seen: RefCell::default(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            config,
        };
        let line = proxy.wait_for("tailguard proxy listening on ");
        proxy.addr = line.rsplit(' ').next().unwrap().parse().unwrap();
        proxy
    }

    /// The first stderr line starting with `prefix`, within the deadline.
    pub fn wait_for(&self, prefix: &str) -> String {
        self.wait_for_line(|line| line.starts_with(prefix), prefix)
    }

    /// The first stderr line containing `text`, within the deadline.
    pub fn wait_for_containing(&self, text: &str) -> String {
        self.wait_for_line(|line| line.contains(text), text)
    }

    fn wait_for_line(&self, matches: impl Fn(&str) -> bool, what: &str) -> String {
        let until = Deadline::after(DEADLINE);
        loop {
            match self.lines.recv_timeout(until.left()) {
                Ok(line) => {
                    self.seen.borrow_mut().push(line.clone());
                    if matches(&line) {
                        return line;
                    }
                }
                Err(e) => panic!("no stderr line with {what:?}: {e}"),
            }
        }
    }

    /// How many stderr lines printed so far contain `text`.
    pub fn count_lines(&self, text: &str) -> usize {
        let mut seen = self.seen.borrow_mut();
        seen.extend(self.lines.try_iter());
        seen.iter().filter(|l| l.contains(text)).count()
    }

    /// CPU time the process has used, in clock ticks (user + system, `/proc/PID/stat`).
    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The command name may hold spaces; the fields after it are space separated.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {name} failed");
    }

    pub fn rewrite(&self, upstreams: &[SocketAddr]) {
        std::fs::write(&self.config, yaml(upstreams)).unwrap();
    }

    pub fn exit_status(&mut self) -> ExitStatus {
        let until = Deadline::after(DEADLINE);
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
pub fn get(addr: SocketAddr) -> Result<u16, String> {
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

pub fn in_background(addr: SocketAddr) -> JoinHandle<Result<u16, String>> {
    std::thread::spawn(move || get(addr))
}

/// Polls until `server` has seen `n` requests.
pub fn wait_hits(server: &TestServer, n: u64) {
    let until = Deadline::after(DEADLINE);
    while server.hits() < n {
        assert!(!until.passed(), "{} of {n} requests arrived", server.hits());
        std::thread::sleep(Duration::from_millis(5));
    }
}
