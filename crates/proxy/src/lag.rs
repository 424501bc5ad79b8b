//! The event loop's own delay: how late a timer due every [`PERIOD`] runs. A loop that is busy
//! with something else (a long page render, a blocking call, a burst of periodic work) delays
//! every request waiting on it by as much, so this is the floor of the proxy's added tail, read
//! as `tailguard_proxy_event_loop_delay_seconds`. Includes tokio's timer rounding (up to 1 ms).

use crate::shared::Shared;
use std::sync::Weak;
use std::time::Duration;
use tokio::time::Instant;

/// How often the loop is checked.
pub const PERIOD: Duration = Duration::from_millis(10);

/// Records each check's lateness until the proxy is gone.
pub async fn watch(shared: Weak<Shared>) {
    loop {
        let due = Instant::now() + PERIOD;
        tokio::time::sleep_until(due).await;
        let late = Instant::now().saturating_duration_since(due);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.metrics.event_loop_delay.observe(late.as_secs_f64());
    }
}
