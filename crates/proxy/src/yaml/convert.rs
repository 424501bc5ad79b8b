//! From the file as written to the typed [`Config`]: defaults, kinds and ranges, each error
//! naming its key.

use super::error::YamlError;
use super::file::{BalancerSpec, File, Kind, LimitSpec, Namer, QueueSpec, ServiceSpec};
use crate::config::{
    ClientAuth, Config, Discovery, ErrorDetail, EscapedSlashes, H1Server, HostHeader, Limits,
    PortRef, ServiceConfig, TlsConfig, UpstreamProtocol, UpstreamTls,
};
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_balance::{LoadKind, Policy};
use tailguard_client::spec::SpecError;
use tailguard_client::{AdmissionConfig, ArmConfig, RetryConfig, Timeouts};
use tailguard_resilience::{AccrualConfig, Classifier};

fn err(key: impl Into<String>, message: impl Into<String>) -> YamlError {
    YamlError::Key {
        key: key.into(),
        message: message.into(),
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Builds the typed configuration.
///
/// # Errors
/// The first value out of range or unknown kind, naming its key.
pub fn into_config(file: File) -> Result<Config, YamlError> {
    let [server] = file.servers.as_slice() else {
        return Err(err("servers", "exactly one server (ip, port) is supported"));
    };
    let admin = file
        .admin
        .as_ref()
        .map_or(SocketAddr::from(([127, 0, 0, 1], 9990)), |a| {
            SocketAddr::new(a.ip, a.port)
        });
    let metrics_retain_idle = file
        .admin
        .as_ref()
        .and_then(|a| a.metrics_retain_idle_ms)
        .map_or(crate::config::METRICS_RETAIN_IDLE_DEFAULT, ms);
    let d = Limits::default();
    let limits = Limits {
        header_read_timeout: file
            .limits
            .header_read_timeout_ms
            .map_or(d.header_read_timeout, ms),
        max_connections: file.limits.max_connections,
        drain: file.limits.drain_ms.map_or(d.drain, ms),
        max_request_header_bytes: file
            .limits
            .max_request_header_bytes
            .unwrap_or(d.max_request_header_bytes),
        escaped_slashes: match file.limits.escaped_slashes.as_deref() {
            None => d.escaped_slashes,
            Some(kind) => escaped_slashes(kind)?,
        },
        h1_server: match file.limits.h1_server.as_deref() {
            None => d.h1_server,
            Some(kind) => h1_server(kind)?,
        },
        client_error_detail: match file.limits.client_error_detail.as_deref() {
            None => d.client_error_detail,
            Some("reason") => ErrorDetail::Reason,
            Some("full") => ErrorDetail::Full,
            Some(other) => {
                return Err(err(
                    "limits.clientErrorDetail",
                    format!("unknown {other:?}: reason or full"),
                ))
            }
        },
    };
    // A service a split sends to takes no host of its own unless it names some.
    let leaves: std::collections::HashSet<String> = file
        .services
        .iter()
        .flat_map(|s| s.split.iter().flatten().map(|l| l.service.clone()))
        .collect();
    let services = file
        .services
        .into_iter()
        .map(|s| {
            let leaf = leaves.contains(&s.name);
            service(s, leaf)
        })
        .collect::<Result<_, _>>()?;
    let tls = server.tls.as_ref().map(|t| TlsConfig {
        cert: t.cert_path.clone(),
        key: t.key_path.clone(),
    });
    Ok(Config {
        listen: SocketAddr::new(server.ip, server.port),
        tls,
        admin: Some(admin),
        metrics_retain_idle,
        services,
        limits,
        seed: None,
        access_log: match &file.access_log {
            None => None,
            Some(a) => Some(access_log(a)?),
        },
        tracing: match &file.tracing {
            None => None,
            Some(t) => Some(tracing_config(t)?),
        },
    })
}

fn access_log(a: &super::file::AccessLogSpec) -> Result<crate::config::AccessLogConfig, YamlError> {
    match a.format.as_deref() {
        None | Some("json") => {}
        Some(other) => {
            return Err(err(
                "accessLog.format",
                format!("unknown {other:?}: json is the one format"),
            ))
        }
    }
    if a.path.as_os_str().is_empty() {
        return Err(err("accessLog.path", "is empty"));
    }
    Ok(crate::config::AccessLogConfig {
        path: a.path.clone(),
        query: a.query.unwrap_or(false),
    })
}

fn tracing_config(t: &super::file::TracingSpec) -> Result<crate::config::TracingConfig, YamlError> {
    let uri: http::Uri = t
        .otlp_endpoint
        .parse()
        .map_err(|e| err("tracing.otlpEndpoint", format!("{e}")))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(err(
            "tracing.otlpEndpoint",
            "an http:// URL with a host, e.g. http://127.0.0.1:4318/v1/traces",
        ));
    }
    let rate = t.sample_rate.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&rate) {
        return Err(err("tracing.sampleRate", format!("{rate}: 0 to 1")));
    }
    let name = t
        .service_name
        .clone()
        .unwrap_or_else(|| "tailguard".to_owned());
    if name.is_empty() || name.len() > 256 {
        return Err(err("tracing.serviceName", "1 to 256 characters"));
    }
    Ok(crate::config::TracingConfig {
        otlp_endpoint: uri,
        sample_rate: rate,
        service_name: name,
    })
}

fn escaped_slashes(kind: &str) -> Result<EscapedSlashes, YamlError> {
    match kind {
        "reject" => Ok(EscapedSlashes::Reject),
        "unescapeAndForward" => Ok(EscapedSlashes::UnescapeAndForward),
        "keepUnchanged" => Ok(EscapedSlashes::KeepUnchanged),
        other => Err(err(
            "limits.escapedSlashes",
            format!("unknown {other:?}: reject, unescapeAndForward or keepUnchanged"),
        )),
    }
}

fn h1_server(kind: &str) -> Result<H1Server, YamlError> {
    match kind {
        "lean" => Ok(H1Server::Lean),
        "hyper" => Ok(H1Server::Hyper),
        other => Err(err(
            "limits.h1Server",
            format!("unknown {other:?}: lean or hyper"),
        )),
    }
}

fn service(spec: ServiceSpec, leaf: bool) -> Result<ServiceConfig, YamlError> {
    let key = |k: &str| format!("services[{}].{k}", spec.name);
    let discovery = discovery(&spec, &key)?;
    let mut s = ServiceConfig::new(spec.name.clone(), Vec::new());
    s.hosts = match &spec.hosts {
        Some(h) => h.clone(),
        None if leaf => Vec::new(),
        None => vec!["*".to_owned()],
    };
    s.path_prefix = spec.path_prefix.clone();
    s.discovery = discovery;
    s.protocol = match spec.protocol.as_deref() {
        None => UpstreamProtocol::default(),
        Some(p) => p.parse().map_err(|e| err(key("protocol"), e))?,
    };
    if let Some(h) = &spec.rewrite_host {
        s.host_header = HostHeader::Rewrite(h.clone());
    }
    s.retry_buffer = spec.retry_buffer_bytes.unwrap_or(s.retry_buffer);
    if let Some(r) = &spec.rate_limit {
        s.rate_limit = Some(rate_limit(r, &|k| key(&format!("rateLimit.{k}")))?);
    }
    s.routes = routes(&spec.routes, &key)?;
    // 0 turns a body limit off (a long-lived stream may be silent for long).
    let limit = |v: Option<u64>, default: Option<u64>| match v {
        None => default,
        Some(0) => None,
        Some(n) => Some(n),
    };
    let in_ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
    let b = s.body;
    s.body = crate::config::BodyTimeouts {
        request_idle: limit(spec.request_body_idle_timeout_ms, in_ms(b.request_idle)).map(ms),
        request_min_rate: limit(spec.request_body_min_bytes_per_sec, b.request_min_rate),
        response_idle: limit(spec.response_body_idle_timeout_ms, in_ms(b.response_idle)).map(ms),
        ..b
    };
    s.arm = arm(&spec, &key)?;
    s.arm.admission = admission(&spec, &key)?;
    if let Some(names) = spec
        .service
        .hedge
        .as_ref()
        .and_then(|h| h.grpc_methods.as_ref())
    {
        s.grpc_hedge = crate::config::GrpcMethods::new(names)
            .map_err(|e| err(key("service.hedge.grpcMethods"), e))?;
    }
    // The shared parser refused a probePath on any kind but prequal.
    if let Some(p) = spec
        .client()
        .load_balancer
        .as_ref()
        .and_then(|b| b.probe_path.as_ref())
    {
        s.probe_path = p.clone();
    }
    if let Some(t) = spec.client().connect_timeout_ms {
        if t == 0 {
            return Err(err(key("client.connectTimeoutMs"), "must be above zero"));
        }
        s.pool.connect_timeout = ms(t);
    }
    if let Some(t) = &spec.client().tls {
        s.tls = Some(client_tls(t, &|k| key(&format!("client.tls.{k}")))?);
    }
    if let Some(p) = &spec.client().host_connection_pool {
        s.pool.max_per_endpoint = p.max_size;
        s.pool.wait = p.max_wait_ms.map_or(s.pool.wait, ms);
        s.pool.idle_timeout = p.idle_time_ms.map_or(s.pool.idle_timeout, ms);
        if p.idle_time_ms == Some(0) {
            return Err(err(
                key("client.hostConnectionPool.idleTimeMs"),
                "must be above zero (0 would close every connection after one request)",
            ));
        }
        if p.max_size == Some(0) {
            return Err(err(
                key("client.hostConnectionPool.maxSize"),
                "must be above zero",
            ));
        }
    }
    Ok(s)
}

fn client_tls(
    t: &super::file::ClientTls,
    key: &dyn Fn(&str) -> String,
) -> Result<UpstreamTls, YamlError> {
    let disable_validation = t.disable_validation.unwrap_or(false);
    let trust = t.trust_certs.clone().unwrap_or_default();
    if disable_validation && !trust.is_empty() {
        return Err(err(
            key("trustCerts"),
            "has no effect with disableValidation: true (no certificate is checked); remove one",
        ));
    }
    if t.trust_certs.as_ref().is_some_and(Vec::is_empty) {
        return Err(err(
            key("trustCerts"),
            "is empty: list CA files, or leave the key out for the built-in roots",
        ));
    }
    if t.common_name.as_deref() == Some("") {
        return Err(err(key("commonName"), "is empty"));
    }
    Ok(UpstreamTls {
        server_name: t.common_name.clone(),
        trust,
        client_auth: t.client_auth.as_ref().map(|a| ClientAuth {
            cert: a.cert_path.clone(),
            key: a.key_path.clone(),
        }),
        disable_validation,
    })
}

fn discovery(spec: &ServiceSpec, key: &dyn Fn(&str) -> String) -> Result<Discovery, YamlError> {
    match (&spec.upstreams, &spec.namer, &spec.split) {
        (None, None, Some(leaves)) => {
            if spec.client.is_some() {
                return Err(err(
                    key("client"),
                    "a split has no endpoints of its own: give client settings on its leaves",
                ));
            }
            let attempts = [
                ("service.retries", spec.service.retries.is_some()),
                ("service.hedge", spec.service.hedge.is_some()),
                (
                    "service.rescueStalled",
                    spec.service.rescue_stalled.is_some(),
                ),
                (
                    "service.responseClassifier",
                    spec.service.response_classifier.is_some(),
                ),
                ("responseClassifier", spec.response_classifier.is_some()),
            ];
            if let Some((k, _)) = attempts.iter().find(|(_, given)| *given) {
                return Err(err(
                    key(k),
                    "a split's attempts follow the leaf each request goes to: set it on the leaves",
                ));
            }
            Ok(Discovery::Split(
                leaves
                    .iter()
                    .map(|l| crate::config::SplitLeaf {
                        service: l.service.clone(),
                        weight: l.weight,
                    })
                    .collect(),
            ))
        }
        (Some(list), None, None) => {
            let parsed = list
                .iter()
                .map(|u| crate::config::Entry::parse(u).map_err(|e| err(key("upstreams"), e)));
            Ok(Discovery::of_entries(parsed.collect::<Result<_, _>>()?))
        }
        (None, Some(n), None) => namer(n, key),
        _ => Err(err(
            key("upstreams"),
            "give exactly one of `upstreams`, `namer` and `split`",
        )),
    }
}

fn namer(n: &Namer, key: &dyn Fn(&str) -> String) -> Result<Discovery, YamlError> {
    let required = |k: &str| {
        err(
            key(&format!("namer.{k}")),
            format!("required for kind {}", n.kind),
        )
    };
    let every = |default: u64| ms(n.interval_ms.unwrap_or(default).max(1));
    match n.kind.as_str() {
        "io.l5d.fs" => {
            let path = n.path.clone().ok_or_else(|| required("path"))?;
            Ok(Discovery::File {
                path,
                interval: every(1000),
            })
        }
        "io.l5d.dns" | "io.l5d.dnssrv" => {
            let text = n.name.as_deref().ok_or_else(|| required("name"))?;
            let name = crate::config::DnsName::parse(text)
                .map_err(|e| err(key("namer.name"), e.to_string()))?;
            Ok(Discovery::Dns {
                name,
                server: n.server,
                interval: every(5000),
            })
        }
        "io.l5d.k8s" => {
            let service = n.service.clone().ok_or_else(|| required("service"))?;
            let port = match n.port.as_ref().ok_or_else(|| required("port"))? {
                super::file::PortSpec::Number(p) => PortRef::Number(*p),
                super::file::PortSpec::Name(s) => PortRef::Name(s.clone()),
            };
            Ok(Discovery::Kubernetes {
                namespace: n.namespace.clone(),
                service,
                port,
            })
        }
        o => Err(err(
            key("namer.kind"),
            format!("`{o}`: expected io.l5d.fs, io.l5d.dns, io.l5d.dnssrv or io.l5d.k8s"),
        )),
    }
}

/// `maxConcurrentRequests` (the hard cap), `concurrencyLimit` (the adaptive limit under it),
/// `queue` and `criticality` as one admission (`None`: no bound on attempts in flight).
fn admission(
    spec: &ServiceSpec,
    key: &dyn Fn(&str) -> String,
) -> Result<Option<AdmissionConfig>, YamlError> {
    let limit = spec
        .concurrency_limit
        .as_ref()
        .map(LimitSpec::config)
        .transpose()
        .map_err(spec_err(&key("concurrencyLimit")))?;
    let queue = spec
        .queue
        .as_ref()
        .map(QueueSpec::config)
        .transpose()
        .map_err(spec_err(&key("queue")))?;
    if spec.max_concurrent_requests == Some(0) {
        return Err(err(key("maxConcurrentRequests"), "must be at least 1"));
    }
    if spec.max_concurrent_requests.is_none() && limit.is_none() {
        return match (&queue, spec.criticality) {
            (Some(_), _) => Err(err(
                key("queue"),
                "needs maxConcurrentRequests or concurrencyLimit: nothing to wait for",
            )),
            (None, Some(true)) => Err(err(
                key("criticality"),
                "needs maxConcurrentRequests or concurrencyLimit: nothing to order",
            )),
            _ => Ok(None),
        };
    }
    let mut a = AdmissionConfig::cap(1);
    a.max_in_flight = spec.max_concurrent_requests;
    a.limit = limit;
    a.queue = queue.unwrap_or(a.queue);
    a.criticality = spec.criticality.unwrap_or(false);
    Ok(Some(a))
}

fn arm(spec: &ServiceSpec, key: &dyn Fn(&str) -> String) -> Result<ArmConfig, YamlError> {
    let policy = match &spec.client().load_balancer {
        None => Policy::p2c(LoadKind::peak_ewma()),
        Some(b) => b.policy().map_err(spec_err(&key("client.loadBalancer")))?,
    };
    let mut arm = ArmConfig::new(spec.name.clone(), policy);
    arm.classifier = match (&spec.response_classifier, &spec.service.response_classifier) {
        (Some(_), Some(_)) => {
            return Err(err(
                key("service.responseClassifier"),
                "also given as responseClassifier: give it once",
            ))
        }
        (Some(c), None) => classifier(Some(c), &key("responseClassifier"))?,
        (None, Some(c)) => classifier(Some(c), &key("service.responseClassifier"))?,
        (None, None) => classifier(None, &key("responseClassifier"))?,
    };
    arm.accrual = match &spec.client().failure_accrual {
        None => Some(AccrualConfig::default()),
        Some(a) => a
            .config()
            .map_err(spec_err(&key("client.failureAccrual")))?,
    };
    // Retries are on by default, as in Linkerd 1.
    arm.retries = Some(match &spec.service.retries {
        None => RetryConfig::default(),
        Some(r) => r.config().map_err(spec_err(&key("service.retries")))?,
    });
    arm.timeouts = Timeouts {
        attempt: spec.client().request_attempt_timeout_ms.map(ms),
        total: spec.service.total_timeout_ms.map(ms),
    };
    if let Some(o) = &spec.client().outlier_detection {
        let config = o
            .config()
            .map_err(spec_err(&key("client.outlierDetection")))?;
        arm.outlier = Some(config);
    }
    arm.rescue = spec.service.rescue_stalled.unwrap_or(true);
    if let Some(h) = &spec.service.hedge {
        arm.hedge = Some(h.config().map_err(spec_err(&key("service.hedge")))?);
    }
    if let Some(p) = spec.client().failure_penalty_ms {
        arm.failure_penalty = Some(ms(p)).filter(|d| !d.is_zero());
    }
    if let Some(h) = &spec.client().health_check {
        arm.health_check = Some(health_check(h, &|k| {
            key(&format!("client.healthCheck.{k}"))
        })?);
    }
    if let Some(s) = &spec.client().slow_start {
        arm.slow_start = Some(s.config().map_err(spec_err(&key("client.slowStart")))?);
    }
    if let Some(p) = spec.client().pushback_max_ms {
        // 0: pushback ignored; above an hour, refused with the key by the arm's validation.
        arm.pushback_max = Some(ms(p)).filter(|d| !d.is_zero());
    }
    Ok(arm)
}

/// A `rateLimit` block, checked (the error names its key); the burst defaults to a second's
/// worth (at least 1).
fn rate_limit(
    r: &super::file::RateLimitSpec,
    key: &dyn Fn(&str) -> String,
) -> Result<tailguard_resilience::rate::RateLimit, YamlError> {
    use tailguard_resilience::rate::{RateLimit, RateLimitError};
    let burst = r
        .burst
        .unwrap_or_else(|| r.requests_per_sec.ceil().clamp(1.0, 1e7) as u32);
    let limit = RateLimit {
        per_sec: r.requests_per_sec,
        burst,
    };
    limit.validate().map_err(|e| {
        let k = match e {
            RateLimitError::Rate(_) => "requestsPerSec",
            RateLimitError::Burst(_) => "burst",
        };
        err(key(k), e.to_string())
    })?;
    Ok(limit)
}

/// A service's `routes`, checked: unique names, not `[default]`, a method HTTP knows, a path
/// pattern that compiles within the size limit (each error names its key).
fn routes(
    specs: &[super::file::RouteSpec],
    key: &dyn Fn(&str) -> String,
) -> Result<Vec<crate::route::Route>, YamlError> {
    if specs.len() > 1000 {
        return Err(err(
            key("routes"),
            format!("{} routes: at most 1000", specs.len()),
        ));
    }
    let mut out: Vec<crate::route::Route> = Vec::with_capacity(specs.len());
    for (i, r) in specs.iter().enumerate() {
        let at = |k: &str| key(&format!("routes[{i}].{k}"));
        if r.name.is_empty() || r.name == crate::route::DEFAULT_ROUTE || r.name.len() > 256 {
            return Err(err(at("name"), "a name of 1 to 256 bytes, not [default]"));
        }
        if out.iter().any(|o| o.name == r.name) {
            return Err(err(
                at("name"),
                format!("{:?} is the name of an earlier route", r.name),
            ));
        }
        let method = match &r.condition.method {
            None => None,
            Some(m) => Some(
                m.parse::<http::Method>()
                    .map_err(|_| err(at("condition.method"), format!("{m:?} is not a method")))?,
            ),
        };
        let path = match &r.condition.path_regex {
            None => None,
            Some(p) => Some(
                crate::route::PathRegex::new(p).map_err(|e| err(at("condition.pathRegex"), e))?,
            ),
        };
        let rate = match &r.rate_limit {
            None => None,
            Some(l) => Some(rate_limit(l, &|k| at(&format!("rateLimit.{k}")))?),
        };
        if r.timeout_ms == Some(0) {
            return Err(err(at("timeoutMs"), "must be above zero"));
        }
        out.push(crate::route::Route {
            name: r.name.clone(),
            method,
            path,
            timeout: r.timeout_ms.map(ms),
            retryable: r.is_retryable,
            rate_limit: rate,
        });
    }
    Ok(out)
}

/// `client.healthCheck`, defaults for what is not given, checked (the error names its key).
fn health_check(
    h: &super::file::HealthCheckSpec,
    key: &dyn Fn(&str) -> String,
) -> Result<tailguard_resilience::HealthCheckConfig, YamlError> {
    use tailguard_resilience::{HealthCheckConfig, HealthCheckError};
    let d = HealthCheckConfig::default();
    if h.path.is_some() && h.grpc_service.is_some() {
        return Err(err(
            key("grpcService"),
            "also given a path: a check is HTTP or gRPC, not both",
        ));
    }
    let config = HealthCheckConfig {
        path: h.path.clone().unwrap_or(d.path),
        grpc_service: h.grpc_service.clone(),
        interval: h.interval_ms.map_or(d.interval, ms),
        timeout: h.timeout_ms.map_or(d.timeout, ms),
        healthy_threshold: h.healthy_threshold.unwrap_or(d.healthy_threshold),
        unhealthy_threshold: h.unhealthy_threshold.unwrap_or(d.unhealthy_threshold),
    };
    if config.grpc_service.as_ref().is_some_and(|s| s.len() > 1024) {
        return Err(err(key("grpcService"), "at most 1024 bytes"));
    }
    config.validate().map_err(|e| {
        let k = match e {
            HealthCheckError::Interval => "intervalMs",
            HealthCheckError::Timeout => "timeoutMs",
            HealthCheckError::Threshold if !(1..=100).contains(&config.healthy_threshold) => {
                "healthyThreshold"
            }
            HealthCheckError::Threshold => "unhealthyThreshold",
            HealthCheckError::Path => "path",
        };
        err(key(k), e.to_string())
    })?;
    Ok(config)
}

fn classifier(k: Option<&Kind>, key: &str) -> Result<Classifier, YamlError> {
    let Some(k) = k else {
        return Ok(Classifier::retryable_read_5xx());
    };
    let name = k
        .kind
        .trim_start_matches("io.l5d.http.")
        .trim_start_matches("io.l5d.h2.")
        .trim_start_matches("io.l5d.");
    let http = Classifier::retryable_read_5xx();
    let codes = k.retryable_status_codes.as_deref();
    if codes.is_some() && name != "grpc.retryableStatusCodes" {
        let why = "only for kind io.l5d.h2.grpc.retryableStatusCodes";
        return Err(err(format!("{key}.retryableStatusCodes"), why));
    }
    let mut c = match name {
        "nonRetryable5XX" => Classifier::non_retryable_5xx(),
        "retryableRead5XX" => http,
        "retryableIdempotent5XX" => Classifier::retryable_idempotent_5xx(),
        "grpc.default" => http,
        "grpc.neverRetryable" => http.with_grpc_retryable(&[]),
        "grpc.alwaysRetryable" => http.with_grpc_always_retryable(),
        "grpc.retryableStatusCodes" => {
            let codes = codes.ok_or_else(|| err(format!("{key}.retryableStatusCodes"), "required for this kind"))?;
            if let Some(bad) = codes.iter().find(|c| **c > 16) {
                return Err(err(format!("{key}.retryableStatusCodes"), format!("{bad}: gRPC codes are 0 to 16")));
            }
            http.with_grpc_retryable(codes)
        }
        o => return Err(err(format!("{key}.kind"), format!("`{o}`: expected io.l5d.http.nonRetryable5XX, retryableRead5XX, retryableIdempotent5XX, or io.l5d.h2.grpc.default, neverRetryable, alwaysRetryable, retryableStatusCodes"))),
    };
    c.four_xx_is_failure = k.four_xx_is_failure.unwrap_or(false);
    Ok(c)
}

/// Every `loadBalancer.kind` (and `--balancer`) the proxy takes, in its canonical spelling
/// (the scenario spellings, `round-robin` and the like, are accepted too).
pub const BALANCER_KINDS: [&str; 9] = [
    "roundRobin",
    "random",
    "p2c",
    "ewma",
    "heap",
    "bestOf",
    "fullScan",
    "aperture",
    "prequal",
];

/// The balancer a `loadBalancer.kind` names, with default parameters (for `--balancer`).
///
/// # Errors
/// An unknown kind.
pub fn balancer_kind(kind: &str) -> Result<Policy, YamlError> {
    BalancerSpec::of_kind(kind)
        .policy()
        .map_err(spec_err("--balancer"))
}

/// A shared block's error ([`tailguard_client::spec`]) under its place in the file.
fn spec_err(block: &str) -> impl Fn(SpecError) -> YamlError + '_ {
    move |e| err(e.key_in(block), e.message)
}
