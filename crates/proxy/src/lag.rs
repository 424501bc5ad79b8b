//! The event loop's own delay: how late a timer due every [`PERIOD`] runs. A loop that is busy
//! with something else (a long page render, a blocking call, a burst of periodic work) delays
//! every request waiting on it by as much, so this is the floor of the proxy's added tail, read
//! as `tailguard_proxy_event_loop_delay_seconds`. Includes tokio's timer rounding (up to 1 ms).

use crate::shared::Shared;
use std::future::Future;
use std::sync::Weak;
use std::time::Duration;
use tokio::time::Instant;

/// How often the loop is checked.
pub const PERIOD: Duration = Duration::from_millis(10);

/// Records each check's lateness until the proxy is gone.
///
/// Two checks are armed at a time, a period apart. tokio's timer wakes its driver (a write to
/// the runtime's eventfd, and a spare turn of the loop after it) whenever a timer is armed for
/// earlier than the driver's next wake-up; a check armed only after the last one fired was
/// always that, so an idle proxy made 100 such writes a second. Each new check is armed while
/// the one before it, due earlier, is still pending: never the earliest, it wakes nothing.
pub async fn watch(shared: Weak<Shared>) {
    let start = Instant::now();
    let mut next = Box::pin(tokio::time::sleep_until(start + PERIOD));
    let mut after = Box::pin(tokio::time::sleep_until(start + 2 * PERIOD));
    loop {
        // `after` is polled too, so that it is armed (a sleep is, at its first poll) before
        // `next` fires; it cannot be due first.
        std::future::poll_fn(|cx| {
            let _ = after.as_mut().poll(cx);
            next.as_mut().poll(cx)
        })
        .await;
        let now = Instant::now();
        let late = now.saturating_duration_since(next.deadline());
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.metrics.event_loop_delay.observe(late.as_secs_f64());
        drop(shared);
        if late < PERIOD {
            // The fired check becomes the one after next, armed at once (`reset` arms it).
            std::mem::swap(&mut next, &mut after);
            let following = next.deadline() + PERIOD;
            after.as_mut().reset(following);
        } else {
            // A stalled loop: the check due meanwhile would fire at once, a second sample of
            // the same stall. One sample a stall, the next check a period from now.
            next.as_mut().reset(now + PERIOD);
            after.as_mut().reset(now + 2 * PERIOD);
        }
    }
}
