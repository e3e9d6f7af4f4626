//! All definitions compiled into one prefix tree: definitions whose pattern chains begin alike
//! share those nodes, so each shared test runs once per packet. Siblings that compare the same
//! field with single values (`tcp.dport == 80`, `== 443`, …) are grouped: the field is read once
//! and the matching child found by binary search, so 256 port definitions cost about one test.
//! A set that shares nothing (one definition, or chains with no common start) is matched chain
//! by chain: the same tests without the walk.

use crate::definition::{Definition, MAX_PATTERNS};
use crate::pattern::{Anchor, Pattern, Probe};
use crate::Layers;

/// A definition that matched a packet, with its flow identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Match {
    /// Index of the definition in the compiled set.
    pub def: u32,
    pub fid: u128,
}

#[derive(Debug, Clone)]
struct Node {
    pattern: Pattern,
    probe: Probe,
    children: Vec<u32>,
    /// Definitions whose chain ends here.
    ends: Vec<u32>,
    /// The children, as tested: single tests and groups.
    tests: Vec<Test>,
}

/// How a node's children are tried.
#[derive(Debug, Clone)]
enum Test {
    One(u32),
    /// Children that each compare the same field (anchor, offset, length, mask) with one
    /// value: read the field once, find the value.
    Exact {
        probe: Probe,
        by_value: Vec<(u128, u32)>,
    },
}

/// The compiled definitions.
#[derive(Debug, Clone)]
pub struct Compiled {
    nodes: Vec<Node>,
    /// The root's tests (the root itself has no pattern).
    root: Vec<Test>,
    root_children: Vec<u32>,
    chains: Vec<Vec<Probe>>,
    /// Per definition: its key parts, as (depth in the chain, bits).
    keys: Vec<Vec<(usize, u32)>>,
    /// Nodes in the tree (for reports and tests).
    pub node_count: usize,
    /// Whether any test is shared: a node two definitions pass through, or a group of values.
    /// Without either the tree runs exactly the flat tests, slower (its walk and value stack),
    /// so [`Compiled::matches`] walks the chains directly.
    shares: bool,
}

/// Same field, same mask: what a group of exact tests shares.
fn field_of(p: &Pattern) -> (Anchor, u32, u32, u128) {
    (p.anchor, p.offset_bits, p.bits, p.mask)
}

fn group(nodes: &[Node], children: &[u32]) -> Vec<Test> {
    let mut tests = Vec::new();
    let mut used = vec![false; children.len()];
    for (i, &c) in children.iter().enumerate() {
        if used[i] {
            continue;
        }
        let p = nodes[c as usize].pattern;
        if p.lo != p.hi {
            tests.push(Test::One(c));
            continue;
        }
        let mut by_value = vec![(p.lo, c)];
        for (j, &d) in children.iter().enumerate().skip(i + 1) {
            let q = nodes[d as usize].pattern;
            if !used[j] && q.lo == q.hi && field_of(&q) == field_of(&p) {
                used[j] = true;
                by_value.push((q.lo, d));
            }
        }
        if by_value.len() == 1 {
            tests.push(Test::One(c));
        } else {
            by_value.sort_unstable();
            let probe = Probe::new(Pattern { lo: 0, hi: p.mask, ..p });
            tests.push(Test::Exact { probe, by_value });
        }
    }
    tests
}

impl Compiled {
    /// Compiles `defs`; a match's `def` is the index in this slice.
    pub fn new(defs: &[Definition]) -> Compiled {
        let mut nodes: Vec<Node> = Vec::new();
        let mut root_children: Vec<u32> = Vec::new();
        for (id, def) in defs.iter().enumerate() {
            let mut at: Option<u32> = None;
            for p in &def.patterns {
                let siblings = match at {
                    None => &root_children,
                    Some(n) => &nodes[n as usize].children,
                };
                let found = siblings.iter().copied().find(|&c| nodes[c as usize].pattern == *p);
                let next = match found {
                    Some(c) => c,
                    None => {
                        let c = nodes.len() as u32;
                        nodes.push(Node {
                            pattern: *p,
                            probe: Probe::new(*p),
                            children: Vec::new(),
                            ends: Vec::new(),
                            tests: Vec::new(),
                        });
                        match at {
                            None => root_children.push(c),
                            Some(n) => nodes[n as usize].children.push(c),
                        }
                        c
                    }
                };
                at = Some(next);
            }
            if let Some(n) = at {
                nodes[n as usize].ends.push(id as u32);
            }
        }
        for n in 0..nodes.len() {
            let tests = group(&nodes, &nodes[n].children);
            nodes[n].tests = tests;
        }
        let root = group(&nodes, &root_children);
        let chains: Vec<Vec<Probe>> =
            defs.iter().map(|d| d.patterns.iter().copied().map(Probe::new).collect()).collect();
        let keys = defs.iter().map(|d| d.keys.iter().map(|&k| (k, d.patterns[k].bits)).collect()).collect();
        let grouped = |tests: &[Test]| tests.iter().any(|t| matches!(t, Test::Exact { .. }));
        let shares = nodes.len() < chains.iter().map(Vec::len).sum::<usize>()
            || grouped(&root)
            || nodes.iter().any(|n| grouped(&n.tests));
        Compiled { node_count: nodes.len(), nodes, root, root_children, chains, keys, shares }
    }

    /// Whether the tree shares any test between definitions (else matching walks the chains).
    pub fn shares_tests(&self) -> bool {
        self.shares
    }

    /// The definitions `layers` matches, in definition order, into `out` (cleared first).
    pub fn matches(&self, layers: &Layers<'_>, out: &mut Vec<Match>) {
        if !self.shares {
            return self.matches_flat(layers, out);
        }
        out.clear();
        let mut values = [0u128; MAX_PATTERNS];
        self.run(&self.root, 0, layers, &mut values, out);
        sort_few(out);
    }

    fn run(
        &self,
        tests: &[Test],
        depth: usize,
        layers: &Layers<'_>,
        values: &mut [u128; MAX_PATTERNS],
        out: &mut Vec<Match>,
    ) {
        for test in tests {
            match test {
                Test::One(c) => {
                    let node = &self.nodes[*c as usize];
                    if let Some(v) = node.probe.test(layers) {
                        self.enter(node, depth, v, layers, values, out);
                    }
                }
                Test::Exact { probe, by_value } => {
                    let Some(v) = probe.value(layers) else { continue };
                    if let Ok(i) = by_value.binary_search_by_key(&v, |e| e.0) {
                        self.enter(&self.nodes[by_value[i].1 as usize], depth, v, layers, values, out);
                    }
                }
            }
        }
    }

    fn enter(
        &self,
        node: &Node,
        depth: usize,
        value: u128,
        layers: &Layers<'_>,
        values: &mut [u128; MAX_PATTERNS],
        out: &mut Vec<Match>,
    ) {
        values[depth] = value;
        for &def in &node.ends {
            out.push(Match { def, fid: self.fid(def, values) });
        }
        if !node.tests.is_empty() {
            self.run(&node.tests, depth + 1, layers, values, out);
        }
    }

    /// The FID of `def` from the values its chain read: its key parts side by side.
    #[inline]
    fn fid(&self, def: u32, values: &[u128]) -> u128 {
        self.keys[def as usize].iter().fold(0u128, |fid, &(depth, bits)| {
            let high = if bits >= 128 { 0 } else { fid << bits };
            high | values[depth]
        })
    }

    /// The same result as [`Compiled::matches`], evaluating every definition on its own: the
    /// baseline the tree is measured against, and its test oracle.
    pub fn matches_flat(&self, layers: &Layers<'_>, out: &mut Vec<Match>) {
        out.clear();
        let mut values = [0u128; MAX_PATTERNS];
        'defs: for (def, chain) in self.chains.iter().enumerate() {
            for (i, p) in chain.iter().enumerate() {
                match p.test(layers) {
                    Some(v) => values[i] = v,
                    None => continue 'defs,
                }
            }
            out.push(Match { def: def as u32, fid: self.fid(def as u32, &values) });
        }
    }

    /// Every pattern of every definition.
    pub fn patterns(&self) -> impl Iterator<Item = &Pattern> {
        self.chains.iter().flatten().map(|p| &p.pattern)
    }

    /// Patterns tested at the first level (for reports and tests).
    pub fn root_width(&self) -> usize {
        self.root_children.len()
    }
}

/// Sorts a packet's matches, a handful at most as a rule: insertion sort, without the general
/// sort's call and set-up.
#[inline]
fn sort_few(out: &mut [Match]) {
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && out[j - 1] > out[j] {
            out.swap(j - 1, j);
            j -= 1;
        }
    }
}
