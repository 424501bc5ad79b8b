//! TLS to the endpoints (`client.tls`, Linkerd 1's keys): rustls with the ring provider.
//!
//! - The endpoint's certificate is checked against `trustCerts` (PEM CA files), or the Mozilla
//!   roots built into the binary when there are none, for the name `commonName` (sent as SNI
//!   too); without it, for the one host name the endpoints come from (`upstreams:
//!   [api.example.com:443]`, a DNS namer's name), else for the endpoint's IP address.
//! - `clientAuth` gives the proxy a certificate for endpoints that ask for one (mTLS).
//! - `disableValidation: true` accepts any certificate (signatures are still checked); the
//!   proxy says so on every start and reload.
//! - ALPN: the HTTP/1.1 pool offers `http/1.1` (and `h2` too under `protocol: auto`, where the
//!   endpoint's choice then decides, see [`super::Upstreams`]), the HTTP/2 pool offers `h2`.
//! - Sessions are resumed (rustls's in-memory cache of 256 per service), so a new connection
//!   to an endpoint seen before skips the certificate exchange.
//! - The files are read when the services are built: at start and on every reload (SIGHUP),
//!   so a reload swaps the CA or the client certificate; connections already open keep theirs.
//! - A failed handshake is the endpoint's fault, like a refused connection: the client gets a
//!   502 naming the cause (`invalid peer certificate: UnknownIssuer`, `NotValidForName`,
//!   `Expired`, `received fatal alert: CertificateRequired`), and `/endpoints` shows it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A service's TLS to its endpoints, as configured (`client.tls`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// The name sent as SNI and required in the endpoint's certificate (`commonName`);
    /// `None`: the endpoint's IP address.
    pub server_name: Option<String>,
    /// PEM files of the CAs the endpoint's chain must lead to (`trustCerts`); empty: the
    /// Mozilla roots built in.
    pub trust: Vec<PathBuf>,
    /// The proxy's own certificate, for endpoints that require one (`clientAuth`).
    pub client_auth: Option<ClientAuth>,
    /// Any certificate is accepted (`disableValidation`): opt-in only, and said at start.
    pub disable_validation: bool,
}

/// The proxy's client certificate chain and key (`clientAuth.certPath`, `clientAuth.keyPath`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientAuth {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// A file of `client.tls` that cannot be used; the message names the key and the file.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {path}: {reason}")]
pub struct UpstreamTlsError {
    /// The key, e.g. `services[web].client.tls.trustCerts`.
    pub key: String,
    /// The file.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

/// The largest PEM file read: 1 MiB, as for the listener's certificate.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// Which protocols a connection offers by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Offer {
    /// `http/1.1`.
    Http1,
    /// `h2`.
    H2,
    /// `h2` then `http/1.1`: the endpoint chooses.
    Either,
}

/// What the endpoint chose by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Chosen {
    Http1,
    H2,
    /// Nothing (the endpoint does not do ALPN).
    None,
}

/// The built client side of [`UpstreamTls`]: one rustls configuration per ALPN offer, all
/// sharing one session cache.
#[derive(Clone)]
pub struct TlsClient {
    http1: TlsConnector,
    h2: TlsConnector,
    either: TlsConnector,
    name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TlsClient {
    /// Reads `tls`'s files (regular files only, bounded in size and time) and builds the
    /// client configuration; `key` is where `client.tls` sits, for errors.
    ///
    /// # Errors
    /// [`UpstreamTlsError`] naming the key and the file: unreadable, no certificate in it, a
    /// key that does not match its certificate, a server name that is not a DNS name or an IP.
    pub async fn load(tls: &UpstreamTls, key: &str) -> Result<Self, UpstreamTlsError> {
        let fail = |k: &str, path: &Path, reason: String| UpstreamTlsError {
            key: format!("{key}.{k}"),
            path: path.display().to_string(),
            reason,
        };
        let read = async |k: &str, path: &Path| {
            crate::config_file::read_async(path, MAX_PEM_BYTES)
                .await
                .map_err(|e| fail(k, path, e.problem.to_string()))
        };
        let certs = |k: &str, path: &Path, pem: &[u8]| {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(k, path, e.to_string()))?;
            if certs.is_empty() {
                return Err(fail(k, path, "no PEM certificate found".into()));
            }
            Ok(certs)
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| fail("trustCerts", Path::new(""), e.to_string()))?;
        let builder = if tls.disable_validation {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(tailguard_http::tls::AcceptAny(
                    provider,
                )))
        } else if tls.trust.is_empty() {
            builder.with_root_certificates(tailguard_http::tls::web_roots())
        } else {
            let mut roots = rustls::RootCertStore::empty();
            for path in &tls.trust {
                let pem = read("trustCerts", path).await?;
                for cert in certs("trustCerts", path, &pem)? {
                    roots
                        .add(cert)
                        .map_err(|e| fail("trustCerts", path, e.to_string()))?;
                }
            }
            builder.with_root_certificates(roots)
        };
        let config = match &tls.client_auth {
            None => builder.with_no_client_auth(),
            Some(auth) => {
                let cert_pem = read("clientAuth.certPath", &auth.cert).await?;
                let key_pem = read("clientAuth.keyPath", &auth.key).await?;
                let chain = certs("clientAuth.certPath", &auth.cert, &cert_pem)?;
                let private = PrivateKeyDer::from_pem_slice(&key_pem)
                    .map_err(|e| fail("clientAuth.keyPath", &auth.key, e.to_string()))?;
                builder
                    .with_client_auth_cert(chain, private)
                    .map_err(|e| fail("clientAuth.keyPath", &auth.key, e.to_string()))?
            }
        };
        let name = match &tls.server_name {
            None => None,
            Some(n) => Some(
                ServerName::try_from(n.clone()).map_err(|e| UpstreamTlsError {
                    key: format!("{key}.commonName"),
                    path: n.clone(),
                    reason: e.to_string(),
                })?,
            ),
        };
        // The clones share one session cache (an `Arc` inside), whatever they offer.
        let with = |offer: &[&[u8]]| {
            let mut c = config.clone();
            c.alpn_protocols = offer.iter().map(|p| p.to_vec()).collect();
            TlsConnector::from(Arc::new(c))
        };
        Ok(Self {
            http1: with(&[b"http/1.1"]),
            h2: with(&[b"h2"]),
            either: with(&[b"h2", b"http/1.1"]),
            name,
        })
    }

    /// The TLS handshake over `tcp` to `addr`, within `limit`, offering `offer`.
    pub(super) async fn handshake(
        &self,
        tcp: TcpStream,
        addr: SocketAddr,
        offer: Offer,
        limit: Duration,
    ) -> std::io::Result<(TlsStream<TcpStream>, Chosen)> {
        let name = self
            .name
            .clone()
            .unwrap_or(ServerName::IpAddress(addr.ip().into()));
        let connector = match offer {
            Offer::Http1 => &self.http1,
            Offer::H2 => &self.h2,
            Offer::Either => &self.either,
        };
        let stream = match tokio::time::timeout(limit, connector.connect(name, tcp)).await {
            Ok(done) => done.map_err(|e| {
                // rustls's own error (the certificate, an alert) is the cause to show.
                std::io::Error::new(e.kind(), format!("TLS handshake: {e}"))
            })?,
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("TLS handshake timeout ({limit:?})"),
                ))
            }
        };
        let chosen = match stream.get_ref().1.alpn_protocol() {
            Some(b"h2") => Chosen::H2,
            Some(_) => Chosen::Http1,
            None => Chosen::None,
        };
        Ok((stream, chosen))
    }
}
