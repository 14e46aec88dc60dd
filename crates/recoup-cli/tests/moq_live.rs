//! The MoQ path with real software, short: Debian's ffmpeg encodes a live H.264 test pattern,
//! moq-cli publishes it to moq-relay (both unmodified, crates.io), `recoup serve --moq` relays
//! it over WebTransport, and @moq/watch (unmodified, npm) plays it in headless Chromium through
//! `recoup link` at 5 % loss, with `arq` and with `crest` at the edge (`scripts/moq-live.sh`,
//! the full comparison's command, one 10 s run each). Checks what the page measured from the
//! player: frames presented at the stream's rate with an end-to-end latency of a few round
//! trips, over HTTP/3 and moq-lite; that the edge's own trace shows each policy in force; and,
//! in the edge's qlog, that no STREAM frame of a group stream was sent after its deadline. The
//! same path ends in moq-cli subscribing over raw QUIC (`--viewer quic`) instead of the
//! browser. Bad input: a malformed MoQ message closes only its own session, with moq-lite's
//! code; a raw-QUIC MoQ client of a server without --moq is told so in the close.

mod common;

use std::path::Path;
use std::process::Command;

use common::{interop_dir, python, recoup, run_peer, run_peer_status_within, Proc};
use serde_json::Value;

const SECONDS: u64 = 10;
/// ffmpeg's frame rate (tests/interop/moq_live.py's FPS).
const FPS: f64 = 30.0;
/// The link's round trip is 60 ms; the player keeps a jitter buffer of about a frame. A viewer
/// that waited for whole groups (1 s) would sit a second behind.
const MAX_LATENCY_MS: f64 = 600.0;

/// One path at a time: two encoders, relays and browsers at once on a 2-core machine would
/// measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs scripts/moq-live.sh with `args` for one run per policy; its records.
fn moq_live(out: &Path, args: &[&str]) -> (Vec<Value>, String) {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let res = Command::new("bash")
        .arg(repo.join("scripts/moq-live.sh"))
        .args(["--recoup", env!("CARGO_BIN_EXE_recoup"), "--runs", "1"])
        .args(["--seconds", &format!("{SECONDS}s"), "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("bash scripts/moq-live.sh");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    eprintln!("{report}");
    assert!(res.status.success(), "scripts/moq-live.sh failed: {report}");
    let runs = std::fs::read_to_string(out.join("runs.jsonl"))
        .expect("runs.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (runs, report)
}

fn num(run: &Value, key: &str) -> f64 {
    run.pointer(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number {key} in {run}"))
}

#[test]
fn moq_watch_plays_a_moq_relay_broadcast_relayed_by_the_edge_through_5_percent_loss() {
    let out = tempfile::tempdir().expect("tempdir");
    let (runs, report) = moq_live(out.path(), &["--policies", "arq,crest"]);
    assert_eq!(runs.len(), 2, "{report}");
    for run in &runs {
        let policy = run["policy"].as_str().expect("policy");
        let page = &run["page"];
        assert_eq!(run["ok"], true, "{policy}: {run}");
        assert_eq!(page["page_protocol"], "h3", "{policy}");
        // The edge speaks moq-lite to the player (docs/moq.md: lite-02, without WT-Protocol).
        assert!(
            page["protocol"]
                .as_str()
                .is_some_and(|p| p.starts_with("moq-lite")),
            "{policy}: {page}"
        );
        let presented = num(run, "/page/frames_presented");
        assert!(
            presented >= 0.8 * FPS * SECONDS as f64,
            "{policy}: {presented} frames in {SECONDS} s: {page}"
        );
        let latency = num(run, "/page/latency_mean_ms");
        assert!(
            (30.0..MAX_LATENCY_MS).contains(&latency),
            "{policy}: latency {latency} ms: {page}"
        );
        let lost = num(run, "/edge/lost_ranges");
        let copies = num(run, "/edge/copies");
        assert!(lost > 0.0, "{policy}: 5 % loss and nothing lost: {run}");
        if policy == "arq" {
            assert_eq!(copies, 0.0, "arq sent copies: {run}");
        } else {
            assert!(copies > 0.0, "crest sent no copies: {run}");
        }
        assert!(num(run, "/group_frames_sent") > 0.0, "{policy}: {run}");
        assert_eq!(num(run, "/group_frames_late"), 0.0, "{policy}: {run}");
        assert!(
            out.path().join(format!("player-{policy}.png")).is_file(),
            "{policy}: no screenshot"
        );
    }
}

/// With a deadline shorter than a loss recovery (100 ms at a 60 ms round trip), lost objects
/// are retransmitted or copied past their deadline unless the edge resets their group's
/// stream: the count of such STREAM frames in the edge's qlog is zero, and resets were sent.
#[test]
fn no_object_is_sent_after_its_deadline() {
    let out = tempfile::tempdir().expect("tempdir");
    let (runs, report) = moq_live(out.path(), &["--policies", "crest", "--deadline", "100ms"]);
    assert_eq!(runs.len(), 1, "{report}");
    assert_deadline_kept(&runs[0], out.path());
}

/// The `crest` run `run`, written under `out`, lost data, sent group frames, none of them after
/// its deadline (the edge's qlog), and reset group streams at their deadline.
fn assert_deadline_kept(run: &Value, out: &Path) {
    assert!(num(run, "/group_frames_sent") > 0.0, "{run}");
    assert!(num(run, "/edge/lost_ranges") > 0.0, "{run}");
    assert_eq!(
        num(run, "/group_frames_late"),
        0.0,
        "STREAM frames of group streams sent after their deadline: {run}"
    );
    let resets: usize = std::fs::read_dir(out.join("crest-1/qlog"))
        .expect("the edge's qlog directory")
        .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("qlog"))
        .map(|text| text.matches("\"frame_type\":\"reset_stream\"").count())
        .sum();
    assert!(resets > 0, "no group stream was reset at its deadline");
}

/// moq-lite's newest raw-QUIC ALPN, which moq-cli 0.14 and recoup (moq-net 0.3) both prefer.
const RAW_QUIC_ALPN: &str = "moq-lite-06";

/// The same path with moq-cli (unmodified) subscribing over raw QUIC (`moql://`, `moq export
/// fmp4`) in place of the browser: the edge serves it a moq-net session on the QUIC
/// connection itself, under the policy's loss recovery, and the subscriber writes the
/// broadcast's frames at the stream's rate.
#[test]
fn moq_cli_receives_the_broadcast_over_raw_quic_through_5_percent_loss() {
    let out = tempfile::tempdir().expect("tempdir");
    let (runs, report) = moq_live(out.path(), &["--viewer", "quic", "--policies", "crest"]);
    assert_eq!(runs.len(), 1, "{report}");
    let run = &runs[0];
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["page"]["alpn"], RAW_QUIC_ALPN, "{run}");
    let frames = num(run, "/page/frames_received");
    assert!(
        frames >= 0.8 * FPS * SECONDS as f64,
        "{frames} frames in {SECONDS} s: {run}"
    );
    assert!(num(run, "/edge/lost_ranges") > 0.0, "nothing lost: {run}");
    assert!(
        num(run, "/edge/copies") > 0.0,
        "crest sent no copies: {run}"
    );
    assert_eq!(num(run, "/group_frames_late"), 0.0, "{run}");
}

/// Over raw QUIC too, a deadline shorter than a loss recovery resets the group streams whose
/// objects would be late: no STREAM frame of a group stream goes out past its deadline, and
/// the subscriber still receives the groups that made it.
#[test]
fn no_object_is_sent_after_its_deadline_over_raw_quic() {
    let out = tempfile::tempdir().expect("tempdir");
    let args = [
        "--viewer",
        "quic",
        "--policies",
        "crest",
        "--deadline",
        "100ms",
    ];
    let (runs, report) = moq_live(out.path(), &args);
    assert_eq!(runs.len(), 1, "{report}");
    let run = &runs[0];
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["page"]["alpn"], RAW_QUIC_ALPN, "{run}");
    assert_deadline_kept(run, out.path());
}

/// moq-lite's PROTOCOL_VIOLATION session error code (moq-net's `SessionError`).
const PROTOCOL_VIOLATION: u64 = 0x3;

/// A stream type no moq-lite version defines, on a session at /moq: the server closes that
/// session with CLOSE_WEBTRANSPORT_SESSION (moq-lite's PROTOCOL_VIOLATION) and FIN, logs why,
/// and serves the next session as before; an unknown path is answered 404. No relay listens
/// at the upstream address, so this also shows the egress serving on without its upstream.
#[test]
fn a_malformed_moq_message_closes_that_session_only() {
    let mut cmd = Command::new(recoup());
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--moq",
        "https://127.0.0.1:9/anon",
    ])
    .env("RUST_LOG", "info");
    let (mut server, addr) = Proc::server("recoup serve --moq", cmd);
    for attempt in ["first", "second"] {
        let mut client = Command::new(python());
        client
            .arg(interop_dir().join("aioquic_webtransport_client.py"))
            .args(["--port", &addr.port().to_string()])
            .args(["--path", "/moq", "--case", "moq-malformed"]);
        let report = run_peer(&format!("aioquic moq ({attempt})"), client, &mut server);
        let line = report
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON summary:\n{report}"));
        let v: Value = serde_json::from_str(line).expect("JSON summary");
        assert_eq!(v["unknown_path_status"], "404", "{report}");
        assert_eq!(v["status"], "200", "{report}");
        assert_eq!(v["close_code"], PROTOCOL_VIOLATION, "{report}");
        assert_eq!(v["server_fin"], true, "{report}");
    }
    assert_eq!(server.stderr_lines("MoQ session refused").len(), 2);
}

/// moq-cli's binary (`moq`), as scripts/moq-deps.sh installs it.
fn moq_cli() -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let res = Command::new("bash")
        .arg("-c")
        .arg("source scripts/moq-deps.sh moq-live-test >&2 && printf %s \"$moq_cli\"")
        .current_dir(repo)
        .output()
        .expect("bash scripts/moq-deps.sh");
    assert!(
        res.status.success(),
        "scripts/moq-deps.sh failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    String::from_utf8(res.stdout).expect("a path")
}

/// A raw-QUIC MoQ client (moq-cli, unmodified) of a server without --moq: its connection is
/// closed with moq-lite's UNAUTHORIZED, which moq-cli reports, and the server logs why, naming
/// the ALPN.
#[test]
fn a_raw_quic_moq_client_of_a_server_without_moq_is_told_moq_is_off() {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info");
    let (mut server, addr) = Proc::server("recoup serve", cmd);
    let mut client = Command::new(moq_cli());
    client
        .args(["--connect", &format!("moql://{addr}/")])
        .args(["--connect-tls-insecure", "--connect-once"])
        .args(["export", "--broadcast", "test", "fmp4"]);
    let (status, report) = run_peer_status_within(
        "moq export",
        client,
        &mut server,
        std::time::Duration::from_secs(20),
    );
    assert!(status.is_some_and(|s| !s.success()), "{report}");
    assert!(report.contains("Error: unauthorized"), "{report}");
    let refused = server.stderr_lines("MoQ session refused: MoQ is off");
    assert_eq!(refused.len(), 1, "{report}");
    assert!(refused[0].contains(RAW_QUIC_ALPN), "{report}");
}
