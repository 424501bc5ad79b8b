//! Arbitrary encoded histograms and interval logs: decoded within the limits or refused,
//! never a panic, never more than the limits allocate, each case within a generous time bound.

use base64::Engine as _;
use proptest::prelude::*;
use std::io::Write as _;
use std::time::Duration;
use tailguard_histogram::log::{self, Limits};
use tailguard_histogram::Histogram;

/// Far above what any case takes (milliseconds): a case near it is a hang in the making.
const CASE_BOUND: Duration = Duration::from_secs(2);

/// Runs `f`, failing when it takes [`CASE_BOUND`] or longer.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    tailguard_fuzzkit::timed(CASE_BOUND, f)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A V2 header with any fields (some of them plausible), then any payload; deflated or not.
fn structured_blob() -> impl Strategy<Value = Vec<u8>> {
    let cookie = prop_oneof![Just(0x1c84_9313u32), Just(0x1c84_9314), any::<u32>()];
    let field = prop_oneof![
        Just(0u64),
        Just(1),
        Just(3),
        Just(3_600_000_000),
        any::<u64>()
    ];
    (
        cookie,
        any::<u32>(),
        prop_oneof![Just(0u32), any::<u32>()],
        prop_oneof![0u32..7, any::<u32>()],
        field.clone(),
        field,
        prop_oneof![Just(1.0f64), any::<f64>()],
        proptest::collection::vec(any::<u8>(), 0..300),
        any::<bool>(),
    )
        .prop_map(
            |(cookie, len, norm, digits, low, high, ratio, payload, deflate)| {
                let mut plain = Vec::new();
                plain.extend(cookie.to_be_bytes());
                plain.extend(len.to_be_bytes());
                plain.extend(norm.to_be_bytes());
                plain.extend(digits.to_be_bytes());
                plain.extend(low.to_be_bytes());
                plain.extend(high.to_be_bytes());
                plain.extend(ratio.to_be_bytes());
                plain.extend(payload);
                if !deflate {
                    return plain;
                }
                let mut z =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                z.write_all(&plain).unwrap();
                let z = z.finish().unwrap();
                let mut out = 0x1c84_9314u32.to_be_bytes().to_vec();
                out.extend((z.len() as u32).to_be_bytes());
                out.extend(z);
                out
            },
        )
}

/// A real encoding with a few bytes changed.
fn mutated_blob() -> impl Strategy<Value = Vec<u8>> {
    let mut h = Histogram::new();
    for v in [1, 10, 250, 250, 9_999, 3_000_000, 3_600_000_000] {
        h.record_us(v);
    }
    let real = base64::engine::general_purpose::STANDARD
        .decode(log::encode(&h).unwrap())
        .unwrap();
    let n = real.len();
    proptest::collection::vec((0..n, any::<u8>()), 1..8).prop_map(move |edits| {
        let mut bytes = real.clone();
        for (at, b) in edits {
            bytes[at] = b;
        }
        bytes
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(9_000))]

    #[test]
    fn any_blob_decodes_within_the_limits_or_is_refused(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..400),
            structured_blob(),
            mutated_blob(),
        ]
    ) {
        if let Ok(h) = timed(|| log::decode(&b64(&bytes))) {
            prop_assert!(h.as_hdr().distinct_values() as u64 <= Limits::TAILGUARD.max_counts);
        }
    }

    #[test]
    fn any_text_is_refused_as_an_encoded_histogram_or_decodes(text in "\\PC{0,200}") {
        let _ = timed(|| log::decode(&text));
    }
}

/// A real log (two tags, three intervals) with lines dropped, repeated, cut or replaced.
fn mutated_log() -> impl Strategy<Value = Vec<u8>> {
    let mut out = Vec::new();
    let mut w = log::Writer::new(&mut out, 1_700_000_000.0, "fuzz").unwrap();
    for s in 0..3 {
        let mut h = Histogram::new();
        h.record_us(100 * (s + 1));
        let at = Duration::from_secs(s);
        w.write(&h, at, Duration::from_secs(1), Some("a")).unwrap();
        w.write(&h, at, Duration::from_secs(1), None).unwrap();
    }
    drop(w);
    let lines: Vec<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let n = lines.len();
    let junk = prop_oneof![
        "\\PC{0,80}",
        Just("#[StartTime: 99999999999999999999.9 (x)]".to_owned()),
        Just("#[BaseTime: 1.5 (x)]".to_owned()),
        Just("Tag=,0.000,1.000,1.0,HISTFAAAAB".to_owned()),
        Just("18446744073709551615.999,0.1,1e308,AAAA".to_owned()),
        Just(
            "Tag=x,1.0,18446744073709551615.0,1.0,HISTFAAAACl4nJNpmSzMwMDAxQABzFCaEUoz".to_owned()
        ),
    ];
    proptest::collection::vec((0..n, 0usize..4, junk), 0..6).prop_map(move |edits| {
        let mut l = lines.clone();
        for (at, op, junk) in edits {
            let at = at.min(l.len().saturating_sub(1));
            match op {
                _ if l.is_empty() => l.push(junk),
                0 => l[at] = junk,
                1 => drop(l.remove(at)),
                2 => l.insert(at, l[at].clone()),
                _ => {
                    let mut cut = l[at].len() / 2;
                    while !l[at].is_char_boundary(cut) {
                        cut -= 1;
                    }
                    l[at].truncate(cut);
                }
            }
        }
        (l.join("\n") + "\n").into_bytes()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    #[test]
    fn any_log_is_read_and_merged_or_refused(
        a in prop_oneof![mutated_log(), proptest::collection::vec(any::<u8>(), 0..300)],
        b in mutated_log(),
    ) {
        timed(|| {
            let _ = log::read(&a);
            if let (Ok(a), Ok(b)) = (log::read_raw(&a), log::read_raw(&b)) {
                let _ = log::merge(&[a, b], None);
            }
            let mut reader = log::LogReader::new(a.as_slice());
            while let Ok(Some(_)) = reader.next_placed() {}
        });
    }
}
