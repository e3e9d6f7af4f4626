//! Measures placements: spools the files of an output directory (e.g. `sonde analyze`'s) as
//! CHUNKS chunks of 300 s into ROOT/a (quota 40 MiB) then ROOT/b, and reopens the spool.
//!
//! `cargo run --release -p sonde-spool --example fill -- OUTDIR ROOT CHUNKS`

use std::path::Path;
use std::time::Instant;

use sonde_spool::{Location, Spool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, out, root, chunks] = &args[..] else {
        return Err("usage: fill OUTDIR ROOT CHUNKS".into());
    };
    let (root, chunks): (&Path, usize) = (Path::new(root), chunks.parse()?);
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push((entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path())?));
        }
    }
    files.sort();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(name, data)| (name.as_str(), data.as_slice())).collect();
    let locations: Vec<Location> =
        vec![format!("{}:40M", root.join("a").display()).parse()?, root.join("b").display().to_string().parse()?];

    let mut spool = Spool::open(locations.clone())?;
    let mut ms: Vec<f64> = Vec::with_capacity(chunks);
    for i in 0..chunks as u64 {
        let started = Instant::now();
        let first_ns = i * 300_000_000_000;
        spool.write_chunk(&format!("{i:06}"), first_ns, first_ns + 300_000_000_000, &files)?;
        ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len().max(1) as f64;
    let bytes: usize = files.iter().map(|(_, data)| data.len()).sum();
    println!("chunk: {} files, {bytes} bytes", files.len());
    let tail = chunks.saturating_sub(100);
    println!(
        "ms per chunk: first 100 {:.2}, last 100 {:.2}, all {:.2}",
        mean(&ms[..chunks.min(100)]),
        mean(&ms[tail..]),
        mean(&ms)
    );
    for l in spool.stats().locations {
        println!(
            "{}: {} chunks, used {} bytes, quota {:?}",
            l.path.display(),
            l.chunks_written,
            l.used_bytes,
            l.quota_bytes
        );
    }
    drop(spool);
    let started = Instant::now();
    let spool = Spool::open(locations)?;
    println!("reopen: {:.1} ms, {} leftovers", started.elapsed().as_secs_f64() * 1e3, spool.leftovers().len());
    Ok(())
}
