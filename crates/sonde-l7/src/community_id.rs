//! PLACEHOLDER: Community ID v1, to be written.

use std::net::IpAddr;

/// The Community ID v1 of a flow (`1:` and the base64 of a SHA-1), with `seed` (0 by default).
pub fn community_id(_protocol: u8, _src: (IpAddr, u16), _dst: (IpAddr, u16), _seed: u16) -> String {
    String::new()
}
