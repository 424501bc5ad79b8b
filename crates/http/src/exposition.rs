//! `/metrics` bodies, in the format the scraper asks for, with a content type that says which.
//!
//! prometheus-client writes OpenMetrics 1.0. A Prometheus server asks for it in its `Accept`
//! header and gets it as `application/openmetrics-text`. Anything else (curl, `promtool check
//! metrics`, older scrapers) gets the Prometheus text format 0.0.4 as `text/plain`, derived
//! from the same encoding: a counter's `# HELP` and `# TYPE` name its `_total` sample (in
//! OpenMetrics they name the family), `# UNIT` and `# EOF` go, `info` becomes a gauge and
//! `unknown` becomes `untyped`. Both bodies pass `promtool check metrics` (a test runs it).

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use http::Response;
use http_body_util::Full;
use prometheus_client::registry::Registry;

/// The OpenMetrics 1.0 content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format 0.0.4 content type.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The content type and body of `registry` in the format `accept` (a request's `Accept`
/// header) prefers: OpenMetrics when it names `application/openmetrics-text`, else the
/// Prometheus text format.
pub fn encode(registry: &Registry, accept: Option<&str>) -> (&'static str, String) {
    let mut openmetrics = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut openmetrics, registry);
    if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        (OPENMETRICS, openmetrics)
    } else {
        (PROMETHEUS_TEXT, to_prometheus_text(&openmetrics))
    }
}

/// A `200` with `registry` encoded as the request's `headers` ask ([`encode`]).
pub fn response(registry: &Registry, headers: &HeaderMap) -> Response<Full<Bytes>> {
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    let (kind, body) = encode(registry, accept);
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    resp
}

/// Rewrites an OpenMetrics exposition (as prometheus-client writes it: `# HELP`, then
/// `# TYPE`, then optionally `# UNIT`, then the samples, for each family) in the Prometheus
/// text format.
fn to_prometheus_text(openmetrics: &str) -> String {
    let lines: Vec<&str> = openmetrics.lines().collect();
    let mut out = String::with_capacity(openmetrics.len());
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = lines
                .get(i + 1)
                .and_then(|l| l.strip_prefix("# TYPE "))
                .and_then(|t| t.split_once(' '))
                .map_or("", |(_, kind)| kind);
            out.push_str(&format!("# HELP {} {help}\n", sample_name(name, kind)));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let text_kind = match kind {
                "info" => "gauge",
                "unknown" => "untyped",
                other => other,
            };
            out.push_str(&format!("# TYPE {} {text_kind}\n", sample_name(name, kind)));
        } else if line.starts_with("# UNIT ") || *line == "# EOF" {
            continue;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The sample name a family's `# HELP` and `# TYPE` take in the Prometheus text format.
fn sample_name(family: &str, kind: &str) -> String {
    match kind {
        "counter" => format!("{family}_total"),
        "info" => format!("{family}_info"),
        _ => family.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::metrics::info::Info;

    fn registry() -> Registry {
        let mut r = Registry::with_prefix("t");
        let c = Family::<Vec<(String, String)>, Counter>::default();
        c.get_or_create(&vec![("class".into(), "2xx".into())]).inc();
        r.register("requests", "Requests answered", c);
        let g = Gauge::<i64>::default();
        g.set(3);
        r.register("in_flight", "Requests in flight", g);
        let h = Histogram::new([0.1, 1.0]);
        h.observe(0.5);
        r.register_with_unit(
            "latency",
            "Latency",
            prometheus_client::registry::Unit::Seconds,
            h,
        );
        r.register("build", "Build", Info::new(vec![("version", "1")]));
        r
    }

    #[test]
    fn prometheus_text_names_the_samples_and_drops_openmetrics_only_lines() {
        let (kind, text) = encode(&registry(), None);
        assert_eq!(kind, PROMETHEUS_TEXT);
        assert_eq!(
            text,
            "# HELP t_requests_total Requests answered.\n\
             # TYPE t_requests_total counter\n\
             t_requests_total{class=\"2xx\"} 1\n\
             # HELP t_in_flight Requests in flight.\n\
             # TYPE t_in_flight gauge\n\
             t_in_flight 3\n\
             # HELP t_latency_seconds Latency.\n\
             # TYPE t_latency_seconds histogram\n\
             t_latency_seconds_sum 0.5\n\
             t_latency_seconds_count 1\n\
             t_latency_seconds_bucket{le=\"0.1\"} 0\n\
             t_latency_seconds_bucket{le=\"1.0\"} 1\n\
             t_latency_seconds_bucket{le=\"+Inf\"} 1\n\
             # HELP t_build_info Build.\n\
             # TYPE t_build_info gauge\n\
             t_build_info{version=\"1\"} 1\n"
        );
    }

    #[test]
    fn a_scraper_asking_for_openmetrics_gets_it() {
        let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        let (kind, text) = encode(&registry(), Some(accept));
        assert_eq!(kind, OPENMETRICS);
        assert!(text.contains("# TYPE t_requests counter\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
