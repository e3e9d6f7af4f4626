//! PLACEHOLDER: to be written.

use crate::{Facts, Segment, Verdict};

pub(crate) struct TlsParser {}

impl TlsParser {
    pub(crate) fn new() -> Self {
        TlsParser {}
    }

    pub(crate) fn segment(&mut self, _segment: &Segment<'_>, _facts: &mut Facts) -> Verdict {
        Verdict::NotMine
    }
}
