//! The live CDN path in a real player, short: Debian's ffmpeg encodes low-latency DASH into an
//! HTTP/1.1 origin (tests/interop/ll_dash_origin.py), `recoup serve --origin` relays it over
//! HTTP/3, and dash.js in headless Chromium plays it through `recoup link` at 5 % loss, once
//! with `arq` and once with `crest` at the edge (`scripts/live-cdn.sh`, the full comparison's
//! command, with one 10 s run each). Checks what dash.js reports: it played the live stream over
//! HTTP/3 at a live latency near the manifest's 1.5 s target, at a bitrate of the ladder, and
//! the edge's own trace shows each policy in force (copies from `crest`, none from `arq`).

use std::path::Path;
use std::process::Command;

const SECONDS: u64 = 10;
/// The encoder's two rungs, kbit/s (tests/interop/live_cdn.py's RUNGS).
const LADDER: (f64, f64) = (400.0, 1200.0);
/// The manifest's target latency is 1.5 s. A player that waited for whole 1 s segments (an
/// edge or origin that held a segment until its upload ended) would sit a segment further
/// back; dash.js's catch-up keeps a chunked path near the target.
const MAX_LATENCY_S: f64 = 2.5;

#[test]
fn dash_js_plays_an_ffmpeg_live_stream_relayed_by_the_edge_through_5_percent_loss() {
    let out = tempfile::tempdir().expect("tempdir");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let res = Command::new("bash")
        .arg(repo.join("scripts/live-cdn.sh"))
        .args(["--recoup", env!("CARGO_BIN_EXE_recoup")])
        .args(["--policies", "arq,crest", "--runs", "1"])
        .args(["--seconds", &format!("{SECONDS}s"), "--out"])
        .arg(out.path())
        .output()
        .expect("bash scripts/live-cdn.sh");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    eprintln!("{report}");
    assert!(res.status.success(), "scripts/live-cdn.sh failed: {report}");
    let runs: Vec<serde_json::Value> = std::fs::read_to_string(out.path().join("runs.jsonl"))
        .expect("runs.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(runs.len(), 2, "{report}");
    for run in &runs {
        let policy = run["policy"].as_str().expect("policy");
        let page = &run["page"];
        let num = |key: &str| {
            page[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{policy}: no {key} in {page}"))
        };
        assert_eq!(run["ok"], true, "{policy}: {run}");
        assert_eq!(page["page_protocol"], "h3", "{policy}");
        assert_eq!(page["stream_protocol"], "h3", "{policy}");
        // Sampled every 250 ms while playing.
        assert!(num("latency_samples") >= 20.0, "{policy}: {page}");
        let latency = num("latency_mean_s");
        assert!(
            (0.3..MAX_LATENCY_S).contains(&latency),
            "{policy}: live latency {latency} s: {page}"
        );
        let kbps = num("bitrate_kbps");
        assert!(
            (LADDER.0 * 0.9..=LADDER.1 * 1.1).contains(&kbps),
            "{policy}: mean bitrate {kbps} kbit/s outside the ladder: {page}"
        );
        assert!(num("segments") >= (SECONDS - 2) as f64, "{policy}: {page}");
        let edge = &run["edge"];
        let lost = edge["lost_ranges"].as_u64().expect("edge lost ranges");
        let copies = edge["copies"].as_u64().expect("edge copies");
        assert!(lost > 0, "{policy}: 5 % loss and nothing lost: {edge}");
        if policy == "arq" {
            assert_eq!(copies, 0, "arq sent copies: {edge}");
        } else {
            assert!(copies > 0, "crest sent no copies: {edge}");
        }
        assert!(
            out.path().join(format!("player-{policy}.png")).is_file(),
            "{policy}: no screenshot"
        );
    }
}
