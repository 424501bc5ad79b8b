//! Starting, reloading and stopping a proxy: the owner of the running configuration's
//! services, which applies what their discovery sources find.

use crate::clock::Clock;
use crate::config::{self, Config, ConfigError, Discovery, Limits, PoolConfig, Upstream};
use crate::service::Service;
use crate::shared::Shared;
use crate::upstream::{TlsClient, Upstreams};
use crate::{admin, dashboard, discovery, dns, listener, tls, yaml};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use tailguard_http::admin::AdminServer;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the proxy did not start or reload.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration file could not be read or parsed.
    #[error(transparent)]
    Yaml(#[from] yaml::YamlError),
    /// The access log's file could not be opened.
    #[error("accessLog.path: cannot open {}: {source}", path.display())]
    AccessLog {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A listener could not bind.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        /// `proxy` or `admin`.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A discovery file could not be read at start.
    #[error("services[{service}].namer: {path}: {reason}")]
    Discovery {
        /// The service.
        service: String,
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A host name in a service's upstream list does not resolve.
    #[error("services[{service}].upstreams (--upstream): `{name}` does not resolve: {reason}")]
    Unresolved {
        /// The service.
        service: String,
        /// The `HOST:PORT` entry.
        name: String,
        /// The resolver's answer.
        reason: String,
    },
    /// The TLS certificate or key is unusable.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// A file of a service's `client.tls` is unusable.
    #[error(transparent)]
    UpstreamTls(#[from] crate::upstream::UpstreamTlsError),
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// A reload changed keys that only a restart applies (named as in the file); nothing of
    /// it was applied.
    #[error("{} only take effect on a restart; nothing was reloaded", .0.join(", "))]
    RestartNeeded(Vec<&'static str>),
}

/// A running proxy; stops with [`Proxy::shutdown`].
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// The serving threads beside the starting runtime's, joined once drained.
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Serving threads in all.
    threads: usize,
    /// The admin server stops last, so health checks see the drain.
    admin: Option<AdminServer>,
    /// The dashboard's ticker, aborted after the admin server stops.
    ticker: JoinHandle<()>,
    /// The configuration started with: a reload must not change what only a restart applies.
    started: Config,
    max_connections: usize,
}

/// Validates `config`, binds its listeners and starts serving on the calling runtime.
///
/// # Errors
/// [`StartError`] when the configuration is invalid or a listener cannot bind.
pub async fn start(config: Config) -> Result<Proxy, StartError> {
    start_on(config, 1).await
}

/// [`start`] on `threads` serving threads: the calling runtime's, and `threads - 1` more, each
/// with a current-thread runtime, its own listener on the same address (`SO_REUSEPORT`), its
/// share of the connection limit and its own upstream pools ([`crate::worker`]). The balancers,
/// metrics and dashboard are shared. The periodic work, discovery and reloads run on the
/// calling runtime.
///
/// # Errors
/// [`StartError`] when the configuration is invalid, a listener cannot bind or a thread
/// cannot start.
pub async fn start_on(config: Config, threads: usize) -> Result<Proxy, StartError> {
    config.validate()?;
    let threads = threads.max(1);
    let acceptor = tls::acceptor(config.tls.as_ref()).await?;
    let clock = Clock::start();
    let services = build_services(&config, clock, threads, &[]).await?;
    let bind_error = |what, addr| move |source| StartError::Bind { what, addr, source };
    let listeners = tailguard_http::tcp::bind_many(config.listen, threads)
        .await
        .map_err(bind_error("proxy", config.listen))?;
    let admin = match config.admin {
        Some(a) => Some(
            tailguard_http::tcp::bind(a)
                .await
                .map_err(bind_error("admin", a))?,
        ),
        None => None,
    };
    let mut shared = Shared::new(clock, services, acceptor);
    if let Some(a) = &config.access_log {
        let dropped = shared.metrics.access_log_dropped.clone();
        let log = crate::access_log::AccessLog::start(a, dropped).map_err(|source| {
            StartError::AccessLog {
                path: a.path.clone(),
                source,
            }
        })?;
        shared = shared.with_access_log(log);
    }
    if let Some(t) = &config.tracing {
        let seed = crate::seed::mix(config.seed.unwrap_or_else(crate::seed::drawn), u64::MAX);
        let m = &shared.metrics;
        let (dropped, exported) = (
            m.trace_spans_dropped.clone(),
            m.trace_spans_exported.clone(),
        );
        shared.tracer = Some(crate::trace::Tracer::start(t, seed, dropped, exported));
    }
    let shared = Arc::new(shared);
    let mut listeners = listeners.into_iter();
    let listener = listeners.next().expect("bind_many binds at least one");
    let addr = listener
        .local_addr()
        .map_err(bind_error("proxy", config.listen))?;
    let (stop, stopped) = watch::channel(false);
    let max_connections = connection_limit(&config.limits);
    let each = (max_connections / threads).max(1);
    let serving = |listener| {
        listener::serve(
            listener,
            Arc::clone(&shared),
            config.limits,
            each,
            stopped.clone(),
        )
    };
    let tasks = vec![tokio::spawn(serving(listener))];
    let mut workers = Vec::new();
    for (i, listener) in listeners.enumerate() {
        let listener = listener
            .into_std()
            .map_err(bind_error("proxy", config.listen))?;
        let args = serving_args(&shared, &config, each, &stopped);
        workers.push(serving_thread(i + 1, listener, args).map_err(StartError::Runtime)?);
    }
    // The periodic work: the dashboard's second, the watch on the event loop's delay, and
    // the sweep that frees what gone endpoints left.
    let (a, b, c) = (
        Arc::downgrade(&shared),
        Arc::downgrade(&shared),
        Arc::downgrade(&shared),
    );
    let retain = config.metrics_retain_idle;
    let ticker = tokio::spawn(async move {
        tokio::join!(
            dashboard::ticker(a),
            crate::lag::watch(b),
            crate::retain::watch(c, retain)
        );
    });
    let admin = match (admin, config.admin) {
        (Some(l), Some(addr)) => {
            Some(admin::serve(l, Arc::clone(&shared)).map_err(bind_error("admin", addr))?)
        }
        _ => None,
    };
    drop(stopped);
    Ok(Proxy {
        addr,
        shared,
        stop,
        tasks,
        workers,
        admin,
        ticker,
        started: config,
        threads,
        max_connections,
    })
}

/// What a serving thread's listener loop takes.
struct ServingArgs {
    shared: Arc<Shared>,
    limits: crate::config::Limits,
    max_connections: usize,
    stopped: watch::Receiver<bool>,
}

fn serving_args(
    shared: &Arc<Shared>,
    config: &Config,
    max_connections: usize,
    stopped: &watch::Receiver<bool>,
) -> ServingArgs {
    ServingArgs {
        shared: Arc::clone(shared),
        limits: config.limits,
        max_connections,
        stopped: stopped.clone(),
    }
}

/// Starts serving thread `k` on `listener`: its runtime is built first (an error is the
/// start's), and the thread ends when its connections have drained.
fn serving_thread(
    k: usize,
    listener: std::net::TcpListener,
    args: ServingArgs,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(format!("tg-proxy-{k}"))
        .spawn(move || {
            crate::worker::set(k);
            let ServingArgs {
                shared,
                limits,
                max_connections,
                stopped,
            } = args;
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => listener::serve(l, shared, limits, max_connections, stopped).await,
                    Err(err) => tracing::error!(%err, thread = k, "serving thread's listener"),
                }
            });
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
        })
}

/// What services must have in common to share pools: the pool settings, the TLS settings,
/// and (over TLS) whether connections offer both versions by ALPN.
type PoolKey = (PoolConfig, Option<crate::upstream::UpstreamTls>, bool);

/// A resolver kept for the watch of a service discovered by DNS.
type Resolver = hickory_resolver::TokioResolver;

/// Builds every service and starts the watchers of discovered ones. A service of `running`
/// (the configuration being reloaded) whose settings are unchanged is kept as it is, with its
/// endpoints, pools, watchers and everything it learned, unless it reads certificates (they
/// are read again); split services are built last, over the services they send to.
async fn build_services(
    config: &Config,
    clock: Clock,
    threads: usize,
    running: &[Arc<Service>],
) -> Result<Vec<Arc<Service>>, StartError> {
    let mut built: Vec<Option<Arc<Service>>> = vec![None; config.services.len()];
    let base_seed = config.seed.unwrap_or_else(crate::seed::drawn);
    // Services with the same pool and TLS settings and no connection limit share their
    // pools: ten services over the same twenty backends keep one set of connections to them,
    // not ten. A limit (`hostConnectionPool.maxSize`) stays each service's own, as configured.
    let mut shared_pools: HashMap<PoolKey, Upstreams> = HashMap::new();
    for (i, sc) in config.services.iter().enumerate() {
        if matches!(sc.discovery, Discovery::Split(_)) {
            continue;
        }
        let kept = running
            .iter()
            .find(|s| s.config == *sc && s.split().is_none() && sc.tls.is_none());
        if let Some(s) = kept {
            built[i] = Some(Arc::clone(s));
            continue;
        }
        let (upstreams, resolver) = first_endpoints(sc).await?;
        let seed = crate::seed::mix(base_seed, i as u64 + 1);
        let (tls_settings, tls) = client_tls(sc).await?;
        // Under `protocol: auto`, a TLS connection offers both versions by ALPN.
        let either = sc.protocol == crate::config::UpstreamProtocol::Auto;
        let new_pools = || Upstreams::over_tls(sc.pool, threads, tls.clone(), either);
        let pools = match sc.pool.max_per_endpoint {
            Some(_) => new_pools(),
            None => shared_pools
                .entry((sc.pool, tls_settings, either && sc.tls.is_some()))
                .or_insert_with(new_pools)
                .clone(),
        };
        let service = Service::over(sc.clone(), &upstreams, clock, seed, pools)
            .map_err(|source| arm_error(sc, source))?;
        let service = Arc::new(service);
        crate::health::spawn(&service);
        watch_discovery(sc, Feed(Arc::downgrade(&service)), resolver, upstreams).await?;
        built[i] = Some(service);
    }
    for (i, sc) in config.services.iter().enumerate() {
        let Discovery::Split(leaves) = &sc.discovery else {
            continue;
        };
        // Validated: every leaf is a service with endpoints of its own, built above.
        let leaves = leaves
            .iter()
            .filter_map(|l| {
                let at = config.services.iter().position(|o| o.name == l.service)?;
                Some((Arc::clone(built[at].as_ref()?), l.weight))
            })
            .collect();
        let split = crate::service::Split::new(leaves).map_err(|e| {
            StartError::Config(ConfigError::Split {
                service: sc.name.clone(),
                why: e.to_string(),
            })
        })?;
        let seed = crate::seed::mix(base_seed, i as u64 + 1);
        let pools = Upstreams::new(sc.pool, threads);
        let service = Service::over(sc.clone(), &[], clock, seed, pools)
            .map_err(|source| arm_error(sc, source))?;
        built[i] = Some(Arc::new(service.with_split(split)));
    }
    Ok(built.into_iter().flatten().collect())
}

/// A service's arm did not validate.
fn arm_error(sc: &config::ServiceConfig, source: tailguard_client::ArmError) -> StartError {
    StartError::Config(ConfigError::Arm {
        service: sc.name.clone(),
        key: "client",
        source,
    })
}

/// A service's first endpoints, and the resolver its DNS watch goes on with. A Kubernetes
/// service starts with none (503, `/ready` 503) until its watch's first list.
async fn first_endpoints(
    sc: &config::ServiceConfig,
) -> Result<(Vec<Upstream>, Option<Resolver>), StartError> {
    Ok(match &sc.discovery {
        Discovery::Static(list) => (list.clone(), None),
        Discovery::File { path, .. } => (read_discovery(&sc.name, path).await?, None),
        Discovery::Named {
            entries, server, ..
        } => {
            let (list, r) = resolve_names(&sc.name, entries, *server).await?;
            (list, Some(r))
        }
        Discovery::Dns { name, server, .. } => {
            let (list, r) = first_resolution(&sc.name, name, *server).await?;
            (list, Some(r))
        }
        Discovery::Kubernetes { .. } | Discovery::Split(_) => (Vec::new(), None),
    })
}

/// A service's TLS settings as its pools are keyed by, and its TLS client, loaded (a warning
/// on stderr when validation is off). Without `commonName`, the one host name the endpoints
/// come from is the name checked.
async fn client_tls(
    sc: &config::ServiceConfig,
) -> Result<(Option<crate::upstream::UpstreamTls>, Option<TlsClient>), StartError> {
    let Some(mut settings) = sc.tls.clone() else {
        return Ok((None, None));
    };
    settings.server_name = settings.server_name.or_else(|| sc.discovery.host_name());
    let key = format!("services[{}].client.tls", sc.name);
    if settings.disable_validation {
        eprintln!(
            "warning: {key}.disableValidation: true: the endpoints' certificates \
             are NOT checked (anyone on the path can answer for them)"
        );
    }
    let client = TlsClient::load(&settings, &key).await?;
    Ok((Some(settings), Some(client)))
}

/// Starts the watch that keeps a discovered service's endpoints current (`upstreams`: its
/// first list); a static service has none.
async fn watch_discovery(
    sc: &config::ServiceConfig,
    feed: Feed,
    resolver: Option<Resolver>,
    upstreams: Vec<Upstream>,
) -> Result<(), StartError> {
    match (&sc.discovery, resolver) {
        (Discovery::File { path, interval }, _) => {
            let watch = discovery::watch_file(feed, path.clone(), *interval, upstreams);
            tokio::spawn(watch);
        }
        (
            Discovery::Named {
                entries, interval, ..
            },
            Some(r),
        ) => {
            let watch = dns::watch_entries(feed, r, entries.clone(), *interval, upstreams);
            tokio::spawn(watch);
        }
        (Discovery::Dns { name, interval, .. }, Some(r)) => {
            tokio::spawn(dns::watch(feed, r, name.clone(), *interval, upstreams));
        }
        (
            Discovery::Kubernetes {
                namespace,
                service,
                port,
            },
            _,
        ) => {
            let (client, from) = crate::k8s::client()
                .await
                .map_err(|e| StartError::Discovery {
                    service: sc.name.clone(),
                    path: "io.l5d.k8s".to_owned(),
                    reason: e.to_string(),
                })?;
            let ns = match namespace {
                Some(ns) => ns.clone(),
                None => {
                    let ns = client.default_namespace().to_owned();
                    // A warning, so that it shows under the default log filter: which namespace
                    // is watched is worth knowing at every start (name one to quiet it).
                    tracing::warn!(
                        service = %sc.name,
                        namespace = %ns,
                        "io.l5d.k8s names no namespace: watching {ns:?}, from {from}"
                    );
                    ns
                }
            };
            let (svc, port) = (service.clone(), port.clone());
            tokio::spawn(crate::k8s::watch(feed, client, ns, svc, port));
        }
        _ => {}
    }
    Ok(())
}

/// A service of the running configuration, as its discovery source's target: there until a
/// reload replaces the service.
struct Feed(Weak<Service>);

impl discovery::Target for Feed {
    fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }

    fn apply(&self, next: &[Upstream]) {
        let Some(service) = self.0.upgrade() else {
            return;
        };
        match service.set_upstreams(next) {
            Ok(()) => {
                crate::health::spawn(&service);
                tracing::info!(service = %service.config.name, endpoints = next.len(), "endpoints updated")
            }
            Err(err) => tracing::warn!(%err, "endpoints not updated"),
        }
    }
}

async fn read_discovery(
    service: &str,
    path: &std::path::Path,
) -> Result<Vec<config::Upstream>, StartError> {
    discovery::read_file(path)
        .await
        .map_err(|reason| StartError::Discovery {
            service: service.to_owned(),
            path: path.display().to_string(),
            reason,
        })
}

/// The endpoints of an upstream list with host names, each name resolved through the system's
/// resolver (`/etc/hosts` included), and the resolver that will resolve them again. Unlike a
/// DNS namer's name, a name in the list is configuration: one that does not resolve stops the
/// start (or refuses the reload), naming it.
async fn resolve_names(
    service: &str,
    entries: &[config::Entry],
    server: Option<SocketAddr>,
) -> Result<(Vec<config::Upstream>, hickory_resolver::TokioResolver), StartError> {
    let fail = |name: String, reason: String| StartError::Unresolved {
        service: service.to_owned(),
        name,
        reason,
    };
    let resolver = dns::resolver(server).map_err(|e| fail("(resolver)".into(), e.to_string()))?;
    let list = dns::resolve_entries(&resolver, entries)
        .await
        .map_err(|(name, e)| fail(name, e.to_string()))?;
    Ok((list, resolver))
}

async fn first_resolution(
    service: &str,
    name: &config::DnsName,
    server: Option<SocketAddr>,
) -> Result<(Vec<config::Upstream>, hickory_resolver::TokioResolver), StartError> {
    let fail = |reason: String| StartError::Discovery {
        service: service.to_owned(),
        path: format!("{name:?}"),
        reason,
    };
    let resolver = dns::resolver(server).map_err(|e| fail(e.to_string()))?;
    // A name that does not resolve yet is not a configuration error (the service may not be
    // deployed, or DNS may be down for a moment): start with no endpoints (503 and /ready 503
    // until it resolves) rather than refuse to start or to reload every other service.
    let list = match dns::resolve(&resolver, name).await {
        Ok(list) => list,
        Err(err) => {
            tracing::warn!(%err, ?name, %service, "DNS name does not resolve yet; no endpoints");
            Vec::new()
        }
    };
    Ok((list, resolver))
}

/// The connection limit under the process's descriptor limit; a configured limit the
/// descriptors cannot back is kept, with a warning (accepts then pause when they run out).
fn connection_limit(limits: &Limits) -> usize {
    let nofile = tailguard_http::fds::current().map_or(u64::MAX, |n| n.soft);
    let n = limits.connections(nofile);
    let budget = tailguard_http::fds::connection_budget(nofile, 2);
    if n > budget {
        tracing::warn!(
            "limits.maxConnections {n} needs about {} file descriptors, the limit is {nofile}; \
             raise `ulimit -n`",
            2 * n
        );
    }
    n
}

impl Proxy {
    /// The proxy listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin server's address, if it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::addr)
    }

    /// State shared by every connection (metrics, services).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The admin `/metrics` page's Prometheus text, built on the calling thread (a test on a
    /// paused clock reads it without waiting on the admin server's thread).
    pub fn metrics_text(&self) -> String {
        crate::admin::metrics_text(&self.shared)
    }

    /// The admin `/dashboard.json` answer, built on the calling thread (as
    /// [`Proxy::metrics_text`]).
    pub fn dashboard_json(&self) -> String {
        let bytes = crate::dashboard::json(&self.shared, None).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The connection limit in force ([`Limits::connections`] under the descriptor limit at
    /// start).
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Replaces the services and the listener's TLS certificate with those of `config`
    /// (validated and read first). Requests in flight finish on the services they started
    /// with, and open connections keep their certificate.
    ///
    /// # Errors
    /// When `config` is invalid, its certificate unusable, or it changes the listener or admin
    /// address or a limit ([`StartError::RestartNeeded`], naming the keys); the running
    /// configuration is then kept whole.
    pub async fn reload(&self, config: &Config) -> Result<(), StartError> {
        config.validate()?;
        // An address the listener was given as port 0 may come back as the port it bound.
        let mut started = self.started.clone();
        if config.listen == self.addr {
            started.listen = self.addr;
        }
        if config.admin.is_some() && config.admin == self.admin_addr() {
            started.admin = self.admin_addr();
        }
        let changed = started.restart_keys_changed(config);
        if !changed.is_empty() {
            return Err(StartError::RestartNeeded(changed));
        }
        let acceptor = tls::acceptor(config.tls.as_ref()).await?;
        let running = self.shared.services();
        let services = build_services(config, self.shared.clock, self.threads, &running).await?;
        self.shared.tls.set(acceptor);
        self.shared.services.store(Arc::new(services));
        Ok(())
    }

    /// Stops accepting, lets open connections finish (up to the drain limit), and returns.
    /// Meanwhile the admin server keeps answering, `/ready` with 503 (`draining`), so a load
    /// balancer's health check sees the proxy leave rather than a refused connection.
    pub async fn shutdown(self) {
        self.shared
            .draining
            .store(true, std::sync::atomic::Ordering::Release);
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let workers = self.workers;
        let _ = tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await;
        if let Some(admin) = self.admin {
            admin.shutdown().await;
        }
        self.ticker.abort();
    }
}
