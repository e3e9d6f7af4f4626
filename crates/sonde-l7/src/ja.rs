//! TLS fingerprints: JA3 and JA3S (Salesforce, MD5 of the hello's decimal fields) and JA4
//! (FoxIO, `technical_details/JA4.md` of github.com/FoxIO-LLC/ja4).
//!
//! JA4's ALPN part follows the specification's rule for a first ALPN value whose first or last
//! byte is not an ASCII letter or digit: the first and last characters of its hex form. FoxIO's
//! own tools (ja4 0.18, python/ja4.py) print `99` there instead; the integration test names the
//! one capture where they differ. GREASE is ignored everywhere, signature algorithms included.

use md5::{Digest, Md5};
use sha2::Sha256;

use crate::hello::{ext, is_grease, ClientHello, ServerHello};

/// Decimal values joined by `-`, GREASE removed.
fn dashed<T: Copy + Into<u16>>(values: &[T], out: &mut String) {
    let mut first = true;
    for v in values.iter().map(|v| (*v).into()).filter(|v| !is_grease(*v)) {
        if !first {
            out.push('-');
        }
        first = false;
        push_decimal(out, v);
    }
}

/// `v` in decimal, without the formatting machinery (thousands of values per second).
fn push_decimal(out: &mut String, v: u16) {
    let mut digits = [0u8; 5];
    let mut at = digits.len();
    let mut n = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A fingerprint's text, held inline in the flow's facts (no allocation, no length): JA3 and
/// JA3S are 32 hex digits ([`Ja3`]), JA4 is 36 characters ([`Ja4`]). ASCII by construction.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint<const N: usize>([u8; N]);

/// JA3 and JA3S: an MD5 in hex.
pub type Ja3 = Fingerprint<32>;
/// JA4: `t13d1516h2_8daaf6152771_02713d6af862`.
pub type Ja4 = Fingerprint<36>;

impl<const N: usize> Fingerprint<N> {
    /// `text` if it is N bytes of ASCII.
    pub fn new(text: &str) -> Option<Self> {
        let bytes: [u8; N] = text.as_bytes().try_into().ok()?;
        bytes.is_ascii().then_some(Fingerprint(bytes))
    }

    pub fn as_str(&self) -> &str {
        // ASCII by construction (`new` and the fingerprints' own writers).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl<const N: usize> std::ops::Deref for Fingerprint<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> std::fmt::Debug for Fingerprint<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> std::fmt::Display for Fingerprint<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> PartialEq<&str> for Fingerprint<N> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Lower-case hex of `bytes` into `out` (twice their length), without the formatting
/// machinery (a fingerprint is built per flow).
fn hex_into(bytes: &[u8], out: &mut [u8]) {
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0x0f)];
    }
}

/// The MD5 hex of `text`.
fn md5_hex(text: &[u8]) -> Ja3 {
    let mut out = [0u8; 32];
    hex_into(&Md5::digest(text), &mut out);
    Fingerprint(out)
}

/// The JA3 string: `version,ciphers,extensions,groups,point_formats`.
pub(crate) fn ja3_string(h: &ClientHello<'_>) -> String {
    let mut s = String::with_capacity(256);
    push_decimal(&mut s, h.legacy_version);
    s.push(',');
    dashed(&h.ciphers, &mut s);
    s.push(',');
    dashed(&h.extensions, &mut s);
    s.push(',');
    dashed(&h.groups, &mut s);
    s.push(',');
    dashed(h.point_formats, &mut s);
    s
}

/// JA3: the MD5 hex of [`ja3_string`].
pub(crate) fn ja3(h: &ClientHello<'_>) -> Ja3 {
    md5_hex(ja3_string(h).as_bytes())
}

/// JA3S: the MD5 hex of `version,cipher,extensions`.
pub(crate) fn ja3s(h: &ServerHello<'_>) -> Ja3 {
    let mut s = String::with_capacity(64);
    push_decimal(&mut s, h.legacy_version);
    s.push(',');
    push_decimal(&mut s, h.cipher);
    s.push(',');
    dashed(&h.extensions, &mut s);
    md5_hex(s.as_bytes())
}

/// JA4's two-character version.
fn ja4_version(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// JA4's ALPN part from the first ALPN value.
pub(crate) fn ja4_alpn(first: Option<&[u8]>) -> [char; 2] {
    let (Some(&a), Some(&z)) = (first.and_then(|v| v.first()), first.and_then(|v| v.last())) else {
        return ['0', '0'];
    };
    if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() {
        return [char::from(a), char::from(z)];
    }
    // Not alphanumeric: the first and last characters of the value's hex form.
    [char::from(HEX[usize::from(a >> 4)]), char::from(HEX[usize::from(z & 0x0f)])]
}

/// Four-hex-digit values joined by commas.
fn hex_list(values: &[u16], out: &mut Vec<u8>) {
    out.reserve(values.len() * 5);
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&[12, 8, 4, 0].map(|shift| HEX[usize::from(v >> shift & 0xf)]));
    }
}

/// The first 12 hex characters of the SHA-256 of `text` into `out`; twelve zeros for no text.
fn sha256_12(text: &[u8], out: &mut [u8]) {
    if text.is_empty() {
        out.fill(b'0');
        return;
    }
    let hex = MEMO.with(|memo| memo.borrow_mut().hex(text));
    out.copy_from_slice(&hex);
}

/// Lists remembered per thread, and the longest remembered.
const MEMO_SLOTS: usize = 16;
const MEMO_TEXT: usize = 512;

/// The lists this thread hashed last and their hashes' hex: clients of one kind send the same
/// cipher and extension lists, so most ClientHellos hash a list an earlier one did. Finding it
/// costs a few comparisons; a SHA-256 of a list costs ~2,000 cycles with the CPU's SHA
/// extensions and ~8,000 instructions without. A fixed room (8 KiB), taken in turns. (JA3's
/// MD5, cheaper, is not remembered: it changed nothing measurable.)
struct Memo {
    texts: [[u8; MEMO_TEXT]; MEMO_SLOTS],
    /// 0: an empty slot (an empty list is never hashed).
    lens: [u16; MEMO_SLOTS],
    hex: [[u8; 12]; MEMO_SLOTS],
    next: usize,
}

thread_local! {
    static MEMO: std::cell::RefCell<Memo> = const {
        std::cell::RefCell::new(Memo {
            texts: [[0; MEMO_TEXT]; MEMO_SLOTS],
            lens: [0; MEMO_SLOTS],
            hex: [[0; 12]; MEMO_SLOTS],
            next: 0,
        })
    };
}

impl Memo {
    /// The first 12 hex characters of `text`'s SHA-256 (`text` not empty).
    fn hex(&mut self, text: &[u8]) -> [u8; 12] {
        let len = text.len();
        let found = (0..MEMO_SLOTS).find(|&i| usize::from(self.lens[i]) == len && &self.texts[i][..len] == text);
        if let Some(i) = found {
            return self.hex[i];
        }
        let mut hex = [0; 12];
        hex_into(&Sha256::digest(text)[..6], &mut hex);
        if len <= MEMO_TEXT {
            let i = self.next;
            self.next = (i + 1) % MEMO_SLOTS;
            self.texts[i][..len].copy_from_slice(text);
            self.lens[i] = len as u16;
            self.hex[i] = hex;
        }
        hex
    }
}

/// JA4 of a ClientHello, over TCP (`t`) or in a QUIC Initial (`q`): `a_b_c`, 10 + 1 + 12 + 1 + 12
/// characters.
pub(crate) fn ja4(h: &ClientHello<'_>, quic: bool) -> Ja4 {
    let mut ciphers: Vec<u16> = h.ciphers.iter().copied().filter(|v| !is_grease(*v)).collect();
    let exts: Vec<u16> = h.extensions.iter().copied().filter(|v| !is_grease(*v)).collect();
    let alpn = ja4_alpn(h.alpn.first().copied());
    let mut out = [b'_'; 36];
    let version = ja4_version(h.max_version()).as_bytes();
    let two = |n: usize| [b'0' + (n.min(99) / 10) as u8, b'0' + (n.min(99) % 10) as u8];
    let [c0, c1] = two(ciphers.len());
    let [e0, e1] = two(exts.len());
    let sni = if h.extensions.contains(&ext::SERVER_NAME) { b'd' } else { b'i' };
    // ja4_alpn gives ASCII letters, digits or hex digits.
    let [a0, a1] = alpn.map(|c| u8::try_from(c).unwrap_or(b'0'));
    out[..10].copy_from_slice(&[if quic { b'q' } else { b't' }, version[0], version[1], sni, c0, c1, e0, e1, a0, a1]);
    ciphers.sort_unstable();
    let mut list = Vec::new();
    hex_list(&ciphers, &mut list);
    sha256_12(&list, &mut out[11..23]);
    let mut sorted: Vec<u16> = exts.into_iter().filter(|&e| e != ext::SERVER_NAME && e != ext::ALPN).collect();
    sorted.sort_unstable();
    list.clear();
    if !sorted.is_empty() {
        hex_list(&sorted, &mut list);
        let sigs: Vec<u16> = h.sig_algs.iter().copied().filter(|v| !is_grease(*v)).collect();
        if !sigs.is_empty() {
            list.push(b'_');
            hex_list(&sigs, &mut list);
        }
    }
    sha256_12(&list, &mut out[24..]);
    Fingerprint(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_hashes_are_the_hashes() {
        // More lists than slots, each seen twice in a row and again after the others pushed it
        // out, one longer than a slot holds: every answer is the SHA-256's.
        let lists: Vec<Vec<u8>> = (0..40u16)
            .map(|i| {
                let mut l = Vec::new();
                hex_list(&(0..=i).collect::<Vec<u16>>(), &mut l);
                l
            })
            .chain([vec![b'a'; MEMO_TEXT + 1], b"0a0a".to_vec()])
            .collect();
        for round in 0..3 {
            for list in &lists {
                for _ in 0..2 {
                    let mut out = [0; 12];
                    sha256_12(list, &mut out);
                    let mut want = [0; 12];
                    hex_into(&Sha256::digest(list)[..6], &mut want);
                    assert_eq!(out, want, "round {round}, {} bytes", list.len());
                }
            }
        }
    }

    /// JA4.md's example: Chrome's ClientHello, ciphers and extensions in wire order.
    fn chrome() -> ClientHello<'static> {
        ClientHello {
            legacy_version: 0x0303,
            ciphers: vec![
                0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d,
                0x002f, 0x0035,
            ],
            extensions: vec![
                0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012, 0x002b, 0xff01,
                0x000b, 0x000a, 0x0015,
            ],
            sni: Some(b"example.org"),
            alpn: vec![b"h2", b"http/1.1"],
            sig_algs: vec![0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601],
            versions: Some(vec![0x3a3a, 0x0304, 0x0303]),
            ..Default::default()
        }
    }

    #[test]
    fn ja4_of_the_specification_example() {
        assert_eq!(ja4(&chrome(), false), "t13d1516h2_8daaf6152771_e5627efa2ab1");
        let mut h = chrome();
        h.ciphers.insert(0, 0x0a0a);
        h.extensions.insert(0, 0xdada);
        assert_eq!(ja4(&h, true), "q13d1516h2_8daaf6152771_e5627efa2ab1", "GREASE does not count");
        // Without signature algorithms the list ends without an underscore (JA4.md: 6d807ffa2a79).
        h.sig_algs.clear();
        assert!(ja4(&h, false).ends_with("_6d807ffa2a79"));
        h.sni = None;
        h.extensions.retain(|&e| e != 0);
        assert!(ja4(&h, false).starts_with("t13i1515h2_"));
    }

    #[test]
    fn ja4_empty_lists() {
        let h = ClientHello { legacy_version: 0x0301, ..Default::default() };
        assert_eq!(ja4(&h, false), "t10i000000_000000000000_000000000000");
    }

    #[test]
    fn ja4_alpn_rules() {
        // JA4.md's table of non-alphanumeric values.
        let cases: [(&[u8], &str); 10] = [
            (b"", "00"),
            (b"h2", "h2"),
            (b"http/1.1", "h1"),
            (b"x", "xx"),
            (&[0xab], "ab"),
            (&[0x20], "20"),
            (&[0xab, 0xcd], "ad"),
            (&[0x30, 0xab], "3b"),
            (&[0x61, 0x20], "60"),
            (&[0x30, 0xab, 0xcd, 0x31], "01"),
        ];
        for (value, want) in cases {
            let got: String = ja4_alpn(Some(value)).iter().collect();
            assert_eq!(got, want, "{value:02x?}");
        }
        assert_eq!(ja4_alpn(None), ['0', '0']);
    }

    #[test]
    fn ja3_string_drops_grease() {
        let h = ClientHello {
            legacy_version: 0x0303,
            ciphers: vec![0x0a0a, 0x1301, 0xc02b],
            extensions: vec![0x1a1a, 0, 23, 0x2a2a],
            groups: vec![0x3a3a, 29, 23],
            point_formats: &[0],
            ..Default::default()
        };
        assert_eq!(ja3_string(&h), "771,4865-49195,0-23,29-23,0");
        // The MD5 of that string from `printf %s ... | md5sum`.
        assert_eq!(ja3(&h), "fd803cd9d4cb13ee151a93ddc0bd05ca");
        let empty = ClientHello { legacy_version: 0x0301, ..Default::default() };
        assert_eq!(ja3_string(&empty), "769,,,,");
        assert_eq!(ja3(&empty), "f5d1076d0d11b5cd81c4c4e8e8ee881a");
    }
}
