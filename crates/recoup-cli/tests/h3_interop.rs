//! HTTP/3 interoperability over loopback with unmodified peers:
//! - the aioquic HTTP/3 client (`aioquic.h3`, `tests/interop/aioquic_h3_client.py`) and the h3
//!   client on h3-quinn (crates.io, in-process) download 10 MB from `recoup serve`, sha256
//!   compared;
//! - the aioquic client sees the statuses a browser would: 206 with Content-Range, 416, 404, 405
//!   (not HEAD: aioquic 1.7.2 closes with H3_MESSAGE_ERROR when a HEAD response carries the GET's
//!   Content-Length, which RFC 9114 §4.1.2 allows);
//! - `recoup get` downloads 10 MB from the h3 server on h3-quinn.
//!
//! A failing peer fails its test with the peer's and the server's output; every wait is bounded.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use common::{check_download, fixture, interop_dir, python, recoup, run_client, run_peer, Proc};

const FILE_SIZE: usize = 10 * 1024 * 1024;

fn recoup_serve(root: &Path) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

fn aioquic_h3(addr: SocketAddr, path: &str, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("aioquic_h3_client.py"))
        .arg(format!("https://{addr}{path}"))
        .arg("-o")
        .arg(out)
        .args(extra);
    cmd
}

#[test]
fn aioquic_h3_client_downloads_from_recoup_serve() {
    let (root, data) = fixture("file.bin", FILE_SIZE);
    let (mut server, addr) = recoup_serve(root.path());
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    let report = run_peer(
        "aioquic h3 client",
        aioquic_h3(addr, "/file.bin", &got, &[]),
        &mut server,
    );
    eprintln!("{}", report.lines().nth(1).unwrap_or_default());
    assert!(report.contains("status 200"), "{report}");
    check_download(&got, &data, &report);
}

#[test]
fn aioquic_h3_client_sees_ranges_and_error_statuses() {
    let (root, data) = fixture("file.bin", 1000);
    let (mut server, addr) = recoup_serve(root.path());
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    let report = run_peer(
        "aioquic h3 client",
        aioquic_h3(addr, "/file.bin", &got, &["--range", "bytes=100-199"]),
        &mut server,
    );
    assert!(report.contains("status 206"), "{report}");
    assert!(
        report.contains("content-range: bytes 100-199/1000"),
        "{report}"
    );
    check_download(&got, &data[100..200], &report);
    for (path, extra, status) in [
        ("/file.bin", &["--range", "bytes=1000-"][..], "416"),
        ("/missing.bin", &[][..], "404"),
        ("/file.bin", &["--method", "POST"][..], "405"),
    ] {
        let mut cmd = aioquic_h3(addr, path, &got, extra);
        cmd.arg("--any-status");
        let report = run_peer("aioquic h3 client", cmd, &mut server);
        assert!(
            report.contains(&format!("status {status},")),
            "{path} {extra:?}: expected {status}\n{report}"
        );
    }
}

#[test]
fn h3_quinn_client_downloads_from_recoup_serve() {
    let (root, data) = fixture("file.bin", FILE_SIZE);
    let (mut server, addr) = recoup_serve(root.path());
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    let result = run_client(recoup_interop::h3_client::get(
        addr,
        "localhost",
        "/file.bin",
        &got,
    ));
    let download = match result {
        Some(Ok(d)) => d,
        Some(Err(e)) => panic!("h3-quinn client failed: {e}\n{}", server.output()),
        None => panic!("h3-quinn client timed out\n{}", server.output()),
    };
    eprintln!(
        "h3-quinn client <- recoup serve: {:.1} Mbit/s",
        download.goodput_mbps()
    );
    check_download(&got, &data, &server.output());
}

#[test]
fn recoup_get_downloads_from_h3_quinn_server() {
    let (root, data) = fixture("file.bin", FILE_SIZE);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = std::sync::mpsc::channel();
    let server_root = root.path().to_owned();
    // quinn binds inside a runtime, so the server is built on the thread that runs it.
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let server = recoup_interop::h3_server::Server::bind(
                "127.0.0.1:0".parse().expect("addr"),
                &server_root,
            )
            .expect("h3-quinn server");
            tx.send(server.local_addr().expect("addr")).expect("send");
            tokio::select! {
                () = server.run() => {}
                _ = stopped => {}
            }
        });
    });
    let addr: SocketAddr = rx.recv().expect("server address");
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    // recoup get gives up by itself after its idle timeout, so this wait is bounded.
    let output = Command::new(recoup())
        .args(["get", "--insecure", "--alpn", "h3"])
        .arg(format!("https://{addr}/file.bin"))
        .arg("-o")
        .arg(&got)
        .env("RUST_LOG", "info")
        .output()
        .expect("run recoup get");
    let report = String::from_utf8_lossy(&output.stderr).into_owned();
    // A missing file is reported as its status and path.
    let missing = Command::new(recoup())
        .args(["get", "--insecure"])
        .arg(format!("https://{addr}/missing"))
        .output()
        .expect("run recoup get");
    stop.send(()).ok();
    thread.join().expect("server thread");
    assert!(output.status.success(), "recoup get failed:\n{report}");
    check_download(&got, &data, &report);
    let missing_err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && missing_err.contains("404 Not Found: /missing"),
        "{missing_err}"
    );
}
