//! DNS discovery: A/AAAA or SRV records re-resolved every `interval`, using every address
//! returned (not just the first, which is where getaddrinfo-based clients go wrong: the seed's
//! note on round robin). Resolved with hickory-resolver, against the system's name servers or
//! a configured one. A failed resolution keeps the previous endpoints.
//!
//! The names themselves ([`DnsName`]) are configuration; this module resolves them.

use crate::config::{DnsName, Entry, Upstream};
use crate::discovery::Target;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;
use std::net::SocketAddr;
use std::time::Duration;

/// A resolution that failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DnsError(String);

/// A resolver over `server` (UDP then TCP), or the system's name servers when `None`.
///
/// # Errors
/// When the system configuration cannot be read.
pub fn resolver(server: Option<SocketAddr>) -> Result<TokioResolver, DnsError> {
    let fail = |e: hickory_resolver::net::NetError| DnsError(e.to_string());
    let provider = TokioRuntimeProvider::default();
    let Some(server) = server else {
        return TokioResolver::builder(provider)
            .map_err(fail)?
            .build()
            .map_err(fail);
    };
    let (mut udp, mut tcp) = (ConnectionConfig::udp(), ConnectionConfig::tcp());
    udp.port = server.port();
    tcp.port = server.port();
    let ns = NameServerConfig::new(server.ip(), true, vec![udp, tcp]);
    let config = ResolverConfig::from_name_servers(vec![ns]);
    let mut builder = TokioResolver::builder_with_config(config, provider);
    // Re-resolution must see changes at once: no answers are cached across rounds.
    builder.options_mut().cache_size = 0;
    builder.build().map_err(fail)
}

/// Every address `name` resolves to, sorted (so an unchanged answer compares equal). For SRV,
/// the records of the lowest priority value (RFC 2782: the ones to use while any answers),
/// each target resolved to all its addresses; a target that does not resolve is skipped.
///
/// # Errors
/// When the lookup fails, or no SRV target of the lowest priority resolves.
pub async fn resolve(resolver: &TokioResolver, name: &DnsName) -> Result<Vec<Upstream>, DnsError> {
    let fail = |e: hickory_resolver::net::NetError| DnsError(e.to_string());
    let mut out = Vec::new();
    match name {
        DnsName::A { host, port } => {
            let ips = resolver.lookup_ip(host.as_str()).await.map_err(fail)?;
            out.extend(
                ips.iter()
                    .map(|ip| Upstream::new(SocketAddr::new(ip, *port))),
            );
        }
        DnsName::Srv { name } => {
            let answer = resolver.srv_lookup(name.as_str()).await.map_err(fail)?;
            let records: Vec<_> = answer
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(srv) => Some(srv),
                    _ => None,
                })
                .collect();
            let first = records.iter().map(|s| s.priority).min();
            let mut failed = None;
            for srv in records.iter().filter(|s| Some(s.priority) == first) {
                match resolver.lookup_ip(srv.target.clone()).await {
                    Ok(ips) => out.extend(
                        ips.iter()
                            .map(|ip| Upstream::new(SocketAddr::new(ip, srv.port))),
                    ),
                    Err(e) => {
                        let target = &srv.target;
                        tracing::warn!(%e, %target, "SRV target does not resolve; skipped");
                        failed = Some(e);
                    }
                }
            }
            if let (true, Some(e)) = (out.is_empty(), failed) {
                return Err(fail(e));
            }
        }
    }
    out.sort_by_key(|u| u.addr);
    out.dedup();
    Ok(out)
}

/// Re-resolves `name` every `interval` for `target` while it is there. An empty answer or a
/// failed lookup keeps the current endpoints.
pub async fn watch(
    target: impl Target,
    resolver: TokioResolver,
    name: DnsName,
    interval: Duration,
    last: Vec<Upstream>,
) {
    let fetch = || async {
        match resolve(&resolver, &name).await {
            Ok(next) if !next.is_empty() => Some(next),
            Ok(_) => None,
            Err(err) => {
                tracing::warn!(%err, ?name, "DNS resolution failed; keeping endpoints");
                None
            }
        }
    };
    crate::discovery::poll(target, interval, last, fetch).await;
}

/// Every endpoint of an upstream list with host names: its addresses as they are, and every
/// address each name resolves to with the name's weight (its IPv4 ones when it has any, as
/// Envoy's `V4_PREFERRED`: `localhost` is 127.0.0.1 and not also `::1`, where a backend
/// listening on 127.0.0.1 would refuse); sorted, without duplicates.
///
/// # Errors
/// The first name that does not resolve (or resolves to nothing), and why.
pub async fn resolve_entries(
    resolver: &TokioResolver,
    entries: &[Entry],
) -> Result<Vec<Upstream>, (String, DnsError)> {
    let mut out = Vec::new();
    for e in entries {
        match e {
            Entry::Addr(u) => out.push(*u),
            Entry::Name { host, port, weight } => {
                let name = DnsName::A {
                    host: host.clone(),
                    port: *port,
                };
                let at = format!("{host}:{port}");
                let found = resolve(resolver, &name)
                    .await
                    .map_err(|e| (at.clone(), e))?;
                if found.is_empty() {
                    return Err((at, DnsError("no address".into())));
                }
                let v4 = found.iter().any(|u| u.addr.is_ipv4());
                let found = found.into_iter().filter(|u| !v4 || u.addr.is_ipv4());
                out.extend(found.map(|u| Upstream {
                    weight: *weight,
                    ..u
                }));
            }
        }
    }
    out.sort_by_key(|u| u.addr);
    out.dedup_by_key(|u| u.addr);
    Ok(out)
}

/// Resolves the names of `entries` again every `interval` for `target` while it is there. A
/// round in which any name fails keeps the current endpoints (a name that stops resolving for
/// a moment does not take its endpoints away).
pub async fn watch_entries(
    target: impl Target,
    resolver: TokioResolver,
    entries: Vec<Entry>,
    interval: Duration,
    last: Vec<Upstream>,
) {
    let fetch = || async {
        match resolve_entries(&resolver, &entries).await {
            Ok(next) => Some(next),
            Err((name, err)) => {
                tracing::warn!(%err, %name, "DNS resolution failed; keeping endpoints");
                None
            }
        }
    };
    crate::discovery::poll(target, interval, last, fetch).await;
}
