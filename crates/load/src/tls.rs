//! TLS client setup (rustls): ALPN for HTTP/2, and an opt-in verifier that accepts any
//! certificate for self-signed test servers (`--insecure`).

use crate::config::Protocol;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use tailguard_http::tls::{web_roots, AcceptAny};
use tailguard_record::ErrorKind;

/// A connector offering ALPN protocols per `protocol`.
pub(crate) fn connector(protocol: Protocol, insecure: bool) -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(web_roots())
            .with_no_client_auth()
    };
    config.alpn_protocols = match protocol {
        Protocol::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        Protocol::Http1 => vec![b"http/1.1".to_vec()],
        Protocol::Http2 => vec![b"h2".to_vec()],
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// The TLS server name of a host (a DNS name or an IP address).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, ErrorKind> {
    ServerName::try_from(host.to_string()).map_err(|_| ErrorKind::Tls)
}
