use super::*;
use std::time::Duration;

const GOOD: &str = r#"
servers: [{ip: 127.0.0.1, port: 4140}]
services:
  - name: web
    upstreams: [127.0.0.1:9001, "127.0.0.1:9002 2"]
    responseClassifier: {kind: io.l5d.http.retryableRead5XX}
    client:
      loadBalancer: {kind: ewma, decayTimeMs: 5000, defaultRttMs: 20}
      failureAccrual:
        kind: io.l5d.successRate
        successRate: 0.9
        requests: 20
        backoff: {kind: constant, ms: 10000}
    service:
      retries: {budget: {minRetriesPerSec: 5, percentCanRetry: 0.1, ttlSecs: 10}}
"#;

#[test]
fn reads_linkerd_style_keys() {
    let config = parse(GOOD).unwrap();
    let s = &config.services[0];
    assert_eq!(s.arm.summary(), "p2c peak-ewma (tau 5s, default rtt 20ms) + retries (10% + 5/s, at most 3) + accrual (success rate < 0.9 over 20, 10s backoff) + rescue");
    let off = GOOD.replace(
        "    service:\n",
        "    service:\n      rescueStalled: false\n",
    );
    assert!(
        !parse(&off).unwrap().services[0].arm.rescue,
        "rescueStalled: false"
    );
    let no_age = GOOD.replace("defaultRttMs: 20}", "defaultRttMs: 20, pendingAge: false}");
    let summary = parse(&no_age).unwrap().services[0].arm.summary();
    assert!(summary.contains("no pending age"), "{summary}");
    let crate::config::Discovery::Static(list) = &s.discovery else {
        panic!("static")
    };
    assert_eq!(list[1].weight, 2);
    assert_eq!(config.admin, Some("127.0.0.1:9990".parse().unwrap()));
}

fn error_of(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn errors_name_the_key() {
    let bad_kind = GOOD.replace("kind: ewma", "kind: fastest");
    assert!(
        error_of(&bad_kind).contains("services[web].client.loadBalancer.kind: `fastest`"),
        "{}",
        error_of(&bad_kind)
    );
    let unknown = GOOD.replace("decayTimeMs", "decayMs");
    assert!(
        error_of(&unknown).contains("unknown field `decayMs`"),
        "{}",
        error_of(&unknown)
    );
    let rate = GOOD.replace("successRate: 0.9", "successRate: 1.5");
    assert!(
        error_of(&rate).contains("services[web].client.failureAccrual"),
        "{}",
        error_of(&rate)
    );
    let none = GOOD.replace(
        "    upstreams: [127.0.0.1:9001, \"127.0.0.1:9002 2\"]\n",
        "",
    );
    assert!(
        error_of(&none).contains("services[web].upstreams"),
        "{}",
        error_of(&none)
    );
    // A host name is an upstream now (resolved at start); a malformed one is not.
    let addr = GOOD.replace("127.0.0.1:9001,", "example_com:80,");
    assert!(
        error_of(&addr).contains("services[web].upstreams: `example_com:80` is not"),
        "{}",
        error_of(&addr)
    );
}

#[test]
fn reads_the_host_connection_pool_and_names_a_zero_max_size() {
    let with_pool = GOOD.replace(
        "    service:\n",
        "      hostConnectionPool: {maxSize: 4, maxWaitMs: 250, idleTimeMs: 5000}\n    service:\n",
    );
    let pool = parse(&with_pool).unwrap().services[0].pool;
    assert_eq!(pool.max_per_endpoint, Some(4));
    assert_eq!(pool.wait, std::time::Duration::from_millis(250));
    assert_eq!(pool.idle_timeout, std::time::Duration::from_secs(5));
    let zero = with_pool.replace("maxSize: 4", "maxSize: 0");
    let e = error_of(&zero);
    assert!(
        e.contains("services[web].client.hostConnectionPool.maxSize: must be above zero"),
        "{e}"
    );
    let unknown = with_pool.replace("maxSize: 4", "maxSize: 4, minSize: 1");
    assert!(error_of(&unknown).contains("minSize"));
}

#[test]
fn reads_the_listener_tls_files() {
    let with_tls = GOOD.replace(
        "port: 4140}",
        "port: 4140, tls: {certPath: /etc/tg/cert.pem, keyPath: /etc/tg/key.pem}}",
    );
    let tls = parse(&with_tls).unwrap().tls.unwrap();
    assert_eq!(tls.cert, std::path::Path::new("/etc/tg/cert.pem"));
    assert_eq!(tls.key, std::path::Path::new("/etc/tg/key.pem"));
    let missing = with_tls.replace(", keyPath: /etc/tg/key.pem", "");
    assert!(
        error_of(&missing).contains("keyPath"),
        "{}",
        error_of(&missing)
    );
}

#[test]
fn reads_the_connect_timeout_and_the_protocol_and_names_bad_values() {
    let defaults = &parse(GOOD).unwrap().services[0];
    assert_eq!(
        defaults.pool.connect_timeout,
        std::time::Duration::from_secs(1)
    );
    assert_eq!(defaults.protocol, crate::config::UpstreamProtocol::Auto);
    let set = GOOD.replace(
        "    service:\n",
        "      connectTimeoutMs: 250\n    service:\n",
    );
    let set = set.replace("  - name: web\n", "  - name: web\n    protocol: h2\n");
    let s = &parse(&set).unwrap().services[0];
    assert_eq!(
        s.pool.connect_timeout,
        std::time::Duration::from_millis(250)
    );
    assert_eq!(s.protocol, crate::config::UpstreamProtocol::Http2);
    let zero = error_of(&set.replace("connectTimeoutMs: 250", "connectTimeoutMs: 0"));
    assert!(
        zero.contains("services[web].client.connectTimeoutMs: must be above zero"),
        "{zero}"
    );
    let h3 = error_of(&set.replace("protocol: h2", "protocol: h3"));
    assert!(
        h3.contains("services[web].protocol: `h3`: expected http1, h2 or auto"),
        "{h3}"
    );
}

#[test]
fn the_classifier_may_sit_under_service_as_in_linkerd_1_but_only_once() {
    use tailguard_resilience::Method;
    let default = &parse(GOOD).unwrap().services[0];
    assert!(default.arm.classifier.retries(Method::Get));
    let moved = GOOD
        .replace(
            "    responseClassifier: {kind: io.l5d.http.retryableRead5XX}\n",
            "",
        )
        .replace(
            "    service:\n",
            "    service:\n      responseClassifier: {kind: io.l5d.http.nonRetryable5XX}\n",
        );
    let s = &parse(&moved).unwrap().services[0];
    assert!(!s.arm.classifier.retries(Method::Get), "read from service:");
    let both = GOOD.replace(
        "    service:\n",
        "    service:\n      responseClassifier: {kind: io.l5d.http.nonRetryable5XX}\n",
    );
    let e = error_of(&both);
    assert!(
        e.contains("services[web].service.responseClassifier: also given"),
        "{e}"
    );
    let bad = moved.replace("nonRetryable5XX", "never");
    let e = error_of(&bad);
    assert!(
        e.contains("services[web].service.responseClassifier.kind"),
        "{e}"
    );
}

#[test]
fn a_zero_idle_time_is_refused() {
    let zero = GOOD.replace(
        "    service:\n",
        "      hostConnectionPool: {idleTimeMs: 0}\n    service:\n",
    );
    let e = error_of(&zero);
    assert!(
        e.contains("services[web].client.hostConnectionPool.idleTimeMs: must be above zero"),
        "{e}"
    );
}

#[test]
fn reads_grpc_classifiers_body_timeouts_and_the_failure_penalty() {
    let text = GOOD
        .replace(
            "responseClassifier: {kind: io.l5d.http.retryableRead5XX}",
            "responseClassifier: {kind: io.l5d.h2.grpc.retryableStatusCodes, retryableStatusCodes: [4, 14]}\n    requestBodyIdleTimeoutMs: 0\n    responseBodyIdleTimeoutMs: 5000",
        )
        .replace("    client:\n", "    client:\n      failurePenaltyMs: 250\n");
    let config = parse(&text).unwrap();
    let s = &config.services[0];
    assert_eq!(s.arm.classifier.grpc_retryable_codes(), vec![4, 14]);
    assert!(s.arm.classifier.retries(tailguard_resilience::Method::Get));
    assert_eq!(s.arm.failure_penalty, Some(Duration::from_millis(250)));
    assert_eq!(s.body.request_idle, None, "0 turns it off");
    assert_eq!(s.body.request_min_rate, Some(240), "the default");
    assert_eq!(s.body.response_idle, Some(Duration::from_secs(5)));
    let bad = text.replace("[4, 14]", "[4, 99]");
    assert!(
        error_of(&bad).contains("responseClassifier.retryableStatusCodes: 99"),
        "{}",
        error_of(&bad)
    );
    let stray = GOOD.replace(
        "{kind: io.l5d.http.retryableRead5XX}",
        "{kind: io.l5d.http.retryableRead5XX, retryableStatusCodes: [14]}",
    );
    assert!(
        error_of(&stray).contains("only for kind"),
        "{}",
        error_of(&stray)
    );
    let never = GOOD.replace(
        "io.l5d.http.retryableRead5XX",
        "io.l5d.h2.grpc.neverRetryable",
    );
    assert!(!parse(&never).unwrap().services[0]
        .arm
        .classifier
        .retries_grpc());
}

#[test]
fn deep_flow_nesting_and_huge_files_are_refused_before_parsing() {
    let deep = format!("services: {}{}\n", "[".repeat(50_000), "]".repeat(50_000));
    let err = parse(&deep).unwrap_err();
    assert!(matches!(err, YamlError::TooDeep { line: 1 }), "{err}");
    assert_eq!(
        err.to_string(),
        "configuration: line 1: nested deeper than 32 levels"
    );
    // Brackets in comments and quoted scalars are text, not nesting; `'` inside a plain
    // scalar opens nothing.
    let text = format!(
        "# {}\nservers: [{{ip: 127.0.0.1, port: 4140}}]\nservices:\n  - name: \"{}\"\n    hosts: ['{}', it's]\n    upstreams: [127.0.0.1:9001]\n",
        "[".repeat(100),
        "{".repeat(100),
        "[".repeat(100)
    );
    let config = parse(&text).unwrap();
    assert_eq!(config.services[0].name, "{".repeat(100));
    let huge = format!("{GOOD}\n#{}\n", " ".repeat(MAX_BYTES as usize));
    assert!(matches!(parse(&huge), Err(YamlError::TooLarge)));
}

#[test]
fn a_file_larger_than_the_limit_is_not_read_whole() {
    let dir = std::env::temp_dir().join(format!("tailguard-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.yaml");
    std::fs::write(&path, vec![b'#'; (MAX_BYTES as usize) * 3]).unwrap();
    let err = load(&path).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(err, YamlError::TooLarge), "{err}");
}

#[test]
fn client_tls_takes_linkerd_keys_and_refuses_what_cannot_apply() {
    let with =
        |tls: &str| GOOD.replace("    client:\n", &format!("    client:\n      tls: {tls}\n"));
    let config = parse(&with(
        "{commonName: backend.test, trustCerts: [/etc/ca.pem], \
         clientAuth: {certPath: /etc/c.pem, keyPath: /etc/k.pem}}",
    ))
    .unwrap();
    let tls = config.services[0].tls.clone().unwrap();
    assert_eq!(tls.server_name.as_deref(), Some("backend.test"));
    assert_eq!(tls.trust, vec![std::path::PathBuf::from("/etc/ca.pem")]);
    let auth = tls.client_auth.unwrap();
    assert_eq!(auth.cert, std::path::PathBuf::from("/etc/c.pem"));
    assert!(!tls.disable_validation);
    // No `tls`: cleartext. `tls: {}`: the built-in roots, the endpoint's IP as the name.
    assert!(parse(GOOD).unwrap().services[0].tls.is_none());
    let empty = parse(&with("{}")).unwrap().services[0].tls.clone().unwrap();
    assert!(empty.trust.is_empty() && empty.server_name.is_none());
    for (tls, says) in [
        (
            "{disableValidation: true, trustCerts: [/etc/ca.pem]}",
            "services[web].client.tls.trustCerts: has no effect with disableValidation",
        ),
        (
            "{trustCerts: []}",
            "services[web].client.tls.trustCerts: is empty",
        ),
        (
            "{commonName: \"\"}",
            "services[web].client.tls.commonName: is empty",
        ),
        ("{commonname: x}", "unknown field `commonname`"),
        (
            "{clientAuth: {certPath: /c.pem}}",
            "missing field `keyPath`",
        ),
    ] {
        let e = error_of(&with(tls));
        assert!(e.contains(says), "{tls}: {e}");
    }
}

#[test]
fn hedge_grpc_methods_are_named_in_full_or_by_service() {
    let with = |list: &str| {
        GOOD.replace(
            "    service:\n",
            &format!("    service:\n      hedge: {{grpcMethods: {list}}}\n"),
        )
    };
    let config = parse(&with("[pkg.Search/Find, pkg.Cache/*]")).unwrap();
    let m = &config.services[0].grpc_hedge;
    assert!(m.contains("/pkg.Search/Find"));
    assert!(m.contains("/pkg.Cache/Get") && m.contains("/pkg.Cache/Put"));
    assert!(!m.contains("/pkg.Search/Delete"));
    assert!(
        !m.contains("/pkg.CacheX/Get"),
        "a service's prefix is not another service"
    );
    assert!(!m.contains("pkg.Search/Find"), "a path starts with /");
    assert!(parse(GOOD).unwrap().services[0].grpc_hedge.is_empty());
    for bad in [
        "[/pkg.Search/Find]",
        "[pkg.Search]",
        "[\"pkg.Search/Fi nd\"]",
        "[pkg/a/b]",
    ] {
        let e = error_of(&with(bad));
        assert!(
            e.contains("services[web].service.hedge.grpcMethods: `"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn reads_the_metric_retention_and_names_it_out_of_range() {
    let config = parse(GOOD).unwrap();
    assert_eq!(config.metrics_retain_idle, Duration::from_secs(600));
    let with = |ms: &str| {
        format!("admin: {{ip: 127.0.0.1, port: 9990, metricsRetainIdleMs: {ms}}}\n{GOOD}")
    };
    let config = parse(&with("1000")).unwrap();
    assert_eq!(config.metrics_retain_idle, Duration::from_secs(1));
    for bad in ["0", "86400001"] {
        let e = error_of(&with(bad));
        assert!(
            e.contains("admin.metricsRetainIdleMs: must be from 1 to 86400000, not "),
            "{e}"
        );
    }
}

#[test]
fn reads_the_client_error_detail_and_names_a_bad_one() {
    use crate::config::ErrorDetail;
    assert_eq!(
        parse(GOOD).unwrap().limits.client_error_detail,
        ErrorDetail::Reason
    );
    let with = |v: &str| {
        GOOD.replace(
            "servers:",
            &format!("limits: {{clientErrorDetail: {v}}}\nservers:"),
        )
    };
    assert_eq!(
        parse(&with("full")).unwrap().limits.client_error_detail,
        ErrorDetail::Full
    );
    let e = error_of(&with("verbose"));
    assert!(
        e.contains("limits.clientErrorDetail: unknown \"verbose\": reason or full"),
        "{e}"
    );
}

#[test]
fn slow_start_and_pushback_keys_are_read_and_checked() {
    let with =
        |block: &str| GOOD.replace("    client:\n", &format!("    client:\n      {block}\n"));
    let s = &parse(&with(
        "slowStart: {windowMs: 30000, aggression: 2, minWeightPercent: 5}",
    ))
    .unwrap()
    .services[0];
    let slow = s.arm.slow_start.unwrap();
    assert_eq!(slow.window, Duration::from_secs(30));
    assert_eq!((slow.aggression, slow.min_weight), (2.0, 0.05));
    assert!(
        s.arm.summary().contains("slow start (30s)"),
        "{}",
        s.arm.summary()
    );
    assert_eq!(
        parse(GOOD).unwrap().services[0].arm.slow_start,
        None,
        "off by default"
    );
    for (bad, key) in [
        ("slowStart: {aggression: 2}", "client.slowStart.windowMs"),
        ("slowStart: {windowMs: 0}", "client.slowStart.windowMs"),
        (
            "slowStart: {windowMs: 1000, aggression: 0}",
            "client.slowStart.aggression",
        ),
        (
            "slowStart: {windowMs: 1000, minWeightPercent: 150}",
            "client.slowStart.minWeightPercent",
        ),
        ("pushbackMaxMs: 3600001", "client.pushbackMaxMs"),
    ] {
        let e = error_of(&with(bad));
        assert!(e.contains(key), "{bad}: {e}");
    }
    let off = parse(&with("pushbackMaxMs: 0")).unwrap();
    assert_eq!(off.services[0].arm.pushback_max, None);
    let default = parse(GOOD).unwrap();
    assert_eq!(
        default.services[0].arm.pushback_max,
        Some(Duration::from_secs(10))
    );
}

#[test]
fn a_rate_limit_is_read_and_checked() {
    let with = |line: &str| GOOD.replace("    client:\n", &format!("    {line}\n    client:\n"));
    let s = &parse(&with("rateLimit: {requestsPerSec: 250.5, burst: 40}"))
        .unwrap()
        .services[0];
    let r = s.rate_limit.unwrap();
    assert_eq!((r.per_sec, r.burst), (250.5, 40));
    let r = parse(&with("rateLimit: {requestsPerSec: 100}"))
        .unwrap()
        .services[0]
        .rate_limit
        .unwrap();
    assert_eq!(r.burst, 100, "a second's worth by default");
    assert_eq!(parse(GOOD).unwrap().services[0].rate_limit, None);
    for (bad, key) in [
        ("rateLimit: {requestsPerSec: 0}", "rateLimit.requestsPerSec"),
        (
            "rateLimit: {requestsPerSec: -5}",
            "rateLimit.requestsPerSec",
        ),
        (
            "rateLimit: {requestsPerSec: 10, burst: 0}",
            "rateLimit.burst",
        ),
    ] {
        let e = error_of(&with(bad));
        assert!(e.contains(key), "{bad}: {e}");
    }
    assert!(error_of(&with("rateLimit: {rps: 10}")).contains("unknown field `rps`"));
}

#[test]
fn admission_is_read_and_checked() {
    use tailguard_resilience::limit::Algorithm;
    let with = |line: &str| GOOD.replace("    client:\n", &format!("    {line}\n    client:\n"));
    let s = &parse(&with(
        "concurrencyLimit: {kind: gradient, minLimit: 8}\n    queue: {maxSize: 100, maxWaitMs: 20}\n    criticality: true\n    maxConcurrentRequests: 64",
    ))
    .unwrap()
    .services[0];
    let a = s.arm.admission.unwrap();
    assert_eq!(a.max_in_flight, Some(64));
    let l = a.limit.unwrap();
    assert_eq!((l.initial, l.min, l.max), (20, 8, 1000));
    assert!(matches!(l.algorithm, Algorithm::Gradient { .. }));
    assert_eq!(a.queue.max_size, 100);
    assert_eq!(a.queue.max_wait, Duration::from_millis(20));
    assert!(a.criticality);
    let aimd = parse(&with("concurrencyLimit: {kind: aimd, backoffRatio: 0.5}")).unwrap();
    let a = aimd.services[0].arm.admission.unwrap();
    assert_eq!(a.max_in_flight, None);
    assert_eq!(a.queue.max_size, 0, "nobody waits without a queue");
    assert!(!a.criticality, "criticality is opt-in");
    assert_eq!(parse(GOOD).unwrap().services[0].arm.admission, None);
    for (bad, key) in [
        ("concurrencyLimit: {kind: vegas}", "concurrencyLimit.kind"),
        (
            "concurrencyLimit: {kind: aimd, smoothing: 0.5}",
            "concurrencyLimit.smoothing",
        ),
        (
            "concurrencyLimit: {kind: gradient, minLimit: 0}",
            "concurrencyLimit.minLimit",
        ),
        (
            "concurrencyLimit: {kind: gradient, minLimit: 50, initialLimit: 20}",
            "concurrencyLimit",
        ),
        ("maxConcurrentRequests: 0", "maxConcurrentRequests"),
        ("queue: {maxSize: 10, maxWaitMs: 5}", "queue"),
        ("criticality: true", "criticality"),
        (
            "maxConcurrentRequests: 4\n    queue: {maxSize: 10}",
            "queue.maxWaitMs",
        ),
        (
            "maxConcurrentRequests: 4\n    queue: {maxSize: 2000000, maxWaitMs: 5}",
            "queue.maxSize",
        ),
    ] {
        let e = error_of(&with(bad));
        assert!(e.contains(&format!("services[web].{key}")), "{bad}: {e}");
    }
}

#[test]
fn routes_are_read_and_checked() {
    let with = |block: &str| GOOD.replace("    client:\n", &format!("    {block}\n    client:\n"));
    let config = parse(&with(
        "routes: [{name: get-user, condition: {method: GET, pathRegex: '/users/[0-9]+'}, timeoutMs: 250, isRetryable: false, rateLimit: {requestsPerSec: 5}}, {name: any}]",
    ))
    .unwrap();
    let routes = &config.services[0].routes;
    assert_eq!(routes.len(), 2);
    let r = &routes[0];
    assert_eq!(r.method, Some(http::Method::GET));
    assert!(r.path.as_ref().unwrap().is_match("/users/7"));
    assert_eq!(r.timeout, Some(Duration::from_millis(250)));
    assert_eq!(
        (r.retryable, r.rate_limit.map(|l| l.burst)),
        (Some(false), Some(5))
    );
    assert!(
        routes[1].matches(&http::Method::POST, "/x"),
        "no condition: every request"
    );
    for (bad, key) in [
        (
            "routes: [{name: a, condition: {pathRegex: '(unclosed'}}]",
            "routes[0].condition.pathRegex",
        ),
        (
            "routes: [{name: a, condition: {pathRegex: '[a-z]{1000}{1000}'}}]",
            "routes[0].condition.pathRegex",
        ),
        (
            "routes: [{name: a, condition: {method: 'GE T'}}]",
            "routes[0].condition.method",
        ),
        ("routes: [{name: a}, {name: a}]", "routes[1].name"),
        ("routes: [{name: '[default]'}]", "routes[0].name"),
        ("routes: [{name: a, timeoutMs: 0}]", "routes[0].timeoutMs"),
        (
            "routes: [{name: a, rateLimit: {requestsPerSec: 0}}]",
            "routes[0].rateLimit.requestsPerSec",
        ),
    ] {
        let e = error_of(&with(bad));
        assert!(e.contains(key), "{bad}: {e}");
    }
}

#[test]
fn a_split_is_read_its_leaves_take_no_host_and_its_mistakes_are_named() {
    const SPLIT: &str = r#"
servers: [{ip: 127.0.0.1, port: 4140}]
services:
  - name: web
    hosts: [web.example]
    split: [{service: web-v1, weight: 900}, {service: web-v2, weight: 100}]
  - name: web-v1
    upstreams: [127.0.0.1:9001]
  - name: web-v2
    upstreams: [127.0.0.1:9002]
  - name: other
    upstreams: [127.0.0.1:9003]
"#;
    let c = parse(SPLIT).unwrap();
    c.validate().unwrap();
    let crate::config::Discovery::Split(leaves) = &c.services[0].discovery else {
        panic!("a split")
    };
    assert_eq!(
        (leaves[0].weight, leaves[1].service.as_str()),
        (900, "web-v2")
    );
    // Leaves without `hosts` are reached only through the split; others take any host.
    assert!(c.services[1].hosts.is_empty() && c.services[2].hosts.is_empty());
    assert_eq!(c.services[3].hosts, ["*"]);
    let with = |extra: &str| {
        SPLIT.replace(
            "    hosts: [web.example]\n",
            &format!("    hosts: [web.example]\n{extra}"),
        )
    };
    for (extra, key) in [
        ("    upstreams: [127.0.0.1:1]\n", "services[web].upstreams"),
        (
            "    client: {connectTimeoutMs: 10}\n",
            "services[web].client",
        ),
        (
            "    service: {retries: {budget: {percentCanRetry: 0.2}}}\n",
            "services[web].service.retries",
        ),
        ("    service: {hedge: {}}\n", "services[web].service.hedge"),
    ] {
        let e = error_of(&with(extra));
        assert!(e.contains(key), "{extra}: {e}");
    }
    let e = parse(&SPLIT.replace("weight: 100", "weight: -1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("weight"), "{e}");
}

#[test]
fn the_access_log_is_read_and_checked() {
    let with = |log: &str| format!("{GOOD}accessLog: {log}\n");
    let c = parse(&with(
        "{path: /var/log/tailguard.log, format: json, query: true}",
    ))
    .unwrap();
    let a = c.access_log.unwrap();
    assert_eq!(
        (a.path.to_str(), a.query),
        (Some("/var/log/tailguard.log"), true)
    );
    assert!(
        !parse(&with("{path: /dev/stdout}"))
            .unwrap()
            .access_log
            .unwrap()
            .query
    );
    assert!(parse(GOOD).unwrap().access_log.is_none());
    for (log, key) in [
        ("{path: /x, format: clf}", "accessLog.format"),
        ("{path: ''}", "accessLog.path"),
    ] {
        let e = error_of(&with(log));
        assert!(e.contains(key), "{log}: {e}");
    }
    assert!(error_of(&with("{path: /x, fmt: json}")).contains("unknown field `fmt`"));
}

#[test]
fn tracing_is_read_and_checked() {
    let with = |t: &str| format!("{GOOD}tracing: {t}\n");
    let c = parse(&with(
        "{otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', sampleRate: 0.01}",
    ))
    .unwrap();
    let t = c.tracing.unwrap();
    assert_eq!(
        t.otlp_endpoint.to_string(),
        "http://127.0.0.1:4318/v1/traces"
    );
    assert_eq!(
        (t.sample_rate, t.service_name.as_str()),
        (0.01, "tailguard")
    );
    let d = parse(&with("{otlpEndpoint: 'http://collector:4318/v1/traces'}")).unwrap();
    assert_eq!(d.tracing.unwrap().sample_rate, 0.0);
    assert!(parse(GOOD).unwrap().tracing.is_none());
    for (t, key) in [
        (
            "{otlpEndpoint: 'https://c:4318/v1/traces'}",
            "tracing.otlpEndpoint",
        ),
        ("{otlpEndpoint: '/v1/traces'}", "tracing.otlpEndpoint"),
        (
            "{otlpEndpoint: 'http://c:4318', sampleRate: 1.5}",
            "tracing.sampleRate",
        ),
        (
            "{otlpEndpoint: 'http://c:4318', serviceName: ''}",
            "tracing.serviceName",
        ),
    ] {
        let e = error_of(&with(t));
        assert!(e.contains(key), "{t}: {e}");
    }
}
