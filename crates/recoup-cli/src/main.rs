//! `recoup`: the command line. Each subcommand lives in its own module under `cmd/`; this file
//! only parses and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod logging;

/// Sender-side loss recovery for QUIC: simulate, serve and fetch.
#[derive(Parser, Debug)]
#[command(name = "recoup", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Serve(cmd::serve::Args),
    Get(cmd::get::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init();
    let result = match cli.command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::Get(args) => cmd::get::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("recoup: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_serve_and_get() {
        let cli = Cli::try_parse_from([
            "recoup",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--root",
            ".",
            "--policy",
            "fixed:2",
            "--cc",
            "bbr",
        ])
        .expect("serve");
        assert!(matches!(cli.command, Command::Serve(_)));
        let cli = Cli::try_parse_from(["recoup", "get", "https://127.0.0.1:1/x", "-o", "out"])
            .expect("get");
        assert!(matches!(cli.command, Command::Get(_)));
        assert!(Cli::try_parse_from(["recoup", "serve", "--policy", "nonsense:?"]).is_err());
    }
}
