//! `/dashboard.json`, bounded: the figures are copied out of the live state (each lock held
//! only for a copy) and rendered after, into an answer that never passes
//! [`MAX_ANSWER_BYTES`] however many services, endpoints and samples the proxy holds.
//!
//! 1. Rows: [`MAX_ROWS`] endpoint addresses a service, the rest counted in
//!    `endpoints_omitted`.
//! 2. History: the samples after `since` (five minutes at most), each with its first
//!    [`MAX_SERIES`] endpoints; the newest samples of every service alike, as many as
//!    [`MAX_POINTS`] allows (a sample and each of its endpoint entries are a point), the
//!    older ones counted in `history_omitted`.
//! 3. Bytes: written into a buffer that refuses to grow past [`MAX_ANSWER_BYTES`]; an
//!    answer that would is cut (histories first, then services) and written again.
//!
//! `cut` names the bound that cut an answer; `null` when nothing was left out.

use super::{by_address, cost_unit, Board, EndpointRow, ServiceBoard, TICK};
use crate::shared::Shared;
use bytes::Bytes;
use std::time::Duration;
use tailguard_record::live::{EndpointWindow, HISTORY, WINDOW};

/// The largest `/dashboard.json` answer: 2 MiB (five minutes of 10 services of 20 endpoints
/// take about 1.6 MB; a small proxy's, 150 KB).
pub const MAX_ANSWER_BYTES: usize = 2 << 20;
/// Endpoint rows a service shows at most.
pub const MAX_ROWS: usize = 256;
/// Endpoints a history sample lists at most (a chart of more lines is unreadable).
pub const MAX_SERIES: usize = 64;
/// Samples and their endpoint entries in one answer at most (each writes some 25 bytes).
pub const MAX_POINTS: usize = 64_000;

/// `/dashboard.json` for the query string `query` (`since=N`, a whole number; none: the
/// whole history), or why the query is wrong.
///
/// # Errors
/// A `since` that is not a sample number.
pub fn json(shared: &Shared, query: Option<&str>) -> Result<Bytes, String> {
    let mut since = 0;
    // Other parameters (a cache buster) are ignored.
    for kv in query.into_iter().flat_map(|q| q.split('&')) {
        if let Some(("since", n)) = kv.split_once('=') {
            since = n
                .parse()
                .map_err(|_| format!("since: {n:?} is not a sample number\n"))?;
        }
    }
    Ok(render(board(shared, since), MAX_ANSWER_BYTES))
}

/// The dashboard's figures, with the newest history samples after `since` within
/// [`MAX_POINTS`].
fn board(shared: &Shared, since: u64) -> Board {
    let now = shared.clock.now();
    let upto = shared.live.published();
    let services = shared.services();
    let lives: Vec<_> = services.iter().map(|s| s.live(&shared.live)).collect();
    let shapes: Vec<(usize, usize)> = lives
        .iter()
        .map(|l| l.history_shape(since, upto, MAX_SERIES))
        .collect();
    let newest = newest_within(&shapes, MAX_POINTS);
    let mut cut = Vec::new();
    let services = services
        .iter()
        .zip(&lives)
        .zip(&shapes)
        .map(|((s, live), &(n, _))| {
            let history = live.history_copy(since, upto, newest, MAX_SERIES);
            if history.len() < n && cut.is_empty() {
                cut.push(format!(
                    "history cut to the newest {newest} samples: an answer holds \
                     {MAX_POINTS} samples and endpoint entries at most"
                ));
            }
            let mut b = service_board(s, live, now);
            if b.endpoints_omitted > 0 && !cut.iter().any(|c| c.starts_with("endpoint")) {
                cut.push(format!("endpoint rows cut to {MAX_ROWS} a service"));
            }
            b.history_omitted = n - history.len();
            b.history = history;
            b
        })
        .collect();
    Board {
        boot: std::process::id(),
        at_ms: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
        tick_ms: u64::try_from(TICK.as_millis()).unwrap_or(1000),
        window_s: WINDOW,
        history_len: HISTORY,
        draining: shared.draining(),
        cut: (!cut.is_empty()).then(|| cut.join("; ")),
        services,
    }
}

/// The most samples every service may keep (its newest) within `budget` points, each
/// service's entries per sample taken at its average. `shapes` are (samples, entries).
fn newest_within(shapes: &[(usize, usize)], budget: usize) -> usize {
    let points = |k: usize| -> usize {
        shapes
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|&(n, e)| {
                let kept = k.min(n);
                kept + (e * kept).div_ceil(n)
            })
            .sum()
    };
    (0..=HISTORY)
        .rev()
        .find(|&k| points(k) <= budget)
        .unwrap_or(0)
}

/// One service's figures (its history is added after).
fn service_board(
    s: &crate::service::Service,
    live: &tailguard_record::live::Live,
    now: Duration,
) -> ServiceBoard {
    let endpoints = s.endpoints();
    let (_, retries_left) = endpoints.retries(now);
    let mut windows = live.endpoint_windows();
    // An endpoint with no attempt in the window has a share of none of them.
    let none = EndpointWindow {
        share: (!windows.is_empty()).then_some(0.0),
        ..EndpointWindow::default()
    };
    let mut views = by_address(endpoints.views(now));
    let endpoints_omitted = views.len().saturating_sub(MAX_ROWS);
    views.truncate(MAX_ROWS);
    let rows = views
        .into_iter()
        .map(|view| EndpointRow {
            window: windows.remove(&view.addr).unwrap_or_else(|| none.clone()),
            view,
        })
        .collect();
    ServiceBoard {
        name: s.config.name.clone(),
        client: s.config.arm.summary(),
        cost_unit: cost_unit(&s.config.arm.policy),
        window: live.window(),
        in_flight: live.in_flight(),
        retries_left,
        health_panic: endpoints.health_panic(),
        routes: s
            .route_lives()
            .map(|(name, live)| super::RouteRow {
                name: name.to_owned(),
                window: live.window(),
            })
            .collect(),
        endpoints: rows,
        endpoints_omitted,
        history: Vec::new(),
        history_omitted: 0,
    }
}

/// `board` as JSON within `cap` bytes: cut (every history, then half the services, until it
/// fits) where it would not fit.
fn render(mut board: Board, cap: usize) -> Bytes {
    let (services, before) = (board.services.len(), board.cut.take());
    let mut why: Vec<String> = before.into_iter().collect();
    loop {
        board.cut = (!why.is_empty()).then(|| why.join("; "));
        let mut out = Capped(Vec::new(), cap);
        if serde_json::to_writer(&mut out, &board).is_ok() {
            return out.0.into();
        }
        if board.services.iter().any(|s| !s.history.is_empty()) {
            for s in &mut board.services {
                s.history_omitted += s.history.len();
                s.history = Vec::new();
            }
            why.push(format!(
                "history left out: the answer would pass {cap} bytes"
            ));
        } else if board.services.is_empty() {
            return format!("{{\"cut\":\"the answer would pass {cap} bytes\"}}").into();
        } else {
            board.services.truncate(board.services.len() / 2);
            let left = services - board.services.len();
            let said = format!("{left} services left out: the answer would pass {cap} bytes");
            match why.last_mut() {
                Some(last) if last.contains(" services left out") => *last = said,
                _ => why.push(said),
            }
        }
    }
}

/// A buffer that refuses to grow past its cap: serializing into it stops there.
struct Capped(Vec<u8>, usize);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > self.1 {
            return Err(std::io::Error::other("past the answer's cap"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
