//! A network interface by name: its index, whether it is up, and the link type of its frames.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

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
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(no_such());
    }
    let c_name = CString::new(name).map_err(|_| no_such())?;
    // SAFETY: `c_name` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(no_such());
    }
    // Any socket answers interface ioctls; a datagram one needs no privilege.
    // SAFETY: plain socket(2) call; the descriptor is owned at once below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(LiveError::os(name, "socket for interface queries", io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let flags = ioctl(&sock, name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS")?;
    // SAFETY: SIOCGIFFLAGS filled the union's flags member.
    let flags = i32::from(unsafe { flags.ifr_ifru.ifru_flags });
    if flags & libc::IFF_UP == 0 {
        return Err(LiveError::InterfaceDown(name.to_string()));
    }
    let hw = ioctl(&sock, name, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR")?;
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

fn ioctl(sock: &OwnedFd, name: &str, request: libc::c_ulong, what: &'static str) -> Result<libc::ifreq, LiveError> {
    use std::os::fd::AsRawFd;
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name (checked shorter than IFNAMSIZ);
    // the kernel writes only within it.
    if unsafe { libc::ioctl(sock.as_raw_fd(), request as _, &mut req) } < 0 {
        return Err(LiveError::os(name, what, io::Error::last_os_error()));
    }
    Ok(req)
}
