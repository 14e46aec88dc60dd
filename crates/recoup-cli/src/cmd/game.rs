//! `recoup game`: play a cloud-gaming session from `recoup serve` and report its frame metrics.

use std::path::PathBuf;

use recoup_net::gaming::Summary;
use recoup_net::url::Url;
use recoup_net::{Error, GameClient, GameOptions, GameReport};

use super::get::ConnectArgs;
use super::transport::TransportArgs;

/// Play a cloud-gaming session (LADR's workload: 60 fps frames, one QUIC stream each, the
/// encoder following the server's bitrate controller) from `recoup serve`, and report its frame
/// metrics: each frame's delay from its capture on the server to its last byte here, the frames
/// over the deadline (100 ms, counting frames that never arrived), and the server's own
/// sender-side metrics (lossy and loss-affected frames, the delay breakdown).
///
/// The query of the URL is the session: duration, bitrate (the start rate), min_bitrate,
/// max_bitrate, fps, gop, deadline, utilization, loss_controller (none or lbbc), pending_limit
/// (true or false), seed. The congestion controller and recovery policy are the server's
/// (`recoup serve --cc copa --policy ladr-rrl`). Client and server must share a clock (one
/// host): the server sends its clock's wall-clock epoch and the delays are taken across it.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup serve --cc copa --loss-detection rack-tlp &
  recoup game --insecure 'https://127.0.0.1:4433/gaming?duration=20s'
  recoup game --insecure --json s.json \\
      'https://127.0.0.1:4433/gaming?duration=30s&loss_controller=lbbc&pending_limit=true'")]
pub struct Args {
    /// https://HOST:PORT/gaming?key=value&...
    #[arg(value_name = "URL")]
    pub url: String,
    /// Also write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub transport: TransportArgs,
}

pub fn run(args: Args) -> Result<(), Error> {
    let url = Url::parse(&args.url)?;
    let tls = recoup_net::tls::client_tls(
        args.connect.ca.as_deref(),
        args.connect.insecure,
        &[recoup_net::gaming::ALPN],
    )?;
    let client = GameClient::connect(GameOptions {
        url,
        tls,
        transport: args.transport.config()?,
        qlog: args.transport.qlog(),
        gso: !args.transport.no_gso,
        timeout: args.connect.timeout,
    })?;
    let stopper = client.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    let report = client.run()?;
    let json = to_json(&report);
    print!("{}", table(&report, &json));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| Error::Config(format!("JSON report: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::Config(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// The report as JSON: the session, the client's measurements, the server's report.
fn to_json(r: &GameReport) -> serde_json::Value {
    let c = &r.client;
    let delays = Summary::of(&c.delays_ms);
    let sent: Option<u64> = r.server.get("frames").and_then(|v| v.parse().ok());
    // Frames the server captured that never arrived whole are over any deadline.
    let missing = sent.map(|s| s.saturating_sub(c.frames));
    let over = c.frames_over_deadline + missing.unwrap_or(0);
    let server: serde_json::Map<String, serde_json::Value> = r
        .server
        .iter()
        .filter(|(k, _)| k.as_str() != "epoch_unix_ms")
        .map(|(k, v)| {
            let value = v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map_or(serde_json::Value::Null, serde_json::Value::from);
            (k.clone(), value)
        })
        .collect();
    serde_json::json!({
        "session": {
            "duration_s": r.params.duration.as_secs_f64(),
            "fps": r.params.config.encoder.fps,
            "loss_controller": if r.params.config.lbbc.is_some() { "lbbc" } else { "none" },
            "pending_limit": r.params.config.pending_limit,
            "deadline_ms": r.params.config.deadline.as_secs_f64() * 1e3,
        },
        "elapsed_s": r.elapsed.as_secs_f64(),
        "client": {
            "frames": c.frames,
            "frames_missing": missing,
            "frames_over_deadline": over,
            "frames_over_deadline_pct": sent.filter(|&s| s > 0).map(|s| over as f64 * 100.0 / s as f64),
            "frame_delay_mean_ms": delays.mean,
            "frame_delay_p90_ms": delays.p90,
            "frame_delay_max_ms": delays.max,
            "repair_frames": r.repair_frames,
            "fec_recovered_packets": r.fec_recovered_packets,
        },
        "server": server,
    })
}

fn table(r: &GameReport, json: &serde_json::Value) -> String {
    let num = |v: &serde_json::Value, digits: usize| match v.as_f64() {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    };
    let c = &json["client"];
    let s = &json["server"];
    let frames = s["frames"].as_f64().unwrap_or(0.0);
    let pct = |v: &serde_json::Value| match (v.as_f64(), frames > 0.0) {
        (Some(x), true) => format!("{:.2} %", x * 100.0 / frames),
        _ => "-".into(),
    };
    let rows = [
        ("frames", num(&c["frames"], 0), num(&s["frames"], 0)),
        (
            "frames skipped (pending-data limit)",
            "-".into(),
            num(&s["frames_skipped"], 0),
        ),
        (
            "frame delay mean ms",
            num(&c["frame_delay_mean_ms"], 1),
            num(&s["frame_delay_mean_ms"], 1),
        ),
        (
            "frame delay p90 ms",
            num(&c["frame_delay_p90_ms"], 1),
            num(&s["frame_delay_p90_ms"], 1),
        ),
        (
            "frames over the deadline",
            num(&c["frames_over_deadline_pct"], 2) + " %",
            pct(&s["frames_over_deadline"]),
        ),
        ("lossy frames", "-".into(), pct(&s["lossy_frames"])),
        (
            "loss-affected frames",
            "-".into(),
            pct(&s["loss_affected_frames"]),
        ),
        (
            "delay: propagation / queuing / recovery ms",
            "-".into(),
            format!(
                "{} / {} / {}",
                num(&s["propagation_ms"], 1),
                num(&s["queuing_ms"], 1),
                num(&s["recovery_ms"], 1)
            ),
        ),
        (
            "encoder mean Mbit/s",
            "-".into(),
            num(&s["mean_bitrate_mbps"], 2),
        ),
    ];
    let mut out = format!(
        "recoup game: {:.1} s session in {:.1} s, deadline {} ms\n{:<44} {:>12} {:>22}\n",
        r.params.duration.as_secs_f64(),
        r.elapsed.as_secs_f64(),
        r.params.config.deadline.as_millis(),
        "",
        "client",
        "server (from ACKs)",
    );
    for (name, client, server) in rows {
        out.push_str(&format!("{name:<44} {client:>12} {server:>22}\n"));
    }
    out
}
