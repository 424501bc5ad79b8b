//! A run in progress, as each scenario's module fills it.

use crate::console::Console;
use crate::live;
use crate::results::BenchReport;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A run in progress: the report so far and where to talk.
#[derive(Debug)]
pub(crate) struct Run<'a> {
    pub report: BenchReport,
    pub console: &'a Console,
    pub(crate) stop: Arc<AtomicBool>,
}

impl Run<'_> {
    /// True once Ctrl-C asked to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Adds a finished arm (and its note); true when the run must stop (Ctrl-C).
    pub(crate) fn record(&mut self, done: live::Outcome) -> bool {
        self.report.arms.push(done.arm);
        self.report.notes.extend(done.note);
        if done.interrupted || self.stopped() {
            self.report.interrupted = true;
        }
        self.report.interrupted
    }

    /// True (and the report marked interrupted) once Ctrl-C asked to stop: checked before
    /// each arm so none starts after the request.
    pub fn halt(&mut self) -> bool {
        if self.stopped() {
            self.report.interrupted = true;
        }
        self.report.interrupted
    }
}
