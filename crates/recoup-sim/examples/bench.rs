//! Simulator throughput benchmark (not a test). Run:
//! `cargo run -p recoup-sim --release --example bench`
//!
//! Measures node calls (element events) per second and the cost of a packet crossing a
//! loss → droptail queue + link → delay chain, net of the source and sink (measured alone).

use std::net::SocketAddr;
use std::time::Duration;

use recoup_elements::PathSpec;
use recoup_sim::{CbrSource, Simulator, Sink};
use recoup_time::Instant;

struct Result {
    packets: u64,
    calls: u64,
    wall: Duration,
}

#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall-clock time"
)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

fn run(path: &str, packets: u64) -> Result {
    let a: SocketAddr = "10.0.0.1:1000".parse().expect("addr");
    let b: SocketAddr = "10.0.0.2:2000".parse().expect("addr");
    let spec: PathSpec = path.parse().expect("spec");
    let interval = Duration::from_micros(1);
    let end = Instant::ZERO + interval * u32::try_from(packets).expect("fits");
    let mut sim = Simulator::new();
    let src = sim.add_node(
        "src",
        Box::new(CbrSource::new(a, b, 1200, interval, Instant::ZERO, end)),
    );
    let sink = sim.add_node("sink", Box::new(Sink::new()));
    sim.add_path(
        src,
        b,
        spec.build(1, "bench", None, 0).expect("build"),
        sink,
    );
    let start = wall_clock();
    sim.run_until(end + Duration::from_secs(1));
    let wall = start.elapsed();
    let packets = sim
        .downcast::<Sink>(sink)
        .map_or(0, |s| s.arrivals().len() as u64);
    Result {
        packets,
        calls: sim.calls(),
        wall,
    }
}

fn main() {
    let n = 2_000_000;
    let base = run("", n);
    // 1228-byte IP packets every 1 us (9.8 Gbit/s) into 10 Gbit/s: the queue is exercised.
    let chain = run(
        "bernoulli 1% | droptail packets=1000 | rate 10Gbps | delay 20ms",
        n,
    );
    let ns = |r: &Result| r.wall.as_nanos() as f64;
    println!(
        "baseline src->sink: {} packets, {} calls, {:.1} ms, {:.0} ns/packet, {:.2} M calls/s",
        base.packets,
        base.calls,
        ns(&base) / 1e6,
        ns(&base) / base.packets as f64,
        base.calls as f64 / ns(&base) * 1e3
    );
    println!(
        "chain loss|queue+link|delay: {} packets, {} calls, {:.1} ms, {:.0} ns/packet, {:.2} M calls/s",
        chain.packets,
        chain.calls,
        ns(&chain) / 1e6,
        ns(&chain) / chain.packets as f64,
        chain.calls as f64 / ns(&chain) * 1e3
    );
    // Per packet sent, net of source and sink; 4 elements (loss, queue, link, delay), of which
    // queue and link are one node.
    let net = (ns(&chain) - ns(&base)) / n as f64;
    println!(
        "net chain cost: {net:.0} ns/packet = {:.0} ns per packet per element (4 elements) = {:.0} ns per node (3 nodes)",
        net / 4.0,
        net / 3.0
    );
}
