//! The configuration file as written: serde structs mirroring its keys (Linkerd 1's names,
//! camelCase, unknown keys refused). `convert` turns them into the typed [`crate::config`].

use serde::Deserialize;
pub(super) use tailguard_client::spec::{
    AccrualSpec, BalancerSpec, HedgeSpec, LimitSpec, OutlierSpec, QueueSpec, RetriesSpec,
};

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub(super) admin: Option<Admin>,
    pub(super) servers: Vec<Server>,
    #[serde(default)]
    pub(super) limits: Limits,
    pub(super) services: Vec<ServiceSpec>,
    #[serde(rename = "accessLog")]
    pub(super) access_log: Option<AccessLogSpec>,
    pub(super) tracing: Option<TracingSpec>,
}

/// Tracing (`tracing`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TracingSpec {
    pub(super) otlp_endpoint: String,
    pub(super) sample_rate: Option<f64>,
    pub(super) service_name: Option<String>,
}

/// The access log (`accessLog`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AccessLogSpec {
    pub(super) path: std::path::PathBuf,
    pub(super) format: Option<String>,
    pub(super) query: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Admin {
    pub(super) ip: std::net::IpAddr,
    pub(super) port: u16,
    pub(super) metrics_retain_idle_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Server {
    pub(super) ip: std::net::IpAddr,
    pub(super) port: u16,
    pub(super) tls: Option<TlsSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TlsSpec {
    pub(super) cert_path: std::path::PathBuf,
    pub(super) key_path: std::path::PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Limits {
    pub(super) header_read_timeout_ms: Option<u64>,
    pub(super) max_connections: Option<usize>,
    pub(super) drain_ms: Option<u64>,
    pub(super) max_request_header_bytes: Option<usize>,
    pub(super) escaped_slashes: Option<String>,
    pub(super) h1_server: Option<String>,
    pub(super) client_error_detail: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ServiceSpec {
    pub(super) name: String,
    /// `None`: any host (`*`), or none for a leaf of a split.
    pub(super) hosts: Option<Vec<String>>,
    pub(super) path_prefix: Option<String>,
    pub(super) upstreams: Option<Vec<String>>,
    pub(super) namer: Option<Namer>,
    pub(super) split: Option<Vec<SplitSpec>>,
    pub(super) protocol: Option<String>,
    pub(super) rewrite_host: Option<String>,
    pub(super) retry_buffer_bytes: Option<usize>,
    pub(super) max_concurrent_requests: Option<u32>,
    pub(super) concurrency_limit: Option<LimitSpec>,
    pub(super) queue: Option<QueueSpec>,
    pub(super) criticality: Option<bool>,
    pub(super) rate_limit: Option<RateLimitSpec>,
    #[serde(default)]
    pub(super) routes: Vec<RouteSpec>,
    pub(super) request_body_idle_timeout_ms: Option<u64>,
    pub(super) request_body_min_bytes_per_sec: Option<u64>,
    pub(super) response_body_idle_timeout_ms: Option<u64>,
    pub(super) response_classifier: Option<Kind>,
    pub(super) client: Option<ClientSpec>,
    #[serde(default)]
    pub(super) service: ServicePart,
}

impl ServiceSpec {
    /// The `client` block, or the defaults when it is not given.
    pub(super) fn client(&self) -> &ClientSpec {
        static NONE: std::sync::LazyLock<ClientSpec> =
            std::sync::LazyLock::new(ClientSpec::default);
        self.client.as_ref().unwrap_or(&NONE)
    }
}

/// One leaf of a weighted split (`split[]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SplitSpec {
    pub(super) service: String,
    pub(super) weight: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Namer {
    pub(super) kind: String,
    pub(super) path: Option<std::path::PathBuf>,
    pub(super) name: Option<String>,
    pub(super) server: Option<std::net::SocketAddr>,
    pub(super) interval_ms: Option<u64>,
    pub(super) namespace: Option<String>,
    pub(super) service: Option<String>,
    pub(super) port: Option<PortSpec>,
}

/// A port by number or by name (`io.l5d.k8s`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum PortSpec {
    Number(u16),
    Name(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Kind {
    pub(super) kind: String,
    pub(super) four_xx_is_failure: Option<bool>,
    pub(super) retryable_status_codes: Option<Vec<u8>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ClientSpec {
    pub(super) load_balancer: Option<BalancerSpec>,
    pub(super) failure_accrual: Option<AccrualSpec>,
    pub(super) request_attempt_timeout_ms: Option<u64>,
    pub(super) connect_timeout_ms: Option<u64>,
    pub(super) failure_penalty_ms: Option<u64>,
    pub(super) pushback_max_ms: Option<u64>,
    pub(super) slow_start: Option<tailguard_client::spec::SlowStartSpec>,
    pub(super) health_check: Option<HealthCheckSpec>,
    pub(super) host_connection_pool: Option<HostPool>,
    pub(super) outlier_detection: Option<OutlierSpec>,
    pub(super) tls: Option<ClientTls>,
}

/// One route (`routes[]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RouteSpec {
    pub(super) name: String,
    #[serde(default)]
    pub(super) condition: ConditionSpec,
    pub(super) timeout_ms: Option<u64>,
    pub(super) is_retryable: Option<bool>,
    pub(super) rate_limit: Option<RateLimitSpec>,
}

/// A route's condition (`routes[].condition`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ConditionSpec {
    pub(super) method: Option<String>,
    pub(super) path_regex: Option<String>,
}

/// A rate limit (`rateLimit`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RateLimitSpec {
    pub(super) requests_per_sec: f64,
    pub(super) burst: Option<u32>,
}

/// Active health checks (`client.healthCheck`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HealthCheckSpec {
    pub(super) path: Option<String>,
    pub(super) interval_ms: Option<u64>,
    pub(super) timeout_ms: Option<u64>,
    pub(super) healthy_threshold: Option<u32>,
    pub(super) unhealthy_threshold: Option<u32>,
    pub(super) grpc_service: Option<String>,
}

/// TLS to the endpoints (`client.tls`, Linkerd 1's keys).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ClientTls {
    pub(super) common_name: Option<String>,
    pub(super) trust_certs: Option<Vec<std::path::PathBuf>>,
    pub(super) client_auth: Option<TlsSpec>,
    pub(super) disable_validation: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HostPool {
    pub(super) max_size: Option<usize>,
    pub(super) max_wait_ms: Option<u64>,
    pub(super) idle_time_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ServicePart {
    pub(super) total_timeout_ms: Option<u64>,
    pub(super) retries: Option<RetriesSpec>,
    pub(super) hedge: Option<HedgeSpec>,
    pub(super) rescue_stalled: Option<bool>,
    /// Where Linkerd 1 puts it; the service's own `responseClassifier` is accepted too.
    pub(super) response_classifier: Option<Kind>,
}
