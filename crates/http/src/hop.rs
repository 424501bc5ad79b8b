//! Which headers a `Connection` header may name, and so make hop-by-hop (RFC 9110 section
//! 7.6.1), one rule for every place that honours the names: the proxy's hygiene and the
//! `Upgrade: h2c` switch.
//!
//! Not the message's framing and host (`Host`, `Content-Length`, `Content-Type`, `TE`), nor a
//! header the proxy itself reads or adds (`Via`, `X-Forwarded-For`, `grpc-timeout`,
//! `grpc-status`, `grpc-message`, tailguard's own `x-tailguard-*`). A client that names them
//! (`Connection: Host, Content-Length`) would otherwise take the `Host` a request was routed
//! by away from the backend, or change how a body is framed after the proxy read it.
//!
//! # Example
//! ```
//! use tailguard_http::hop::may_be_named;
//! assert!(may_be_named("x-secret"));
//! assert!(!may_be_named("host") && !may_be_named("x-tailguard-timeout-ms"));
//! ```

/// The headers a `Connection` token may not name (module docs).
pub const END_TO_END: [&str; 9] = [
    "host",
    "content-length",
    "content-type",
    "te",
    "via",
    "x-forwarded-for",
    "grpc-timeout",
    "grpc-status",
    "grpc-message",
];

/// True when a `Connection` token naming `name` (lower case, as `http` keeps names) removes it.
pub fn may_be_named(name: &str) -> bool {
    !END_TO_END.contains(&name) && !name.starts_with("x-tailguard-")
}
