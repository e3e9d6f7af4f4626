//! The compiled set as the packet path uses it: matches numbered by the counter's slots, and
//! how much of a frame the patterns can read, so a worker thread can be sent only that.

use std::sync::Arc;

use crate::pattern::Anchor;
use crate::trie::{Compiled, Match};
use crate::Layers;

/// One version of the active definitions, compiled; shared read-only with the workers.
#[derive(Debug)]
pub struct Matcher {
    set: Compiled,
    /// The set's definition `i` is the counter's slot `slots[i]`.
    slots: Vec<u32>,
    /// Per frame anchor (link, network, transport, payload): the bytes past it the patterns read.
    reach: [u32; 4],
}

impl Matcher {
    pub(crate) fn new(set: Compiled, slots: Vec<u32>) -> Arc<Matcher> {
        let mut reach = [0u32; 4];
        for p in set.patterns() {
            let end = (p.offset_bits + p.bits).div_ceil(8);
            let at = match p.anchor {
                Anchor::Link => 0,
                Anchor::Net => 1,
                Anchor::Transport => 2,
                Anchor::Payload => 3,
                Anchor::Meta => continue,
            };
            reach[at] = reach[at].max(end);
        }
        Arc::new(Matcher { set, slots, reach })
    }

    /// The definitions `layers` matches, as the counter's slots, in slot order, into `out`
    /// (cleared first).
    #[inline]
    pub fn matches(&self, layers: &Layers<'_>, out: &mut Vec<Match>) {
        self.set.matches(layers, out);
        for m in out.iter_mut() {
            m.def = self.slots[m.def as usize];
        }
    }

    /// How many of the frame's first bytes the patterns can read: a copy of that prefix
    /// matches exactly as the whole frame does.
    pub fn prefix_len(&self, layers: &Layers<'_>) -> usize {
        let starts = [Some(0), layers.l3, layers.l4, layers.payload];
        let end = starts
            .iter()
            .zip(self.reach)
            .filter(|&(_, reach)| reach > 0)
            .filter_map(|(start, reach)| start.map(|s| s as usize + reach as usize))
            .max()
            .unwrap_or(0);
        end.min(layers.frame.len())
    }
}
