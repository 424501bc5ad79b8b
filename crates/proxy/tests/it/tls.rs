//! The TLS listener: HTTP/1.1 and h2 on one port, chosen by ALPN, and clear errors for bad
//! certificate files.

use crate::support;

use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use support::{config, AsUpstream};
use tailguard_proxy::config::{ServiceConfig, TlsConfig};
use tailguard_testsupport::{bounded, TestServer};

/// A self-signed certificate for 127.0.0.1 written to PEM files in a fresh directory.
struct Cert {
    dir: PathBuf,
    der: CertificateDer<'static>,
}

impl Drop for Cert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cert {
    fn new(tag: &str) -> Self {
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let dir = std::env::temp_dir().join(format!("tailguard-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cert.pem"), certified.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), certified.key_pair.serialize_pem()).unwrap();
        let der = certified.cert.der().clone();
        Self { dir, der }
    }

    fn config(&self) -> TlsConfig {
        TlsConfig {
            cert: self.dir.join("cert.pem"),
            key: self.dir.join("key.pem"),
        }
    }
}

/// Connects over TLS offering only `alpn`, sends one GET and returns the negotiated protocol,
/// the response version, status and body.
async fn get(addr: SocketAddr, cert: &Cert, alpn: &[u8]) -> (Vec<u8>, Version, u16, Bytes) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let tcp = bounded(tokio::net::TcpStream::connect(addr)).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let stream = bounded(tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp))
        .await
        .unwrap();
    let negotiated = stream
        .get_ref()
        .1
        .alpn_protocol()
        .unwrap_or_default()
        .to_vec();
    let io = TokioIo::new(stream);
    let req = Request::get(format!("https://{addr}/"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = if negotiated == b"h2" {
        let (mut send, conn) = bounded(hyper::client::conn::http2::handshake(
            TokioExecutor::new(),
            io,
        ))
        .await
        .unwrap();
        tokio::spawn(conn);
        bounded(send.send_request(req)).await.unwrap()
    } else {
        let (mut send, conn) = bounded(hyper::client::conn::http1::handshake(io))
            .await
            .unwrap();
        tokio::spawn(conn);
        bounded(send.send_request(req)).await.unwrap()
    };
    let (version, status) = (resp.version(), resp.status().as_u16());
    let body = bounded(resp.into_body().collect())
        .await
        .unwrap()
        .to_bytes();
    (negotiated, version, status, body)
}

#[tokio::test]
async fn http1_and_h2_share_the_tls_port_by_alpn() {
    let backend = TestServer::start().await;
    let cert = Cert::new("alpn");
    let mut c = config(ServiceConfig::new("web", vec![backend.upstream()]));
    c.tls = Some(cert.config());
    let proxy = tailguard_proxy::start(c).await.unwrap();
    let h1 = get(proxy.addr(), &cert, b"http/1.1").await;
    assert_eq!(
        h1,
        (
            b"http/1.1".to_vec(),
            Version::HTTP_11,
            200,
            Bytes::from("ok")
        )
    );
    let h2 = get(proxy.addr(), &cert, b"h2").await;
    assert_eq!(
        h2,
        (b"h2".to_vec(), Version::HTTP_2, 200, Bytes::from("ok"))
    );
    assert_eq!(backend.hits(), 2);
    // Cleartext on the TLS port is not served.
    let plain = support::client(false)
        .request(
            Request::get(format!("http://{}/", proxy.addr()))
                .body(http_body_util::Full::new(Bytes::new()))
                .unwrap(),
        )
        .await;
    assert!(plain.is_err());
    assert_eq!(backend.hits(), 2);
    proxy.shutdown().await;
}

#[tokio::test]
async fn unusable_certificate_files_are_named_at_start() {
    let backend = TestServer::start().await;
    let cert = Cert::new("bad");
    let mut c = config(ServiceConfig::new("web", vec![backend.upstream()]));
    let mut tls = cert.config();
    tls.key = cert.dir.join("missing.pem");
    c.tls = Some(tls.clone());
    let e = tailguard_proxy::start(c.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("servers[0].tls.keyPath (--tls-key): "), "{e}");
    assert!(e.contains("missing.pem"), "{e}");
    tls.key = tls.cert.clone(); // a certificate where the key should be
    c.tls = Some(tls);
    let e = tailguard_proxy::start(c).await.unwrap_err().to_string();
    assert!(e.contains("keyPath"), "{e}");
}

/// Whether a TLS handshake with the proxy succeeds when only `cert` is trusted.
async fn handshake_ok(addr: SocketAddr, cert: &Cert) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = bounded(tokio::net::TcpStream::connect(addr)).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .is_ok()
}

#[tokio::test]
async fn a_reload_serves_the_new_certificate_and_refuses_an_unusable_one() {
    let backend = TestServer::start().await;
    let (first, second) = (Cert::new("reload-a"), Cert::new("reload-b"));
    let mut c = config(ServiceConfig::new("web", vec![backend.upstream()]));
    c.tls = Some(first.config());
    let proxy = tailguard_proxy::start(c).await.unwrap();
    let addr = proxy.addr();
    assert!(handshake_ok(addr, &first).await);
    assert!(!handshake_ok(addr, &second).await);

    let mut next = config(ServiceConfig::new("web", vec![backend.upstream()]));
    next.listen = addr;
    next.tls = Some(second.config());
    proxy.reload(&next).await.unwrap();
    assert!(handshake_ok(addr, &second).await, "the new certificate");
    assert!(!handshake_ok(addr, &first).await, "not the old one");

    let mut broken = config(ServiceConfig::new("web", vec![backend.upstream()]));
    broken.listen = addr;
    broken.tls = Some(TlsConfig {
        cert: second.dir.join("missing.pem"),
        key: second.dir.join("key.pem"),
    });
    assert!(proxy.reload(&broken).await.is_err());
    assert!(
        handshake_ok(addr, &second).await,
        "the running certificate kept"
    );
    assert_eq!(get(addr, &second, b"h2").await.2, 200);
    proxy.shutdown().await;
}
