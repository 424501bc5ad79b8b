//! One encoded histogram (V2, usually deflated) decoded within stated bounds.
//!
//! The `hdrhistogram` decoder trusts its input: it allocates the payload length the blob
//! declares (a 300-byte blob claiming 4 GiB allocated 4.2 GB before failing), inflates without
//! a limit (a 1.4 MB deflate bomb took 1 GB), and allocates the counts array the declared
//! range and precision need. Here every one of those is checked first:
//!
//! 1. the text is at most [`Limits::max_text`] long (what the largest allowed histogram
//!    needs, base64 included);
//! 2. a deflated blob is inflated into at most [`Limits::max_inflated`] bytes;
//! 3. the header's range and precision need at most [`Limits::max_counts`] counts, computed
//!    as `hdrhistogram` will before it allocates them;
//! 4. the declared payload length is at most the bytes actually there.
//!
//! Only then does `hdrhistogram` decode the (already inflated) bytes.

use hdrhistogram::serialization::Deserializer;
use std::io::Read as _;

/// The V2 cookies (`hdrhistogram::serialization`): plain, and deflated.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Cookie, payload length, normalizing offset, digits, lowest, highest, integer ratio.
const HEADER_BYTES: usize = 40;
/// The longest varint `hdrhistogram` writes for one count.
const MAX_VARINT: usize = 9;

/// How large a histogram a decoder accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most counts (buckets) the histogram's range and precision may need.
    pub max_counts: u64,
}

impl Limits {
    /// Histograms as tailguard writes them (`--json`): 1 µs to 1 h at 3 significant digits,
    /// 23,552 counts (188 KiB). At most 212 KB inflated, 283 KB of base64.
    pub const TAILGUARD: Limits = Limits { max_counts: 23_552 };

    /// Histograms of any HdrHistogram tool's interval log: 524,288 counts (4 MiB of `u64`),
    /// enough for 3 significant digits over any range, or 4 digits from 1 ns to 1 h. At most
    /// 4.7 MB inflated, 6.3 MB of base64 per line.
    pub const LOG: Limits = Limits {
        max_counts: 1 << 19,
    };

    /// The largest payload: every count in the longest varint, after the header.
    pub fn max_inflated(&self) -> usize {
        HEADER_BYTES + MAX_VARINT * self.max_counts as usize
    }

    /// The longest base64 text: the payload stored uncompressed by deflate (5 bytes per
    /// 64 KiB block, the zlib header and checksum, the 8-byte wrapper), as base64.
    pub fn max_text(&self) -> usize {
        let inflated = self.max_inflated();
        let deflated = 8 + 6 + inflated + 5 * (inflated / 65_535 + 1);
        deflated.div_ceil(3) * 4
    }
}

/// Decodes base64 `text` into a histogram within `limits`; `Err` says what is wrong.
pub(crate) fn decode(text: &str, limits: Limits) -> Result<hdrhistogram::Histogram<u64>, String> {
    use base64::Engine as _;
    let text = text.trim();
    if text.len() > limits.max_text() {
        return Err(format!(
            "{} characters, more than any histogram of at most {} counts needs ({})",
            text.len(),
            limits.max_counts,
            limits.max_text()
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| e.to_string())?;
    decode_bytes(&bytes, limits)
}

/// Decodes V2 bytes (plain or deflated) within `limits`.
pub(crate) fn decode_bytes(
    bytes: &[u8],
    limits: Limits,
) -> Result<hdrhistogram::Histogram<u64>, String> {
    let plain = match be_u32(bytes, 0) {
        Some(V2_COOKIE) => bytes.to_vec(),
        Some(V2_COMPRESSED_COOKIE) => inflate(bytes, limits)?,
        Some(other) => return Err(format!("not an encoded histogram (cookie {other:#x})")),
        None => return Err("shorter than a histogram's header".into()),
    };
    check_header(&plain, limits)?;
    Deserializer::new()
        .deserialize(&mut plain.as_slice())
        .map_err(|e| e.to_string())
}

/// The inflated V2 bytes of a deflated blob, at most `limits.max_inflated()` of them.
fn inflate(bytes: &[u8], limits: Limits) -> Result<Vec<u8>, String> {
    let declared = be_u32(bytes, 4).ok_or("shorter than a histogram's header")? as usize;
    let deflated = bytes.get(8..).unwrap_or_default();
    let deflated = &deflated[..declared.min(deflated.len())];
    let max = limits.max_inflated();
    let mut plain = Vec::new();
    flate2::read::ZlibDecoder::new(deflated)
        .take(max as u64 + 1)
        .read_to_end(&mut plain)
        .map_err(|e| format!("cannot inflate: {e}"))?;
    if plain.len() > max {
        return Err(format!(
            "inflates to more than {max} bytes, more than any histogram of at most {} counts needs",
            limits.max_counts
        ));
    }
    if be_u32(&plain, 0) != Some(V2_COOKIE) {
        return Err("the inflated bytes are not an encoded histogram".into());
    }
    Ok(plain)
}

/// Refuses a header whose counts or payload exceed what is there or allowed.
fn check_header(plain: &[u8], limits: Limits) -> Result<(), String> {
    if plain.len() < HEADER_BYTES {
        return Err("shorter than a histogram's header".into());
    }
    let payload = be_u32(plain, 4).unwrap_or(0) as usize;
    let present = plain.len() - HEADER_BYTES;
    if payload > present {
        return Err(format!(
            "declares a payload of {payload} bytes but holds {present}"
        ));
    }
    let digits = be_u32(plain, 12).unwrap_or(u32::MAX);
    let low = be_u64(plain, 16).unwrap_or(0);
    let high = be_u64(plain, 24).unwrap_or(0);
    let counts = u8::try_from(digits)
        .ok()
        .and_then(|d| counts_len(low, high, d))
        .ok_or_else(|| {
            format!("range {low} to {high} at {digits} significant digits is not a histogram")
        })?;
    if counts > limits.max_counts {
        return Err(format!(
            "range {low} to {high} at {digits} significant digits needs {counts} counts, \
             more than {}",
            limits.max_counts
        ));
    }
    Ok(())
}

/// The counts array length `hdrhistogram::Histogram::new_with_bounds(low, high, digits)`
/// allocates (its own arithmetic, floats included), or `None` when it would refuse them.
pub(crate) fn counts_len(low: u64, high: u64, digits: u8) -> Option<u64> {
    if !(1..=u64::MAX / 2).contains(&low) || high < 2 * low || digits > 5 {
        return None;
    }
    let largest = 2 * 10_u32.pow(u32::from(digits));
    let unit_magnitude = (low as f64).log2().floor() as u32;
    let sub_bucket_count_magnitude = f64::from(largest).log2().ceil() as u32;
    if unit_magnitude + sub_bucket_count_magnitude > 63 {
        return None;
    }
    let sub_bucket_count = 1_u64 << sub_bucket_count_magnitude;
    let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
    let mut buckets = 1_u64;
    while smallest_untrackable <= high {
        if smallest_untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    Some((buckets + 1) * (sub_bucket_count / 2))
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The counts computed before allocating are the counts hdrhistogram allocates.
        #[test]
        fn counts_len_is_hdrhistogram_s_own(
            low in prop_oneof![1u64..1 << 20, (1u64 << 40)..(1 << 62)],
            span in 0u64..1 << 40,
            digits in 0u8..=5,
        ) {
            let high = low.saturating_mul(2).saturating_add(span);
            let ours = counts_len(low, high, digits);
            match hdrhistogram::Histogram::<u8>::new_with_bounds(low, high, digits) {
                Ok(h) => prop_assert_eq!(ours, Some(h.distinct_values() as u64)),
                Err(_) => prop_assert_eq!(ours, None),
            }
        }
    }
}
