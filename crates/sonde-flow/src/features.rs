//! NFStream's flow features (`--features ml`; docs/features.md): per direction and both
//! together, the packet sizes' and inter-arrival times' min, mean, standard deviation and max,
//! the count of packets with each TCP flag, and the SPLT (the first N packets' directions, sizes
//! and inter-arrival times), defined as NFStream 6.6 computes them with
//! `statistical_analysis=True, splt_analysis=N` (its engine, `lib_engine.c`, and `flow.py`):
//!
//! - directions are NFStream's: `src2dst` is from the sender of the flow's first packet (its
//!   `src`), `dst2src` the other way, whatever sonde calls client and server;
//! - a packet's size is its length on the wire (the frame's original length: NFStream's default
//!   `accounting_mode=0`, libpcap's `len`);
//! - times are whole milliseconds (the timestamp's ms, truncated), on a clock that never steps
//!   back (the latest packet time so far, as NFStream forces time order): an inter-arrival time
//!   is the difference of two such times, the first packet's being 0 in the SPLT;
//! - means are running means, the deviations the sample deviation (n − 1; for the
//!   inter-arrival times n − 1 of the n − 1 gaps) from Welford's running sum of squares, in the
//!   same operations as NFStream's, so that the doubles come out the same; 0 below two samples;
//! - a flag is counted on every TCP packet that has it; UDP flows count none.
//!
//! The state is kept only with the option (`FlowConfig::features`), one per table slot, with
//! `splt` entries each: bounded by the table's size, nothing per packet beyond it.

use sonde_wire::TcpFlags;

/// The TCP flags counted, in NFStream's order (its column names' `syn`, `cwr`, …).
pub const FLAGS: [(&str, u16); 8] = [
    ("syn", TcpFlags::SYN),
    ("cwr", TcpFlags::CWR),
    ("ece", TcpFlags::ECE),
    ("urg", TcpFlags::URG),
    ("ack", TcpFlags::ACK),
    ("psh", TcpFlags::PSH),
    ("rst", TcpFlags::RST),
    ("fin", TcpFlags::FIN),
];

/// NFStream's default SPLT length (`splt_analysis` as its docs suggest).
pub const DEFAULT_SPLT: u16 = 20;

/// The features asked for: the statistics always, the SPLT of the first `splt` packets (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeaturesConfig {
    pub splt: u16,
}

impl Default for FeaturesConfig {
    fn default() -> Self {
        FeaturesConfig { splt: DEFAULT_SPLT }
    }
}

/// Count, min, max, running mean and sum of squared deviations of a series of integers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Moments {
    pub n: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    /// Σ (x − mean)², by Welford's update.
    m2: f64,
}

impl Moments {
    /// Adds `x` as NFStream does: the first sets min, max and mean; each later one moves the
    /// mean by (x − mean) / n and adds (x − old mean)(x − new mean) to the sum of squares.
    #[inline]
    pub fn add(&mut self, x: u64) {
        self.n += 1;
        if self.n == 1 {
            (self.min, self.max, self.mean) = (x, x, x as f64);
            return;
        }
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        let x = x as f64;
        let old = self.mean;
        self.mean += (x - old) / self.n as f64;
        self.m2 += (x - old) * (x - self.mean);
    }

    /// The sample standard deviation (n − 1), 0 below two values.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        (self.m2 / (self.n - 1) as f64).sqrt()
    }
}

/// One of the first packets of a flow (SPLT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpltPacket {
    /// 0: from the flow's first sender (src2dst); 1: the other way.
    pub direction: u8,
    pub size: u32,
    /// Since the flow's previous packet (0 for the first), ms.
    pub piat_ms: u64,
}

/// A flow's features when it ended (`TcpRecord::features`, `UdpRecord::features`). Indices
/// of the arrays: 0 bidirectional, 1 src2dst, 2 dst2src.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowFeatures {
    /// Whether the first packet's sender (NFStream's src) is the record's client.
    pub src_is_client: bool,
    /// Packet sizes (bytes on the wire).
    pub ps: [Moments; 3],
    /// Inter-arrival times (ms).
    pub piat: [Moments; 3],
    /// Packets with each of [`FLAGS`].
    pub flags: [[u64; 8]; 3],
    /// The first packets, up to `splt_len`.
    pub splt: Vec<SpltPacket>,
    /// The SPLT's length (NFStream's N): the lists are padded to it with −1.
    pub splt_len: u16,
}

impl FlowFeatures {
    /// The SPLT's `field` of each of the first `splt_len` packets, −1 past the flow's last.
    pub fn splt_list(&self, field: fn(&SpltPacket) -> i64) -> Vec<i64> {
        let mut list: Vec<i64> = self.splt.iter().map(field).collect();
        list.resize(usize::from(self.splt_len), -1);
        list
    }
}

/// One flow's running state.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// sonde's direction (0 client, 1 server) of the first packet.
    first_dir: u8,
    /// Packets in the SPLT so far.
    splt_len: u16,
    /// The last packet's time (ms), both directions and each.
    last_ms: [u64; 3],
    ps: [Moments; 3],
    piat: [Moments; 3],
    /// Flag counts of src2dst and dst2src.
    flags: [[u32; 8]; 2],
}

/// Every flow's state, by table slot.
#[derive(Debug)]
pub(crate) struct Features {
    splt: usize,
    /// The table's slots: the states never outgrow them.
    slots: usize,
    states: Vec<State>,
    /// `splt` entries per table slot.
    packets: Vec<SpltPacket>,
}

impl Features {
    /// The states of a table of `slots` slots (grown as they are used).
    pub fn new(cfg: FeaturesConfig, slots: usize) -> Features {
        Features { splt: usize::from(cfg.splt), slots, states: Vec::new(), packets: Vec::new() }
    }

    /// Counts a packet of `size` bytes at `now_ns` (the tracker's clock) from sonde's direction
    /// `dir` in the flow of `slot` (`first`: its first packet); `flags`: a TCP packet's.
    #[inline]
    pub fn on_packet(&mut self, slot: u32, first: bool, dir: usize, now_ns: u64, size: u32, flags: Option<TcpFlags>) {
        let i = slot as usize;
        if self.states.len() <= i {
            self.grow(i);
        }
        let now_ms = now_ns / 1_000_000;
        let s = &mut self.states[i];
        if first {
            *s = State { first_dir: dir as u8, last_ms: [now_ms; 3], ..State::default() };
        }
        let d = usize::from(dir as u8 != s.first_dir);
        let piat_ms = now_ms.saturating_sub(s.last_ms[0]);
        if !first {
            s.piat[0].add(piat_ms);
            if s.ps[1 + d].n > 0 {
                s.piat[1 + d].add(now_ms.saturating_sub(s.last_ms[1 + d]));
            }
        }
        s.last_ms[0] = now_ms;
        s.last_ms[1 + d] = now_ms;
        s.ps[0].add(u64::from(size));
        s.ps[1 + d].add(u64::from(size));
        if let Some(flags) = flags {
            for (count, (_, bit)) in s.flags[d].iter_mut().zip(FLAGS) {
                *count += u32::from(flags.0 & bit != 0);
            }
        }
        if usize::from(s.splt_len) < self.splt {
            self.packets[i * self.splt + usize::from(s.splt_len)] =
                SpltPacket { direction: d as u8, size, piat_ms: if first { 0 } else { piat_ms } };
            s.splt_len += 1;
        }
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        let len = (self.states.len() * 2).max(64).min(self.slots).max(i + 1);
        self.states.resize(len, State::default());
        self.packets.resize(len * self.splt, SpltPacket::default());
    }

    /// The features of the flow in `slot`, for a record whose client is sonde's direction 0.
    pub fn of(&self, slot: u32) -> Option<Box<FlowFeatures>> {
        let i = slot as usize;
        let s = self.states.get(i)?;
        let [src, dst] = s.flags.map(|counts| counts.map(u64::from));
        let flags = [std::array::from_fn(|f| src[f] + dst[f]), src, dst];
        let start = i * self.splt;
        Some(Box::new(FlowFeatures {
            src_is_client: s.first_dir == 0,
            ps: s.ps,
            piat: s.piat,
            flags,
            splt: self.packets[start..start + usize::from(s.splt_len)].to_vec(),
            splt_len: self.splt as u16,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_match_a_two_pass_computation() {
        let xs = [60u64, 1514, 52, 52, 1514, 0, 9000, 40];
        let mut m = Moments::default();
        xs.iter().for_each(|&x| m.add(x));
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<u64>() as f64 / n;
        let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
        assert_eq!((m.n, m.min, m.max), (8, 0, 9000));
        assert!((m.mean - mean).abs() < 1e-9);
        assert!((m.stddev() - var.sqrt()).abs() < 1e-9);
        let mut one = Moments::default();
        one.add(7);
        assert_eq!((one.mean, one.stddev()), (7.0, 0.0));
    }

    #[test]
    fn the_state_keeps_its_size() {
        // 336 bytes a table slot, and 16 a SPLT packet (docs/features.md, Cost).
        assert_eq!(std::mem::size_of::<State>(), 336);
        assert_eq!(std::mem::size_of::<SpltPacket>(), 16);
    }

    #[test]
    fn directions_follow_the_first_sender_and_splt_pads() {
        let mut f = Features::new(FeaturesConfig { splt: 4 }, 8);
        let ms = 1_000_000;
        // First packet from sonde's server side (dir 1): it is src2dst.
        f.on_packet(3, true, 1, 1000 * ms, 60, Some(TcpFlags(TcpFlags::SYN)));
        f.on_packet(3, false, 0, 1010 * ms + 999_999, 60, Some(TcpFlags(TcpFlags::SYN | TcpFlags::ACK)));
        f.on_packet(3, false, 1, 1030 * ms, 52, Some(TcpFlags(TcpFlags::ACK)));
        let r = f.of(3).unwrap();
        assert!(!r.src_is_client);
        assert_eq!((r.ps[0].n, r.ps[1].n, r.ps[2].n), (3, 2, 1));
        assert_eq!((r.piat[0].min, r.piat[0].max), (10, 20));
        assert_eq!((r.piat[1].n, r.piat[1].min), (1, 30));
        assert_eq!(r.piat[2].n, 0);
        assert_eq!(r.flags[0][0], 2); // SYNs
        assert_eq!((r.flags[1][4], r.flags[2][4]), (1, 1)); // ACKs
        assert_eq!(r.splt_list(|p| i64::from(p.direction)), [0, 1, 0, -1]);
        assert_eq!(r.splt_list(|p| i64::from(p.size)), [60, 60, 52, -1]);
        assert_eq!(r.splt_list(|p| p.piat_ms as i64), [0, 10, 20, -1]);
        // The slot's next flow starts afresh.
        f.on_packet(3, true, 0, 2000 * ms, 100, None);
        let r = f.of(3).unwrap();
        assert!(r.src_is_client);
        assert_eq!((r.ps[0].n, r.flags[0][0]), (1, 0));
        assert_eq!(r.splt_list(|p| p.piat_ms as i64), [0, -1, -1, -1]);
    }
}
