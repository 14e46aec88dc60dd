//! `recoup`: the command line. Each subcommand lives in its own module under `cmd/`; this file
//! only parses and dispatches.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// mimalloc returns freed memory to the OS (glibc's malloc kept a flood's worth after the
/// half-open connections were gone: docs/EDGE.md, "Floods").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Serve(Box<cmd::serve::Args>),
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
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cmd::config_file::expand(&Cli::command(), &args) {
        Ok(Some(expanded)) => Cli::parse_from(expanded),
        Ok(None) => Cli::parse_from(args),
        Err(e) => {
            eprintln!("recoup: {e}");
            return ExitCode::FAILURE;
        }
    };
    logging::init();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Serve(args) => cmd::serve::run(*args).map_err(Into::into),
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
    fn initial_window_flag_reaches_the_transport_and_refuses_zero() {
        let config = |args: &[&str]| match Cli::try_parse_from(args).expect("parses").command {
            Command::Serve(a) => a.transport.config().expect("config").initial_window,
            other => panic!("parsed as {other:?}"),
        };
        assert_eq!(
            config(&["recoup", "serve"]),
            None,
            "RFC 9002 §7.2's by default"
        );
        assert_eq!(
            config(&["recoup", "serve", "--initial-window", "32"]),
            Some(32)
        );
        let e = Cli::try_parse_from(["recoup", "serve", "--initial-window", "0"])
            .expect_err("an empty window")
            .to_string();
        assert!(e.contains("--initial-window"), "{e}");
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

    /// `recoup serve --config FILE` as `main` parses it.
    fn serve_with_config(toml: &str, extra: &[&str]) -> Result<cmd::serve::Args, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("edge.toml");
        std::fs::write(&file, toml).expect("write config");
        let mut args: Vec<std::ffi::OsString> = vec![
            "recoup".into(),
            "serve".into(),
            "--config".into(),
            file.into(),
        ];
        args.extend(extra.iter().map(Into::into));
        let expanded = cmd::config_file::expand(&Cli::command(), &args)
            .map_err(|e| e.to_string())?
            .expect("the command line parses");
        match Cli::try_parse_from(expanded)
            .map_err(|e| e.to_string())?
            .command
        {
            Command::Serve(a) => Ok(*a),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn a_config_file_holds_serve_flags_and_the_command_line_wins() {
        let a = serve_with_config(
            "root = \"/srv/www\"\nretry = \"on\"\nno_gso = true\nlive-bitrate = \"2Mbps\"\n\
             max_connections = 5\nlive_policy = \"autorec\"\nmax_pto = \"2s\"\n\
             idle_timeout = \"20s\"\n",
            &["--live-bitrate", "3Mbps"],
        )
        .expect("parses");
        assert_eq!(a.root.as_deref(), Some(std::path::Path::new("/srv/www")));
        assert_eq!(a.retry, "on");
        assert!(a.transport.no_gso);
        assert_eq!(a.max_connections, Some(5));
        assert_eq!(a.live.live_bitrate, 3_000_000, "the command line wins");
        assert_eq!(a.transport.idle_timeout, std::time::Duration::from_secs(20));
        let (live, file) = a.policies();
        assert_eq!(
            (live.to_string(), file.to_string()),
            ("autorec".into(), "crest".into())
        );
        // Every flag of serve is a key: each has a long name.
        let serve = Cli::command();
        let serve = serve.find_subcommand("serve").expect("serve");
        for arg in serve.get_arguments() {
            assert!(
                arg.get_long().is_some(),
                "{:?} has no long flag",
                arg.get_id()
            );
        }
    }

    #[test]
    fn a_bad_config_file_is_an_error_naming_the_key() {
        for (toml, wanted) in [
            (
                "bogus = 1\n",
                vec!["unknown key `bogus`", "live_bitrate", "max_pto"],
            ),
            (
                "live_bitrate = \"fast\"\n",
                vec!["key `live_bitrate`", "fast"],
            ),
            ("no_gso = \"yes\"\n", vec!["key `no_gso`", "true or false"]),
            ("retry = \"sometimes\"\n", vec!["key `retry`", "sometimes"]),
            ("max_connections = 0\n", vec!["key `max_connections`", "0"]),
            (
                "live_policy = \"nonsense\"\n",
                vec!["key `live_policy`", "nonsense"],
            ),
            ("[root]\nx = 1\n", vec!["key `root`", "table"]),
            ("root = \n", vec!["not TOML"]),
        ] {
            let e = serve_with_config(toml, &[]).expect_err(toml);
            assert!(e.contains("edge.toml"), "{toml}: no file named in {e}");
            for w in wanted {
                assert!(e.contains(w), "{toml}: {w:?} missing from {e}");
            }
        }
    }

    #[test]
    fn serve_policies_default_per_content_and_policy_sets_both() {
        let serve = |extra: &[&str]| {
            let mut args = vec!["recoup", "serve"];
            args.extend(extra);
            match Cli::try_parse_from(&args).expect("parses").command {
                Command::Serve(a) => {
                    let (live, file) = a.policies();
                    (live.to_string(), file.to_string())
                }
                other => panic!("parsed as {other:?}"),
            }
        };
        let defaults = (
            cmd::serve::DEFAULT_LIVE_POLICY.parse::<recoup_recovery::PolicySpec>(),
            cmd::serve::DEFAULT_FILE_POLICY.parse::<recoup_recovery::PolicySpec>(),
        );
        assert!(defaults.0.is_ok() && defaults.1.is_ok(), "{defaults:?}");
        assert_eq!(serve(&[]), ("crest".into(), "crest".into()));
        assert_eq!(serve(&["--policy", "arq"]), ("arq".into(), "arq".into()));
        assert_eq!(
            serve(&["--policy", "arq", "--live-policy", "autorec"]),
            ("autorec".into(), "arq".into())
        );
    }

    #[test]
    fn a_worker_count_of_zero_is_an_error_naming_it() {
        for bad in ["0", "257", "many"] {
            let e = Cli::try_parse_from(["recoup", "serve", "--workers", bad])
                .expect_err(bad)
                .to_string();
            assert!(e.contains("--workers") && e.contains(bad), "{e}");
        }
        let cli = Cli::try_parse_from(["recoup", "serve", "--workers", "2"]).expect("2");
        let Command::Serve(a) = cli.command else {
            panic!("serve")
        };
        assert_eq!(a.workers, Some(2));
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
