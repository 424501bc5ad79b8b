//! TLS on the proxy listener (rustls with the ring provider): the certificate chain and key
//! are read from PEM files once at start (and again on reload), and ALPN offers `h2` and
//! `http/1.1`, so HTTP/2 and HTTP/1.1 clients share one port as they do in cleartext.

use crate::config::TlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// ALPN protocols offered, in order of preference.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A certificate or key that cannot serve TLS; the message names the key and the file.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {path}: {reason}")]
pub struct TlsError {
    /// `servers[0].tls.certPath` or `servers[0].tls.keyPath` (`--tls-cert`, `--tls-key`).
    pub key: &'static str,
    /// The file.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

const CERT_KEY: &str = "servers[0].tls.certPath (--tls-cert)";
const KEY_KEY: &str = "servers[0].tls.keyPath (--tls-key)";

fn fail(key: &'static str, path: &Path, reason: impl ToString) -> TlsError {
    TlsError {
        key,
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// The largest PEM file read: 1 MiB, a chain of some hundreds of certificates.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Reads `tls`'s PEM files ([`crate::config_file`]: regular files only, bounded in size and
/// time) and builds the listener's acceptor; `None` (cleartext) without `tls`.
///
/// # Errors
/// [`TlsError`] when a file cannot be read, holds no certificate or key, or the key does not
/// match the certificate.
pub async fn acceptor(tls: Option<&TlsConfig>) -> Result<Option<TlsAcceptor>, TlsError> {
    let Some(tls) = tls else {
        return Ok(None);
    };
    let read = async |key, path: &Path| {
        crate::config_file::read_async(path, MAX_PEM_BYTES)
            .await
            .map_err(|e| fail(key, path, e.problem))
    };
    let cert_pem = read(CERT_KEY, &tls.cert).await?;
    let key_pem = read(KEY_KEY, &tls.key).await?;
    build(tls, &cert_pem, &key_pem).map(Some)
}

fn build(tls: &TlsConfig, cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsAcceptor, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(CERT_KEY, &tls.cert, e))?;
    if certs.is_empty() {
        return Err(fail(CERT_KEY, &tls.cert, "no PEM certificate found"));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| fail(KEY_KEY, &tls.key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(CERT_KEY, &tls.cert, e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| fail(KEY_KEY, &tls.key, e))?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The listener's current acceptor (`None`: cleartext), replaced by a reload.
pub struct Current(std::sync::RwLock<Option<TlsAcceptor>>);

impl Current {
    /// Starts with `acceptor`.
    pub fn new(acceptor: Option<TlsAcceptor>) -> Self {
        Self(std::sync::RwLock::new(acceptor))
    }

    /// The acceptor for the next connection.
    pub fn get(&self) -> Option<TlsAcceptor> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces it; connections already accepted keep theirs.
    pub fn set(&self, acceptor: Option<TlsAcceptor>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = acceptor;
    }
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on = self.0.read().map(|a| a.is_some()).unwrap_or(false);
        f.debug_struct("Current").field("tls", &on).finish()
    }
}
