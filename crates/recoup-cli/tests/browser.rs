//! A real browser: headless Chromium plays 20 s of 4 Mbit/s live video
//! from `recoup serve --policy autorec` over HTTP/3, through `recoup link` on AutoRec's testbed
//! path (12 Mbit/s, 60 ms RTT, 5 % Bernoulli loss), in the page `web/player.html`
//! (`tests/interop/chromium_player.py` drives Chromium through the DevTools protocol).
//!
//! The page reads the stream with streaming fetch, checks every frame and plays it back with
//! recoup's player model. The test requires every frame intact, freezes bounded, HTTP/3 seen by
//! the browser (Resource Timing and its net log) and by the server (its log), and copies of
//! lost data in the server's qlog. It fails with Chromium's and the server's output, never
//! hangs, when Chromium is missing or the page never reports. The screenshot goes to
//! `$RECOUP_SCREENSHOT` if set (how `docs/img/chromium-player.png` was made), else to a
//! temporary directory.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{
    certificate, chromium_player, count_qlog, encode, link_command, run_peer_within, serve_tls,
    Proc, CLOSE_OVER_LOSS_TIMEOUT,
};

const FPS: u64 = 30;
const SECONDS: u64 = 20;
/// 20 s of video, Chromium's start and the page's start-up; generous for a loaded machine. The
/// page itself is given 30 s less, so that its own timeout reports first.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);
const PAGE_TIMEOUT_S: u64 = 90;
/// At most 2 freezes in 20 s (10 per 100 s, fifty times the simulator's 0.2 per 100 s for
/// autorec on this path): room for a shared 2-core machine stalling the processes.
const MAX_FREEZES: u64 = 2;

fn web_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")
}

fn number(summary: &serde_json::Value, key: &str) -> u64 {
    summary[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {summary}"))
}

#[test]
fn chromium_plays_a_live_stream_over_http3_through_a_lossy_link() {
    let work = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(work.path());
    let qlog = work.path().join("qlog");
    let (mut server, server_addr) = serve_tls(&web_root(), &cert, &key, "autorec", &qlog);
    let link_flags = [
        "--rtt",
        "60ms",
        "--rate",
        "12Mbps",
        "--loss",
        "bernoulli 5%",
    ];
    let (mut relay, link_addr) =
        Proc::server("recoup link", link_command(server_addr, &link_flags));

    let stream = format!("/live/browser?bitrate=4Mbps&fps={FPS}&gop=30&duration={SECONDS}s");
    let note = "recoup serve --policy autorec, through recoup link: 60 ms RTT, 12 Mbit/s, 5 % loss";
    let url = format!(
        "https://{link_addr}/player.html?stream={}&note={}",
        encode(&stream),
        encode(note)
    );
    let screenshot = std::env::var_os("RECOUP_SCREENSHOT")
        .map_or_else(|| work.path().join("chromium-player.png"), PathBuf::from);
    let player = chromium_player(&url, &cert, &screenshot, PAGE_TIMEOUT_S);
    let report = run_peer_within("chromium player", player, &mut server, BROWSER_TIMEOUT);
    let line = report.lines().nth(1).unwrap_or_default();
    let summary: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{report}\n{}", relay.output()));
    eprintln!(
        "chromium through recoup link: {summary}\nscreenshot: {}",
        screenshot.display()
    );

    assert_eq!(summary["ok"], true, "{report}");
    assert_eq!(summary["page_protocol"], "h3", "{report}");
    assert_eq!(summary["stream_protocol"], "h3", "{report}");
    assert_eq!(number(&summary, "frames"), FPS * SECONDS, "{report}");
    assert_eq!(number(&summary, "missing_frames"), 0, "{report}");
    assert_eq!(number(&summary, "bad_frames"), 0, "{report}");
    assert!(
        number(&summary, "freezes") <= MAX_FREEZES,
        "more than {MAX_FREEZES} freezes: {report}"
    );
    assert_eq!(summary["model_check"]["agrees"], true, "{report}");
    assert!(
        screenshot.is_file(),
        "no screenshot at {}",
        screenshot.display()
    );

    assert!(
        server.wait_for_log("HTTP/3 live stream finished", Duration::from_secs(10)),
        "the server did not log an HTTP/3 live stream\n{}",
        server.output()
    );
    // Chromium's close, or the idle timeout when the link lost it: either way the end is seen.
    assert!(
        server.wait_for_log("connection closed", CLOSE_OVER_LOSS_TIMEOUT),
        "the browser's close was not seen, nor the idle timeout\n{}",
        server.output()
    );
    let log = server.output();
    let end = log.lines().find(|l| l.contains("connection closed"));
    eprintln!("server: {}", end.unwrap_or_default());
    let count = count_qlog(&qlog);
    eprintln!("server qlog: {count:?}");
    assert!(count.retransmissions > 50, "{count:?}");
    assert!(count.copies > 0, "autorec sent no copies: {count:?}");
}
