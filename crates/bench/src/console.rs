//! Where a bench run talks: the text output (headings and the load generator's interval lines)
//! and, on a terminal, a progress bar that stays below them.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Text output plus an optional progress bar counting planned seconds of load.
#[derive(Clone)]
pub struct Console {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
    bar: Option<ProgressBar>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("bar", &self.bar.is_some())
            .finish()
    }
}

impl Console {
    /// Writes to `out`; with `progress`, also draws a bar on stderr when it is a terminal.
    pub fn new(out: Box<dyn Write + Send>, progress: bool) -> Console {
        let bar = progress.then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {msg:24} [{elapsed_precise}] {wide_bar} {pos}/{len} s",
                )
                .expect("the template is valid")
                .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Console {
            out: Arc::new(Mutex::new(out)),
            bar,
        }
    }

    /// Writes one line above the bar.
    pub fn line(&self, text: &str) {
        let write = || {
            let mut out = self.out.lock().expect("console lock is never poisoned");
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        };
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Adds `secs` planned seconds to the bar.
    pub fn plan(&self, secs: u64) {
        if let Some(bar) = &self.bar {
            bar.inc_length(secs);
        }
    }

    /// Moves the bar on by `secs` measured seconds.
    pub fn advance(&self, secs: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(secs);
        }
    }

    /// Says what runs now.
    pub fn status(&self, msg: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(msg.to_owned());
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A `Write` for the load generator (run without its final report: the bench prints its own
/// table): passes its header and interval lines to the console, advancing the bar one interval
/// per line.
pub(crate) struct LoadLines<'a> {
    console: &'a Console,
    prefix: String,
    interval_s: u64,
    buf: Vec<u8>,
    /// Seconds the bar was advanced by this run.
    pub advanced: u64,
}

impl<'a> LoadLines<'a> {
    pub(crate) fn new(console: &'a Console, prefix: &str, interval: Duration) -> Self {
        LoadLines {
            console,
            prefix: prefix.to_owned(),
            interval_s: interval.as_secs().max(1),
            buf: Vec::new(),
            advanced: 0,
        }
    }

    fn emit(&mut self, line: &str) {
        if !line.starts_with('#') && !line.trim().is_empty() {
            self.console.advance(self.interval_s);
            self.advanced += self.interval_s;
        }
        self.console.line(&format!("{}{line}", self.prefix));
    }
}

impl Write for LoadLines<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            self.emit(&text);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn passes_lines_through_and_counts_intervals() {
        let sink = Shared::default();
        let console = Console::new(Box::new(sink.clone()), false);
        let mut w = LoadLines::new(&console, "baseline | ", Duration::from_secs(5));
        write!(
            w,
            "# sending 100 GET req/s\n#   good/bad/failed\n2026-01-01T00:00:05Z 10/0/0 ...\n\
             2026-01-01T00:00:10Z 10/0/0 ...\n"
        )
        .unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("baseline | # sending"));
        assert!(text.contains("baseline | 2026-01-01T00:00:10Z"));
        assert_eq!(text.lines().count(), 4);
        assert_eq!(w.advanced, 10);
    }
}
