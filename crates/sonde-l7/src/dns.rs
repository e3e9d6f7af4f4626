//! PLACEHOLDER: to be written.

use crate::{Facts, Segment, Verdict};

pub(crate) struct DnsParser {}

impl DnsParser {
    pub(crate) fn new(_transport: crate::Transport, _ports: [u16; 2]) -> Self {
        DnsParser {}
    }

    pub(crate) fn segment(&mut self, _segment: &Segment<'_>, _facts: &mut Facts) -> Verdict {
        Verdict::NotMine
    }
}
