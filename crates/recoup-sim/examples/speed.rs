//! Simulator speed per policy: simulated seconds per wall-clock second and per CPU second of
//! whole runs of the built-in default scenario (AutoRec testbed, 60 s simulated), one thread.
//! CPU time is this thread's own (`/proc/thread-self/schedstat`, nanoseconds), so time the
//! scheduler gives other processes on a shared machine does not count against the simulator.
//!
//! Run: `cargo run -p recoup-sim --release --example speed [-- SEEDS [POLICY...]]`
//! (default: 3 seeds, the scenario's five policies plus fixed:2, ladr-rrl and art-mab).

use std::time::Duration;

use recoup_sim::run::run_one;
use recoup_sim::scenario::{PolicyEntry, Scenario};

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
    let mut args = std::env::args().skip(1);
    let seeds: u64 = args.next().map_or(3, |s| s.parse().expect("SEEDS"));
    let names: Vec<String> = args.collect();
    let sc = Scenario::builtin_default();
    let policies: Vec<PolicyEntry> = if names.is_empty() {
        sc.policies
            .iter()
            .cloned()
            .chain(["fixed:2", "ladr-rrl", "art-mab"].map(entry))
            .collect()
    } else {
        names.iter().map(|n| entry(n)).collect()
    };
    let sim = sc.duration.as_secs_f64();
    println!(
        "default scenario, {sim} s simulated, seeds 1..={seeds}, one thread, release build; \
         x real time = simulated s / s"
    );
    println!("| policy | runs | packets sent | wall ms / run | x real time (wall) | CPU ms / run | x real time (CPU) |");
    println!("|---|---|---|---|---|---|---|");
    let (mut all_wall, mut all_cpu, mut all_runs) = (0.0, 0.0, 0u64);
    for p in &policies {
        let (mut wall, mut cpu, mut packets) = (0.0, 0.0, 0u64);
        for seed in 1..=seeds {
            let (w0, c0) = (wall_clock(), thread_cpu());
            let row = run_one(&sc, p, seed).expect("run");
            wall += w0.elapsed().as_secs_f64();
            cpu += match (c0, thread_cpu()) {
                (Some(a), Some(b)) => (b - a).as_secs_f64(),
                _ => f64::NAN,
            };
            packets += row.packets_sent;
        }
        let n = seeds as f64;
        println!(
            "| {} | {seeds} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            p.label,
            packets / seeds,
            wall / n * 1e3,
            sim * n / wall,
            cpu / n * 1e3,
            sim * n / cpu
        );
        all_wall += wall;
        all_cpu += cpu;
        all_runs += seeds;
    }
    let n = all_runs as f64;
    println!(
        "| all | {all_runs} | | {:.0} | {:.0} | {:.0} | {:.0} |",
        all_wall / n * 1e3,
        sim * n / all_wall,
        all_cpu / n * 1e3,
        sim * n / all_cpu
    );
}
