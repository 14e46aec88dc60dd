//! Live streams from `recoup serve` to the unmodified aioquic client over loopback:
//! `tests/interop/live_player.py` plays 5 s of a 4 Mbit/s stream, checks every frame and
//! measures freezes, once with `--policy arq` and once with `--policy autorec`; the server
//! writes its qlog. A bad query is answered with an error the player shows, and logged.

mod common;

use std::time::Duration;

use common::{count_qlog, live_player, run_peer_within, serve_live};

/// The stream and how long the player may take for it (start-up, 5 s of video, the close).
const STREAM: &str = "bitrate=4Mbps&fps=30&gop=30&duration=5s";
const FRAMES: u64 = 150;
const PLAYER_TIMEOUT: Duration = Duration::from_secs(20);

/// The player's JSON summary (the first line of its stdout in `report`).
fn summary(report: &str) -> serde_json::Value {
    let line = report.lines().nth(1).unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{report}"))
}

fn live_stream(policy: &str) {
    let work = tempfile::tempdir().expect("tempdir");
    let qlog = work.path().join("qlog");
    let (mut server, addr) = serve_live(policy, &qlog);
    let url = format!("https://{addr}/live/test?{STREAM}");
    let report = run_peer_within(
        "live player",
        live_player(&url),
        &mut server,
        PLAYER_TIMEOUT,
    );
    let s = summary(&report);
    eprintln!("recoup serve --policy {policy} -> live_player.py: {s}");
    assert_eq!(s["ok"], true, "{report}");
    assert_eq!(s["frames"], FRAMES, "{report}");
    assert_eq!(s["bad_frames"], 0, "{report}");
    assert_eq!(s["missing_frames"], 0, "{report}");
    // 5 s at 4 Mbit/s is 2.5 MB, give or take the size noise of the last GOP.
    let bytes = s["bytes"].as_u64().expect("bytes");
    assert!(
        (2_300_000..=2_700_000).contains(&bytes),
        "{bytes} bytes:\n{report}"
    );
    // The frames came on the frame clock, not all at once: the session lasts the stream.
    let duration = s["duration"].as_f64().expect("duration");
    assert!(duration >= 4.9, "session {duration} s:\n{report}");
    assert!(
        server.wait_for_log("live stream finished", Duration::from_secs(5)),
        "no end of stream logged\n{}",
        server.output()
    );
    assert!(
        server.wait_for_log("connection closed", Duration::from_secs(5)),
        "the player's close was not seen\n{}",
        server.output()
    );
    let count = count_qlog(&qlog);
    eprintln!("server qlog: {count:?}");
    assert_eq!(count.traces, 1, "{count:?}");
    assert!(count.packets_sent > 1000, "{count:?}");
}

#[test]
fn live_stream_to_aioquic_player_arq() {
    live_stream("arq");
}

#[test]
fn live_stream_to_aioquic_player_autorec() {
    live_stream("autorec");
}

#[test]
fn bad_live_query_is_answered_with_an_error_and_logged() {
    let work = tempfile::tempdir().expect("tempdir");
    let (mut server, addr) = serve_live("arq", &work.path().join("qlog"));
    let url = format!("https://{addr}/live/test?bitrate=fast&duration=1s");
    let out = live_player(&url).output().expect("run the player");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the player accepted it: {stderr}");
    assert!(
        stderr.contains("server refused: error: bad request: bitrate=\"fast\""),
        "{stderr}"
    );
    assert!(
        server.wait_for_log("live request refused", Duration::from_secs(5)),
        "{}",
        server.output()
    );
    // The server keeps serving.
    let url = format!("https://{addr}/live/again?duration=1s&bitrate=1Mbps");
    let report = run_peer_within(
        "live player",
        live_player(&url),
        &mut server,
        PLAYER_TIMEOUT,
    );
    assert_eq!(summary(&report)["frames"], 30, "{report}");
}
