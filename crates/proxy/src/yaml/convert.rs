//! From the file as written to the typed [`Config`]: defaults, kinds and ranges, each error
//! naming its key.

use super::error::YamlError;
use super::file::{Accrual, BackoffSpec, Balancer, File, Kind, Namer, Retries, ServiceSpec};
use crate::config::{
    ClientAuth, Config, Discovery, EscapedSlashes, HostHeader, Limits, PortRef, ServiceConfig,
    TlsConfig, UpstreamProtocol, UpstreamTls,
};
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_balance::load::PeakEwmaConfig;
use tailguard_balance::{ApertureConfig, Choices, LoadKind, Policy, PrequalConfig};
use tailguard_client::{ArmConfig, RetryConfig, Timeouts};
use tailguard_resilience::{
    AccrualConfig, Backoff, Classifier, HedgeConfig, OutlierConfig, RetryBudgetConfig, TripPolicy,
};

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
        .map_or(SocketAddr::from(([127, 0, 0, 1], 9990)), |a| {
            SocketAddr::new(a.ip, a.port)
        });
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
    };
    let services = file
        .services
        .into_iter()
        .map(service)
        .collect::<Result<_, _>>()?;
    let tls = server.tls.as_ref().map(|t| TlsConfig {
        cert: t.cert_path.clone(),
        key: t.key_path.clone(),
    });
    Ok(Config {
        listen: SocketAddr::new(server.ip, server.port),
        tls,
        admin: Some(admin),
        services,
        limits,
        seed: None,
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

fn service(spec: ServiceSpec) -> Result<ServiceConfig, YamlError> {
    let key = |k: &str| format!("services[{}].{k}", spec.name);
    let discovery = discovery(&spec, &key)?;
    let mut s = ServiceConfig::new(spec.name.clone(), Vec::new());
    s.hosts = spec.hosts.clone();
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
    s.max_in_flight = spec.max_concurrent_requests;
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
    if let Some(names) = spec
        .service
        .hedge
        .as_ref()
        .and_then(|h| h.grpc_methods.as_ref())
    {
        s.grpc_hedge = crate::config::GrpcMethods::new(names)
            .map_err(|e| err(key("service.hedge.grpcMethods"), e))?;
    }
    if let Some(b) = &spec.client.load_balancer {
        match (&b.probe_path, &s.arm.policy) {
            (Some(p), Policy::Prequal(_)) => s.probe_path = p.clone(),
            (Some(_), _) => {
                return Err(err(
                    key("client.loadBalancer.probePath"),
                    "only for kind prequal",
                ))
            }
            (None, _) => {}
        }
    }
    if let Some(t) = spec.client.connect_timeout_ms {
        if t == 0 {
            return Err(err(key("client.connectTimeoutMs"), "must be above zero"));
        }
        s.pool.connect_timeout = ms(t);
    }
    if let Some(t) = &spec.client.tls {
        s.tls = Some(client_tls(t, &|k| key(&format!("client.tls.{k}")))?);
    }
    if let Some(p) = &spec.client.host_connection_pool {
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
    match (&spec.upstreams, &spec.namer) {
        (Some(list), None) => {
            let parsed = list
                .iter()
                .map(|u| crate::config::Entry::parse(u).map_err(|e| err(key("upstreams"), e)));
            Ok(Discovery::of_entries(parsed.collect::<Result<_, _>>()?))
        }
        (None, Some(n)) => namer(n, key),
        _ => Err(err(
            key("upstreams"),
            "give exactly one of `upstreams` and `namer`",
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
                namespace: n.namespace.clone().unwrap_or_else(|| "default".to_owned()),
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

fn arm(spec: &ServiceSpec, key: &dyn Fn(&str) -> String) -> Result<ArmConfig, YamlError> {
    let policy = match &spec.client.load_balancer {
        None => Policy::p2c(LoadKind::peak_ewma()),
        Some(b) => balancer(b, &key("client.loadBalancer"))?,
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
    arm.accrual = match &spec.client.failure_accrual {
        None => Some(AccrualConfig::default()),
        Some(a) => accrual(a, &key("client.failureAccrual"))?,
    };
    arm.retries = Some(retries(
        spec.service.retries.as_ref(),
        &key("service.retries"),
    )?);
    arm.timeouts = Timeouts {
        attempt: spec.client.request_attempt_timeout_ms.map(ms),
        total: spec.service.total_timeout_ms.map(ms),
    };
    if let Some(o) = &spec.client.outlier_detection {
        let d = OutlierConfig::default();
        let config = OutlierConfig {
            interval: o.interval_ms.map_or(d.interval, ms),
            factor: o.factor.unwrap_or(d.factor),
            min_requests: o.min_requests.unwrap_or(d.min_requests),
            base_ejection: o.base_ejection_ms.map_or(d.base_ejection, ms),
            max_ejection: o.max_ejection_ms.map_or(d.max_ejection, ms),
            max_ejected_percent: o
                .max_ejected_percent
                .map_or(d.max_ejected_percent, |p| p / 100.0),
        };
        config
            .validate()
            .map_err(|e| err(key("client.outlierDetection"), e.to_string()))?;
        arm.outlier = Some(config);
    }
    if let Some(h) = &spec.service.hedge {
        let d = HedgeConfig::default();
        let config = HedgeConfig {
            max_extra_load: h.max_extra_load.unwrap_or(d.max_extra_load),
            min_per_sec: h.min_per_sec.unwrap_or(d.min_per_sec),
            window: h.window_ms.map_or(d.window, ms),
            refresh: d.refresh,
            min_samples: h.min_samples.unwrap_or(d.min_samples),
            min_delay: h.min_delay_ms.map_or(d.min_delay, ms),
            max_delay: h.max_delay_ms.map(ms),
        };
        config
            .validate()
            .map_err(|e| err(key("service.hedge"), e.to_string()))?;
        arm.hedge = Some(config);
    }
    if let Some(p) = spec.client.failure_penalty_ms {
        arm.failure_penalty = Some(ms(p)).filter(|d| !d.is_zero());
    }
    Ok(arm)
}

fn balancer(b: &Balancer, key: &str) -> Result<Policy, YamlError> {
    let d = PeakEwmaConfig::default();
    let ewma = LoadKind::PeakEwma(PeakEwmaConfig {
        tau: b.decay_time_ms.map_or(d.tau, ms),
        default_rtt: b.default_rtt_ms.map_or(d.default_rtt, ms),
    });
    let load = match b.load.as_deref() {
        None | Some("leastLoaded") => LoadKind::Pending,
        Some("ewma") => ewma,
        Some(o) => {
            return Err(err(
                format!("{key}.load"),
                format!("`{o}`: expected leastLoaded or ewma"),
            ))
        }
    };
    let policy = match b.kind.as_str() {
        "roundRobin" => Policy::RoundRobin,
        "random" => Policy::Random,
        "p2c" => Policy::p2c(LoadKind::Pending),
        "ewma" => Policy::p2c(ewma),
        "heap" => Policy::Heap,
        "bestOf" => Policy::BestOf {
            choices: Choices::D(b.choices.unwrap_or(2)),
            load,
        },
        "aperture" => {
            let mut config = ApertureConfig::default();
            config.min_aperture = b.min_aperture.unwrap_or(config.min_aperture);
            Policy::Aperture { config, load }
        }
        "prequal" => {
            let d = PrequalConfig::default();
            let config = PrequalConfig {
                probes_per_query: b.probes.unwrap_or(d.probes_per_query),
                pool_size: b.pool_size.unwrap_or(d.pool_size),
                max_age: b.max_age_ms.map_or(d.max_age, ms),
                max_uses: b.max_uses.unwrap_or(d.max_uses),
                q_rif: b.q_rif.unwrap_or(d.q_rif),
            };
            config
                .validate()
                .map_err(|e| err(key.to_owned(), e.to_string()))?;
            Policy::Prequal(config)
        }
        o => {
            let expected = BALANCER_KINDS.join(", ");
            let why = format!("`{o}`: expected one of {expected}");
            return Err(err(format!("{key}.kind"), why));
        }
    };
    let prequal_keys = b.probes.is_some()
        || b.pool_size.is_some()
        || b.max_age_ms.is_some()
        || b.max_uses.is_some()
        || b.q_rif.is_some();
    if prequal_keys && !matches!(policy, Policy::Prequal(_)) {
        return Err(err(
            key.to_owned(),
            "probes, poolSize, maxAgeMs, maxUses and qRif are only for kind prequal",
        ));
    }
    Ok(policy)
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

fn accrual(a: &Accrual, key: &str) -> Result<Option<AccrualConfig>, YamlError> {
    let need = |v: Option<f64>, name: &str| {
        v.ok_or_else(|| err(format!("{key}.{name}"), "required for this kind"))
    };
    let policy = match a.kind.trim_start_matches("io.l5d.") {
        "none" => return Ok(None),
        "consecutiveFailures" => TripPolicy::ConsecutiveFailures { failures: a.failures.unwrap_or(5) },
        "successRate" => TripPolicy::SuccessRate { threshold: need(a.success_rate, "successRate")?, requests: a.requests.unwrap_or(20) },
        "successRateWindowed" => TripPolicy::SuccessRateWindowed {
            threshold: need(a.success_rate, "successRate")?,
            window: Duration::from_secs(a.window.unwrap_or(30)),
            min_requests: a.requests.unwrap_or(5),
        },
        o => return Err(err(format!("{key}.kind"), format!("`{o}`: expected io.l5d.consecutiveFailures, io.l5d.successRate, io.l5d.successRateWindowed or none"))),
    };
    let backoff = match &a.backoff {
        None => AccrualConfig::default().backoff,
        Some(b) => backoff(b, &format!("{key}.backoff"))?,
    };
    Ok(Some(AccrualConfig { policy, backoff }))
}

fn backoff(b: &BackoffSpec, key: &str) -> Result<Backoff, YamlError> {
    let need = |v: Option<u64>, name: &str| {
        v.map(ms)
            .ok_or_else(|| err(format!("{key}.{name}"), "required for this kind"))
    };
    Ok(match b.kind.as_str() {
        "constant" => Backoff::Constant(need(b.ms, "ms")?),
        "jittered" => Backoff::EqualJittered {
            start: need(b.min_ms, "minMs")?,
            max: need(b.max_ms, "maxMs")?,
        },
        "fullJittered" => Backoff::FullJittered {
            start: need(b.min_ms, "minMs")?,
            max: need(b.max_ms, "maxMs")?,
        },
        "exponential" => Backoff::Exponential {
            start: need(b.min_ms, "minMs")?,
            max: need(b.max_ms, "maxMs")?,
        },
        o => {
            return Err(err(
                format!("{key}.kind"),
                format!("`{o}`: expected constant, jittered, fullJittered or exponential"),
            ))
        }
    })
}

fn retries(r: Option<&Retries>, key: &str) -> Result<RetryConfig, YamlError> {
    let mut out = RetryConfig::default();
    let Some(r) = r else { return Ok(out) };
    if let Some(b) = &r.budget {
        let d = RetryBudgetConfig::default();
        out.budget = RetryBudgetConfig {
            ttl: b.ttl_secs.map_or(d.ttl, Duration::from_secs),
            min_per_sec: b.min_retries_per_sec.unwrap_or(d.min_per_sec),
            percent: b.percent_can_retry.unwrap_or(d.percent),
        };
    }
    if let Some(b) = &r.backoff {
        out.backoff = Some(backoff(b, &format!("{key}.backoff"))?);
    }
    out.max_retries = r.max_retries.unwrap_or(out.max_retries);
    Ok(out)
}

/// Every `loadBalancer.kind` (and `--balancer`) the proxy takes.
pub const BALANCER_KINDS: [&str; 8] = [
    "roundRobin",
    "random",
    "p2c",
    "ewma",
    "heap",
    "bestOf",
    "aperture",
    "prequal",
];

/// The balancer a `loadBalancer.kind` names, with default parameters (for `--balancer`).
///
/// # Errors
/// An unknown kind.
pub fn balancer_kind(kind: &str) -> Result<Policy, YamlError> {
    let b = Balancer {
        kind: kind.to_owned(),
        decay_time_ms: None,
        default_rtt_ms: None,
        choices: None,
        load: None,
        min_aperture: None,
        probes: None,
        pool_size: None,
        max_age_ms: None,
        max_uses: None,
        q_rif: None,
        probe_path: None,
    };
    balancer(&b, "--balancer")
}
