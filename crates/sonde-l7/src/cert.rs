//! The subject common name of an X.509 certificate, by a minimal DER walk (RFC 5280 §4.1).
//!
//! Only the path to the subject is read: Certificate → tbsCertificate → [0] version, serial,
//! signature, issuer, validity, subject → its RDNs' attributes, for id-at-commonName
//! (2.5.4.3). A full X.509 parser (`x509-parser`, with `der-parser`, `asn1-rs`, `nom`,
//! `oid-registry`, `time`) would add a dependency tree many times this file to read one string;
//! anything unexpected on the path gives `None`.

/// id-at-commonName, as DER OID content bytes.
const OID_COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];

/// One DER element: its tag and content; `rest` follows it.
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    rest: &'a [u8],
}

/// Reads one DER element (single-byte tags, definite lengths of up to 4 bytes).
fn tlv(b: &[u8]) -> Option<Tlv<'_>> {
    let (&tag, b) = b.split_first()?;
    let (&first, b) = b.split_first()?;
    let (len, b) = if first < 0x80 {
        (usize::from(first), b)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = b.get(..n)?;
        let len = bytes.iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
        (len, b.get(n..)?)
    };
    let content = b.get(..len)?;
    Some(Tlv { tag, content, rest: b.get(len..)? })
}

/// The element with `tag` at the start of `b`.
fn expect(b: &[u8], tag: u8) -> Option<Tlv<'_>> {
    tlv(b).filter(|t| t.tag == tag)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// The subject CN of a DER certificate (the first CN attribute), or None.
pub(crate) fn subject_common_name(der: &[u8]) -> Option<String> {
    let cert = expect(der, SEQUENCE)?;
    let tbs = expect(cert.content, SEQUENCE)?;
    let mut fields = tbs.content;
    if let Some(version) = expect(fields, 0xa0) {
        fields = version.rest; // [0] EXPLICIT version, absent for v1
    }
    // serialNumber, signature, issuer, validity: skipped; subject follows.
    for tag in [0x02, SEQUENCE, SEQUENCE, SEQUENCE] {
        fields = expect(fields, tag)?.rest;
    }
    let subject = expect(fields, SEQUENCE)?;
    let mut rdns = subject.content;
    while !rdns.is_empty() {
        let rdn = expect(rdns, SET)?;
        rdns = rdn.rest;
        let mut attrs = rdn.content;
        while !attrs.is_empty() {
            let attr = expect(attrs, SEQUENCE)?;
            attrs = attr.rest;
            let oid = expect(attr.content, 0x06)?;
            if oid.content == OID_COMMON_NAME {
                let value = tlv(oid.rest)?;
                return Some(directory_string(value.tag, value.content));
            }
        }
    }
    None
}

/// A DirectoryString's text (RFC 5280 §4.1.2.4): BMPString is UTF-16, UniversalString UTF-32,
/// TeletexString read as Latin-1, the others as UTF-8 (lossy).
fn directory_string(tag: u8, b: &[u8]) -> String {
    match tag {
        0x1e => char::decode_utf16(b.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])))
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
        0x1c => b
            .chunks_exact(4)
            .map(|c| {
                char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])).unwrap_or(char::REPLACEMENT_CHARACTER)
            })
            .collect(),
        0x14 => b.iter().map(|&x| char::from(x)).collect(),
        _ => String::from_utf8_lossy(b).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if content.len() < 0x80 {
            v.push(content.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(content);
        v
    }

    fn name(attrs: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
        let mut rdns = Vec::new();
        for (oid, tag, value) in attrs {
            let mut attr = der(0x06, oid);
            attr.extend(der(*tag, value));
            rdns.extend(der(SET, &der(SEQUENCE, &attr)));
        }
        der(SEQUENCE, &rdns)
    }

    /// A certificate skeleton: version, serial, algorithm, issuer, validity, subject.
    fn certificate(subject: &[u8], with_version: bool) -> Vec<u8> {
        let mut tbs = Vec::new();
        if with_version {
            tbs.extend(der(0xa0, &der(0x02, &[2])));
        }
        tbs.extend(der(0x02, &[0x01, 0x02]));
        tbs.extend(der(SEQUENCE, &der(0x06, &[0x2a, 0x86, 0x48])));
        tbs.extend(name(&[(&OID_COMMON_NAME, 0x13, b"Issuer CA")]));
        tbs.extend(der(SEQUENCE, &[0x17, 0x01, b'0', 0x17, 0x01, b'1']));
        tbs.extend_from_slice(subject);
        tbs.extend(der(SEQUENCE, &[0u8; 200])); // subjectPublicKeyInfo, long form length
        let mut cert = der(SEQUENCE, &tbs);
        cert.extend(der(SEQUENCE, &der(0x06, &[0x2a])));
        cert.extend(der(0x03, &[0, 1, 2]));
        der(SEQUENCE, &cert)
    }

    #[test]
    fn finds_the_subject_cn_not_the_issuer() {
        let subject = name(&[(&[0x55, 0x04, 0x06], 0x13, b"FR"), (&OID_COMMON_NAME, 0x0c, b"www.example.org")]);
        for with_version in [true, false] {
            let c = certificate(&subject, with_version);
            assert_eq!(subject_common_name(&c).as_deref(), Some("www.example.org"));
        }
        let bmp = name(&[(&OID_COMMON_NAME, 0x1e, &[0, b'a', 0, b'b'])]);
        assert_eq!(subject_common_name(&certificate(&bmp, true)).as_deref(), Some("ab"));
        let none = name(&[(&[0x55, 0x04, 0x0a], 0x0c, b"Org")]);
        assert_eq!(subject_common_name(&certificate(&none, true)), None);
    }

    #[test]
    fn truncations_and_garbage_give_none() {
        let subject = name(&[(&OID_COMMON_NAME, 0x0c, b"host")]);
        let c = certificate(&subject, true);
        for cut in 0..c.len() {
            // The outer length no longer fits: nothing is read.
            assert_eq!(subject_common_name(&c[..cut]), None, "cut at {cut}");
        }
        assert_eq!(subject_common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(subject_common_name(&[0x30, 0x85, 1, 1, 1, 1, 1]), None);
        assert_eq!(subject_common_name(&[]), None);
    }
}
