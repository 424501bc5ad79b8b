//! Which of the proxy's serving threads the code runs on: 0 on the thread that started the
//! proxy (and on any thread not its own), k on the k-th thread it added for `--threads`
//! ([`crate::start`]). Each serving thread accepts on its own listener (`SO_REUSEPORT`), serves
//! those connections on its own runtime and keeps its own upstream connections
//! ([`crate::upstream::Upstreams`]), so a request never waits on another thread's task.

use std::cell::Cell;

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// This thread's serving index.
pub fn index() -> usize {
    INDEX.with(Cell::get)
}

/// Marks this thread as serving thread `k`.
pub fn set(k: usize) {
    INDEX.with(|i| i.set(k));
}
