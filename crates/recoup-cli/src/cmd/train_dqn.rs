//! `recoup train-dqn`: trains `art-dqn`'s Q-network (ART §8) in the simulator and writes the
//! weights file that `art-dqn:weights=PATH` loads.

use std::path::PathBuf;

use recoup_dqn::{train, TrainConfig};

use super::simulate::{self, Error};

/// Train art-dqn's Q-network in the simulator (ART §8) and save it as safetensors.
///
/// Episodes cycle through the built-in training scenarios (a live stream and a file over 60 ms
/// RTT with 1, 5, 10 % random loss and Gilbert-Elliott bursts), or through the sweep points of
/// --scenario. The result is a pure function of the arguments: the same seed gives the same file.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup train-dqn --out art-dqn.safetensors
  recoup train-dqn --out w.safetensors --episodes 200 --seed 7 --gamma 1.01
  recoup run scenario.toml --out results   # with policy name = \"art-dqn\", params = \"weights=w.safetensors\"")]
pub struct Args {
    /// Where to write the weights (safetensors).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// Simulated runs to learn from.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub episodes: u32,
    /// Seeds the weights, the exploration, the replay sampling and the episodes' runs.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// ART §8's gamma: a recovered round earns gamma^-(R-1), a round lost again 0.
    #[arg(long, value_name = "G")]
    pub gamma: Option<f64>,
    /// Train on this scenario file's sweep points (its policies are ignored) instead of the
    /// built-in ones.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Length of each episode's run, overriding the scenarios' `duration` (e.g. 5s).
    #[arg(long, value_name = "TIME", value_parser = simulate::parse_duration)]
    pub duration: Option<std::time::Duration>,
}

pub fn run(args: Args) -> Result<(), Error> {
    let mut cfg = TrainConfig::with_default_scenarios()?;
    if let Some(path) = &args.scenario {
        cfg.scenarios = recoup_sim::scenario::load(path)?;
    }
    if let Some(d) = args.duration {
        for s in &mut cfg.scenarios {
            s.duration = d;
        }
    }
    cfg.episodes = args.episodes;
    cfg.seed = args.seed;
    if let Some(g) = args.gamma {
        cfg.gamma = g;
    }
    let bar = simulate::progress_bar(u64::from(args.episodes));
    let net = train(&cfg, |report| {
        bar.set_message(format!(
            "epsilon {:.2}, mean R {}, reward {}, loss {}",
            report.epsilon,
            report.mean_r.map_or("-".to_owned(), |r| format!("{r:.2}")),
            report
                .mean_reward
                .map_or("-".to_owned(), |r| format!("{r:.3}")),
            report.loss.map_or("-".to_owned(), |l| format!("{l:.4}")),
        ));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    net.save(&args.out).map_err(recoup_dqn::Error::from)?;
    println!(
        "wrote {} ({} episodes, seed {}, gamma {}): use art-dqn:weights={}",
        args.out.display(),
        args.episodes,
        args.seed,
        cfg.gamma,
        args.out.display()
    );
    Ok(())
}
