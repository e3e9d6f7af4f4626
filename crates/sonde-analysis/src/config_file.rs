//! `--config FILE` and `--print-config` for `analyze` and `monitor` (docs/config.md).
//!
//! The file is TOML; its keys are the command's long options (`app-packets = 0`, or
//! `app_packets`), and `filter` is the BPF filter. A flag or an option of one value takes a
//! boolean, string or number; an option that repeats or takes a list (`internal`, `outputs`,
//! `kafka-option`) takes an array. Options given on the command line win over the file's (a list
//! given there replaces the file's). The file's values go through the command line's own parser,
//! so every default, check and message is the command line's: there is one definition of each
//! option. An unknown key, a table, or a value of the wrong kind is an error that names the file,
//! the line and the key.

use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// The subcommands that take a configuration file.
const CONFIGURED: [&str; 2] = ["analyze", "monitor"];

/// Arguments that are not settings: never read from a file, never printed.
const NOT_SETTINGS: [&str; 4] = ["help", "version", "config", "print_config"];

/// The key of the trailing BPF filter.
const FILTER: &str = "filter";

/// `argv` with the options of its `--config FILE` (if any) put in front of the command line's
/// own, for the parser. Unchanged for other subcommands and without `--config`.
pub fn expand(cli: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>, ConfigFileError> {
    expand_argv(cli, argv).map_err(ConfigFileError)
}

/// A config file that cannot be read or holds what no option takes; the message names the file,
/// the line and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError(pub String);

sonde_types::message_error!(ConfigFileError);

fn expand_argv(cli: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(sub) = argv.get(1).and_then(|s| s.to_str()).filter(|s| CONFIGURED.contains(s)) else {
        return Ok(argv);
    };
    let (rest, file) = take_config_flag(&argv[2..])?;
    let Some(file) = file else { return Ok(argv) };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("--config {}: {e}", file.display()))?;
    let command = cli.find_subcommand(sub).expect("a configured subcommand");
    // What the command line gives itself (parsed leniently: the file may hold what it lacks).
    let given: Option<ArgMatches> = cli
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(argv.iter().take(2).cloned().chain(rest.iter().cloned()))
        .ok()
        .and_then(|m| m.subcommand_matches(sub).cloned());
    let on_command_line = |id: &str| {
        given
            .as_ref()
            .is_some_and(|m| m.ids().any(|i| i.as_str() == id) && m.value_source(id) == Some(ValueSource::CommandLine))
    };
    let (options, filter) = file_options(&file, &text, command, &on_command_line)?;
    let mut out: Vec<OsString> = argv[..2].to_vec();
    out.extend(options.into_iter().map(OsString::from));
    out.extend(rest);
    if !filter.is_empty() {
        out.push("--".into());
        out.extend(filter.into_iter().map(OsString::from));
    }
    Ok(out)
}

/// The arguments without `--config FILE` / `--config=FILE` (before any `--`), and the file.
fn take_config_flag(args: &[OsString]) -> Result<(Vec<OsString>, Option<std::path::PathBuf>), String> {
    let (mut rest, mut file) = (Vec::with_capacity(args.len()), None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--") => {
                rest.push(a.clone());
                rest.extend(it.cloned());
                break;
            }
            Some("--config") => match it.next() {
                Some(f) => file = Some(f.into()),
                None => return Err("--config needs a FILE".into()),
            },
            Some(s) if s.starts_with("--config=") => file = Some(s["--config=".len()..].into()),
            _ => rest.push(a.clone()),
        }
    }
    Ok((rest, file))
}

/// The command-line arguments the file's keys stand for (those the command line does not give
/// itself), and the filter's words.
fn file_options(
    file: &Path,
    text: &str,
    command: &Command,
    on_command_line: &dyn Fn(&str) -> bool,
) -> Result<(Vec<String>, Vec<String>), String> {
    let doc = toml_edit::Document::parse(text).map_err(|e| format!("{}: {e}", file.display()))?;
    let table = doc.as_table();
    let (mut options, mut filter) = (Vec::new(), Vec::new());
    for (key, item) in table.iter() {
        let line = table.key(key).and_then(|k| k.span()).map_or(0, |s| text[..s.start].lines().count().max(1));
        let at = |what: String| format!("{}:{line}: {what}", file.display());
        let name = key.replace('_', "-");
        let arg = match settings(command).find(|a| a.get_long() == Some(name.as_str()) || is_filter(a, &name)) {
            Some(arg) => arg,
            None => {
                return Err(at(format!(
                    "unknown key '{key}': not an option of sonde {} (the keys are its long options, see --help)",
                    command.get_name()
                )))
            }
        };
        let values =
            values_of(item).ok_or_else(|| at(format!("'{key}' must be a string, number, boolean or array")))?;
        if on_command_line(arg.get_id().as_str()) {
            continue;
        }
        if is_filter(arg, &name) {
            filter = values.iter().flat_map(|v| v.split_whitespace().map(str::to_string)).collect();
            continue;
        }
        let flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        match (flag, item.as_bool()) {
            (true, Some(on)) => {
                if on == matches!(arg.get_action(), ArgAction::SetTrue) {
                    options.push(format!("--{name}"));
                }
            }
            (true, None) => return Err(at(format!("'{key}' is a flag: true or false"))),
            (false, _) if values.len() > 1 && !takes_many(arg) => {
                return Err(at(format!("'{key}' takes one value, not an array")));
            }
            // An empty list is a list still: `outputs = []` writes summary.json alone.
            (false, _) if values.is_empty() => options.push(format!("--{name}=")),
            (false, _) => options.extend(values.iter().map(|v| format!("--{name}={v}"))),
        }
    }
    Ok((options, filter))
}

/// The arguments of `command` that are settings.
fn settings(command: &Command) -> impl Iterator<Item = &Arg> {
    command.get_arguments().filter(|a| !NOT_SETTINGS.contains(&a.get_id().as_str()))
}

fn is_filter(arg: &Arg, key: &str) -> bool {
    arg.is_positional() && arg.get_id().as_str() == FILTER && key == FILTER
}

/// Whether the option is repeated or takes a list.
fn takes_many(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Append) || arg.get_value_delimiter().is_some()
}

/// A value's text for the command line: a scalar, or each element of an array of scalars.
fn values_of(item: &toml_edit::Item) -> Option<Vec<String>> {
    let scalar = |v: &toml_edit::Value| match v {
        toml_edit::Value::String(s) => Some(s.value().clone()),
        toml_edit::Value::Integer(i) => Some(i.value().to_string()),
        toml_edit::Value::Float(f) => Some(f.value().to_string()),
        toml_edit::Value::Boolean(b) => Some(b.value().to_string()),
        _ => None,
    };
    match item.as_value()? {
        toml_edit::Value::Array(a) => a.iter().map(scalar).collect(),
        v => scalar(v).map(|s| vec![s]),
    }
}

/// The effective settings of a parsed `analyze` or `monitor` as a configuration file: every
/// option that has a value (given, from a file, or its default), in `--help`'s order.
pub fn print(command: &Command, matches: &ArgMatches) -> String {
    let mut out = format!(
        "# sonde {}: the effective settings (--print-config); read back with --config FILE\n",
        command.get_name()
    );
    for arg in settings(command) {
        let id = arg.get_id().as_str();
        let Some(raw) = matches.get_raw(id) else { continue };
        let values: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
        let key = if arg.is_positional() { FILTER.to_string() } else { arg.get_long().unwrap_or(id).to_string() };
        let value = match arg.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => values.first().cloned().unwrap_or_default(),
            _ if arg.is_positional() => toml_string(&values.join(" ")),
            _ if takes_many(arg) => {
                format!("[{}]", values.iter().map(|v| toml_value(v)).collect::<Vec<_>>().join(", "))
            }
            _ => values.first().map(|v| toml_value(v)).unwrap_or_default(),
        };
        if arg.is_positional() && values.is_empty() {
            continue;
        }
        out.push_str(&format!("{key} = {value}\n"));
    }
    out
}

/// A number where the text is one exactly as TOML writes it back, else a string.
fn toml_value(v: &str) -> String {
    let integer = v.parse::<i64>().is_ok_and(|i| i.to_string() == v);
    let float = v.parse::<f64>().is_ok_and(|f| f.is_finite() && f.to_string() == v && v.contains('.'));
    if integer || float {
        v.to_string()
    } else {
        toml_string(v)
    }
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_string(v: &str) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_toml_writes_them() {
        assert_eq!(toml_value("300"), "300");
        assert_eq!(toml_value("0.25"), "0.25");
        assert_eq!(toml_value("1e3"), "\"1e3\"", "a string that looks like a number stays a string");
        assert_eq!(toml_value("007"), "\"007\"");
        assert_eq!(toml_value("sonde-out"), "\"sonde-out\"");
        assert_eq!(toml_string("a\"b\\c"), r#""a\"b\\c""#);
    }

    #[test]
    fn the_config_flag_is_taken_out() {
        let args: Vec<OsString> = ["-r", "x", "--config", "a.toml", "-q", "--", "--config"].map(Into::into).to_vec();
        let (rest, file) = take_config_flag(&args).unwrap();
        assert_eq!(file.as_deref(), Some(Path::new("a.toml")));
        assert_eq!(rest, ["-r", "x", "-q", "--", "--config"].map(OsString::from));
        let (_, file) = take_config_flag(&["--config=b.toml".into()]).unwrap();
        assert_eq!(file.as_deref(), Some(Path::new("b.toml")));
        assert!(take_config_flag(&["--config".into()]).is_err());
    }
}
