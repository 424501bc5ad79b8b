//! Interim (1xx) responses on an HTTP/1.1 connection of hyper's client, bounded as the lean
//! reader bounds them ([`crate::h1::parse::MAX_INTERIM`] heads, [`MAX_INTERIM_BYTES`] bytes,
//! per request).
//!
//! hyper's client reads interim heads for as long as the server sends them and only shows
//! them to a callback (`hyper::ext::on_informational`), which cannot stop the read. So the
//! callback counts, and past a bound it tells the connection's driver task, which drops the
//! connection: the request fails, and [`Interim::flooded`] says why. At most one read
//! buffer's worth of heads is parsed after the bound, where a server streaming `100
//! Continue` used to hold the request and a core for as long as it liked.

use crate::h1::parse::{MAX_INTERIM, MAX_INTERIM_BYTES};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The interim responses of one connection's current request (cheap to clone: one count).
#[derive(Clone, Debug, Default)]
pub struct Interim(Arc<State>);

#[derive(Debug, Default)]
struct State {
    heads: AtomicU32,
    bytes: AtomicUsize,
    flooded: AtomicBool,
    close: Notify,
}

impl Interim {
    /// Counts `req`'s interim responses, from zero (HTTP/1.1 carries one request at a time).
    pub fn watch<B>(&self, req: &mut http::Request<B>) {
        self.0.heads.store(0, Ordering::Relaxed);
        self.0.bytes.store(0, Ordering::Relaxed);
        let state = Arc::clone(&self.0);
        hyper::ext::on_informational(req, move |res| {
            let heads = state.heads.fetch_add(1, Ordering::Relaxed) + 1;
            let size = head_size(res.headers());
            let bytes = state.bytes.fetch_add(size, Ordering::Relaxed) + size;
            if heads > MAX_INTERIM || bytes > MAX_INTERIM_BYTES {
                state.flooded.store(true, Ordering::Release);
                state.close.notify_one();
            }
        });
    }

    /// The connection was dropped for an interim flood (its request failed for that).
    pub fn flooded(&self) -> bool {
        self.0.flooded.load(Ordering::Acquire)
    }

    /// Resolves when the bound is passed: the driver then drops the connection.
    pub(super) async fn passed(&self) {
        self.0.close.notified().await;
    }
}

/// A head's size on the wire, near enough: the status line and each `name: value` line
/// (hyper shows the parsed head, not its bytes).
fn head_size(headers: &http::HeaderMap) -> usize {
    const STATUS_LINE: usize = "HTTP/1.1 100 Continue\r\n\r\n".len();
    let lines: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    STATUS_LINE + lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_sized_by_its_lines() {
        let mut h = http::HeaderMap::new();
        assert_eq!(head_size(&h), 25);
        h.insert("link", "abc".parse().unwrap());
        assert_eq!(head_size(&h), 25 + 11);
    }
}
