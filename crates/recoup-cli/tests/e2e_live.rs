//! The end-to-end test of the real deployment path: `recoup serve` streams 20 s of 4 Mbit/s live
//! video through `recoup link` (12 Mbit/s, 60 ms RTT, 5 % Bernoulli loss: AutoRec's testbed path)
//! to the unmodified aioquic player (`tests/interop/live_player.py`), once with `--policy arq` and
//! once with `--policy autorec` (both at once, each with its own server and link). Every frame must
//! arrive intact; the server's qlog must show copies of lost data under autorec and none under arq;
//! and `recoup analyze` on the two server qlogs must report the recovery metrics, with autorec's
//! recovery latency for data whose first retransmission was lost below arq's.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{
    count_qlog, link_command, live_player, recoup, run_peer_within, serve_live, Proc, QlogCount,
    CLOSE_OVER_LOSS_TIMEOUT,
};

const FRAMES: u64 = 600;
/// 20 s of video, the start-up over a lossy 60 ms path, the close; generous for a loaded machine.
const PLAYER_TIMEOUT: Duration = Duration::from_secs(60);

fn link(upstream: SocketAddr) -> (Proc, SocketAddr) {
    let mut cmd = link_command(
        upstream,
        &[
            "--rtt",
            "60ms",
            "--rate",
            "12Mbps",
            "--loss",
            "bernoulli 5%",
        ],
    );
    cmd.env("RUST_LOG", "info");
    Proc::server("recoup link", cmd)
}

/// Streams through the link into `work` and returns the server's qlog counts and trace.
fn stream_through_link(policy: &str, work: &Path) -> (QlogCount, PathBuf) {
    let qlog = work.join("qlog");
    let (mut server, server_addr) = serve_live(policy, &qlog);
    let (mut relay, link_addr) = link(server_addr);
    let player = live_player(&format!(
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
    // The qlog is complete once the server has seen the connection end: the player's close, or
    // the idle timeout when the 5 % loss link lost it.
    assert!(
        server.wait_for_log("connection closed", CLOSE_OVER_LOSS_TIMEOUT),
        "neither the player's close nor the idle timeout was seen\n{}\n{}",
        server.output(),
        relay.output()
    );
    let log = server.output();
    let end = log.lines().find(|l| l.contains("connection closed"));
    eprintln!("--policy {policy}: {}", end.unwrap_or_default());
    let count = count_qlog(&qlog);
    eprintln!("--policy {policy} through recoup link: player {summary}\nserver qlog: {count:?}");
    assert_eq!(count.traces, 1, "{count:?}");
    // 5 % loss on 20 s of 4 Mbit/s: hundreds of lost packets, all recovered.
    assert!(count.retransmissions > 50, "{count:?}");
    let trace = std::fs::read_dir(&qlog)
        .expect("qlog dir")
        .map(|e| e.expect("dir entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "sqlog"))
        .expect("one trace");
    (count, trace)
}

/// `recoup analyze` on `traces`; returns its rows (analyze.json), in the order given.
fn analyze(traces: &[&Path], out: &Path) -> Vec<serde_json::Value> {
    let output = Command::new(recoup())
        .arg("analyze")
        .args(traces)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run recoup analyze");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "recoup analyze failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{stdout}");
    let json = std::fs::read(out.join("analyze.json")).expect("analyze.json");
    serde_json::from_slice::<Vec<serde_json::Value>>(&json).expect("analyze.json is a list")
}

fn number(row: &serde_json::Value, column: &str) -> f64 {
    row[column]
        .as_f64()
        .unwrap_or_else(|| panic!("analyze gave no {column}: {row}"))
}

#[test]
fn live_through_lossy_link_autorec_recovers_faster_than_arq() {
    let work = tempfile::tempdir().expect("tempdir");
    let (arq_dir, autorec_dir) = (work.path().join("arq"), work.path().join("autorec"));
    let ((arq, arq_trace), (autorec, autorec_trace)) = std::thread::scope(|s| {
        let arq = s.spawn(|| stream_through_link("arq", &arq_dir));
        let autorec = s.spawn(|| stream_through_link("autorec", &autorec_dir));
        (
            arq.join().expect("arq stream"),
            autorec.join().expect("autorec stream"),
        )
    });
    assert_eq!(arq.copies, 0, "arq sent copies: {arq:?}");
    assert!(autorec.copies > 0, "autorec sent no copies: {autorec:?}");

    let rows = analyze(&[&arq_trace, &autorec_trace], &work.path().join("analyze"));
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, count) in rows.iter().zip([&arq, &autorec]) {
        assert_eq!(row["vantage"], "server", "{row}");
        assert!(number(row, "lost_ranges") > 50.0, "{row}");
        assert!(
            number(row, "t_unit_ms") >= 60.0,
            "T_unit is at least one RTT: {row}"
        );
        assert_eq!(number(row, "copies_sent"), count.copies as f64, "{row}");
    }
    let (arq_multi, autorec_multi) = (
        number(&rows[0], "recovery_latency_multi_ms"),
        number(&rows[1], "recovery_latency_multi_ms"),
    );
    assert!(
        autorec_multi < arq_multi,
        "recovery latency of data whose first retransmission was lost: autorec {autorec_multi} ms, arq {arq_multi} ms"
    );
}

/// `crest` on real sockets through `recoup link`: every frame intact (checked
/// in `stream_through_link`), copies in the server's qlog, and `recoup analyze` counting the
/// same copies.
#[test]
fn live_through_lossy_link_crest_is_byte_exact_with_copies() {
    let work = tempfile::tempdir().expect("tempdir");
    let (crest, trace) = stream_through_link("crest", &work.path().join("crest"));
    assert!(crest.copies > 0, "crest sent no copies: {crest:?}");
    let rows = analyze(&[&trace], &work.path().join("analyze"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(number(&rows[0], "copies_sent"), crest.copies as f64);
}
