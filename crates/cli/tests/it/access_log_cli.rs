//! `tailguard proxy` with an access log, as a process: `path: /dev/stdout` prints one JSON line
//! per request on standard output, and SIGUSR1 reopens a file that logrotate moved away.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;
use support::{get, Proxy, DEADLINE};
use tailguard_testsupport::{Deadline, TestServer};

fn yaml(backend: std::net::SocketAddr, log: &str) -> String {
    format!(
        "admin: {{ip: 127.0.0.1, port: 0}}\n\
         servers: [{{ip: 127.0.0.1, port: 0}}]\n\
         accessLog: {{path: {log}, format: json}}\n\
         services:\n  - name: web\n    upstreams: [\"{backend}\"]\n"
    )
}

#[test]
fn dev_stdout_takes_one_json_line_per_request() {
    let backend = TestServer::builder().spawn();
    let config = std::env::temp_dir().join(format!(
        "tailguard-access-stdout-{}.yaml",
        std::process::id()
    ));
    std::fs::write(&config, yaml(backend.addr(), "/dev/stdout")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["proxy", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = tailguard_testsupport::process::lines(child.stdout.take().unwrap());
    let err = tailguard_testsupport::process::lines(child.stderr.take().unwrap());
    let until = Deadline::after(DEADLINE);
    let addr = loop {
        let line = err
            .recv_timeout(until.left())
            .expect("the proxy says where it listens");
        if let Some(a) = line.strip_prefix("tailguard proxy listening on ") {
            break a.parse().unwrap();
        }
    };
    for _ in 0..3 {
        assert_eq!(get(addr), Ok(200));
    }
    for _ in 0..3 {
        let line = out.recv_timeout(until.left()).expect("a log line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (v["method"].as_str(), v["status"].as_u64()),
            (Some("GET"), Some(200))
        );
        assert_eq!(v["upstream"], backend.addr().to_string());
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&config);
}

#[test]
fn sigusr1_reopens_the_file() {
    let backend = TestServer::builder().spawn();
    let dir = std::env::temp_dir().join(format!("tailguard-access-usr1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let proxy = Proxy::start_with("usr1", &yaml(backend.addr(), log.to_str().unwrap()), None);
    let count = |p: &std::path::Path, n: usize| {
        let until = Deadline::after(DEADLINE);
        loop {
            let have = std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .count();
            if have >= n || until.passed() {
                return have;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    assert_eq!(get(proxy.addr), Ok(200));
    assert_eq!(count(&log, 1), 1);
    let moved = dir.join("access.log.1");
    std::fs::rename(&log, &moved).unwrap();
    proxy.signal("USR1");
    // The signal is taken before the next request's line is written: poll until it is.
    let until = Deadline::after(DEADLINE);
    while !log.exists() {
        assert!(!until.passed(), "SIGUSR1 did not reopen the log");
        assert_eq!(get(proxy.addr), Ok(200));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(count(&log, 1) >= 1);
    assert_eq!(
        count(&moved, 1),
        std::fs::read_to_string(&moved).unwrap().lines().count()
    );
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}
