//! Frees what the proxy keeps per endpoint once the endpoint is gone: pods come and go under
//! Kubernetes (and addresses are reused), so per-endpoint state kept "for every address ever
//! seen" grows without bound.
//!
//! Every [`period`] the sweep reads the current services' endpoint sets and:
//! - removes the per-endpoint metric series of every endpoint absent from its service with
//!   nothing counted for `admin.metricsRetainIdleMs` ([`crate::metrics::Metrics::retire`]);
//! - has each service's pools let go of absent endpoints' connections and drop the entries of
//!   endpoints with no connection left ([`crate::upstream::Upstreams::release`]).
//!
//! What the balancer learned of an address lives in the endpoint generation
//! ([`crate::endpoints::Endpoints::inherit`]), which hands it only to the next generation: an
//! address that leaves and comes back (a reused pod IP) starts from nothing.

use crate::service::Service;
use crate::shared::Shared;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the sweep runs for a retention of `retain`: a quarter of it, from 100 ms to 10 s,
/// so that series go at most a quarter late and the sweep stays cheap.
pub fn period(retain: Duration) -> Duration {
    (retain / 4).clamp(Duration::from_millis(100), Duration::from_secs(10))
}

/// Sweeps every [`period`] until the proxy is gone.
pub async fn watch(shared: Weak<Shared>, retain: Duration) {
    let every = period(retain);
    loop {
        tokio::time::sleep(every).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let retired = sweep(&shared, retain);
        if retired > 0 {
            tracing::debug!(
                retired,
                "per-endpoint series removed (endpoints gone and idle)"
            );
        }
    }
}

/// One sweep at the proxy clock's now; returns how many endpoints lost their series.
pub fn sweep(shared: &Shared, retain: Duration) -> usize {
    let services = shared.services();
    let present: HashMap<String, HashSet<SocketAddr>> = services
        .iter()
        .map(|s| (s.config.name.clone(), addresses(s)))
        .collect();
    let retired = shared.metrics.retire(&present, shared.clock.now(), retain);
    // Pools may be shared by services (same settings, no limit): each is released once, with
    // the addresses of every service over it.
    let mut done: Vec<&Arc<Service>> = Vec::new();
    for service in services.iter() {
        if done.iter().any(|d| d.upstreams.same(&service.upstreams)) {
            continue;
        }
        done.push(service);
        let over: HashSet<SocketAddr> = services
            .iter()
            .filter(|s| s.upstreams.same(&service.upstreams))
            .flat_map(|s| present[&s.config.name].iter().copied())
            .collect();
        service.upstreams.release(&over);
    }
    retired
}

fn addresses(service: &Service) -> HashSet<SocketAddr> {
    service.endpoints().distinct().into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_a_quarter_of_the_retention_within_bounds() {
        assert_eq!(period(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(period(Duration::from_millis(1)), Duration::from_millis(100));
        assert_eq!(period(Duration::from_secs(600)), Duration::from_secs(10));
    }
}
