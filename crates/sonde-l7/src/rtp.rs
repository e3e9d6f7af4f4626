//! PLACEHOLDER: to be written.

use crate::{Facts, Segment, Verdict};

pub(crate) struct RtpParser {}

impl RtpParser {
    pub(crate) fn new() -> Self {
        RtpParser {}
    }

    pub(crate) fn segment(&mut self, _segment: &Segment<'_>, _facts: &mut Facts) -> Verdict {
        Verdict::NotMine
    }
}
