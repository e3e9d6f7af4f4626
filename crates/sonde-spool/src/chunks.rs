//! A run's outputs in chunks (`monitor --spool PATH[:QUOTA] --rotate SECONDS|--rotate-size
//! BYTES`): a monitor that runs for months writes each chunk as a directory in one of the
//! storage locations (sonde-spool: quotas, a manifest of the files complete and safe to move).
//! As a drain observer it takes what the drains brought when a chunk's span of packet time is
//! over or its flow logs reach the size; the last chunk is what the run holds at its end.

use std::path::Path;

use sonde_engine::{Drain, DrainObserver, Held};
use sonde_output::{FlowLines, Format};
use sonde_stats::Report;

use crate::{Location, Spool, SpoolError};

type Result<T, E = ChunkError> = std::result::Result<T, E>;

/// Why a chunk could not be written.
#[derive(Debug)]
pub enum ChunkError {
    Spool(SpoolError),
    Io(std::path::PathBuf, std::io::Error),
    /// `--rotate` of 0.
    ZeroSpan,
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkError::Spool(e) => write!(f, "{e}"),
            ChunkError::Io(path, e) => write!(f, "reading {}: {e}", path.display()),
            ChunkError::ZeroSpan => write!(f, "--rotate must be more than 0 seconds"),
        }
    }
}

impl std::error::Error for ChunkError {}

impl From<SpoolError> for ChunkError {
    fn from(e: SpoolError) -> Self {
        ChunkError::Spool(e)
    }
}

/// When a chunk ends.
#[derive(Debug, Clone, Copy)]
pub struct Every {
    /// Packet time per chunk (chunks are aligned to it, as Tstat's hourly directories are).
    pub span_ns: u64,
    /// Flow log bytes after which a chunk ends early.
    pub max_bytes: Option<u64>,
}

/// The spool and where the current chunk stands.
pub struct Rotation {
    spool: Spool,
    every: Every,
    shape: ChunkShape,
    /// The current chunk's first packet time, and the latest drain's.
    start_ns: Option<u64>,
    clock_ns: u64,
    summary: SpoolSummary,
    quiet: bool,
}

/// What summary.json says of the chunks and their locations.
pub use sonde_output::summary::{LocationSummary, SpoolSummary};

impl Rotation {
    pub fn open(locations: Vec<Location>, every: Every, shape: ChunkShape, quiet: bool) -> Result<Rotation> {
        if every.span_ns == 0 {
            return Err(ChunkError::ZeroSpan);
        }
        let spool = Spool::open(locations)?;
        let leftovers = spool
            .leftovers()
            .iter()
            .map(|l| {
                format!("{} ({} bytes, {})", l.path.display(), l.bytes, if l.removed { "removed" } else { "kept" })
            })
            .collect();
        let summary = SpoolSummary { leftovers, ..SpoolSummary::default() };
        Ok(Rotation { spool, every, shape, start_ns: None, clock_ns: 0, summary, quiet })
    }

    pub fn span_ns(&self) -> u64 {
        self.every.span_ns
    }

    /// After a drain at packet time `clock_ns`: writes what `held` holds as a chunk if the
    /// chunk is over, and takes it. A chunk that cannot be written anywhere stays held (it goes
    /// with the next one, or into the final outputs).
    fn after_drain(&mut self, clock_ns: u64, held: &mut Held<FlowLines>) {
        self.clock_ns = self.clock_ns.max(clock_ns);
        let span = self.every.span_ns;
        let start = *self.start_ns.get_or_insert(clock_ns / span * span);
        let by_time = clock_ns >= start.saturating_add(span);
        let by_size = self.every.max_bytes.is_some_and(|max| held.part.text_bytes() as u64 >= max);
        if !(by_time || by_size) {
            return;
        }
        let end = if by_time { clock_ns / span * span } else { clock_ns };
        let files = match chunk_files(held, &self.shape) {
            Ok(files) => files,
            Err(e) => {
                self.warn(format!("chunk at {}: {e}", end / 1_000_000_000));
                return;
            }
        };
        let name = self.chunk_name(start);
        match self.write(&name, start, end, &files) {
            Ok(()) => {
                drop(held.take_chunk());
                drop(files);
                self.start_ns = Some(end);
                // A chunk's lines and files, tens of MB at a busy link's rate, were just freed.
                sonde_heap::give_back();
            }
            Err(e) => {
                self.summary.failed_chunks += 1;
                self.warn(format!("chunk {name}: {e}; its data goes with the next chunk"));
            }
        }
    }

    fn write(&mut self, name: &str, start_ns: u64, end_ns: u64, files: &[(String, Vec<u8>)]) -> Result<()> {
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
        let placed = self.spool.write_chunk(name, start_ns, end_ns.max(start_ns), &refs)?;
        for failure in &placed.failed {
            self.warn(format!("chunk {name}: {failure}; written elsewhere"));
        }
        if placed.over_quota {
            self.summary.over_quota_chunks += 1;
            self.warn(format!(
                "chunk {name}: every location is at its quota; written past it in {}",
                placed.dir.display()
            ));
        }
        self.summary.chunks += 1;
        self.summary.bytes += placed.bytes;
        Ok(())
    }

    /// The run's last chunk: the outputs it wrote into `out` (all but summary.json), moved into
    /// the spool. Returns what summary.json says of the chunks.
    pub fn finish(mut self, out: &Path, outputs: &[String]) -> Result<SpoolSummary> {
        let end_ns = self.clock_ns;
        let mut files = Vec::new();
        for name in outputs.iter().filter(|n| *n != "summary.json") {
            let path = out.join(name);
            files.push((name.clone(), std::fs::read(&path).map_err(|e| ChunkError::Io(path, e))?));
        }
        let start = self.start_ns.unwrap_or(end_ns);
        let name = self.chunk_name(start);
        match self.write(&name, start, end_ns, &files) {
            Ok(()) => {
                for (name, _) in &files {
                    let _ = std::fs::remove_file(out.join(name));
                }
            }
            // No location can take it: the files stay whole in the output directory, where
            // summary.json lists them, rather than be lost with the run's summary.
            Err(ChunkError::Spool(e)) => {
                self.summary.failed_chunks += 1;
                self.summary.last_chunk_in_output_dir = true;
                self.warn(format!("last chunk {name}: {e}; its files stay in {}", out.display()));
            }
            Err(e) => return Err(e),
        }
        let stats = self.spool.stats();
        self.summary.locations = stats
            .locations
            .into_iter()
            .map(|l| LocationSummary {
                path: l.path.display().to_string(),
                used_bytes: l.used_bytes,
                quota_bytes: l.quota_bytes,
                chunks_written: l.chunks_written,
            })
            .collect();
        Ok(self.summary)
    }

    /// `NNNNNN_START`: the chunk's sequence number (failed attempts count) and first second.
    fn chunk_name(&self, start_ns: u64) -> String {
        format!("{:06}_{}", self.summary.chunks + self.summary.failed_chunks, start_ns / 1_000_000_000)
    }

    fn warn(&self, message: String) {
        if !self.quiet {
            eprintln!("sonde: spool: {message}");
        }
    }
}

impl DrainObserver<FlowLines> for Rotation {
    fn drained(&mut self, drain: &Drain, held: &mut Held<FlowLines>) {
        self.after_drain(drain.clock_ns, held);
    }
}

/// How a run's outputs look: what a chunk's files are made with.
pub struct ChunkShape {
    pub cfg: Option<sonde_stats::Config>,
    pub format: Format,
    pub anonymizer: Option<sonde_anon::Anonymizer>,
}

/// The files of a chunk: the flow logs of the flows that ended in it and the interval files of
/// the intervals closed in it.
fn chunk_files(held: &Held<FlowLines>, shape: &ChunkShape) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut files: Vec<(String, Vec<u8>)> = FlowLines::render(shape.format, &[&held.part])?.into();
    if let (Some(cfg), Some(flows)) = (&shape.cfg, &held.flows) {
        let mut report = Report::new(cfg, held.packets.clone(), vec![flows.clone()]);
        if let Some(anon) = &shape.anonymizer {
            report.anonymize(&mut anon.clone());
        }
        for (name, text) in report.render()? {
            files.push((name.to_string(), text.into_bytes()));
        }
    }
    Ok(files)
}
