//! A network interface by name: its index, whether it is up, and the link type of its frames.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::net::netdevice::name_to_index;
use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};

use crate::LiveError;

/// LINKTYPE_RAW: a bare IPv4 or IPv6 packet (tun devices, ARPHRD_NONE).
const LINKTYPE_RAW: u32 = 101;

/// What capture needs to know of an interface.
#[derive(Debug, Clone)]
pub(crate) struct Interface {
    pub name: String,
    pub index: i32,
    /// ARPHRD_ type of its hardware address.
    pub arphrd: u16,
    /// LINKTYPE_ of the frames an AF_PACKET raw socket reads on it, if sonde decodes them.
    pub link_type: Option<u32>,
}

/// Looks `name` up: it must exist and be up. The type of its hardware address gives the link
/// type of a raw socket's frames (libpcap finds its own).
pub(crate) fn lookup(name: &str) -> Result<Interface, LiveError> {
    let no_such = || LiveError::NoSuchInterface(name.to_string());
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(no_such());
    }
    // Any socket answers interface ioctls; a datagram one needs no privilege.
    let sock = socket_with(AddressFamily::INET, SocketType::DGRAM, SocketFlags::CLOEXEC, None)
        .map_err(|e| LiveError::os(name, "socket for interface queries", e.into()))?;
    let index = name_to_index(&sock, name).map_err(|_| no_such())?;
    let flags = query(&sock, name, Query::Flags)?;
    // SAFETY: SIOCGIFFLAGS filled the union's flags member.
    let flags = i32::from(unsafe { flags.ifr_ifru.ifru_flags });
    if flags & libc::IFF_UP == 0 {
        return Err(LiveError::InterfaceDown(name.to_string()));
    }
    let hw = query(&sock, name, Query::HardwareAddress)?;
    // SAFETY: SIOCGIFHWADDR filled the union's hardware address member.
    let arphrd = unsafe { hw.ifr_ifru.ifru_hwaddr.sa_family };
    let link_type = match arphrd {
        // The loopback device carries Ethernet headers with zero addresses.
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => Some(sonde_capture::LINKTYPE_ETHERNET),
        libc::ARPHRD_NONE => Some(LINKTYPE_RAW),
        _ => None,
    };
    Ok(Interface { name: name.to_string(), index: index as i32, arphrd, link_type })
}

/// The two interface ioctls capture needs (rustix has no safe form of them).
#[derive(Debug, Clone, Copy)]
enum Query {
    Flags,
    HardwareAddress,
}

/// Asks the kernel `query` of interface `name` (shorter than IFNAMSIZ, without NUL).
fn query(sock: &OwnedFd, name: &str, query: Query) -> Result<libc::ifreq, LiveError> {
    let (request, what) = match query {
        Query::Flags => (libc::SIOCGIFFLAGS, "SIOCGIFFLAGS"),
        Query::HardwareAddress => (libc::SIOCGIFHWADDR, "SIOCGIFHWADDR"),
    };
    // SAFETY: ifreq is plain old data (integers, arrays and unions of them); all zeroes is a
    // valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq whose name is NUL-terminated (shorter than IFNAMSIZ, the
    // rest zeroes); SIOCGIFFLAGS and SIOCGIFHWADDR write only within it.
    if unsafe { libc::ioctl(sock.as_raw_fd(), request as _, &mut req) } < 0 {
        return Err(LiveError::os(name, what, io::Error::last_os_error()));
    }
    Ok(req)
}
