//! sonde-analysis: a whole run, declared once. [`AnalysisConfig`] is everything a run is told
//! (the CLI's flags and `--config` file, Python's keyword arguments); [`Analysis::prepare`]
//! checks it (the one place settings are checked), opens the input and compiles the plan of
//! what the run computes for its outputs (a fact no output shows is not computed); then
//! [`Analysis::write`] runs it into its output directory (the CLI's `analyze` and `monitor`),
//! or [`Analysis::analyze`] into the caller's sinks with every other output in memory (the
//! Python package).
//!
//! The binary is the shell around it: flags to config, one call, printing.

#![forbid(unsafe_code)]

mod analysis;
pub mod anon;
pub mod config;
pub mod config_file;
mod controls;
pub mod export;
pub mod monitor;
pub mod serve;
mod store;
mod write;

pub use analysis::{Analysis, Analyzed};
pub use config::{AnalysisConfig, FeatureSet, FlowLayout, Names, OutputFormat, ThinMode, ThinParams};
pub use write::{Finished, LiveOptions};
