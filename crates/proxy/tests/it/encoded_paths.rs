//! Encoded slashes and backslashes in paths (`limits.escapedSlashes`): a backend that decodes
//! `%2F` before matching (nginx does) must never see a path that escapes the prefix the proxy
//! routed by. By default such a path is refused with 400; `unescapeAndForward` routes and
//! forwards the decoded path; `keepUnchanged` is the old behaviour, shown here against nginx
//! to say why it is not the default. Backends on 127.0.0.1.

use crate::support;

use std::net::SocketAddr;
use support::peers::{run, tool, Nginx};
use support::AsUpstream;
use tailguard_proxy::config::{Config, EscapedSlashes, ServiceConfig, Upstream};
use tailguard_testsupport::TestServer;

/// The attacks on a service under `/api`, each meaning `/secret` once decoded.
const ATTACKS: [&str; 5] = [
    "/api/..%2fsecret",
    "/api/..%2Fsecret",
    "/api/%2e%2e%2fsecret",
    "/api/..%5csecret",
    "/api/..\\secret",
];

/// `GET path` with `Host: api` on a new HTTP/1.1 connection, written raw (a client library
/// would refuse the backslash); the status (0: none).
async fn status(addr: SocketAddr, path: &str) -> u16 {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n");
    let resp = support::exchange(addr, raw.as_bytes()).await;
    support::status_of(&resp).parse().unwrap_or(0)
}

/// A proxy with `api` (prefix `/api`) and `rest` (everything else) under `rule`.
fn two_services(api: Upstream, rest: Upstream, rule: EscapedSlashes) -> Config {
    let mut a = ServiceConfig::new("api", vec![api]);
    a.path_prefix = Some("/api".into());
    let mut config = support::config(a);
    config.services.push(ServiceConfig::new("rest", vec![rest]));
    config.limits.escaped_slashes = rule;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_slashes_are_refused_decoded_or_kept_as_configured() {
    let (api, rest) = (TestServer::start().await, TestServer::start().await);
    for rule in [
        EscapedSlashes::Reject,
        EscapedSlashes::UnescapeAndForward,
        EscapedSlashes::KeepUnchanged,
    ] {
        let config = two_services(api.upstream(), rest.upstream(), rule);
        let proxy = tailguard_proxy::start(config).await.unwrap();
        let (api_before, rest_before) = (api.hits(), rest.hits());
        for path in ATTACKS {
            let want = match rule {
                EscapedSlashes::Reject => 400,
                _ => 200,
            };
            assert_eq!(status(proxy.addr(), path).await, want, "{rule:?} {path}");
        }
        let n = ATTACKS.len() as u64;
        let (to_api, to_rest) = (api.hits() - api_before, rest.hits() - rest_before);
        let want = match rule {
            EscapedSlashes::Reject => (0, 0),
            // Decoded, each is `/secret`: the service that owns `/secret` gets it.
            EscapedSlashes::UnescapeAndForward => (0, n),
            // Kept, each is routed into `/api` as it came.
            EscapedSlashes::KeepUnchanged => (n, 0),
        };
        assert_eq!((to_api, to_rest), want, "{rule:?}");
        // Plain paths are untouched by any rule.
        assert_eq!(status(proxy.addr(), "/api/a%20b").await, 200);
        proxy.shutdown().await;
    }
}

/// curl's status for `path` through `proxy` (`--path-as-is`: no client-side normalisation).
fn curl_status(proxy: SocketAddr, path: &str, h2: bool) -> String {
    let curl = tool("curl", "curl");
    let url = format!("http://{proxy}{path}");
    let version = if h2 {
        "--http2-prior-knowledge"
    } else {
        "--http1.1"
    };
    let args = [
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--path-as-is",
        version,
        "-H",
        "Host: api",
        &url,
    ];
    run(&curl, &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: nginx and curl"]
async fn nginx_behind_the_proxy_never_sees_a_path_outside_the_prefix() {
    let nginx = Nginx::with_locations(
        "location /api/ { default_type text/plain; return 200 \"api\\n\"; }\n    \
         location /secret { default_type text/plain; return 200 \"secret\\n\"; }",
    );
    let mut api = ServiceConfig::new("api", vec![Upstream::new(nginx.addr)]);
    api.path_prefix = Some("/api".into());
    // Direct, nginx decodes `%2f` and resolves the dots: the bypass this test guards against.
    assert_eq!(
        curl_status(nginx.addr, "/api/..%2fsecret", false),
        "200",
        "nginx decodes %2f"
    );
    let curl_paths = [
        "/api/..%2fsecret",
        "/api/%2e%2e%2fsecret",
        "/api/..%5csecret",
    ];
    for (rule, want) in [
        (EscapedSlashes::Reject, "400"),
        // Decoded to `/secret`, which no service owns here.
        (EscapedSlashes::UnescapeAndForward, "404"),
    ] {
        let mut config = support::config(api.clone());
        config.limits.escaped_slashes = rule;
        let proxy = tailguard_proxy::start(config).await.unwrap();
        for path in curl_paths {
            for h2 in [false, true] {
                let got = curl_status(proxy.addr(), path, h2);
                assert_eq!(got, want, "{rule:?} {path} h2={h2}");
            }
        }
        assert_eq!(curl_status(proxy.addr(), "/api/x", true), "200");
        proxy.shutdown().await;
    }
}
