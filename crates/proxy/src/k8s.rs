//! Kubernetes discovery: a Service's `discovery.k8s.io/v1` EndpointSlices, watched (Linkerd 1's
//! `io.l5d.k8s` namer).
//!
//! 1. The client comes from `KUBECONFIG` (or `~/.kube/config`), else the in-cluster service
//!    account ([`client`]); with neither, the configuration is refused before serving.
//! 2. A watcher (kube-runtime) lists and then watches the slices labelled
//!    `kubernetes.io/service-name=SERVICE` in the namespace. It re-lists by itself when the
//!    watch expires (`410 Gone`) or the API server comes back after a restart.
//! 3. Every ready endpoint of every slice is an endpoint, at the slice's port named or numbered
//!    as configured. An endpoint whose `ready` condition is false (terminating, even while still
//!    serving) gets no new requests; requests already sent to it finish (they keep the
//!    generation they started with). `ready` left unset counts as ready, as the API defines.
//! 4. The list goes to the service only when it changed; what the balancer learned about the
//!    addresses that stay (accrual, counts) carries over, as with file and DNS discovery.
//! 5. An error (the API server unreachable, the list or watch denied by RBAC) is logged once,
//!    one line, until the watch works again; meanwhile the service keeps its last endpoints (none
//!    before the first list: 503, and `/ready` 503).

use crate::config::{PortRef, Upstream};
use crate::discovery::Target;
use futures_util::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// A Kubernetes client could not be configured.
#[derive(Debug, thiserror::Error)]
#[error("no Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
pub struct K8sError(String);

/// A client from `KUBECONFIG` (or `~/.kube/config`), else the in-cluster service account
/// (kube's `Config::infer` order), and where its default namespace comes from, in words.
///
/// # Errors
/// When neither is there or usable.
pub async fn client() -> Result<(Client, &'static str), K8sError> {
    let options = kube::config::KubeConfigOptions::default();
    let (config, from) = match kube::Config::from_kubeconfig(&options).await {
        Ok(config) => (
            config,
            "the kubeconfig's current context (`default` if it names none)",
        ),
        Err(kubeconfig) => match kube::Config::incluster() {
            Ok(config) => (config, "the service account's namespace file"),
            Err(incluster) => {
                return Err(K8sError(format!("{kubeconfig}; in-cluster: {incluster}")))
            }
        },
    };
    let client = Client::try_from(config).map_err(|e| K8sError(e.to_string()))?;
    Ok((client, from))
}

/// The endpoints of one slice at `port`: every address of every ready endpoint. A slice without
/// that port gives none.
pub fn endpoints(slice: &EndpointSlice, port: &PortRef) -> Vec<Upstream> {
    let number = slice.ports.iter().flatten().find_map(|p| {
        let matches = match port {
            PortRef::Name(n) => p.name.as_deref() == Some(n.as_str()),
            PortRef::Number(n) => p.port == Some(i32::from(*n)),
        };
        matches.then_some(p.port).flatten()
    });
    let Some(number) = number.and_then(|n| u16::try_from(n).ok()) else {
        return Vec::new();
    };
    slice
        .endpoints
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .flat_map(|e| e.addresses.iter())
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .map(|ip| Upstream::new(SocketAddr::new(ip, number)))
        .collect()
}

/// An error's text without the API status object the client appends to it (the message
/// already says what it holds).
fn short(text: &str) -> String {
    text.split(" (Status {").next().unwrap_or(text).to_owned()
}

/// Whether an event starts a list (which proves nothing yet).
enum Kind {
    Init,
    Other,
}

/// The union of every slice's endpoints, sorted, each address once.
fn union(slices: &BTreeMap<String, Vec<Upstream>>) -> Vec<Upstream> {
    let mut all: Vec<Upstream> = slices.values().flatten().copied().collect();
    all.sort_by_key(|u| u.addr);
    all.dedup_by_key(|u| u.addr);
    all
}

/// Watches the slices of `service` in `namespace` for `target` while it is there.
pub async fn watch(
    target: impl Target,
    client: Client,
    namespace: String,
    service: String,
    port: PortRef,
) {
    let api: Api<EndpointSlice> = Api::namespaced(client, &namespace);
    let config =
        watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
    let events = watcher::watcher(api, config).default_backoff();
    tokio::pin!(events);
    let mut slices: BTreeMap<String, Vec<Upstream>> = BTreeMap::new();
    // A re-list's slices, collected until it is complete, then swapped in whole.
    let mut listing: Option<BTreeMap<String, Vec<Upstream>>> = None;
    let mut last: Option<Vec<Upstream>> = None;
    let mut failing: Option<String> = None;
    let mut alive = tokio::time::interval(Duration::from_secs(1));
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = alive.tick() => {
                if target.alive() { continue } else { return }
            }
        };
        let Some(event) = event else { return };
        let event_kind = match &event {
            Ok(Event::Init) => Kind::Init,
            _ => Kind::Other,
        };
        let name = |s: &EndpointSlice| s.metadata.name.clone().unwrap_or_default();
        match event {
            Err(err) => {
                let text = short(&err.to_string());
                if failing.as_ref() != Some(&text) {
                    tracing::error!(%service, %namespace, error = %text,
                        "kubernetes discovery failed; keeping the last endpoints");
                    failing = Some(text);
                }
                continue;
            }
            Ok(Event::Init) => listing = Some(BTreeMap::new()),
            Ok(Event::InitApply(s)) => {
                let into = listing.get_or_insert_with(BTreeMap::new);
                into.insert(name(&s), endpoints(&s, &port));
            }
            Ok(Event::InitDone) => slices = listing.take().unwrap_or_default(),
            Ok(Event::Apply(s)) => {
                slices.insert(name(&s), endpoints(&s, &port));
            }
            Ok(Event::Delete(s)) => {
                slices.remove(&name(&s));
            }
        }
        // `Init` starts every (re-)list, failed ones too: only what a list or watch returned
        // says it works.
        if !matches!(event_kind, Kind::Init) && failing.take().is_some() {
            tracing::warn!(%service, %namespace, "kubernetes discovery works again");
        }
        if listing.is_some() || !target.alive() {
            continue;
        }
        let next = union(&slices);
        if last.as_ref() != Some(&next) {
            target.apply(&next);
            last = Some(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

    fn slice(ports: &[(&str, i32)], eps: &[(&str, Option<bool>)]) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| EndpointPort {
                        name: Some((*n).into()),
                        port: Some(*p),
                        ..EndpointPort::default()
                    })
                    .collect(),
            ),
            endpoints: eps
                .iter()
                .map(|(a, ready)| Endpoint {
                    addresses: vec![(*a).into()],
                    conditions: Some(EndpointConditions {
                        ready: *ready,
                        ..EndpointConditions::default()
                    }),
                    ..Endpoint::default()
                })
                .collect(),
            ..EndpointSlice::default()
        }
    }

    #[test]
    fn ready_endpoints_at_the_named_or_numbered_port() {
        let s = slice(
            &[("http", 8080), ("admin", 9990)],
            &[
                ("10.203.0.2", Some(true)),
                ("10.203.0.3", None),
                ("10.203.0.4", Some(false)),
                ("not-an-ip", Some(true)),
            ],
        );
        let by_name = endpoints(&s, &PortRef::Name("http".into()));
        let addrs: Vec<String> = by_name.iter().map(|u| u.addr.to_string()).collect();
        assert_eq!(addrs, ["10.203.0.2:8080", "10.203.0.3:8080"]);
        assert_eq!(endpoints(&s, &PortRef::Number(9990)).len(), 2);
        assert!(endpoints(&s, &PortRef::Name("grpc".into())).is_empty());
    }

    #[test]
    fn an_error_line_leaves_out_the_status_object() {
        let text = "failed to perform initial object list: ApiError: forbidden: Forbidden (Status { code: 403 })";
        assert_eq!(
            short(text),
            "failed to perform initial object list: ApiError: forbidden: Forbidden"
        );
        assert_eq!(short("connection refused"), "connection refused");
    }

    #[test]
    fn the_union_lists_each_address_once_in_order() {
        let a = Upstream::new("10.203.0.3:80".parse().unwrap());
        let b = Upstream::new("10.203.0.2:80".parse().unwrap());
        let slices = BTreeMap::from([("x".to_owned(), vec![a, b]), ("y".to_owned(), vec![a])]);
        assert_eq!(union(&slices), vec![b, a]);
    }
}
