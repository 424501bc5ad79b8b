//! The configuration file, with keys a Linkerd 1 user recognises, parsed once into
//! [`Config`] and validated; every error names its key.
//!
//! ```yaml
//! admin: {ip: 127.0.0.1, port: 9990}
//! servers: [{ip: 127.0.0.1, port: 4140}]    # + tls: {certPath: cert.pem, keyPath: key.pem}
//! limits: {headerReadTimeoutMs: 10000, maxConnections: 10000, drainMs: 10000}
//! services:
//!   - name: web
//!     hosts: [web, web.example]          # `*`: any host
//!     pathPrefix: /                      # optional
//!     upstreams: [127.0.0.1:9001, "127.0.0.1:9002 2"]   # or a namer:
//!     # namer: {kind: io.l5d.fs, path: /etc/tailguard/web.txt, intervalMs: 1000}
//!     # namer: {kind: io.l5d.dns, name: "web.internal:8080", server: "127.0.0.1:53", intervalMs: 5000}
//!     # namer: {kind: io.l5d.dnssrv, name: _http._tcp.web.internal}
//!     # namer: {kind: io.l5d.k8s, service: web, port: http}   # EndpointSlices
//!     protocol: auto                     # auto (follow the client, default) | http1 | h2
//!     rewriteHost: web.internal          # default: keep the client's Host
//!     retryBufferBytes: 65536
//!     maxConcurrentRequests: 1000
//!     requestBodyIdleTimeoutMs: 60000     # 0: no limit
//!     requestBodyMinBytesPerSec: 240      # after 5 s; 0: no minimum; gRPC exempt
//!     responseBodyIdleTimeoutMs: 60000    # 0: no limit
//!     responseClassifier: {kind: io.l5d.http.retryableRead5XX}
//!     client:
//!       loadBalancer: {kind: ewma, decayTimeMs: 10000, defaultRttMs: 30}
//!       failureAccrual:
//!         kind: io.l5d.successRate
//!         successRate: 0.9
//!         requests: 20
//!         backoff: {kind: constant, ms: 10000}
//!       requestAttemptTimeoutMs: 1000
//!       connectTimeoutMs: 1000             # the default
//!       failurePenaltyMs: 1000             # the default; 0: a failure costs its own rtt
//!       hostConnectionPool: {maxSize: 100, maxWaitMs: 1000, idleTimeMs: 90000}
//!     service:
//!       totalTimeoutMs: 3000
//!       retries:
//!         budget: {minRetriesPerSec: 10, percentCanRetry: 0.2, ttlSecs: 10}
//!         backoff: {kind: constant, ms: 0}
//!         maxRetries: 3
//!       hedge: {maxExtraLoad: 0.05, minPerSec: 0, windowMs: 10000, minSamples: 100, minDelayMs: 1, maxDelayMs: 500}
//! ```
//! Balancers: `roundRobin`, `random`, `p2c` (least loaded), `ewma` (P2C peak EWMA),
//! `heap`, `aperture`, `bestOf` (`choices`, `load: leastLoaded | ewma`). Accrual:
//! `io.l5d.consecutiveFailures` (`failures`), `io.l5d.successRate` (`successRate`,
//! `requests`), `io.l5d.successRateWindowed` (`successRate`, `window` seconds), `none`.
//! Backoffs: `constant` (`ms`), `jittered` (`minMs`, `maxMs`), `exponential`, `fullJittered`.
//! Classifiers: `io.l5d.http.nonRetryable5XX`, `io.l5d.http.retryableRead5XX` (default),
//! `io.l5d.http.retryableIdempotent5XX` (the `io.l5d.http.` or `io.l5d.h2.` prefix is
//! optional); for gRPC calls `io.l5d.h2.grpc.default` (UNAVAILABLE is retryable; what every
//! HTTP classifier implies for gRPC), `io.l5d.h2.grpc.neverRetryable`,
//! `io.l5d.h2.grpc.alwaysRetryable` and `io.l5d.h2.grpc.retryableStatusCodes` (with
//! `retryableStatusCodes: [14, ...]`). A gRPC classifier keeps the HTTP default for non-gRPC
//! requests.

mod convert;
mod error;
mod file;

use crate::config::Config;
use crate::config_file::{self, FileError, Problem};
use std::path::Path;

pub use convert::{balancer_kind, into_config, BALANCER_KINDS};
pub use error::{YamlError, MAX_BYTES, MAX_FLOW_DEPTH};
pub use file::File;

/// Refuses text too large or too deeply nested to parse quickly: the check every YAML
/// document of tailguard passes ([`tailguard_text::yaml::check_shape`]), with this file's errors.
fn check_shape(text: &str) -> Result<(), YamlError> {
    use tailguard_text::yaml::ShapeError;
    tailguard_text::yaml::check_shape(text).map_err(|e| match e {
        ShapeError::TooLarge(_) => YamlError::TooLarge,
        ShapeError::TooDeep { line } => YamlError::TooDeep { line },
    })
}

/// Reads ([`config_file::read`]: a regular file only, bounded in size and time), parses and
/// validates a configuration file.
///
/// # Errors
/// [`YamlError`] naming the key at fault.
pub fn load(path: &Path) -> Result<Config, YamlError> {
    let bytes = match config_file::read(path, MAX_BYTES) {
        Err(FileError {
            problem: Problem::TooLarge(_),
            ..
        }) => return Err(YamlError::TooLarge),
        read => read?,
    };
    let text = String::from_utf8(bytes).map_err(|_| FileError {
        path: path.display().to_string(),
        problem: Problem::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8 text",
        )),
    })?;
    parse_named(&text, &path.display().to_string())
}

/// Parses and validates configuration text.
///
/// # Errors
/// [`YamlError`] naming the key at fault; [`YamlError::TooLarge`] and
/// [`YamlError::TooDeep`] before parsing.
pub fn parse(text: &str) -> Result<Config, YamlError> {
    parse_named(text, "configuration")
}

/// [`parse`], naming `origin` (the file) in positioned errors.
fn parse_named(text: &str, origin: &str) -> Result<Config, YamlError> {
    check_shape(text)?;
    let file: File = tailguard_text::yaml::from_yaml(text, origin)?;
    let config = into_config(file)?;
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests;
