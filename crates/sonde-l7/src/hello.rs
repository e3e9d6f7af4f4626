//! TLS hello messages, read field by field: the ClientHello (from TCP or from a QUIC Initial's
//! CRYPTO frames) and the ServerHello, as borrowed views over a handshake message's body.
//!
//! Written by hand rather than with `tls-parser`: the fingerprints need every extension type in
//! wire order (GREASE, unknown and malformed ones included), the raw cipher and signature lists
//! and the first ALPN value as bytes, which a typed extension parser either drops or rejects
//! whole when one extension is odd. Here the outer structure (RFC 8446 §4.1.2, §4.1.3) must be
//! sound, else the hello is `Malformed`; an extension whose inner lists are malformed keeps its
//! type (for JA3/JA4) and gives no value.

/// A hello whose lengths do not add up: its fields are left unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

/// A cursor over bytes whose reads cannot go out of bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.b.is_empty()
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        self.b
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.b.len() {
            return Err(Malformed);
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Malformed> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length (RFC 8446 §3.4 `<0..2^8-1>`).
    pub(crate) fn vec8(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    /// A vector with a two-byte length.
    pub(crate) fn vec16(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// RFC 8701: GREASE values are 0x?a?a with both bytes equal.
pub(crate) fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// Extension types read for their content (IANA TLS ExtensionType values).
pub(crate) mod ext {
    pub(crate) const SERVER_NAME: u16 = 0x0000;
    pub(crate) const SUPPORTED_GROUPS: u16 = 0x000a;
    pub(crate) const EC_POINT_FORMATS: u16 = 0x000b;
    pub(crate) const SIGNATURE_ALGORITHMS: u16 = 0x000d;
    pub(crate) const ALPN: u16 = 0x0010;
    pub(crate) const SESSION_TICKET: u16 = 0x0023;
    pub(crate) const PRE_SHARED_KEY: u16 = 0x0029;
    pub(crate) const SUPPORTED_VERSIONS: u16 = 0x002b;
    pub(crate) const QUIC_TRANSPORT_PARAMETERS: u16 = 0x0039;
    /// quic_transport_parameters before RFC 9001 (drafts, still sent by some stacks).
    pub(crate) const QUIC_TRANSPORT_PARAMETERS_DRAFT: u16 = 0xffa5;
    pub(crate) const ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
}

/// TLS 1.3's version number.
pub(crate) const TLS13: u16 = 0x0304;

/// A ClientHello's fields, in wire order, GREASE kept (the fingerprints drop it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClientHello<'a> {
    pub legacy_version: u16,
    pub session_id: &'a [u8],
    pub ciphers: Vec<u16>,
    /// Extension types in the order sent.
    pub extensions: Vec<u16>,
    /// The first host_name of server_name.
    pub sni: Option<&'a [u8]>,
    pub alpn: Vec<&'a [u8]>,
    pub groups: Vec<u16>,
    pub point_formats: &'a [u8],
    pub sig_algs: Vec<u16>,
    /// supported_versions (None: the extension is absent).
    pub versions: Option<Vec<u16>>,
    /// session_ticket carried a ticket.
    pub ticket: bool,
    pub psk: bool,
    pub ech: bool,
    pub quic_params: Option<&'a [u8]>,
}

impl<'a> ClientHello<'a> {
    /// Reads a ClientHello's body (the handshake message without its 4-byte header).
    /// RFC 8446 §4.1.2; the extensions block may be absent (SSL 3.0, early TLS 1.0 clients).
    pub(crate) fn parse(body: &'a [u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(body);
        let mut h = ClientHello { legacy_version: r.u16()?, ..Default::default() };
        r.take(32)?; // random
        h.session_id = r.vec8()?;
        let ciphers = r.vec16()?;
        if !ciphers.len().is_multiple_of(2) {
            return Err(Malformed);
        }
        h.ciphers = ciphers.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
        r.vec8()?; // compression methods
        if r.is_empty() {
            return Ok(h);
        }
        let block = r.vec16()?;
        // Each extension takes at least its 4-byte header: one allocation, not one per doubling.
        h.extensions.reserve(block.len() / 4);
        let mut exts = Reader::new(block);
        while !exts.is_empty() {
            let ty = exts.u16()?;
            let data = exts.vec16()?;
            h.extensions.push(ty);
            // An extension whose content is malformed keeps its type and gives no value.
            let _ = h.read_extension(ty, data);
        }
        Ok(h)
    }

    fn read_extension(&mut self, ty: u16, data: &'a [u8]) -> Result<(), Malformed> {
        let mut r = Reader::new(data);
        match ty {
            ext::SERVER_NAME if self.sni.is_none() => {
                let mut list = Reader::new(r.vec16()?);
                while !list.is_empty() {
                    let name_type = list.u8()?;
                    let name = list.vec16()?;
                    if name_type == 0 {
                        self.sni = Some(name);
                        break;
                    }
                }
            }
            ext::ALPN => {
                let mut list = Reader::new(r.vec16()?);
                while !list.is_empty() {
                    self.alpn.push(list.vec8()?);
                }
            }
            ext::SUPPORTED_GROUPS => self.groups = u16_list(r.vec16()?)?,
            ext::EC_POINT_FORMATS => self.point_formats = r.vec8()?,
            ext::SIGNATURE_ALGORITHMS => self.sig_algs = u16_list(r.vec16()?)?,
            ext::SUPPORTED_VERSIONS => self.versions = Some(u16_list(r.vec8()?)?),
            ext::SESSION_TICKET => self.ticket = !data.is_empty(),
            ext::PRE_SHARED_KEY => self.psk = true,
            ext::ENCRYPTED_CLIENT_HELLO => self.ech = true,
            ext::QUIC_TRANSPORT_PARAMETERS | ext::QUIC_TRANSPORT_PARAMETERS_DRAFT => {
                self.quic_params.get_or_insert(data);
            }
            _ => {}
        }
        Ok(())
    }

    /// The versions offered, GREASE removed.
    pub(crate) fn versions_offered(&self) -> Vec<u16> {
        self.offered().collect()
    }

    /// The versions offered, GREASE removed, as they come (no vector made).
    fn offered(&self) -> impl Iterator<Item = u16> + '_ {
        self.versions.iter().flatten().copied().filter(|v| !is_grease(*v))
    }

    /// The highest version offered: supported_versions' highest non-GREASE value, else the
    /// legacy version (the rule JA4 uses).
    pub(crate) fn max_version(&self) -> u16 {
        self.offered().max().unwrap_or(self.legacy_version)
    }

    /// Whether the client offered to resume a session. TLS 1.3 resumes with a pre-shared key
    /// only (RFC 8446 §2.2; its legacy session id is a middlebox-compatibility random,
    /// §D.4); earlier versions with a session id or a session ticket (RFC 5077 §3.4).
    pub(crate) fn resumption_offered(&self) -> bool {
        if self.psk {
            return true;
        }
        let tls13 = self.offered().any(|v| v == TLS13);
        !tls13 && (!self.session_id.is_empty() || self.ticket)
    }
}

fn u16_list(b: &[u8]) -> Result<Vec<u16>, Malformed> {
    if !b.len().is_multiple_of(2) {
        return Err(Malformed);
    }
    Ok(b.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect())
}

/// RFC 8446 §4.1.3: a ServerHello whose random is this value is a HelloRetryRequest.
const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11,
    0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// A ServerHello's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerHello<'a> {
    pub legacy_version: u16,
    pub cipher: u16,
    pub extensions: Vec<u16>,
    /// supported_versions' selected version (TLS 1.3).
    pub selected_version: Option<u16>,
    pub alpn: Option<&'a [u8]>,
    pub hello_retry: bool,
}

impl<'a> ServerHello<'a> {
    /// Reads a ServerHello's body. RFC 8446 §4.1.3.
    pub(crate) fn parse(body: &'a [u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(body);
        let mut h = ServerHello { legacy_version: r.u16()?, ..Default::default() };
        h.hello_retry = r.take(32)? == HELLO_RETRY_RANDOM;
        r.vec8()?; // session id
        h.cipher = r.u16()?;
        r.u8()?; // compression method
        if r.is_empty() {
            return Ok(h);
        }
        let block = r.vec16()?;
        // Each extension takes at least its 4-byte header: one allocation, not one per doubling.
        h.extensions.reserve(block.len() / 4);
        let mut exts = Reader::new(block);
        while !exts.is_empty() {
            let ty = exts.u16()?;
            let data = exts.vec16()?;
            h.extensions.push(ty);
            let mut d = Reader::new(data);
            match ty {
                ext::SUPPORTED_VERSIONS => h.selected_version = d.u16().ok(),
                ext::ALPN => {
                    // A list holding exactly the selected protocol (RFC 7301 §3.1).
                    h.alpn = d.vec16().ok().and_then(|l| Reader::new(l).vec8().ok());
                }
                _ => {}
            }
        }
        Ok(h)
    }

    /// The negotiated version: supported_versions, else the legacy version.
    pub(crate) fn version(&self) -> u16 {
        self.selected_version.unwrap_or(self.legacy_version)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a ClientHello body: version, session id, ciphers and extensions (type, data).
    pub(crate) fn client_hello(version: u16, session_id: &[u8], ciphers: &[u16], exts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut b = version.to_be_bytes().to_vec();
        b.extend_from_slice(&[7; 32]);
        b.push(session_id.len() as u8);
        b.extend_from_slice(session_id);
        b.extend_from_slice(&((ciphers.len() * 2) as u16).to_be_bytes());
        for c in ciphers {
            b.extend_from_slice(&c.to_be_bytes());
        }
        b.extend_from_slice(&[1, 0]);
        let mut e = Vec::new();
        for (ty, data) in exts {
            e.extend_from_slice(&ty.to_be_bytes());
            e.extend_from_slice(&(data.len() as u16).to_be_bytes());
            e.extend_from_slice(data);
        }
        b.extend_from_slice(&(e.len() as u16).to_be_bytes());
        b.extend_from_slice(&e);
        b
    }

    /// A server_name extension's data for `name`.
    pub(crate) fn sni(name: &str) -> Vec<u8> {
        let mut v = ((name.len() + 3) as u16).to_be_bytes().to_vec();
        v.push(0);
        v.extend_from_slice(&(name.len() as u16).to_be_bytes());
        v.extend_from_slice(name.as_bytes());
        v
    }

    #[test]
    fn grease_values() {
        let grease: Vec<u16> = (0..=0xffffu16).filter(|v| is_grease(*v)).collect();
        assert_eq!(grease.len(), 16);
        assert_eq!(grease[0], 0x0a0a);
        assert_eq!(grease[15], 0xfafa);
        assert!(!is_grease(0x0a1a));
    }

    #[test]
    fn reads_all_fields() {
        let body = client_hello(
            0x0303,
            &[1; 32],
            &[0x1a1a, 0x1301, 0xc02b],
            &[
                (0x2a2a, vec![]),
                (ext::SERVER_NAME, sni("example.org")),
                (ext::ALPN, vec![0, 12, 2, b'h', b'2', 8, b'h', b't', b't', b'p', b'/', b'1', b'.', b'1']),
                (ext::SUPPORTED_GROUPS, vec![0, 4, 0x3a, 0x3a, 0, 29]),
                (ext::EC_POINT_FORMATS, vec![1, 0]),
                (ext::SIGNATURE_ALGORITHMS, vec![0, 4, 4, 3, 8, 4]),
                (ext::SUPPORTED_VERSIONS, vec![4, 0x4a, 0x4a, 3, 4]),
                (ext::PRE_SHARED_KEY, vec![0, 0]),
            ],
        );
        let h = ClientHello::parse(&body).unwrap();
        assert_eq!(h.legacy_version, 0x0303);
        assert_eq!(h.ciphers, [0x1a1a, 0x1301, 0xc02b]);
        assert_eq!(h.extensions, [0x2a2a, 0, 0x10, 0x0a, 0x0b, 0x0d, 0x2b, 0x29]);
        assert_eq!(h.sni, Some(&b"example.org"[..]));
        assert_eq!(h.alpn, [&b"h2"[..], &b"http/1.1"[..]]);
        assert_eq!(h.groups, [0x3a3a, 29]);
        assert_eq!(h.point_formats, [0]);
        assert_eq!(h.sig_algs, [0x0403, 0x0804]);
        assert_eq!(h.versions_offered(), [0x0304]);
        assert_eq!(h.max_version(), 0x0304);
        assert!(h.resumption_offered(), "a pre-shared key");
    }

    #[test]
    fn resumption_rules() {
        // TLS 1.2 with a session id: resumption; TLS 1.3 with only the compatibility id: not.
        let tls12 = client_hello(0x0303, &[9; 32], &[0x002f], &[]);
        assert!(ClientHello::parse(&tls12).unwrap().resumption_offered());
        let tls13 = client_hello(0x0303, &[9; 32], &[0x1301], &[(ext::SUPPORTED_VERSIONS, vec![2, 3, 4])]);
        assert!(!ClientHello::parse(&tls13).unwrap().resumption_offered());
        let ticket = client_hello(0x0303, &[], &[0x002f], &[(ext::SESSION_TICKET, vec![1, 2, 3])]);
        assert!(ClientHello::parse(&ticket).unwrap().resumption_offered());
        let empty_ticket = client_hello(0x0303, &[], &[0x002f], &[(ext::SESSION_TICKET, vec![])]);
        assert!(!ClientHello::parse(&empty_ticket).unwrap().resumption_offered());
    }

    #[test]
    fn a_malformed_extension_keeps_its_type() {
        let body = client_hello(0x0303, &[], &[0x002f], &[(ext::SERVER_NAME, vec![0, 9, 0]), (ext::ALPN, vec![0])]);
        let h = ClientHello::parse(&body).unwrap();
        assert_eq!(h.extensions, [0, 0x10]);
        assert_eq!(h.sni, None);
        assert!(h.alpn.is_empty());
    }

    #[test]
    fn every_truncation_is_malformed_but_one() {
        let body = client_hello(0x0303, &[1; 32], &[0x1301], &[(ext::SERVER_NAME, sni("a.b"))]);
        // Only a cut right after the compression methods parses (a hello without extensions).
        let ext_start = 2 + 32 + 33 + 4 + 2;
        for cut in 0..body.len() {
            assert_eq!(ClientHello::parse(&body[..cut]).is_ok(), cut == ext_start, "cut at {cut}");
        }
        assert!(ClientHello::parse(&body).is_ok());
    }

    #[test]
    fn server_hello_fields_and_retry() {
        let mut b = vec![3, 3];
        b.extend_from_slice(&HELLO_RETRY_RANDOM);
        b.extend_from_slice(&[0, 0x13, 0x01, 0]);
        b.extend_from_slice(&[0, 6, 0, 0x2b, 0, 2, 3, 4]);
        let h = ServerHello::parse(&b).unwrap();
        assert!(h.hello_retry);
        assert_eq!((h.version(), h.cipher, h.extensions.as_slice()), (0x0304, 0x1301, &[0x2b][..]));
        for cut in 0..b.len() {
            let ok = ServerHello::parse(&b[..cut]).is_ok();
            assert_eq!(ok, cut == 2 + 32 + 1 + 3, "cut at {cut}");
        }
    }
}
