//! Real HTTP/2 clients through the proxy, with its default configuration, to a real nginx that
//! speaks HTTP/1.1 only (its default): curl `--http2-prior-knowledge` (GET, HEAD, a 256 KiB
//! POST) and h2load (Debian's `nghttp2-client`; thousands of multiplexed requests) see no
//! error, and nginx stays `alive` on `/endpoints`.
//!
//! The tools are required: a missing one fails the test naming its Debian package (`.ci/run`
//! installs them). Every process is bounded by `timeout` and killed when the test ends.

use crate::support;

use support::peers::{run, tool, Nginx};
use tailguard_proxy::config::{ServiceConfig, Upstream};

/// The numbers on h2load's `requests:` line: total, started, done, succeeded, failed,
/// errored, timeout.
fn h2load_requests(output: &str) -> Vec<u64> {
    let line = output
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no requests line in h2load output:\n{output}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: nginx, curl and h2load"]
async fn curl_and_h2load_over_http2_reach_an_http1_nginx_without_an_error() {
    let (curl, h2load) = (tool("curl", "curl"), tool("h2load", "nghttp2-client"));
    let nginx = Nginx::start();
    let service = ServiceConfig::new("web", vec![Upstream::new(nginx.addr)]);
    let proxy = support::start(service).await;
    let url = format!("http://{}/", proxy.addr());
    let body = std::env::temp_dir().join(format!("tailguard-h2-body-{}", nginx.addr.port()));
    std::fs::write(&body, vec![b'x'; 256 * 1024]).unwrap();
    let body_arg = format!("@{}", body.display());
    let out = tokio::task::spawn_blocking(move || {
        let write = "%{http_code} %{http_version}\n";
        let curl_get = run(
            &curl,
            &["-sS", "--http2-prior-knowledge", "-w", write, &url],
        );
        let curl_head = run(
            &curl,
            &[
                "-sS",
                "-I",
                "--http2-prior-knowledge",
                "-o",
                "/dev/null",
                "-w",
                write,
                &url,
            ],
        );
        let curl_post = run(
            &curl,
            &[
                "-sS",
                "--http2-prior-knowledge",
                "--data-binary",
                &body_arg,
                "-o",
                "/dev/null",
                "-w",
                write,
                &url,
            ],
        );
        let gets = run(&h2load, &["-n", "4000", "-c", "4", "-m", "16", &url]);
        let posts = run(
            &h2load,
            &[
                "-n",
                "200",
                "-c",
                "2",
                "-m",
                "4",
                "-d",
                &body_arg[1..],
                &url,
            ],
        );
        (curl_get, curl_head, curl_post, gets, posts)
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&body);
    let (curl_get, curl_head, curl_post, gets, posts) = out;
    assert_eq!(curl_get, "nginx\n200 2\n");
    assert_eq!(curl_head, "200 2\n");
    assert_eq!(curl_post, "200 2\n");
    for (output, n) in [(&gets, 4000), (&posts, 200)] {
        assert_eq!(h2load_requests(output), [n, n, n, n, 0, 0, 0], "{output}");
        let codes = format!("status codes: {n} 2xx, 0 3xx, 0 4xx, 0 5xx");
        assert!(output.contains(&codes), "{output}");
    }
    let c = support::client(false);
    let (_, _, endpoints) =
        support::send(&c, proxy.admin_addr().unwrap(), "GET", "/endpoints").await;
    let v: serde_json::Value = serde_json::from_slice(&endpoints).unwrap();
    assert_eq!(v["web"][0]["state"], "alive", "{v}");
    proxy.shutdown().await;
}
