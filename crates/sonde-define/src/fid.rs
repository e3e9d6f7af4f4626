//! A FID as the outputs show it: split into its key parts, written as addresses where a part
//! is a whole address field, and anonymised part by part.

use std::net::{Ipv4Addr, Ipv6Addr};

use sonde_anon::Anonymizer;

use crate::{Anchor, Definition, Pattern};

/// A FID's key parts: each part's pattern and value.
fn key_parts(def: &Definition, fid: u128) -> Vec<(Pattern, u128)> {
    let mut rest_bits: u32 = def.keys.iter().map(|&k| def.patterns[k].bits).sum();
    def.keys
        .iter()
        .map(|&k| {
            let p = def.patterns[k];
            rest_bits -= p.bits;
            let value = if rest_bits >= 128 { 0 } else { (fid >> rest_bits) & Pattern::full_mask(p.bits) };
            (p, value)
        })
        .collect()
}

/// The address fields of a network header: (offset in bits, width, family). The IPv4 ones
/// lie inside the IPv6 ones' bytes; a definition's preconditions say which family it reads.
const ADDRESS_FIELDS: [(u32, u32, u8); 4] = [(96, 32, 4), (128, 32, 4), (64, 128, 6), (192, 128, 6)];

/// The address field a key part is, or is a prefix of: (its width, the family).
pub(crate) fn address_field(p: &Pattern) -> Option<(u32, u8)> {
    if p.anchor != Anchor::Net {
        return None;
    }
    ADDRESS_FIELDS
        .iter()
        .find(|&&(at, width, _)| p.offset_bits == at && p.bits <= width)
        .map(|&(_, width, family)| (width, family))
}

/// Whether a key part reads address bits without being an address or a prefix of one (its
/// value could not be anonymised consistently).
pub(crate) fn reads_address_bits(p: &Pattern) -> bool {
    let (start, end) = (p.offset_bits, p.offset_bits + p.bits);
    p.anchor == Anchor::Net && start < 320 && end > 64 && address_field(p).is_none()
}

/// A FID as text: each key part an address when it is a whole IPv4 or IPv6 address field,
/// else a number; parts joined by `|`.
pub(crate) fn fid_text(def: &Definition, fid: u128) -> String {
    let parts: Vec<String> = key_parts(def, fid)
        .into_iter()
        .map(|(p, value)| match address_field(&p) {
            Some((32, _)) if p.bits == 32 => Ipv4Addr::from(value as u32).to_string(),
            Some((128, _)) if p.bits == 128 => Ipv6Addr::from(value).to_string(),
            _ => value.to_string(),
        })
        .collect();
    parts.join("|")
}

/// `fid` with each address part anonymised: a whole address as an address, a prefix as the
/// same bits of its anonymised address (under Crypto-PAn, a /24 key stays the /24 of the
/// anonymised addresses).
pub(crate) fn anonymized_fid(def: &Definition, fid: u128, anon: &mut Anonymizer) -> u128 {
    key_parts(def, fid).into_iter().fold(0u128, |out, (p, value)| {
        let shown = match address_field(&p) {
            Some((width, family)) => {
                let unused = width - p.bits;
                let address = value << unused;
                let mapped = match family {
                    4 => u128::from(u32::from_be_bytes(anon.ipv4((address as u32).to_be_bytes()))),
                    _ => u128::from_be_bytes(anon.ipv6(address.to_be_bytes())),
                };
                (mapped >> unused) & p.mask
            }
            None => value,
        };
        let high = if p.bits >= 128 { 0 } else { out << p.bits };
        high | shown
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_definitions;

    #[test]
    fn whole_addresses_read_as_addresses_and_other_parts_as_numbers() {
        let defs =
            parse_definitions("a = ip.version == 4 key ip4.src, tcp.dport, l3[12:3]", crate::MAX_NAME_BYTES).unwrap();
        let fid = (0x0a00_0001u128 << 40) | (443 << 24) | 0x0a_0000;
        assert_eq!(fid_text(&defs[0], fid), "10.0.0.1|443|655360");
    }

    #[test]
    fn only_a_part_of_an_address_that_is_no_prefix_reads_address_bits() {
        let defs =
            parse_definitions("a = ip.version == 4 key l3[12:3], l3[15:1], ip4.dst, tcp.dport", crate::MAX_NAME_BYTES)
                .unwrap();
        let reads: Vec<bool> = defs[0].keys.iter().map(|&k| reads_address_bits(&defs[0].patterns[k])).collect();
        assert_eq!(reads, [false, true, false, false]);
    }
}
