//! One body's idle timer, shared by the request side ([`crate::request_body`]) and the response
//! side ([`crate::response_body`]): how long the other end has kept the proxy waiting since its
//! last frame. It is armed at the first poll that finds no data, re-armed at the first such
//! poll after each frame (one timer per body, reset rather than re-created), and only ever
//! runs while the proxy is actually waiting for that end.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// See the module docs.
#[derive(Debug)]
pub struct IdleTimer {
    idle: Option<Duration>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// A frame came since the timer was last armed.
    active: bool,
}

impl IdleTimer {
    /// A timer firing after `idle` without data (`None`: never).
    pub fn new(idle: Option<Duration>) -> Self {
        Self {
            idle,
            sleep: None,
            active: true,
        }
    }

    /// A frame came.
    pub fn activity(&mut self) {
        self.active = true;
    }

    /// Called when a poll found no data: the idle time when it has run out.
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Option<Duration> {
        let idle = self.idle?;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        if std::mem::take(&mut self.active) {
            sleep.as_mut().reset(Instant::now() + idle);
        }
        sleep.as_mut().poll(cx).is_ready().then_some(idle)
    }
}
