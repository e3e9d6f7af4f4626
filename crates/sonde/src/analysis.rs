//! What `analyze` and `monitor` print around the library's run (sonde-analysis): its notes,
//! the progress bar, the human summary and the exit status.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use sonde_analysis::{Analysis, AnalysisConfig, Finished};

use crate::EXIT_INPUT_DAMAGED;

/// Prepares the run of `config` (the input opened by `open`), its notes said unless -q.
pub fn prepare<T>(config: &AnalysisConfig, open: impl FnOnce() -> Result<T>) -> Result<(Analysis, T)> {
    let (mut analysis, input) = Analysis::prepare(config.clone(), open)?;
    say(config.quiet, std::mem::take(&mut analysis.notes));
    Ok((analysis, input))
}

/// The progress bar of a long run on a terminal (none with -q).
pub fn progress(config: &AnalysisConfig) -> Option<Box<dyn FnMut(sonde_engine::Progress) + Send>> {
    (!config.quiet && std::io::stderr().is_terminal()).then(|| Box::new(progress_bar()) as Box<_>)
}

fn say(quiet: bool, notes: Vec<String>) {
    if !quiet {
        notes.iter().for_each(|note| eprintln!("sonde: {note}"));
    }
}

/// Writes summary.json and the human summary; the exit status says whether an output could
/// not be written (1, each named) or the input ended early (3).
pub fn finish(config: &AnalysisConfig, finished: &Finished) -> Result<ExitCode> {
    clear_progress_bar();
    let run = &finished.report;
    let tcpdpriv = run.anonymization.as_ref().and_then(|a| a.tcpdpriv.as_ref());
    say(config.quiet, tcpdpriv.and_then(sonde_analysis::anon::table_warning).into_iter().collect());
    let errors = finished.write_summary();
    if !errors.is_empty() {
        errors.iter().for_each(|e| eprintln!("sonde: {e}"));
        eprintln!(
            "sonde: some outputs could not be written; the others in {} are whole (docs/faults.md)",
            config.out.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    if !config.quiet {
        // A closed pipe is not an error.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), run.human(&config.out).as_bytes());
    }
    if let Some(e) = &run.input_error {
        eprintln!("sonde: warning: {}: {}; results cover the input before that point", run.input, e.message);
        return Ok(ExitCode::from(EXIT_INPUT_DAMAGED));
    }
    Ok(ExitCode::SUCCESS)
}

/// The progress bar of a long run on a terminal: it appears once the run has lasted a second.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn progress_bar() -> impl FnMut(sonde_engine::Progress) + Send + 'static {
    let started = Instant::now();
    move |p| {
        if started.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        let mut bar = BAR.lock().unwrap_or_else(|e| e.into_inner());
        let b = bar.get_or_insert_with(|| new_bar(p.size));
        match p.size {
            Some(_) => b.set_position(p.position),
            None => b.set_position(p.packets),
        }
    }
}

fn clear_progress_bar() {
    if let Some(b) = BAR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.finish_and_clear();
    }
}

fn new_bar(size: Option<u64>) -> ProgressBar {
    match size {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} [{bar:40}] {eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {pos} packets")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    }
}
