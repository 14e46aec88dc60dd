//! A real DASH player: dash.js in headless Chromium plays 40 s of video
//! on demand from `recoup serve` over HTTP/3, through `recoup link` on ART Fig. 25's path (the
//! Verizon LTE trace both ways, 30 ms RTT, 10 % loss on the data direction), once with the
//! server's policy `arq` and once with `art`, and reports dash.js's own metrics: segments loaded,
//! mean bitrate, rendered switches, stalls and stall time.
//!
//! The site (media encoded by Debian's ffmpeg, dash.js from npm, the page web/dash/) comes from
//! `scripts/dash-site.sh`; `tests/interop/chromium_player.py` drives Chromium. The second test
//! breaks the presentation (no manifest, a malformed one, a missing segment) and requires the
//! page to report each failure, naming it, well before its own timeout.
//!
//! The screenshot of the art run goes to `$RECOUP_SCREENSHOT` if set (how
//! `docs/img/dash-player.png` was made).

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{
    certificate, chromium_player, count_qlog, encode, link_command, now, run_peer_status_within,
    serve_tls, Proc,
};

const SECONDS: u64 = 40;
const SEGMENT_S: u64 = 4;
/// Bits per second of the site's lowest and highest rung (scripts/dash-site.sh).
const LADDER: (f64, f64) = (128.503, 2409.742);
/// The page's own bound on playback: 40 s of media, start-up and stalls on a loaded machine.
const PAGE_TIMEOUT_S: u64 = 120;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(PAGE_TIMEOUT_S + 40);
/// A broken presentation must be reported within this long: dash.js's retries (3 per request,
/// 1 s apart, for the manifest and the segment) and Chromium's start, with room for a loaded
/// machine; far below the page's timeout, so a hang cannot pass.
const FAILURE_WITHIN: Duration = Duration::from_secs(45);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn traces() -> PathBuf {
    repo().join("../shared/traces/mahimahi")
}

/// The DASH site in `dir`, made by the project's script.
fn dash_site(dir: &Path) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/dash-site.sh"))
        .arg(dir)
        .args(["--seconds", &SECONDS.to_string()])
        .output()
        .expect("bash scripts/dash-site.sh");
    assert!(
        out.status.success(),
        "scripts/dash-site.sh failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// chromium_player.py on `page` at `origin`; its exit status and its JSON summary line.
fn play(
    origin: SocketAddr,
    page: &str,
    cert: &Path,
    screenshot: &Path,
    server: &mut Proc,
    timeout: Duration,
) -> (bool, serde_json::Value, String) {
    let url = format!("https://{origin}/index.html?{page}");
    let player = chromium_player(&url, cert, screenshot, PAGE_TIMEOUT_S);
    let (status, report) = run_peer_status_within("chromium player", player, server, timeout);
    let status =
        status.unwrap_or_else(|| panic!("the player did not finish within {timeout:?}:\n{report}"));
    let line = report.lines().nth(1).unwrap_or_default();
    let summary: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{report}"));
    (status.success(), summary, report)
}

fn number(summary: &serde_json::Value, key: &str) -> f64 {
    summary[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {summary}"))
}

#[test]
fn dash_js_plays_video_on_demand_over_http3_through_an_lte_link_with_arq_and_art() {
    let work = tempfile::tempdir().expect("tempdir");
    let site = work.path().join("site");
    dash_site(&site);
    let (cert, key) = certificate(work.path());
    let mut table = Vec::new();
    for policy in ["arq", "art"] {
        let qlog = work.path().join(format!("qlog-{policy}"));
        let (mut server, server_addr) = serve_tls(&site, &cert, &key, policy, &qlog);
        let down = traces().join("Verizon-LTE-short.down");
        let up = traces().join("Verizon-LTE-short.up");
        let link_flags = [
            "--rtt",
            "30ms",
            "--queue",
            "droptail packets=200",
            "--down-trace",
            down.to_str().expect("utf-8 path"),
            "--up-trace",
            up.to_str().expect("utf-8 path"),
            "--down-loss",
            "bernoulli 10%",
        ];
        let (mut relay, link_addr) =
            Proc::server("recoup link", link_command(server_addr, &link_flags));
        let note = format!(
            "recoup serve --policy {policy} --cc bbr, through recoup link: Verizon LTE trace, \
             30 ms RTT, 10 % loss server to client"
        );
        let screenshot = match std::env::var_os("RECOUP_SCREENSHOT") {
            Some(path) if policy == "art" => PathBuf::from(path),
            _ => work.path().join(format!("dash-{policy}.png")),
        };
        let page = format!("mpd=media/manifest.mpd&note={}", encode(&note));
        let (ok, summary, report) = play(
            link_addr,
            &page,
            &cert,
            &screenshot,
            &mut server,
            BROWSER_TIMEOUT,
        );
        // A sender with data waiting always has a packet in flight or a timer armed; the
        // server logs the state of one that does not (a run once went silent for 29 s).
        let stalls = server.stderr_lines("sender stalled");
        assert!(stalls.is_empty(), "{policy}: {stalls:?}\n{report}");
        assert!(ok, "{policy}: {report}\n{}", relay.output());
        assert_eq!(summary["ok"], true, "{policy}: {report}");
        assert_eq!(summary["page_protocol"], "h3", "{policy}: {report}");
        assert_eq!(summary["stream_protocol"], "h3", "{policy}: {report}");
        let segments = SECONDS / SEGMENT_S;
        assert_eq!(
            number(&summary, "segments_expected"),
            segments as f64,
            "{report}"
        );
        assert_eq!(number(&summary, "segments"), segments as f64, "{report}");
        let played = number(&summary, "played_s");
        assert!(
            (played - SECONDS as f64).abs() < 0.5,
            "{policy}: played {played} s of {SECONDS}: {report}"
        );
        let kbps = number(&summary, "bitrate_kbps");
        assert!(
            (LADDER.0 - 0.1..=LADDER.1 + 0.1).contains(&kbps),
            "{policy}: mean bitrate {kbps} kbit/s outside the ladder: {report}"
        );
        // One duration per stall, summing to the total; a stall may last under a millisecond,
        // so only time stalled without a stall is inconsistent.
        let (stalls, stall_ms) = (number(&summary, "stalls"), number(&summary, "stall_ms"));
        let each: Vec<f64> = summary["stall_each_ms"]
            .as_array()
            .unwrap_or_else(|| panic!("no stall_each_ms in {summary}"))
            .iter()
            .map(|d| d.as_f64().expect("a stall's duration is a number"))
            .collect();
        assert_eq!(each.len() as f64, stalls, "{policy}: {report}");
        assert!(
            each.iter().all(|&d| d >= 0.0)
                && (each.iter().sum::<f64>() - stall_ms).abs() <= 0.5 + 0.05 * stalls,
            "{policy}: stall durations {each:?} do not sum to {stall_ms} ms: {report}"
        );
        assert!(stall_ms == 0.0 || stalls > 0.0, "{policy}: {report}");
        assert!(
            screenshot.is_file(),
            "no screenshot at {}",
            screenshot.display()
        );

        // The policy was in force: ART sends copies of lost data, arq none.
        drop(relay);
        drop(server);
        let count = count_qlog(&qlog);
        assert!(count.retransmissions > 0, "{policy}: {count:?}");
        if policy == "art" {
            assert!(count.copies > 0, "art sent no copies: {count:?}");
        } else {
            assert_eq!(count.copies, 0, "arq sent copies: {count:?}");
        }
        table.push(format!(
            "{policy:>4}: {kbps:7.1} kbit/s, {} switches, {stalls} stalls, {stall_ms} ms stalled, \
             start-up {} ms, {} loads, {} retransmissions, {} copies",
            summary["bitrate_switches"],
            summary["startup_ms"],
            summary["segment_loads"],
            count.retransmissions,
            count.copies
        ));
    }
    eprintln!(
        "dash.js through recoup link (one run each):\n{}",
        table.join("\n")
    );
}

#[test]
fn dash_js_failures_are_reported_not_waited_on() {
    let work = tempfile::tempdir().expect("tempdir");
    let site = work.path().join("site");
    dash_site(&site);
    // A malformed manifest, and a presentation missing its third segment at every bitrate.
    std::fs::write(site.join("media/bad.mpd"), "<MPD this is not XML").expect("write");
    let broken = site.join("broken");
    std::fs::create_dir(&broken).expect("mkdir");
    for entry in std::fs::read_dir(site.join("media")).expect("media") {
        let entry = entry.expect("entry");
        let name = entry.file_name().into_string().expect("utf-8 name");
        if !name.ends_with("-00003.m4s") {
            std::fs::copy(entry.path(), broken.join(&name)).expect("copy");
        }
    }
    let (cert, key) = certificate(work.path());
    let (mut server, addr) = serve_tls(&site, &cert, &key, "art", &work.path().join("qlog"));
    let cases = [
        ("media/missing.mpd", "missing.mpd"),
        ("media/bad.mpd", "bad.mpd"),
        ("broken/manifest.mpd", "00003.m4s"),
    ];
    for (mpd, named) in cases {
        let shot = work.path().join("failure.png");
        let start = now();
        let (ok, summary, report) = play(
            addr,
            &format!("mpd={mpd}"),
            &cert,
            &shot,
            &mut server,
            FAILURE_WITHIN,
        );
        let took = now() - start;
        assert!(!ok, "{mpd}: the player reported success: {report}");
        assert_eq!(summary["ok"], false, "{mpd}: {report}");
        let failure = summary["failure"].as_str().unwrap_or_default();
        assert!(
            failure.contains(named) && !failure.contains("did not end within"),
            "{mpd}: the failure does not name {named}: {failure:?}\n{report}"
        );
        eprintln!("{mpd}: reported in {took:.1?}: {failure}");
    }
}
