//! `recoup serve` on SIGTERM drains: a download in flight (HTTP/3, through a rate-limited
//! `recoup link`) completes byte-exact, a live stream in flight ends early with a clean FIN, a
//! new connection is refused, `/healthz` says it is draining, and the server exits 0 within
//! `--drain-timeout`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{fixture, link_command, serve_files, spawn_get, wait_child, Proc};

const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

fn signal(proc: &Proc, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(proc.child.id().to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{name}");
}

/// The `/healthz` URL `recoup serve` printed.
fn health_url(server: &Proc) -> String {
    let deadline = common::now() + Duration::from_secs(5);
    loop {
        let found = server.stdout().lines().find_map(|l| {
            let url = l.strip_prefix("metrics on ")?.strip_suffix("/metrics")?;
            Some(format!("{url}/healthz"))
        });
        match found {
            Some(url) => return url,
            None if common::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => panic!("no metrics address: {}", server.stdout()),
        }
    }
}

/// The status and body of a GET of `url`.
fn health(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent.get(url).call().expect("healthz");
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().expect("body"))
}

#[test]
fn sigterm_lets_the_download_in_flight_finish_refuses_new_ones_and_exits_0() {
    // 6 MiB at 16 Mbit/s: about 3 s of download, most of it after the signal.
    let (root, data) = fixture("big.bin", 6 << 20);
    let drain = format!("{}s", DRAIN_TIMEOUT.as_secs());
    let (mut server, addr) = serve_files(
        root.path(),
        &["--drain-timeout", &drain, "--metrics", "127.0.0.1:0"],
    );
    let healthz = health_url(&server);
    assert_eq!(health(&healthz), (200, "ok\n".into()));
    let link_flags = ["--rtt", "20ms", "--rate", "16Mbps"];
    let (_link, link_addr) = Proc::server("recoup link", link_command(addr, &link_flags));
    let out = tempfile::tempdir().expect("tempdir");

    let file = out.path().join("big.bin");
    let file_args = common::get_args(format!("https://{link_addr}/big.bin"), &file);
    let mut download = spawn_get(&file_args, &out.path().join("download.log"));
    let live = out.path().join("live.bin");
    let live_args = common::get_args(
        format!("https://{addr}/live/cam?bitrate=1Mbps&duration=600s"),
        &live,
    );
    let mut stream = spawn_get(&live_args, &out.path().join("live.log"));
    assert!(
        server.wait_for_log("HTTP/3 live stream", Duration::from_secs(10))
            && server.wait_for_log("big.bin", Duration::from_secs(10)),
        "both requests in flight:\n{}",
        server.output()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        download.try_wait().expect("wait").is_none(),
        "the download ended before the signal: make it longer"
    );

    let sent = common::now();
    signal(&server, "TERM");
    assert!(
        server.wait_for_log("no new connections", Duration::from_secs(5)),
        "{}",
        server.output()
    );
    assert_eq!(health(&healthz), (503, "draining\n".into()));
    // A new connection, straight to the server: CONNECTION_REFUSED.
    let late = out.path().join("late.bin");
    let late_args = common::get_args(format!("https://{addr}/big.bin"), &late);
    let late_log = out.path().join("late.log");
    let mut refused = spawn_get(&late_args, &late_log);
    let status = wait_child(&mut refused, Duration::from_secs(20)).expect("refused in time");
    let log = common::read_log(&late_log);
    assert!(!status.success(), "a new connection was served: {log}");
    // CONNECTION_REFUSED (0x2, RFC 9000 §20.1) with the reason.
    assert!(log.contains("code 0x2 server shutting down"), "{log}");
    assert!(!late.exists());

    let status = wait_child(&mut download, Duration::from_secs(60)).expect("download in time");
    let log = common::read_log(&out.path().join("download.log"));
    assert!(status.success(), "{log}\n{}", server.output());
    common::check_download(&file, &data, &log);
    let status = wait_child(&mut stream, Duration::from_secs(30)).expect("stream ended");
    let log = common::read_log(&out.path().join("live.log"));
    assert!(
        status.success(),
        "the live stream did not end cleanly: {log}"
    );
    assert!(
        std::fs::metadata(&live).expect("live output").len() > 0,
        "{log}"
    );

    let exit = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            common::now() < sent + DRAIN_TIMEOUT + Duration::from_secs(5),
            "the server did not exit:\n{}",
            server.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = common::now() - sent;
    eprintln!("drained and exited {took:?} after SIGTERM");
    assert_eq!(exit.code(), Some(0), "{}", server.output());
    assert!(took < DRAIN_TIMEOUT, "exit after {took:?}");
    assert!(
        !server.stderr_lines("GOAWAY sent").is_empty(),
        "{}",
        server.output()
    );
}
