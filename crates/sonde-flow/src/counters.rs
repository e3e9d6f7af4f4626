//! The per-direction counters of an open TCP flow: the fields of [`TcpDirStats`] in the narrowest
//! types that hold them (packet counts in u32, windows in u32 since a scaled window is below
//! 2^30), widened into the record only when the flow ends. Counters of rare events live out of
//! line in a pool ([`Rare`]), so that the many flows that never retransmit stay small.

use std::num::NonZeroU32;

use crate::record::{AnomalyCounts, RttStats, TcpDirStats};

/// `AnomalyCounts` in u32 (packets of one flow).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnomalyCounters {
    pub rto: u32,
    pub fast_retx: u32,
    pub reordering: u32,
    pub net_dup: u32,
    pub flow_control: u32,
    pub unneeded_rto: u32,
    pub unneeded_fast_retx: u32,
    pub unknown: u32,
}

/// The counters of events most flows never have: retransmissions, reordering, zero windows,
/// SYNs with a new ISN, and 4 GiB of bytes in one direction.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rare {
    /// The high words of `DirCounters::ip_bytes` and `payload_bytes`.
    pub ip_bytes_high: u32,
    pub payload_bytes_high: u32,
    pub retx_bytes: u64,
    pub retx_pkts: u32,
    pub ooo_pkts: u32,
    pub win_zero: u32,
    pub syn_retx_new_isn: u32,
    pub anomalies: AnomalyCounters,
    /// The in-flight counts once one passed 32 bits (`DirCounters::inflight_wide`).
    pub inflight: Inflight<u64>,
    /// SACK blocks received: only a direction whose peer lost or reordered something gets any.
    pub sack_blocks: u32,
    /// The high bits of `DirCounters::syn_cnt`, `fin_cnt` and `rst_cnt` (a count past 255):
    /// each count is `high << 8 | low`.
    pub flag_cnt_high: [u32; 3],
    /// The high bits of `Half::control_seqs` (the count is `high << 16 | low`).
    pub control_seqs_high: u32,
}

/// In-flight bytes of one direction: the least, the most, and the most in the initial window.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Inflight<T> {
    pub min: T,
    pub max: T,
    pub initial: T,
}

impl<T: Copy + Ord + Default> Inflight<T> {
    pub fn add(&mut self, bytes: T, initial_window: bool) {
        // `max` is zero until a non-zero value: until then `min` follows every value.
        if self.max == T::default() || bytes < self.min {
            self.min = bytes;
        }
        self.max = self.max.max(bytes);
        if initial_window {
            self.initial = self.initial.max(bytes);
        }
    }
}

impl Inflight<u32> {
    pub fn widen(self) -> Inflight<u64> {
        Inflight { min: self.min.into(), max: self.max.into(), initial: self.initial.into() }
    }
}

/// The RTT state of a direction whose data was timed at least once: the samples' statistics
/// and the RFC 6298 estimator. Out of line, since many directions never get a sample (those
/// that only acknowledge, or whose data is still in flight).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rtt {
    pub stats: RttStats,
    pub srtt_ns: f64,
    pub rttvar_ns: f64,
}

/// A reference to a block in a [`Pool`]: its index plus one, so that `Option<BlockRef>` takes
/// four bytes.
pub(crate) type BlockRef = NonZeroU32;

/// Out-of-line blocks of per-direction state, freed ones reused. Room for the expected blocks is
/// reserved up front (address space until written); more grow it.
#[derive(Debug, Default)]
pub(crate) struct Pool<T> {
    blocks: Vec<T>,
    free: Vec<BlockRef>,
}

impl<T: Copy + Default> Pool<T> {
    pub fn with_capacity(n: usize) -> Self {
        Pool { blocks: Vec::with_capacity(n), free: Vec::new() }
    }

    /// Reserved bytes never written.
    pub fn untouched_bytes(&self) -> usize {
        (self.blocks.capacity() - self.blocks.len()) * std::mem::size_of::<T>()
    }

    /// The block of `r`, taken from the pool the first time.
    pub fn get(&mut self, r: &mut Option<BlockRef>) -> &mut T {
        let b = *r.get_or_insert_with(|| {
            self.free.pop().unwrap_or_else(|| {
                self.blocks.push(T::default());
                BlockRef::new(self.blocks.len() as u32).expect("a pool holds fewer than 2^32 blocks")
            })
        });
        &mut self.blocks[b.get() as usize - 1]
    }

    /// The block of `r`, if it has one.
    pub fn peek(&self, r: Option<BlockRef>) -> Option<&T> {
        r.map(|b| &self.blocks[b.get() as usize - 1])
    }

    /// The block of `r`, the default if it has none.
    pub fn read(&self, r: Option<BlockRef>) -> T {
        r.map_or_else(T::default, |b| self.blocks[b.get() as usize - 1])
    }

    /// Returns `r`'s block to the pool, cleared.
    pub fn release(&mut self, r: &mut Option<BlockRef>) {
        if let Some(b) = r.take() {
            self.blocks[b.get() as usize - 1] = T::default();
            self.free.push(b);
        }
    }
}

/// See `TcpDirStats` for each field's meaning.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DirCounters {
    /// The low words of the byte counts (`Rare` has the high ones: few directions carry 4 GiB).
    pub ip_bytes: u32,
    pub payload_bytes: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub first_payload_ns: u64,
    pub last_payload_ns: u64,
    pub first_ack_ns: u64,
    /// 32 bits hold any realistic window; past them the counts go on in `Rare::inflight`.
    pub inflight: Inflight<u32>,
    pub pkts: u32,
    pub data_pkts: u32,
    pub ack_pkts: u32,
    pub pure_ack_pkts: u32,
    /// The low 8 bits of the SYN, FIN and RST counts (`Rare::flag_cnt_high` has the rest: one
    /// or two of each is the rule).
    pub syn_cnt: u8,
    pub fin_cnt: u8,
    pub rst_cnt: u8,
    pub seg_min: u32,
    pub seg_max: u32,
    pub win_min: u32,
    pub win_max: u32,
    /// This direction's `Rare` block, once it needs one.
    pub rare: Option<BlockRef>,
    /// This direction's `Rtt` block, from its first RTT sample.
    pub rtt: Option<BlockRef>,
    pub mss_opt: u16,
    pub ttl_min: u8,
    pub ttl_max: u8,
    pub win_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    pub inflight_wide: bool,
}

impl DirCounters {
    pub fn record(&self, unique_bytes: u64, segment_flags: u8, rare: &Rare, rtt: &Rtt) -> TcpDirStats {
        let a = &rare.anomalies;
        let inflight = if self.inflight_wide { rare.inflight } else { self.inflight.widen() };
        TcpDirStats {
            pkts: self.pkts.into(),
            ip_bytes: u64::from(rare.ip_bytes_high) << 32 | u64::from(self.ip_bytes),
            payload_bytes: u64::from(rare.payload_bytes_high) << 32 | u64::from(self.payload_bytes),
            unique_bytes,
            data_pkts: self.data_pkts.into(),
            ack_pkts: self.ack_pkts.into(),
            pure_ack_pkts: self.pure_ack_pkts.into(),
            syn_cnt: wide_count(rare.flag_cnt_high[0], self.syn_cnt),
            fin_cnt: wide_count(rare.flag_cnt_high[1], self.fin_cnt),
            rst_cnt: wide_count(rare.flag_cnt_high[2], self.rst_cnt),
            flags: segment_flags,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            first_payload_ns: self.first_payload_ns,
            last_payload_ns: self.last_payload_ns,
            first_ack_ns: self.first_ack_ns,
            ttl_min: self.ttl_min,
            ttl_max: self.ttl_max,
            mss_opt: self.mss_opt,
            win_scale: self.win_scale,
            sack_permitted: self.sack_permitted,
            timestamps: self.timestamps,
            sack_blocks: rare.sack_blocks.into(),
            seg_min: self.seg_min,
            seg_max: self.seg_max,
            win_min: self.win_min.into(),
            win_max: self.win_max.into(),
            win_zero: rare.win_zero.into(),
            rtt: rtt.stats,
            retx_pkts: rare.retx_pkts.into(),
            retx_bytes: rare.retx_bytes,
            ooo_pkts: rare.ooo_pkts.into(),
            anomalies: AnomalyCounts {
                rto: a.rto.into(),
                fast_retx: a.fast_retx.into(),
                reordering: a.reordering.into(),
                net_dup: a.net_dup.into(),
                flow_control: a.flow_control.into(),
                unneeded_rto: a.unneeded_rto.into(),
                unneeded_fast_retx: a.unneeded_fast_retx.into(),
                unknown: a.unknown.into(),
            },
            syn_retx_new_isn: rare.syn_retx_new_isn.into(),
            inflight_min: inflight.min,
            inflight_max: inflight.max,
            inflight_initial: inflight.initial,
        }
    }
}

/// A count kept as a low byte inline and the high bits out of line.
fn wide_count(high: u32, low: u8) -> u64 {
    u64::from(high) << 8 | u64::from(low)
}
