//! Linux AF_PACKET capture through a TPACKET_V3 ring: the kernel fills blocks of frames in a
//! memory map shared with us and hands a block over when it is full or its timeout expires; we
//! read the frames in place and give the block back. No copy and no system call per frame.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use sonde_capture::{CaptureError, CaptureErrorKind, Frame};

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
/// Offsets in a block descriptor (struct tpacket_block_desc: version, offset_to_priv, then
/// struct tpacket_hdr_v1, 8-byte aligned).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;

/// One interface's ring.
pub(crate) struct Ring {
    fd: OwnedFd,
    map: NonNull<u8>,
    map_bytes: usize,
    blocks: usize,
    /// The block read next, or being read when `held`.
    block: usize,
    /// The current block is ours (the kernel marked it TP_STATUS_USER).
    held: bool,
    /// Frames of the held block not read yet, and the next one's offset in it.
    left: u32,
    next_offset: usize,
    link_type: u32,
    /// A frame whose VLAN tag the kernel took out, with the tag put back.
    vlan_frame: Vec<u8>,
    counters: Counters,
}

// SAFETY: the mapping belongs to this value alone (nothing else holds its address), so moving
// the value to another thread moves the only access to it.
unsafe impl Send for Ring {}

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
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; the descriptor is owned at once below.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(protocol)) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => LiveError::Permission { interface: name.to_string() },
                _ => LiveError::os(name, "AF_PACKET socket", e),
            });
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        set_option(&fd, libc::PACKET_VERSION, &(libc::tpacket_versions::TPACKET_V3 as libc::c_int))
            .map_err(|e| LiveError::os(name, "TPACKET_V3", e))?;
        let blocks = (ring_bytes / BLOCK_BYTES).max(2);
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_BYTES as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: FRAME_BYTES as u32,
            tp_frame_nr: (BLOCK_BYTES / FRAME_BYTES * blocks) as u32,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set_option(&fd, libc::PACKET_RX_RING, &req).map_err(|e| LiveError::os(name, "ring (--ring-mb)", e))?;
        let map_bytes = BLOCK_BYTES * blocks;
        // SAFETY: maps the ring the kernel just made for this socket, at an address it picks.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(LiveError::os(name, "mmap of the ring", io::Error::last_os_error()));
        }
        let map = NonNull::new(map.cast::<u8>()).expect("mmap never maps address 0");
        // From here on Drop unmaps.
        let ring = Ring {
            fd,
            map,
            map_bytes,
            blocks,
            block: 0,
            held: false,
            left: 0,
            next_offset: 0,
            link_type,
            vlan_frame: Vec::with_capacity(BLOCK_BYTES),
            counters: Counters::default(),
        };
        if promisc {
            // Dropped by the kernel when the socket closes: the interface does not stay promiscuous.
            // SAFETY: packet_mreq is plain old data; all zeroes is a valid value.
            let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mreq.mr_ifindex = iface.index;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            set_option(&ring.fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| LiveError::os(name, "promiscuous mode", e))?;
        }
        // SAFETY: sockaddr_ll is plain old data; all zeroes is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        addr.sll_ifindex = iface.index;
        // SAFETY: `addr` is a valid sockaddr_ll and its size is passed with it.
        let bound = unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if bound < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENETDOWN) => LiveError::InterfaceDown(name.to_string()),
                Some(libc::ENODEV) => LiveError::NoSuchInterface(name.to_string()),
                _ => LiveError::os(name, "bind", e),
            });
        }
        if let Some(group) = fanout {
            let arg = u32::from(group) | (libc::PACKET_FANOUT_HASH << 16);
            set_option(&ring.fd, libc::PACKET_FANOUT, &arg).map_err(|e| LiveError::os(name, "PACKET_FANOUT", e))?;
        }
        Ok(ring)
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The status word of block `i`, shared with the kernel.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block `i` < `blocks` lies inside the mapping, which lives as long as `self`;
        // its status word is 4-byte aligned (blocks are page aligned) and the kernel only
        // accesses it atomically too.
        unsafe { AtomicU32::from_ptr(self.map.as_ptr().add(i * BLOCK_BYTES + BLOCK_STATUS).cast()) }
    }

    fn block_u32(&self, offset: usize) -> u32 {
        // SAFETY: `offset` is within the held block (callers pass descriptor offsets), which the
        // kernel does not write while it is ours.
        unsafe { self.map.as_ptr().add(self.block * BLOCK_BYTES + offset).cast::<u32>().read_unaligned() }
    }

    /// The header of the next frame of the held block.
    fn header(&self) -> libc::tpacket3_hdr {
        // SAFETY: `next_offset` came from the kernel's block descriptor or the previous
        // frame's tp_next_offset and was checked to leave a whole header inside the block.
        unsafe {
            self.map
                .as_ptr()
                .add(self.block * BLOCK_BYTES + self.next_offset)
                .cast::<libc::tpacket3_hdr>()
                .read_unaligned()
        }
    }

    /// The timestamp of the next frame, if one is ready; never waits.
    pub(crate) fn ready(&mut self) -> Option<u64> {
        loop {
            if self.held {
                if self.left > 0 && self.next_offset + std::mem::size_of::<libc::tpacket3_hdr>() <= BLOCK_BYTES {
                    let h = self.header();
                    return Some(u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec));
                }
                // Every frame read (and the last one handed out is no longer borrowed): give
                // the block back.
                self.status(self.block).store(libc::TP_STATUS_KERNEL, Ordering::Release);
                self.held = false;
                self.block = (self.block + 1) % self.blocks;
            }
            if self.status(self.block).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return None;
            }
            self.held = true;
            self.left = self.block_u32(BLOCK_NUM_PKTS);
            self.next_offset = self.block_u32(BLOCK_FIRST_PKT) as usize;
        }
    }

    /// The frame `ready` announced; call only after it returned `Some`.
    pub(crate) fn take(&mut self) -> Frame<'_> {
        let h = self.header();
        let start = self.next_offset;
        self.left -= 1;
        self.next_offset += h.tp_next_offset as usize;
        if h.tp_next_offset == 0 {
            self.left = 0; // the block's last frame
        }
        let mac = start + usize::from(h.tp_mac);
        let len = (h.tp_snaplen as usize).min(BLOCK_BYTES.saturating_sub(mac));
        // SAFETY: `mac..mac + len` is inside the held block (clamped above), which stays ours
        // until `ready` is called again, after this frame's borrow of `self` has ended.
        let data = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.block * BLOCK_BYTES + mac), len) };
        let ts_ns = u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec);
        let mut frame = Frame { ts_ns, wire_len: h.tp_len, link_type: self.link_type, data };
        if h.tp_status & libc::TP_STATUS_VLAN_VALID != 0 && self.link_type == sonde_capture::LINKTYPE_ETHERNET {
            let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { h.hv1.tp_vlan_tpid } else { 0x8100 };
            frame = with_vlan_tag(&mut self.vlan_frame, frame, tpid, h.hv1.tp_vlan_tci as u16);
        }
        frame
    }

    /// Adds the kernel's counters since the last call (reading them resets them).
    pub(crate) fn update_counters(&mut self) -> Counters {
        // SAFETY: tpacket_stats_v3 is plain old data; all zeroes is a valid value.
        let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        if get_option(&self.fd, libc::SOL_PACKET, libc::PACKET_STATISTICS, &mut st).is_ok() {
            // tp_packets counts the dropped packets too.
            self.counters.received_pkts += u64::from(st.tp_packets);
            self.counters.dropped_pkts += u64::from(st.tp_drops);
        }
        self.counters
    }

    /// The error pending on the socket (after poll reported POLLERR), cleared by reading it.
    pub(crate) fn take_error(&self) -> io::Error {
        let mut err: libc::c_int = 0;
        match get_option(&self.fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err) {
            Ok(()) => io::Error::from_raw_os_error(err),
            Err(e) => e,
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`; no frame borrows it any more
        // (frames borrow `self`).
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_bytes) };
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

/// Reads a socket option into `value`, a plain-old-data T the kernel fills for `option`.
fn get_option<T>(fd: &OwnedFd, level: libc::c_int, option: libc::c_int, value: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` points to a live T whose size is passed with it; the kernel writes at
    // most that many bytes.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), level, option, (value as *mut T).cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_option<T>(fd: &OwnedFd, option: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T whose size is passed with it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            option,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
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
