//! Proxy hygiene (RFC 9110 section 7.6): hop-by-hop headers are removed in both directions,
//! `Via` is added, and the client's address is appended to `X-Forwarded-For`.
//!
//! # Example
//! ```
//! use http::HeaderMap;
//! let mut h = HeaderMap::new();
//! h.insert("connection", "close, x-secret".parse().unwrap());
//! h.insert("x-secret", "1".parse().unwrap());
//! h.insert("keep-alive", "timeout=5".parse().unwrap());
//! h.insert("accept", "*/*".parse().unwrap());
//! tailguard_proxy::hygiene::strip_hop_by_hop(&mut h);
//! assert_eq!(h.len(), 1);
//! ```

use http::header::{HeaderName, HeaderValue, CONNECTION, TE, VIA};
use http::{HeaderMap, Version};
use std::net::IpAddr;

const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes hop-by-hop headers, including those named by `Connection`. `TE: trailers` is kept:
/// gRPC needs it end to end.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    let trailers_only = headers
        .get(TE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    if !trailers_only {
        headers.remove(TE);
    }
}

/// Appends this hop to `Via`.
pub fn add_via(headers: &mut HeaderMap, version: Version) {
    let hop = match version {
        Version::HTTP_2 => "2 tailguard",
        Version::HTTP_10 => "1.0 tailguard",
        _ => "1.1 tailguard",
    };
    headers.append(VIA, HeaderValue::from_static(hop));
}

/// Appends the client's address to `X-Forwarded-For`.
pub fn add_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    let name = HeaderName::from_static("x-forwarded-for");
    let value = match headers.get(&name).and_then(|v| v.to_str().ok()) {
        Some(prev) => format!("{prev}, {client}"),
        None => client.to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(name, v);
    }
}
