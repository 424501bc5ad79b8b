//! The proxy's typed configuration, built once at the edge (from YAML in [`crate::yaml`] or
//! from command-line flags) and validated before anything listens.
//!
//! A [`Config`] is a listener, an optional admin server and one or more named
//! [`ServiceConfig`]s. A request is routed to the first service whose `hosts` contain its host
//! (`*` matches any host) and whose `path_prefix`, if any, starts its path; nothing else is ever
//! dialed, so the proxy is never open to arbitrary addresses.
//!
//! # Example
//! ```
//! use tailguard_proxy::config::{Config, ServiceConfig, Upstream};
//!
//! let upstreams = vec![Upstream::new("127.0.0.1:9001".parse().unwrap())];
//! let config = Config::new("127.0.0.1:4140".parse().unwrap(), vec![ServiceConfig::new("web", upstreams)]);
//! assert!(config.validate().is_ok());
//! ```

pub use crate::upstream::{ClientAuth, H1Upstream, PoolConfig, UpstreamTls};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tailguard_balance::{LoadKind, Policy};
use tailguard_client::{ArmConfig, ArmError, RetryConfig};
use tailguard_resilience::{AccrualConfig, Classifier};

/// One upstream address, with a weight (an address of weight `w` counts as `w` endpoints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Upstream {
    /// Where to dial.
    pub addr: SocketAddr,
    /// Relative share of traffic, 1 to [`MAX_WEIGHT`].
    pub weight: u32,
}

/// The largest upstream weight.
pub const MAX_WEIGHT: u32 = 100;

impl Discovery {
    /// The host name the endpoints come from, when there is exactly one: the name of every
    /// `HOST:PORT` entry of a list (when they agree), or a DNS namer's A/AAAA name. TLS checks
    /// the endpoints' certificates for it when `commonName` is not set.
    pub fn host_name(&self) -> Option<String> {
        match self {
            Discovery::Named { entries, .. } => {
                let mut names = entries.iter().filter_map(|e| match e {
                    Entry::Name { host, .. } => Some(host.trim_end_matches('.')),
                    Entry::Addr(_) => None,
                });
                let first = names.next()?;
                names.all(|n| n == first).then(|| first.to_owned())
            }
            Discovery::Dns {
                name: DnsName::A { host, .. },
                ..
            } => Some(host.trim_end_matches('.').to_owned()),
            _ => None,
        }
    }

    /// The list `entries`: [`Discovery::Static`] when every entry is an address,
    /// [`Discovery::Named`] (re-resolved every [`NAMES_INTERVAL`]) when any is a name.
    pub fn of_entries(entries: Vec<Entry>) -> Self {
        let addrs: Option<Vec<Upstream>> = entries
            .iter()
            .map(|e| match e {
                Entry::Addr(u) => Some(*u),
                Entry::Name { .. } => None,
            })
            .collect();
        match addrs {
            Some(list) => Discovery::Static(list),
            None => Discovery::Named {
                entries,
                server: None,
                interval: NAMES_INTERVAL,
            },
        }
    }
}

impl Upstream {
    /// `addr` with weight 1.
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, weight: 1 }
    }
}

/// One entry of a configured upstream list (`--upstream`, `upstreams:`): an address, or a
/// host name resolved through DNS, each with a weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `IP:PORT [weight]`.
    Addr(Upstream),
    /// `HOST:PORT [weight]`: every address the name resolves to, each with the weight.
    Name {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The weight of each of its addresses.
        weight: u32,
    },
}

impl Entry {
    /// Parses `IP:PORT [weight]` or `HOST:PORT [weight]` (`[::1]:80` for IPv6; a host name of
    /// letters, digits, `-` and `.`, at most 253 bytes).
    ///
    /// # Errors
    /// What is wrong, in words that name the expected form.
    pub fn parse(text: &str) -> Result<Entry, String> {
        let bad = || {
            format!("`{text}` is not `IP:PORT` or `HOST:PORT`, with an optional weight 1 to {MAX_WEIGHT}")
        };
        let mut words = text.split_whitespace();
        let at = words.next().ok_or_else(bad)?;
        let weight = match words.next() {
            None => 1,
            Some(w) => w
                .parse()
                .ok()
                .filter(|w| (1..=MAX_WEIGHT).contains(w))
                .ok_or_else(bad)?,
        };
        if words.next().is_some() {
            return Err(bad());
        }
        if let Ok(addr) = at.parse::<SocketAddr>() {
            return Ok(Entry::Addr(Upstream { addr, weight }));
        }
        let (host, port) = at.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        let name = host.strip_suffix('.').unwrap_or(host);
        // All digits and dots is an IP address that did not parse, not a name.
        let numeric = name.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if host.len() > 253 || numeric || !name.split('.').all(label_ok) {
            return Err(bad());
        }
        Ok(Entry::Name {
            host: host.to_owned(),
            port,
            weight,
        })
    }
}

/// How often host names in an upstream list are resolved again (Linkerd 1's DNS namer's
/// 5 s).
pub const NAMES_INTERVAL: Duration = Duration::from_secs(5);

/// Where a service's endpoints come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Discovery {
    /// A fixed list.
    Static(Vec<Upstream>),
    /// A fixed list with host names in it: each resolved through DNS (the system's resolver,
    /// `/etc/hosts` included) at start, where a name that does not resolve is an error, then
    /// every `interval`; every address a name has is an endpoint (its IPv4 ones when it has
    /// any, as Envoy's `V4_PREFERRED`, so `localhost` is 127.0.0.1, not also `::1`).
    Named {
        /// The list, in order.
        entries: Vec<Entry>,
        /// The name server (`None`, what the file and the flags give: the system's).
        server: Option<SocketAddr>,
        /// How often the names are resolved again.
        interval: Duration,
    },
    /// A file of `host:port [weight]` lines, re-read when it changes (Linkerd 1's fs namer).
    File {
        /// The file.
        path: PathBuf,
        /// How often to look for changes.
        interval: Duration,
    },
    /// DNS A/AAAA or SRV records, re-resolved periodically; every address is used.
    Dns {
        /// What to resolve.
        name: DnsName,
        /// The name server (`None`: the system's).
        server: Option<SocketAddr>,
        /// How often to re-resolve.
        interval: Duration,
    },
    /// A Kubernetes Service's EndpointSlices, watched (Linkerd 1's `io.l5d.k8s` namer): every
    /// ready endpoint of every slice ([`crate::k8s`]).
    Kubernetes {
        /// The Service's namespace; `None`: the client's own (kube's default namespace: the
        /// kubeconfig context's, else the service account's, as `kubectl` picks it).
        namespace: Option<String>,
        /// The Service's name (slices labelled `kubernetes.io/service-name`).
        service: String,
        /// The endpoints' port, by name or number.
        port: PortRef,
    },
    /// No endpoints of its own: each request goes to one of these services, by weight
    /// ([`crate::service::Split`]); the service's hosts, routes, limits and `service:` policy apply, the
    /// leaf's endpoints, balancer and `client:` settings.
    Split(Vec<SplitLeaf>),
}

/// One leaf of a weighted split (`split: [{service, weight}]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitLeaf {
    /// The name of the service it sends to (one with endpoints of its own).
    pub service: String,
    /// Its share: 0 to [`tailguard_balance::split::MAX_WEIGHT`], relative to the others'.
    pub weight: u32,
}

/// A port of an EndpointSlice: its name (the Service port's), or its number (the endpoints'
/// own port, the Service's `targetPort`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortRef {
    /// By name.
    Name(String),
    /// By number.
    Number(u16),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Name(n) => f.write_str(n),
            PortRef::Number(n) => write!(f, "{n}"),
        }
    }
}

/// What to resolve ([`crate::dns`] resolves it).
///
/// # Example
/// ```
/// use tailguard_proxy::config::DnsName;
/// let a = DnsName::parse("web.internal:8080").unwrap();
/// assert_eq!(a, DnsName::A { host: "web.internal".into(), port: 8080 });
/// let srv = DnsName::parse("_http._tcp.web.internal").unwrap();
/// assert!(matches!(srv, DnsName::Srv { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsName {
    /// A and AAAA records of `host`, each at `port`.
    A {
        /// The name.
        host: String,
        /// The port every address gets.
        port: u16,
    },
    /// SRV records of `name` (`_service._proto.domain`), each target resolved to its addresses.
    Srv {
        /// The SRV name.
        name: String,
    },
}

impl DnsName {
    /// Parses `host:port` (A/AAAA) or `_service._proto.domain` (SRV).
    ///
    /// # Errors
    /// [`DnsNameError`] for anything else.
    pub fn parse(text: &str) -> Result<Self, DnsNameError> {
        if text.starts_with('_') {
            return Ok(DnsName::Srv {
                name: text.to_owned(),
            });
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| DnsNameError(text.to_owned()))?;
        let port = port.parse().map_err(|_| DnsNameError(text.to_owned()))?;
        if host.is_empty() {
            return Err(DnsNameError(text.to_owned()));
        }
        Ok(DnsName::A {
            host: host.to_owned(),
            port,
        })
    }
}

/// Neither `host:port` nor `_service._proto.domain`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is neither `host:port` nor an SRV name `_service._proto.domain`")]
pub struct DnsNameError(String);

/// The HTTP version spoken to upstreams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// HTTP/1.1 with keep-alive (pooled connections).
    Http1,
    /// HTTP/2 with prior knowledge (h2c): one multiplexed connection per endpoint.
    Http2,
    /// The default: gRPC calls (`content-type: application/grpc*`, which need HTTP/2 and its
    /// trailers) over h2c, everything else over HTTP/1.1, which every backend speaks: an
    /// HTTP/2 client in front of an HTTP/1.1-only backend (nginx's default) is translated.
    #[default]
    Auto,
}

impl std::str::FromStr for UpstreamProtocol {
    type Err = String;

    /// `http1`, `h2` or `auto`, the names of the YAML key and the flag.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "http1" => Ok(UpstreamProtocol::Http1),
            "h2" => Ok(UpstreamProtocol::Http2),
            "auto" => Ok(UpstreamProtocol::Auto),
            other => Err(format!("`{other}`: expected http1, h2 or auto")),
        }
    }
}

/// What the `Host` header of a forwarded request says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HostHeader {
    /// The client's host, unchanged.
    #[default]
    Preserve,
    /// This value.
    Rewrite(String),
}

/// One named service: which requests it takes, where they go and how.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceConfig {
    /// The name in metrics and errors.
    pub name: String,
    /// Hosts routed here (no port; `*` is any host).
    pub hosts: Vec<String>,
    /// Only paths starting with this, if set.
    pub path_prefix: Option<String>,
    /// The endpoints.
    pub discovery: Discovery,
    /// Balancer, classifier, retries, accrual, timeouts: the same struct `tailguard sim` runs.
    pub arm: ArmConfig,
    /// The upstream HTTP version.
    pub protocol: UpstreamProtocol,
    /// The forwarded `Host`.
    pub host_header: HostHeader,
    /// Largest request body buffered so that it can be retried; larger ones stream, unretried.
    pub retry_buffer: usize,
    /// Requests admitted a second at most, by a token bucket per process (`rateLimit`); more
    /// get 429 with `Retry-After` (`None`: no limit).
    pub rate_limit: Option<tailguard_resilience::rate::RateLimit>,
    /// Routes inside the service, first match wins ([`crate::route`]); none: every request
    /// takes the service's policy.
    pub routes: Vec<crate::route::Route>,
    /// Upstream connection pool: connections per endpoint, wait, idle timeout.
    pub pool: PoolConfig,
    /// TLS to the endpoints (`client.tls`); `None`: cleartext.
    pub tls: Option<UpstreamTls>,
    /// gRPC methods that may be hedged (`service.hedge.grpcMethods`), when hedging is on: a
    /// call is not hedged unless the user says its method is idempotent, as in gRPC's own
    /// hedging policy.
    pub grpc_hedge: GrpcMethods,
    /// How long a request or response body may stall.
    pub body: BodyTimeouts,
    /// Where a probing balancer (`prequal`) asks each endpoint for its load
    /// (`client.loadBalancer.probePath`; `tailguard serve` answers [`PROBE_PATH`]).
    pub probe_path: String,
}

/// gRPC methods named `package.Service/Method`, or `package.Service/*` for all of a
/// service's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrpcMethods(Vec<String>);

impl GrpcMethods {
    /// The most names a list may hold.
    pub const MAX: usize = 1000;

    /// Checks and keeps `names`.
    ///
    /// # Errors
    /// The first name that is not `package.Service/Method` or `package.Service/*`, or more
    /// than [`Self::MAX`] of them.
    pub fn new(names: &[String]) -> Result<Self, String> {
        if names.len() > Self::MAX {
            return Err(format!("{} names: at most {}", names.len(), Self::MAX));
        }
        let word = |w: &str| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        };
        for n in names {
            let ok = match n.split_once('/') {
                Some((service, method)) => word(service) && (method == "*" || word(method)),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "`{n}`: expected package.Service/Method or package.Service/*"
                ));
            }
        }
        Ok(Self(names.to_vec()))
    }

    /// Whether the call to `path` (`/package.Service/Method`) is one of them.
    pub fn contains(&self, path: &str) -> bool {
        let Some(name) = path.strip_prefix('/') else {
            return false;
        };
        self.0.iter().any(|n| match n.strip_suffix('*') {
            Some(service) => name.starts_with(service) && !name[service.len()..].contains('/'),
            None => n == name,
        })
    }

    /// No methods.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Where `tailguard serve` answers load probes, and the proxy's default probe path.
pub const PROBE_PATH: &str = "/.well-known/tailguard/load";

/// How long a body may stall mid-stream, in either direction (the header read and idle
/// timeouts are the listener's [`Limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyTimeouts {
    /// A streamed request body with no data for this long is the client's fault: 408
    /// (`requestBodyIdleTimeoutMs`, default 60 s as nginx's `client_body_timeout`; `None`: no
    /// limit).
    pub request_idle: Option<Duration>,
    /// A streamed request body averaging fewer bytes per second than this after 5 s is the
    /// client's fault: 408 (`requestBodyMinBytesPerSec`, default 240 as Kestrel's
    /// `MinRequestBodyDataRate`; gRPC calls are exempt; `None`: no minimum).
    pub request_min_rate: Option<u64>,
    /// How long a request body may take before its rate is checked (5 s).
    pub request_rate_grace: Duration,
    /// An upstream response body with no data for this long is ended with an error, and a
    /// gRPC call still waiting for its status counts as the endpoint's timeout
    /// (`responseBodyIdleTimeoutMs`, default 60 s as nginx's `proxy_read_timeout`; `None`: no
    /// limit).
    pub response_idle: Option<Duration>,
}

impl Default for BodyTimeouts {
    fn default() -> Self {
        Self {
            request_idle: Some(Duration::from_secs(60)),
            request_min_rate: Some(240),
            request_rate_grace: Duration::from_secs(5),
            response_idle: Some(Duration::from_secs(60)),
        }
    }
}

impl ServiceConfig {
    /// A service taking every host, over static `upstreams`, balanced by P2C peak EWMA (which
    /// prices an endpoint's silence), with retries of idempotent requests under the default
    /// budget, the rescue of those waiting at a stalled endpoint (charged to the same budget),
    /// and Linkerd 1's default failure accrual (5 failures in a row, backoff 5 s to 300 s).
    pub fn new(name: impl Into<String>, upstreams: Vec<Upstream>) -> Self {
        let name = name.into();
        let mut arm = ArmConfig::new(name.clone(), Policy::p2c(LoadKind::peak_ewma()));
        arm.classifier = Classifier::retryable_read_5xx();
        arm.retries = Some(RetryConfig::default());
        arm.accrual = Some(AccrualConfig::default());
        arm.rescue = true;
        Self {
            name,
            hosts: vec!["*".to_owned()],
            path_prefix: None,
            discovery: Discovery::Static(upstreams),
            arm,
            protocol: UpstreamProtocol::default(),
            host_header: HostHeader::default(),
            retry_buffer: 64 * 1024,
            rate_limit: None,
            routes: Vec::new(),
            pool: PoolConfig::default(),
            tls: None,
            grpc_hedge: GrpcMethods::default(),
            body: BodyTimeouts::default(),
            probe_path: PROBE_PATH.to_owned(),
        }
    }
}

/// Limits protecting the proxy from its clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A connection with no request in flight for this long is closed: a client must send
    /// its next request's headers within it (slowloris protection), idle connections end.
    pub header_read_timeout: Duration,
    /// Accepted connections at most; more wait in the kernel backlog. `None`: as many as the
    /// descriptor limit allows at two descriptors each, up to [`MAX_CONNECTIONS_DEFAULT`]
    /// ([`Limits::connections`]).
    pub max_connections: Option<usize>,
    /// How long a graceful shutdown waits for requests in flight.
    pub drain: Duration,
    /// The largest request head a client may send: over HTTP/1.1 the request line and headers
    /// (hyper's read buffer), over HTTP/2 the header list as SETTINGS_MAX_HEADER_LIST_SIZE
    /// counts it (names, values and 32 bytes per field). Larger: 431, never forwarded.
    pub max_request_header_bytes: usize,
    /// What a path with an encoded slash or backslash gets (see [`EscapedSlashes`]).
    pub escaped_slashes: EscapedSlashes,
    /// Which server speaks HTTP/1.1 to the clients (`proxy --h1-server`).
    pub h1_server: H1Server,
    /// How much of a failure the proxy's own answers tell a client (`limits.clientErrorDetail`).
    pub client_error_detail: ErrorDetail,
}

/// How much of a failure a client is told (`limits.clientErrorDetail`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ErrorDetail {
    /// The reason from a fixed list (`fault::Reason`) alone.
    #[default]
    Reason,
    /// The endpoint's address and the error chain too (`upstream 10.0.0.7:8080: ...`), as
    /// before: for a proxy whose clients are its operators.
    Full,
}

/// Which server speaks HTTP/1.1 to the clients (`proxy --h1-server`, `limits.h1Server`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum H1Server {
    /// tailguard's own (`tailguard_http::h1::server`) on cleartext connections: the common
    /// request shapes parsed and answered by the connection's task, no buffer held between
    /// requests, anything else handed to hyper's server for the rest of the connection.
    #[default]
    Lean,
    /// hyper's server connection alone (the reference the lean server is tested against).
    Hyper,
}

/// The default `admin.metricsRetainIdleMs`: 10 minutes, as linkerd2-proxy's.
pub const METRICS_RETAIN_IDLE_DEFAULT: Duration = Duration::from_secs(600);
/// The range of `admin.metricsRetainIdleMs`: 1 ms to a day.
pub const METRICS_RETAIN_IDLE_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(1)..=Duration::from_secs(86_400);

fn millis(d: &Duration) -> usize {
    usize::try_from(d.as_millis()).unwrap_or(usize::MAX)
}

/// The default `limits.maxRequestHeaderBytes`: 64 KiB (Envoy's default is 60 KiB, nginx's
/// four 8 KiB buffers).
pub const MAX_REQUEST_HEADER_BYTES_DEFAULT: usize = 64 * 1024;
/// The range of `limits.maxRequestHeaderBytes`. Its floor is hyper's: hyper's HTTP/1.1 server
/// (over TLS, and for every request the lean server hands over) reads a head into a buffer of
/// at least 8 KiB, so a smaller limit would hold on one path and not on the other.
pub const MAX_REQUEST_HEADER_BYTES_RANGE: std::ops::RangeInclusive<usize> = 8 * 1024..=1024 * 1024;

/// What a request whose path holds `%2F`, `%5C` or `\` (an encoded slash, an encoded or
/// plain backslash) gets, before routing. RFC 3986 makes `%2F` data, not a separator, but most
/// backends (nginx among them) decode it before matching, so a proxy routing on the raw path
/// and a backend decoding it would disagree about where `/api/..%2fsecret` goes. Envoy's
/// `path_with_escaped_slashes_action`, with the safe choice as the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EscapedSlashes {
    /// 400 (`reject`, the default).
    #[default]
    Reject,
    /// Decode them to `/` before dot-segments are resolved and the request is routed, and
    /// forward the decoded path (`unescapeAndForward`): routing and the backend see one path.
    UnescapeAndForward,
    /// Route and forward the path as it came (`keepUnchanged`): only for backends that keep
    /// `%2F` as data.
    KeepUnchanged,
}

/// The connection limit when none is configured and descriptors allow it.
pub const MAX_CONNECTIONS_DEFAULT: usize = 10_000;
/// The largest `limits.maxConnections` accepted.
pub const MAX_CONNECTIONS: usize = 1_000_000;

impl Limits {
    /// The connection limit in force under a soft descriptor limit of `nofile`: the configured
    /// one, or by default as many connections as `nofile` allows at two descriptors each (the
    /// client's and an upstream's) up to [`MAX_CONNECTIONS_DEFAULT`].
    pub fn connections(&self, nofile: u64) -> usize {
        self.max_connections.unwrap_or_else(|| {
            tailguard_http::fds::connection_budget(nofile, 2).min(MAX_CONNECTIONS_DEFAULT)
        })
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: None,
            drain: Duration::from_secs(10),
            max_request_header_bytes: MAX_REQUEST_HEADER_BYTES_DEFAULT,
            escaped_slashes: EscapedSlashes::Reject,
            h1_server: H1Server::Lean,
            client_error_detail: ErrorDetail::Reason,
        }
    }
}

/// TLS on the proxy listener: a PEM certificate chain and its PEM private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The whole proxy.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The proxy listener (HTTP/1.1 and h2c on one port).
    pub listen: SocketAddr,
    /// Serve TLS on the listener (HTTP/1.1 and h2 by ALPN) instead of cleartext.
    pub tls: Option<TlsConfig>,
    /// The admin server (metrics, readiness, endpoints), if any.
    pub admin: Option<SocketAddr>,
    /// How long an endpoint gone from discovery (or from the configuration) keeps its
    /// per-endpoint series once nothing is counted for it (`admin.metricsRetainIdleMs`;
    /// linkerd2-proxy also keeps idle series 10 minutes): long enough for a scrape to see an
    /// endpoint's last counts, short enough that pods coming and going do not grow `/metrics`
    /// for ever.
    pub metrics_retain_idle: Duration,
    /// The services, matched in order.
    pub services: Vec<ServiceConfig>,
    /// Client-facing limits.
    pub limits: Limits,
    /// The seed of the proxy's random choices (the balancer's picks, retry jitter). `None`:
    /// drawn at start, so that replicas of one configuration do not choose, or retry, in step.
    /// Tests set it to replay a run.
    pub seed: Option<u64>,
    /// One JSON line per request (`accessLog`; `None`: no log).
    pub access_log: Option<AccessLogConfig>,
    /// Spans over OTLP/HTTP (`tracing`; `None`: off, `traceparent` passes through).
    pub tracing: Option<TracingConfig>,
}

/// Tracing ([`crate::trace`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TracingConfig {
    /// The collector's OTLP/HTTP traces URL (`http://host:port/v1/traces`).
    pub otlp_endpoint: http::Uri,
    /// The fraction of new traces (requests without a sampled parent) sampled, 0 to 1.
    pub sample_rate: f64,
    /// The `service.name` of the spans.
    pub service_name: String,
}

/// The access log ([`crate::access_log`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessLogConfig {
    /// The file (appended to; a FIFO or `/dev/stdout` works).
    pub path: PathBuf,
    /// Whether `path` keeps the request's query.
    pub query: bool,
}

/// A [`Config`] that must not start; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No service at all.
    #[error("services: at least one service is required")]
    NoServices,
    /// Two services with one name.
    #[error("services[{0}].name: duplicate service name")]
    DuplicateName(String),
    /// A service matching no host.
    #[error("services[{0}].hosts: at least one host is required (`*` for any)")]
    NoHosts(String),
    /// A static service without upstreams.
    #[error("services[{0}].upstreams: at least one upstream is required")]
    NoUpstreams(String),
    /// A weight out of range.
    #[error("services[{service}].upstreams: weight of {addr} must be 1 to {MAX_WEIGHT}")]
    Weight {
        /// The service.
        service: String,
        /// The upstream.
        addr: SocketAddr,
    },
    /// A path prefix not starting with `/`.
    #[error("services[{0}].pathPrefix: must start with `/`")]
    PathPrefix(String),
    /// The balancer, classifier, retries, accrual or timeouts.
    #[error("services[{service}].{key}: {source}")]
    Arm {
        /// The service.
        service: String,
        /// The configuration key at fault.
        key: &'static str,
        /// What is wrong.
        source: ArmError,
    },
    /// A zero limit.
    #[error("{0}: must be above zero")]
    Zero(&'static str),
    /// A limit above its ceiling.
    #[error("{0}: must be at most {1}")]
    TooLarge(&'static str, usize),
    /// A limit outside its range.
    #[error("{key}: must be from {} to {}, not {value}", range.start(), range.end())]
    OutOfRange {
        /// The key.
        key: &'static str,
        /// The value given.
        value: usize,
        /// What is accepted.
        range: std::ops::RangeInclusive<usize>,
    },
    /// A probe path that is not an absolute path.
    #[error("services[{0}].client.loadBalancer.probePath: must start with `/`")]
    ProbePath(String),
    /// A split that cannot be sent over.
    #[error("services[{service}].split: {why}")]
    Split {
        /// The split service.
        service: String,
        /// What is wrong.
        why: String,
    },
}

impl Config {
    /// A proxy on `listen` over `services`, admin on 127.0.0.1:9990.
    pub fn new(listen: SocketAddr, services: Vec<ServiceConfig>) -> Self {
        Self {
            listen,
            tls: None,
            admin: Some(SocketAddr::from(([127, 0, 0, 1], 9990))),
            metrics_retain_idle: METRICS_RETAIN_IDLE_DEFAULT,
            services,
            limits: Limits::default(),
            seed: None,
            access_log: None,
            tracing: None,
        }
    }

    /// The keys whose values differ between `self` and `next` and that only a restart applies
    /// (the listener and admin addresses, the limits), as the configuration file names them.
    pub fn restart_keys_changed(&self, next: &Config) -> Vec<&'static str> {
        let (a, b) = (&self.limits, &next.limits);
        [
            (self.listen != next.listen, "servers"),
            (self.admin != next.admin, "admin"),
            (
                self.metrics_retain_idle != next.metrics_retain_idle,
                "admin.metricsRetainIdleMs",
            ),
            (
                a.header_read_timeout != b.header_read_timeout,
                "limits.headerReadTimeoutMs",
            ),
            (
                a.max_connections != b.max_connections,
                "limits.maxConnections",
            ),
            (a.drain != b.drain, "limits.drainMs"),
            (self.access_log != next.access_log, "accessLog"),
            (self.tracing != next.tracing, "tracing"),
            (
                a.client_error_detail != b.client_error_detail,
                "limits.clientErrorDetail",
            ),
        ]
        .into_iter()
        .filter_map(|(changed, key)| changed.then_some(key))
        .collect()
    }

    /// Checks every service and limit.
    ///
    /// # Errors
    /// The first broken constraint, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.services.is_empty() {
            return Err(ConfigError::NoServices);
        }
        for (i, s) in self.services.iter().enumerate() {
            if self.services[..i].iter().any(|o| o.name == s.name) {
                return Err(ConfigError::DuplicateName(s.name.clone()));
            }
            validate_service(s)?;
            validate_split(self, s)?;
        }
        if self.limits.header_read_timeout.is_zero() {
            return Err(ConfigError::Zero("limits.headerReadTimeoutMs"));
        }
        match self.limits.max_connections {
            Some(0) => return Err(ConfigError::Zero("limits.maxConnections")),
            Some(n) if n > MAX_CONNECTIONS => {
                return Err(ConfigError::TooLarge(
                    "limits.maxConnections",
                    MAX_CONNECTIONS,
                ))
            }
            _ => {}
        }
        if !METRICS_RETAIN_IDLE_RANGE.contains(&self.metrics_retain_idle) {
            return Err(ConfigError::OutOfRange {
                key: "admin.metricsRetainIdleMs",
                value: usize::try_from(self.metrics_retain_idle.as_millis()).unwrap_or(usize::MAX),
                range: millis(METRICS_RETAIN_IDLE_RANGE.start())
                    ..=millis(METRICS_RETAIN_IDLE_RANGE.end()),
            });
        }
        let header = self.limits.max_request_header_bytes;
        if !MAX_REQUEST_HEADER_BYTES_RANGE.contains(&header) {
            return Err(ConfigError::OutOfRange {
                key: "limits.maxRequestHeaderBytes",
                value: header,
                range: MAX_REQUEST_HEADER_BYTES_RANGE,
            });
        }
        Ok(())
    }
}

/// A split's leaves exist, have endpoints of their own, appear once, and weigh something in
/// all; a service without hosts is a leaf (reached only through a split).
fn validate_split(config: &Config, s: &ServiceConfig) -> Result<(), ConfigError> {
    let is_leaf = |name: &str| {
        config.services.iter().any(
            |o| matches!(&o.discovery, Discovery::Split(l) if l.iter().any(|l| l.service == name)),
        )
    };
    if s.hosts.is_empty() && !is_leaf(&s.name) {
        return Err(ConfigError::NoHosts(s.name.clone()));
    }
    let Discovery::Split(leaves) = &s.discovery else {
        return Ok(());
    };
    let fail = |why: String| ConfigError::Split {
        service: s.name.clone(),
        why,
    };
    for (i, leaf) in leaves.iter().enumerate() {
        if leaves[..i].iter().any(|l| l.service == leaf.service) {
            return Err(fail(format!("`{}` is listed twice", leaf.service)));
        }
        match config.services.iter().find(|o| o.name == leaf.service) {
            None => return Err(fail(format!("no service is named `{}`", leaf.service))),
            Some(o) if matches!(o.discovery, Discovery::Split(_)) => {
                return Err(fail(format!(
                    "`{}` is a split itself: leaves do not split further",
                    leaf.service
                )))
            }
            Some(_) => {}
        }
    }
    let weights: Vec<u32> = leaves.iter().map(|l| l.weight).collect();
    tailguard_balance::split::check(&weights).map_err(|e| fail(e.to_string()))
}

fn validate_service(s: &ServiceConfig) -> Result<(), ConfigError> {
    let name = || s.name.clone();
    if s.path_prefix.as_ref().is_some_and(|p| !p.starts_with('/')) {
        return Err(ConfigError::PathPrefix(name()));
    }
    if let Discovery::Static(list) = &s.discovery {
        if list.is_empty() {
            return Err(ConfigError::NoUpstreams(name()));
        }
        if let Some(u) = list.iter().find(|u| u.weight == 0 || u.weight > MAX_WEIGHT) {
            return Err(ConfigError::Weight {
                service: name(),
                addr: u.addr,
            });
        }
    }
    if s.pool.max_per_endpoint == Some(0) {
        return Err(ConfigError::Zero(
            "services[].client.hostConnectionPool.maxSize",
        ));
    }
    if !s.probe_path.starts_with('/') || s.probe_path.parse::<http::Uri>().is_err() {
        return Err(ConfigError::ProbePath(name()));
    }
    s.arm.validate().map_err(|source| ConfigError::Arm {
        service: name(),
        key: arm_key(&source),
        source,
    })
}

/// The YAML key an [`ArmError`] belongs to.
fn arm_key(e: &ArmError) -> &'static str {
    match e {
        ArmError::Policy(_) => "client.loadBalancer",
        ArmError::Accrual(_) => "client.failureAccrual",
        ArmError::Budget(_) => "service.retries.budget",
        ArmError::Backoff(_) => "service.retries.backoff",
        ArmError::Hedge(_) => "service.hedge",
        ArmError::Outlier(_) => "client.outlierDetection",
        ArmError::ZeroTimeout => "timeouts (requestAttemptTimeoutMs / totalTimeoutMs)",
        ArmError::Penalty => "client.failurePenaltyMs",
        ArmError::PushbackMax => "client.pushbackMaxMs",
        ArmError::SlowStart(_) => "client.slowStart",
        ArmError::HealthCheck(_) => "client.healthCheck",
        // The message names the key (maxConcurrentRequests, concurrencyLimit, queue).
        ArmError::Admission(_) => "admission",
    }
}
