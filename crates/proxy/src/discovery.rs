//! File discovery, like Linkerd 1's fs namer: one `host:port [weight]` per line (`#` starts a
//! comment), re-read every `interval` and applied without restart when its content changes.
//! A file that does not parse, or cannot be read (not a regular file, too large, stuck: see
//! [`crate::config_file`]), or lists no endpoint (a file caught mid-rewrite), is reported and
//! ignored; the previous endpoints stay.

use crate::config::{Upstream, MAX_WEIGHT};
use std::path::Path;
use std::time::Duration;

/// The largest discovery file read: 1 MiB, some 50,000 endpoints.
pub const MAX_BYTES: u64 = 1 << 20;

/// Where a discovery source's endpoint lists go. The source only finds lists; the owner of the
/// service they feed applies them (in the proxy: [`crate::start`], for a service of the
/// running configuration).
pub trait Target: Send + 'static {
    /// Whether the target is still there (a reload may have replaced its service); checked
    /// before each look, and the source stops when it is gone.
    fn alive(&self) -> bool;
    /// Applies a changed endpoint list.
    fn apply(&self, next: &[Upstream]);
}

/// A discovery input that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DiscoveryError {
    /// A line that is not `IP:PORT [weight]`.
    #[error("line {line}: `{text}` is not `IP:PORT [weight]` (weight 1 to {MAX_WEIGHT})")]
    Line {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
}

/// Parses one upstream, `IP:PORT [weight]`.
///
/// # Errors
/// When the address or weight is malformed (`line` is used in the error).
pub fn parse_upstream(text: &str, line: usize) -> Result<Upstream, DiscoveryError> {
    // The upstream list's own entry syntax, less host names (a file is not resolved).
    match crate::config::Entry::parse(text) {
        Ok(crate::config::Entry::Addr(u)) => Ok(u),
        _ => Err(DiscoveryError::Line {
            line,
            text: text.to_owned(),
        }),
    }
}

/// Parses a whole file.
///
/// # Errors
/// The first malformed line.
pub fn parse_upstreams(text: &str) -> Result<Vec<Upstream>, DiscoveryError> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| parse_upstream(l, i))
        .collect()
}

/// Watches `path` for `target` while it is there.
pub async fn watch_file(
    target: impl Target,
    path: std::path::PathBuf,
    interval: Duration,
    last: Vec<Upstream>,
) {
    poll(target, interval, last, || read(&path)).await;
}

/// The loop every discovery source shares: every `interval`, ask `fetch` for the endpoint
/// list (`None`: keep the current one) and hand it to `target` when it changed, while the
/// target is there.
pub(crate) async fn poll<F, Fut>(
    target: impl Target,
    interval: Duration,
    mut last: Vec<Upstream>,
    mut fetch: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<Vec<Upstream>>>,
{
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !target.alive() {
            return;
        }
        if let Some(next) = fetch().await.filter(|n| *n != last) {
            target.apply(&next);
            last = next;
        }
    }
}

async fn read(path: &Path) -> Option<Vec<Upstream>> {
    match read_file(path).await {
        // A file caught between its truncation and its new content lists nothing: applying
        // that would answer 503 and forget what was learned about every endpoint (a dead one
        // would come back alive once the content is in). Draining a service is done by
        // removing its lines one by one, or by removing the service.
        Ok(list) if list.is_empty() => {
            tracing::warn!(path = %path.display(), "discovery file lists no endpoint; keeping endpoints");
            None
        }
        Ok(list) => Some(list),
        Err(err) => {
            tracing::warn!(%err, path = %path.display(), "discovery file not used; keeping endpoints");
            None
        }
    }
}

/// Reads and parses a discovery file ([`crate::config_file`]: a regular file only, at most
/// [`MAX_BYTES`], within its read timeout); what is wrong, without the path, if it cannot.
///
/// # Errors
/// Why the file was not read, or its first malformed line.
pub async fn read_file(path: &Path) -> Result<Vec<Upstream>, String> {
    let bytes = crate::config_file::read_async(path, MAX_BYTES)
        .await
        .map_err(|e| e.problem.to_string())?;
    let text = std::str::from_utf8(&bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    parse_upstreams(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_documented_example() {
        let list = parse_upstreams("127.0.0.1:9001\n127.0.0.1:9002 3 # heavier\n").unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].weight, 3);
    }

    use super::*;

    #[test]
    fn rejects_bad_lines_with_their_number() {
        let err = parse_upstreams("127.0.0.1:1\n\nlocalhost:80\n").unwrap_err();
        assert_eq!(
            err,
            DiscoveryError::Line {
                line: 3,
                text: "localhost:80".into()
            }
        );
        assert!(parse_upstreams("127.0.0.1:1 0").is_err());
        assert!(parse_upstreams("127.0.0.1:1 2 3").is_err());
        assert_eq!(parse_upstreams("# only a comment\n").unwrap(), vec![]);
    }

    #[tokio::test]
    async fn a_file_caught_mid_rewrite_is_not_applied() {
        let dir = std::env::temp_dir().join(format!("tg-discovery-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("web.txt");
        std::fs::write(&path, "127.0.0.1:9001\n").unwrap();
        assert_eq!(read(&path).await.map(|l| l.len()), Some(1));
        for empty in ["", "# only a comment\n"] {
            std::fs::write(&path, empty).unwrap();
            assert_eq!(read(&path).await, None, "{empty:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
