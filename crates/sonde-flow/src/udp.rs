//! UDP "connections": per-direction packet and byte counts between first and last packet.

use sonde_wire::{IpSummary, UdpSummary};

use crate::record::UdpDirStats;

#[derive(Debug, Clone, Default)]
pub struct UdpConn {
    pub(crate) dirs: [UdpDirStats; 2],
    pub(crate) first_ns: u64,
    pub(crate) last_ns: u64,
}

impl UdpConn {
    pub fn on_packet(&mut self, dir: usize, ts_ns: u64, ip: &IpSummary, u: &UdpSummary) {
        if self.first_ns == 0 {
            self.first_ns = ts_ns;
        }
        self.last_ns = self.last_ns.max(ts_ns);
        let d = &mut self.dirs[dir];
        if d.pkts == 0 {
            d.first_ns = ts_ns;
        }
        d.pkts += 1;
        d.ip_bytes += u64::from(ip.total_len);
        d.payload_bytes += u64::from(u.payload_len);
        d.last_ns = d.last_ns.max(ts_ns);
    }
}
