//! What every parser's property suite (`tests/fuzz.rs` in text, histogram, fleet, sim, and the
//! proxy's `yaml_fuzz.rs`) needs alike: a wall-clock bound per case, so a parser that is slow
//! on some input fails its suite instead of hanging it, and mutations of a valid YAML file
//! (structured-but-wrong input reaches far deeper into a parser than random bytes do).
//! A dev-dependency only.

use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Runs `f`, failing when it takes `bound` or longer: far above what any case takes (a few
/// milliseconds), so a case near it is a hang in the making.
#[allow(clippy::disallowed_methods)] // the bound under test is wall-clock time
pub fn timed<T>(bound: Duration, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    assert!(took < bound, "took {took:?} (bound {bound:?})");
    out
}

/// Values that broke or nearly broke a parser somewhere: out-of-range numbers, YAML syntax
/// pieces, anchors, deep nesting, nothing.
pub const TRICKY: &[&str] = &[
    "-1",
    "0",
    "1e309",
    "1e300",
    "1e-300",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "4294967296",
    "1000000000",
    "999999999999999999999",
    "NaN",
    "~",
    "[",
    "{",
    "'",
    "\"",
    "&a",
    "*a",
    "0s",
    "99999999999999h",
    "[[[[[[[[[[",
    "",
];

/// `doc`, a valid file, with one to four lines changed: a value replaced by one of
/// [`TRICKY`], `extra` or a short random string, a line dropped, repeated, indented or
/// outdented, or junk appended to it.
pub fn mutated(doc: &'static str, extra: &'static [&'static str]) -> impl Strategy<Value = String> {
    let lines: Vec<&'static str> = doc.lines().collect();
    let n = lines.len();
    let junk = prop_oneof![
        proptest::sample::select(TRICKY).prop_map(str::to_owned),
        proptest::sample::select(if extra.is_empty() { TRICKY } else { extra })
            .prop_map(str::to_owned),
        "\\PC{0,12}"
    ];
    proptest::collection::vec((0..n.max(1), 0usize..6, junk), 1..5).prop_map(move |edits| {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        for (at, op, junk) in edits {
            let at = at.min(l.len().saturating_sub(1));
            match op {
                _ if l.is_empty() => l.push(junk),
                0 => match l[at].split_once(": ") {
                    Some((key, _)) => l[at] = format!("{key}: {junk}"),
                    None => l[at] = junk,
                },
                1 => drop(l.remove(at)),
                2 => l.insert(at, l[at].clone()),
                3 => l[at] = format!("  {}", l[at]),
                4 => l[at] = l[at].trim_start().to_owned(),
                _ => l[at].push_str(&junk),
            }
        }
        l.join("\n")
    })
}
