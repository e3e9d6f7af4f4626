//! Linux AF_PACKET capture through a TPACKET_V3 ring: the kernel fills blocks of frames in a
//! memory map shared with us and hands a block over when it is full or its timeout expires; we
//! read the frames in place and give the block back. No copy and no system call per frame.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use memmap2::MmapOptions;
use rustix::io::Errno;
use rustix::net::{eth, socket_with, AddressFamily, SocketFlags, SocketType};
use sonde_capture::{CaptureError, CaptureErrorKind, Frame};

use crate::blocks::Blocks;
use crate::iface::Interface;
use crate::{Counters, LiveError};

/// Bytes per ring block: a power-of-two number of pages the kernel can allocate in one piece
/// (order 8), holding hundreds of frames. A frame longer than a block is cut to fit.
pub(crate) const BLOCK_BYTES: usize = 1 << 20;
/// A block is handed over this long after its first frame even when not full, so a slow link
/// is seen promptly; ticks lag the wall clock by more than this (see `TICK_LAG_NS`).
pub(crate) const BLOCK_TIMEOUT_MS: u32 = 10;
/// tp_frame_size: only used by the kernel to check the request (frames are packed in V3).
const FRAME_BYTES: usize = 2048;

/// One interface's ring.
pub(crate) struct Ring {
    /// Declared before `fd`, so unmapped before the socket closes.
    blocks: Blocks,
    fd: OwnedFd,
    link_type: u32,
    /// A frame whose VLAN tag the kernel took out, with the tag put back.
    vlan_frame: Vec<u8>,
    counters: Counters,
    /// tp_packets since the ring opened.
    offered_pkts: u64,
}

impl Ring {
    /// Opens a raw socket on `iface` with a ring of about `ring_bytes`.
    /// With `fanout`, the socket joins that PACKET_FANOUT group: the kernel spreads the
    /// interface's frames over the group's sockets by a symmetric flow hash (both directions of
    /// a flow to one socket). Not with PACKET_FANOUT_FLAG_DEFRAG: it hands the sockets packets
    /// the kernel reassembled, not the frames on the wire (the bench trace's 2.4 M frames came
    /// out 126 k fewer); later fragments, hashed without ports, may go to another reader, which
    /// only counts them, as one reader would.
    pub(crate) fn open(
        iface: &Interface,
        ring_bytes: usize,
        promisc: bool,
        fanout: Option<u16>,
    ) -> Result<Ring, LiveError> {
        let name = iface.name.as_str();
        let Some(link_type) = iface.link_type else {
            return Err(LiveError::UnsupportedLink { interface: name.to_string(), arphrd: iface.arphrd });
        };
        let fd =
            socket_with(AddressFamily::PACKET, SocketType::RAW, SocketFlags::CLOEXEC, Some(eth::ALL)).map_err(|e| {
                match e {
                    Errno::PERM | Errno::ACCESS => LiveError::Permission { interface: name.to_string() },
                    _ => LiveError::os(name, "AF_PACKET socket", e.into()),
                }
            })?;
        set_option(&fd, libc::PACKET_VERSION, &PacketOption::Int(libc::tpacket_versions::TPACKET_V3 as libc::c_int))
            .map_err(|e| LiveError::os(name, "TPACKET_V3", e))?;
        let block_count = (ring_bytes / BLOCK_BYTES).max(2);
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_BYTES as u32,
            tp_block_nr: block_count as u32,
            tp_frame_size: FRAME_BYTES as u32,
            tp_frame_nr: (BLOCK_BYTES / FRAME_BYTES * block_count) as u32,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set_option(&fd, libc::PACKET_RX_RING, &PacketOption::Ring(req))
            .map_err(|e| LiveError::os(name, "ring (--ring-mb)", e))?;
        // The ring the kernel just made for this socket, shared read-write (we hand blocks back
        // by writing their status). A raw map: it never gives out references to its bytes.
        let map = MmapOptions::new()
            .len(BLOCK_BYTES * block_count)
            .map_raw(&fd)
            .map_err(|e| LiveError::os(name, "mmap of the ring", e))?;
        let mut blocks = Blocks::new(map, BLOCK_BYTES);
        // On loopback every packet is seen leaving and again arriving: the leaving copy is
        // passed over, as libpcap does (without, packets count twice and look retransmitted).
        if iface.arphrd == libc::ARPHRD_LOOPBACK {
            blocks = blocks.skipping_outgoing();
        }
        let ring = Ring {
            blocks,
            fd,
            link_type,
            vlan_frame: Vec::with_capacity(BLOCK_BYTES),
            counters: Counters::default(),
            offered_pkts: 0,
        };
        if promisc {
            // Dropped by the kernel when the socket closes: the interface does not stay promiscuous.
            let mreq = libc::packet_mreq {
                mr_ifindex: iface.index,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            set_option(&ring.fd, libc::PACKET_ADD_MEMBERSHIP, &PacketOption::Membership(mreq))
                .map_err(|e| LiveError::os(name, "promiscuous mode", e))?;
        }
        bind_to(ring.fd.as_fd(), iface.index).map_err(|e| match e.raw_os_error() {
            Some(libc::ENETDOWN) => LiveError::InterfaceDown(name.to_string()),
            Some(libc::ENODEV) => LiveError::NoSuchInterface(name.to_string()),
            _ => LiveError::os(name, "bind", e),
        })?;
        if let Some(group) = fanout {
            let arg = u32::from(group) | (libc::PACKET_FANOUT_HASH << 16);
            set_option(&ring.fd, libc::PACKET_FANOUT, &PacketOption::Int(arg as libc::c_int))
                .map_err(|e| LiveError::os(name, "PACKET_FANOUT", e))?;
        }
        Ok(ring)
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The timestamp of the next frame, if one is ready; never waits.
    pub(crate) fn ready(&mut self) -> Option<u64> {
        self.blocks.ready().map(|h| u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec))
    }

    /// The frame `ready` announced; `None` if there is none, or if the ring's header put it
    /// outside its block (the block is then given back at the next `ready`).
    pub(crate) fn take(&mut self) -> Option<Frame<'_>> {
        let (h, data) = self.blocks.take()?;
        let ts_ns = u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec);
        let frame = Frame { ts_ns, wire_len: h.tp_len, link_type: self.link_type, data };
        if h.tp_status & libc::TP_STATUS_VLAN_VALID != 0 && self.link_type == sonde_capture::LINKTYPE_ETHERNET {
            let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { h.hv1.tp_vlan_tpid } else { 0x8100 };
            return Some(with_vlan_tag(&mut self.vlan_frame, frame, tpid, h.hv1.tp_vlan_tci as u16));
        }
        Some(frame)
    }

    /// Frames handed over and not read yet.
    pub(crate) fn unread(&self) -> u64 {
        self.blocks.pending().frames
    }

    /// Adds the kernel's counters since the last call (reading them resets them).
    pub(crate) fn update_counters(&mut self) -> Counters {
        // tp_packets counts the dropped packets too, and on loopback the leaving copies: those
        // passed over and those still in the ring (none elsewhere). Looked at before the kernel's count, so
        // every frame seen here is in that count. Totals since the ring opened, not
        // differences per call: a copy the kernel counted in one call may be passed over in
        // the next.
        let leaving = self.blocks.skipped() + self.blocks.pending().passed_over;
        if let Ok(st) = statistics(&self.fd) {
            self.offered_pkts += u64::from(st.tp_packets);
            self.counters.dropped_pkts += u64::from(st.tp_drops);
        }
        self.counters.received_pkts = self.offered_pkts.saturating_sub(leaving);
        self.counters
    }

    /// The error pending on the socket (after poll reported POLLERR), cleared by reading it.
    pub(crate) fn take_error(&self) -> io::Error {
        match rustix::net::sockopt::socket_error(&self.fd) {
            Ok(Ok(())) => io::Error::from_raw_os_error(0),
            Ok(Err(e)) | Err(e) => e.into(),
        }
    }
}

/// `frame` with an 802.1Q tag (`tpid`, `tci`) after its MAC addresses, as it was on the wire:
/// the kernel takes the tag out into the ring's header, as libpcap puts it back.
#[cold]
fn with_vlan_tag<'a>(buf: &'a mut Vec<u8>, frame: Frame<'_>, tpid: u16, tci: u16) -> Frame<'a> {
    buf.clear();
    let split = frame.data.len().min(12);
    buf.extend_from_slice(&frame.data[..split]);
    buf.extend_from_slice(&tpid.to_be_bytes());
    buf.extend_from_slice(&tci.to_be_bytes());
    buf.extend_from_slice(&frame.data[split..]);
    Frame { ts_ns: frame.ts_ns, wire_len: frame.wire_len + 4, link_type: frame.link_type, data: buf }
}

/// The SOL_PACKET options set here, by value type (rustix has no packet socket options).
enum PacketOption {
    Int(libc::c_int),
    Ring(libc::tpacket_req3),
    Membership(libc::packet_mreq),
}

fn set_option(fd: &OwnedFd, option: libc::c_int, value: &PacketOption) -> io::Result<()> {
    let (value, len): (*const libc::c_void, usize) = match value {
        PacketOption::Int(v) => ((v as *const libc::c_int).cast(), size_of_val(v)),
        PacketOption::Ring(v) => ((v as *const libc::tpacket_req3).cast(), size_of_val(v)),
        PacketOption::Membership(v) => ((v as *const libc::packet_mreq).cast(), size_of_val(v)),
    };
    // SAFETY: `value` points to a live, initialised value of `len` bytes, which the kernel
    // only reads.
    let r = unsafe { libc::setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, option, value, len as libc::socklen_t) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// PACKET_STATISTICS: the packets offered and dropped since the last read (reading resets them).
fn statistics(fd: &OwnedFd) -> io::Result<libc::tpacket_stats_v3> {
    let mut st = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
    let mut len = size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` is a live tpacket_stats_v3 (integers only) whose size is passed with it; the
    // kernel writes at most that many bytes.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Binds the socket to interface `index` for every protocol (rustix has no link-layer address).
fn bind_to(fd: BorrowedFd<'_>, index: i32) -> io::Result<()> {
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
        sll_ifindex: index,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `addr` is a live, initialised sockaddr_ll and its size is passed with it.
    let r = unsafe {
        libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_ll).cast(), size_of_val(&addr) as libc::socklen_t)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A socket error as the error that ends the capture.
pub(crate) fn capture_error(interface: &str, e: io::Error) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Io(io::Error::new(e.kind(), format!("{interface}: {e}"))), offset: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vlan_tag_goes_back_after_the_mac_addresses() {
        let data: Vec<u8> = (0u8..20).collect();
        let frame = Frame { ts_ns: 7, wire_len: 20, link_type: 1, data: &data };
        let mut buf = Vec::new();
        let tagged = with_vlan_tag(&mut buf, frame, 0x8100, 0x0123);
        assert_eq!(tagged.wire_len, 24);
        assert_eq!(&tagged.data[..12], &data[..12]);
        assert_eq!(&tagged.data[12..16], &[0x81, 0x00, 0x01, 0x23]);
        assert_eq!(&tagged.data[16..], &data[12..]);
        // A runt shorter than two addresses keeps what it has, tag after.
        let short = Frame { ts_ns: 7, wire_len: 5, link_type: 1, data: &data[..5] };
        assert_eq!(with_vlan_tag(&mut buf, short, 0x88a8, 1).data, &[0, 1, 2, 3, 4, 0x88, 0xa8, 0, 1]);
    }
}
