//! A notice a connection's task races against its work on every wake-up, polled only when it
//! may have come.
//!
//! tokio's `Notified` (and what is built on it, such as a `watch` receiver's `wait_for`) takes
//! its waiter list's lock on every poll while it waits, to swap in the poller's waker. A
//! connection's loop that selects between its socket and a close or shutdown notice polls the
//! notice each time the task wakes for the socket, twice a request or more, and the proxy's
//! shutdown notice is one list shared by every connection on every serving thread. [`Quiet`]
//! polls the notice once to register, and after that only when the caller's cheap check (an
//! atomic flag or version the notifier sets before it notifies) says it may have come, or when
//! the task's waker changed and must be registered anew; otherwise it answers pending at once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// `inner`, polled only when it may be ready ([module docs](self)).
#[derive(Debug)]
pub struct Quiet<F> {
    inner: F,
    /// The waker `inner` was last polled with (`None`: not polled yet).
    registered: Option<Waker>,
}

impl<F: Future + Unpin> Quiet<F> {
    /// Wraps `inner` (pin a `!Unpin` future first and pass `Pin<&mut F>`).
    pub fn new(inner: F) -> Quiet<F> {
        Quiet {
            inner,
            registered: None,
        }
    }

    /// Polls `inner` when `maybe` (the caller's check that its event may have come: it must be
    /// true from the moment the notifier acts, so a wake-up for it is never left unpolled), on
    /// the first poll, or when `cx`'s waker is not the one `inner` last registered.
    pub fn poll_if(&mut self, cx: &mut Context<'_>, maybe: bool) -> Poll<F::Output> {
        let same = self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if same && !maybe {
            return Poll::Pending;
        }
        if !same {
            self.registered = Some(cx.waker().clone());
        }
        Pin::new(&mut self.inner).poll(cx)
    }

    /// A future of [`Quiet::poll_if`] with `maybe` asked at each poll, for a `select!` branch.
    pub fn when<'a>(
        &'a mut self,
        maybe: impl Fn() -> bool + 'a,
    ) -> impl Future<Output = F::Output> + 'a {
        std::future::poll_fn(move |cx| self.poll_if(cx, maybe()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    /// Counts its polls; ready once `ready` is set.
    struct Counted<'a> {
        polls: &'a AtomicUsize,
        ready: &'a AtomicBool,
    }

    impl Future for Counted<'_> {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            if self.ready.load(Ordering::Relaxed) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn polled_once_to_register_then_only_when_it_may_be_ready_or_the_waker_changed() {
        let (polls, ready) = (AtomicUsize::new(0), AtomicBool::new(false));
        let mut quiet = Quiet::new(Counted {
            polls: &polls,
            ready: &ready,
        });
        let (a, b) = (Waker::from(Arc::new(Noop)), Waker::from(Arc::new(Noop)));
        let mut cx = Context::from_waker(&a);
        for _ in 0..5 {
            assert!(quiet.poll_if(&mut cx, false).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 1, "registered once");
        // Another task's waker: registered anew.
        let mut other = Context::from_waker(&b);
        assert!(quiet.poll_if(&mut other, false).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 2);
        assert!(quiet.poll_if(&mut other, false).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 2);
        // The check says it may have come: polled, pending while it has not.
        assert!(quiet.poll_if(&mut other, true).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 3);
        ready.store(true, Ordering::Relaxed);
        // Not asked, it stays pending though ready: the caller's check must cover the event.
        assert!(quiet.poll_if(&mut other, false).is_pending());
        assert!(quiet.poll_if(&mut other, true).is_ready());
        assert_eq!(polls.load(Ordering::Relaxed), 4);
    }

    #[tokio::test]
    async fn a_notify_is_seen_through_it() {
        let notify = Arc::new(tokio::sync::Notify::new());
        let asked = Arc::new(AtomicBool::new(false));
        let notified = notify.notified();
        tokio::pin!(notified);
        let mut quiet = Quiet::new(notified.as_mut());
        // Registered and pending: the first poll adds the waiter.
        let flag = asked.clone();
        assert!(tokio::time::timeout(
            std::time::Duration::ZERO,
            quiet.when(|| flag.load(Ordering::Acquire))
        )
        .await
        .is_err());
        let (n, a) = (notify.clone(), asked.clone());
        let notifier = tokio::spawn(async move {
            a.store(true, Ordering::Release);
            n.notify_waiters();
        });
        quiet.when(|| asked.load(Ordering::Acquire)).await;
        notifier.await.expect("the notifier");
    }
}
