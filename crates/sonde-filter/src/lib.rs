//! sonde-filter: tcpdump-syntax BPF filters, applied to frames as they are read.
//!
//! The expression is compiled by libpcap (the same compiler tcpdump uses, so every tcpdump filter
//! means the same here) once per link type met in the input, and run with libpcap's BPF
//! interpreter on each frame. A trace whose interfaces have several link types gets one program
//! per type. An expression libpcap rejects is an error before any packet is read.
//!
//! ```
//! let mut f = sonde_filter::Filter::new("tcp port 80").unwrap();
//! let frame = [0u8; 14];
//! assert!(!f.matches(1, &frame, 14));
//! assert!(sonde_filter::Filter::new("tcp port").is_err());
//! ```

#![forbid(unsafe_code)]

use std::collections::HashMap;

use pcap::{BpfProgram, Capture, Linktype};

/// Why a filter could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub expression: String,
    pub link_type: u32,
    pub reason: String,
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad filter '{}': {}", self.expression, self.reason)
    }
}

impl std::error::Error for FilterError {}

/// A compiled filter, with one BPF program per link type.
pub struct Filter {
    expression: String,
    programs: HashMap<u32, Option<BpfProgram>>,
    /// Frames of link types the expression cannot be compiled for (they never match).
    pub uncompilable_frames: u64,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter").field("expression", &self.expression).finish()
    }
}

/// libpcap's LINKTYPE_ETHERNET: used to check the expression's syntax up front.
const ETHERNET: u32 = 1;

/// pcap_open_dead takes the host's DLT_ value; LINKTYPE_ values differ from it only in the
/// range libpcap remaps (its pcap-common.c): ATM_RFC1483, RAW, SLIP_BSDOS, PPP_BSDOS.
fn dlt_of(link_type: u32) -> i32 {
    match link_type {
        100 => 11,
        101 => 12,
        102 => 15,
        103 => 16,
        other => other as i32,
    }
}

fn compile(expression: &str, link_type: u32) -> Result<BpfProgram, FilterError> {
    let err = |reason: String| FilterError { expression: expression.to_string(), link_type, reason };
    let dead = Capture::dead_with_precision(Linktype(dlt_of(link_type)), pcap::Precision::Micro)
        .map_err(|e| err(e.to_string()))?;
    dead.compile(expression, true).map_err(|e| err(e.to_string()))
}

impl Filter {
    /// Compiles `expression` (tcpdump syntax). Syntax errors are reported here.
    pub fn new(expression: &str) -> Result<Filter, FilterError> {
        let program = compile(expression, ETHERNET)?;
        let mut programs = HashMap::new();
        programs.insert(ETHERNET, Some(program));
        Ok(Filter { expression: expression.to_string(), programs, uncompilable_frames: 0 })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether the frame passes. `wire_len` is the original length (BPF's `len`).
    pub fn matches(&mut self, link_type: u32, frame: &[u8], wire_len: u32) -> bool {
        let program = self.programs.entry(link_type).or_insert_with(|| compile(&self.expression, link_type).ok());
        match program {
            // libpcap's offline filter takes the captured length as BPF's `len`; only the
            // `len`/`greater`/`less` primitives can tell, and only on snaplen-cut frames.
            Some(p) => {
                let _ = wire_len;
                p.filter(frame)
            }
            None => {
                self.uncompilable_frames += 1;
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv4 + TCP header, 10.0.0.1:40000 → 10.0.0.2:`dport`, no payload.
    fn ipv4_tcp(dport: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        p.extend_from_slice(&40000u16.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        p
    }

    fn ethernet(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn port_filter_on_ethernet() {
        let mut f = Filter::new("tcp port 80").unwrap();
        let hit = ethernet(&ipv4_tcp(80));
        let miss = ethernet(&ipv4_tcp(443));
        assert!(f.matches(1, &hit, hit.len() as u32));
        assert!(!f.matches(1, &miss, miss.len() as u32));
    }

    #[test]
    fn one_program_per_link_type() {
        let mut f = Filter::new("dst host 10.0.0.2").unwrap();
        let raw = ipv4_tcp(80);
        assert!(f.matches(101, &raw, raw.len() as u32)); // LINKTYPE_RAW
        let eth = ethernet(&raw);
        assert!(f.matches(1, &eth, eth.len() as u32));
        assert_eq!(f.programs.len(), 2);
    }

    #[test]
    fn syntax_error_is_reported_up_front() {
        let e = Filter::new("tcp and and").unwrap_err();
        assert!(e.to_string().contains("tcp and and"), "{e}");
    }
}
