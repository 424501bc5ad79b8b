//! `tailguard merge` of a long interval log: window by window, in bounded memory. A test
//! binary of its own, so the peak memory of its children is this merge's alone.

use std::process::Command;
use std::time::Duration;
use tailguard_histogram::{log, Histogram};

/// The peak resident memory of any child this test process waited for, in KiB.
fn children_peak_rss_kib() -> u64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    usage.max_rss() as u64
}

#[test]
fn a_long_log_merges_window_by_window_in_bounded_memory() {
    // 15 minutes of one-second intervals, two tags: 1,800 histograms of 188 KiB once decoded
    // (340 MB held whole, twice that merged), a few MB when merged window by window.
    let d = std::env::temp_dir().join(format!("tailguard-merge-memory-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("long.hlog");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = log::Writer::new(file, 1_800_000_000.0, "test").unwrap();
    for s in 0..900u64 {
        let mut h = Histogram::new();
        for v in 0..50 {
            h.record_us(100 + v * 37 + s);
        }
        let at = Duration::from_secs(s);
        let len = Duration::from_secs(1);
        w.write(&h, at, len, Some("latency")).unwrap();
        w.write(&h, at, len, Some("service")).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let out = d.join("merged.hlog").display().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["merge", &path.display().to_string(), "--hdr-log", &out])
        .output()
        .expect("run tailguard");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let text = String::from_utf8_lossy(&o.stdout);
    let total = text
        .lines()
        .find(|l| l.trim_start().starts_with("total latency"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(total.split_whitespace().nth(2), Some("45000"), "{text}");
    let merged = log::read(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(merged.len(), 1800);
    let peak_mib = children_peak_rss_kib() / 1024;
    println!("merge peaked at {peak_mib} MiB");
    assert!(peak_mib < 64, "merge peaked at {peak_mib} MiB");
    let _ = std::fs::remove_dir_all(&d);
}
