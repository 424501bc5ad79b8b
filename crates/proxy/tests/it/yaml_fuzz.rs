//! Arbitrary configuration files: a configuration or an error naming what is wrong, never a
//! panic, each case within a generous time bound (a reload must not stall).

use proptest::prelude::*;
use std::time::Duration;
use tailguard_proxy::yaml;

/// Far above what any case takes (milliseconds): a case near it is a hang in the making.
const CASE_BOUND: Duration = Duration::from_secs(2);

/// Runs `f`, failing when it takes [`CASE_BOUND`] or longer.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    tailguard_fuzzkit::timed(CASE_BOUND, f)
}

/// Most of the format: two services, every client and service key.
const FULL: &str = "\
admin: {ip: 127.0.0.1, port: 9990}
servers: [{ip: 127.0.0.1, port: 4140}]
limits: {headerReadTimeoutMs: 10000, maxConnections: 10000, drainMs: 10000}
services:
  - name: web
    hosts: [web, web.example]
    pathPrefix: /
    upstreams: [127.0.0.1:9001, \"127.0.0.1:9002 2\"]
    protocol: auto
    rewriteHost: web.internal
    retryBufferBytes: 65536
    maxConcurrentRequests: 1000
    requestBodyIdleTimeoutMs: 60000
    requestBodyMinBytesPerSec: 240
    responseBodyIdleTimeoutMs: 60000
    responseClassifier: {kind: io.l5d.http.retryableRead5XX}
    client:
      loadBalancer: {kind: ewma, decayTimeMs: 10000, defaultRttMs: 30}
      failureAccrual:
        kind: io.l5d.successRate
        successRate: 0.9
        requests: 20
        backoff: {kind: constant, ms: 10000}
      requestAttemptTimeoutMs: 1000
      connectTimeoutMs: 1000
      failurePenaltyMs: 1000
      hostConnectionPool: {maxSize: 100, maxWaitMs: 1000, idleTimeMs: 90000}
    service:
      totalTimeoutMs: 3000
      retries:
        budget: {minRetriesPerSec: 10, percentCanRetry: 0.2, ttlSecs: 10}
        backoff: {kind: constant, ms: 0}
        maxRetries: 3
      hedge: {maxExtraLoad: 0.05, minPerSec: 0, windowMs: 10000, minSamples: 100, minDelayMs: 1}
  - name: api
    hosts: ['*']
    namer: {kind: io.l5d.dns, name: \"api.internal:8080\", server: \"127.0.0.1:53\", intervalMs: 5000}
    responseClassifier: {kind: io.l5d.h2.grpc.retryableStatusCodes, retryableStatusCodes: [14]}
    client: {loadBalancer: {kind: bestOf, choices: 3, load: ewma}}
";

/// This parser's own tricky values, besides the shared ones (`tailguard_fuzzkit::TRICKY`).
const EXTRA: &[&str] = &["300.0.0.1:80", "[::1]:0", "/dev/zero"];

/// `doc` with a few lines changed (the shared mutations, with this parser's tricky values).
fn mutated(doc: &'static str) -> impl Strategy<Value = String> {
    tailguard_fuzzkit::mutated(doc, EXTRA)
}

#[test]
fn the_seed_file_parses() {
    let config = yaml::parse(FULL).unwrap();
    assert_eq!(config.services.len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(30_000))]

    #[test]
    fn any_configuration_is_a_configuration_or_an_error(
        text in prop_oneof![4 => mutated(FULL), 1 => "\\PC{0,300}"]
    ) {
        let result = timed(|| yaml::parse(&text));
        if let Err(e) = result {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}
