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

use http::header::{
    HeaderName, HeaderValue, CONNECTION, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE, VIA,
};
use http::{HeaderMap, Version};
use std::net::IpAddr;

const HOP_BY_HOP: [HeaderName; 8] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
];

/// Removes hop-by-hop headers, including those named by `Connection`. `TE: trailers` is kept:
/// gRPC needs it end to end.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one pass over the few names present, no lookups.
    let any = headers.keys().any(|k| *k == TE || HOP_BY_HOP.contains(k));
    if !any {
        return;
    }
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
    for name in &HOP_BY_HOP {
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

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The client's address as a header value, made once per connection.
pub fn client_value(client: IpAddr) -> HeaderValue {
    HeaderValue::from_str(&client.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Appends the client's address to `X-Forwarded-For`.
pub fn add_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    append_forwarded_for(headers, &client_value(client));
}

/// Appends `client` (from [`client_value`]) to `X-Forwarded-For`; a copy of it when the
/// request has none (no formatting per request).
pub fn append_forwarded_for(headers: &mut HeaderMap, client: &HeaderValue) {
    let prev = headers.get(&X_FORWARDED_FOR).map(HeaderValue::as_bytes);
    let value = match prev {
        None => client.clone(),
        Some(prev) => {
            let mut joined = Vec::with_capacity(prev.len() + 2 + client.len());
            joined.extend_from_slice(prev);
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(client.as_bytes());
            match HeaderValue::from_bytes(&joined) {
                Ok(v) => v,
                Err(_) => return,
            }
        }
    };
    headers.insert(X_FORWARDED_FOR, value);
}
