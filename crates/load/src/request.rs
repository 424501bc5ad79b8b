//! Request templates: everything about a request decided once, so sending one is a few clones.

use crate::config::Config;
use crate::conn::ReqBody;
use crate::target::Target;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, HOST, TE, USER_AGENT};
use http::{HeaderMap, Method, Request, Uri, Version};
use http_body_util::Full;

/// The request sent to one target, prepared for both HTTP versions.
#[derive(Debug)]
pub(crate) struct Template {
    method: Method,
    origin_form: Uri,
    absolute: Uri,
    h1_headers: HeaderMap,
    h2_headers: HeaderMap,
    body: Bytes,
}

impl Template {
    /// Prepares the request for `target` from the run's method, headers, body and host override:
    /// `--host`, else the last `Host` given with `-H` (as curl, wrk and fortio take it), sets
    /// `Host` on HTTP/1.1 and `:authority` on HTTP/2.
    pub(crate) fn new(cfg: &Config, target: &Target) -> Result<Template, String> {
        let host_header = match cfg.headers.get_all(HOST).iter().next_back() {
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
        let mut h2_headers = cfg.headers.clone();
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
        Ok(Template {
            method: if cfg.grpc.is_some() {
                Method::POST
            } else {
                cfg.method.clone()
            },
            origin_form,
            absolute,
            h1_headers,
            h2_headers,
            body: cfg
                .grpc
                .as_ref()
                .map_or(cfg.body.clone(), |c| c.body.clone()),
        })
    }

    /// A fresh request for an HTTP/1.1 or HTTP/2 connection. Its headers go into `spare` (the
    /// emptied map of an earlier response) when there is one, so a request allocates no header
    /// map.
    pub(crate) fn build(&self, h2: bool, spare: Option<HeaderMap>) -> Request<ReqBody> {
        let mut req = Request::new(Full::new(self.body.clone()));
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
