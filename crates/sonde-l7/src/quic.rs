//! PLACEHOLDER: to be written.

use crate::{Facts, Segment, Verdict};

pub(crate) struct QuicParser {}

impl QuicParser {
    pub(crate) fn new() -> Self {
        QuicParser {}
    }

    pub(crate) fn segment(&mut self, _segment: &Segment<'_>, _facts: &mut Facts) -> Verdict {
        Verdict::NotMine
    }
}
