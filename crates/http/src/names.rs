//! The header names a connection's last head had, kept so that the next head's are recognised
//! by their bytes instead of parsed again.
//!
//! Why (issue 49): `HeaderName::from_bytes` maps every byte through a table and then matches
//! the result against the standard names, about 115 instructions a field here, and a name that
//! is not a standard one is copied into an allocation of its own. A client (or an endpoint)
//! sends the same fields in the same order on every request (or response) of a connection:
//! nginx's five response fields, a browser's dozen, a gRPC client's. The name at a position is
//! compared with the bytes the connection sent there last time, as two words for a name of up
//! to 16 bytes (a longer one with the name itself, ASCII case ignored, as `from_bytes`
//! lower-cases), and cloned when equal: a standard name is a copy, another one a reference
//! count.
//!
//! A field whose bytes differ is parsed as before and takes the position's place, so a head
//! that differs costs what it did plus a comparison and a clone a field. At most [`MAX_NAMES`]
//! are kept (48 bytes each on a 64-bit target), none until the connection's first head, and
//! room for as many as that head had ([`Names::fit`]).

use http::header::{HeaderName, InvalidHeaderName};

/// Names kept per connection, at most: the first this many fields of a head.
pub const MAX_NAMES: usize = 16;

/// Longest name compared by its bytes as sent; a longer one is compared with the name.
const SHORT: usize = 16;

/// The names of a connection's last head, by position ([module docs](self)).
#[derive(Debug, Default)]
pub struct Names(Vec<Known>);

/// A name, and the bytes it was sent as when they were at most [`SHORT`].
#[derive(Debug)]
struct Known {
    /// The bytes as sent, as two little-endian words, zero past them ([`word`]).
    sent: [u64; 2],
    /// How many bytes they were; 0 for a name longer than [`SHORT`].
    len: u8,
    name: HeaderName,
}

impl Known {
    fn of(raw: &[u8], name: HeaderName) -> Known {
        let n = raw.len();
        if n > SHORT {
            return Known {
                sent: [0; 2],
                len: 0,
                name,
            };
        }
        let (a, b) = raw.split_at(n.min(8));
        Known {
            sent: [word(a), word(b)],
            len: n as u8,
            name,
        }
    }

    /// `raw` makes this name.
    fn is(&self, raw: &[u8]) -> bool {
        let n = raw.len();
        if self.len == 0 {
            return spells(raw, self.name.as_str().as_bytes());
        }
        n == usize::from(self.len)
            && word(&raw[..n.min(8)]) == self.sent[0]
            && (n <= 8 || word(&raw[8..]) == self.sent[1])
    }
}

impl Names {
    /// The name of field `i` (from 0) of a head, whose bytes are `raw`: exactly what
    /// [`HeaderName::from_bytes`] makes of them.
    ///
    /// # Errors
    /// As [`HeaderName::from_bytes`]: `raw` is not a header name.
    pub fn get(&mut self, i: usize, raw: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
        if let Some(known) = self.0.get(i) {
            if known.is(raw) {
                return Ok(known.name.clone());
            }
        }
        let name = HeaderName::from_bytes(raw)?;
        if i < self.0.len() {
            self.0[i] = Known::of(raw, name.clone());
        } else if i == self.0.len() && i < MAX_NAMES {
            self.0.push(Known::of(raw, name.clone()));
        }
        Ok(name)
    }

    /// Makes room for a head of `fields` fields before its first is asked for: the room
    /// the connection's first head needs, no more (a connection that sends `Host` alone keeps
    /// 48 bytes, not a growing vector's 192); later heads grow it as they need.
    pub fn fit(&mut self, fields: usize) {
        if self.0.capacity() == 0 {
            self.0.reserve_exact(fields.min(MAX_NAMES));
        }
    }
}

/// `raw` spells `lower` (a name as `from_bytes` made it: lower case, every byte valid) with
/// ASCII letters in either case. Then `from_bytes(raw)` is `lower`: it lower-cases the letters
/// and keeps every other byte valid in a name as it is. Eight bytes at a time: a byte loop
/// costs about what the parse it would save does.
pub(crate) fn spells(raw: &[u8], lower: &[u8]) -> bool {
    if raw.len() != lower.len() {
        return false;
    }
    let (mut r, mut l) = (raw, lower);
    while r.len() > 8 {
        if lowered(word(&r[..8])) != word(&l[..8]) {
            return false;
        }
        (r, l) = (&r[8..], &l[8..]);
    }
    lowered(word(r)) == word(l)
}

/// The bytes of `s` (at most 8) as a little-endian word, zero above them: two loads that may
/// overlap (a byte read twice lands in the same place both times), not a loop.
fn word(s: &[u8]) -> u64 {
    let n = s.len();
    debug_assert!(n <= 8);
    match n {
        8 => u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        4..=7 => {
            let lo = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            let hi = u32::from_le_bytes([s[n - 4], s[n - 3], s[n - 2], s[n - 1]]);
            u64::from(lo) | (u64::from(hi) << ((n - 4) * 8))
        }
        1..=3 => {
            u64::from(s[0])
                | (u64::from(s[n / 2]) << (n / 2 * 8))
                | (u64::from(s[n - 1]) << ((n - 1) * 8))
        }
        _ => 0,
    }
}

/// `w` with its ASCII upper-case letters lower-cased, every other byte as it is (each byte
/// tested without carries into the next: its top bit is cleared before the additions).
fn lowered(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = ONES * 0x80;
    let low7 = w & !TOPS;
    // A byte's top bit set: at least `A` in the first sum, at least `[` in the second.
    let from_a = low7 + ONES * (0x80 - u64::from(b'A'));
    let past_z = low7 + ONES * (0x80 - u64::from(b'Z') - 1);
    let upper = from_a & !past_z & !w & TOPS;
    w | (upper >> 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_repeated_head_gets_the_names_it_had() {
        let mut names = Names::default();
        let head: [&[u8]; 3] = [b"Content-Type", b"X-Request-Id", b"date"];
        for _ in 0..3 {
            for (i, raw) in head.iter().enumerate() {
                assert_eq!(
                    names.get(i, raw).unwrap(),
                    HeaderName::from_bytes(raw).unwrap()
                );
            }
        }
        assert_eq!(names.0.len(), 3);
        // Another case spells the same name.
        assert_eq!(names.get(1, b"x-REQUEST-id").unwrap(), "x-request-id");
        assert_eq!(names.0.len(), 3);
    }

    #[test]
    fn a_different_field_takes_its_position() {
        let mut names = Names::default();
        for (i, raw) in [&b"a"[..], b"b", b"c"].iter().enumerate() {
            names.get(i, raw).unwrap();
        }
        assert_eq!(names.get(1, b"host").unwrap(), http::header::HOST);
        assert_eq!(names.0.len(), 3);
        assert!(names.0[1].is(b"host") && !names.0[1].is(b"b"));
        assert!(names.0[2].is(b"c"));
        // A position past the ones kept is parsed, not kept.
        assert_eq!(names.get(5, b"d").unwrap(), "d");
        assert_eq!(names.0.len(), 3);
    }

    #[test]
    fn short_names_are_compared_as_sent_and_long_ones_by_case() {
        let mut names = Names::default();
        let long = b"Access-Control-Allow-Origin";
        for raw in [&b"Content-Type"[..], b"date", b"x-sixteen-bytes!", long] {
            names.get(0, raw).unwrap();
            assert!(names.0[0].is(raw), "{raw:?}");
        }
        // A short name sent in another case is parsed again (and kept as sent now).
        names.get(0, b"Content-Type").unwrap();
        assert!(!names.0[0].is(b"content-type"));
        assert_eq!(
            names.get(0, b"content-type").unwrap(),
            http::header::CONTENT_TYPE
        );
        assert!(names.0[0].is(b"content-type"));
        // Same length, one byte apart, at each end and across the word boundary.
        names.get(0, b"x-sixteen-bytes!").unwrap();
        for other in [
            &b"y-sixteen-bytes!"[..],
            b"x-sixteen-bytes?",
            b"x-sixteeN-bytes!",
        ] {
            assert!(!names.0[0].is(other), "{other:?}");
        }
        names.get(0, long).unwrap();
        assert!(names.0[0].is(b"access-control-allow-ORIGIN"));
        assert!(!names.0[0].is(b"access-control-allow-origins"));
    }

    #[test]
    fn bytes_that_are_no_name_are_refused_and_not_kept() {
        let mut names = Names::default();
        names.get(0, b"host").unwrap();
        for bad in [&b""[..], b"ho st", b"h\xc3\xa9", b"host:", b"a\0b", b"x\\y"] {
            assert!(names.get(0, bad).is_err(), "{bad:?}");
            assert!(names.get(1, bad).is_err(), "{bad:?}");
        }
        assert_eq!(names.0.len(), 1);
        // `|` and `~` are name bytes; `\` and `^` (their case-bit twins) must not pass as them.
        names.get(1, b"a|b").unwrap();
        assert!(names.get(1, b"a\\b").is_err());
        names.get(1, b"a~b").unwrap();
        assert_eq!(names.get(1, b"a^b").unwrap(), "a^b");
    }

    #[test]
    fn at_most_max_names_are_kept() {
        let mut names = Names::default();
        for i in 0..MAX_NAMES + 10 {
            let raw = format!("x-{i}");
            assert_eq!(names.get(i, raw.as_bytes()).unwrap(), raw.as_str());
        }
        assert_eq!(names.0.len(), MAX_NAMES);
    }

    #[test]
    fn words_and_case_folding_are_exact() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(word(&[]), 0);
        for n in 1..=8 {
            for s in all.windows(n) {
                let mut padded = [0u8; 8];
                padded[..n].copy_from_slice(s);
                assert_eq!(word(s), u64::from_le_bytes(padded), "{s:?}");
                let folded: Vec<u8> = padded.iter().map(u8::to_ascii_lowercase).collect();
                assert_eq!(lowered(word(s)).to_le_bytes().to_vec(), folded, "{s:?}");
            }
        }
    }

    proptest! {
        /// A byte string spells another exactly when ASCII case folding makes them equal.
        #[test]
        fn spells_is_ascii_case_folding(
            raw in proptest::collection::vec(any::<u8>(), 0..40),
            flips in proptest::collection::vec(any::<bool>(), 40),
        ) {
            let lower = raw.to_ascii_lowercase();
            prop_assert!(spells(&raw, &lower));
            // Any one byte changed (other than by case) is another name.
            for (i, &flip) in flips.iter().enumerate().take(raw.len()) {
                let mut other = lower.clone();
                other[i] = other[i].wrapping_add(if flip { 1 } else { 0x20 });
                let want = raw.eq_ignore_ascii_case(&other);
                prop_assert_eq!(spells(&raw, &other), want);
            }
        }

        /// Whatever came before, `get` says what `from_bytes` says.
        #[test]
        fn get_is_from_bytes(
            heads in proptest::collection::vec(
                proptest::collection::vec(
                    prop_oneof![
                        Just(b"Host".to_vec()),
                        Just(b"host".to_vec()),
                        Just(b"X-a".to_vec()),
                        Just(b"x-A".to_vec()),
                        proptest::collection::vec(any::<u8>(), 0..6),
                        proptest::collection::vec(
                            prop_oneof![Just(b'a'), Just(b'A'), Just(b'|'), Just(b'\\'), Just(b'-')],
                            1..4,
                        ),
                    ],
                    0..6,
                ),
                1..6,
            )
        ) {
            let mut names = Names::default();
            for head in heads {
                for (i, raw) in head.iter().enumerate() {
                    let want = HeaderName::from_bytes(raw).ok();
                    prop_assert_eq!(names.get(i, raw).ok(), want);
                }
            }
        }
    }
}
