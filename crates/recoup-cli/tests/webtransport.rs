//! WebTransport over HTTP/3 (draft-ietf-webtrans-http3) in `recoup serve`: Chromium's
//! WebTransport API (web/webtransport.html, driven by tests/interop/chromium_player.py) and
//! aioquic's `H3Connection(enable_webtransport=True)` (tests/interop/aioquic_webtransport_client.py)
//! exchange streams and datagrams with the echo session at /webtransport/echo, a session at an
//! unknown path is refused with 404 while another works, and bad input (a malformed capsule, a
//! client that did not offer WebTransport in its SETTINGS, a datagram for no session) is answered
//! with the error the RFCs and the draft name. Through a lossy `recoup link`, the streams still
//! arrive whole (recovered like any stream) and no datagram is ever sent twice (RFC 9221 §5.2).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{
    certificate, chromium_player, interop_dir, link_command, python, recoup, run_peer,
    run_peer_status_within, Proc,
};

/// The largest DATAGRAM frame the server accepts (RFC 9221 §3 recommends 65535).
const DATAGRAM_FRAME_SIZE: &str = "65535";
const PAGE_TIMEOUT_S: u64 = 60;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(PAGE_TIMEOUT_S + 40);

fn web_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")
}

/// `recoup serve` of web/ with WebTransport on, logging at info level; TLS and a qlog
/// directory when given.
fn serve_webtransport(
    tls: Option<(&Path, &Path)>,
    qlog: Option<&Path>,
) -> (Proc, std::net::SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(web_root())
        .args(["--datagram-frame-size", DATAGRAM_FRAME_SIZE])
        .env("RUST_LOG", "info");
    if let Some((cert, key)) = tls {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    if let Some(dir) = qlog {
        cmd.arg("--qlog-dir").arg(dir);
    }
    Proc::server("recoup serve", cmd)
}

fn aioquic_client(port: u16, extra: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("aioquic_webtransport_client.py"))
        .args(["--port", &port.to_string()])
        .args(extra);
    cmd
}

/// The JSON line a peer printed first on its stdout.
fn summary(report: &str) -> serde_json::Value {
    let line = report.lines().nth(1).unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{report}"))
}

fn number(v: &serde_json::Value, key: &str) -> u64 {
    v.pointer(key)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

#[test]
fn chromium_webtransport_exchanges_streams_and_datagrams_with_recoup_serve() {
    let work = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(work.path());
    let (mut server, addr) = serve_webtransport(Some((&cert, &key)), None);
    let datagrams = 200;
    let bytes = 200_000;
    let url = format!("https://{addr}/webtransport.html?datagrams={datagrams}&bytes={bytes}");
    let shot = work.path().join("webtransport.png");
    let player = chromium_player(&url, &cert, &shot, PAGE_TIMEOUT_S);
    let (status, report) = run_peer_status_within(
        "chromium webtransport",
        player,
        &mut server,
        BROWSER_TIMEOUT,
    );
    let status = status.unwrap_or_else(|| panic!("Chromium did not finish:\n{report}"));
    assert!(status.success(), "{report}");
    let s = summary(&report);
    assert_eq!(s["ok"], true, "{report}");
    assert_eq!(s["page_protocol"], "h3", "{report}");
    for stream in ["/bidi", "/uni", "/after_unknown"] {
        assert_eq!(s[&stream[1..]]["intact"], true, "{stream}: {report}");
        assert_eq!(number(&s, &format!("{stream}/echoed")), bytes, "{report}");
    }
    // Loopback without a lossy link: all or nearly all come back.
    let echoed = number(&s, "/datagrams/echoed");
    assert_eq!(number(&s, "/datagrams/sent"), datagrams, "{report}");
    assert!(
        echoed * 10 >= datagrams * 9,
        "{echoed} of {datagrams} datagrams: {report}"
    );
    assert_eq!(number(&s, "/datagrams/bad"), 0, "{report}");
    // The unknown path: refused in the page, answered 404 by the server.
    assert_eq!(s["unknown_path"]["refused"], true, "{report}");
    let refused = server.stderr_lines("WebTransport session refused: 404");
    assert!(
        refused
            .iter()
            .any(|l| l.contains("path=/webtransport/echo-unknown")),
        "{refused:?}\n{report}"
    );
    // The page's close reached the server as CLOSE_WEBTRANSPORT_SESSION with its code and reason.
    assert_eq!(number(&s, "/closed/code"), 7, "{report}");
    let closed = server.stderr_lines("WebTransport session closed by the client");
    assert!(
        closed
            .iter()
            .any(|l| l.contains("code=7") && l.contains("reason=done") && l.contains("streams=3")),
        "{closed:?}\n{report}"
    );
    eprintln!(
        "Chromium WebTransport: {echoed} of {datagrams} datagrams echoed, streams of {bytes} bytes \
         echoed both ways, session in {} ms, all in {} ms",
        s["connect_ms"], s["elapsed_ms"]
    );
}

#[test]
fn aioquic_webtransport_client_exchanges_streams_and_datagrams_and_bad_input_is_refused() {
    let (mut server, addr) = serve_webtransport(None, None);
    let report = run_peer(
        "aioquic webtransport",
        aioquic_client(addr.port(), &["--datagrams", "200"]),
        &mut server,
    );
    let s = summary(&report);
    assert_eq!(s["ok"], true, "{report}");
    assert_eq!(s["unknown_path_status"], "404", "{report}");
    assert_eq!(number(&s, "/datagrams_echoed"), 200, "{report}");
    assert_eq!(s["server_fin"], true, "{report}");
    // The datagram for a stream that carries no session was dropped and logged, not echoed.
    let stray = server.stderr_lines("datagram dropped: no such session");
    assert_eq!(stray.len(), 1, "{stray:?}\n{report}");

    // A malformed CLOSE_WEBTRANSPORT_SESSION: the CONNECT stream is reset with
    // H3_MESSAGE_ERROR (RFC 9297 §3.3), logged.
    let report = run_peer(
        "aioquic webtransport (malformed capsule)",
        aioquic_client(addr.port(), &["--case", "malformed-capsule"]),
        &mut server,
    );
    assert_eq!(summary(&report)["connect_reset"], 0x10e, "{report}");
    assert_eq!(
        server.stderr_lines("CONNECT stream malformed").len(),
        1,
        "{report}"
    );

    // No WebTransport in the client's SETTINGS: refused with H3_SETTINGS_ERROR, logged.
    let report = run_peer(
        "aioquic webtransport (no settings)",
        aioquic_client(addr.port(), &["--case", "no-settings"]),
        &mut server,
    );
    assert_eq!(summary(&report)["closed"][0], 0x109, "{report}");
    let refused = server.stderr_lines("webtransport is not supported by client");
    assert!(!refused.is_empty(), "{report}");

    // Sessions after the bad ones still work.
    let report = run_peer(
        "aioquic webtransport (after)",
        aioquic_client(addr.port(), &["--datagrams", "20"]),
        &mut server,
    );
    assert_eq!(summary(&report)["ok"], true, "{report}");
}

/// DATAGRAM frames in the server's qlog traces (`transport:packet_sent`).
fn datagram_frames_sent(dir: &Path) -> u64 {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("qlog dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "sqlog") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read qlog");
        for record in bytes.split(|&b| b == 0x1e).filter(|r| !r.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(record).expect("qlog record");
            if v["name"] == "transport:packet_sent" {
                let frames = v["data"]["frames"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice);
                n += frames
                    .iter()
                    .filter(|f| f["frame_type"] == "datagram")
                    .count() as u64;
            }
        }
    }
    n
}

#[test]
fn through_a_lossy_link_streams_arrive_whole_and_datagrams_are_never_resent() {
    let qlog = tempfile::tempdir().expect("tempdir");
    let (mut server, server_addr) = serve_webtransport(None, Some(qlog.path()));
    let flags = [
        "--rtt",
        "20ms",
        "--down-loss",
        "bernoulli 10%",
        "--up-loss",
        "bernoulli 10%",
    ];
    let (relay, link_addr) = Proc::server("recoup link", link_command(server_addr, &flags));
    let datagrams = 200;
    let report = run_peer(
        "aioquic webtransport (lossy)",
        aioquic_client(
            link_addr.port(),
            &[
                "--datagrams",
                &datagrams.to_string(),
                "--min-datagrams",
                "1",
            ],
        ),
        &mut server,
    );
    let s = summary(&report);
    // The client checks the streams byte for byte.
    assert_eq!(s["ok"], true, "{report}");
    let echoed = number(&s, "/datagrams_echoed");
    drop(relay);
    let closed = server.stderr_lines("WebTransport session closed by the client");
    let server_echoed: u64 = closed
        .first()
        .and_then(|l| l.split("datagrams=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no echo count in the server's log: {closed:?}\n{report}"));
    drop(server);
    let sent = datagram_frames_sent(qlog.path());
    let count = common::count_qlog(qlog.path());
    // Each echo went out once however many packets were lost; the streams were recovered.
    assert_eq!(sent, server_echoed, "{report}");
    assert!(
        server_echoed < datagrams && echoed < server_echoed,
        "{report}"
    );
    assert!(count.retransmissions > 0, "{count:?}");
    eprintln!(
        "10 % loss each way: {server_echoed} of {datagrams} datagrams reached the server, \
         {echoed} echoes came back, {sent} DATAGRAM frames sent, {} retransmission packets",
        count.retransmissions
    );
}

/// SIGTERM drains: the open session is ended from the server's side (CLOSE_WEBTRANSPORT_SESSION
/// and FIN on its CONNECT stream), then the connection closes and the server exits 0.
#[test]
fn a_drain_ends_the_session_with_fin_and_the_server_exits() {
    let (mut server, addr) = serve_webtransport(None, None);
    let log = tempfile::tempdir().expect("tempdir");
    let (out, err) = (log.path().join("out"), log.path().join("err"));
    let mut client = aioquic_client(addr.port(), &["--case", "drain"])
        .stdout(std::fs::File::create(&out).expect("log"))
        .stderr(std::fs::File::create(&err).expect("log"))
        .spawn()
        .expect("start the aioquic client");
    assert!(
        server.wait_for_log("WebTransport session accepted", Duration::from_secs(20)),
        "{}",
        server.output()
    );
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = common::now() + Duration::from_secs(40);
    let (client_status, server_status) = loop {
        let c = client.try_wait().expect("client");
        let s = server.child.try_wait().expect("server");
        if let (Some(c), Some(s)) = (c, s) {
            break (c, s);
        }
        assert!(
            common::now() < deadline,
            "no end within 40 s\n{}",
            server.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let report = format!(
        "--- client stdout:\n{}\n--- client stderr:\n{}\n{}",
        common::read_log(&out),
        common::read_log(&err),
        server.output()
    );
    assert!(client_status.success(), "{report}");
    assert!(server_status.success(), "{report}");
    let s: serde_json::Value =
        serde_json::from_str(common::read_log(&out).trim()).expect("client summary");
    assert_eq!(s["server_fin"], true, "{report}");
    // CLOSE_WEBTRANSPORT_SESSION (0x2843, a two-byte varint), 12 bytes: error code 0, then the
    // reason "draining".
    let draining: String = b"draining".iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        s["server_capsules"],
        format!("68430c00000000{draining}"),
        "{report}"
    );
    assert_eq!(
        server
            .stderr_lines("WebTransport session closed: the server drains")
            .len(),
        1,
        "{report}"
    );
}
