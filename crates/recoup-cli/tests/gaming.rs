//! LADR's cloud-gaming workload over real sockets (LADR Table 2's sessions): `recoup game` plays a
//! session from `recoup serve` (Copa, RACK-TLP, the reactive rate limit) with LBBC and the
//! pending-data limit, through `recoup link` with a shallow 8-packet buffer at 20 Mbit/s, 10 ms RTT
//! and 1 % random loss towards the client. The client's frame metrics must add up with the server's
//! report, every frame's delay must be at least the link's one-way delay (so the clock translation
//! between the two processes holds), and the link must have dropped packets.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{link_command, recoup, run_peer_within, Proc};

#[test]
fn gaming_session_through_a_shallow_lossy_link() {
    let mut serve = Command::new(recoup());
    serve.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--cc",
        "copa",
        "--loss-detection",
        "rack-tlp",
        "--policy",
        "ladr-rrl",
    ]);
    let (mut server, server_addr) = Proc::server("recoup serve", serve);
    let flags = [
        "--rtt",
        "10ms",
        "--rate",
        "20Mbps",
        "--queue",
        "droptail packets=8",
        "--down-loss",
        "bernoulli 1%",
        "--seed",
        "7",
    ];
    let (mut link, link_addr) = Proc::server("recoup link", link_command(server_addr, &flags));
    let dir = tempfile::tempdir().expect("tempdir");
    let json_path = dir.path().join("session.json");
    let mut game = Command::new(recoup());
    game.args(["game", "--insecure", "--json"])
        .arg(&json_path)
        .arg(format!(
            "https://{link_addr}/gaming?duration=4s&loss_controller=lbbc&pending_limit=true&seed=1"
        ));
    let report = run_peer_within("recoup game", game, &mut server, Duration::from_secs(60));
    let text = std::fs::read_to_string(&json_path)
        .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{report}\n{}", link.output()));
    println!("{report}\n{text}");
    let j: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let int = |v: &serde_json::Value| v.as_f64().map(|x| x as u64).expect("a number");
    let (c, s) = (&j["client"], &j["server"]);
    // 60 fps for 4 s: every tick is a frame or a skip.
    assert_eq!(int(&s["frames"]) + int(&s["frames_skipped"]), 240, "{text}");
    assert_eq!(
        int(&c["frames"]) + int(&c["frames_missing"]),
        int(&s["frames"]),
        "{text}"
    );
    assert!(int(&c["frames"]) > 0, "{text}");
    // Capture on the server to the last byte here crosses the link's 5 ms one way at least.
    let mean = c["frame_delay_mean_ms"].as_f64().expect("mean");
    let p90 = c["frame_delay_p90_ms"].as_f64().expect("p90");
    assert!(
        (5.0..1000.0).contains(&mean),
        "mean delay {mean} ms: {text}"
    );
    assert!(p90 >= mean, "{text}");
    // The link's losses and the shallow buffer make lossy frames the sender saw.
    assert!(int(&s["lossy_frames"]) > 0, "{text}");
    // The client lands no later than the sender hears of it, on average: the ACK comes back.
    let sender_mean = s["frame_delay_mean_ms"].as_f64().expect("sender mean");
    assert!(
        mean <= sender_mean,
        "client {mean} ms, sender {sender_mean} ms: {text}"
    );
    link.output();
}

#[test]
fn a_bad_session_query_names_the_key() {
    let out = Command::new(recoup())
        .args([
            "game",
            "--insecure",
            "https://127.0.0.1:9/gaming?duration=4s&loss_controller=pudica",
        ])
        .output()
        .expect("recoup game");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loss_controller=\"pudica\""), "{err}");
}
