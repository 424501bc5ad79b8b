//! Hostile scenarios: nesting, sizes and the work a run would take, bounded before it starts.

use tailguard_sim::Scenario;

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
