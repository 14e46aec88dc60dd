//! Simulator speed per policy: simulated seconds per wall-clock second and per CPU second, and
//! packets the sender sent per CPU second, of whole runs, one thread. CPU time is this thread's
//! own (`/proc/thread-self/schedstat`, nanoseconds), so time the scheduler gives other
//! processes on a shared machine does not count against the simulator.
//!
//! Run: `cargo run -p recoup-sim --release --example speed [-- OPTIONS] [SEEDS [POLICY...]]`
//! (default: 3 seeds of the built-in default scenario, its five policies plus fixed:2, ladr-rrl
//! and art-mab). Options:
//! - `--scenario FILE`: a scenario file (its first scenario; its policies by default);
//! - `--duration SECS`: simulated duration instead of the scenario's;
//! - `--flows N`: N flows share the path (`run_flows`); a constant-rate link is made N times
//!   faster so that every flow has the share one flow has alone.

use std::time::Duration;

use recoup_elements::ServiceSpec;
use recoup_sim::run::run_flows;
use recoup_sim::scenario::{load, PolicyEntry, Scenario};

#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall-clock time"
)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// CPU time this thread has run, or `None` where the kernel does not say (non-Linux).
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn entry(name: &str) -> Result<PolicyEntry, String> {
    Ok(PolicyEntry {
        label: name.to_owned(),
        name: name.to_owned(),
        params: String::new(),
        spec: name.parse().map_err(|e| format!("policy {name}: {e}"))?,
        oracle: false,
    })
}

const USAGE: &str =
    "usage: speed [--scenario FILE] [--duration SECS] [--flows N] [SEEDS [POLICY...]]";

/// What the command line asks for.
struct Options {
    scenario: Option<Scenario>,
    duration: Option<Duration>,
    flows: usize,
    seeds: u64,
    names: Vec<String>,
}

fn parse(mut args: std::iter::Peekable<impl Iterator<Item = String>>) -> Result<Options, String> {
    let mut o = Options {
        scenario: None,
        duration: None,
        flows: 1,
        seeds: 3,
        names: Vec::new(),
    };
    while let Some(opt) = args.next_if(|a| a.starts_with("--")) {
        if opt == "--help" {
            return Err(String::new());
        }
        let value = args.next().ok_or_else(|| format!("{opt} needs a value"))?;
        match opt.as_str() {
            "--scenario" => {
                let mut all = load(value.as_ref()).map_err(|e| format!("{value}: {e}"))?;
                o.scenario = Some(all.remove(0));
            }
            "--duration" => {
                let secs: f64 = value
                    .parse()
                    .map_err(|_| format!("--duration {value}: seconds expected"))?;
                o.duration = Some(
                    Duration::try_from_secs_f64(secs)
                        .map_err(|_| format!("--duration {value}: seconds expected"))?,
                );
            }
            "--flows" => {
                o.flows = value
                    .parse()
                    .map_err(|_| format!("--flows {value}: a whole number expected"))?;
            }
            _ => return Err(format!("unknown option {opt}")),
        }
    }
    if let Some(s) = args.next() {
        o.seeds = s
            .parse()
            .map_err(|_| format!("SEEDS {s}: a whole number expected"))?;
    }
    o.names = args.collect();
    Ok(o)
}

fn main() {
    let o = match parse(std::env::args().skip(1).peekable()) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("speed: {e}");
            }
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    let Options {
        scenario,
        duration,
        flows,
        seeds,
        names,
    } = o;
    let builtin = scenario.is_none();
    let mut sc = scenario.unwrap_or_else(Scenario::builtin_default);
    if let Some(d) = duration {
        sc.duration = d;
    }
    for dir in [&mut sc.down, &mut sc.up] {
        if let ServiceSpec::Rate(r) = &mut dir.service {
            *r *= flows as u64;
        }
    }
    let policies: Result<Vec<PolicyEntry>, String> = if !names.is_empty() {
        names.iter().map(|n| entry(n)).collect()
    } else if builtin {
        let extra: Result<Vec<PolicyEntry>, String> = ["fixed:2", "ladr-rrl", "art-mab"]
            .into_iter()
            .map(entry)
            .collect();
        extra.map(|e| sc.policies.iter().cloned().chain(e).collect())
    } else {
        Ok(sc.policies.clone())
    };
    let policies = policies.unwrap_or_else(|e| {
        eprintln!("speed: {e}");
        std::process::exit(2);
    });
    let sim = sc.duration.as_secs_f64();
    println!(
        "scenario {}, {sim} s simulated, {flows} flow(s), seeds 1..={seeds}, one thread; \
         x real time = simulated s / s; packets = sent by the senders",
        sc.name
    );
    println!(
        "| policy | runs | packets sent | wall ms / run | x real time (wall) | CPU ms / run | \
         x real time (CPU) | packets / CPU s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let (mut all_wall, mut all_cpu, mut all_runs, mut all_packets) = (0.0, 0.0, 0u64, 0u64);
    for p in &policies {
        let (mut wall, mut cpu, mut packets) = (0.0, 0.0, 0u64);
        for seed in 1..=seeds {
            let (w0, c0) = (wall_clock(), thread_cpu());
            let rows = run_flows(&sc, p, seed, flows).unwrap_or_else(|e| {
                eprintln!("speed: {} seed {seed}: {e}", p.label);
                std::process::exit(1);
            });
            wall += w0.elapsed().as_secs_f64();
            cpu += match (c0, thread_cpu()) {
                (Some(a), Some(b)) => (b - a).as_secs_f64(),
                _ => f64::NAN,
            };
            packets += rows.iter().map(|r| r.packets_sent).sum::<u64>();
        }
        let n = seeds as f64;
        println!(
            "| {} | {seeds} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            p.label,
            packets / seeds,
            wall / n * 1e3,
            sim * n / wall,
            cpu / n * 1e3,
            sim * n / cpu,
            packets as f64 / cpu
        );
        all_wall += wall;
        all_cpu += cpu;
        all_runs += seeds;
        all_packets += packets;
    }
    let n = all_runs as f64;
    println!(
        "| all | {all_runs} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        all_packets / all_runs,
        all_wall / n * 1e3,
        sim * n / all_wall,
        all_cpu / n * 1e3,
        sim * n / all_cpu,
        all_packets as f64 / all_cpu
    );
}
