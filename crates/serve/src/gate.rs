//! A backend's run state (running, paused, down), read on every socket poll.
//!
//! The schedule driver ([`crate::driver`]) sets it; the accept loop and every connection's I/O
//! read it. The fast path is one atomic load; waiting (while paused) goes through a `watch`
//! channel, whose `wait_for` checks the current value first so a resume is never missed.

use std::sync::atomic::{AtomicU8, Ordering};
use tokio::sync::watch;

/// What a backend is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RunState {
    /// Accepting, reading and answering.
    Running = 0,
    /// SIGSTOP-like: connections stay open (new ones wait in the kernel's backlog) but nothing
    /// is read, accepted or written until resumed.
    Paused = 1,
    /// Refusing connections: the listener is closed and open connections are dropped.
    Down = 2,
}

impl RunState {
    fn from_u8(v: u8) -> RunState {
        match v {
            1 => RunState::Paused,
            2 => RunState::Down,
            _ => RunState::Running,
        }
    }

    /// Lower-case name for the control endpoint.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Paused => "paused",
            RunState::Down => "down",
        }
    }
}

/// The shared run state of one backend.
#[derive(Debug)]
pub struct Gate {
    state: AtomicU8,
    tx: watch::Sender<RunState>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            state: AtomicU8::new(0),
            tx: watch::Sender::new(RunState::Running),
        }
    }
}

impl Gate {
    /// The current state (one atomic load).
    pub fn state(&self) -> RunState {
        RunState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// True unless paused (the per-poll check of connection I/O).
    pub fn is_paused(&self) -> bool {
        self.state() == RunState::Paused
    }

    /// Changes the state and wakes every waiter.
    pub fn set(&self, state: RunState) {
        self.state.store(state as u8, Ordering::Release);
        self.tx
            .send_if_modified(|s| std::mem::replace(s, state) != state);
    }

    /// A receiver for waiting on changes.
    pub fn subscribe(&self) -> watch::Receiver<RunState> {
        self.tx.subscribe()
    }

    /// Returns once the state is not `Paused`.
    pub async fn unpaused(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|s| *s != RunState::Paused).await;
    }

    /// Returns once the state is `Down`.
    pub async fn down(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|s| *s == RunState::Down).await;
    }
}
