//! The Prometheus and Grafana examples in `deploy/`: the dashboard queries only metrics a live
//! proxy exports on its admin port, its queries parse as PromQL, and `promtool check config`
//! accepts the scrape configuration. Traffic goes to backends on 127.0.0.1 only.

use crate::support;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use support::{client, eventually, grpc_call, send, start, AsUpstream, HttpClient};
use tailguard_balance::{LoadKind, Policy};
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::{AccrualConfig, Backoff, TripPolicy};
use tailguard_testsupport::{bounded, promtool, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PREFIX: &str = "tailguard_proxy_";

/// A file under the repository's `deploy/`.
fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(path)
}

/// The dashboard, parsed.
fn dashboard() -> Value {
    let path = deploy("grafana/tailguard-proxy.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel of the dashboard, the panels of collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Every `expr` of every panel target, with its panel's title.
fn exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dashboard) {
        let title = p["title"].as_str().unwrap_or("?");
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {title:?}: a target without expr: {t}"));
            out.push((title.to_owned(), expr.to_owned()));
        }
    }
    out
}

/// The queries of the dashboard's query variables (`label_values(...)`).
fn variable_queries(dashboard: &Value) -> Vec<(String, String)> {
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    vars.iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            let q = &v["query"];
            let q = q.as_str().or(q["query"].as_str()).unwrap();
            (format!("${}", v["name"].as_str().unwrap()), q.to_owned())
        })
        .collect()
}

/// The metric names in a PromQL expression: identifiers starting with `tailguard_proxy_`,
/// outside quoted strings (label values).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut chars = expr.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, names: &mut BTreeSet<String>| {
        if word.starts_with(PREFIX) {
            names.insert(word.clone());
        }
        word.clear();
    };
    while let Some(c) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut names);
        if matches!(c, '"' | '\'' | '`') {
            // Skip the string, escapes included.
            while let Some(s) = chars.next() {
                if s == '\\' && c != '`' {
                    chars.next();
                } else if s == c {
                    break;
                }
            }
        }
    }
    flush(&mut word, &mut names);
    names
}

/// A Prometheus text exposition: the sample names, and each `# TYPE`'s name and kind.
struct Exposition {
    samples: BTreeSet<String>,
    types: BTreeMap<String, String>,
}

impl Exposition {
    fn parse(text: &str) -> Self {
        let mut samples = BTreeSet::new();
        let mut types = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                types.insert(name.to_owned(), kind.to_owned());
            } else if !line.starts_with('#') && !line.is_empty() {
                let end = line.find(['{', ' ']).unwrap_or(line.len());
                samples.insert(line[..end].to_owned());
            }
        }
        Self { samples, types }
    }

    /// Whether `name` is exported: it has samples, or it is a histogram's `_bucket`, `_sum`
    /// or `_count` and that histogram family is there.
    fn has(&self, name: &str) -> bool {
        self.samples.contains(name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|family| self.types.get(family).is_some_and(|k| k == "histogram"))
            })
    }
}

async fn scrape(c: &HttpClient, admin: SocketAddr) -> String {
    let (status, _, body) = send(c, admin, "GET", "/metrics").await;
    assert_eq!(status, 200);
    String::from_utf8_lossy(&body).into_owned()
}

/// Sends a request whose chunked body is malformed (the client's fault) on a new connection;
/// returns the status line.
async fn malformed(proxy: SocketAddr) -> String {
    let mut s = bounded(tokio::net::TcpStream::connect(proxy))
        .await
        .unwrap();
    let raw = b"POST / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\
                Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
    bounded(s.write_all(raw)).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(2).any(|w| w == b"\r\n") {
        let n = bounded(s.read(&mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    text.lines().next().unwrap_or("").to_owned()
}

#[test]
fn the_dashboard_parses_and_has_the_panels_and_variables() {
    let d = dashboard();
    let with_queries: Vec<_> = panels(&d)
        .into_iter()
        .filter(|p| p["type"] != "row")
        .filter(|p| p["targets"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert!(
        with_queries.len() >= 8,
        "{} panels with queries",
        with_queries.len()
    );
    let vars = d["templating"]["list"].as_array().unwrap();
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    assert_eq!(
        var("service")["query"],
        "label_values(tailguard_proxy_requests_total, service)"
    );
    for p in with_queries {
        for t in p["targets"].as_array().unwrap() {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "panel {}: queries the chosen data source",
                p["title"]
            );
            let expr = t["expr"].as_str().unwrap();
            assert!(
                expr.contains("$service"),
                "panel {}: filtered by $service: {expr}",
                p["title"]
            );
        }
    }
}

#[tokio::test]
async fn every_metric_the_dashboard_queries_is_exported() {
    let (good, bad) = (TestServer::start().await, TestServer::start().await);
    bad.set_status(500);
    let mut service = ServiceConfig::new("web", vec![good.upstream(), bad.upstream()]);
    // Least loaded (it has a cost gauge) picks at random between idle endpoints, so the
    // failing one is tried, and one failure takes it out: an accrual transition.
    service.arm.policy = Policy::p2c(LoadKind::Pending);
    service.arm.accrual = Some(AccrualConfig {
        policy: TripPolicy::ConsecutiveFailures { failures: 1 },
        backoff: Backoff::Constant(Duration::from_secs(600)),
    });
    let proxy = start(service).await;
    let c = client(false);
    for _ in 0..40 {
        let (status, _, _) = send(&c, proxy.addr(), "GET", "/").await;
        assert!(status == 200 || status == 500, "{status}");
    }
    assert!(bad.hits() > 0, "the failing backend was never tried");
    let h2 = client(true);
    for _ in 0..5 {
        assert_eq!(grpc_call(&h2, proxy.addr(), 0).await, Some(0));
    }
    let status = malformed(proxy.addr()).await;
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    let admin = proxy.admin_addr().unwrap();
    let counted = eventually(Duration::from_secs(5), async || {
        let text = scrape(&c, admin).await;
        text.contains("kind=\"malformed\"")
            && text.contains("grpc_status=\"0\"")
            && text.contains("class=\"dead\"")
    })
    .await;
    let text = scrape(&c, admin).await;
    assert!(
        counted,
        "the client error, gRPC calls or accrual not counted:\n{text}"
    );
    let exposition = Exposition::parse(&text);
    assert!(
        exposition
            .samples
            .contains("tailguard_proxy_requests_total"),
        "{text}"
    );

    let d = dashboard();
    let queries: Vec<_> = exprs(&d).into_iter().chain(variable_queries(&d)).collect();
    let mut missing = Vec::new();
    for (title, expr) in &queries {
        let names = metric_names(expr);
        assert!(
            !names.is_empty(),
            "{title}: no tailguard_proxy_ metric in {expr}"
        );
        for name in names {
            if !exposition.has(&name) {
                missing.push(format!("{title}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "queried but not exported: {missing:#?}\n--- exposition ---\n{text}"
    );
    proxy.shutdown().await;
}

#[test]
fn the_metric_names_of_a_query_are_its_identifiers_outside_strings() {
    let names = metric_names(
        "sum by (service) (rate(tailguard_proxy_requests_total{class!~\"tailguard_proxy_x|5xx\"}[1m]))\n\
         / on (service) group_left tailguard_proxy_endpoint_pending",
    );
    let names: Vec<_> = names.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "tailguard_proxy_endpoint_pending",
            "tailguard_proxy_requests_total"
        ]
    );
}

#[test]
fn the_dashboard_queries_parse_as_promql() {
    // Grafana's variables replaced by values Prometheus would get, then every query checked by
    // promtool as a recording rule.
    let mut rules = String::from("groups:\n  - name: tailguard_proxy_dashboard\n    rules:\n");
    for (i, (_, expr)) in exprs(&dashboard()).iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "1m")
            .replace("$__interval", "1m")
            .replace("$__range", "1h")
            .replace("$service", ".*")
            .replace("$instance", ".*");
        assert!(!expr.contains('$'), "an unknown variable in {expr}");
        rules.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let path =
        std::env::temp_dir().join(format!("tailguard-deploy-rules-{}.yml", std::process::id()));
    std::fs::write(&path, &rules).unwrap();
    let (ok, said) = promtool::run(&["check", "rules", path.to_str().unwrap()], "");
    let _ = std::fs::remove_file(&path);
    assert!(ok, "promtool check rules:\n{said}\n--- rules ---\n{rules}");
}

#[test]
fn promtool_accepts_the_prometheus_config() {
    let path = deploy("prometheus/prometheus.yml");
    let (ok, said) = promtool::run(&["check", "config", path.to_str().unwrap()], "");
    assert!(ok, "promtool check config {}:\n{said}", path.display());
    let text = std::fs::read_to_string(&path).unwrap();
    for want in [
        "127.0.0.1:9990",
        "metrics_path: /metrics",
        "scrape_interval: 5s",
        "--admin",
    ] {
        assert!(
            text.contains(want),
            "{want:?} missing from {}",
            path.display()
        );
    }
}
