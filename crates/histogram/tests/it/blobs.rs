//! Hostile encoded histograms and interval logs: refused before anything large is allocated.

use base64::Engine as _;
use std::io::Write as _;
use std::time::Duration;
use tailguard_histogram::log::{self, Limits, LogError};
use tailguard_histogram::{Histogram, MAX_US};

const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;

/// The 40-byte V2 header, then `payload`.
fn plain(declared_payload: u32, digits: u32, low: u64, high: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(V2_COOKIE.to_be_bytes());
    out.extend(declared_payload.to_be_bytes());
    out.extend(0u32.to_be_bytes());
    out.extend(digits.to_be_bytes());
    out.extend(low.to_be_bytes());
    out.extend(high.to_be_bytes());
    out.extend(1.0f64.to_be_bytes());
    out.extend(payload);
    out
}

/// `plain` deflated and wrapped, as base64: what `--json` and logs carry.
fn deflated(plain: &[u8]) -> String {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(plain).unwrap();
    let z = z.finish().unwrap();
    let mut out = Vec::new();
    out.extend(V2_COMPRESSED_COOKIE.to_be_bytes());
    out.extend((z.len() as u32).to_be_bytes());
    out.extend(z);
    base64::engine::general_purpose::STANDARD.encode(out)
}

fn reason(text: &str) -> String {
    match log::decode(text) {
        Err(LogError::Encoded(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_tailguard_limit_is_tailguard_s_own_histogram() {
    let ours = Histogram::new().as_hdr().distinct_values() as u64;
    assert_eq!(Limits::TAILGUARD.max_counts, ours);
    // Its largest encoding (every count different and large) decodes.
    let mut h = Histogram::new();
    for (i, v) in (1..MAX_US).step_by(997).enumerate().take(20_000) {
        h.record_n_us(v, 1 + (i as u64 % 1000) * 1_000_000_007);
    }
    let text = log::encode(&h).unwrap();
    assert!(text.len() < Limits::TAILGUARD.max_text(), "{}", text.len());
    assert_eq!(log::decode(&text).unwrap(), h);
}

#[test]
fn a_blob_claiming_4_gib_is_refused_before_allocating() {
    // 300 bytes or so that once made the decoder allocate 4 GiB (4.2 GB) before failing.
    let text = deflated(&plain(u32::MAX, 3, 1, MAX_US, &[0; 200]));
    assert!(text.len() < 400, "{}", text.len());
    let why = reason(&text);
    assert!(
        why.contains("declares a payload of 4294967295 bytes but holds 200"),
        "{why}"
    );
}

#[test]
fn a_deflate_bomb_is_refused_after_the_limit() {
    // 64 MiB of zero counts deflate to 64 KiB: inflating stops after the limit.
    let payload = vec![0u8; 64 << 20];
    let text = deflated(&plain(payload.len() as u32, 3, 1, MAX_US, &payload));
    assert!(text.len() < 200_000, "{}", text.len());
    let why = reason(&text);
    let max = Limits::TAILGUARD.max_inflated();
    assert!(
        why.contains(&format!("inflates to more than {max} bytes")),
        "{why}"
    );
}

#[test]
fn a_range_needing_more_counts_than_allowed_is_refused() {
    // 5 digits over the whole u64 range: 6.2 million counts, 49 MB once allocated.
    let counts = hdrhistogram::Histogram::<u8>::new_with_bounds(1, u64::MAX / 2, 5)
        .unwrap()
        .distinct_values();
    assert_eq!(counts, 6_160_384);
    let text = deflated(&plain(0, 5, 1, u64::MAX / 2, &[]));
    let why = reason(&text);
    assert!(
        why.contains("needs 6160384 counts, more than 23552"),
        "{why}"
    );
    // Parameters hdrhistogram itself refuses are named, not passed on.
    for (digits, low, high) in [(6, 1, 1000), (3, 0, 1000), (3, 10, 15), (300, 1, 1000)] {
        let why = reason(&deflated(&plain(0, digits, low, high, &[])));
        assert!(why.contains("is not a histogram"), "{why}");
    }
    // Text longer than any allowed histogram needs is refused before it is decoded.
    let long = "A".repeat(Limits::TAILGUARD.max_text() + 4);
    assert!(reason(&long).contains("characters, more than"));
}

#[test]
fn a_log_line_longer_than_any_histogram_needs_is_refused() {
    let mut text = b"#[StartTime: 1700000000.000 (seconds since epoch)]\n".to_vec();
    text.extend(b"Tag=x,0.000,1.000,1.0,");
    text.extend(std::iter::repeat_n(b'A', Limits::LOG.max_text() + 1024));
    text.push(b'\n');
    match log::read_raw(&text) {
        Err(LogError::LineTooLong { line: 2, .. }) => {}
        other => panic!("{other:?}"),
    }
    let bomb = format!(
        "Tag=x,0.000,1.000,1.0,{}\n",
        deflated(&plain(u32::MAX, 3, 1, MAX_US, &[0; 10]))
    );
    match log::read_raw(bomb.as_bytes()) {
        Err(LogError::Decode { index: 0, reason }) => {
            assert!(reason.contains("declares a payload"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// A source of `n` one-second intervals that counts how many were read.
struct Counted {
    n: usize,
    read: std::rc::Rc<std::cell::Cell<usize>>,
}

impl log::Source for Counted {
    fn next_placed(&mut self) -> Result<Option<log::Placed>, LogError> {
        let i = self.read.get();
        if i == self.n {
            return Ok(None);
        }
        self.read.set(i + 1);
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, MAX_US, 3).unwrap();
        h.record(i as u64 + 1).unwrap();
        Ok(Some(log::Placed {
            epoch_start: 1_700_000_000.0 + i as f64,
            interval: log::RawInterval {
                tag: Some("t".into()),
                offset: Duration::from_secs(i as u64),
                length: Duration::from_secs(1),
                histogram: h,
            },
        }))
    }
}

#[test]
fn logs_merge_window_by_window_reading_one_interval_ahead() {
    let counters: Vec<_> = (0..3).map(|_| std::rc::Rc::default()).collect();
    let sources = counters
        .iter()
        .map(|read| Counted {
            n: 3600,
            read: std::rc::Rc::clone(read),
        })
        .collect();
    let mut merger = log::Merger::new(sources, None).unwrap();
    assert_eq!(merger.window(), Duration::from_secs(1));
    let mut windows = 0;
    while let Some(w) = merger.next_window().unwrap() {
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].histogram.len(), 3, "one value of each log");
        windows += 1;
        for read in &counters {
            // This window's interval and the one read ahead, never more.
            assert!(read.get() <= (windows + 1).min(3600), "{}", read.get());
        }
    }
    assert_eq!(windows, 3600);
}

#[test]
fn a_log_out_of_time_order_is_refused() {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, MAX_US, 3).unwrap();
    h.record(5).unwrap();
    let at = |s: u64| log::RawInterval {
        tag: None,
        offset: Duration::from_secs(s),
        length: Duration::from_secs(1),
        histogram: h.clone(),
    };
    let log = log::RawLog {
        start_epoch_secs: Some(1_700_000_000.0),
        base_epoch_secs: None,
        intervals: vec![at(0), at(5), at(2)],
    };
    let err = log::merge(&[log], None).unwrap_err();
    assert!(matches!(err, LogError::OutOfOrder { log: 0, .. }), "{err}");
}

#[test]
fn times_no_log_could_have_are_refused() {
    let h = Histogram::new();
    let mut out = Vec::new();
    let mut w = log::Writer::new(&mut out, 0.0, "t").unwrap();
    w.write(
        &h,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(1),
        None,
    )
    .unwrap();
    drop(w);
    let mut reader = log::LogReader::new(out.as_slice());
    assert!(matches!(
        reader.next_placed(),
        Err(LogError::Implausible { .. })
    ));
}
