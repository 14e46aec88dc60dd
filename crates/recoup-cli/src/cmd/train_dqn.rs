//! `recoup train-dqn`: trains `art-dqn`'s Q-network (ART §8) in the simulator and writes the
//! weights file that `art-dqn:weights=PATH` loads.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use recoup_dqn::{train, TrainConfig};
use recoup_recovery::ArtReading;

use super::simulate::{self, Error};

/// Train art-dqn's Q-network in the simulator (ART §8) and save it as safetensors.
///
/// Episodes cycle through the built-in training scenarios (a live stream and a file over 60 ms
/// RTT with 1, 5, 10 % random loss and Gilbert-Elliott bursts), or through the sweep points of
/// --scenario. The result is a pure function of the arguments: the same seed gives the same file.
/// The network is for one reading of ART (--reading): `art-dqn` loads it under that reading.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup train-dqn --out art-dqn.safetensors
  recoup train-dqn --out w.safetensors --episodes 200 --seed 7 --gamma 1.01
  recoup train-dqn --out text.safetensors --reading text   # for art-dqn:reading=text
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
    /// ART §8's gamma. `code`: round n with R duplicates earns 1/(n R) if it recovers the data
    /// and -gamma n R if it is lost again (quic-art's); `text`: gamma^-(R-1) and 0.
    #[arg(long, value_name = "G")]
    pub gamma: Option<f64>,
    /// The reading of ART the network is for: `code` (quic-art's state, duplicates and reward)
    /// or `text` (recoup's own state and reward); `art-dqn:reading=` must match.
    #[arg(long, value_name = "READING", default_value_t = ArtReading::Code,
          value_parser = clap::builder::PossibleValuesParser::new(["code", "text"])
              .try_map(|s| s.parse::<ArtReading>()))]
    pub reading: ArtReading,
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
    cfg.reading = args.reading;
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
    let reading = match cfg.reading {
        ArtReading::Code => String::new(),
        ArtReading::Text => "reading=text,".to_owned(),
    };
    println!(
        "wrote {} ({} episodes, seed {}, gamma {}, reading {}): use art-dqn:{reading}weights={}",
        args.out.display(),
        args.episodes,
        args.seed,
        cfg.gamma,
        cfg.reading,
        args.out.display()
    );
    Ok(())
}
