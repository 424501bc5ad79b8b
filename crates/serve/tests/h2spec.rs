//! h2spec (the HTTP/2 conformance suite, from the Go module proxy) against a `serve` backend:
//! every one of its 145 cases must pass.

mod common;

use common::{addr, serve};
use std::process::Command;
use std::time::Duration;
use tailguard_testsupport::process::{go_tool, output_within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: h2spec (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)"]
async fn serve_passes_every_h2spec_case() {
    let h2spec = go_tool(
        "h2spec",
        "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible",
    );
    // A body of at least 5 bytes (the name and a newline), or h2spec skips 6.9.2/2.
    let running = serve("backends: [{name: conformance, latency: 0s}]").await;
    let port = addr(&running, 0).port().to_string();
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
}
