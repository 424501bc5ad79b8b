//! Hostile fleet files: every size, count and depth bounded before anything is built.

use std::time::{Duration, Instant};
use tailguard_fleet::Fleet;

/// A generous bound for refusing a hostile file: the scan takes microseconds, parsing 40,000
/// levels took seconds.
const QUICK: Duration = Duration::from_secs(2);

#[test]
#[allow(clippy::disallowed_methods)] // the bound under test is wall-clock time
fn deep_nesting_is_refused_before_parsing() {
    let levels = 40_000;
    let flow = format!(
        "backends: [{{latency: 1ms, schedule: {}{}}}]\n",
        "[".repeat(levels),
        "]".repeat(levels)
    );
    let dashes = format!(
        "backends:\n  - latency: 1ms\n    schedule:\n{}x\n",
        "- ".repeat(levels)
    );
    for text in [flow, dashes] {
        let started = Instant::now();
        let err = Fleet::from_yaml_str(&text, "deep.yaml")
            .unwrap_err()
            .to_string();
        let took = started.elapsed();
        assert!(err.starts_with("deep.yaml:"), "{err}");
        assert!(err.contains("nested deeper than 32 levels"), "{err}");
        assert!(took < QUICK, "{took:?}");
    }
}

#[test]
fn a_file_larger_than_a_mebibyte_is_not_read_whole() {
    let dir = std::env::temp_dir().join(format!("tg-fleet-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.yaml");
    let mut text = String::from("backends: [{latency: 1ms}]\n");
    text.push_str(&"#".repeat(2 << 20));
    std::fs::write(&path, &text).unwrap();
    let err = Fleet::from_file(&path).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("larger than 1048576 bytes"), "{err}");
}
