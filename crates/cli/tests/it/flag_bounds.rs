//! Numeric flags and input files past their limits: exit 2 with one line naming the flag or
//! the file, before anything is sent, served or simulated; never a panic (101), an abort (134)
//! or a hang.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;
use tailguard_testsupport::process::output_within;

/// Runs tailguard with `args`, killed after 60 s (a hang is a failure, not a stuck test).
fn tailguard(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailguard"));
    cmd.args(args);
    let (status, stdout, stderr) = output_within(cmd, Duration::from_secs(60));
    let status = status.unwrap_or_else(|| panic!("{args:?} still ran after 60 s: {stderr}"));
    Output {
        status,
        stdout: stdout.into_bytes(),
        stderr: stderr.into_bytes(),
    }
}

/// Exit 2 and an error whose first line contains each of `want` (clap adds a line pointing
/// at `--help` to the errors of its value parsers).
fn refused(args: &[&str], want: &[&str]) {
    let o = tailguard(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    let first = err.lines().next().unwrap_or_default();
    for w in want {
        assert!(first.contains(w), "{args:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.lines().count() <= 3, "{args:?}: {err}");
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tailguard-flags-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const URL: &str = "http://127.0.0.1:1/";

#[test]
fn load_flags_out_of_range_are_refused() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["-r", "1e-20", "-n", "2"], &["--rate", "0.001"]),
        (&["-r", "1e308", "-d", "1s"], &["--rate", "10000000"]),
        (
            &["-c", "4294967296", "-n", "1"],
            &["--concurrency", "100000"],
        ),
        (&["-c", "0", "-n", "1"], &["--concurrency"]),
        (
            &["--ramp-from", "1e308", "-r", "1e6", "-d", "1s"],
            &["--ramp-from", "10000000"],
        ),
        (
            &["--h2", "--h2-connections", "100000000", "-d", "1s"],
            &["--h2-connections", "1000"],
        ),
        (
            &["--h2", "--h2-connections", "0", "-d", "1s"],
            &["--h2-connections"],
        ),
        // A device never ends: refused before a byte is read (a regular file past 64 MiB is
        // refused at the limit, `files::read_limited`).
        (
            &["--data", "@/dev/zero", "-d", "1s"],
            &["--data", "not a regular file"],
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["load", "--no-preflight"];
        args.extend_from_slice(flags);
        args.push(URL);
        refused(&args, want);
    }
}

#[test]
fn a_proto_nested_thousands_deep_is_refused_not_a_stack_overflow() {
    let d = dir("proto");
    let mut text = String::from("syntax = \"proto3\";\npackage deep;\n");
    for i in 0..5_000 {
        text.push_str(&format!("message M{i} {{\n"));
    }
    text.push_str(&"}\n".repeat(5_000));
    text.push_str("service S { rpc Call(M0) returns (M0); }\n");
    let proto = d.join("deep.proto");
    std::fs::write(&proto, text).unwrap();
    let proto = proto.display().to_string();
    refused(
        &[
            "load",
            "--grpc",
            "--proto",
            &proto,
            "--call",
            "deep.S/Call",
            "-n",
            "1",
            "--no-preflight",
            "http://127.0.0.1:1",
        ],
        &["--proto", "deep.proto", "nested deeper than 32 levels"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn serve_values_out_of_range_are_refused_before_listening() {
    let d = dir("serve");
    let fleet = d.join("replicas.yaml");
    std::fs::write(
        &fleet,
        "backends:\n  - latency: 1ms\n    replicas: 100000000\n",
    )
    .unwrap();
    let fleet = fleet.display().to_string();
    let base = ["serve", "--listen", "127.0.0.1:0", "--no-control"];
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (
            vec!["--fault", "from 0s latency x1e308"],
            &["--fault", "at most 1000000"],
        ),
        (
            vec!["--body", "size:18446744073709551615"],
            &["--body", "at most 16777216 bytes"],
        ),
        (
            vec!["--fleet", &fleet],
            &["replicas.yaml", "at most 10000 backends"],
        ),
    ];
    for (flags, want) in cases {
        let mut args = base.to_vec();
        args.extend(flags);
        refused(&args, want);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sim_flags_out_of_range_are_refused_before_simulating() {
    refused(
        &["sim", "slow-middle", "--rate", "1e300"],
        &["--rate", "10000000"],
    );
    refused(
        &["sim", "slow-middle", "--clients", "1000000000"],
        &["--clients", "10000"],
    );
    refused(
        &[
            "sim",
            "slow-middle",
            "--rate",
            "1000000",
            "--duration",
            "1h",
        ],
        &["requests per arm", "1e8"],
    );
}
