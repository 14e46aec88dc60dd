//! `recoup serve --config FILE`: the command's flags from a TOML file, one key per flag
//! (`live_bitrate = "4Mbps"`, `no_gso = true`, `max_connections = 500`; `live-bitrate` works
//! too). A flag given on the command line wins over the file. The file's keys become flags
//! placed before the command line's, so every value goes through the same parser and check
//! as on the command line; errors name the file and the key.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::{ContextKind, ContextValue};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

/// The subcommands that take `--config`.
const WITH_CONFIG: &[&str] = &["serve"];

/// A bad config file, named with the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not TOML: {detail}")]
    Toml { path: PathBuf, detail: String },
    #[error("{path}: unknown key `{key}`; the keys of `recoup {command}` are: {known}")]
    UnknownKey {
        path: PathBuf,
        key: String,
        command: String,
        known: String,
    },
    #[error("{path}: key `{key}`: {detail}")]
    BadValue {
        path: PathBuf,
        key: String,
        detail: String,
    },
}

/// Parses `args` with `command`; when they name a subcommand that takes `--config`, the file's
/// keys are added as flags first. `Ok(None)`: the arguments do not parse on their own, and the
/// caller parses them again to report clap's own error.
pub fn expand(command: &Command, args: &[OsString]) -> Result<Option<Vec<OsString>>, ConfigError> {
    let Ok(matches) = command.clone().try_get_matches_from(args) else {
        return Ok(None);
    };
    let Some((name, sub)) = matches.subcommand() else {
        return Ok(Some(args.to_vec()));
    };
    let Some(path) = WITH_CONFIG
        .contains(&name)
        .then(|| sub.get_one::<PathBuf>("config"))
        .flatten()
    else {
        return Ok(Some(args.to_vec()));
    };
    let Some(sub_command) = command.find_subcommand(name) else {
        return Ok(Some(args.to_vec()));
    };
    let flags = flags_from_file(path, sub_command, sub)?;
    // The file's flags go right after the subcommand's name, before the command line's own.
    let at = args
        .iter()
        .position(|a| a == name)
        .map_or(args.len(), |i| i + 1);
    let mut expanded = args[..at].to_vec();
    expanded.extend(flags.into_iter().map(OsString::from));
    expanded.extend_from_slice(&args[at..]);
    // A value the file got wrong is reported with its key.
    if let Err(e) = command.clone().try_get_matches_from(&expanded) {
        let from_file = keys_in_file(path)?;
        if let Some(flag) = invalid_flag(&e).filter(|f| from_file.contains(f)) {
            return Err(ConfigError::BadValue {
                path: path.clone(),
                key: flag.replace('-', "_"),
                detail: first_line(&e.to_string()),
            });
        }
    }
    Ok(Some(expanded))
}

/// The file's keys as flags of `command`, leaving out those the command line set.
fn flags_from_file(
    path: &Path,
    command: &Command,
    given: &ArgMatches,
) -> Result<Vec<String>, ConfigError> {
    let table = read_table(path)?;
    let mut flags = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()) && long != "config" && long != "help")
            .ok_or_else(|| ConfigError::UnknownKey {
                path: path.to_owned(),
                key: key.clone(),
                command: command.get_name().to_owned(),
                known: known_keys(command),
            })?;
        if given.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        let bad = |detail: String| ConfigError::BadValue {
            path: path.to_owned(),
            key: key.clone(),
            detail,
        };
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        match value {
            toml::Value::Boolean(on) if switch => {
                if *on {
                    flags.push(format!("--{long}"));
                }
            }
            _ if switch => return Err(bad(format!("must be true or false, not {value}"))),
            toml::Value::String(s) => flags.push(format!("--{long}={s}")),
            toml::Value::Integer(_) | toml::Value::Float(_) => {
                flags.push(format!("--{long}={value}"));
            }
            other => {
                return Err(bad(format!(
                    "must be a string or a number (as on the command line), not {}",
                    other.type_str()
                )))
            }
        }
    }
    Ok(flags)
}

fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    text.parse::<toml::Table>().map_err(|e| ConfigError::Toml {
        path: path.to_owned(),
        detail: e.to_string().trim().to_owned(),
    })
}

/// The file's keys, spelled as flags.
fn keys_in_file(path: &Path) -> Result<BTreeSet<String>, ConfigError> {
    Ok(read_table(path)?
        .keys()
        .map(|k| k.replace('_', "-"))
        .collect())
}

/// Every key the file may hold, in the file's spelling.
fn known_keys(command: &Command) -> String {
    command
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "config" && *l != "help")
        .map(|l| l.replace('-', "_"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The flag (without dashes) whose value clap refused, as its error names it
/// (`--live-bitrate <RATE>`).
fn invalid_flag(e: &clap::Error) -> Option<String> {
    match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => {
            let name = s.strip_prefix("--")?;
            Some(name.split([' ', '=']).next().unwrap_or(name).to_owned())
        }
        _ => None,
    }
}

/// Clap's message without its `error: ` prefix and usage lines.
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or(message);
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}
