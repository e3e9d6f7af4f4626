//! The `sonde` command: argument handling, progress and summary printing around the library.

#![forbid(unsafe_code)]

mod analysis;
mod anon_trace;
mod compare;
mod control;
mod flags;
mod plot;
mod serve;
mod thin;
mod trace_out;
mod ts;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches};

use flags::{AnalyzeArgs, Cli, Command};

/// Exit status when the input ended early but what came before was analysed and written.
pub(crate) const EXIT_INPUT_DAMAGED: u8 = 3;

fn main() -> ExitCode {
    let command = Cli::command();
    // `--config FILE`'s options go in front of the command line's own (which win).
    let argv = match sonde_analysis::config_file::expand(&command, std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("sonde: {e}");
            return ExitCode::from(2);
        }
    };
    let matches = command.get_matches_from(argv);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some((name, sub)) = matches.subcommand().filter(|_| print_config(&cli)) {
        let command = Cli::command();
        let sub_command = command.find_subcommand(name).expect("the parsed subcommand");
        print!("{}", sonde_analysis::config_file::print(sub_command, sub));
        return ExitCode::SUCCESS;
    }
    if let Some((command, missing)) = missing_key(&cli) {
        // A usage error, as clap reports a missing argument: the command's usage, exit status 2.
        let mut cli = Cli::command();
        cli.build();
        let command = cli.find_subcommand_mut(command).expect("a subcommand of sonde");
        command.error(clap::error::ErrorKind::MissingRequiredArgument, missing).exit();
    }
    let result = match cli.command {
        Command::Analyze(args) => run_analyze(&args),
        Command::Ts(cmd) => ts::run(&cmd),
        Command::Plot(args) => plot::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Anon(args) => anon_trace::run(&args),
        Command::Thin(args) => thin::run(&args),
        Command::Control(cmd) => control::run(&cmd),
        Command::Monitor(args) => {
            sonde_heap::one_arena();
            let config = &args.monitor.analysis;
            sonde_analysis::monitor::monitor(&args.monitor, analysis::progress(config), |f| analysis::finish(config, f))
        }
        Command::Serve(args) => {
            sonde_heap::one_arena();
            serve::run(&args)
        }
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sonde: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `analyze --print-config` or `monitor --print-config`.
fn print_config(cli: &Cli) -> bool {
    match &cli.command {
        Command::Analyze(args) => args.print_config,
        Command::Monitor(args) => args.print_config,
        _ => false,
    }
}

/// `sonde completions SHELL`: the script on stdout (made in memory first: clap_complete panics
/// on a failed write, and stdout may be a closed pipe).
fn completions(shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sonde", &mut script);
    std::io::Write::write_all(&mut std::io::stdout(), &script).context("writing the script")?;
    Ok(ExitCode::SUCCESS)
}

/// `sonde man`: the page on stdout, or every command's page into `dir`.
fn man(dir: Option<&std::path::Path>) -> Result<ExitCode> {
    let command = Cli::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--dir {}", dir.display()))?;
            clap_mangen::generate_to(command, dir).with_context(|| format!("writing pages into {}", dir.display()))?
        }
        None => clap_mangen::Man::new(command).render(&mut std::io::stdout()).context("writing the page")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// What a mode of anonymisation that needs a key lacks without `--key` (clap's own
/// `required_if_eq` does not see a default value such as `anon`'s cryptopan).
fn missing_key(cli: &Cli) -> Option<(&'static str, String)> {
    let (command, mode, key) = match &cli.command {
        Command::Anon(args) => ("anon", Some(args.anonymize), &args.key),
        Command::Analyze(args) => ("analyze", args.analysis.anonymize, &args.analysis.key),
        Command::Monitor(args) => ("monitor", args.monitor.analysis.anonymize, &args.monitor.analysis.key),
        _ => return None,
    };
    let mode = mode.filter(|m| m.needs_key() && key.is_none())?;
    Some((command, format!(
        "--anonymize {mode} needs --key <FILE>: a 32-byte key, created with a new random key if the file is absent (or --anonymize zero, which needs none)"
    )))
}

fn run_analyze(args: &AnalyzeArgs) -> Result<ExitCode> {
    let input_name = args.read.display().to_string();
    anyhow::ensure!(
        args.http.is_none() || args.analysis.typed().is_none(),
        "--http serves the flow logs as text: it takes --format tsv or jsonl"
    );
    anyhow::ensure!(
        args.http.is_none() || args.analysis.layout == sonde_analysis::FlowLayout::Sonde,
        "--http serves sonde's flow logs: it takes --layout sonde"
    );
    anyhow::ensure!(
        args.http.is_none() || args.analysis.outputs.is_none(),
        "--http serves every output of the run: it takes no --outputs"
    );
    // The address is checked and bound before anything is read or written.
    let server = args
        .http
        .map(|addr| sonde_analysis::serve::prepare(addr, args.http_token.as_deref(), &args.http_limits))
        .transpose()?;
    // From here a signal ends the input where it is, and the outputs are written.
    let stop = sonde_live::stop_on_signals_and_hangup().context("installing the signal handlers")?;
    let open = || sonde_capture::open(&args.read).with_context(|| input_name.clone());
    let (mut prepared, source) = analysis::prepare(&args.analysis, open)?;
    prepared.create_outputs()?;
    let compression = source.compression().map(str::to_string);
    let input = (input_name.as_str(), compression.as_deref());
    // With several workers, a trace file is read by as many readers, each reading it whole.
    let readers = prepared.readers_for_file(&args.read);
    let mut sources = if readers > 1 {
        sonde_capture::open_readers(&args.read, readers).with_context(|| input_name.clone())?
    } else {
        vec![source]
    };
    let mut until_stopped: Vec<_> = sources.iter_mut().map(|s| sonde_live::UntilStopped { inner: s, stop }).collect();
    let mut readers: Vec<&mut (dyn sonde_capture::PacketSource + Send)> =
        until_stopped.iter_mut().map(|s| s as &mut (dyn sonde_capture::PacketSource + Send)).collect();
    let mut finished = prepared.write(&mut readers, input, None, analysis::progress(&args.analysis))?;
    finished.report.interrupted_by = sonde_live::stopped_by().map(str::to_string);
    let code = analysis::finish(&args.analysis, &finished)?;
    // A signal asked the run to end: no server after it.
    if let Some(server) = server.filter(|_| finished.report.interrupted_by.is_none()) {
        server.serve(&finished, args.analysis.store.as_deref(), args.analysis.quiet)?;
    }
    Ok(code)
}
