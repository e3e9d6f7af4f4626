//! Prints one line per frame (timestamp, lengths, link type) and a summary; with `--count`,
//! only the summary and the read rate. A development aid: `cargo run --example capdump -- FILE`.

use std::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let count_only = args.iter().any(|a| a == "--count");
    args.retain(|a| a != "--count");
    for path in args {
        let mut src = match sonde_capture::open(std::path::Path::new(&path)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let start = Instant::now();
        let (mut frames, mut bytes) = (0u64, 0u64);
        let end = loop {
            match src.next_frame() {
                Ok(Some(f)) => {
                    frames += 1;
                    bytes += f.data.len() as u64;
                    if !count_only {
                        let (s, ns) = (f.ts_ns / 1_000_000_000, f.ts_ns % 1_000_000_000);
                        println!("{s}.{ns:09}\t{}\t{}\t{}", f.data.len(), f.wire_len, f.link_type);
                    }
                }
                Ok(None) => break String::from("end"),
                Err(e) => break e.to_string(),
            }
        };
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "{path}: {} {:?}: {frames} frames, {bytes} bytes, {end}; {:.1} Mframes/s",
            src.format(),
            src.compression(),
            frames as f64 / secs / 1e6
        );
    }
}
