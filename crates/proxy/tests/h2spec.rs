//! h2spec (the HTTP/2 conformance suite, from the Go module proxy) against the proxy's listener,
//! in front of a `serve` backend over HTTP/2: every one of its 145 cases must pass, the
//! invalid connection preface (3.5/2) included.

mod support;

use std::process::Command;
use std::time::Duration;
use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::process::{go_tool, output_within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: h2spec (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)"]
async fn the_proxy_passes_every_h2spec_case() {
    let h2spec = go_tool(
        "h2spec",
        "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible",
    );
    // A body of at least 5 bytes (the name and a newline), or h2spec skips 6.9.2/2.
    let backend = support::fleet("backends: [{name: conformance, latency: 0s}]").await;
    let mut service = ServiceConfig::new("web", vec![Upstream::new(backend.backends()[0].1)]);
    service.protocol = UpstreamProtocol::Http2;
    let proxy = support::start(service).await;
    let port = proxy.addr().port().to_string();
    let mut cmd = Command::new(h2spec);
    cmd.args(["-h", "127.0.0.1", "-p", &port, "-o", "5"]);
    let (status, out, err) =
        tokio::task::spawn_blocking(move || output_within(cmd, Duration::from_secs(120)))
            .await
            .unwrap();
    let summary = out.lines().last().unwrap_or_default().to_owned();
    assert!(
        status.is_some_and(|s| s.success()),
        "h2spec failed: {summary}\n{}\n{err}",
        out.split("Failures:").nth(1).unwrap_or_default()
    );
    assert_eq!(
        summary, "145 tests, 145 passed, 0 skipped, 0 failed",
        "{out}"
    );
    proxy.shutdown().await;
}
