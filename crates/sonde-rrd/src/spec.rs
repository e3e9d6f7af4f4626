//! What a store holds: the step, the data sources and the archives (resolutions).

use std::fmt;

/// Longest data-source name rrdtool accepts (`DS_NAM_SIZE` − 1).
pub const MAX_NAME_LEN: usize = 19;
/// Most data sources one store may hold (a bound for reading a damaged header, not rrdtool's).
pub const MAX_SOURCES: usize = 4096;
/// Most archives one store may hold.
pub const MAX_ARCHIVES: usize = 256;
/// Largest file a spec may ask for (64 GiB): a bound that keeps every size computation in range.
pub const MAX_FILE_BYTES: u64 = 1 << 36;

/// A consolidation function, with rrdtool's meaning and names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cf {
    /// Mean of the known primary points.
    Average,
    /// Smallest known primary point.
    Min,
    /// Largest known primary point.
    Max,
    /// The last primary point of the row (unknown if that one is unknown), as rrdtool's LAST.
    Last,
}

impl Cf {
    /// rrdtool's name: `AVERAGE`, `MIN`, `MAX` or `LAST`.
    pub fn name(self) -> &'static str {
        match self {
            Cf::Average => "AVERAGE",
            Cf::Min => "MIN",
            Cf::Max => "MAX",
            Cf::Last => "LAST",
        }
    }

    /// The inverse of [`Cf::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<Cf> {
        [Cf::Average, Cf::Min, Cf::Max, Cf::Last].into_iter().find(|cf| cf.name().eq_ignore_ascii_case(name))
    }

    pub(crate) fn code(self) -> u32 {
        match self {
            Cf::Average => 1,
            Cf::Min => 2,
            Cf::Max => 3,
            Cf::Last => 4,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<Cf> {
        [Cf::Average, Cf::Min, Cf::Max, Cf::Last].into_iter().find(|cf| cf.code() == code)
    }
}

impl fmt::Display for Cf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One archive: rows of `steps` consolidated primary points each, `rows` of them in a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveSpec {
    pub cf: Cf,
    /// Primary points per row (rrdtool's `pdp_per_row`); a row covers `steps × step_s` seconds.
    pub steps: u32,
    /// Rows kept; the archive spans `rows × steps × step_s` seconds.
    pub rows: u32,
}

/// The layout of a store, fixed when it is created.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Seconds per primary point.
    pub step_s: u64,
    /// Data-source names: 1–19 characters of `[A-Za-z0-9_]`, distinct (rrdtool's rules).
    pub sources: Vec<String>,
    pub archives: Vec<ArchiveSpec>,
    /// Largest share of unknown primary points a consolidated row may have and still be known
    /// (rrdtool's "xfiles factor"), in [0, 1).
    pub xff: f64,
}

/// rrdtool's default xfiles factor.
pub const DEFAULT_XFF: f64 = 0.5;

/// Tstat's resolutions for a 300-second step, as (primary points per row, rows, seconds spanned).
const TSTAT_ARCHIVES: [(u32, u64); 4] = [
    (1, 86_400),         // 5-minute points for a day (288 rows)
    (6, 7 * 86_400),     // 30-minute points for a week (336 rows)
    (24, 31 * 86_400),   // 2-hour points for a month (372 rows)
    (288, 365 * 86_400), // 1-day points for a year (365 rows)
];

impl Spec {
    /// The size of a store made with this spec, in bytes: fixed at creation.
    pub fn file_len_bytes(&self) -> u64 {
        crate::format::Layout::new(self.sources.len(), &self.archives).file_len
    }

    /// Tstat's archives: with a 300 s step, 5-minute points for a day (1 × 288), 30-minute for
    /// a week (6 × 336), 2-hour for a month (24 × 372) and 1-day for a year (288 × 365), each
    /// as AVERAGE, MIN and MAX (12 archives), xff 0.5.
    ///
    /// For another step the primary points per row stay 1, 6, 24 and 288 and the rows are
    /// scaled so that each archive still spans a day, a week, 31 days and 365 days (rounded up
    /// to whole rows): with a 60 s step, 1 × 1440, 6 × 1680, 24 × 1860, 288 × 1825.
    /// [`Spec::validate`] still applies (a step of 0 gives rows of 0 and is refused there).
    pub fn tstat_default(step_s: u64, sources: Vec<String>) -> Spec {
        let mut archives = Vec::with_capacity(12);
        for (steps, span_s) in TSTAT_ARCHIVES {
            let row_s = step_s.saturating_mul(u64::from(steps));
            let rows = if row_s == 0 { 0 } else { span_s.div_ceil(row_s).clamp(1, u64::from(u32::MAX)) as u32 };
            for cf in [Cf::Average, Cf::Min, Cf::Max] {
                archives.push(ArchiveSpec { cf, steps, rows });
            }
        }
        Spec { step_s, sources, archives, xff: DEFAULT_XFF }
    }

    /// Archives chosen by resolution: for each `(resolution_s, span_s)`, rows of
    /// `resolution_s ÷ step_s` primary points covering at least `span_s`, as AVERAGE, MIN and
    /// MAX (xff 0.5). `None` when a resolution is not a whole multiple of the step (or is 0).
    pub fn with_resolutions(step_s: u64, sources: Vec<String>, resolutions: &[(u64, u64)]) -> Option<Spec> {
        let mut archives = Vec::with_capacity(resolutions.len() * 3);
        for &(resolution_s, span_s) in resolutions {
            if step_s == 0 || resolution_s == 0 || resolution_s % step_s != 0 {
                return None;
            }
            let steps = u32::try_from(resolution_s / step_s).ok()?;
            let rows = span_s.div_ceil(resolution_s).clamp(1, u64::from(u32::MAX)) as u32;
            for cf in [Cf::Average, Cf::Min, Cf::Max] {
                archives.push(ArchiveSpec { cf, steps, rows });
            }
        }
        Some(Spec { step_s, sources, archives, xff: DEFAULT_XFF })
    }

    /// Checks every rule; the first problem found is returned.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.step_s == 0 {
            return Err(SpecError::ZeroStep);
        }
        if self.sources.is_empty() {
            return Err(SpecError::NoSources);
        }
        if self.sources.len() > MAX_SOURCES {
            return Err(SpecError::TooManySources { count: self.sources.len() });
        }
        for (index, name) in self.sources.iter().enumerate() {
            check_name(name).map_err(|problem| SpecError::BadName { index, problem })?;
            if self.sources[..index].contains(name) {
                return Err(SpecError::DuplicateName { index });
            }
        }
        if self.archives.is_empty() {
            return Err(SpecError::NoArchives);
        }
        if self.archives.len() > MAX_ARCHIVES {
            return Err(SpecError::TooManyArchives { count: self.archives.len() });
        }
        for (index, a) in self.archives.iter().enumerate() {
            if a.steps == 0 {
                return Err(SpecError::ZeroStepsPerRow { index });
            }
            if a.rows == 0 {
                return Err(SpecError::ZeroRows { index });
            }
            // The span of the archive must be representable in seconds as an i64.
            let span = self.step_s.checked_mul(u64::from(a.steps)).and_then(|s| s.checked_mul(u64::from(a.rows)));
            if span.is_none_or(|s| s > i64::MAX as u64) {
                return Err(SpecError::SpanTooLong { index });
            }
        }
        // rrdtool create: "Invalid xff: must be between 0 and 1" (it refuses 1 itself).
        if !(self.xff >= 0.0 && self.xff < 1.0) {
            return Err(SpecError::BadXff);
        }
        let rows: u64 = self.archives.iter().map(|a| u64::from(a.rows)).sum();
        let data_bytes = rows.saturating_mul(self.sources.len() as u64).saturating_mul(8);
        if data_bytes > MAX_FILE_BYTES {
            return Err(SpecError::TooLarge { data_bytes });
        }
        Ok(())
    }

    /// Seconds covered by one row of archive `index`.
    pub fn resolution_s(&self, index: usize) -> u64 {
        self.archives.get(index).map_or(0, |a| self.step_s * u64::from(a.steps))
    }

    /// The step and the distinct resolutions, for a message: "step 60 s, 2 sources, archives
    /// 60 s × 60, 3600 s × 24" (row length × rows; the consolidation functions left out).
    pub fn summary(&self) -> String {
        let mut archives: Vec<String> = Vec::new();
        for a in &self.archives {
            let text = format!("{} s × {}", u64::from(a.steps) * self.step_s, a.rows);
            if !archives.contains(&text) {
                archives.push(text);
            }
        }
        format!("step {} s, {} sources, archives {}", self.step_s, self.sources.len(), archives.join(", "))
    }
}

/// Checks a data-source name against rrdtool's rule: 1–19 characters of `[A-Za-z0-9_]`.
pub fn check_name(name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameProblem::TooLong { len: name.len() });
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(NameProblem::BadChar(c));
    }
    Ok(())
}

/// Why a data-source name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    TooLong { len: usize },
    BadChar(char),
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("it is empty"),
            NameProblem::TooLong { len } => write!(f, "it has {len} bytes, at most {MAX_NAME_LEN} are allowed"),
            NameProblem::BadChar(c) => write!(f, "{c:?} is not one of A-Z a-z 0-9 _"),
        }
    }
}

/// Why a [`Spec`] was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpecError {
    ZeroStep,
    NoSources,
    TooManySources { count: usize },
    BadName { index: usize, problem: NameProblem },
    DuplicateName { index: usize },
    NoArchives,
    TooManyArchives { count: usize },
    ZeroStepsPerRow { index: usize },
    ZeroRows { index: usize },
    SpanTooLong { index: usize },
    BadXff,
    TooLarge { data_bytes: u64 },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::ZeroStep => f.write_str("the step must be at least 1 second"),
            SpecError::NoSources => f.write_str("a store needs at least one data source"),
            SpecError::TooManySources { count } => {
                write!(f, "{count} data sources; at most {MAX_SOURCES} are allowed")
            }
            SpecError::BadName { index, problem } => {
                write!(f, "data source {index}: bad name: {problem}")
            }
            SpecError::DuplicateName { index } => write!(f, "data source {index}: its name is used twice"),
            SpecError::NoArchives => f.write_str("a store needs at least one archive"),
            SpecError::TooManyArchives { count } => {
                write!(f, "{count} archives; at most {MAX_ARCHIVES} are allowed")
            }
            SpecError::ZeroStepsPerRow { index } => {
                write!(f, "archive {index}: primary points per row must be at least 1")
            }
            SpecError::ZeroRows { index } => write!(f, "archive {index}: it must have at least one row"),
            SpecError::SpanTooLong { index } => write!(f, "archive {index}: it spans too many seconds"),
            SpecError::BadXff => f.write_str("xff must be at least 0 and less than 1"),
            SpecError::TooLarge { data_bytes } => {
                write!(f, "the archives would take {data_bytes} bytes; at most {MAX_FILE_BYTES} are allowed")
            }
        }
    }
}

impl std::error::Error for SpecError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tstat_default_for_five_minutes() {
        let spec = Spec::tstat_default(300, names(&["bytes"]));
        spec.validate().unwrap();
        let shape: Vec<(Cf, u32, u32)> = spec.archives.iter().map(|a| (a.cf, a.steps, a.rows)).collect();
        let mut want = Vec::new();
        for (steps, rows) in [(1, 288), (6, 336), (24, 372), (288, 365)] {
            for cf in [Cf::Average, Cf::Min, Cf::Max] {
                want.push((cf, steps, rows));
            }
        }
        assert_eq!(shape, want);
        assert_eq!(spec.xff, 0.5);
    }

    #[test]
    fn resolutions_give_rows_spanning_at_least_the_span() {
        let spec =
            Spec::with_resolutions(300, names(&["a"]), &[(300, 86_400), (1800, 7 * 86_400), (7200, 1000)]).unwrap();
        let shape: Vec<(u32, u32)> = spec.archives.iter().step_by(3).map(|a| (a.steps, a.rows)).collect();
        assert_eq!(shape, [(1, 288), (6, 336), (24, 1)]);
        assert_eq!(spec.archives[..3], Spec::tstat_default(300, names(&["a"])).archives[..3]);
        assert!(Spec::with_resolutions(300, names(&["a"]), &[(60, 86_400)]).is_none());
        assert!(Spec::with_resolutions(300, names(&["a"]), &[(450, 86_400)]).is_none());
        assert!(Spec::with_resolutions(300, names(&["a"]), &[(0, 86_400)]).is_none());
    }

    #[test]
    fn tstat_default_scales_rows_for_another_step() {
        let spec = Spec::tstat_default(60, names(&["a"]));
        let rows: Vec<(u32, u32)> = spec.archives.iter().step_by(3).map(|a| (a.steps, a.rows)).collect();
        assert_eq!(rows, [(1, 1440), (6, 1680), (24, 1860), (288, 1825)]);
        // 7 s does not divide a day: rounded up to whole rows.
        let spec = Spec::tstat_default(7, names(&["a"]));
        assert_eq!(spec.archives[0].rows, 12_343);
        assert_eq!(Spec::tstat_default(0, names(&["a"])).validate(), Err(SpecError::ZeroStep));
    }

    #[test]
    fn names_follow_rrdtool() {
        assert!(check_name("rtt_p95").is_ok());
        assert!(check_name("A_very_long_name_19").is_ok());
        assert_eq!(check_name(""), Err(NameProblem::Empty));
        assert_eq!(check_name("A_very_long_name_190"), Err(NameProblem::TooLong { len: 20 }));
        assert_eq!(check_name("rtt-p95"), Err(NameProblem::BadChar('-')));
        assert_eq!(check_name("é"), Err(NameProblem::BadChar('é')));
    }

    #[test]
    fn every_bad_spec_is_refused() {
        let good = Spec::tstat_default(300, names(&["a", "b"]));
        let check = |f: &dyn Fn(&mut Spec), want: SpecError| {
            let mut s = good.clone();
            f(&mut s);
            assert_eq!(s.validate(), Err(want));
            assert!(!want.to_string().is_empty());
        };
        check(&|s| s.step_s = 0, SpecError::ZeroStep);
        check(&|s| s.sources.clear(), SpecError::NoSources);
        check(&|s| s.sources[1] = "a b".into(), SpecError::BadName { index: 1, problem: NameProblem::BadChar(' ') });
        check(&|s| s.sources[1] = "a".into(), SpecError::DuplicateName { index: 1 });
        check(&|s| s.archives.clear(), SpecError::NoArchives);
        check(&|s| s.archives[2].steps = 0, SpecError::ZeroStepsPerRow { index: 2 });
        check(&|s| s.archives[3].rows = 0, SpecError::ZeroRows { index: 3 });
        check(&|s| s.xff = 1.0, SpecError::BadXff);
        check(&|s| s.xff = f64::NAN, SpecError::BadXff);
        check(&|s| s.xff = -0.1, SpecError::BadXff);
        check(
            &|s| {
                s.step_s = u64::MAX / 2;
            },
            SpecError::SpanTooLong { index: 0 },
        );
        check(
            &|s| s.archives[0].rows = u32::MAX,
            SpecError::TooLarge { data_bytes: (u64::from(u32::MAX) + 3 * (336 + 372 + 365) + 2 * 288) * 16 },
        );
    }

    #[test]
    fn cf_names_round_trip() {
        for cf in [Cf::Average, Cf::Min, Cf::Max, Cf::Last] {
            assert_eq!(Cf::from_name(cf.name()), Some(cf));
            assert_eq!(Cf::from_code(cf.code()), Some(cf));
        }
        assert_eq!(Cf::from_name("max"), Some(Cf::Max));
        assert_eq!(Cf::from_name("MEDIAN"), None);
        assert_eq!(Cf::from_code(0), None);
    }
}
