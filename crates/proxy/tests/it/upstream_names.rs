//! Host names in the upstream list (`--upstream localhost:9000`, `upstreams: [web:80]`):
//! resolved through the system's resolver (`localhost` is answered by the resolver itself, so
//! no query leaves the machine), every address used with the entry's weight, IPv4 preferred;
//! a name that does not resolve (`.invalid` never does, and is never sent) stops the start.

use crate::support;

use support::{client, config, send, start, views};
use tailguard_proxy::config::{Discovery, Entry, ServiceConfig, Upstream};
use tailguard_testsupport::TestServer;

fn named(list: &[&str]) -> ServiceConfig {
    let entries = list.iter().map(|e| Entry::parse(e).unwrap()).collect();
    let mut s = ServiceConfig::new("web", Vec::new());
    s.discovery = Discovery::of_entries(entries);
    s
}

#[test]
fn entries_are_addresses_or_names_with_a_weight() {
    let addr = "127.0.0.1:9000".parse().unwrap();
    assert_eq!(
        Entry::parse("127.0.0.1:9000"),
        Ok(Entry::Addr(Upstream::new(addr)))
    );
    assert_eq!(
        Entry::parse("web.internal:8080 3"),
        Ok(Entry::Name {
            host: "web.internal".into(),
            port: 8080,
            weight: 3
        })
    );
    assert!(matches!(Entry::parse("[::1]:80"), Ok(Entry::Addr(_))));
    assert!(matches!(
        Entry::parse("localhost:80"),
        Ok(Entry::Name { .. })
    ));
    for bad in [
        "localhost",
        "localhost:http",
        "localhost:70000",
        "bad_name:80",
        "-web:80",
        "web..internal:80",
        "300.1.1.1:80",
        "web:80 0",
        "web:80 101",
        "web:80 1 2",
        "",
    ] {
        let e = Entry::parse(bad).unwrap_err();
        assert!(
            e.contains("is not `IP:PORT` or `HOST:PORT`"),
            "{bad:?}: {e}"
        );
    }
    // All addresses: the fixed list it always was; any name: resolved.
    let all = vec![Entry::Addr(Upstream::new(addr))];
    assert_eq!(
        Discovery::of_entries(all),
        Discovery::Static(vec![Upstream::new(addr)])
    );
    assert!(matches!(
        named(&["127.0.0.1:1", "localhost:2"]).discovery,
        Discovery::Named { .. }
    ));
}

#[tokio::test]
async fn localhost_resolves_to_its_ipv4_address_with_the_entrys_weight() {
    let backend = TestServer::start().await;
    let port = backend.addr().port();
    let proxy = start(named(&[&format!("localhost:{port} 2")])).await;
    let c = client(false);
    for _ in 0..4 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!(backend.hits(), 4);
    let endpoints: Vec<String> = views(&proxy).into_iter().map(|v| v.addr).collect();
    assert!(
        endpoints.iter().all(|a| *a == format!("127.0.0.1:{port}")),
        "IPv4 only (no ::1): {endpoints:?}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_name_that_does_not_resolve_stops_the_start_naming_it() {
    let e = tailguard_proxy::start(config(named(&["127.0.0.1:9", "nosuch.invalid:80"])))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("services[web].upstreams (--upstream): `nosuch.invalid:80` does not resolve"),
        "{e}"
    );
    // The same from a file.
    let yaml = "servers: [{ip: 127.0.0.1, port: 0}]\n\
                services: [{name: web, upstreams: [\"localhost:9 2\", 127.0.0.1:10]}]\n";
    let parsed = tailguard_proxy::yaml::parse(yaml).unwrap();
    let Discovery::Named { entries, .. } = &parsed.services[0].discovery else {
        panic!("{:?}", parsed.services[0].discovery)
    };
    assert_eq!(entries.len(), 2);
    let e = tailguard_proxy::yaml::parse(&yaml.replace("localhost:9 2", "local_host:9"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("services[web].upstreams: `local_host:9` is not"),
        "{e}"
    );
}

#[test]
fn the_host_name_tls_checks_without_common_name() {
    let named = |list: &[&str]| named(list).discovery.host_name();
    assert_eq!(
        named(&["api.internal:443", "127.0.0.1:443"]),
        Some("api.internal".into())
    );
    assert_eq!(
        named(&["api.internal:443", "api.internal.:8443 2"]),
        Some("api.internal".into())
    );
    assert_eq!(
        named(&["a.internal:443", "b.internal:443"]),
        None,
        "two names: none is the one"
    );
    assert_eq!(Discovery::Static(vec![]).host_name(), None);
    let dns = Discovery::Dns {
        name: tailguard_proxy::config::DnsName::parse("web.internal:8080").unwrap(),
        server: None,
        interval: std::time::Duration::from_secs(5),
    };
    assert_eq!(dns.host_name(), Some("web.internal".into()));
}
