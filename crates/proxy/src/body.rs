//! The body type the proxy forwards, both ways.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

/// A request or response body as the proxy forwards it.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// The error of a [`ProxyBody`]: hyper's, or the proxy's own (a client's or an upstream's body
/// fault, [`crate::request_body`], [`crate::response_body`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
