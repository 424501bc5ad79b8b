//! `tailguard merge` on hostile or huge input: one clear line and exit 2, or a merge in
//! bounded memory; never a panic, an abort or gigabytes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use tailguard_record::{Encoded, IntervalSummary, RunSummary, Stats, Totals};

fn tailguard<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(args)
        .output()
        .expect("run tailguard")
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tailguard-mb-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A one-interval summary of three requests, written to `dir/name`.
fn summary(dir: &Path, name: &str, part: Option<&str>, edit: impl Fn(&mut RunSummary)) -> String {
    let mut s = Stats::new();
    for v in [100, 2_000, 30_000] {
        s.latency.record_us(v);
        s.service.record_us(v / 2);
        s.send_lag.record_us(1);
        s.good += 1;
    }
    let mut totals = Totals::from_stats(&s, 3.0, Duration::from_secs(1));
    totals.hdr = Some(Encoded::of(&s).unwrap());
    let mut run = RunSummary {
        urls: vec!["http://127.0.0.1:1/".into()],
        per_target: vec![3],
        arrivals: "constant".into(),
        duration_s: 1.0,
        send_phase_s: 1.0,
        totals: totals.clone(),
        intervals: vec![IntervalSummary {
            timestamp: "2026-11-26T12:00:01Z".into(),
            start_s: 0.0,
            duration_s: 1.0,
            target: 3,
            change: String::new(),
            totals,
        }],
        start_unix_s: 1_800_000_000.0,
        interval_s: 1.0,
        part: part.map(str::to_owned),
        seed: Some(1),
        ..RunSummary::default()
    };
    edit(&mut run);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(&run).unwrap()).unwrap();
    path.display().to_string()
}

/// Exit 2, one line on stderr containing `want`, no panic.
fn refused(args: &[&str], want: &str) {
    let o = tailguard(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
}

#[test]
fn hostile_summaries_are_one_line_and_exit_2() {
    let d = dir("hostile");
    let many = summary(&d, "many.json", Some("0/10000000"), |_| {});
    refused(
        &["merge", &many],
        "not I/N with I below N and N at most 10000",
    );
    let max = summary(&d, "max.json", Some("0/18446744073709551615"), |_| {});
    refused(&["merge", &max], "at most 10000");
    let whole = summary(&d, "whole.json", None, |_| {});
    let copy = d.join("copy.json");
    std::fs::copy(&whole, &copy).unwrap();
    let copy = copy.display().to_string();
    refused(
        &["merge", &whole, &copy],
        "whole.json and copy.json are the same run",
    );
    // ~300 bytes of histogram claiming a 4 GiB payload.
    let mut plain = Vec::new();
    plain.extend(0x1c84_9313u32.to_be_bytes());
    plain.extend(u32::MAX.to_be_bytes());
    plain.extend(0u32.to_be_bytes());
    plain.extend(3u32.to_be_bytes());
    plain.extend(1u64.to_be_bytes());
    plain.extend(3_600_000_000u64.to_be_bytes());
    plain.extend(1.0f64.to_be_bytes());
    plain.extend([0u8; 200]);
    use base64::Engine as _;
    let blob = base64::engine::general_purpose::STANDARD.encode(&plain);
    let claims = summary(&d, "claims.json", None, |r| {
        r.intervals[0].totals.hdr.as_mut().unwrap().latency = blob.clone();
    });
    refused(
        &["merge", &claims],
        "declares a payload of 4294967295 bytes",
    );
    // Many missing parts are counted, not listed.
    let few = summary(&d, "few.json", Some("7/10000"), |_| {});
    let o = tailguard(&["merge", &few]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("9999 of 10000 parts are missing"), "{err}");
    assert!(err.len() < 300, "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
