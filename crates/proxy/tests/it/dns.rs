//! DNS discovery against a real name server: dnsmasq (Debian package, installed by `.ci/run`),
//! started by the test on 127.0.0.1 on a free port, serving names from a hosts directory that it
//! re-reads by itself when a file changes.

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{client, eventually, send, start, AsUpstream};
use tailguard_proxy::config::DnsName;
use tailguard_proxy::config::{Discovery, Entry, ServiceConfig};
use tailguard_proxy::dns::{resolve, resolver};
use tailguard_testsupport::TestServer;

struct Dnsmasq {
    child: Child,
    addr: std::net::SocketAddr,
    dir: std::path::PathBuf,
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port free for both UDP and TCP on 127.0.0.1: dnsmasq binds both, and exits at once when
/// the TCP one is taken (a port free for UDP alone made this test fail now and then).
fn free_udp_and_tcp_port() -> u16 {
    for _ in 0..100 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP on 127.0.0.1 in 100 tries");
}

fn dnsmasq(srv_port: u16) -> Dnsmasq {
    let port = free_udp_and_tcp_port();
    let dir = std::env::temp_dir().join(format!("tailguard-dnsmasq-{}-{port}", std::process::id()));
    let hosts = dir.join("hosts");
    std::fs::create_dir_all(&hosts).unwrap();
    std::fs::write(hosts.join("web"), "127.0.0.1 web.test\n").unwrap();
    let child = Command::new("dnsmasq")
        .args([
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
        ])
        .args([
            "--bind-interfaces",
            "--listen-address=127.0.0.1",
            "--pid-file=",
            "--user=root",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--hostsdir={}", hosts.display()))
        .arg(format!(
            "--srv-host=_http._tcp.web.test,web.test,{srv_port}"
        ))
        // Same priority, a target that does not resolve: skipped, not fatal.
        .arg(format!(
            "--srv-host=_http._tcp.web.test,gone.test,{srv_port},0"
        ))
        // A backup (higher priority value): not used while the first group answers.
        .arg(format!(
            "--srv-host=_http._tcp.web.test,web.test,{},20",
            srv_port + 1
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dnsmasq is required for this test (apt-get install dnsmasq; .ci/run does)");
    Dnsmasq {
        child,
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        dir,
    }
}

// long: one dnsmasq and one proxy, before and after an address is added.
#[tokio::test]
#[ignore = "tier 2: dnsmasq"]
async fn dns_discovery_uses_every_address_and_picks_up_an_added_one() {
    let backend = TestServer::start().await;
    let port = backend.addr().port();
    let mut dns = dnsmasq(port);
    let r = resolver(Some(dns.addr)).unwrap();
    let name = DnsName::parse(&format!("web.test:{port}")).unwrap();
    // A query sent before dnsmasq listens is lost and waits out the resolver's 5 s timeout, so
    // readiness gets several of those (on a busy machine dnsmasq can take seconds to start).
    let up = eventually(Duration::from_secs(30), async || {
        let exited = dns.child.try_wait().ok().flatten();
        assert!(exited.is_none(), "dnsmasq exited: {exited:?}");
        resolve(&r, &name).await.is_ok()
    })
    .await;
    assert!(up, "dnsmasq did not answer");
    let srv = resolve(&r, &DnsName::parse("_http._tcp.web.test").unwrap())
        .await
        .unwrap();
    assert_eq!(
        srv,
        vec![backend.upstream()],
        "SRV target and port; the unresolvable target and the backup left out"
    );

    let mut s = ServiceConfig::new("web", vec![]);
    s.discovery = Discovery::Dns {
        name,
        server: Some(dns.addr),
        interval: Duration::from_millis(100),
    };
    let proxy = start(s).await;
    assert_eq!(send(&client(false), proxy.addr(), "GET", "/").await.0, 200);
    assert_eq!(backend.hits(), 1);

    // A name that does not resolve yet starts with no endpoints, not an error.
    let mut later = ServiceConfig::new("later", vec![]);
    later.discovery = Discovery::Dns {
        name: DnsName::parse(&format!("later.test:{port}")).unwrap(),
        server: Some(dns.addr),
        interval: Duration::from_millis(100),
    };
    let waiting = start(later).await;
    let c = client(false);
    assert_eq!(send(&c, waiting.addr(), "GET", "/").await.0, 503);
    let admin = waiting.admin_addr().unwrap();
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 503);
    std::fs::write(
        dns.dir.join("hosts").join("later"),
        "127.0.0.1 later.test\n",
    )
    .unwrap();
    let resolved = eventually(Duration::from_secs(10), async || {
        send(&c, waiting.addr(), "GET", "/").await.0 == 200
    })
    .await;
    assert!(resolved, "the name was picked up once it resolved");
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 200);
    waiting.shutdown().await;

    std::fs::write(
        dns.dir.join("hosts").join("web"),
        "127.0.0.1 web.test\n::1 web.test\n",
    )
    .unwrap();
    let both = eventually(Duration::from_secs(10), async || {
        let views = proxy.shared().services()[0]
            .endpoints()
            .views(proxy.shared().clock.now());
        views.len() == 2
    })
    .await;
    let addrs: Vec<String> = proxy.shared().services()[0]
        .endpoints()
        .views(proxy.shared().clock.now())
        .into_iter()
        .map(|v| v.addr)
        .collect();
    assert!(both, "the added address was not picked up: {addrs:?}");
    assert_eq!(
        addrs,
        vec![format!("127.0.0.1:{port}"), format!("[::1]:{port}")]
    );
    proxy.shutdown().await;
}

#[tokio::test]
#[ignore = "tier 2: dnsmasq"]
async fn names_in_the_upstream_list_are_resolved_again_ipv4_first() {
    let backend = TestServer::start().await;
    let port = backend.addr().port();
    let dns = dnsmasq(port);
    let r = resolver(Some(dns.addr)).unwrap();
    let name = DnsName::parse(&format!("web.test:{port}")).unwrap();
    let up = eventually(Duration::from_secs(30), async || {
        resolve(&r, &name).await.is_ok()
    })
    .await;
    assert!(up, "dnsmasq did not answer");
    let mut s = ServiceConfig::new("web", vec![]);
    s.discovery = Discovery::Named {
        entries: vec![Entry::parse(&format!("web.test:{port}")).unwrap()],
        server: Some(dns.addr),
        interval: Duration::from_millis(100),
    };
    let proxy = start(s).await;
    assert_eq!(send(&client(false), proxy.addr(), "GET", "/").await.0, 200);
    let addrs = |proxy: &tailguard_proxy::Proxy| {
        let mut a: Vec<String> = support::views(proxy).into_iter().map(|v| v.addr).collect();
        a.sort();
        a
    };
    assert_eq!(addrs(&proxy), [format!("127.0.0.1:{port}")]);
    // A second IPv4 address and an IPv6 one: the IPv4 one joins, the IPv6 one is left out
    // while the name has IPv4 addresses (nothing listens on 127.0.0.2: refused, loopback).
    std::fs::write(
        dns.dir.join("hosts").join("more"),
        "127.0.0.2 web.test\n::1 web.test\n",
    )
    .unwrap();
    let want = [format!("127.0.0.1:{port}"), format!("127.0.0.2:{port}")];
    let grown = eventually(Duration::from_secs(10), async || addrs(&proxy) == want).await;
    assert!(grown, "{:?}", addrs(&proxy));
    proxy.shutdown().await;
}
