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

fn entry(name: &str) -> PolicyEntry {
    PolicyEntry {
        label: name.to_owned(),
        name: name.to_owned(),
        params: String::new(),
        spec: name.parse().expect("policy"),
        oracle: false,
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let mut scenario: Option<Scenario> = None;
    let mut duration = None;
    let mut flows = 1usize;
    while let Some(opt) = args.next_if(|a| a.starts_with("--")) {
        let value = args.next().unwrap_or_else(|| panic!("{opt} needs a value"));
        match opt.as_str() {
            "--scenario" => {
                let mut all = load(value.as_ref()).unwrap_or_else(|e| panic!("{value}: {e}"));
                scenario = Some(all.remove(0));
            }
            "--duration" => duration = Some(Duration::from_secs_f64(value.parse().expect("SECS"))),
            "--flows" => flows = value.parse().expect("N"),
            _ => panic!("unknown option {opt}"),
        }
    }
    let seeds: u64 = args.next().map_or(3, |s| s.parse().expect("SEEDS"));
    let names: Vec<String> = args.collect();
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
    let policies: Vec<PolicyEntry> = if !names.is_empty() {
        names.iter().map(|n| entry(n)).collect()
    } else if builtin {
        sc.policies
            .iter()
            .cloned()
            .chain(["fixed:2", "ladr-rrl", "art-mab"].map(entry))
            .collect()
    } else {
        sc.policies.clone()
    };
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
            let rows = run_flows(&sc, p, seed, flows).expect("run");
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
