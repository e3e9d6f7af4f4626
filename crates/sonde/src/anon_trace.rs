//! `sonde anon -r IN -w OUT`: a copy of a trace with every address anonymised and the checksums
//! fixed (sonde-rewrite), in the input's format (docs/anonymization.md, "`sonde anon`").

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sonde_capture::TraceFormat;
use sonde_rewrite::{rewrite_trace, RewriteStats, Rewriter, RewrittenTrace};

use crate::EXIT_INPUT_DAMAGED;

#[derive(Debug, clap::Args)]
pub struct AnonTraceArgs {
    /// Trace to read; `-` reads standard input.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub read: PathBuf,
    /// Trace to write (pcap or pcapng, as the input); `-` writes standard output.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: PathBuf,
    /// How addresses are replaced: cryptopan (prefix preserving), hash, zero or tcpdpriv
    /// (prefix preserving, images in the order addresses first appear in the trace).
    #[arg(long, value_name = "MODE", value_parser = sonde_analysis::anon::parse_mode, default_value = "cryptopan")]
    pub anonymize: sonde_anon::Mode,
    /// The 32-byte key for cryptopan, hash or tcpdpriv (created with a new random key, mode
    /// 600, if absent). The same key maps addresses as `sonde analyze --anonymize` does with it
    /// (tcpdpriv: as the same key and the same first-seen order do).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Most distinct addresses tcpdpriv's table holds (both families); past it a new address
    /// becomes 0.0.0.0 or :: (counted in the summary on stderr).
    #[arg(long, value_name = "N", default_value_t = sonde_anon::tcpdpriv::DEFAULT_MAX_ADDRESSES)]
    pub tcpdpriv_max_addresses: usize,
    /// Keep at most N bytes of each frame (after the checksums are computed); the length on
    /// the wire is kept.
    #[arg(long, value_name = "N")]
    pub snaplen: Option<u32>,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    pub force: bool,
    /// No summary on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn run(args: &AnonTraceArgs) -> Result<ExitCode> {
    if args.snaplen == Some(0) {
        bail!("--snaplen must be at least 1");
    }
    let input_name = args.read.display().to_string();
    let mut source = sonde_capture::open(&args.read).with_context(|| input_name.clone())?;
    let anon = match args.key.as_deref().filter(|_| args.anonymize.needs_key()) {
        Some(path) => {
            let mut notes = Vec::new();
            let (anon, _) = sonde_analysis::anon::keyed(args.anonymize, path, args.tcpdpriv_max_addresses, &mut notes)?;
            notes.iter().filter(|_| !args.quiet).for_each(|note| eprintln!("sonde: {note}"));
            anon
        }
        // main.rs refuses a mode that needs a key without one.
        None => sonde_anon::Anonymizer::zero(),
    };
    let format = TraceFormat::matching(source.format());
    let mut rewriter = Rewriter::new(anon);
    let started = Instant::now();

    let write = |out| rewrite_trace(source.as_mut(), &mut rewriter, args.snaplen, out);
    let Some(copied) = crate::trace_out::write_trace(&args.write, args.force, format, write)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let elapsed_s = started.elapsed().as_secs_f64();
    if !args.quiet {
        print_summary(&rewriter.stats(), &copied, args, elapsed_s);
    }
    if let Some(table) = rewriter.anonymizer().table_stats() {
        if !args.quiet {
            eprintln!("  tcpdpriv table: {} addresses (at most {})", table.addresses, table.max_addresses);
        }
        if table.unmapped > 0 {
            // Not a summary detail: these addresses lost their identity.
            eprintln!(
                "sonde: warning: the tcpdpriv table was full (--tcpdpriv-max-addresses {}): {} addresses were written as 0.0.0.0 or ::",
                table.max_addresses, table.unmapped
            );
        }
    }
    let stats = rewriter.stats();
    if stats.unsupported_link_frames > 0 {
        // Not a summary detail: these frames keep their real addresses.
        eprintln!(
            "sonde: warning: {} frames of a link type sonde does not decode were copied unchanged: their addresses are not anonymised",
            stats.unsupported_link_frames
        );
    }
    if let Some(e) = &copied.input_error {
        eprintln!(
            "sonde: warning: {input_name}: {e}; the output holds the {} frames before that point",
            copied.frames_written
        );
        return Ok(ExitCode::from(EXIT_INPUT_DAMAGED));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(s: &RewriteStats, copied: &RewrittenTrace, args: &AnonTraceArgs, elapsed_s: f64) {
    let per_frame_ns = if s.frames > 0 { elapsed_s * 1e9 / s.frames as f64 } else { 0.0 };
    eprintln!(
        "sonde anon ({}): {} frames read, {} written to {} in {:.2} s ({:.0} ns/frame)",
        args.anonymize,
        s.frames,
        copied.frames_written,
        crate::trace_out::name(&args.write),
        elapsed_s,
        per_frame_ns
    );
    if let Some(n) = args.snaplen {
        eprintln!("  snaplen {n}: {} frames cut", copied.frames_cut);
    }
    eprintln!(
        "  addresses mapped: {} IPv4, {} IPv6, {} partial (cut by the capture); {} ARP, {} ICMP quotes, {} tunnelled packets, {} IPv6 routing headers",
        s.ipv4_addresses, s.ipv6_addresses, s.partial_addresses, s.arp_packets, s.icmp_quotes, s.tunnels, s.routing_headers
    );
    eprintln!(
        "  checksums: {} recomputed ({} were wrong and are fixed), {} updated incrementally, {} not captured",
        s.checksums_recomputed, s.checksums_fixed, s.checksums_adjusted, s.checksums_not_captured
    );
    eprintln!(
        "  left unchanged: {} non-IP frames, {} of an unsupported link type, {} with an unreadable link header; {} headers cut or malformed (rewritten as far as readable)",
        s.non_ip_frames, s.unsupported_link_frames, s.unreadable_link_frames, s.headers_unreadable
    );
}
