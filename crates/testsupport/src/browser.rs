//! Headless Chromium for tests of pages: a DOM after the page's scripts ran, a screenshot,
//! and the checks both need.
//!
//! Chromium is expected at [`CHROMIUM`] (`.ci/run` installs Debian's package). Without it
//! [`chromium`] panics, unless `TAILGUARD_SKIP_BROWSER=1` says to skip. Every run is killed
//! after [`TIMEOUT`], and each gets a profile directory of its own under the test's
//! [`workdir`], removed by [`clean`] after a pass (kept with `TAILGUARD_KEEP_HTML=1`).

use crate::process::{drain, wait_or_kill};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// A browser run that has not ended by then is killed and the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The browser, or `None` when it is missing and the caller asked to skip.
///
/// # Panics
/// When Chromium is missing and `TAILGUARD_SKIP_BROWSER` is not `1`.
pub fn chromium() -> Option<&'static str> {
    if Path::new(CHROMIUM).exists() {
        return Some(CHROMIUM);
    }
    if std::env::var("TAILGUARD_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!("{CHROMIUM} missing and TAILGUARD_SKIP_BROWSER=1: skipping the browser test");
        return None;
    }
    panic!(
        "{CHROMIUM} is missing: install Debian's `chromium` package (.ci/run does), \
         or set TAILGUARD_SKIP_BROWSER=1 to skip the browser tests"
    );
}

/// A fresh directory for one test's files.
///
/// # Panics
/// When it cannot be created.
pub fn workdir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tailguard-html-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes a passing test's files, unless `TAILGUARD_KEEP_HTML=1`.
pub fn clean(dir: &Path) {
    if std::env::var("TAILGUARD_KEEP_HTML").as_deref() == Ok("1") {
        eprintln!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// What one browser run printed.
#[derive(Debug)]
pub struct Output {
    /// Standard output (the DOM, with `--dump-dom`).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs headless `browser` on `url` in a `width` x `height` window with `extra` flags,
/// its profile in `dir`, killing it after [`TIMEOUT`].
///
/// # Panics
/// When Chromium cannot start, runs out of time, or exits unsuccessfully.
pub fn run(browser: &str, dir: &Path, url: &str, size: (u32, u32), extra: &[String]) -> Output {
    // A profile per run: two browsers sharing one would wait on its lock.
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let profile = dir.join(format!("profile-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args([
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={},{}", size.0, size.1))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {browser}: {e}"));
    // Drain the pipes while waiting: a full pipe would stall the browser until the timeout.
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait_or_kill(&mut child, TIMEOUT);
    let out = Output {
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    match status {
        Some(status) => assert!(
            status.success(),
            "chromium {extra:?} exited with {status}; stderr:\n{}",
            out.stderr
        ),
        None => panic!(
            "chromium {extra:?} still running after {TIMEOUT:?}: killed; stderr:\n{}",
            out.stderr
        ),
    }
    out
}

/// The DOM of `url` once its scripts had `budget` of virtual time (timers fire, requests
/// complete) after load.
pub fn dump_dom(
    browser: &str,
    dir: &Path,
    url: &str,
    size: (u32, u32),
    budget: Duration,
) -> Output {
    let extra = [
        "--dump-dom".to_owned(),
        format!("--virtual-time-budget={}", budget.as_millis()),
    ];
    run(browser, dir, url, size, &extra)
}

/// A screenshot of `url` written to `png` (after `extra` flags' effects), as bytes.
///
/// # Panics
/// When the browser fails or writes no file.
pub fn screenshot(
    browser: &str,
    dir: &Path,
    url: &str,
    size: (u32, u32),
    png: &Path,
    extra: &[String],
) -> Vec<u8> {
    let mut flags = vec![format!("--screenshot={}", png.display())];
    flags.extend_from_slice(extra);
    run(browser, dir, url, size, &flags);
    std::fs::read(png).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", png.display()))
}

/// Width and height from a PNG's IHDR chunk, after checking the signature.
///
/// # Panics
/// When `png` is not a PNG.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 24, "a PNG of {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR", "the first chunk of a PNG is IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

/// Values of `src=`, `href=` and `url(` in `text` that point to the network.
pub fn network_references(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attr in ["src=", "href=", "url("] {
        for (at, _) in text.match_indices(attr) {
            let value: String = text[at + attr.len()..]
                .trim_start_matches(['"', '\'', ' '])
                .chars()
                .take_while(|c| !matches!(c, '"' | '\'' | ' ' | ')' | '>'))
                .collect();
            let lower = value.to_ascii_lowercase();
            if ["http://", "https://", "//"]
                .iter()
                .any(|s| lower.starts_with(s))
            {
                found.push(value);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn network_references_are_found() {
        let page = "<img src=\"https://x/y.png\"><a href='//cdn/z'>a</a><a href=\"#top\">b</a>";
        assert_eq!(
            super::network_references(page),
            ["https://x/y.png", "//cdn/z"]
        );
    }
}
