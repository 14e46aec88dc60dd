//! `recoup`: the command line. Each subcommand lives in its own module under `cmd/`; this file
//! only parses and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod logging;
mod plot;

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
    Game(cmd::game::Args),
    Viewers(cmd::viewers::Args),
    Run(cmd::run::Args),
    Compare(cmd::compare::Args),
    Sweep(cmd::sweep::Args),
    Plot(cmd::plot::Args),
    Report(cmd::report::Args),
    Link(Box<cmd::link::Args>),
    Analyze(cmd::analyze::Args),
    Population(cmd::population::Args),
    TrainDqn(cmd::train_dqn::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Serve(args) => cmd::serve::run(args).map_err(Into::into),
        Command::Get(args) => cmd::get::run(args).map_err(Into::into),
        Command::Game(args) => cmd::game::run(args).map_err(Into::into),
        Command::Viewers(args) => cmd::viewers::run(args).map_err(Into::into),
        Command::Run(args) => cmd::run::run(args).map_err(Into::into),
        Command::Compare(args) => cmd::compare::run(args).map_err(Into::into),
        Command::Sweep(args) => cmd::sweep::run(args).map_err(Into::into),
        Command::Plot(args) => cmd::plot::run(args).map_err(Into::into),
        Command::Report(args) => cmd::report::run(args).map_err(Into::into),
        Command::Link(args) => cmd::link::run(*args).map_err(Into::into),
        Command::Analyze(args) => cmd::analyze::run(args).map_err(Into::into),
        Command::Population(args) => cmd::population::run(args).map_err(Into::into),
        Command::TrainDqn(args) => cmd::train_dqn::run(args).map_err(Into::into),
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
    use recoup_transport::cc::{Bbr3Params, CcAlgorithm};
    use recoup_transport::loss::LossDetectionMode;

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
        let cli = Cli::try_parse_from(["recoup", "compare", "--seeds", "2", "--duration", "5s"])
            .expect("compare");
        match cli.command {
            Command::Compare(a) => {
                assert_eq!(a.seeds, Some(2));
                assert_eq!(a.duration, Some(std::time::Duration::from_secs(5)));
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(Cli::try_parse_from(["recoup", "compare", "--duration", "soon"]).is_err());
        assert!(
            Cli::try_parse_from(["recoup", "run", "s.toml"]).is_err(),
            "--out is required"
        );
        assert!(Cli::try_parse_from(["recoup", "serve", "--policy", "nonsense:?"]).is_err());
        let cli = Cli::try_parse_from(["recoup", "serve", "--cc", "bbr3"]).expect("bbr3");
        match cli.command {
            Command::Serve(a) => {
                assert_eq!(a.transport.cc, CcAlgorithm::Bbr3(Bbr3Params::default()))
            }
            other => panic!("parsed as {other:?}"),
        }
        let e = Cli::try_parse_from(["recoup", "get", "https://127.0.0.1:1/x", "--cc", "vegas"])
            .expect_err("unknown controller")
            .to_string();
        assert!(
            e.contains("accepted: newreno, cubic, bbr, bbr3, copa, none"),
            "{e}"
        );
    }

    #[test]
    fn max_pto_flag_defaults_to_auto_and_refuses_a_bound_three_probes_do_not_fit() {
        use recoup_transport::MaxPto;
        let serve = |extra: &[&str]| {
            let mut args = vec!["recoup", "serve"];
            args.extend(extra);
            match Cli::try_parse_from(&args).map(|c| c.command) {
                Ok(Command::Serve(a)) => Ok(a.transport),
                Ok(other) => panic!("parsed as {other:?}"),
                Err(e) => Err(e.to_string()),
            }
        };
        let config = |extra: &[&str]| serve(extra).expect("parses").config();
        assert_eq!(config(&[]).expect("default").max_pto, MaxPto::Auto);
        assert_eq!(
            config(&["--max-pto", "off"]).expect("off").max_pto,
            MaxPto::Unbounded
        );
        assert_eq!(
            config(&["--max-pto", "2s"]).expect("2s").max_pto,
            MaxPto::Fixed(std::time::Duration::from_secs(2))
        );
        let e = config(&["--max-pto", "11s"]).expect_err("11 s x 3 > 30 s");
        assert!(
            e.to_string().contains("--max-pto") && e.to_string().contains("three probes"),
            "{e}"
        );
        assert!(config(&["--max-pto", "11s", "--idle-timeout", "40s"]).is_ok());
        for bad in ["0s", "soon"] {
            let e = serve(&["--max-pto", bad]).expect_err(bad);
            assert!(e.contains("--max-pto"), "{e}");
        }
    }

    #[test]
    fn loss_detection_flag() {
        for (cmd, extra) in [("serve", None), ("get", Some("https://127.0.0.1:1/x"))] {
            let mut args = vec!["recoup", cmd, "--loss-detection", "rack-tlp"];
            args.extend(extra);
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{cmd}: {e}"));
            let transport = match cli.command {
                Command::Serve(a) => a.transport,
                Command::Get(a) => a.transport,
                other => panic!("parsed as {other:?}"),
            };
            assert_eq!(
                transport.config().expect("config").loss_detection,
                LossDetectionMode::RackTlp
            );
        }
        let cli = Cli::try_parse_from(["recoup", "serve"]).expect("serve");
        let Command::Serve(a) = cli.command else {
            panic!("serve")
        };
        assert_eq!(
            a.transport.config().expect("config").loss_detection,
            LossDetectionMode::Rfc9002
        );
        let e = Cli::try_parse_from(["recoup", "serve", "--loss-detection", "tcp"])
            .expect_err("unknown loss detection")
            .to_string();
        assert!(
            e.contains("--loss-detection") && e.contains("rfc9002, rack-tlp"),
            "{e}"
        );
    }
}
