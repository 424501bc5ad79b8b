//! `tailguard merge`: four generators sending parts of one schedule, merged, against one
//! generator sending the whole schedule to the same server; and merge's bad input.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use tailguard_histogram::{log, Histogram};
use tailguard_pacing::{Arrivals, Schedule};
use tailguard_testsupport::TestServer;

const RATE: f64 = 1000.0;
const SEED: u64 = 7;
const SECS: u64 = 2;

fn tailguard<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(args)
        .output()
        .expect("run tailguard")
}

fn spawn(args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tailguard")
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tailguard-merge-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The load arguments shared by every generator: a Poisson schedule of `RATE` for `SECS`.
fn load_args(url: &str, out: &Path, name: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "load",
        "-r",
        "1000",
        "--arrivals",
        "poisson",
        "--seed",
        "7",
        "-d",
        "2s",
        "-i",
        "1s",
        "-c",
        "50",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--json".into());
    args.push(out.join(format!("{name}.json")).display().to_string());
    args.push("--hdr-log".into());
    args.push(out.join(format!("{name}.hlog")).display().to_string());
    args.push(url.to_string());
    args
}

/// Requests the whole schedule has due in the run.
fn scheduled() -> u64 {
    let mut s = Schedule::new(Arrivals::Poisson, RATE, SEED).unwrap();
    (0..)
        .take_while(|&i| s.next_send(i) < Duration::from_secs(SECS))
        .count() as u64
}

fn latency_of(summary: &Value) -> Histogram {
    log::decode(summary["hdr"]["latency"].as_str().expect("hdr.latency")).unwrap()
}

/// The first word of each line: what the report is made of, without its numbers.
fn shape(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with("# merged") && !l.starts_with("# SLO"))
        .map(|l| {
            let first = l.split_whitespace().next().unwrap_or("");
            // Interval lines start with a timestamp; the histogram rows with a value.
            if first.starts_with("20") {
                "<interval>".to_string()
            } else if first.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                "<bucket>".to_string()
            } else {
                first.to_string()
            }
        })
        .filter(|w| w != "<bucket>")
        .collect()
}

// long: one run of four parts and its merge, checked figure by figure against one generator.
#[test]
fn four_parts_merged_are_one_generator_s_run() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(2))
        .spawn();
    let url = server.url("/");
    let out = dir("parts");
    // One start for all four, far enough ahead for four processes to start on a busy machine.
    #[allow(clippy::disallowed_methods)] // --start-at is a wall-clock time.
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 3.0;
    let mut parts = Vec::new();
    for i in 0..4 {
        let mut args = load_args(&url, &out, &format!("part-{i}"));
        args.extend(["--shard".into(), format!("{i}/4")]);
        args.extend(["--start-at".into(), format!("@{start:.3}")]);
        parts.push(spawn(&args));
    }
    for mut p in parts {
        let status = tailguard_testsupport::process::wait_or_kill(&mut p, Duration::from_secs(60))
            .expect("a part finishes");
        let mut err = String::new();
        std::io::Read::read_to_string(p.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{err}");
    }
    let one = tailguard(&load_args(&url, &out, "one"));
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );

    let files: Vec<String> = (0..4)
        .map(|i| out.join(format!("part-{i}.json")).display().to_string())
        .collect();
    let merged_path = out.join("merged.json");
    let merged_log = out.join("merged.hlog");
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    let (mj, ml, mh) = (
        merged_path.display().to_string(),
        merged_log.display().to_string(),
        out.join("merged.html").display().to_string(),
    );
    args.extend(["--json", &mj, "--hdr-log", &ml, "--html", &mh]);
    args.extend(["--slo", "p99<=10s"]);
    let merged = tailguard(&args);
    let merged_text = String::from_utf8(merged.stdout.clone()).unwrap();
    assert!(
        merged.status.success(),
        "{}{merged_text}",
        String::from_utf8_lossy(&merged.stderr)
    );

    // Counts: the four parts together sent the schedule, exactly; so did the one generator.
    let m = json(&merged_path);
    let o = json(out.join("one.json").as_path());
    let want = scheduled();
    assert_eq!(m["requests"], want, "{merged_text}");
    assert_eq!(o["requests"], want);
    assert_eq!(m["good"], want);
    let targets: u64 = m["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|iv| iv["target"].as_u64().unwrap())
        .sum();
    assert_eq!(
        targets, want,
        "every interval's due requests add up to the schedule"
    );
    let per_interval: u64 = m["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|iv| iv["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(per_interval, want);

    // Percentiles: those of the union of the four parts' histograms, read from their JSON and,
    // independently, from their interval logs.
    let mut union = Histogram::new();
    let mut from_logs = Histogram::new();
    for i in 0..4 {
        union.merge(&latency_of(&json(&out.join(format!("part-{i}.json")))));
        let bytes = std::fs::read(out.join(format!("part-{i}.hlog"))).unwrap();
        for iv in log::read(&bytes).unwrap() {
            if iv.tag.as_deref() == Some("latency") {
                from_logs.merge(&iv.histogram);
            }
        }
    }
    assert_eq!(union.count(), want);
    assert_eq!(from_logs, union, "the logs hold what the summaries hold");
    let got: tailguard_histogram::Percentiles =
        serde_json::from_value(m["latency_us"].clone()).unwrap();
    assert_eq!(got, union.percentiles());
    assert_eq!(latency_of(&m), union);
    // The merged log holds the same values.
    let mut merged_logged = Histogram::new();
    for iv in log::read(&std::fs::read(&merged_log).unwrap()).unwrap() {
        if iv.tag.as_deref() == Some("latency") {
            merged_logged.merge(&iv.histogram);
        }
    }
    assert_eq!(merged_logged, union);

    // Shape: the same JSON fields and intervals, the same report lines.
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "merged_from")
            .cloned()
            .collect()
    };
    assert_eq!(keys(&m), keys(&o));
    assert_eq!(
        m["intervals"].as_array().unwrap().len(),
        o["intervals"].as_array().unwrap().len()
    );
    assert_eq!(m["target_rate"], 1000.0);
    let one_text = String::from_utf8(one.stdout).unwrap();
    assert_eq!(
        shape(&merged_text),
        shape(&one_text),
        "{merged_text}\n{one_text}"
    );
    assert!(merged_text.contains("# SLO p99<=10s: met"), "{merged_text}");
    let html = std::fs::read_to_string(out.join("merged.html")).unwrap();
    assert!(html.contains("<svg"), "the HTML report has its charts");

    // The logs alone merge too, to the same values.
    let logs: Vec<String> = (0..4)
        .map(|i| out.join(format!("part-{i}.hlog")).display().to_string())
        .collect();
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(logs.iter().map(String::as_str));
    let by_logs = tailguard(&args);
    assert!(
        by_logs.status.success(),
        "{}",
        String::from_utf8_lossy(&by_logs.stderr)
    );
    let text = String::from_utf8(by_logs.stdout).unwrap();
    let total = text
        .lines()
        .find(|l| l.trim_start().starts_with("total latency"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        total.split_whitespace().nth(2),
        Some(want.to_string().as_str()),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

// long: a table of bad inputs, one row each, and the files they need.
#[test]
fn bad_input_is_one_clear_line_and_exit_2() {
    let out = dir("bad");
    let server = TestServer::builder().spawn();
    let url = server.url("/");
    let mut args = load_args(&url, &out, "a");
    args[2] = "200".into(); // -r 200
    args[8] = "1s".into(); // -d 1s
    args.extend(["--shard".into(), "0/2".into()]);
    let a = tailguard(&args);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let a_json = out.join("a.json").display().to_string();
    let a_log = out.join("a.hlog").display().to_string();
    let garbage = out.join("garbage");
    std::fs::write(&garbage, "not a log, not JSON\n").unwrap();
    let garbage = garbage.display().to_string();
    let old = out.join("old.json");
    let mut v = json(out.join("a.json").as_path());
    v.as_object_mut().unwrap().remove("hdr");
    std::fs::write(&old, v.to_string()).unwrap();
    let old = old.display().to_string();
    let missing = out.join("missing.json").display().to_string();
    let far = out.join("far.json");
    let mut v = json(out.join("a.json").as_path());
    v["start_unix_s"] = 1e300.into();
    std::fs::write(&far, v.to_string()).unwrap();
    let far = far.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["merge", &a_json, &a_json], "part 0/2 is in both"),
        (vec!["merge", &a_json, &a_log], "not both"),
        (
            vec!["merge", &garbage],
            "neither a JSON summary nor an interval log",
        ),
        (vec!["merge", &old], "no histograms"),
        (vec!["merge", &missing], "cannot read"),
        (vec!["merge", &far], "start_unix_s is 1e300, not a time"),
        (
            vec!["merge", &a_log, "--json", "x.json"],
            "--json needs JSON summaries",
        ),
        (vec!["merge", &a_json, "--slo", "p99=1"], "bad objective"),
    ];
    for (args, want) in cases {
        let o = tailguard(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // One part alone merges, with a note that the others are missing.
    let o = tailguard(&["merge", &a_json]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("parts 1/2 are missing"));
    // A pod's `kubectl logs` of `load --json=-`: the text report on stderr, then the JSON.
    let pod = out.join("pod.log");
    let mut args = load_args(&url, &out, "pod");
    args[2] = "200".into();
    args[8] = "1s".into();
    let at = args.iter().position(|a| a == "--json").unwrap();
    args[at + 1] = "-".into();
    let run = tailguard(&args);
    assert!(run.status.success());
    let mut log = run.stderr.clone();
    log.extend_from_slice(&run.stdout);
    std::fs::write(&pod, log).unwrap();
    let o = tailguard(&[std::ffi::OsStr::new("merge"), pod.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sent: Value = serde_json::from_slice(&run.stdout).unwrap();
    let want = format!("# {} requests in", sent["requests"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&want));
    // Counts at the top of u64 saturate instead of wrapping or panicking, in every output.
    let huge = out.join("huge.json");
    let mut v = json(out.join("a.json").as_path());
    for key in ["requests", "good"] {
        v[key] = u64::MAX.into();
        for iv in v["intervals"].as_array_mut().unwrap() {
            iv[key] = u64::MAX.into();
        }
    }
    std::fs::write(&huge, v.to_string()).unwrap();
    let pod_s = pod.display().to_string();
    let (hj, hh) = (
        out.join("h.json").display().to_string(),
        out.join("h.html").display().to_string(),
    );
    let huge = huge.display().to_string();
    let o = tailguard(&["merge", &huge, &pod_s, "--json", &hj, "--html", &hh]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(Path::new(&hj))["requests"], u64::MAX);
    // A missed objective is exit 1, as in load.
    let o = tailguard(&["merge", &a_json, "--slo", "p99<=1us"]);
    assert_eq!(o.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&out);
}
