//! gRPC reflection with real clients: ghz and grpcurl find `tailguard serve`'s services and
//! messages with no `.proto` at hand, directly and through the proxy (reflection is a
//! bidirectional stream the proxy passes through like any call).

use crate::support;

use support::peers::run;
use tailguard_proxy::config::{ServiceConfig, Upstream};
use tailguard_testsupport::process::go_tool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: ghz and grpcurl (go install)"]
async fn ghz_and_grpcurl_need_no_proto_directly_or_through_the_proxy() {
    let ghz = go_tool("ghz", "github.com/bojand/ghz/cmd/ghz@v0.93.0");
    let grpcurl = go_tool(
        "grpcurl",
        "github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3",
    );
    let running = support::fleet("backends: [{name: a, latency: 0s}]").await;
    let backend = running.backends()[0].1;
    let proxy = support::start(ServiceConfig::new("ping", vec![Upstream::new(backend)])).await;
    for addr in [backend, proxy.addr()] {
        let target = addr.to_string();
        // The commands of proto/README.md and docs/serve.md, as written.
        let listed =
            tokio::task::block_in_place(|| run(&grpcurl, &["-plaintext", &target, "list"]));
        for service in [
            "tailguard.serve.v1.Ping",
            "fgrpc.PingServer",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
        ] {
            assert!(listed.lines().any(|l| l == service), "{target}: {listed}");
        }
        let answer = tokio::task::block_in_place(|| {
            run(
                &grpcurl,
                &[
                    "-plaintext",
                    "-d",
                    r#"{"payload":"aGk="}"#,
                    &target,
                    "tailguard.serve.v1.Ping/Ping",
                ],
            )
        });
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["payload"], "aGk=", "{answer}");
        assert_eq!(answer["backend"], "a", "{answer}");
        let described = tokio::task::block_in_place(|| {
            run(
                &grpcurl,
                &["-plaintext", &target, "describe", "fgrpc.PingMessage"],
            )
        });
        assert!(described.contains("int64 delayNanos = 4;"), "{described}");
        let report = tokio::task::block_in_place(|| {
            run(
                &ghz,
                &[
                    "--insecure",
                    "--call",
                    "tailguard.serve.v1.Ping/Ping",
                    "-d",
                    r#"{"payload":"aGk="}"#,
                    "-n",
                    "200",
                    "--format",
                    "json",
                    &target,
                ],
            )
        });
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert_eq!(report["count"], 200, "{target}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 200,
            "{target}: {report}"
        );
    }
    proxy.shutdown().await;
}
