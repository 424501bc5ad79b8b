//! Arbitrary input for the duration grammar and the YAML reader: an error or a value, never a
//! panic, each case within a generous time bound.

use proptest::prelude::*;
use std::time::Duration;
use tailguard_text::duration::{format_duration, parse_duration};
use tailguard_text::yaml::{check_shape, from_yaml};

/// Far above what any case takes (microseconds): a case near it is a hang in the making.
const CASE_BOUND: Duration = Duration::from_secs(2);

/// Runs `f`, failing when it takes [`CASE_BOUND`] or longer.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    tailguard_fuzzkit::timed(CASE_BOUND, f)
}

/// Durations as people get them wrong: numbers of any size and shape, real and made-up units.
fn duration_like() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        "[0-9]{1,30}",
        "[0-9]{0,5}\\.[0-9]{0,5}",
        "[0-9]{1,3}e[0-9]{1,3}",
        Just("18446744073709551616".to_owned()),
        Just("1e309".to_owned()),
        Just("-1".to_owned()),
        Just(".".to_owned()),
        Just("NaN".to_owned()),
    ];
    let unit = prop_oneof![
        Just(""),
        Just("ns"),
        Just("us"),
        Just("µs"),
        Just("ms"),
        Just("s"),
        Just("m"),
        Just("min"),
        Just("h"),
        Just("d"),
        Just("y"),
        Just("ß"),
    ];
    proptest::collection::vec((number, " ?", unit), 1..6).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(n, space, u)| format!("{n}{space}{u}"))
            .collect::<String>()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn any_text_is_a_duration_or_an_error(text in "\\PC{0,40}") {
        let _ = timed(|| parse_duration(&text));
    }

    #[test]
    fn duration_like_text_parses_within_range_or_is_refused(text in duration_like()) {
        if let Ok(d) = timed(|| parse_duration(&text)) {
            // What parses formats and parses back to itself.
            prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}

/// Text that looks like YAML: keys, indicators, brackets, quotes and scalars in any order.
fn yaml_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("a: "),
        Just("- "),
        Just("? "),
        Just(": "),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just(", "),
        Just("'"),
        Just("\""),
        Just("\\"),
        Just("# "),
        Just("|\n"),
        Just(">-\n"),
        Just("&x "),
        Just("*x "),
        Just("!!str "),
        Just("\n"),
        Just("\n  "),
        Just("\n    "),
        Just("---\n"),
        Just("1e309"),
        Just("x"),
        Just("\t"),
    ];
    proptest::collection::vec(token, 0..200).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6_000))]

    #[test]
    fn the_shape_check_and_the_reader_never_panic(text in prop_oneof![yaml_like(), "\\PC{0,300}"]) {
        timed(|| {
            let _ = check_shape(&text);
            let _ = from_yaml::<serde_yaml_ng::Value>(&text, "fuzz");
        });
    }

    #[test]
    fn deep_nesting_of_any_kind_is_refused_quickly(kind in 0usize..5, levels in 33usize..20_000) {
        let text = match kind {
            0 => format!("k: {}x\n", "[".repeat(levels)),
            1 => format!("k: {}x\n", "{a: ".repeat(levels)),
            2 => format!("{}x\n", "- ".repeat(levels)),
            3 => format!("{}x\n", "? ".repeat(levels)),
            // Indentation: one key per line, each one space deeper (at most 1,000 lines).
            _ => (0..levels.min(1_000)).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect(),
        };
        let err = timed(|| from_yaml::<serde_yaml_ng::Value>(&text, "deep")).unwrap_err();
        prop_assert!(err.to_string().contains("nested deeper than 32 levels"), "{}", err);
    }
}
