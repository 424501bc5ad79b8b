//! One configuration vocabulary: the balancer, accrual, retries, hedge and ejection blocks of
//! every built-in scenario, pasted into a proxy file, mean there what they mean in the
//! simulator; and the blocks of the repository's proxy files, pasted into a scenario arm,
//! likewise. Both sides parse them with `tailguard_client::spec`.

use serde_yaml_ng::{Mapping, Value};
use tailguard_sim::client::ArmConfig;
use tailguard_sim::scenario::Scenario;

/// Where each block goes: (scenario key, proxy section, proxy key).
const PLACES: [(&str, &str, &str); 5] = [
    ("balancer", "client", "loadBalancer"),
    ("accrual", "client", "failureAccrual"),
    ("outlier", "client", "outlierDetection"),
    ("retries", "service", "retries"),
    ("hedge", "service", "hedge"),
];

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_mapping().and_then(|m| m.get(key))
}

/// The parts of two arms that a block set, equal.
fn same(from: &str, blocks: &[&str], a: &ArmConfig, b: &ArmConfig) {
    for block in blocks {
        match *block {
            "balancer" => assert_eq!(a.policy, b.policy, "{from}: balancer"),
            "accrual" => assert_eq!(a.accrual, b.accrual, "{from}: accrual"),
            "outlier" => assert_eq!(a.outlier, b.outlier, "{from}: outlier"),
            "retries" => assert_eq!(a.retries, b.retries, "{from}: retries"),
            "hedge" => assert_eq!(a.hedge, b.hedge, "{from}: hedge"),
            _ => unreachable!(),
        }
    }
}

fn proxy_arm(client: Mapping, service: Mapping) -> ArmConfig {
    let mut svc = Mapping::new();
    svc.insert("name".into(), "web".into());
    svc.insert("upstreams".into(), vec![Value::from("127.0.0.1:9")].into());
    svc.insert("client".into(), client.into());
    svc.insert("service".into(), service.into());
    let file = format!(
        "servers: [{{ip: 127.0.0.1, port: 4140}}]\nservices:\n{}",
        serde_yaml_ng::to_string(&vec![Value::from(svc)]).unwrap()
    );
    let config = tailguard_proxy::yaml::parse(&file).unwrap_or_else(|e| panic!("{e}\n{file}"));
    config.services[0].arm.clone()
}

#[test]
fn every_builtin_scenario_arm_means_the_same_in_a_proxy_file() {
    let mut pasted = 0;
    for name in Scenario::builtin_names() {
        let text = Scenario::builtin_yaml(name).unwrap();
        let scenario = Scenario::builtin(name).expect("built-ins parse");
        let doc: Value = serde_yaml_ng::from_str(text).unwrap();
        let arms = get(&doc, "arms").and_then(Value::as_sequence).unwrap();
        for (arm, parsed) in arms.iter().zip(&scenario.arms) {
            let (mut client, mut service) = (Mapping::new(), Mapping::new());
            let mut blocks = Vec::new();
            for (ours, section, theirs) in PLACES {
                let Some(block) = get(arm, ours) else {
                    continue;
                };
                let to = if section == "client" {
                    &mut client
                } else {
                    &mut service
                };
                to.insert(theirs.into(), block.clone());
                blocks.push(ours);
            }
            let from = format!("{name}/{}", parsed.name);
            same(&from, &blocks, &proxy_arm(client, service), parsed);
            pasted += 1;
        }
    }
    assert!(pasted >= 30, "{pasted} arms");
}

#[test]
fn the_proxy_files_blocks_mean_the_same_in_a_scenario_arm() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let reference = "\
servers: [{ip: 127.0.0.1, port: 4140}]
services:
  - name: web
    upstreams: [127.0.0.1:9]
    client:
      loadBalancer: {kind: aperture, minAperture: 3, windowMs: 2000, load: ewma, decayTimeMs: 5000}
      failureAccrual: {kind: io.l5d.successRateWindowed, successRate: 0.8, window: 20, requests: 7,
                       backoff: {kind: jittered, minMs: 100, maxMs: 1000}}
      outlierDetection: {intervalMs: 1000, factor: 2.5, minRequests: 10, maxEjectedPercent: 20}
    service:
      retries: {budget: {minRetriesPerSec: 5, percentCanRetry: 0.1, ttlSecs: 10}, maxRetries: 2,
                backoff: {kind: exponential, minMs: 5, maxMs: 50}}
      hedge: {maxExtraLoad: 0.1, minPerSec: 2, windowMs: 5000, minDelayMs: 2, maxDelayMs: 300}
";
    let files = [
        ("reference".to_owned(), reference.to_owned()),
        (
            "add-steps.yaml".into(),
            std::fs::read_to_string(format!("{root}/bench/proxy/add-steps.yaml")).unwrap(),
        ),
        (
            "faults.yaml".into(),
            std::fs::read_to_string(format!("{root}/bench/proxy/faults.yaml")).unwrap(),
        ),
    ];
    for (file, text) in files {
        let proxy = tailguard_proxy::yaml::parse(&text).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&text).unwrap();
        let services = get(&doc, "services").and_then(Value::as_sequence).unwrap();
        for (svc, parsed) in services.iter().zip(&proxy.services) {
            let mut arm = Mapping::new();
            arm.insert("name".into(), "pasted".into());
            let mut blocks = Vec::new();
            for (ours, section, theirs) in PLACES {
                let Some(block) = get(svc, section).and_then(|s| get(s, theirs)) else {
                    continue;
                };
                arm.insert(ours.into(), block.clone());
                blocks.push(ours);
            }
            if !blocks.contains(&"balancer") {
                continue;
            }
            let scenario = format!(
                "fleet: echo\nload: {{rate: 10, duration: 1s}}\narms:\n{}",
                serde_yaml_ng::to_string(&vec![Value::from(arm)]).unwrap()
            );
            let sim = Scenario::from_yaml_str(&scenario, "pasted")
                .unwrap_or_else(|e| panic!("{file}: {e}\n{scenario}"));
            same(
                &format!("{file}/{}", parsed.name),
                &blocks,
                &parsed.arm,
                &sim.arms[0],
            );
        }
    }
}
