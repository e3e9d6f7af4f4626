//! The portable path: libpcap (through the `pcap` crate), non-blocking, nanosecond timestamps,
//! a buffer of the size asked (libpcap's default of 2 MB is what lost the RMON2 agent a quarter
//! of its packets). Each frame is copied out of libpcap's buffer once, so that several
//! interfaces can be looked at before one is picked.

use std::os::fd::{AsFd, BorrowedFd};

use sonde_capture::{CaptureError, CaptureErrorKind, Frame};

use crate::iface::Interface;
use crate::{Counters, LiveError};

/// LINKTYPE_RAW, which libpcap calls DLT_RAW (12 on Linux) in its handles.
const LINKTYPE_RAW: u32 = 101;
const DLT_RAW: i32 = 12;
/// Longest frame kept (libpcap's default snapshot length).
const SNAPLEN: i32 = 262_144;
/// libpcap's buffer timeout: how long it may hold frames before a read returns them.
pub(crate) const TIMEOUT_MS: i32 = 10;

pub(crate) struct PcapPort {
    cap: pcap::Capture<pcap::Active>,
    name: String,
    link_type: u32,
    /// The frame read ahead, when `has_frame`.
    data: Vec<u8>,
    ts_ns: u64,
    wire_len: u32,
    has_frame: bool,
    /// libpcap's counters when last read (32 bits that wrap) and their sums.
    last: pcap::Stat,
    counters: Counters,
}

impl PcapPort {
    pub(crate) fn open(iface: &Interface, buffer_bytes: usize, promisc: bool) -> Result<PcapPort, LiveError> {
        let name = iface.name.as_str();
        let err = |e: pcap::Error| pcap_error(name, e);
        let cap = pcap::Capture::from_device(name)
            .map_err(err)?
            .promisc(promisc)
            .snaplen(SNAPLEN)
            .buffer_size(buffer_bytes.min(i32::MAX as usize) as i32)
            .timeout(TIMEOUT_MS)
            .precision(pcap::Precision::Nano)
            .open()
            .map_err(err)?
            .setnonblock()
            .map_err(err)?;
        let link_type = match cap.get_datalink().0 {
            DLT_RAW => LINKTYPE_RAW,
            dlt => dlt as u32,
        };
        Ok(PcapPort {
            cap,
            name: name.to_string(),
            link_type,
            data: Vec::with_capacity(SNAPLEN as usize),
            ts_ns: 0,
            wire_len: 0,
            has_frame: false,
            last: pcap::Stat { received: 0, dropped: 0, if_dropped: 0 },
            counters: Counters::default(),
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.cap.as_fd()
    }

    /// The timestamp of the next frame, if one is ready; never waits.
    pub(crate) fn ready(&mut self) -> Result<Option<u64>, CaptureError> {
        if self.has_frame {
            return Ok(Some(self.ts_ns));
        }
        match self.cap.next_packet() {
            Ok(p) => {
                // With nanosecond precision, libpcap's tv_usec holds nanoseconds.
                let (s, ns) = (p.header.ts.tv_sec, p.header.ts.tv_usec);
                self.ts_ns =
                    u64::try_from(s).unwrap_or(0).saturating_mul(1_000_000_000).saturating_add(ns.max(0) as u64);
                self.wire_len = p.header.len;
                self.data.clear();
                self.data.extend_from_slice(p.data);
                self.has_frame = true;
                Ok(Some(self.ts_ns))
            }
            Err(pcap::Error::TimeoutExpired | pcap::Error::NoMorePackets) => Ok(None),
            Err(e) => Err(CaptureError {
                kind: CaptureErrorKind::Io(std::io::Error::other(format!("{}: {e}", self.name))),
                offset: 0,
            }),
        }
    }

    /// The frame `ready` announced.
    pub(crate) fn take(&mut self) -> Frame<'_> {
        self.has_frame = false;
        Frame { ts_ns: self.ts_ns, wire_len: self.wire_len, link_type: self.link_type, data: &self.data }
    }

    /// libpcap's counters (ps_recv, ps_drop, ps_ifdrop), widened to 64 bits.
    pub(crate) fn update_counters(&mut self) -> Counters {
        if let Ok(now) = self.cap.stats() {
            self.counters.received_pkts += u64::from(now.received.wrapping_sub(self.last.received));
            self.counters.dropped_pkts += u64::from(now.dropped.wrapping_sub(self.last.dropped));
            self.counters.if_dropped_pkts += u64::from(now.if_dropped.wrapping_sub(self.last.if_dropped));
            self.last = now;
        }
        self.counters
    }
}

/// libpcap's message, sorted into the errors a user can act on.
fn pcap_error(name: &str, e: pcap::Error) -> LiveError {
    let message = e.to_string();
    let lower = message.to_lowercase();
    if lower.contains("permission") || lower.contains("not permitted") {
        LiveError::Permission { interface: name.to_string() }
    } else if lower.contains("no such device") {
        LiveError::NoSuchInterface(name.to_string())
    } else if lower.contains("not up") {
        LiveError::InterfaceDown(name.to_string())
    } else {
        LiveError::Pcap { interface: name.to_string(), message }
    }
}
