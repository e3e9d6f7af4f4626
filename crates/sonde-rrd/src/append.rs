//! Adding a run's steps to a store that may already hold an earlier run's (`sonde analyze
//! --store`): the store is created if missing, must have the run's step and data sources if
//! not, and takes only the steps after its last update — so running again over the same trace
//! writes nothing twice.

use std::io;
use std::path::Path;

use crate::{Error, Spec, Store};

/// What [`append_steps`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Appended {
    /// There was no store: it was created.
    pub created: bool,
    /// Steps written.
    pub updates: u64,
    /// The first step the store did not hold, from which the rows were asked for: the steps
    /// before it were already stored.
    pub from_index: u64,
}

/// Refuses steps that the store at `path`, if there is one, cannot take: another step or other
/// data sources, or other archives when `same_archives` (else the store keeps its own). Lets a
/// caller refuse a run before doing its work; [`append_steps`] checks again.
pub fn check_appendable(path: &Path, spec: &Spec, same_archives: bool) -> Result<(), Error> {
    match Store::open(path) {
        Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        opened => check_fits(opened?.spec(), spec, same_archives),
    }
}

/// Appends steps to the store at `path`, creating it with `spec` from step `first_index` if
/// there is none; an existing store must fit as [`check_appendable`] says. Step `i` is the one
/// ending at `(i + 1) × step_s`. `rows(from_index)` gives the rows to write — (step index, one
/// value per data source), in order — from the first step the store does not hold yet; the
/// steps it holds are not asked for. The store is synced before this returns.
pub fn append_steps<I>(
    path: &Path,
    spec: &Spec,
    same_archives: bool,
    first_index: u64,
    rows: impl FnOnce(u64) -> I,
) -> Result<Appended, Error>
where
    I: IntoIterator<Item = (u64, Vec<f64>)>,
{
    let step_s = spec.step_s;
    let mut created = false;
    let mut store = match Store::open(path) {
        Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            created = true;
            Store::create(path, spec, first_index.saturating_mul(step_s))?
        }
        opened => opened?,
    };
    check_fits(store.spec(), spec, same_archives)?;
    // A row is the step *ending* at its time.
    let from_index = store.last_update_s() / step_s;
    let mut updates = 0;
    for (index, values) in rows(from_index) {
        store.update(index.saturating_add(1).saturating_mul(step_s), &values)?;
        updates += 1;
    }
    store.sync()?;
    Ok(Appended { created, updates, from_index })
}

fn check_fits(had: &Spec, wanted: &Spec, same_archives: bool) -> Result<(), Error> {
    if had.step_s != wanted.step_s
        || had.sources != wanted.sources
        || (same_archives && had.archives != wanted.archives)
    {
        return Err(Error::Incompatible { had: Box::new(had.clone()), wanted: Box::new(wanted.clone()) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(step_s: u64, resolutions: &[(u64, u64)]) -> Spec {
        Spec::with_resolutions(step_s, vec!["a".into(), "b".into()], resolutions).unwrap()
    }

    /// Rows `from..to` of a run, each value its step index.
    fn run(from: u64, to: u64) -> impl FnOnce(u64) -> Vec<(u64, Vec<f64>)> {
        move |start| (from.max(start)..to).map(|i| (i, vec![i as f64, 1.0])).collect()
    }

    #[test]
    fn a_second_run_writes_only_the_steps_after_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rrd");
        let spec = spec(10, &[(10, 1000)]);
        check_appendable(&path, &spec, false).unwrap();
        let first = append_steps(&path, &spec, false, 100, run(100, 105)).unwrap();
        assert_eq!(first, Appended { created: true, updates: 5, from_index: 100 });
        assert_eq!(Store::open(&path).unwrap().last_update_s(), 1050);
        // A run that overlaps the first: steps 103 and 104 are stored already.
        let again = append_steps(&path, &spec, false, 103, run(103, 108)).unwrap();
        assert_eq!(again, Appended { created: false, updates: 3, from_index: 105 });
        let store = Store::open(&path).unwrap();
        assert_eq!(store.last_update_s(), 1080);
        assert_eq!(store.last_values(), [107.0, 1.0]);
    }

    #[test]
    fn a_store_of_another_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.rrd");
        let spec = spec(10, &[(10, 1000)]);
        append_steps(&path, &spec, false, 0, run(0, 2)).unwrap();
        let other_step = self::spec(20, &[(20, 1000)]);
        let err = check_appendable(&path, &other_step, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the store was created with step 10 s, 2 sources, archives 10 s × 100; \
             this run asks for step 20 s, 2 sources, archives 20 s × 50"
        );
        assert!(matches!(append_steps(&path, &other_step, false, 2, run(2, 3)), Err(Error::Incompatible { .. })));
        // Other archives are refused only when asked for.
        let other_archives = self::spec(10, &[(10, 500)]);
        check_appendable(&path, &other_archives, false).unwrap();
        assert!(check_appendable(&path, &other_archives, true).is_err());
        let kept = append_steps(&path, &other_archives, false, 2, run(2, 3)).unwrap();
        assert_eq!(kept.updates, 1);
        assert_eq!(Store::open(&path).unwrap().spec(), &spec);
    }
}
