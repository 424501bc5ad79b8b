//! Proxies in their own processes (HAProxy, nginx, a `tailguard proxy` child) and what they
//! cost, read from `/proc`. Every child is killed and reaped when its [`Child`] is dropped, so
//! an error or Ctrl-C leaves nothing running.

use crate::error::BenchError;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `/proc` reports CPU time in USER_HZ ticks, 100 per second on Linux.
pub(crate) const TICKS_PER_SEC: u64 = 100;

/// A peer proxy the overhead scenario compares with, when it is installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// HAProxy with `nbthread 1`.
    Haproxy,
    /// nginx with one worker process.
    Nginx,
}

impl Peer {
    /// Every peer, in report order.
    pub const ALL: [Peer; 2] = [Peer::Haproxy, Peer::Nginx];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Haproxy => "haproxy",
            Peer::Nginx => "nginx",
        }
    }

    /// The executable, if it is on the PATH.
    pub fn installed(self) -> Option<PathBuf> {
        which(self.name())
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A proxy process listening on `addr`.
#[derive(Debug)]
pub(crate) struct Child {
    process: std::process::Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The process doing the proxying (nginx's worker, not its master).
    worker: u32,
    dir: Option<PathBuf>,
}

impl Child {
    /// The process whose CPU and memory are the proxy's.
    pub(crate) fn pid(&self) -> u32 {
        self.worker
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // nginx's worker outlives a killed master: end it first, by its own pid.
        if self.worker != self.process.id() {
            if let Ok(pid) = i32::try_from(self.worker) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A free port on 127.0.0.1 (bound, read, released: the child binds it next).
fn free_port() -> Result<SocketAddr, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

/// Waits until `addr` accepts connections, or gives up after `limit`.
#[allow(clippy::disallowed_methods)] // Bounds a wait for a child process; not measurement.
fn wait_listening(addr: SocketAddr, limit: Duration, what: &str) -> Result<(), BenchError> {
    let start = Instant::now();
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(BenchError::Peer(format!(
                "{what} did not listen on {addr} within {limit:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn temp_dir(tag: &str) -> Result<PathBuf, BenchError> {
    let dir = std::env::temp_dir().join(format!(
        "tailguard-bench-{tag}-{}-{}",
        std::process::id(),
        free_port()?.port()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Starts `peer` in front of `backend`: HTTP/1.1 on both sides, or with `grpc` HTTP/2 (h2c)
/// on both sides.
pub(crate) fn spawn(peer: Peer, backend: SocketAddr, grpc: bool) -> Result<Child, BenchError> {
    let exe = peer
        .installed()
        .ok_or_else(|| BenchError::Peer(format!("{} is not installed", peer.name())))?;
    let addr = free_port()?;
    let dir = temp_dir(peer.name())?;
    let mut cmd = Command::new(&exe);
    match peer {
        Peer::Haproxy => {
            let cfg = dir.join("haproxy.cfg");
            std::fs::write(&cfg, haproxy_config(addr, backend, grpc))?;
            cmd.arg("-f").arg(&cfg).arg("-db");
        }
        Peer::Nginx => {
            let cfg = dir.join("nginx.conf");
            std::fs::write(&cfg, nginx_config(addr, backend, &dir, grpc))?;
            cmd.arg("-p").arg(&dir).arg("-c").arg(&cfg);
        }
    }
    let process = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| BenchError::Peer(format!("cannot start {}: {e}", exe.display())))?;
    let mut child = Child {
        worker: process.id(),
        process,
        addr,
        dir: Some(dir),
    };
    wait_listening(addr, Duration::from_secs(10), peer.name())?;
    if peer == Peer::Nginx {
        if let Some(w) = child_of(child.process.id()) {
            child.worker = w;
        }
    }
    Ok(child)
}

/// Starts `exe proxy` (a tailguard binary) in front of `backend`, one runtime thread.
pub(crate) fn spawn_tailguard(exe: &Path, backend: SocketAddr) -> Result<Child, BenchError> {
    let addr = free_port()?;
    let admin = free_port()?;
    let process = Command::new(exe)
        .args(["proxy", "--listen", &addr.to_string()])
        .args(["--admin", &admin.to_string()])
        .args(["--upstream", &backend.to_string()])
        .args(["--balancer", "ewma", "--threads", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| BenchError::Peer(format!("cannot start {}: {e}", exe.display())))?;
    let child = Child {
        worker: process.id(),
        process,
        addr,
        dir: None,
    };
    wait_listening(addr, Duration::from_secs(10), "tailguard proxy")?;
    Ok(child)
}

fn haproxy_config(listen: SocketAddr, backend: SocketAddr, grpc: bool) -> String {
    let h2 = if grpc { " proto h2" } else { "" };
    format!(
        "global\n  nbthread 1\n  maxconn 4096\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n  http-reuse always\n\
         frontend fe\n  bind {listen}{h2}\n  default_backend be\n\
         backend be\n  server s1 {backend}{h2}\n"
    )
}

fn nginx_config(listen: SocketAddr, backend: SocketAddr, dir: &Path, grpc: bool) -> String {
    let (listen_opts, pass) = if grpc {
        (" http2", "grpc_pass grpc://backend;")
    } else {
        (
            "",
            "proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\";",
        )
    };
    format!(
        "worker_processes 1;\ndaemon off;\nerror_log stderr warn;\npid {pid};\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 1000000;\n\
         client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp};\n\
         uwsgi_temp_path {tmp}; scgi_temp_path {tmp};\n\
         upstream backend {{ server {backend}; keepalive 64; }}\n\
         server {{ listen {listen}{listen_opts};\n    location / {{ {pass} }}\n  }}\n}}\n",
        pid = dir.join("nginx.pid").display(),
        tmp = dir.display(),
    )
}

/// The first child process of `parent` (nginx's worker).
fn child_of(parent: u32) -> Option<u32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    entries.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        (stat_field(&stat, 4)? == u64::from(parent)).then_some(pid)
    })
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/.../stat` line; the command name in
/// parentheses may hold spaces, so fields are counted after its closing parenthesis.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// CPU time in [`TICKS_PER_SEC`] ticks, as `/proc/.../stat` counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ticks {
    /// In user space.
    pub user: u64,
    /// In the kernel on the process's behalf.
    pub system: u64,
}

impl Ticks {
    /// The time from `earlier` to `self`.
    pub fn since(self, earlier: Ticks) -> Ticks {
        Ticks {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }

    /// User plus system.
    pub fn total(self) -> u64 {
        self.user + self.system
    }
}

fn ticks_of(stat_path: &str) -> Option<Ticks> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    parse_ticks(&stat)
}

/// The user (field 14) and system (field 15) times of a `/proc/.../stat` line.
fn parse_ticks(stat: &str) -> Option<Ticks> {
    Some(Ticks {
        user: stat_field(stat, 14)?,
        system: stat_field(stat, 15)?,
    })
}

/// CPU ticks of process `pid`.
pub(crate) fn cpu_ticks(pid: u32) -> Option<Ticks> {
    ticks_of(&format!("/proc/{pid}/stat"))
}

/// CPU ticks of this process's threads named `name`, together.
pub(crate) fn thread_cpu_ticks(name: &str) -> Option<Ticks> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total = Ticks::default();
    for t in tasks.flatten() {
        let dir = t.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let t = ticks_of(&dir.join("stat").to_string_lossy()).unwrap_or_default();
            total.user += t.user;
            total.system += t.system;
        }
    }
    Some(total)
}

/// Resident memory of `pid`, KiB.
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "42 (a b) c) S 7 42 42 0 -1 4194560 100 0 0 0 25 13 0 0 20 0 1";
        assert_eq!(stat_field(stat, 4), Some(7));
        assert_eq!(stat_field(stat, 14), Some(25));
        assert_eq!(stat_field(stat, 15), Some(13));
        let t = parse_ticks(stat).unwrap();
        assert_eq!(
            t,
            Ticks {
                user: 25,
                system: 13
            }
        );
        let later = Ticks {
            user: 40,
            system: 14,
        };
        assert_eq!(
            later.since(t),
            Ticks {
                user: 15,
                system: 1
            }
        );
        assert_eq!(later.since(t).total(), 16);
    }

    #[test]
    fn this_process_has_cpu_and_memory() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        assert!(rss_kib(me).unwrap() > 100);
    }

    #[test]
    fn configs_name_both_addresses() {
        let l: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        assert!(haproxy_config(l, b, false).contains("bind 127.0.0.1:1\n"));
        assert!(haproxy_config(l, b, false).contains("server s1 127.0.0.1:2\n"));
        assert!(haproxy_config(l, b, true).contains("server s1 127.0.0.1:2 proto h2"));
        let n = nginx_config(l, b, Path::new("/tmp/x"), false);
        assert!(n.contains("listen 127.0.0.1:1;") && n.contains("server 127.0.0.1:2;"));
        let g = nginx_config(l, b, Path::new("/tmp/x"), true);
        assert!(g.contains("listen 127.0.0.1:1 http2;") && g.contains("grpc_pass grpc://backend;"));
    }
}
