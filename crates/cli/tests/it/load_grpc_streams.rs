//! `tailguard load --grpc` on streaming methods: each kind against a real `tailguard serve`,
//! whose own counters say what arrived and what it answered; the same runs by ghz (grpc-go)
//! counted alike; methods no `.proto` declares, found by the server's reflection; and the
//! flags that do not fit a call refused before anything is sent.

use crate::load_grpc::{json, load, Running, DEADLINE};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use tailguard_testsupport::Deadline;

/// A one-backend `tailguard serve` with its control endpoint: the backend's address and the
/// control's.
fn serve_counted(extra: &[&str]) -> (Running, SocketAddr, SocketAddr) {
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--control",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run tailguard serve");
    let rx = tailguard_testsupport::process::lines(Box::new(child.stdout.take().unwrap()));
    let running = Running { child };
    let until = Deadline::after(DEADLINE);
    let addr_after = |line: &str, prefix: &str| -> Option<SocketAddr> {
        let url = line.strip_prefix(prefix)?.split_whitespace().next()?;
        url.strip_prefix("http://")?.split('/').next()?.parse().ok()
    };
    let (mut backend, mut control) = (None, None);
    while backend.is_none() || control.is_none() {
        let line = rx
            .recv_timeout(until.left())
            .unwrap_or_else(|e| panic!("serve printed no addresses: {e}"));
        backend = backend.or_else(|| addr_after(&line, "backend  "));
        control = control.or_else(|| addr_after(&line, "control  "));
    }
    (running, backend.unwrap(), control.unwrap())
}

/// serve's counters: `(calls answered or decided ok, messages received, messages sent)`.
fn counters(control: SocketAddr) -> (u64, u64, u64) {
    let mut conn = TcpStream::connect(control).unwrap();
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\nhost: t\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let value = |prefix: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
    };
    (
        value(r#"tailguard_serve_requests_total{backend="backend",outcome="ok"}"#),
        value(r#"tailguard_serve_grpc_messages_total{backend="backend",direction="received"}"#),
        value(r#"tailguard_serve_grpc_messages_total{backend="backend",direction="sent"}"#),
    )
}

/// What serve counted while `run` ran.
fn counted_during(control: SocketAddr, run: impl FnOnce()) -> (u64, u64, u64) {
    let before = counters(control);
    run();
    let after = counters(control);
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

/// Two request messages, as a client stream's `--data`.
const TWO: &str = r#"[{"payload": "YQ=="}, {"payload": "Yg=="}]"#;

/// One kind of call on `serve`'s ping service: `(method, data, extra flags, calls, messages
/// sent per call, messages received per call)`.
type Kind = (
    &'static str,
    &'static str,
    &'static [&'static str],
    u64,
    u64,
    u64,
);

/// Each kind of call, and a unary one.
fn kinds() -> [Kind; 4] {
    [
        ("Echo", TWO, &["--stream-messages", "5"], 40, 5, 5),
        ("Collect", TWO, &["--stream-messages", "7"], 30, 7, 1),
        (
            "Stream",
            r#"{"payload": "YQ==", "count": 6}"#,
            &[],
            30,
            1,
            6,
        ),
        ("Ping", r#"{"payload": "YQ=="}"#, &[], 30, 1, 1),
    ]
}

/// `load`'s arguments for `n` calls of `call` with `data` on 4 workers, closed loop, no
/// pre-flight (its call would count at the server too), the summary as JSON on stdout.
fn closed_loop_args<'a>(
    call: &'a str,
    data: &'a str,
    n: &'a str,
    extra: &[&'a str],
    url: &'a str,
) -> Vec<&'a str> {
    let mut args = vec![
        "--grpc",
        "--call",
        call,
        "--data",
        data,
        "-n",
        n,
        "-c",
        "4",
        "-r",
        "0",
        "--no-preflight",
        "--json",
        "-",
    ];
    args.extend_from_slice(extra);
    args.push(url);
    args
}

#[test]
fn each_streaming_kind_counts_its_calls_and_messages() {
    let (_serve, addr, control) = serve_counted(&["--latency", "1ms"]);
    let url = format!("http://{addr}");
    for (method, data, extra, calls, out, back) in kinds() {
        let call = format!("tailguard.serve.v1.Ping/{method}");
        let n = calls.to_string();
        let args = closed_loop_args(&call, data, &n, extra, &url);
        let mut run = serde_json::Value::Null;
        let at_server = counted_during(control, || run = json(&load(&args)));
        assert_eq!(run["requests"], calls, "{method}: {run}");
        assert_eq!(run["status_codes"]["OK"], calls, "{method}: {run}");
        assert_eq!(at_server, (calls, calls * out, calls * back), "{method}");
        if method == "Ping" {
            assert!(run.get("messages").is_none(), "unary: no message figures");
            continue;
        }
        let m = &run["messages"];
        assert_eq!(m["sent"], calls * out, "{method}: {m}");
        assert_eq!(m["received"], calls * back, "{method}: {m}");
        let timed = m["latency_us"]["p50"].as_u64();
        match method {
            // Each reply is timed from its own message; each answer of a server stream from
            // the call's send, the first one also apart.
            "Echo" | "Stream" => assert!(timed.is_some_and(|p| p >= 1_000), "{method}: {m}"),
            _ => assert!(m["latency_us"].is_null(), "{method}: {m}"),
        }
        assert_eq!(
            m.get("first_message_us").is_some(),
            method == "Stream",
            "{method}: {m}"
        );
    }
}

#[test]
fn stream_flags_and_data_that_do_not_fit_the_call_are_refused() {
    let (_serve, addr) = crate::load_grpc::serve(&[]);
    let url = format!("http://{addr}");
    let refused = |args: &[&str], says: &str| {
        let mut all = vec!["--grpc", "-n", "1"];
        all.extend_from_slice(args);
        all.push(&url);
        let out = load(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    refused(
        &["--call", "ping", "--stream-messages", "3"],
        "--stream-messages applies to client and bidirectional streaming calls; --call tailguard.serve.v1.Ping/Ping sends one message",
    );
    refused(
        &[
            "--call",
            "tailguard.serve.v1.Ping/Stream",
            "--stream-interval",
            "1ms",
        ],
        "--stream-interval applies to client and bidirectional",
    );
    refused(
        &[
            "--call",
            "tailguard.serve.v1.Ping/Echo",
            "--stream-messages",
            "0",
        ],
        "--stream-messages must be from 1 to 1000000, got 0",
    );
    refused(
        &["--call", "tailguard.serve.v1.Ping/Stream", "--data", TWO],
        "an array gives a stream's messages, and server streaming sends one",
    );
    refused(
        &["--call", "tailguard.serve.v1.Ping/Echo", "--data", "[]"],
        "an empty array",
    );
    refused(
        &[
            "--call",
            "tailguard.serve.v1.Ping/Echo",
            "--data",
            r#"[{"payload": "YQ=="}, {"nope": 1}]"#,
        ],
        "message 2: ",
    );
    refused(
        &["--call", "tailguard.serve.v1.Ping/Echo", "--expect-body-contains", "x"],
        "--expect-body-* checks read one answer's body; --call tailguard.serve.v1.Ping/Echo streams",
    );
}

#[test]
fn a_method_no_proto_declares_is_found_by_the_servers_reflection() {
    let (_serve, addr, control) = serve_counted(&[]);
    let url = format!("http://{addr}");
    // The reflection service describes itself: a bidirectional method no built-in declares.
    let out = load(&[
        "--grpc",
        "--call",
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "--data",
        r#"{"listServices": ""}"#,
        "-n",
        "10",
        "-r",
        "0",
        "--json",
        "-",
        &url,
    ]);
    let run = json(&out);
    assert_eq!(run["status_codes"]["OK"], 10, "{run}");
    assert_eq!(run["messages"]["sent"], 10, "{run}");
    assert_eq!(run["messages"]["received"], 10, "{run}");
    // None of it was a ping.
    assert_eq!(counters(control), (0, 0, 0));

    let refused = |call: &str, to: &str, says: &str| {
        let out = load(&["--grpc", "--call", call, "-n", "1", "--timeout", "2s", to]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{call}: {err}");
        assert!(err.contains("server reflection: "), "{call}: {err}");
        assert!(err.contains(says), "{call}: {err}");
        assert!(err.contains("give the method's --proto instead"), "{err}");
    };
    refused(
        "nosuch.v1.Svc/M",
        &url,
        "NOT_FOUND symbol 'nosuch.v1.Svc' not found",
    );
    // The service is there, the method is not: what the server has is named.
    let out = load(&[
        "--grpc",
        "--call",
        "grpc.reflection.v1.ServerReflection/Nope",
        "-n",
        "1",
        &url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ServerReflection has no method Nope (it has ServerReflectionInfo)"),
        "{err}"
    );
    // Nothing listening: a closed port on this machine.
    let closed = tailguard_testsupport::ClosedPort::new();
    let closed_url = format!("http://{}", closed.addr());
    refused("nosuch.v1.Svc/M", &closed_url, "cannot connect to");
    // A server that accepts and never answers: the wait is the request timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let out = load(&[
        "--grpc",
        "--call",
        "a.B/C",
        "-n",
        "1",
        "--timeout",
        "300ms",
        &silent_url,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no answer within 300ms"), "{err}");
    drop(silent);
}

/// Runs ghz (grpc-go's load tool, finding the method by reflection as `load` does) with
/// `args` against `addr`.
fn ghz(addr: SocketAddr, args: &[&str]) {
    let ghz =
        tailguard_testsupport::process::go_tool("ghz", "github.com/bojand/ghz/cmd/ghz@v0.93.0");
    let out = Command::new("timeout")
        .arg("60")
        .arg(ghz)
        .args(["--insecure", "--format", "json"])
        .args(args)
        .arg(addr.to_string())
        .output()
        .expect("run ghz");
    assert!(
        out.status.success(),
        "ghz: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = report["count"].as_u64().unwrap();
    assert_eq!(
        report["statusCodeDistribution"]["OK"].as_u64(),
        Some(calls),
        "{report}"
    );
}

#[test]
#[ignore = "tier 2: ghz (go install github.com/bojand/ghz/cmd/ghz@v0.93.0)"]
fn each_kind_counts_at_the_server_what_ghz_counts() {
    let (_serve, addr, control) = serve_counted(&["--latency", "1ms"]);
    let url = format!("http://{addr}");
    for (method, data, extra, calls, _, _) in kinds() {
        let call = format!("tailguard.serve.v1.Ping/{method}");
        let n = calls.to_string();
        // ghz's --stream-call-count is load's --stream-messages.
        let mut ghz_args = vec!["--call", &call, "-d", data, "-n", &n, "-c", "4"];
        if let [_, count] = extra {
            ghz_args.extend(["--stream-call-count", count]);
        }
        let by_ghz = counted_during(control, || ghz(addr, &ghz_args));
        let args = closed_loop_args(&call, data, &n, extra, &url);
        let by_load = counted_during(control, || {
            json(&load(&args));
        });
        assert_eq!(
            by_load, by_ghz,
            "{method}: (calls, received, sent) at the server"
        );
        assert_eq!(by_load.0, calls, "{method}");
    }
}

/// A call the server ends early (here: failed before its first answer) stops sending: its
/// thousand messages, 10 ms apart, are not sent into a finished call (nor waited for).
#[test]
fn a_call_the_server_ends_stops_sending() {
    let (_serve, addr) = crate::load_grpc::serve(&["--error-rate", "100%"]);
    let out = load(&[
        "--grpc",
        "--call",
        "tailguard.serve.v1.Ping/Echo",
        "--stream-messages",
        "1000",
        "--stream-interval",
        "10ms",
        "-n",
        "4",
        "-r",
        "0",
        "--timeout",
        "30s",
        "--no-preflight",
        "--json",
        "-",
        &format!("http://{addr}"),
    ]);
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["status_codes"]["UNAVAILABLE"], 4, "{run}");
    let sent = run["messages"]["sent"].as_u64().unwrap();
    assert!(
        (4..=8).contains(&sent),
        "sent {sent} messages into 4 failed calls"
    );
    assert_eq!(run["messages"]["received"], 0, "{run}");
}
