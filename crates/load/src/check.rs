//! Checks on what came back (`--expect-body-sha256`, `--expect-body-contains`): fed the body as
//! it is read, chunk by chunk, so a check holds at most the text's length of it.

use bytes::Bytes;
use tailguard_record::Check;

/// The most bytes `--expect-body-contains` may ask for.
pub const MAX_CONTAINS_BYTES: usize = 64 * 1024;

/// The body checks of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BodyChecks {
    /// The SHA-256 every body must have.
    pub sha256: Option<[u8; 32]>,
    /// Bytes every body must contain.
    pub contains: Option<Bytes>,
}

impl BodyChecks {
    /// True when any body check is asked for (bodies are then read, not only counted).
    pub fn any(&self) -> bool {
        self.sha256.is_some() || self.contains.is_some()
    }

    /// A check of one body, to feed.
    pub(crate) fn start(&self) -> Option<BodyCheck<'_>> {
        self.any().then(|| BodyCheck {
            checks: self,
            digest: self
                .sha256
                .map(|_| ring::digest::Context::new(&ring::digest::SHA256)),
            found: self.contains.as_ref().is_some_and(|t| t.is_empty()),
            window: Vec::new(),
        })
    }
}

/// One body's check in progress.
pub(crate) struct BodyCheck<'a> {
    checks: &'a BodyChecks,
    digest: Option<ring::digest::Context>,
    /// The text was seen.
    found: bool,
    /// The last bytes of the body so far (one short of the text), then the chunk: a text
    /// split between two chunks is found.
    window: Vec<u8>,
}

impl BodyCheck<'_> {
    /// Feeds the next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if let Some(d) = &mut self.digest {
            d.update(chunk);
        }
        let Some(text) = self.checks.contains.as_deref() else {
            return;
        };
        if self.found {
            return;
        }
        self.window.extend_from_slice(chunk);
        if memchr::memmem::find(&self.window, text).is_some() {
            self.found = true;
            self.window = Vec::new();
            return;
        }
        let keep = text.len().saturating_sub(1).min(self.window.len());
        self.window.drain(..self.window.len() - keep);
    }

    /// The first check the whole body fails, if any.
    pub(crate) fn finish(self) -> Option<Check> {
        if let (Some(d), Some(want)) = (self.digest, self.checks.sha256) {
            if d.finish().as_ref() != want {
                return Some(Check::BodySha256);
            }
        }
        (self.checks.contains.is_some() && !self.found).then_some(Check::BodyContains)
    }
}

/// Reads a SHA-256 written as 64 hex digits.
pub fn parse_sha256(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    let bad = || format!("{hex:?} is not a SHA-256: give 64 hex digits (as sha256sum prints)");
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(checks: &BodyChecks, chunks: &[&[u8]]) -> Option<Check> {
        let mut c = checks.start().expect("a check was asked for");
        for chunk in chunks {
            c.feed(chunk);
        }
        c.finish()
    }

    #[test]
    fn the_digest_of_the_whole_body_is_checked() {
        // sha256("hello world"), as sha256sum prints it.
        let hex = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";
        let checks = BodyChecks {
            sha256: Some(parse_sha256(hex).unwrap()),
            contains: None,
        };
        assert_eq!(check(&checks, &[b"hello", b" world"]), None);
        assert_eq!(check(&checks, &[b"hello"]), Some(Check::BodySha256));
        assert_eq!(check(&checks, &[]), Some(Check::BodySha256));
        for bad in ["", "b94d", &hex[1..], &format!("{}zz", &hex[2..])] {
            assert!(parse_sha256(bad).is_err(), "{bad:?}");
        }
        assert!(BodyChecks::default().start().is_none());
    }

    proptest! {
        #[test]
        fn the_text_is_found_wherever_the_chunks_split_it(
            body in proptest::collection::vec(0u8..4, 0..200),
            text in proptest::collection::vec(0u8..4, 1..6),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([body.len()]) {
                chunks.push(&body[at..c]);
                at = c;
            }
            let checks = BodyChecks { sha256: None, contains: Some(Bytes::from(text.clone())) };
            let want = body.windows(text.len()).any(|w| w == text.as_slice());
            prop_assert_eq!(check(&checks, &chunks).is_none(), want);
        }
    }
}
