//! PLACEHOLDER: to be written.

use crate::{Facts, Segment, Verdict};

pub(crate) struct HttpParser {}

impl HttpParser {
    pub(crate) fn new() -> Self {
        HttpParser {}
    }

    pub(crate) fn segment(&mut self, _segment: &Segment<'_>, _facts: &mut Facts) -> Verdict {
        Verdict::NotMine
    }
}
