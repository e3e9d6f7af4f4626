//! Describing a store for a person: `sonde ts info`.

use std::io::Write;
use std::path::Path;

use crate::{utc, Error, Store};

impl Store {
    /// Writes the store's size, step, data sources, xff, creation and last update times and a
    /// table of its archives (consolidation, points per row, rows, resolution, span), one item
    /// a line. `path` is where the store was opened from, which the store does not keep.
    pub fn write_info<W: Write + ?Sized>(&self, path: &Path, w: &mut W) -> Result<(), Error> {
        let spec = self.spec();
        writeln!(w, "store        {}", path.display())?;
        writeln!(w, "size         {} bytes (fixed at creation)", self.file_len_bytes())?;
        writeln!(w, "step         {} s", spec.step_s)?;
        writeln!(w, "sources      {}", spec.sources.join(", "))?;
        writeln!(w, "xff          {}", spec.xff)?;
        writeln!(w, "created      {} ({})", self.start_s(), utc(self.start_s() as i64))?;
        if self.last_update_s() == self.start_s() {
            writeln!(w, "last update  none yet")?;
        } else {
            writeln!(w, "last update  {} ({})", self.last_update_s(), utc(self.last_update_s() as i64))?;
        }
        writeln!(w, "archives")?;
        writeln!(
            w,
            "  {:>3}  {:<7}  {:>7}  {:>6}  {:>10}  {:>10}",
            "#", "cf", "per row", "rows", "resolution", "span"
        )?;
        for (a, archive) in spec.archives.iter().enumerate() {
            let resolution_s = spec.resolution_s(a);
            writeln!(
                w,
                "  {a:>3}  {:<7}  {:>7}  {:>6}  {:>10}  {:>10}",
                archive.cf.name(),
                archive.steps,
                archive.rows,
                duration(resolution_s),
                duration(resolution_s * u64::from(archive.rows)),
            )?;
        }
        Ok(())
    }
}

/// Seconds in the largest unit that divides them: "5 min", "2 h", "365 days".
fn duration(s: u64) -> String {
    match s {
        0 => "0 s".into(),
        _ if s.is_multiple_of(86_400) => format!("{} day{}", s / 86_400, if s == 86_400 { "" } else { "s" }),
        _ if s.is_multiple_of(3_600) => format!("{} h", s / 3_600),
        _ if s.is_multiple_of(60) => format!("{} min", s / 60),
        _ => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    #[test]
    fn durations() {
        assert_eq!(duration(300), "5 min");
        assert_eq!(duration(7_200), "2 h");
        assert_eq!(duration(86_400), "1 day");
        assert_eq!(duration(365 * 86_400), "365 days");
        assert_eq!(duration(7), "7 s");
    }

    #[test]
    fn info_names_the_layout_and_the_last_update() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rrd");
        let spec =
            Spec::with_resolutions(60, vec!["bytes".into(), "flows".into()], &[(60, 3600), (3600, 86_400)]).unwrap();
        let mut store = Store::create(&path, &spec, 600).unwrap();
        let info = |store: &Store| {
            let mut out = Vec::new();
            store.write_info(&path, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let fresh = info(&store);
        assert!(fresh.starts_with(&format!("store        {}\n", path.display())), "{fresh}");
        assert!(fresh.contains("\nstep         60 s\n"), "{fresh}");
        assert!(fresh.contains("\nsources      bytes, flows\n"), "{fresh}");
        assert!(fresh.contains("\ncreated      600 (1970-01-01 00:10:00 UTC)\n"), "{fresh}");
        assert!(fresh.contains("\nlast update  none yet\n"), "{fresh}");
        assert!(fresh.contains("\n    0  AVERAGE        1      60       1 min         1 h\n"), "{fresh}");
        assert!(fresh.contains("\n    5  MAX           60      24         1 h       1 day\n"), "{fresh}");
        assert_eq!(fresh.lines().count(), 9 + 6);
        store.update(660, &[1.0, 2.0]).unwrap();
        assert!(info(&store).contains("\nlast update  660 (1970-01-01 00:11:00 UTC)\n"));
    }
}
