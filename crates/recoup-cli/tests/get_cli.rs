//! `recoup get` as a user meets it: a dead port fails fast with a
//! clear message, `-o` never leaves a truncated or clobbered file, a missing file reads "not
//! found", nothing writes colour codes into a log that is not a terminal, and a server that
//! restarted under a download ends it at once with a stateless reset.

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{
    fixture, interop_dir, now, python, read_log, recoup, serve_files, spawn_get, wait_child, Proc,
};

fn get(args: &[&str], out: Option<&Path>) -> Output {
    let mut cmd = Command::new(recoup());
    cmd.arg("get").args(args).env("RUST_LOG", "info");
    if let Some(out) = out {
        cmd.arg("-o").arg(out);
    }
    cmd.output().expect("run recoup get")
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_dead_port_fails_within_the_timeout_and_names_the_address() {
    // A bound UDP socket that never answers: nothing listens for QUIC behind it.
    let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = silent.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("got.bin");
    std::fs::write(&target, b"the old file").expect("write");
    let url = format!("https://{addr}/file.bin");
    let start = now();
    let out = get(&["--insecure", "--timeout", "1s", &url], Some(&target));
    let took = now() - start;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("no response from {addr} after 1 s")),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI escapes in a pipe: {stderr:?}"
    );
    assert_eq!(std::fs::read(&target).expect("read"), b"the old file");
    assert_eq!(
        listing(dir.path()),
        ["got.bin"],
        "a temporary file was left"
    );
}

#[test]
fn a_missing_file_reads_not_found_and_o_is_written_only_on_success() {
    let (root, data) = fixture("file.bin", 200_000);
    let (mut server, addr) = serve_files(root.path(), &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("got.bin");
    std::fs::write(&target, b"the old file").expect("write");

    // Each protocol words a missing file its own way: hq-interop's reset code 0x194, HTTP/3's 404.
    for (alpn, wording) in [
        ("hq-interop", "not found: /missing.bin"),
        ("h3", "404 Not Found: /missing.bin"),
    ] {
        let out = get(
            &[
                "--insecure",
                "--alpn",
                alpn,
                &format!("https://{addr}/missing.bin"),
            ],
            Some(&target),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}\n{}", server.output());
        assert!(stderr.contains(wording), "{alpn}: {stderr}");
        assert!(!stderr.contains("0x10"), "{alpn}: {stderr}");
        assert!(
            !stderr.contains('\u{1b}'),
            "ANSI escapes in a pipe: {stderr:?}"
        );
        assert_eq!(std::fs::read(&target).expect("read"), b"the old file");
    }
    assert_eq!(
        listing(dir.path()),
        ["got.bin"],
        "a temporary file was left"
    );

    let out = get(
        &["--insecure", &format!("https://{addr}/file.bin")],
        Some(&target),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{}", server.output());
    assert!(
        std::fs::read(&target).expect("read") == data,
        "body differs"
    );
    assert_eq!(listing(dir.path()), ["got.bin"]);
    // The server's log is not a terminal either.
    let log = server.output();
    assert!(log.contains("GET"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escapes in the server log: {log:?}"
    );
}

/// `recoup serve` of live streams with the given certificate, on `listen`.
fn serve_live_with(cert: &Path, key: &Path, listen: &str) -> (Proc, std::net::SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", listen, "--cert"])
        .arg(cert)
        .arg("--key")
        .arg(key)
        .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

#[test]
fn rfc9000_10_3_a_restarted_server_resets_a_running_download_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A certificate and key that both runs of the server load (the reset key derives from it).
    let made = Command::new(python())
        .arg("-c")
        .arg("import sys; sys.path.insert(0, sys.argv[1]); from aioquic_server import self_signed; self_signed(sys.argv[2])")
        .arg(interop_dir())
        .arg(dir.path())
        .status()
        .expect("python");
    assert!(made.success(), "making a certificate failed");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let (first, addr) = serve_live_with(&cert, &key, "127.0.0.1:0");
    let err = dir.path().join("get.err");
    let out = dir.path().join("live.bin");
    let mut get = spawn_get(
        &[
            "--insecure",
            // The reset is the transport's; hq-interop's server log names the request plainly.
            "--alpn",
            "hq-interop",
            &format!("https://{addr}/live/restart"),
            "-o",
            &out.display().to_string(),
        ],
        &err,
    );
    assert!(
        first.wait_for_log("GET live stream", Duration::from_secs(10)),
        "the download did not start: {}",
        read_log(&err)
    );
    drop(first);
    let (mut second, _) = serve_live_with(&cert, &key, &addr.to_string());
    let killed = now();
    let Some(status) = wait_child(&mut get, Duration::from_secs(15)) else {
        panic!(
            "recoup get still running 15 s after the restart:\n{}\n{}",
            read_log(&err),
            second.output()
        );
    };
    let took = now() - killed;
    let stderr = read_log(&err);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("stateless reset"),
        "{stderr}\n{}",
        second.output()
    );
    // A PING after 1 s of silence meets the reset within a round trip: far below the 30 s
    // idle timeout.
    assert!(took < Duration::from_secs(5), "took {took:?}: {stderr}");
    assert!(
        !dir.path().join("live.bin").exists(),
        "a partial download was kept"
    );
}
