//! `tailguard load --grpc` against a real `tailguard serve` (h2c) and through a real
//! `tailguard proxy` with TLS: every call counted, outcomes by gRPC status, the pre-flight
//! naming a server that is not gRPC or lacks the method; and the delayed-ACK note against a
//! `serve --nagle`.

use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use tailguard_testsupport::{Deadline, TestServer};

pub(crate) const DEADLINE: Duration = Duration::from_secs(15);

/// A `tailguard` child process, killed on drop.
pub(crate) struct Running {
    pub(crate) child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tailguard ARGS` and returns it with the first line (stdout, or stderr when
/// `on_stderr`) that contains `marker`.
pub(crate) fn start(args: &[&str], marker: &str, on_stderr: bool) -> (Running, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tailguard"));
    command.args(args).stdin(Stdio::null());
    if on_stderr {
        command.stdout(Stdio::null()).stderr(Stdio::piped());
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::null());
    }
    let mut child = command.spawn().expect("run tailguard");
    let stream: Box<dyn std::io::Read + Send> = if on_stderr {
        Box::new(child.stderr.take().unwrap())
    } else {
        Box::new(child.stdout.take().unwrap())
    };
    let rx = tailguard_testsupport::process::lines(stream);
    let running = Running { child };
    let until = Deadline::after(DEADLINE);
    loop {
        match rx.recv_timeout(until.left()) {
            Ok(line) if line.contains(marker) => return (running, line),
            Ok(_) => {}
            Err(e) => panic!("no line with {marker:?} from {args:?}: {e}"),
        }
    }
}

/// A one-backend `tailguard serve` on a free port; returns it and its address.
pub(crate) fn serve(extra: &[&str]) -> (Running, SocketAddr) {
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--no-control"];
    args.extend_from_slice(extra);
    let (running, line) = start(&args, "backend  http://", false);
    let addr = line
        .split_whitespace()
        .nth(1)
        .and_then(|u| u.strip_prefix("http://"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (running, addr)
}

pub(crate) fn load(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .arg("load")
        .args(args)
        .output()
        .expect("run tailguard load")
}

pub(crate) fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn every_built_in_call_is_counted_by_grpc_status() {
    let (_serve, addr) = serve(&["--error-rate", "20%", "--seed", "7"]);
    let url = format!("http://{addr}/");
    for call in [
        "grpc.health.v1.Health/Check",
        "tailguard.serve.v1.Ping/Ping",
        "fgrpc.PingServer/Ping",
    ] {
        let out = load(&[
            "--grpc", "--call", call, "-r", "0", "-c", "8", "-n", "400", "--json", "-", &url,
        ]);
        let run = json(&out);
        assert_eq!(run["requests"], 400, "{call}");
        assert_eq!(run["method"], call);
        let codes = run["status_codes"].as_object().unwrap();
        let ok = codes["OK"].as_u64().unwrap();
        let unavailable = codes
            .get("UNAVAILABLE")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        assert_eq!(ok + unavailable, 400, "{call}: {codes:?}");
        assert_eq!(run["good"].as_u64(), Some(ok), "{call}");
        assert_eq!(run["bad"].as_u64(), Some(unavailable), "{call}");
        if call.contains("Health") {
            assert_eq!(unavailable, 0, "health always answers SERVING");
        } else {
            // 20% chosen to fail, seeded: well away from 0 and from 400.
            assert!((40..130).contains(&unavailable), "{call}: {unavailable}");
        }
    }
}

#[test]
fn an_open_loop_grpc_run_reports_like_http() {
    let (_serve, addr) = serve(&["--latency", "2ms"]);
    let dir = std::env::temp_dir().join(format!("tg-grpc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hlog = dir.join("run.hlog");
    let out = load(&[
        "--grpc",
        "--call",
        "fortio",
        "--data",
        r#"{"payload": "tailguard"}"#,
        "-r",
        "200",
        "-d",
        "2s",
        "-i",
        "1s",
        "--hdr-log",
        hlog.to_str().unwrap(),
        "--slo",
        "p50<=50ms,success>=99%",
        &format!("http://{addr}"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("# sending 200 fgrpc.PingServer/Ping req/s"),
        "{text}"
    );
    assert!(text.contains("# 400 requests in"), "{text}");
    assert!(text.contains("# status codes: OK=400"), "{text}");
    assert!(text.contains("# SLO p50<=50ms: met"), "{text}");
    let log = std::fs::read(&hlog).unwrap();
    let logged: u64 = tailguard_histogram::log::read(&log)
        .unwrap()
        .iter()
        .filter(|i| i.tag.as_deref() == Some("latency"))
        .map(|i| i.histogram.count())
        .sum();
    assert_eq!(logged, 400);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn grpc_over_tls_through_the_proxy() {
    let (_serve, backend) = serve(&[]);
    let dir = std::env::temp_dir().join(format!("tg-grpc-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let upstream = backend.to_string();
    let (_proxy, line) = start(
        &[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--no-admin",
            "--upstream",
            &upstream,
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
        ],
        "tailguard proxy listening on ",
        true,
    );
    let addr: SocketAddr = line.rsplit(' ').next().unwrap().parse().unwrap();
    let url = format!("https://localhost:{}/", addr.port());
    // Untrusted: the pre-flight says so and nothing is sent.
    let refused = load(&["--grpc", "--call", "ping", "-n", "5", &url]);
    assert_eq!(refused.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--insecure accepts self-signed"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let out = load(&[
        "--grpc",
        "--call",
        "ping",
        "--insecure",
        "-r",
        "0",
        "-n",
        "300",
        "--json",
        "-",
        &url,
    ]);
    let run = json(&out);
    assert_eq!(run["requests"], 300);
    assert_eq!(run["status_codes"]["OK"], 300);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_pre_flight_names_a_missing_method_and_a_server_that_is_not_grpc() {
    let (_serve, addr) = serve(&[]);
    let dir = std::env::temp_dir().join(format!("tg-grpc-proto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let proto = dir.join("greet.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\";\npackage demo;\nmessage Hi { string name = 1; }\n\
         service Greeter { rpc Say(Hi) returns (Hi); }\n",
    )
    .unwrap();
    let out = load(&[
        "--grpc",
        "--proto",
        proto.to_str().unwrap(),
        "--call",
        "demo.Greeter/Say",
        "--data",
        r#"{"name": "x"}"#,
        "-n",
        "5",
        &format!("http://{addr}/"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("the server does not implement demo.Greeter/Say (UNIMPLEMENTED)"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // An HTTP server answering 200 to anything is not a gRPC server.
    let http = TestServer::builder().spawn();
    let out = load(&["--grpc", "-n", "5", &http.url("/")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("without a grpc-status: not a gRPC server"),
        "{err}"
    );
    assert_eq!(http.hits(), 1, "the pre-flight call only");
}

#[test]
#[ignore = "tier 2: real delayed ACKs (wall-clock timing)"]
fn service_times_at_the_delayed_ack_time_name_nagle() {
    // One connection, a request due every 20 ms: with Nagle on, each response's body waits for
    // the client's delayed ACK (about 40 ms); with TCP_NODELAY it does not. (At 50 ms and more
    // between requests Linux ACKs at once and nothing waits.)
    let (_nagle, slow) = serve(&["--nagle"]);
    let (_plain, fast) = serve(&[]);
    for (addr, noted) in [(slow, true), (fast, false)] {
        let out = load(&[
            "-r",
            "50",
            "-c",
            "1",
            "-n",
            "40",
            "-q",
            &format!("http://{addr}/"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(
            err.contains("the delayed-ACK time of Linux"),
            noted,
            "{addr}: {err}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Body checks on gRPC answers of 150 KB (many HTTP/2 DATA frames): the echoed payload's text
/// is found in each answer, a text that is not there fails each one.
#[test]
fn body_checks_read_large_grpc_answers_whole() {
    use base64::Engine as _;
    let (_serve, addr) = serve(&[]);
    let mut payload = vec![b'x'; 75_000];
    payload.extend_from_slice(b"needle-in-the-middle");
    payload.extend(std::iter::repeat_n(b'y', 75_000));
    let data = format!(
        r#"{{"payload": "{}"}}"#,
        base64::engine::general_purpose::STANDARD.encode(&payload)
    );
    let dir = std::env::temp_dir().join(format!("tg-grpc-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data.json");
    std::fs::write(&file, data).unwrap();
    let at_file = format!("@{}", file.display());
    let url = format!("http://{addr}");
    for (needle, good) in [("needle-in-the-middle", 20), ("needle-absent", 0)] {
        let out = load(&[
            "--grpc",
            "--call",
            "ping",
            "--data",
            &at_file,
            "-n",
            "20",
            "-c",
            "4",
            "-r",
            "0",
            "--no-preflight",
            "--expect-body-contains",
            needle,
            "--json",
            "-",
            &url,
        ]);
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(run["good"], good, "{needle}: {run}");
        assert_eq!(run["bad"], 20 - good, "{needle}: {run}");
        assert!(run["bytes"].as_u64().unwrap() > 20 * 150_000, "{run}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
