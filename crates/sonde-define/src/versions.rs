//! The set of definitions a run has had, by version: which are active, the version each was
//! added at, the changes still scheduled and what became of the others. A change is applied
//! here in two halves: the set's half (this module: validate, swap in the new matcher, bump
//! the version) and the measurements' half ([`crate::Counter::settle`]), so a reader can
//! change the set while the counts are still behind it.

use std::sync::Arc;

use crate::{Change, ChangeError, ChangeOutcome, Compiled, Definition, Matcher, ScheduledChange};

/// What a change to the set means for the measurements: a slot to start, one whose
/// association stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetChange {
    pub added: Option<usize>,
    pub retired: Option<usize>,
}

/// Every definition the run has had and the set's version.
#[derive(Debug)]
pub(crate) struct DefinitionSet {
    pub(crate) matcher: Arc<Matcher>,
    /// In the order added ("slots"); a removed or replaced one stays here, inactive, with what
    /// it counted.
    pub(crate) defs: Vec<Definition>,
    pub(crate) active: Vec<bool>,
    /// The set's version when each slot was added (1: the file the run started with).
    pub(crate) since: Vec<u64>,
    pub(crate) version: u64,
    /// Changes still to apply, by packet time (earliest last), and what became of the others.
    schedule: Vec<ScheduledChange>,
    pub(crate) log: Vec<ChangeOutcome>,
    /// The longest name a change may bring, in bytes.
    pub(crate) max_name: usize,
}

/// The active slots of `defs`, compiled (the tree only needs their patterns).
fn compile(defs: &[Definition], active: &[bool]) -> Arc<Matcher> {
    let slots: Vec<u32> = (0..defs.len()).filter(|&i| active[i]).map(|i| i as u32).collect();
    let patterns: Vec<Definition> = slots
        .iter()
        .map(|&i| {
            let mut d = defs[i as usize].clone();
            d.assoc = None;
            d
        })
        .collect();
    Matcher::new(Compiled::new(&patterns), slots)
}

impl DefinitionSet {
    /// Version 1: `defs`, all active.
    pub(crate) fn new(defs: Vec<Definition>) -> DefinitionSet {
        let n = defs.len();
        let active = vec![true; n];
        DefinitionSet {
            matcher: compile(&defs, &active),
            defs,
            active,
            since: vec![1; n],
            version: 1,
            schedule: Vec::new(),
            log: Vec::new(),
            max_name: crate::MAX_NAME_BYTES,
        }
    }

    /// Changes at the same time apply in the order given.
    pub(crate) fn schedule(&mut self, changes: Vec<ScheduledChange>) {
        let mut changes: Vec<(usize, ScheduledChange)> = changes.into_iter().enumerate().collect();
        changes.sort_by_key(|(i, c)| std::cmp::Reverse((c.at_ns, *i)));
        self.schedule = changes.into_iter().map(|(_, c)| c).collect();
    }

    /// Applies scheduled changes due at `ts_ns` until one is accepted, logging each.
    pub(crate) fn next_due(&mut self, ts_ns: u64) -> Option<SetChange> {
        while self.schedule.last().is_some_and(|c| c.at_ns <= ts_ns) {
            let c = self.schedule.pop().expect("checked");
            if let Ok(change) = self.change_now(c.at_ns, c.expected_version, c.change) {
                return Some(change);
            }
        }
        None
    }

    /// Applies `change` at once, logged at packet time `at_ns`.
    pub(crate) fn change_now(
        &mut self,
        at_ns: u64,
        expected_version: u64,
        change: Change,
    ) -> Result<SetChange, ChangeError> {
        let result = self.change(expected_version, &change);
        let outcome = result.as_ref().map(|_| self.version).map_err(Clone::clone);
        self.log.push(ChangeOutcome { at_ns, change, result: outcome });
        result
    }

    /// Applies `change`, made against `expected_version`: validated first, then swapped in
    /// whole (definitions, version, matcher) or not at all.
    pub(crate) fn change(&mut self, expected_version: u64, change: &Change) -> Result<SetChange, ChangeError> {
        if expected_version != self.version {
            return Err(ChangeError::Conflict { expected: expected_version, current: self.version });
        }
        let active: Vec<usize> = (0..self.defs.len()).filter(|&i| self.active[i]).collect();
        let find = |name: &str| active.iter().copied().find(|&i| self.defs[i].name == name);
        let (retire, added) = match change {
            Change::Remove(name) => {
                let slot = find(name).ok_or_else(|| ChangeError::Unknown(name.clone()))?;
                (Some(slot), None)
            }
            Change::Add(line) | Change::Replace(line) => {
                let earlier: Vec<Definition> = active.iter().map(|&i| self.defs[i].clone()).collect();
                let mut def =
                    crate::parse_definition_among(line, &earlier, self.max_name).map_err(ChangeError::Invalid)?;
                // The parser indexes `earlier`; the set indexes every slot it has had.
                if let Some(a) = def.assoc.as_mut() {
                    (a.from, a.to) = (active[a.from], active[a.to]);
                }
                let existing = find(&def.name);
                match (change, existing) {
                    (Change::Add(_), Some(_)) => return Err(ChangeError::Exists(def.name)),
                    (Change::Replace(_), None) => return Err(ChangeError::Unknown(def.name)),
                    _ => (existing, Some(def)),
                }
            }
        };
        if let Some(slot) = retire {
            let name = &self.defs[slot].name;
            let user = active
                .iter()
                .copied()
                .find(|&i| i != slot && self.defs[i].assoc.as_ref().is_some_and(|a| a.from == slot || a.to == slot));
            if let Some(u) = user {
                return Err(ChangeError::InUse { name: name.clone(), by: self.defs[u].name.clone() });
            }
            self.active[slot] = false;
        }
        self.version += 1;
        let added = added.map(|def| {
            self.active.push(true);
            self.since.push(self.version);
            self.defs.push(def);
            self.defs.len() - 1
        });
        self.matcher = compile(&self.defs, &self.active);
        Ok(SetChange { added, retired: retire })
    }
}

#[cfg(test)]
mod tests {
    use crate::{parse_definitions, ChangeError, Counter, Layers, ScheduledChange};

    use super::*;

    fn layers(frame: &[u8]) -> Layers<'_> {
        Layers { frame, l3: Some(0), l4: Some(20), payload: Some(40), meta: [4, 6, 64, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0] }
    }

    #[test]
    fn changes_are_versioned_and_leave_the_other_definitions_counting() {
        let defs =
            parse_definitions("port = ip.proto == 6 key tcp.dport\nall = ip.version == 4", crate::MAX_NAME_BYTES)
                .unwrap();
        let mut c = Counter::new(defs, None, 100);
        let mut frame = [0u8; 40];
        frame[22..24].copy_from_slice(&80u16.to_be_bytes());
        c.schedule(vec![
            ScheduledChange { at_ns: 10, expected_version: 1, change: Change::Add("web = tcp.dport == 80".into()) },
            // Made against version 1 too: someone else's change came first.
            ScheduledChange { at_ns: 11, expected_version: 1, change: Change::Remove("port".into()) },
            ScheduledChange { at_ns: 20, expected_version: 2, change: Change::Replace("port = tcp.sport < 10".into()) },
            ScheduledChange { at_ns: 30, expected_version: 3, change: Change::Add("bad = tcp.dprt == 1".into()) },
            ScheduledChange { at_ns: 30, expected_version: 3, change: Change::Remove("nothing".into()) },
        ]);
        for ts in [0, 5, 10, 15, 20, 25, 30, 35] {
            c.packet(ts, &layers(&frame), 100);
        }
        let results: Vec<String> = c
            .change_log()
            .iter()
            .map(|o| match &o.result {
                Ok(v) => format!("v{v}"),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            results[..3],
            ["v2", "conflict: the change was made against version 1, the set is at version 2", "v3"]
        );
        assert!(results[3].starts_with("refused: line 1, column 7: unknown field `tcp.dprt`"), "{}", results[3]);
        assert_eq!(results[4], "no definition `nothing`");
        assert_eq!(c.version(), 3);
        let totals: Vec<(String, u64, u64, bool)> =
            c.totals().into_iter().map(|t| (t.name, t.version, t.traffic.packets, t.retired)).collect();
        assert_eq!(
            totals,
            [
                ("port".to_string(), 1, 4, true),  // 0 to 15: replaced at 20
                ("all".to_string(), 1, 8, false),  // never changed: every packet
                ("web".to_string(), 2, 6, false),  // added at 10
                ("port".to_string(), 3, 4, false), // the replacement, from 20 (source port 0 < 10)
            ]
        );
    }

    #[test]
    fn a_definition_an_association_uses_cannot_go() {
        let defs =
            parse_definitions("a = tcp.dport == 80\nb = tcp.sport == 80\nr = assoc a -> b", crate::MAX_NAME_BYTES)
                .unwrap();
        let mut c = Counter::new(defs, None, 100);
        let e = c.apply(1, &Change::Remove("a".into())).unwrap_err();
        assert_eq!(e.to_string(), "`a` is used by the association `r`");
        assert_eq!(c.apply(1, &Change::Remove("r".into())), Ok(2));
        assert_eq!(c.apply(2, &Change::Remove("a".into())), Ok(3));
        assert_eq!(c.apply(3, &Change::Add("a = udp.dport == 53".into())), Ok(4));
        assert!(matches!(c.apply(4, &Change::Add("a = udp.dport == 53".into())), Err(ChangeError::Exists(_))));
    }

    #[test]
    fn a_refused_change_leaves_the_set_as_it_was() {
        let defs = parse_definitions("a = tcp.dport == 80", crate::MAX_NAME_BYTES).unwrap();
        let mut set = DefinitionSet::new(defs);
        let before = Arc::clone(&set.matcher);
        assert!(matches!(set.change(1, &Change::Add("a = tcp.dport == 81".into())), Err(ChangeError::Exists(_))));
        assert!(matches!(set.change(2, &Change::Remove("a".into())), Err(ChangeError::Conflict { .. })));
        assert_eq!((set.version, set.defs.len(), set.active.as_slice()), (1, 1, &[true][..]));
        assert!(Arc::ptr_eq(&before, &set.matcher));
    }
}
