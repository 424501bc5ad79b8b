//! Real peers the tier-2 tests start: nginx, and the command-line tools (curl, h2load, ghz)
//! run under `timeout`; ghz is installed with `go install`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The longest any tool may run.
pub const TOOL_LIMIT: &str = "60";

/// `name` on the PATH or in /usr/sbin, or a failure naming the package to install.
pub fn tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is missing: apt-get install -y {package}"))
}

/// nginx on a free 127.0.0.1 port, HTTP/1.1 only, answering every request itself; killed and
/// its directory removed on drop.
pub struct Nginx {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Nginx {
    /// nginx answering `200 nginx` to everything.
    pub fn start() -> Self {
        Self::with_locations("location / { default_type text/plain; return 200 \"nginx\\n\"; }")
    }

    /// nginx with the `location` blocks `locations` in its one server.
    pub fn with_locations(locations: &str) -> Self {
        Self::with_server("", locations)
    }

    /// nginx with `listen` options `listen` (e.g. `ssl http2`) and the directives `server`
    /// in its one server.
    pub fn with_server(listen: &str, server: &str) -> Self {
        let exe = tool("nginx", "nginx");
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let dir = std::env::temp_dir().join(format!(
            "tailguard-h2-clients-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let tmp = dir.display();
        let conf = format!(
            "worker_processes 1;\ndaemon off;\nmaster_process off;\nerror_log stderr error;\n\
             pid {tmp}/nginx.pid;\nevents {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {tmp}; proxy_temp_path {tmp};\n  \
             fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};\n  \
             client_max_body_size 1m;\n  keepalive_requests 100000;\n  \
             server {{ listen {addr} {listen};\n    {server}\n  }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(exe)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start nginx");
        let nginx = Self { child, addr, dir };
        let ready = (0..500).any(|_| {
            let up = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok();
            if !up {
                std::thread::sleep(Duration::from_millis(10)); // a bounded poll for a child
            }
            up
        });
        assert!(ready, "nginx did not listen on {addr}");
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `program args` under `timeout`; its stdout, after asserting it exited 0.
pub fn run(program: &PathBuf, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg(TOOL_LIMIT)
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{stdout}\n{}",
        program.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
