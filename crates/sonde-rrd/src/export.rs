//! Writing a store out: rrdtool's XML dump format and CSV.

use std::io::Write;

use crate::{Error, Store};

impl Store {
    /// Writes the store as `rrdtool dump` would (format version 0003), for `rrdtool restore`.
    ///
    /// Every data source is a GAUGE with min and max unknown and a minimal heartbeat of one step:
    /// rrdtool then treats a skipped step as unknown, as this store does, if updates go on in
    /// rrdtool. Values are written with 17 significant digits (rrdtool writes 11), so a restore
    /// gives back the stored doubles exactly. The consolidation state (`cdp_prep`) is the store's
    /// own, which is rrdtool's, so rrdtool can continue updating the restored file. Comments
    /// give each row's end time in UTC and in seconds.
    pub fn export_rrdtool_xml<W: Write + ?Sized>(&self, w: &mut W) -> Result<(), Error> {
        let spec = self.spec();
        let last = self.last_update_s();
        writeln!(w, "<?xml version=\"1.0\" encoding=\"utf-8\"?>")?;
        writeln!(w, "<!DOCTYPE rrd SYSTEM \"https://oss.oetiker.ch/rrdtool/rrdtool.dtd\">")?;
        writeln!(w, "<!-- Round Robin Database Dump -->")?;
        writeln!(w, "<rrd>")?;
        writeln!(w, "\t<version>0003</version>")?;
        writeln!(w, "\t<step>{}</step> <!-- Seconds -->", spec.step_s)?;
        writeln!(w, "\t<lastupdate>{last}</lastupdate> <!-- {} -->", utc(last as i64))?;
        for (s, name) in spec.sources.iter().enumerate() {
            let last_value = self.last_values()[s];
            writeln!(w)?;
            writeln!(w, "\t<ds>")?;
            writeln!(w, "\t\t<name> {name} </name>")?;
            writeln!(w, "\t\t<type> GAUGE </type>")?;
            writeln!(w, "\t\t<minimal_heartbeat>{}</minimal_heartbeat>", spec.step_s)?;
            writeln!(w, "\t\t<min>NaN</min>")?;
            writeln!(w, "\t\t<max>NaN</max>")?;
            writeln!(w)?;
            writeln!(w, "\t\t<!-- PDP Status -->")?;
            // The last update is on the step grid: no seconds of the next step are accumulated.
            if last_value.is_nan() {
                writeln!(w, "\t\t<last_ds>U</last_ds>")?;
                writeln!(w, "\t\t<value>NaN</value>")?;
            } else {
                writeln!(w, "\t\t<last_ds>{last_value}</last_ds>")?;
                writeln!(w, "\t\t<value>{}</value>", num(0.0))?;
            }
            writeln!(w, "\t\t<unknown_sec> 0 </unknown_sec>")?;
            writeln!(w, "\t</ds>")?;
        }
        writeln!(w)?;
        writeln!(w, "\t<!-- Round Robin Archives -->")?;
        for (a, archive) in spec.archives.iter().enumerate() {
            writeln!(w, "\t<rra>")?;
            writeln!(w, "\t\t<cf>{}</cf>", archive.cf.name())?;
            writeln!(w, "\t\t<pdp_per_row>{}</pdp_per_row> <!-- {} seconds -->", archive.steps, spec.resolution_s(a))?;
            writeln!(w)?;
            writeln!(w, "\t\t<params>")?;
            writeln!(w, "\t\t<xff>{}</xff>", num(spec.xff))?;
            writeln!(w, "\t\t</params>")?;
            writeln!(w, "\t\t<cdp_prep>")?;
            for s in 0..spec.sources.len() {
                let c = self.cdp(a, s);
                writeln!(w, "\t\t\t<ds>")?;
                writeln!(w, "\t\t\t<primary_value>{}</primary_value>", num(c.primary))?;
                writeln!(w, "\t\t\t<secondary_value>{}</secondary_value>", num(c.secondary))?;
                writeln!(w, "\t\t\t<value>{}</value>", num(c.value))?;
                writeln!(w, "\t\t\t<unknown_datapoints>{}</unknown_datapoints>", c.unknown_pdps)?;
                writeln!(w, "\t\t\t</ds>")?;
            }
            writeln!(w, "\t\t</cdp_prep>")?;
            writeln!(w, "\t\t<database>")?;
            let rows = self.archive_rows(a)?;
            let sources = spec.sources.len();
            for (i, &t) in rows.times_s.iter().enumerate() {
                write!(w, "\t\t\t<!-- {} / {t} --> <row>", utc(t))?;
                for &v in &rows.values[i * sources..(i + 1) * sources] {
                    write!(w, "<v>{}</v>", num(v))?;
                }
                writeln!(w, "</row>")?;
            }
            writeln!(w, "\t\t</database>")?;
            writeln!(w, "\t</rra>")?;
        }
        writeln!(w, "</rrd>")?;
        Ok(())
    }

    /// Writes every stored row as CSV: a header line `archive,cf,resolution_s,time_s,<sources>`,
    /// then each archive in spec order, its rows oldest first (all of them, including rows not
    /// yet written, which are unknown). `archive` is the archive's index in the spec, `time_s`
    /// the row's end time. Values are in Rust's shortest exact decimal form; unknown is empty.
    pub fn dump_csv<W: Write + ?Sized>(&self, w: &mut W) -> Result<(), Error> {
        let spec = self.spec();
        write!(w, "archive,cf,resolution_s,time_s")?;
        for name in &spec.sources {
            write!(w, ",{name}")?;
        }
        writeln!(w)?;
        let sources = spec.sources.len();
        for (a, archive) in spec.archives.iter().enumerate() {
            let rows = self.archive_rows(a)?;
            let (cf, resolution_s) = (archive.cf.name(), spec.resolution_s(a));
            for (i, &t) in rows.times_s.iter().enumerate() {
                write!(w, "{a},{cf},{resolution_s},{t}")?;
                for &v in &rows.values[i * sources..(i + 1) * sources] {
                    if v.is_nan() {
                        write!(w, ",")?;
                    } else {
                        write!(w, ",{v}")?;
                    }
                }
                writeln!(w)?;
            }
        }
        Ok(())
    }
}

/// A number as C's `%.16e` writes it (17 significant digits: exact for a double), and NaN,
/// inf and -inf as rrdtool dump writes them.
pub(crate) fn num(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{v:.16e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
}

// The calendar is sonde-types': one for the export's comments and the figures' axes.
pub use sonde_types::time::{civil, utc};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_c_writes_them() {
        assert_eq!(num(1.0), "1.0000000000000000e+00");
        assert_eq!(num(0.5), "5.0000000000000000e-01");
        assert_eq!(num(-1234.5), "-1.2345000000000000e+03");
        assert_eq!(num(0.0), "0.0000000000000000e+00");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(num(f64::INFINITY), "inf");
        assert_eq!(num(f64::NEG_INFINITY), "-inf");
        for v in [0.1, 1.0 / 3.0, 2.0f64.sqrt() * 1e17, f64::MIN_POSITIVE, f64::MAX] {
            assert_eq!(num(v).parse::<f64>().unwrap(), v, "{v} round trip");
        }
    }
}
