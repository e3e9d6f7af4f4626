//! The keyword arguments of `sonde.analyze`, `sonde.stream` and `sonde.monitor`: the facade
//! hands them over as JSON, read into sonde-analysis' [`AnalysisConfig`] (the CLI's config:
//! one definition of every setting, its defaults clap's) and checked by
//! [`Analysis::prepare`], the one place settings are checked, with the options named as Python
//! spells them.

use pyo3::prelude::*;
use sonde_analysis::{Analysis, AnalysisConfig, Names};

use crate::errors::settings_error;

/// The config of the options in `json` (the facade's: only the keys Python takes).
pub fn config(json: &str) -> PyResult<AnalysisConfig> {
    let mut config: AnalysisConfig = serde_json::from_str(json).map_err(|e| settings_error(e.to_string()))?;
    config.names = Names::Keys;
    Ok(config)
}

/// The run of `config` over the input `open` opens: a setting refused is a `SettingsError`, an
/// input that cannot be opened the error `open` gives.
pub fn prepare<T>(config: AnalysisConfig, open: impl FnOnce() -> PyResult<T>) -> PyResult<(Analysis, T)> {
    let open = || open().map_err(anyhow::Error::new);
    Analysis::prepare(config, open).map_err(|e| match e.downcast::<PyErr>() {
        Ok(opening) => opening,
        Err(e) => settings_error(format!("{e:#}")),
    })
}
