//! The shipped Mahimahi traces: every file loads, its mean rate matches the folder's README, and
//! a saturated link delivers exactly one 1504-byte packet per opportunity.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use recoup_elements::{Link, Node, QueueSpec, Service, Trace, IPV4_UDP_OVERHEAD, MM_PACKET_SIZE};
use recoup_sim::{CbrSource, Simulator, Sink};
use recoup_time::Instant;

/// `../shared/traces/mahimahi/` relative to the repository root. `RECOUP_TRACES_DIR` overrides
/// it (for git worktrees that do not sit next to `shared/`).
fn traces_dir() -> PathBuf {
    let dir = std::env::var_os("RECOUP_TRACES_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/mahimahi"),
        PathBuf::from,
    );
    assert!(
        dir.join("README.md").is_file(),
        "Mahimahi traces not found at {} (expected ../shared/traces/mahimahi/ next to the \
         repository, or set RECOUP_TRACES_DIR)",
        dir.display()
    );
    dir
}

/// The README's "mean" column, per file: rows like
/// `| ATT-LTE-driving.down / .up | 786 / 1012 | 5.17 / 0.83 | ... |`.
fn readme_means(readme: &str) -> BTreeMap<String, f64> {
    let mut means = BTreeMap::new();
    for line in readme.lines().filter(|l| l.starts_with('|')) {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(names), Some(values)) = (cols.get(1), cols.get(3)) else {
            continue;
        };
        if !names.contains(".down") && !names.contains(".up") {
            continue;
        }
        let names: Vec<&str> = names.split(" / ").collect();
        let values: Vec<&str> = values.split(" / ").collect();
        assert_eq!(names.len(), values.len(), "README row: {line}");
        let stem = names[0].rsplit_once('.').map_or(names[0], |(s, _)| s);
        for (n, v) in names.iter().zip(values) {
            let file = if n.starts_with('.') {
                format!("{stem}{n}")
            } else {
                (*n).to_owned()
            };
            let mbps: f64 = v
                .parse()
                .unwrap_or_else(|_| panic!("README mean `{v}` in {line}"));
            means.insert(file, mbps);
        }
    }
    means
}

#[test]
fn every_trace_loads_and_matches_readme_mean_rate() {
    let dir = traces_dir();
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README");
    let means = readme_means(&readme);
    assert!(means.len() >= 13, "README table parsed to {means:?}");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("traces dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if name == "README.md" {
            continue;
        }
        let trace = Trace::load(&path).unwrap_or_else(|e| panic!("{e}"));
        // Mean over the file: opportunities x 1504 bytes / last timestamp. (The README's
        // figures equal this with 1500 bytes per line; both readings agree within 0.3 %.)
        let got = trace.mean_rate_bps() / 1e6;
        let want = *means
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not in the README table"));
        let err = (got - want).abs() / want;
        assert!(
            err <= 0.01,
            "{name}: mean {got:.3} Mbit/s, README {want} ({:.2} % off)",
            err * 100.0
        );
        checked += 1;
    }
    assert_eq!(checked, means.len(), "README lists traces that are missing");
}

#[test]
fn saturated_trace_link_uses_every_opportunity() {
    let trace = Arc::new(Trace::load(&traces_dir().join("TMobile-LTE-short.down")).expect("load"));
    let a: SocketAddr = "10.0.0.1:1".parse().expect("addr");
    let b: SocketAddr = "10.0.0.2:2".parse().expect("addr");
    let end = Instant::from_nanos(3_000_000_000);
    let mut sim = Simulator::new();
    // 1504-byte IP packets every 50 us (240 Mbit/s) keep the queue from ever draining.
    let src = sim.add_node(
        "src",
        Box::new(CbrSource::new(
            a,
            b,
            MM_PACKET_SIZE - IPV4_UDP_OVERHEAD,
            Duration::from_micros(50),
            Instant::ZERO,
            end,
        )),
    );
    let sink = sim.add_node("sink", Box::new(Sink::new()));
    let link: Box<dyn Node> = Box::new(Link::new(
        Service::Trace(trace.clone()),
        QueueSpec::Infinite,
    ));
    sim.add_path(src, b, vec![("link".into(), link)], sink);
    sim.run_until(end);
    let _ = sink;
    // Opportunities in (0, 3000 ms]: the one at 0 ms comes before any packet can use it.
    let expected = trace
        .opportunities_ms()
        .iter()
        .filter(|&&t| t > 0 && t <= 3000)
        .count() as u64;
    let stats = sim.stats();
    let delivered = stats
        .iter()
        .find(|s| s.0 == "link")
        .map(|s| s.1.forwarded)
        .expect("link");
    assert_eq!(delivered, expected);
}
