//! A flow log's lines until the log is written in output order. They are held in memory up to
//! a budget; beyond it they are sorted and written out as a run to an unnamed temporary file
//! (gone when the process ends, however it ends), and the runs are merged when the log is
//! written: memory is bounded by the budget, not by the flows seen — the external sort of
//! `sort(1)` and of databases.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::writer::OrderKey;

/// Where lines beyond the budget go, and the budget of one holder (a worker's sink, or a live
/// run's collector).
#[derive(Debug, Clone)]
pub struct SortBuffer {
    /// The temporary files' directory (the output directory: the logs need that space anyway).
    pub dir: PathBuf,
    /// Bytes of lines held before a run goes to disk.
    pub bytes: usize,
}

/// What went to disk: runs written (merges included) and their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spilled {
    pub runs: u64,
    pub bytes: u64,
    /// Why a run could not be written (the lines then stay in memory), the first time.
    pub failure: Option<String>,
}

impl Spilled {
    pub fn add(&mut self, other: &Spilled) {
        self.runs += other.runs;
        self.bytes += other.bytes;
        if self.failure.is_none() {
            self.failure.clone_from(&other.failure);
        }
    }
}

/// Runs of one level merged into one of the next: a holder keeps fewer than this many runs per
/// level, so its open files stay few, and each line is rewritten once per level.
const FAN_IN: usize = 8;

/// A sorted run in an unnamed temporary file: for the lines, per line its key
/// ([`OrderKey::to_bytes`]), length (u32, LE) and text; for typed rows, an Arrow IPC stream.
#[derive(Debug)]
pub struct RunFile {
    pub file: File,
    pub bytes: u64,
    /// Lines or rows.
    pub items: u64,
    /// 0 as written; a merge of runs is one level above the highest of them.
    pub level: u32,
}

impl RunFile {
    /// Reads the run from its start (each reader at its own offset: a run may be read twice).
    pub fn reader(&self) -> RunReader<'_> {
        RunReader { file: &self.file, at: 0, end: self.bytes }
    }
}

/// Merges the runs of any level that holds `fan_in` of them into one run of the next level
/// (`merge` writes the merge of a group as a run of the level given).
pub fn compact_runs<E>(
    runs: &mut Vec<RunFile>,
    fan_in: usize,
    spilled: &mut Spilled,
    mut merge: impl FnMut(&[RunFile], u32) -> Result<RunFile, E>,
) -> Result<(), E> {
    loop {
        let mut levels: Vec<u32> = runs.iter().map(|r| r.level).collect();
        levels.sort_unstable();
        let Some(level) = levels.windows(fan_in).find(|w| w[0] == w[fan_in - 1]).map(|w| w[0]) else {
            return Ok(());
        };
        let (group, rest) = std::mem::take(runs).into_iter().partition(|r| r.level == level);
        *runs = rest;
        replace_by_merge(runs, group, level + 1, spilled, &mut merge)?;
    }
}

/// Puts the merge of `group` (a run of `level`) in `runs`; if it cannot be written, `group`
/// goes back as it was.
pub fn replace_by_merge<E>(
    runs: &mut Vec<RunFile>,
    group: Vec<RunFile>,
    level: u32,
    spilled: &mut Spilled,
    merge: &mut impl FnMut(&[RunFile], u32) -> Result<RunFile, E>,
) -> Result<(), E> {
    match merge(&group, level) {
        Ok(run) => {
            spilled.runs += 1;
            spilled.bytes += run.bytes;
            runs.push(run);
            Ok(())
        }
        Err(e) => {
            runs.extend(group);
            Err(e)
        }
    }
}

/// Bytes a line takes in a run beyond its text.
const ENTRY_OVERHEAD: u64 = OrderKey::BYTES as u64 + 4;

/// Memory a held line costs beyond its text.
const INDEX_ENTRY: usize = std::mem::size_of::<(OrderKey, usize, u32)>();

/// One log's lines: those in memory (the text of all in one buffer, no allocation per line, and
/// per line its order key and place in the buffer) and the runs on disk.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    text: Vec<u8>,
    index: Vec<(OrderKey, usize, u32)>,
    runs: Vec<RunFile>,
}

impl Lines {
    pub(crate) fn push(&mut self, key: OrderKey, line: &[u8]) {
        self.index.push((key, self.text.len(), line.len() as u32));
        self.text.extend_from_slice(line);
    }

    fn line(&self, start: usize, len: u32) -> &[u8] {
        &self.text[start..start + len as usize]
    }

    /// Memory the lines in memory take.
    pub(crate) fn held_bytes(&self) -> usize {
        self.text.len() + self.index.len() * INDEX_ENTRY
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len() + self.runs.iter().map(|r| r.items as usize).sum::<usize>()
    }

    /// Bytes of text, in memory and on disk.
    pub(crate) fn text_bytes(&self) -> usize {
        self.text.len() + self.runs.iter().map(|r| (r.bytes - r.items * ENTRY_OVERHEAD) as usize).sum::<usize>()
    }

    /// The lines in memory, in the order they came.
    pub(crate) fn in_memory(&self) -> impl Iterator<Item = &[u8]> {
        self.index.iter().map(move |&(_, start, len)| self.line(start, len))
    }

    pub(crate) fn absorb(&mut self, other: Lines) {
        let base = self.text.len();
        self.index.extend(other.index.into_iter().map(|(key, start, len)| (key, start + base, len)));
        self.text.extend_from_slice(&other.text);
        self.runs.extend(other.runs);
    }

    /// The lines in memory in output order: key, then text (which breaks the practically
    /// impossible tie of two flows with equal keys, so the order never depends on arrival).
    fn sorted(&self) -> Vec<(OrderKey, &[u8])> {
        let lines: Vec<(OrderKey, &[u8])> =
            self.index.iter().map(|&(key, start, len)| (key, self.line(start, len))).collect();
        in_order(&lines).map(|i| lines[i]).collect()
    }

    /// Writes the lines in memory to a new run and forgets them, then merges runs while a
    /// level has [`FAN_IN`] of them.
    pub(crate) fn spill(&mut self, sort: &SortBuffer, spilled: &mut Spilled) -> io::Result<()> {
        if !self.index.is_empty() {
            let order = self.sorted();
            let run = write_run(sort, 0, |w| {
                for (key, line) in &order {
                    w.entry(key, line)?;
                }
                Ok(())
            })?;
            drop(order);
            spilled.runs += 1;
            spilled.bytes += run.bytes;
            self.runs.push(run);
            self.text.clear();
            self.index.clear();
        }
        self.compact(sort, spilled)
    }

    /// Merges the runs of any level that has [`FAN_IN`] of them into one of the next level.
    pub(crate) fn compact(&mut self, sort: &SortBuffer, spilled: &mut Spilled) -> io::Result<()> {
        compact_runs(&mut self.runs, FAN_IN, spilled, |group, level| {
            write_run(sort, level, |w| merge(group.iter().map(Cursor::run).collect(), |k, l| w.entry(k, l)))
        })
    }
}

/// The indices of `lines` in the order of (key, text). What is sorted is the key's first field
/// and the index, 16 bytes a line, rather than the lines' whole keys (80 bytes): the order is
/// the same, for half the instructions sorting a worker's lines in memory (`flood.pcap`, one worker: 127 M -> 64 M).
fn in_order(lines: &[(OrderKey, &[u8])]) -> impl Iterator<Item = usize> {
    let mut order: Vec<(u64, usize)> = lines.iter().enumerate().map(|(i, (key, _))| (key.first_ns(), i)).collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| lines[a.1].cmp(&lines[b.1])));
    order.into_iter().map(|(_, i)| i)
}

/// Calls `out` with every line of `parts` in output order: a sort in memory when nothing went
/// to disk, a merge of sorted runs otherwise.
pub(crate) fn for_each_sorted(parts: &[&Lines], mut out: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
    if parts.iter().all(|p| p.runs.is_empty()) {
        let mut all: Vec<(OrderKey, &[u8])> = Vec::with_capacity(parts.iter().map(|l| l.index.len()).sum());
        for lines in parts {
            all.extend(lines.index.iter().map(|&(key, start, len)| (key, lines.line(start, len))));
        }
        return in_order(&all).try_for_each(|i| out(all[i].1));
    }
    let mut cursors = Vec::new();
    for lines in parts {
        cursors.push(Cursor::Memory(lines.sorted().into_iter()));
        cursors.extend(lines.runs.iter().map(Cursor::run));
    }
    merge(cursors, |_, line| out(line))
}

/// Where the next line of a merge comes from.
enum Cursor<'a> {
    Memory(std::vec::IntoIter<(OrderKey, &'a [u8])>),
    Run(BufReader<RunReader<'a>>),
}

impl<'a> Cursor<'a> {
    fn run(run: &'a RunFile) -> Cursor<'a> {
        Cursor::Run(BufReader::with_capacity(1 << 16, run.reader()))
    }

    /// The next line into `line` and its key; `None` at the end.
    fn next(&mut self, line: &mut Vec<u8>) -> io::Result<Option<OrderKey>> {
        line.clear();
        match self {
            Cursor::Memory(lines) => Ok(lines.next().map(|(key, text)| {
                line.extend_from_slice(text);
                key
            })),
            Cursor::Run(r) => {
                if r.fill_buf()?.is_empty() {
                    return Ok(None);
                }
                let mut key = [0u8; OrderKey::BYTES];
                r.read_exact(&mut key)?;
                let mut len = [0u8; 4];
                r.read_exact(&mut len)?;
                line.resize(u32::from_le_bytes(len) as usize, 0);
                r.read_exact(line)?;
                Ok(Some(OrderKey::from_bytes(&key)))
            }
        }
    }
}

/// Reads a run at its own offset (several readers may share the file: a log written twice).
pub struct RunReader<'a> {
    file: &'a File,
    at: u64,
    end: u64,
}

impl Read for RunReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.at) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a sorted run ended early"));
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// The k-way merge: each cursor's lines are in output order; `out` gets them all in output
/// order (key, then text).
fn merge(mut cursors: Vec<Cursor>, mut out: impl FnMut(&OrderKey, &[u8]) -> io::Result<()>) -> io::Result<()> {
    let mut heap = BinaryHeap::with_capacity(cursors.len());
    for (i, cursor) in cursors.iter_mut().enumerate() {
        let mut line = Vec::new();
        if let Some(key) = cursor.next(&mut line)? {
            heap.push(Reverse((key, line, i)));
        }
    }
    while let Some(Reverse((key, mut line, i))) = heap.pop() {
        out(&key, &line)?;
        // The cursor's next line reuses the buffer.
        if let Some(key) = cursors[i].next(&mut line)? {
            heap.push(Reverse((key, line, i)));
        }
    }
    Ok(())
}

/// A run being written.
struct RunWriter {
    w: BufWriter<File>,
    bytes: u64,
    lines: u64,
}

impl RunWriter {
    fn entry(&mut self, key: &OrderKey, line: &[u8]) -> io::Result<()> {
        let len = u32::try_from(line.len()).map_err(|_| io::Error::other("a flow log line over 4 GB"))?;
        self.w.write_all(&key.to_bytes())?;
        self.w.write_all(&len.to_le_bytes())?;
        self.w.write_all(line)?;
        self.bytes += ENTRY_OVERHEAD + line.len() as u64;
        self.lines += 1;
        Ok(())
    }
}

fn write_run(
    sort: &SortBuffer,
    level: u32,
    body: impl FnOnce(&mut RunWriter) -> io::Result<()>,
) -> io::Result<RunFile> {
    let file = tempfile::tempfile_in(&sort.dir)?;
    let mut w = RunWriter { w: BufWriter::with_capacity(1 << 16, file), bytes: 0, lines: 0 };
    body(&mut w)?;
    let file = w.w.into_inner().map_err(|e| e.into_error())?;
    Ok(RunFile { file, bytes: w.bytes, items: w.lines, level })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(first_ns: u64, port: u16) -> OrderKey {
        let mut bytes = [0u8; OrderKey::BYTES];
        bytes[..8].copy_from_slice(&first_ns.to_be_bytes());
        bytes[26..28].copy_from_slice(&port.to_be_bytes());
        OrderKey::from_bytes(&bytes)
    }

    fn all(parts: &[&Lines]) -> Vec<String> {
        let mut got = Vec::new();
        for_each_sorted(parts, |l| {
            got.push(String::from_utf8(l.to_vec()).unwrap());
            Ok(())
        })
        .unwrap();
        got
    }

    /// Lines pushed in any order, spilled in runs of any size, merged at every level, come out
    /// exactly as the sort in memory gives them.
    #[test]
    fn spilled_runs_merge_into_the_order_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let sort = SortBuffer { dir: dir.path().to_path_buf(), bytes: 0 };
        let (mut whole, mut spilled_a, mut spilled_b) = (Lines::default(), Lines::default(), Lines::default());
        let mut spilled = Spilled::default();
        let mut naive = Vec::new();
        let mut x = 7u64;
        for i in 0..5_000u64 {
            // A pseudo-random start in few distinct values: many equal first_ns.
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (k, line) = (key(x >> 58, (x >> 20) as u16 % 4), format!("line {i} {}\n", x >> 40));
            whole.push(k, line.as_bytes());
            naive.push((k, line.clone()));
            let part = if i % 3 == 0 { &mut spilled_a } else { &mut spilled_b };
            part.push(k, line.as_bytes());
            if i % 37 == 0 {
                part.spill(&sort, &mut spilled).unwrap();
            }
        }
        assert!(spilled.runs > 100 && spilled_a.runs.len() < 3 * FAN_IN, "{spilled:?}, {} runs", spilled_a.runs.len());
        assert!(spilled_a.runs.iter().any(|r| r.level >= 1), "runs were merged");
        assert_eq!(spilled_a.len() + spilled_b.len(), 5_000);
        let expected = all(&[&whole]);
        assert!(expected.windows(2).all(|w| w[0] != w[1]));
        // The sort by the first field and index gives the order of (key, text).
        naive.sort();
        assert_eq!(naive.into_iter().map(|(_, line)| line).collect::<Vec<_>>(), expected);
        assert_eq!(all(&[&spilled_a, &spilled_b]), expected);
        assert_eq!(all(&[&spilled_b, &spilled_a]), expected, "the parts' order does not matter");
        // The runs read again give the same (a log written twice: the file, the HTTP view).
        assert_eq!(all(&[&spilled_a, &spilled_b]), expected);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the runs have no name");
    }

    #[test]
    fn order_key_bytes_keep_the_order() {
        let keys = [key(1, 2), key(1, 3), key(2, 0), key(u64::MAX, 1)];
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1] && pair[0].to_bytes() < pair[1].to_bytes());
            assert_eq!(OrderKey::from_bytes(&pair[0].to_bytes()), pair[0]);
        }
    }
}
