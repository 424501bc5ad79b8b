//! h2spec (the HTTP/2 conformance suite, from the Go module proxy) against the proxy's listener,
//! in front of a `serve` backend over HTTP/2: every one of its 145 cases must pass, the
//! invalid connection preface (3.5/2) included.

use crate::support;

use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: h2spec (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)"]
async fn the_proxy_passes_every_h2spec_case() {
    // A body of at least 5 bytes (the name and a newline), or h2spec skips 6.9.2/2.
    let backend = support::fleet("backends: [{name: conformance, latency: 0s}]").await;
    let mut service = ServiceConfig::new("web", vec![Upstream::new(backend.backends()[0].1)]);
    service.protocol = UpstreamProtocol::Http2;
    let proxy = support::start(service).await;
    tailguard_testsupport::process::h2spec_passes(proxy.addr().port()).await;
    proxy.shutdown().await;
}
