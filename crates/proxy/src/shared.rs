//! The state every connection of a running proxy shares.

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::service::Service;
use crate::tls;
use arc_swap::ArcSwap;
use std::sync::Arc;
use tailguard_record::live;

/// State shared by every connection.
#[derive(Debug)]
pub struct Shared {
    /// The proxy's clock.
    pub clock: Clock,
    /// Every metric.
    pub metrics: Metrics,
    /// What the dashboard shows, per service.
    pub(crate) live: live::Board,
    /// The services in routing order: read by every request without a lock, replaced whole by
    /// a reload.
    pub(crate) services: ArcSwap<Vec<Arc<Service>>>,
    /// Set when shutdown begins: `/ready` answers 503 while requests in flight finish.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// The listener's TLS acceptor (`None`: cleartext), read per accepted connection, so a
    /// reload's new certificate serves the next connection.
    pub(crate) tls: tls::Current,
    /// The access log, if one is configured.
    pub(crate) access_log: Option<Arc<crate::access_log::AccessLog>>,
    /// The tracer, if tracing is on.
    pub(crate) tracer: Option<Arc<crate::trace::Tracer>>,
}

impl Shared {
    /// The state of a proxy serving `services` (in routing order) on `clock`, its listener's
    /// TLS by `acceptor` (`None`: cleartext).
    pub(crate) fn new(
        clock: Clock,
        services: Vec<Arc<Service>>,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
    ) -> Self {
        Self {
            clock,
            metrics: Metrics::new(),
            live: live::Board::default(),
            services: ArcSwap::from_pointee(services),
            draining: std::sync::atomic::AtomicBool::new(false),
            tls: tls::Current::new(acceptor),
            access_log: None,
            tracer: None,
        }
    }

    /// The same state, writing an access log through `log`.
    pub(crate) fn with_access_log(mut self, log: crate::access_log::AccessLog) -> Self {
        self.access_log = Some(Arc::new(log));
        self
    }

    /// Asks the access log, if any, to open its file again (SIGUSR1).
    pub fn reopen_access_log(&self) {
        if let Some(log) = &self.access_log {
            log.reopen();
        }
    }

    /// The TLS acceptor for the next connection, if the listener serves TLS.
    pub fn tls(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.tls.get()
    }

    /// Whether the proxy is draining (shutting down).
    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The current services, in routing order.
    pub fn services(&self) -> Arc<Vec<Arc<Service>>> {
        self.services.load_full()
    }
}
