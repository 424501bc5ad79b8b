//! TLS and mTLS to the upstreams, against nginx serving HTTPS with certificates from a test CA
//! (rcgen): HTTP/1.1 and h2 chosen by ALPN, sessions resumed, a client certificate required
//! and given, a wrong CA and a wrong name each a 502 with the cause in `/endpoints`, and a
//! reload that re-reads the CA file.

use crate::support;

use http::StatusCode;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
use std::path::PathBuf;
use support::peers::Nginx;
use support::{client, send, views};
use tailguard_proxy::config::{ClientAuth, ServiceConfig, Upstream, UpstreamProtocol, UpstreamTls};
use tailguard_testsupport::TestServer;

/// These tests read each TLS failure's cause from the answer: the full error detail.
fn config(service: ServiceConfig) -> tailguard_proxy::config::Config {
    support::detailed(support::config(service))
}

/// A CA, a server certificate it signed for `backend.test` and 127.0.0.1, and a client
/// certificate it signed; plus a second CA that signed nothing here. All written as PEM files
/// in a fresh directory, removed on drop.
struct Pki {
    dir: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

impl Pki {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tailguard-upstream-tls-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, pem: String| std::fs::write(dir.join(name), pem).unwrap();
        let (ca_cert, ca_key) = ca("tailguard test CA");
        let server =
            CertificateParams::new(vec!["backend.test".into(), "127.0.0.1".into()]).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key).unwrap();
        let mut client = CertificateParams::new(vec!["proxy.test".into()]).unwrap();
        client.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().unwrap();
        let client_cert = client.signed_by(&client_key, &ca_cert, &ca_key).unwrap();
        let named = CertificateParams::new(vec!["localhost".into()]).unwrap();
        let named_key = KeyPair::generate().unwrap();
        let named_cert = named.signed_by(&named_key, &ca_cert, &ca_key).unwrap();
        write("named.pem", named_cert.pem());
        write("named-key.pem", named_key.serialize_pem());
        let (other_ca, _) = ca("another CA");
        write("ca.pem", ca_cert.pem());
        write("other-ca.pem", other_ca.pem());
        write("server.pem", server_cert.pem());
        write("server-key.pem", server_key.serialize_pem());
        write("client.pem", client_cert.pem());
        write("client-key.pem", client_key.serialize_pem());
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// nginx serving HTTPS with the server certificate (`listen` options `listen`, e.g.
    /// `http2`), answering with the protocol it spoke and whether the TLS session was resumed.
    fn nginx(&self, listen: &str, extra: &str) -> Nginx {
        self.nginx_with("server", listen, extra)
    }

    /// As [`Pki::nginx`], serving the certificate `cert` (`server`: backend.test and
    /// 127.0.0.1; `named`: localhost only).
    fn nginx_with(&self, cert: &str, listen: &str, extra: &str) -> Nginx {
        let server = format!(
            "ssl_certificate {}; ssl_certificate_key {};\n    {extra}\n    \
             location / {{ default_type text/plain; \
             return 200 \"$server_protocol $ssl_session_reused\\n\"; }}",
            self.path(&format!("{cert}.pem")).display(),
            self.path(&format!("{cert}-key.pem")).display(),
        );
        Nginx::with_server(&format!("ssl {listen}"), &server)
    }

    /// TLS trusting `ca`, checking the name `name`.
    fn tls(&self, ca: &str, name: &str) -> UpstreamTls {
        UpstreamTls {
            server_name: Some(name.to_owned()),
            trust: vec![self.path(ca)],
            client_auth: None,
            disable_validation: false,
        }
    }

    fn client_auth(&self) -> Option<ClientAuth> {
        Some(ClientAuth {
            cert: self.path("client.pem"),
            key: self.path("client-key.pem"),
        })
    }
}

fn service(nginx: &Nginx, tls: UpstreamTls, protocol: UpstreamProtocol) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", vec![Upstream::new(nginx.addr)]);
    s.tls = Some(tls);
    s.protocol = protocol;
    s
}

async fn get(proxy: &tailguard_proxy::Proxy) -> (StatusCode, String) {
    let (status, headers, body) = send(&client(false), proxy.addr(), "GET", "/").await;
    let why = headers
        .get(tailguard_proxy::ERROR_HEADER)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    (status, why.unwrap_or(text))
}

fn last_error(proxy: &tailguard_proxy::Proxy) -> String {
    views(proxy)[0]
        .last_error
        .as_ref()
        .map(|e| e.what.clone())
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "tier 2: nginx"]
async fn https_backends_over_http1_and_h2_chosen_by_alpn() {
    let pki = Pki::new("alpn");
    let h1_only = pki.nginx("", "");
    let h2_too = pki.nginx("http2", "");
    for (nginx, protocol, spoken) in [
        (&h1_only, UpstreamProtocol::Auto, "HTTP/1.1"),
        (&h2_too, UpstreamProtocol::Auto, "HTTP/2.0"),
        (&h2_too, UpstreamProtocol::Http1, "HTTP/1.1"),
        (&h2_too, UpstreamProtocol::Http2, "HTTP/2.0"),
    ] {
        let tls = pki.tls("ca.pem", "backend.test");
        let proxy = tailguard_proxy::start(config(service(nginx, tls, protocol)))
            .await
            .unwrap();
        for _ in 0..3 {
            let (status, body) = get(&proxy).await;
            assert_eq!(status, 200, "{protocol:?}: {body}");
            assert!(body.starts_with(spoken), "{protocol:?}: {body}");
        }
        proxy.shutdown().await;
    }
    // Without `commonName` the endpoint's IP address is the name checked.
    let mut tls = pki.tls("ca.pem", "x");
    tls.server_name = None;
    let proxy = tailguard_proxy::start(config(service(&h1_only, tls, UpstreamProtocol::Auto)))
        .await
        .unwrap();
    assert_eq!(get(&proxy).await.0, 200);
    proxy.shutdown().await;
    // `protocol: h2` to an endpoint that has only HTTP/1.1: refused by ALPN, said so.
    let tls = pki.tls("ca.pem", "backend.test");
    let proxy = tailguard_proxy::start(config(service(&h1_only, tls, UpstreamProtocol::Http2)))
        .await
        .unwrap();
    let (status, why) = get(&proxy).await;
    assert_eq!(status, 502, "{why}");
    assert!(why.contains("NoApplicationProtocol"), "{why}");
    proxy.shutdown().await;
}

#[tokio::test]
#[ignore = "tier 2: nginx"]
async fn sessions_are_resumed_on_new_connections() {
    let pki = Pki::new("resume");
    // No keep-alive: every request is a new connection, and a new TLS handshake.
    let nginx = pki.nginx("", "keepalive_timeout 0;");
    let tls = pki.tls("ca.pem", "backend.test");
    let proxy = tailguard_proxy::start(config(service(&nginx, tls, UpstreamProtocol::Http1)))
        .await
        .unwrap();
    let mut reused = Vec::new();
    for _ in 0..4 {
        let (status, body) = get(&proxy).await;
        assert_eq!(status, 200, "{body}");
        reused.push(body.ends_with(" r"));
    }
    assert!(!reused[0], "the first handshake cannot resume");
    assert!(reused[1..].iter().all(|r| *r), "{reused:?}");
    proxy.shutdown().await;
}

#[tokio::test]
#[ignore = "tier 2: nginx"]
async fn a_client_certificate_when_the_endpoint_requires_one() {
    let pki = Pki::new("mtls");
    let verify = format!(
        "ssl_verify_client on; ssl_client_certificate {};",
        pki.path("ca.pem").display()
    );
    let nginx = pki.nginx("http2", &verify);
    for protocol in [UpstreamProtocol::Http1, UpstreamProtocol::Http2] {
        let mut tls = pki.tls("ca.pem", "backend.test");
        tls.client_auth = pki.client_auth();
        let proxy = tailguard_proxy::start(config(service(&nginx, tls, protocol)))
            .await
            .unwrap();
        let (status, body) = get(&proxy).await;
        assert_eq!(status, 200, "{protocol:?}: {body}");
        proxy.shutdown().await;
        // Without one, nginx refuses (it answers 400 rather than failing the handshake).
        let tls = pki.tls("ca.pem", "backend.test");
        let proxy = tailguard_proxy::start(config(service(&nginx, tls, protocol)))
            .await
            .unwrap();
        let (status, body) = get(&proxy).await;
        assert_eq!(status, 400, "{protocol:?}: {body}");
        assert!(body.contains("No required SSL certificate"), "{body}");
        proxy.shutdown().await;
    }
}

#[tokio::test]
#[ignore = "tier 2: nginx"]
async fn a_wrong_ca_or_name_is_a_502_with_the_cause_and_a_reload_rereads_the_ca() {
    let pki = Pki::new("wrong");
    let nginx = pki.nginx("", "");
    let tls = pki.tls("ca.pem", "elsewhere.test");
    let proxy = tailguard_proxy::start(config(service(&nginx, tls, UpstreamProtocol::Auto)))
        .await
        .unwrap();
    let (status, why) = get(&proxy).await;
    assert_eq!(status, 502, "{why}");
    assert!(why.contains("not valid for name"), "{why}");
    assert!(last_error(&proxy).contains("not valid for name"));
    proxy.shutdown().await;
    // `disableValidation` (opt-in): the wrong name and no trusted CA, still served.
    let tls = UpstreamTls {
        server_name: Some("elsewhere.test".into()),
        disable_validation: true,
        ..UpstreamTls::default()
    };
    let proxy = tailguard_proxy::start(config(service(&nginx, tls, UpstreamProtocol::Auto)))
        .await
        .unwrap();
    assert_eq!(get(&proxy).await.0, 200);
    proxy.shutdown().await;

    // The CA file is another CA's: unknown issuer. Then the file is replaced by the right
    // CA and the configuration reloaded, unchanged: the file is read again.
    let trusted = pki.path("trusted.pem");
    std::fs::copy(pki.path("other-ca.pem"), &trusted).unwrap();
    let tls = pki.tls("trusted.pem", "backend.test");
    let c = config(service(&nginx, tls, UpstreamProtocol::Auto));
    let proxy = tailguard_proxy::start(c.clone()).await.unwrap();
    let (status, why) = get(&proxy).await;
    assert_eq!(status, 502, "{why}");
    assert!(why.contains("UnknownIssuer"), "{why}");
    assert!(last_error(&proxy).contains("UnknownIssuer"));
    std::fs::copy(pki.path("ca.pem"), &trusted).unwrap();
    let mut again = c.clone();
    again.listen = proxy.addr();
    again.admin = proxy.admin_addr();
    proxy.reload(&again).await.unwrap();
    let (status, body) = get(&proxy).await;
    assert_eq!(status, 200, "{body}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn an_endpoint_that_never_shakes_hands_or_speaks_cleartext_is_a_502_in_time() {
    let pki = Pki::new("silent");
    // Takes connections (the kernel's backlog) and never answers the ClientHello.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cleartext = TestServer::start().await;
    for (addr, says) in [
        (
            silent.local_addr().unwrap(),
            "TLS handshake timeout (200ms)",
        ),
        (cleartext.addr(), "TLS handshake: "),
    ] {
        let mut s = ServiceConfig::new("web", vec![Upstream::new(addr)]);
        s.tls = Some(pki.tls("ca.pem", "backend.test"));
        s.pool.connect_timeout = std::time::Duration::from_millis(200);
        let proxy = tailguard_proxy::start(config(s)).await.unwrap();
        let (status, why) = get(&proxy).await;
        assert_eq!(status, 502, "{why}");
        assert!(why.contains(says), "{why}");
        assert!(last_error(&proxy).contains(says));
        proxy.shutdown().await;
    }
    assert_eq!(
        cleartext.hits(),
        0,
        "a TLS ClientHello is not an HTTP request"
    );
}

#[tokio::test]
async fn unusable_tls_files_stop_the_start_naming_the_key() {
    let pki = Pki::new("files");
    std::fs::write(pki.path("empty.pem"), "no certificate here\n").unwrap();
    let upstream = Upstream::new("127.0.0.1:9".parse().unwrap());
    let cases = [
        (
            pki.tls("missing.pem", "x"),
            "services[web].client.tls.trustCerts: ",
        ),
        (pki.tls("empty.pem", "x"), "no PEM certificate found"),
        (
            pki.tls("ca.pem", "not a name!"),
            "services[web].client.tls.commonName",
        ),
        (
            UpstreamTls {
                client_auth: Some(ClientAuth {
                    cert: pki.path("client.pem"),
                    key: pki.path("server-key.pem"),
                }),
                ..pki.tls("ca.pem", "x")
            },
            "services[web].client.tls.clientAuth.keyPath",
        ),
    ];
    for (tls, says) in cases {
        let mut s = ServiceConfig::new("web", vec![upstream]);
        s.tls = Some(tls);
        let e = tailguard_proxy::start(config(s)).await.unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
}

#[tokio::test]
async fn under_protocol_auto_an_endpoint_that_chooses_h2_gets_http_and_grpc_on_one_connection() {
    // The test backend offers h2 and http/1.1 by ALPN, with a self-signed certificate.
    let backend = TestServer::builder().tls().start().await;
    let mut s = ServiceConfig::new("web", vec![Upstream::new(backend.addr())]);
    s.tls = Some(UpstreamTls {
        disable_validation: true,
        ..UpstreamTls::default()
    });
    let proxy = tailguard_proxy::start(config(s)).await.unwrap();
    for _ in 0..3 {
        assert_eq!(get(&proxy).await.0, 200);
    }
    // The first HTTP/1.1 dial offered both; the endpoint chose h2, so that connection went to
    // the HTTP/2 pool, and every request since, the gRPC call too, shares it.
    assert_eq!(
        support::grpc_call(&client(true), proxy.addr(), 0).await,
        Some(0)
    );
    assert_eq!(backend.h2_requests(), 4);
    assert_eq!(backend.connections(), 1);
    proxy.shutdown().await;
}

#[tokio::test]
#[ignore = "tier 2: nginx"]
async fn without_common_name_the_upstreams_host_name_is_the_name_checked() {
    let pki = Pki::new("named");
    // A certificate for `localhost` alone (no IP address in it).
    let nginx = pki.nginx_with("named", "", "");
    let port = nginx.addr.port();
    let mut tls = pki.tls("ca.pem", "x");
    tls.server_name = None;
    for (entry, status) in [
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 502),
    ] {
        let mut s = ServiceConfig::new("web", Vec::new());
        s.discovery = tailguard_proxy::config::Discovery::of_entries(vec![
            tailguard_proxy::config::Entry::parse(&entry).unwrap(),
        ]);
        s.tls = Some(tls.clone());
        let proxy = tailguard_proxy::start(config(s)).await.unwrap();
        let (got, why) = get(&proxy).await;
        assert_eq!(got, status, "{entry}: {why}");
        if status == 502 {
            assert!(why.contains(r#"not valid for name "127.0.0.1""#), "{why}");
        }
        proxy.shutdown().await;
    }
}
