//! Test-only frame builder: appends headers into a fixed buffer (no allocation needed, but tests
//! may allocate freely anyway).

pub(crate) struct Frame {
    pub(crate) buf: [u8; 2048],
    pub(crate) len: usize,
}

impl Frame {
    pub(crate) fn new() -> Self {
        Frame { buf: [0; 2048], len: 0 }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        self
    }

    pub(crate) fn zeros(&mut self, n: usize) -> &mut Self {
        self.buf[self.len..self.len + n].fill(0);
        self.len += n;
        self
    }

    pub(crate) fn ethernet(&mut self, ethertype: u16) -> &mut Self {
        self.push(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        self.push(&ethertype.to_be_bytes())
    }

    /// IPv4 header, 20 bytes; `payload_len` counts everything after it.
    pub(crate) fn ipv4(&mut self, proto: u8, payload_len: usize, src: [u8; 4], dst: [u8; 4]) -> &mut Self {
        let mut h = [0u8; 20];
        crate::ipv4::build::header(&mut h, (20 + payload_len) as u16, proto, src, dst);
        self.push(&h)
    }

    pub(crate) fn ipv6(&mut self, next: u8, payload_len: usize, src_last: u8, dst_last: u8) -> &mut Self {
        let mut h = [0u8; 40];
        crate::ipv6::build::header(&mut h, payload_len as u16, next, src_last, dst_last);
        self.push(&h)
    }

    pub(crate) fn tcp(&mut self, sport: u16, dport: u16, seq: u32, flags: u8, opts: &[u8]) -> &mut Self {
        let mut h = [0u8; 60];
        let n = crate::tcp::build::header(&mut h, sport, dport, seq, 0, flags, opts);
        self.push(&h[..n])
    }

    pub(crate) fn udp(&mut self, sport: u16, dport: u16, payload_len: usize) -> &mut Self {
        let mut h = [0u8; 8];
        crate::udp::build::header(&mut h, sport, dport, payload_len as u16);
        self.push(&h)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}
