//! The file layout: where every part of a store lies, and the header's encoding.
//!
//! All integers and floats are little-endian; floats are IEEE-754 binary64 and NaN means unknown.
//!
//! ```text
//! fixed header (56 bytes)
//!    0  8  magic "SONDERRD"
//!    8  4  format version (1)
//!   12  4  number of data sources S
//!   16  4  number of archives A
//!   20  4  reserved, 0
//!   24  8  step_s
//!   32  8  xff
//!   40  8  start_s (the time of creation, on the step grid)
//!   48  8  FNV-1a 64 checksum of the spec: bytes 0..48, the names and the archive table
//! names           S × 20 bytes, NUL-padded
//! archive table   A × 16 bytes: cf (1 AVERAGE, 2 MIN, 3 MAX, 4 LAST), steps, rows, reserved 0 (u32 each)
//! padding         to a multiple of 8 bytes
//! live state      rewritten by every update:
//!                 last_update_s (u64), S last values (f64),
//!                 A × S consolidation states of 32 bytes (in archive order, then source order):
//!                 value (f64), unknown primary points (u64), primary value (f64), secondary value (f64)
//! archives        in table order; archive a holds rows × S f64, one row per consolidated point;
//!                 the row ending at time T (a multiple of steps × step_s) is at slot
//!                 (T / (steps × step_s)) mod rows
//! ```
//! The consolidation state is rrdtool's `cdp_prep` (value = the running sum, min, max or last;
//! primary = the last row written; secondary = the last primary point that completed a row).

use crate::spec::{ArchiveSpec, Cf, Spec, MAX_ARCHIVES, MAX_NAME_LEN, MAX_SOURCES};
use crate::Error;

pub(crate) const MAGIC: [u8; 8] = *b"SONDERRD";
pub(crate) const VERSION: u32 = 1;
pub(crate) const FIXED_LEN: usize = 56;
const NAME_LEN: usize = MAX_NAME_LEN + 1;
const ARCHIVE_LEN: usize = 16;
pub(crate) const CDP_LEN: usize = 32;

/// Byte offsets of the parts of a store with a given shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Where the live state starts (= length of the spec part).
    pub live_offset: u64,
    pub live_len: usize,
    /// Where each archive's rows start.
    pub archive_offsets: Vec<u64>,
    pub file_len: u64,
}

impl Layout {
    /// The layout for `sources` sources and these archives. Sizes were bounded by
    /// [`Spec::validate`] (or by the header checks), so nothing here overflows.
    pub fn new(sources: usize, archives: &[ArchiveSpec]) -> Layout {
        let spec_len = (FIXED_LEN + sources * NAME_LEN + archives.len() * ARCHIVE_LEN).next_multiple_of(8);
        let live_len = 8 + sources * 8 + archives.len() * sources * CDP_LEN;
        let mut offset = (spec_len + live_len) as u64;
        let mut archive_offsets = Vec::with_capacity(archives.len());
        for a in archives {
            archive_offsets.push(offset);
            offset += u64::from(a.rows) * sources as u64 * 8;
        }
        Layout { live_offset: spec_len as u64, live_len, archive_offsets, file_len: offset }
    }
}

/// The spec part of the header (everything before the live state).
pub(crate) fn encode_spec(spec: &Spec, start_s: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&(spec.sources.len() as u32).to_le_bytes());
    b.extend_from_slice(&(spec.archives.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&spec.step_s.to_le_bytes());
    b.extend_from_slice(&spec.xff.to_le_bytes());
    b.extend_from_slice(&start_s.to_le_bytes());
    b.extend_from_slice(&[0; 8]); // checksum, filled below
    for name in &spec.sources {
        let mut field = [0u8; NAME_LEN];
        field[..name.len()].copy_from_slice(name.as_bytes());
        b.extend_from_slice(&field);
    }
    for a in &spec.archives {
        for v in [a.cf.code(), a.steps, a.rows, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b.resize(b.len().next_multiple_of(8), 0);
    let sum = checksum(&b);
    b[48..56].copy_from_slice(&sum.to_le_bytes());
    b
}

/// FNV-1a 64 over the spec part, with the checksum field itself taken as zeros.
fn checksum(spec_part: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, &byte) in spec_part.iter().enumerate() {
        let byte = if (48..56).contains(&i) { 0 } else { byte };
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What the fixed header says, before the rest is read.
pub(crate) struct Fixed {
    pub sources: usize,
    pub archives: usize,
}

/// Reads the fixed 56 bytes: magic, version and the counts (bounded, so a damaged count cannot
/// make the reader allocate much).
pub(crate) fn decode_fixed(b: &[u8; FIXED_LEN]) -> Result<Fixed, Error> {
    if b[0..8] != MAGIC {
        return Err(Error::Corrupt("it does not start with the sonde store magic \"SONDERRD\""));
    }
    let version = u32_at(b, 8);
    if version != VERSION {
        return Err(Error::UnsupportedVersion { found: version, supported: VERSION });
    }
    let sources = u32_at(b, 12) as usize;
    let archives = u32_at(b, 16) as usize;
    if sources == 0 || sources > MAX_SOURCES {
        return Err(Error::Corrupt("the number of data sources is out of range"));
    }
    if archives == 0 || archives > MAX_ARCHIVES {
        return Err(Error::Corrupt("the number of archives is out of range"));
    }
    Ok(Fixed { sources, archives })
}

/// The length of the spec part for these counts.
pub(crate) fn spec_len(fixed: &Fixed) -> usize {
    (FIXED_LEN + fixed.sources * NAME_LEN + fixed.archives * ARCHIVE_LEN).next_multiple_of(8)
}

/// Decodes and checks the whole spec part; returns the spec and the start time.
pub(crate) fn decode_spec(b: &[u8], fixed: &Fixed) -> Result<(Spec, u64), Error> {
    if u64_at(b, 48) != checksum(b) {
        return Err(Error::Corrupt("the header checksum does not match (the header was damaged)"));
    }
    let step_s = u64_at(b, 24);
    let xff = f64::from_bits(u64_at(b, 32));
    let start_s = u64_at(b, 40);
    let mut sources = Vec::with_capacity(fixed.sources);
    let mut at = FIXED_LEN;
    for _ in 0..fixed.sources {
        let field = &b[at..at + NAME_LEN];
        let len = field.iter().position(|&c| c == 0).unwrap_or(NAME_LEN);
        if field[len..].iter().any(|&c| c != 0) {
            return Err(Error::Corrupt("a data-source name is not NUL-padded"));
        }
        let name = std::str::from_utf8(&field[..len]).map_err(|_| Error::Corrupt("a data-source name is not text"))?;
        sources.push(name.to_string());
        at += NAME_LEN;
    }
    let mut archives = Vec::with_capacity(fixed.archives);
    for _ in 0..fixed.archives {
        let cf =
            Cf::from_code(u32_at(b, at)).ok_or(Error::Corrupt("an archive has an unknown consolidation function"))?;
        archives.push(ArchiveSpec { cf, steps: u32_at(b, at + 4), rows: u32_at(b, at + 8) });
        at += ARCHIVE_LEN;
    }
    let spec = Spec { step_s, sources, archives, xff };
    spec.validate().map_err(Error::CorruptSpec)?;
    if !start_s.is_multiple_of(step_s) {
        return Err(Error::Corrupt("the start time is not on the step grid"));
    }
    Ok((spec, start_s))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(v)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

pub(crate) fn f64_at(b: &[u8], at: usize) -> f64 {
    f64::from_bits(u64_at(b, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            step_s: 300,
            sources: vec!["a".into(), "rtt_p95".into(), "nineteen_characters".into()],
            archives: vec![
                ArchiveSpec { cf: Cf::Average, steps: 1, rows: 10 },
                ArchiveSpec { cf: Cf::Last, steps: 12, rows: 3 },
            ],
            xff: 0.25,
        }
    }

    fn fixed_of(b: &[u8]) -> Result<Fixed, Error> {
        let mut f = [0; FIXED_LEN];
        f.copy_from_slice(&b[..FIXED_LEN]);
        decode_fixed(&f)
    }

    #[test]
    fn spec_round_trip() {
        let b = encode_spec(&spec(), 600);
        assert_eq!(&b[..8], b"SONDERRD");
        assert_eq!(b.len(), (56 + 3 * 20 + 2 * 16usize).next_multiple_of(8));
        let fixed = fixed_of(&b).unwrap();
        assert_eq!((fixed.sources, fixed.archives), (3, 2));
        assert_eq!(spec_len(&fixed), b.len());
        let (back, start) = decode_spec(&b, &fixed).unwrap();
        assert_eq!(back, spec());
        assert_eq!(start, 600);
    }

    #[test]
    fn layout_sizes() {
        let s = spec();
        let l = Layout::new(3, &s.archives);
        assert_eq!(l.live_offset, 152);
        assert_eq!(l.live_len, 8 + 3 * 8 + 2 * 3 * 32);
        assert_eq!(l.archive_offsets, [152 + 224, 152 + 224 + 10 * 3 * 8]);
        assert_eq!(l.file_len, 152 + 224 + 13 * 3 * 8);
    }

    #[test]
    fn every_damaged_byte_of_the_spec_is_caught() {
        let good = encode_spec(&spec(), 600);
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x41;
            let result = fixed_of(&b).and_then(|f| {
                if spec_len(&f) != b.len() {
                    return Err(Error::Corrupt("length"));
                }
                decode_spec(&b, &f)
            });
            assert!(result.is_err(), "byte {i} damaged, still accepted");
        }
    }

    #[test]
    fn wrong_version_and_counts() {
        let mut b = encode_spec(&spec(), 600);
        b[8] = 2;
        assert!(matches!(fixed_of(&b), Err(Error::UnsupportedVersion { found: 2, supported: 1 })));
        let mut b = encode_spec(&spec(), 600);
        b[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(fixed_of(&b), Err(Error::Corrupt(_))));
        let mut b = encode_spec(&spec(), 600);
        b[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(fixed_of(&b), Err(Error::Corrupt(_))));
    }
}
