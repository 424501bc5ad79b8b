//! h2spec (the HTTP/2 conformance suite, from the Go module proxy) against a `serve` backend:
//! every one of its 145 cases must pass.

use crate::common;

use common::{addr, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: h2spec (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)"]
async fn serve_passes_every_h2spec_case() {
    // A body of at least 5 bytes (the name and a newline), or h2spec skips 6.9.2/2.
    let running = serve("backends: [{name: conformance, latency: 0s}]").await;
    tailguard_testsupport::process::h2spec_passes(addr(&running, 0).port()).await;
}
