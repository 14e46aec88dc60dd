//! `recoup serve --origin` as a CDN edge, end to end: a local HTTP/1.1 origin (std's
//! TcpListener), the `recoup` binary relaying it, and the unmodified aioquic HTTP/3 client and
//! `recoup get` (hq-interop) fetching through it. A file arrives byte for byte over HTTP/3 with
//! the origin's status and length; the origin's 404 reaches an HTTP/3 client as 404 and an
//! hq-interop client as a reset, and an unreachable origin as 502 and a reset, each with a
//! server log line naming the origin URL.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use common::{fixture, interop_dir, python, recoup, run_peer, sha256, Proc};

const FILE_LEN: usize = 1_000_003;

/// Serves `/media/file.bin` (with Content-Length) and 404 for anything else, until the test
/// ends.
fn origin(file: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind origin");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let path = request_path(&stream);
            let written = if path == "/media/file.bin" {
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n\r\n",
                    file.len()
                )
                .and_then(|()| stream.write_all(&file))
            } else {
                stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
            };
            written.ok();
        }
    });
    addr
}

fn request_path(stream: &TcpStream) -> String {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok();
    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return path,
            Ok(_) if header == "\r\n" => return path,
            Ok(_) => {}
        }
    }
}

fn serve_origin(origin: &str) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--policy", "fixed:2"])
        .args(["--origin", origin])
        .env("RUST_LOG", "info");
    Proc::server("recoup serve --origin", cmd)
}

/// The aioquic HTTP/3 client fetching `path`; returns its stderr (status and headers) and the
/// body.
fn h3_get(server: &mut Proc, addr: SocketAddr, path: &str) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("body");
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("aioquic_h3_client.py"))
        .arg(format!("https://{addr}{path}"))
        .arg("-o")
        .arg(&out)
        .arg("--any-status");
    let report = run_peer("aioquic h3 client", cmd, server);
    (report, std::fs::read(&out).unwrap_or_default())
}

/// `recoup get` (hq-interop) fetching `path`; it must fail, and its stderr is returned.
fn hq_get_fails(addr: SocketAddr, path: &str) -> String {
    let output = Command::new(recoup())
        .args(["get", "--insecure", "--alpn", "hq-interop"])
        .arg(format!("https://{addr}{path}"))
        .output()
        .expect("run recoup get");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "recoup get {path} succeeded: {stderr}"
    );
    stderr
}

#[test]
fn relays_an_origin_over_http3_and_hq_with_its_errors() {
    let (_dir, file) = fixture("file.bin", FILE_LEN);
    let origin_addr = origin(file.clone());
    let (mut server, addr) = serve_origin(&format!("http://{origin_addr}/media"));

    let (report, body) = h3_get(&mut server, addr, "/file.bin");
    assert!(report.contains(":status: 200"), "{report}");
    assert!(
        report.contains(&format!("content-length: {FILE_LEN}")),
        "{report}"
    );
    assert_eq!(sha256(&body), sha256(&file), "{report}");

    let (report, _) = h3_get(&mut server, addr, "/missing");
    assert!(report.contains(":status: 404"), "{report}");
    let why = hq_get_fails(addr, "/missing");
    assert!(why.contains("reset"), "{why}");
    let logged = format!("origin: http://{origin_addr}/media/missing answered status 404");
    assert!(
        server.wait_for_log(&logged, Duration::from_secs(5)),
        "no log line {logged:?}\n{}",
        server.output()
    );
}

#[test]
fn an_unreachable_origin_is_a_502_and_a_reset_with_a_log_line() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let (mut server, addr) = serve_origin(&format!("http://127.0.0.1:{port}"));
    let (report, body) = h3_get(&mut server, addr, "/live/cam");
    assert!(report.contains(":status: 502"), "{report}");
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains(&format!("http://127.0.0.1:{port}/live/cam")),
        "{body}"
    );
    let why = hq_get_fails(addr, "/x");
    assert!(why.contains("reset"), "{why}");
    let logged = format!("origin http://127.0.0.1:{port}/x: ");
    assert!(
        server.wait_for_log(&logged, Duration::from_secs(5)),
        "no log line {logged:?}\n{}",
        server.output()
    );
}
