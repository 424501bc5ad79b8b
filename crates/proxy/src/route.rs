//! Routes inside a service (`routes:`), first match wins: a condition on the method (exact)
//! and the path (a Rust `regex`, linear time, anchored to the whole normalized path, prefix
//! included and query excluded, as Linkerd's ServiceProfile anchors its `pathRegex`), and the
//! route's own policy: a total timeout in place of the service's, whether its failures are
//! retried whatever the method, and a rate limit. A request no route matches takes the
//! service's policy as the route [`DEFAULT_ROUTE`].

use std::time::Duration;
use tailguard_resilience::rate::RateLimit;

/// The route of a request no route matches.
pub const DEFAULT_ROUTE: &str = "[default]";

/// The largest compiled pattern (and lazy DFA) a `pathRegex` may take: a larger one is a
/// configuration error naming its key.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// A path pattern, anchored to the whole path.
#[derive(Clone, Debug)]
pub struct PathRegex(regex::Regex);

impl PathRegex {
    /// Compiles `pattern` anchored (`^(?:pattern)$`) within [`MAX_REGEX_BYTES`].
    ///
    /// # Errors
    /// The regex crate's error, in words (a syntax error, or a pattern over the size limit).
    pub fn new(pattern: &str) -> Result<Self, String> {
        regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(MAX_REGEX_BYTES)
            .dfa_size_limit(MAX_REGEX_BYTES)
            .build()
            .map(PathRegex)
            .map_err(|e| e.to_string())
    }

    /// True when the whole of `path` matches.
    pub fn is_match(&self, path: &str) -> bool {
        self.0.is_match(path)
    }

    /// The pattern as written (without the anchors).
    pub fn pattern(&self) -> &str {
        let s = self.0.as_str();
        s.strip_prefix("^(?:")
            .and_then(|s| s.strip_suffix(")$"))
            .unwrap_or(s)
    }
}

impl PartialEq for PathRegex {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// One route of a service.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// Its name in metrics and on the dashboard.
    pub name: String,
    /// The method it takes (`None`: any).
    pub method: Option<http::Method>,
    /// The paths it takes (`None`: any).
    pub path: Option<PathRegex>,
    /// The route's total timeout, in place of the service's `totalTimeoutMs` (a caller's
    /// tighter deadline still wins).
    pub timeout: Option<Duration>,
    /// `Some(true)`: its failures are retried whatever the method (under the service's
    /// budget); `Some(false)`: never (an attempt that could not connect is still re-picked);
    /// `None`: as the service's classifier says.
    pub retryable: Option<bool>,
    /// Requests a second at most on this route, before the service's own limit.
    pub rate_limit: Option<RateLimit>,
}

impl Route {
    /// True when this route takes `method` and `path` (normalized, no query).
    pub fn matches(&self, method: &http::Method, path: &str) -> bool {
        self.method.as_ref().is_none_or(|m| m == method)
            && self.path.as_ref().is_none_or(|p| p.is_match(path))
    }
}

/// The first of `routes` that takes `method` and `path`, with its index.
pub fn pick<'a>(
    routes: &'a [Route],
    method: &http::Method,
    path: &str,
) -> Option<(usize, &'a Route)> {
    routes
        .iter()
        .enumerate()
        .find(|(_, r)| r.matches(method, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str, method: Option<&str>, path: Option<&str>) -> Route {
        Route {
            name: name.into(),
            method: method.map(|m| m.parse().unwrap()),
            path: path.map(|p| PathRegex::new(p).unwrap()),
            timeout: None,
            retryable: None,
            rate_limit: None,
        }
    }

    #[test]
    fn the_first_match_wins_and_patterns_are_anchored() {
        let routes = [
            route("get-user", Some("GET"), Some("/users/[0-9]+")),
            route("users", None, Some("/users/.*")),
            route("posts", Some("POST"), None),
        ];
        let name =
            |m: &str, p: &str| pick(&routes, &m.parse().unwrap(), p).map(|(_, r)| r.name.clone());
        assert_eq!(name("GET", "/users/42").as_deref(), Some("get-user"));
        assert_eq!(name("DELETE", "/users/42").as_deref(), Some("users"));
        assert_eq!(
            name("GET", "/users/42/x").as_deref(),
            Some("users"),
            "anchored at the end"
        );
        assert_eq!(name("GET", "/api/users/42"), None, "anchored at the start");
        assert_eq!(name("POST", "/anything").as_deref(), Some("posts"));
        assert_eq!(name("GET", "/other"), None);
    }

    #[test]
    fn a_catastrophic_or_huge_pattern_is_linear_or_refused() {
        // The classic backtracking bomb runs in linear time here.
        let p = PathRegex::new("(a+)+$").unwrap();
        let long = format!("/{}!", "a".repeat(100_000));
        assert!(!p.is_match(&long));
        // A pattern whose compiled form passes 1 MiB is refused.
        let huge = PathRegex::new("[a-z]{1000}{1000}").unwrap_err();
        assert!(huge.contains("size limit"), "{huge}");
        assert_eq!(PathRegex::new("/a|/b").unwrap().pattern(), "/a|/b");
        assert!(
            PathRegex::new("/a|/b").unwrap().is_match("/b"),
            "the alternation is grouped"
        );
    }
}
