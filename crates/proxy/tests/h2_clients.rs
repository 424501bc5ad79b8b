//! Real HTTP/2 clients through the proxy, with its default configuration, to a real nginx that
//! speaks HTTP/1.1 only (its default): curl `--http2-prior-knowledge` (GET, HEAD, a 256 KiB
//! POST) and h2load (Debian's `nghttp2-client`; thousands of multiplexed requests) see no
//! error, and nginx stays `alive` on `/endpoints`.
//!
//! The tools are required: a missing one fails the test naming its Debian package (`.ci/run`
//! installs them). Every process is bounded by `timeout` and killed when the test ends.

mod support;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tailguard_proxy::config::{ServiceConfig, Upstream};

/// The longest any tool may run.
const TOOL_LIMIT: &str = "60";

/// `name` on the PATH or in /usr/sbin, or a failure naming the package to install.
fn tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is missing: apt-get install -y {package}"))
}

/// nginx on a free 127.0.0.1 port, HTTP/1.1 only, answering every request itself; killed and
/// its directory removed on drop.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Nginx {
    fn start() -> Self {
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
             server {{ listen {addr};\n    \
             location / {{ default_type text/plain; return 200 \"nginx\\n\"; }}\n  }}\n}}\n"
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
fn run(program: &PathBuf, args: &[&str]) -> String {
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

/// The numbers on h2load's `requests:` line: total, started, done, succeeded, failed,
/// errored, timeout.
fn h2load_requests(output: &str) -> Vec<u64> {
    let line = output
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no requests line in h2load output:\n{output}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: nginx, curl and h2load"]
async fn curl_and_h2load_over_http2_reach_an_http1_nginx_without_an_error() {
    let (curl, h2load) = (tool("curl", "curl"), tool("h2load", "nghttp2-client"));
    let nginx = Nginx::start();
    let service = ServiceConfig::new("web", vec![Upstream::new(nginx.addr)]);
    let proxy = support::start(service).await;
    let url = format!("http://{}/", proxy.addr());
    let body = std::env::temp_dir().join(format!("tailguard-h2-body-{}", nginx.addr.port()));
    std::fs::write(&body, vec![b'x'; 256 * 1024]).unwrap();
    let body_arg = format!("@{}", body.display());
    let out = tokio::task::spawn_blocking(move || {
        let write = "%{http_code} %{http_version}\n";
        let curl_get = run(
            &curl,
            &["-sS", "--http2-prior-knowledge", "-w", write, &url],
        );
        let curl_head = run(
            &curl,
            &[
                "-sS",
                "-I",
                "--http2-prior-knowledge",
                "-o",
                "/dev/null",
                "-w",
                write,
                &url,
            ],
        );
        let curl_post = run(
            &curl,
            &[
                "-sS",
                "--http2-prior-knowledge",
                "--data-binary",
                &body_arg,
                "-o",
                "/dev/null",
                "-w",
                write,
                &url,
            ],
        );
        let gets = run(&h2load, &["-n", "4000", "-c", "4", "-m", "16", &url]);
        let posts = run(
            &h2load,
            &[
                "-n",
                "200",
                "-c",
                "2",
                "-m",
                "4",
                "-d",
                &body_arg[1..],
                &url,
            ],
        );
        (curl_get, curl_head, curl_post, gets, posts)
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&body);
    let (curl_get, curl_head, curl_post, gets, posts) = out;
    assert_eq!(curl_get, "nginx\n200 2\n");
    assert_eq!(curl_head, "200 2\n");
    assert_eq!(curl_post, "200 2\n");
    for (output, n) in [(&gets, 4000), (&posts, 200)] {
        assert_eq!(h2load_requests(output), [n, n, n, n, 0, 0, 0], "{output}");
        let codes = format!("status codes: {n} 2xx, 0 3xx, 0 4xx, 0 5xx");
        assert!(output.contains(&codes), "{output}");
    }
    let c = support::client(false);
    let (_, _, endpoints) =
        support::send(&c, proxy.admin_addr().unwrap(), "GET", "/endpoints").await;
    let v: serde_json::Value = serde_json::from_slice(&endpoints).unwrap();
    assert_eq!(v["web"][0]["state"], "alive", "{v}");
    proxy.shutdown().await;
}
