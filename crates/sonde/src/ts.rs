//! `sonde ts`: reading a time-series store (sonde-rrd): export for rrdtool, CSV dump, info.
//!
//! Exit status: 0 success (also when the reader of standard output goes away); 1 error (the
//! store cannot be read, or the output cannot be written); 2 bad usage.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use sonde_rrd::Store;

#[derive(Debug, Subcommand)]
pub enum TsCommand {
    /// Write a store as rrdtool's XML dump format, for `rrdtool restore`.
    ///
    /// Example: sonde ts export --rrdtool-xml traffic.rrd -o traffic.xml &&
    /// rrdtool restore traffic.xml traffic-rrdtool.rrd
    Export(ExportArgs),
    /// Write every row of every archive as CSV: archive,cf,resolution_s,time_s,<sources>.
    ///
    /// Unknown values are empty fields.
    Dump(DumpArgs),
    /// Show a store's step, data sources, archives, last update and size.
    Info(InfoArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// rrdtool's XML dump format (version 0003), as `rrdtool dump` writes it.
    #[arg(long, required = true)]
    pub rrdtool_xml: bool,
    /// The store to read.
    #[arg(value_name = "STORE")]
    pub store: PathBuf,
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The store to read.
    #[arg(value_name = "STORE")]
    pub store: PathBuf,
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// The store to read.
    #[arg(value_name = "STORE")]
    pub store: PathBuf,
}

pub fn run(cmd: &TsCommand) -> Result<ExitCode> {
    match cmd {
        TsCommand::Export(args) => {
            let store = open(&args.store)?;
            write_out(args.out.as_deref(), |w| store.export_rrdtool_xml(w))
        }
        TsCommand::Dump(args) => {
            let store = open(&args.store)?;
            write_out(args.out.as_deref(), |w| store.dump_csv(w))
        }
        TsCommand::Info(args) => {
            let store = open(&args.store)?;
            write_out(None, |w| store.write_info(&args.store, w))
        }
    }
}

fn open(path: &Path) -> Result<Store> {
    Store::open(path).with_context(|| format!("cannot read the store {}", path.display()))
}

/// Runs `write` into the file `out` (removed again if writing fails) or standard output.
fn write_out(
    out: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> Result<(), sonde_rrd::Error>,
) -> Result<ExitCode> {
    match out {
        Some(path) => {
            // Whole or not at all: `NAME.part`, then renamed (a failure removes it).
            let pending = sonde_output::PendingFile::create(path, true)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut w = BufWriter::new(pending);
            let result = write(&mut w).map_err(anyhow::Error::from).and_then(|()| Ok(w.flush()?));
            if let Err(e) = result {
                return Err(e.context(format!("cannot write {}", path.display())));
            }
            let pending = w.into_inner().map_err(|e| e.into_error())?;
            pending.commit(true).with_context(|| format!("cannot write {}", path.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let mut w = BufWriter::new(io::stdout().lock());
            let result = write(&mut w).map_err(|e| match e {
                sonde_rrd::Error::Io(e) => e,
                other => io::Error::other(other),
            });
            match result.and_then(|()| w.flush()) {
                // A reader that stops early (`| head`) is not an error.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
                Err(e) => Err(anyhow::Error::from(e).context("cannot write to standard output")),
                Ok(()) => Ok(ExitCode::SUCCESS),
            }
        }
    }
}
