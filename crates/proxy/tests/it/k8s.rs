//! Kubernetes discovery against a real API server (etcd and kube-apiserver started by
//! `shared/tools/k8s/start-apiserver.sh`, on 127.0.0.1 ports the kernel picks): EndpointSlices
//! created, scaled, marked terminating and deleted move the proxy's endpoints within seconds,
//! and real requests follow them. The slices name addresses in 10.203.0.0/16 (the API server
//! refuses loopback ones). The tests on 10.203.0.0/24 send no request, so those addresses are
//! never dialed. The traffic test (`requests_follow_the_slices_to_backends_in_a_namespace`)
//! creates a network namespace with a veth pair (root side 10.203.77.1, backends inside on
//! 10.203.77.2, .3 and .4, port 8080), sends requests through the proxy on 127.0.0.1 and checks
//! which backends answer as slices are created, marked terminating, scaled down and deleted; it
//! removes the namespace and the veth even when it fails. It needs root and `ip` (iproute2).

use crate::support;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{client, send, HttpClient};
use tailguard_balance::Policy;
use tailguard_proxy::config::{Config, Discovery, PortRef, ServiceConfig};

/// One test at a time: each points `KUBECONFIG` (process-wide) at its own API server.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A running API server, stopped (and its directory removed) when dropped.
struct ApiServer {
    dir: PathBuf,
    /// The API server process a restart started (stopped with the rest, then reaped).
    restarted: std::sync::Mutex<Option<std::process::Child>>,
}

fn tools() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tools/k8s")
}

impl ApiServer {
    fn start() -> ApiServer {
        let out = std::process::Command::new("bash")
            .arg(tools().join("start-apiserver.sh"))
            .output()
            .expect("start-apiserver.sh runs");
        assert!(
            out.status.success(),
            "start-apiserver.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        ApiServer {
            dir: dir.into(),
            restarted: std::sync::Mutex::new(None),
        }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(tools().join("stop-apiserver.sh"))
            .arg(&self.dir)
            .status();
        if let Some(mut child) = self.restarted.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn slice(name: &str, service: &str, addrs: &[(&str, bool)]) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/service-name".to_owned(),
                service.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..EndpointPort::default()
        }]),
        endpoints: addrs
            .iter()
            .map(|(a, ready)| Endpoint {
                addresses: vec![(*a).into()],
                conditions: Some(EndpointConditions {
                    ready: Some(*ready),
                    serving: Some(true),
                    terminating: Some(!*ready),
                }),
                ..Endpoint::default()
            })
            .collect(),
    }
}

/// The addresses `/endpoints` lists for service `web`, sorted.
async fn listed(c: &HttpClient, admin: std::net::SocketAddr) -> Vec<String> {
    let (_, _, body) = send(c, admin, "GET", "/endpoints").await;
    let v: Value = serde_json::from_slice(&body).unwrap();
    let mut out: Vec<String> = v["web"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["addr"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Polls `/endpoints` until it lists `want` or 5 s pass; returns how long it took.
async fn until_listed(
    c: &HttpClient,
    admin: std::net::SocketAddr,
    want: &[&str],
) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    let ok = support::eventually(Duration::from_secs(5), async || {
        listed(c, admin).await == want
    })
    .await;
    ok.then(|| start.elapsed())
}

/// The slices of namespace `default` on `api`, and a proxy (admin port on) whose service `web`
/// is discovered from them at `port`. The proxy finds the API server as any Kubernetes client
/// does, through `KUBECONFIG`.
async fn watching(api: &ApiServer, port: PortRef) -> (Api<EndpointSlice>, tailguard_proxy::Proxy) {
    std::env::set_var("KUBECONFIG", api.kubeconfig());
    let kube = Client::try_default().await.unwrap();
    let mut service = ServiceConfig::new("web", Vec::new());
    // Requests sent one after another then reach every endpoint in turn.
    service.arm.policy = Policy::RoundRobin;
    // No namespace: the client's own, `default` in the test API server's kubeconfig.
    service.discovery = Discovery::Kubernetes {
        namespace: None,
        service: "web".into(),
        port,
    };
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), vec![service]);
    config.admin = Some("127.0.0.1:0".parse().unwrap());
    let proxy = tailguard_proxy::start(config).await.unwrap();
    (Api::namespaced(kube, "default"), proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: a real kube-apiserver and etcd"]
async fn endpoint_slices_move_the_proxy_s_endpoints() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let api = ApiServer::start();
    let (slices, proxy) = watching(&api, PortRef::Name("http".into())).await;
    let admin = proxy.admin_addr().unwrap();
    let c = client(false);
    // No slice yet: no endpoints, not ready.
    assert!(listed(&c, admin).await.is_empty());
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 503);

    let pp = PostParams::default();
    let a = slice(
        "web-a",
        "web",
        &[("10.203.0.2", true), ("10.203.0.3", true)],
    );
    slices.create(&pp, &a).await.unwrap();
    // Another service's slice is not ours.
    let other = slice("api-a", "api", &[("10.203.0.9", true)]);
    slices.create(&pp, &other).await.unwrap();
    let took = until_listed(&c, admin, &["10.203.0.2:8080", "10.203.0.3:8080"]).await;
    assert!(took.is_some_and(|t| t < Duration::from_secs(3)), "{took:?}");
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 200);

    // Scaled: a second slice adds an endpoint.
    let b = slice("web-b", "web", &[("10.203.0.4", true)]);
    slices.create(&pp, &b).await.unwrap();
    let want = ["10.203.0.2:8080", "10.203.0.3:8080", "10.203.0.4:8080"];
    assert!(until_listed(&c, admin, &want).await.is_some());

    // Terminating (serving, not ready): no new requests go there.
    let mut a2 = slices.get("web-a").await.unwrap();
    a2.endpoints = slice("x", "web", &[("10.203.0.2", true), ("10.203.0.3", false)]).endpoints;
    slices.replace("web-a", &pp, &a2).await.unwrap();
    let want = ["10.203.0.2:8080", "10.203.0.4:8080"];
    assert!(until_listed(&c, admin, &want).await.is_some());

    // Deleted: gone, and with nothing left the proxy is not ready.
    slices
        .delete("web-a", &DeleteParams::default())
        .await
        .unwrap();
    assert!(until_listed(&c, admin, &["10.203.0.4:8080"])
        .await
        .is_some());
    slices
        .delete("web-b", &DeleteParams::default())
        .await
        .unwrap();
    assert!(until_listed(&c, admin, &[]).await.is_some());
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 503);
    proxy.shutdown().await;
    drop(api);
}

#[test]
fn the_k8s_namer_names_its_keys() {
    let yaml = |namer: &str| {
        format!(
            "servers: [{{ip: 127.0.0.1, port: 0}}]\nservices:\n  - name: web\n    namer: {namer}\n"
        )
    };
    let cfg = tailguard_proxy::yaml::parse(&yaml(
        "{kind: io.l5d.k8s, namespace: shop, service: web, port: 8080}",
    ))
    .unwrap();
    assert_eq!(
        cfg.services[0].discovery,
        Discovery::Kubernetes {
            namespace: Some("shop".into()),
            service: "web".into(),
            port: PortRef::Number(8080),
        }
    );
    let cfg = tailguard_proxy::yaml::parse(&yaml("{kind: io.l5d.k8s, service: web, port: http}"))
        .unwrap();
    assert!(matches!(
        &cfg.services[0].discovery,
        Discovery::Kubernetes { namespace: None, port: PortRef::Name(p), .. } if p == "http"
    ));
    let err = tailguard_proxy::yaml::parse(&yaml("{kind: io.l5d.k8s, port: http}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("namer.service"), "{err}");
    let err = tailguard_proxy::yaml::parse(&yaml("{kind: io.l5d.k8s, service: web}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("namer.port"), "{err}");
}

impl ApiServer {
    /// Stops the API server process and starts it again with the same command line (etcd, and
    /// so every object, stays); returns once it answers `/readyz` again.
    fn restart(&self) {
        let pids = std::fs::read_to_string(self.dir.join("pids")).unwrap();
        let etcd = pids.lines().next().unwrap().to_owned();
        let api: u32 = pids.lines().nth(1).unwrap().trim().parse().unwrap();
        let cmdline = std::fs::read(format!("/proc/{api}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let _ = std::process::Command::new("kill")
            .arg(api.to_string())
            .status();
        let gone = tailguard_testsupport::Deadline::after(Duration::from_secs(10));
        while Path::new(&format!("/proc/{api}")).exists() && !gone.passed() {
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::File::create(self.dir.join("apiserver-2.log")).unwrap();
        let child = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        std::fs::write(self.dir.join("pids"), format!("{etcd}\n{}\n", child.id())).unwrap();
        *self.restarted.lock().unwrap() = Some(child);
        let ready = tailguard_testsupport::Deadline::after(Duration::from_secs(60));
        loop {
            let ok = std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(self.kubeconfig())
                .args(["get", "--raw", "/readyz"])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return;
            }
            assert!(!ready.passed(), "the API server did not come back");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: a real kube-apiserver and etcd"]
async fn discovery_survives_an_api_server_restart() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let api = ApiServer::start();
    let (slices, proxy) = watching(&api, PortRef::Number(8080)).await;
    let admin = proxy.admin_addr().unwrap();
    let c = client(false);
    let pp = PostParams::default();
    slices
        .create(&pp, &slice("web-a", "web", &[("10.203.0.2", true)]))
        .await
        .unwrap();
    assert!(until_listed(&c, admin, &["10.203.0.2:8080"])
        .await
        .is_some());
    tokio::task::block_in_place(|| api.restart());
    // While it was away the proxy kept its endpoints; the watch resumes after the restart.
    assert_eq!(listed(&c, admin).await, ["10.203.0.2:8080"]);
    let kube = Client::try_default().await.unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(kube, "default");
    slices
        .create(&pp, &slice("web-b", "web", &[("10.203.0.3", true)]))
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let ok = support::eventually(Duration::from_secs(5), async || {
        listed(&c, admin).await == ["10.203.0.2:8080", "10.203.0.3:8080"]
    })
    .await;
    assert!(ok, "the watch never resumed");
    eprintln!("resumed {:?} after the restart", start.elapsed());
    proxy.shutdown().await;
    drop(api);
}

#[test]
fn the_manifests_proxy_configuration_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s/proxy-config.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let cfg = tailguard_proxy::yaml::parse(&text).unwrap();
    assert!(matches!(
        cfg.services[0].discovery,
        Discovery::Kubernetes { .. }
    ));
    assert!(cfg.services[0].arm.hedge.is_some());
}

/// The /24 of the traffic test's namespace; no other test uses it.
const NET: &str = "10.203.77";

/// Runs `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2) runs");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace joined to the root one by a veth pair: `NET.1` on the root side;
/// `NET.2`, `.3` and `.4` inside. Both are removed when dropped, a failed test included.
struct Netns {
    name: String,
    veth: String,
}

impl Netns {
    fn create() -> Netns {
        let pid = std::process::id();
        // Interface names have 15 bytes at most; a pid has 7 digits at most.
        let ns = Netns {
            name: format!("tg-k8s-{pid}"),
            veth: format!("tgk{pid}a"),
        };
        ns.remove();
        let net = format!("{NET}.0/24");
        let taken = Command::new("ip")
            .args(["-o", "-4", "addr", "show", "to", &net])
            .output()
            .expect("ip (iproute2) runs");
        assert!(
            taken.stdout.is_empty(),
            "{net} is already in use (left by a killed run?): {}",
            String::from_utf8_lossy(&taken.stdout)
        );
        let peer = format!("tgk{pid}b");
        ip(&["netns", "add", &ns.name]);
        ip(&[
            "link", "add", &ns.veth, "type", "veth", "peer", "name", &peer, "netns", &ns.name,
        ]);
        ip(&["addr", "add", &format!("{NET}.1/24"), "dev", &ns.veth]);
        ip(&["link", "set", &ns.veth, "up"]);
        for host in 2..=4 {
            let addr = format!("{NET}.{host}/24");
            ip(&["-n", &ns.name, "addr", "add", &addr, "dev", &peer]);
        }
        ip(&["-n", &ns.name, "link", "set", &peer, "up"]);
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Removes the veth pair (deleting one end deletes both) and the namespace, if present.
    fn remove(&self) {
        for args in [["link", "del", &self.veth], ["netns", "del", &self.name]] {
            let _ = Command::new("ip")
                .args(args)
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    /// Listeners bound to `addrs` inside the namespace, nonblocking (for tokio).
    fn bind(&self, addrs: &[SocketAddr]) -> Vec<std::net::TcpListener> {
        let path = format!("/var/run/netns/{}", self.name);
        let addrs = addrs.to_vec();
        // setns moves only the calling thread, so a thread of its own; a socket stays in the
        // namespace it was created in after the thread ends.
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap();
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            addrs
                .iter()
                .map(|a| {
                    let l = std::net::TcpListener::bind(a).unwrap();
                    l.set_nonblocking(true).unwrap();
                    l
                })
                .collect()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.remove();
    }
}

/// HTTP backends, each answering with its own address as the body and counting its requests.
struct Backends(Vec<(String, Arc<AtomicU64>)>);

impl Backends {
    fn serve(listeners: Vec<std::net::TcpListener>) -> Backends {
        let mut backends = Vec::new();
        for l in listeners {
            let name = l.local_addr().unwrap().to_string();
            let hits = Arc::new(AtomicU64::new(0));
            let listener = tokio::net::TcpListener::from_std(l).unwrap();
            let (body, count) = (bytes::Bytes::from(name.clone()), Arc::clone(&hits));
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (body, count) = (body.clone(), Arc::clone(&count));
                    let svc = hyper::service::service_fn(move |_req| {
                        count.fetch_add(1, Ordering::SeqCst);
                        let full = http_body_util::Full::new(body.clone());
                        async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(full)) }
                    });
                    tokio::spawn(tailguard_http::server::serve_connection(stream, svc));
                }
            });
            backends.push((name, hits));
        }
        Backends(backends)
    }

    /// Requests each backend has received so far, by address.
    fn hits(&self) -> BTreeMap<String, u64> {
        self.0
            .iter()
            .map(|(name, hits)| (name.clone(), hits.load(Ordering::SeqCst)))
            .collect()
    }

    /// Sends `n` GETs through `proxy`, one after another, each of which must be answered 200;
    /// returns the addresses of the backends that received any of them. What each backend
    /// received must be what came back from it, so no request went elsewhere unseen.
    async fn reached(&self, c: &HttpClient, proxy: SocketAddr, n: u64) -> Vec<String> {
        let before = self.hits();
        let mut answered: BTreeMap<String, u64> = BTreeMap::new();
        for _ in 0..n {
            let (status, _, body) = send(c, proxy, "GET", "/").await;
            assert_eq!(status, 200, "{body:?}");
            *answered
                .entry(String::from_utf8(body.to_vec()).unwrap())
                .or_default() += 1;
        }
        let received: BTreeMap<String, u64> = self
            .hits()
            .into_iter()
            .map(|(name, hits)| (name.clone(), hits - before[&name]))
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(received, answered, "received by the backends vs answered");
        received.into_keys().collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: a real kube-apiserver and etcd"]
async fn requests_follow_the_slices_to_backends_in_a_namespace() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let net = Netns::create();
    let ips = [2, 3, 4].map(|h| format!("{NET}.{h}"));
    // The namespace is this test's own, so the slices' port 8080 is free there.
    let names = ips.clone().map(|ip| format!("{ip}:8080"));
    let addrs: Vec<SocketAddr> = names.iter().map(|n| n.parse().unwrap()).collect();
    let backends = Backends::serve(net.bind(&addrs));
    // The veth may not carry the first SYN yet; the kernel resends it within a second or two.
    for a in &addrs {
        let conn = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(a));
        assert!(
            matches!(conn.await, Ok(Ok(_))),
            "{a} is not reachable from the root namespace"
        );
    }
    let [ip2, ip3, ip4] = [&ips[0], &ips[1], &ips[2]].map(String::as_str);
    let [two, three, four] = [&names[0], &names[1], &names[2]].map(String::as_str);

    let api = ApiServer::start();
    let (slices, proxy) = watching(&api, PortRef::Name("http".into())).await;
    let admin = proxy.admin_addr().unwrap();
    let c = client(false);
    let pp = PostParams::default();
    let web = slice("web-a", "web", &[(ip2, true), (ip3, true), (ip4, true)]);
    slices.create(&pp, &web).await.unwrap();
    assert!(until_listed(&c, admin, &[two, three, four]).await.is_some());
    assert_eq!(
        backends.reached(&c, proxy.addr(), 30).await,
        [two, three, four]
    );

    // Terminating (serving, not ready): once /endpoints drops it, no request reaches it.
    let mut web = slices.get("web-a").await.unwrap();
    web.endpoints = slice("x", "web", &[(ip2, true), (ip3, false), (ip4, true)]).endpoints;
    let cond = web.endpoints[1].conditions.clone().unwrap();
    assert_eq!(
        (cond.ready, cond.serving, cond.terminating),
        (Some(false), Some(true), Some(true))
    );
    slices.replace("web-a", &pp, &web).await.unwrap();
    assert!(until_listed(&c, admin, &[two, four]).await.is_some());
    assert_eq!(backends.reached(&c, proxy.addr(), 30).await, [two, four]);

    // Scaled down to one endpoint: it gets every request.
    let mut web = slices.get("web-a").await.unwrap();
    web.endpoints = slice("x", "web", &[(ip4, true)]).endpoints;
    slices.replace("web-a", &pp, &web).await.unwrap();
    assert!(until_listed(&c, admin, &[four]).await.is_some());
    assert_eq!(backends.reached(&c, proxy.addr(), 20).await, [four]);

    // Deleted: no endpoint left, the proxy answers 503 itself.
    slices
        .delete("web-a", &DeleteParams::default())
        .await
        .unwrap();
    assert!(until_listed(&c, admin, &[]).await.is_some());
    let before = backends.hits();
    assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 503);
    assert_eq!(backends.hits(), before);
    proxy.shutdown().await;
    drop(api);
}

/// A namer without `namespace` watches the client's own: the kubeconfig context's namespace
/// (here `shop`), as `kubectl` would. No API server is needed to read it.
#[tokio::test]
async fn without_a_namespace_the_kubeconfig_contexts_is_used() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = std::env::temp_dir().join(format!("tailguard-k8s-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: k, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: c, context: {cluster: k, user: u, namespace: shop}}]\n",
    )
    .unwrap();
    std::env::set_var("KUBECONFIG", &path);
    let (client, from) = tailguard_proxy::k8s::client().await.unwrap();
    assert_eq!(client.default_namespace(), "shop");
    assert!(from.contains("kubeconfig"), "{from}");
    std::env::remove_var("KUBECONFIG");
    std::fs::remove_dir_all(&dir).unwrap();
}
