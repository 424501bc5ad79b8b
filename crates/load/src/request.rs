//! Request templates: everything about a request decided once, so sending one is a few clones.

use crate::config::Config;
use crate::target::Target;
use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, EXPECT, HOST, TE,
    TRANSFER_ENCODING, UPGRADE, USER_AGENT,
};
use http::{HeaderMap, Method, Request, Uri, Version};
use http_body_util::Full;

/// The body of every request the generator sends: whole, or a streaming gRPC call's messages
/// as they are sent.
#[derive(Debug)]
pub(crate) enum ReqBody {
    /// Known before the request leaves.
    Full(Full<Bytes>),
    /// Each message as the call sends it; the stream ends when the sender is dropped.
    Stream(tokio::sync::mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for ReqBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            ReqBody::Full(full) => std::pin::Pin::new(full).poll_frame(cx),
            ReqBody::Stream(rx) => rx
                .poll_recv(cx)
                .map(|m| m.map(|m| Ok(hyper::body::Frame::data(m)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReqBody::Full(full) => full.is_end_stream(),
            ReqBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            ReqBody::Full(full) => full.size_hint(),
            ReqBody::Stream(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// The request sent to one target, prepared for both HTTP versions.
#[derive(Debug)]
pub(crate) struct Template {
    method: Method,
    origin_form: Uri,
    absolute: Uri,
    h1_headers: HeaderMap,
    h2_headers: HeaderMap,
    body: Bytes,
    /// The whole HTTP/1.1 request, head and body, as the lean client writes it.
    wire: Bytes,
    /// The lean client can send it (no header given with `-H` asks for hyper's handling).
    lean: bool,
}

/// Headers given with `-H` that change how an HTTP/1.1 message is framed or the connection
/// is kept: hyper's client acts on them, so a request carrying one goes through hyper.
const FRAMING: [HeaderName; 5] = [
    CONTENT_LENGTH,
    TRANSFER_ENCODING,
    CONNECTION,
    UPGRADE,
    EXPECT,
];

impl Template {
    /// Prepares the request for `target` from the run's method, headers, body and host override:
    /// `--host`, else the last `Host` given with `-H` (as curl, wrk and fortio take it), sets
    /// `Host` on HTTP/1.1 and `:authority` on HTTP/2.
    ///
    /// A request file's request brings its own method and body, and its headers replace the
    /// `-H` headers of the same name.
    pub(crate) fn new(cfg: &Config, target: &Target) -> Result<Template, String> {
        let mut given = cfg.headers.clone();
        if let Some(spec) = &target.spec {
            for name in spec.headers.keys() {
                given.remove(name);
            }
            for (name, value) in &spec.headers {
                given.append(name.clone(), value.clone());
            }
        }
        let host_header = match given.get_all(HOST).iter().next_back() {
            Some(v) => Some(v.to_str().map_err(|_| format!("bad Host header {v:?}"))?),
            None => None,
        };
        let host_override = cfg.host.as_deref().or(host_header);
        let authority = match host_override {
            Some(h) => h.parse().map_err(|_| format!("bad host {h:?}"))?,
            None => target.authority.clone(),
        };
        // A gRPC call's path is its method; the URL names only the server.
        let path = match &cfg.grpc {
            Some(call) => call.path.clone(),
            None => target.path.clone(),
        };
        let absolute = Uri::builder()
            .scheme(if target.tls { "https" } else { "http" })
            .authority(authority)
            .path_and_query(path.clone())
            .build()
            .map_err(|e| e.to_string())?;
        let origin_form = Uri::from(path);
        let mut h2_headers = given.clone();
        if cfg.grpc.is_some() {
            h2_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            h2_headers.insert(TE, HeaderValue::from_static("trailers"));
        }
        if !h2_headers.contains_key(USER_AGENT) {
            h2_headers.insert(USER_AGENT, HeaderValue::from_static(crate::USER_AGENT));
        }
        let host_value = host_override.unwrap_or(target.authority.as_str());
        let host =
            HeaderValue::from_str(host_value).map_err(|_| format!("bad host {host_value:?}"))?;
        let mut h1_headers = h2_headers.clone();
        h1_headers.insert(HOST, host);
        h2_headers.remove(HOST);
        let (method, body) = match (&cfg.grpc, &target.spec) {
            (Some(call), _) => (Method::POST, call.body.clone()),
            (None, Some(spec)) => (spec.method.clone(), spec.body.clone()),
            (None, None) => (cfg.method.clone(), cfg.body.clone()),
        };
        // Body checks read the body, which the lean client only counts.
        let lean = method != Method::CONNECT
            && !cfg.body_checks.any()
            && !FRAMING.iter().any(|h| given.contains_key(h));
        Ok(Template {
            wire: wire(&method, &origin_form, &h1_headers, &body),
            lean,
            method,
            origin_form,
            absolute,
            h1_headers,
            h2_headers,
            body,
        })
    }

    /// The request as the lean HTTP/1.1 client writes it.
    pub(crate) fn wire(&self) -> &[u8] {
        &self.wire
    }

    /// The lean HTTP/1.1 client can send this request.
    pub(crate) fn lean(&self) -> bool {
        self.lean
    }

    /// A `HEAD` request (its response has no body).
    pub(crate) fn is_head(&self) -> bool {
        self.method == Method::HEAD
    }

    /// A fresh request for an HTTP/1.1 or HTTP/2 connection. Its headers go into `spare` (the
    /// emptied map of an earlier response) when there is one, so a request allocates no header
    /// map.
    pub(crate) fn build(&self, h2: bool, spare: Option<HeaderMap>) -> Request<ReqBody> {
        self.build_with(h2, spare, ReqBody::Full(Full::new(self.body.clone())))
    }

    /// The request with `body` in place of the template's.
    pub(crate) fn build_with(
        &self,
        h2: bool,
        spare: Option<HeaderMap>,
        body: ReqBody,
    ) -> Request<ReqBody> {
        let mut req = Request::new(body);
        *req.method_mut() = self.method.clone();
        let headers = if h2 {
            *req.uri_mut() = self.absolute.clone();
            *req.version_mut() = Version::HTTP_2;
            &self.h2_headers
        } else {
            *req.uri_mut() = self.origin_form.clone();
            &self.h1_headers
        };
        *req.headers_mut() = match spare {
            Some(mut map) => {
                debug_assert!(map.is_empty(), "a spare header map comes emptied");
                map.extend(headers.iter().map(|(n, v)| (n.clone(), v.clone())));
                map
            }
            None => headers.clone(),
        };
        req
    }
}

/// An HTTP/1.1 request as hyper's client writes the same one: the request line, the headers
/// in the map's order, `content-length` for a body that is not empty, the body.
fn wire(method: &Method, target: &Uri, headers: &HeaderMap, body: &Bytes) -> Bytes {
    let mut out = Vec::with_capacity(64 + headers.len() * 32 + body.len());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.to_string().as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::ACCEPT;
    use tailguard_http::client::Writes;
    use tokio::io::AsyncReadExt;

    /// The bytes hyper's HTTP/1.1 client writes for `template`'s request.
    async fn hyper_writes(template: &Template) -> Vec<u8> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let io = hyper_util::rt::TokioIo::new(socket);
        let (mut send, _) = tailguard_http::client::h1(io, Writes::Flat, addr)
            .await
            .unwrap();
        let request = template.build(false, None);
        let _pending = tokio::spawn(async move { send.send_request(request).await });
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < template.wire().len() {
            let n = server.read(&mut buf).await.unwrap();
            assert!(n > 0, "hyper stopped writing after {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    #[tokio::test]
    async fn the_lean_request_is_byte_for_byte_the_one_hyper_writes() {
        let target = Target::parse("http://127.0.0.1:8080/a/b?c=d").unwrap();
        let mut get = Config::new(vec![target.clone()]);
        get.headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        get.headers.append("x-twice", HeaderValue::from_static("1"));
        get.headers.append("x-twice", HeaderValue::from_static("2"));
        let mut post = get.clone();
        post.method = Method::POST;
        post.body = Bytes::from_static(b"{\"a\": 1}");
        let mut head = Config::new(vec![target.clone()]);
        head.method = Method::HEAD;
        head.host = Some("example.test".into());
        for cfg in [get, post, head] {
            let template = Template::new(&cfg, &target).unwrap();
            assert!(template.lean());
            let hyper = hyper_writes(&template).await;
            assert_eq!(
                String::from_utf8_lossy(&hyper),
                String::from_utf8_lossy(template.wire())
            );
        }
    }

    #[test]
    fn a_framing_header_given_by_the_user_sends_the_request_through_hyper() {
        let target = Target::parse("http://127.0.0.1:8080/").unwrap();
        for name in FRAMING {
            let mut cfg = Config::new(vec![target.clone()]);
            cfg.headers
                .insert(name.clone(), HeaderValue::from_static("1"));
            assert!(!Template::new(&cfg, &target).unwrap().lean(), "{name}");
        }
        assert!(Template::new(&Config::new(vec![target.clone()]), &target)
            .unwrap()
            .lean());
    }
}
