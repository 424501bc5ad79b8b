//! Hostile scenarios: nesting, sizes and the work a run would take, bounded before it starts.

use std::time::Duration;
use tailguard_sim::{Overrides, Scenario};

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let deep = format!(
        "fleet: echo\nload: {{rate: 10, duration: 1s}}\narms: [{{name: a, balancer: {}}}]\n",
        "[".repeat(40_000)
    );
    let err = Scenario::from_yaml_str(&deep, "deep.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("deep.yaml:3:1: nested deeper than 32 levels"),
        "{err}"
    );
    let inline_fleet = format!("fleet:\n  backends:\n{}x\n", "  - ".repeat(40_000));
    let err = Scenario::from_yaml_str(&inline_fleet, "f.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("nested deeper than 32 levels"), "{err}");
}

#[test]
fn a_scenario_file_larger_than_a_mebibyte_is_not_read_whole() {
    let dir = std::env::temp_dir().join(format!("tg-sim-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.yaml");
    let mut text = Scenario::builtin_yaml("slow-middle").unwrap().to_string();
    text.push_str(&"#".repeat(2 << 20));
    std::fs::write(&path, &text).unwrap();
    let err = Scenario::from_file(&path).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("larger than 1048576 bytes"), "{err}");
}

#[test]
fn rates_and_clients_beyond_the_limits_are_refused() {
    let mut s = Scenario::builtin("slow-middle").unwrap();
    let err = s
        .apply(&Overrides {
            rate: Some(1e300),
            ..Overrides::default()
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--rate must be from 0.001 to 10000000"),
        "{err}"
    );
    let err = s
        .apply(&Overrides {
            clients: Some(1_000_000_000),
            ..Overrides::default()
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("--clients must be from 1 to 10000"), "{err}");
    // Each within its range, together too much work.
    let err = s
        .apply(&Overrides {
            rate: Some(1e6),
            duration: Some(Duration::from_secs(1000)),
            ..Overrides::default()
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("requests per arm, more than the 1e8"), "{err}");
    let text = "fleet: echo\nload: {rate: 5000000, duration: 1h}\narms: [{name: a, balancer: {kind: round-robin}}]\n";
    let err = Scenario::from_yaml_str(text, "big.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than the 1e8"), "{err}");
}

#[test]
fn an_arm_that_sends_without_time_moving_on_is_stopped() {
    // Zero latency and no interval: every request ends when it starts, and the next follows at
    // the same instant, forever.
    let text = "fleet: echo\nload: {loop: closed, workers: 1, duration: 1s}\narms: [{name: rr, balancer: {kind: round-robin}}]\n";
    let s = Scenario::from_yaml_str(text, "spin.yaml").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tx.send(
            tailguard_sim::run(&s)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        )
    });
    let result = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the simulation ends within a minute");
    let err = result.unwrap_err();
    assert!(err.contains("virtual time does not move on"), "{err}");
}
