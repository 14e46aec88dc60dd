//! The end-to-end test of issue 7: `recoup serve` streams 20 s of 4 Mbit/s live video through
//! `recoup link` (12 Mbit/s, 60 ms RTT, 5 % Bernoulli loss: AutoRec's testbed path) to the
//! unmodified aioquic player (`tests/interop/live_player.py`), once with `--policy arq` and once
//! with `--policy autorec`. Every frame must arrive intact, and the server's qlog must show
//! copies of lost data under autorec and none under arq.
//!
//! `recoup link` is assumed to print `listening on ADDR` as its first stdout line, as
//! `recoup serve` does.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{count_qlog, interop_dir, python, recoup, run_peer_within, Proc, QlogCount};

const FRAMES: u64 = 600;
/// 20 s of video, the start-up over a lossy 60 ms path, the close; generous for a loaded machine.
const PLAYER_TIMEOUT: Duration = Duration::from_secs(60);

fn serve(policy: &str, qlog: &Path) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--cc",
        "bbr",
        "--policy",
        policy,
    ])
    .arg("--qlog-dir")
    .arg(qlog)
    .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

fn link(upstream: SocketAddr) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["link", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.to_string())
        .args([
            "--rtt",
            "60ms",
            "--rate",
            "12Mbps",
            "--loss",
            "bernoulli 5%",
        ])
        .env("RUST_LOG", "info");
    Proc::server("recoup link", cmd)
}

/// Streams through the link and returns the player's summary and the server's qlog counts.
fn stream_through_link(policy: &str) -> (serde_json::Value, QlogCount) {
    let work = tempfile::tempdir().expect("tempdir");
    let qlog = work.path().join("qlog");
    let (mut server, server_addr) = serve(policy, &qlog);
    let (mut relay, link_addr) = link(server_addr);
    let mut player = Command::new(python());
    player
        .arg(interop_dir().join("live_player.py"))
        .arg("--insecure")
        .arg("--url")
        .arg(format!(
            "https://{link_addr}/live/e2e?bitrate=4Mbps&fps=30&gop=30&duration=20s"
        ));
    let report = run_peer_within("live player", player, &mut server, PLAYER_TIMEOUT);
    let line = report.lines().nth(1).unwrap_or_default();
    let summary: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{report}\n{}", relay.output()));
    assert_eq!(summary["ok"], true, "{report}");
    assert_eq!(summary["frames"], FRAMES, "{report}");
    assert_eq!(summary["bad_frames"], 0, "{report}");
    assert_eq!(summary["missing_frames"], 0, "{report}");
    // The qlog is complete once the server has seen the player's close.
    assert!(
        server.wait_for_log("connection closed", Duration::from_secs(10)),
        "the player's close was not seen\n{}\n{}",
        server.output(),
        relay.output()
    );
    let count = count_qlog(&qlog);
    eprintln!("--policy {policy} through recoup link: player {summary}\nserver qlog: {count:?}");
    assert_eq!(count.traces, 1, "{count:?}");
    // 5 % loss on 20 s of 4 Mbit/s: hundreds of lost packets, all recovered.
    assert!(count.retransmissions > 50, "{count:?}");
    (summary, count)
}

#[test]
fn live_through_lossy_link_arq_sends_no_copies() {
    let (_, count) = stream_through_link("arq");
    assert_eq!(count.copies, 0, "arq sent copies: {count:?}");
}

#[test]
fn live_through_lossy_link_autorec_sends_copies() {
    let (_, count) = stream_through_link("autorec");
    assert!(count.copies > 0, "autorec sent no copies: {count:?}");
}
