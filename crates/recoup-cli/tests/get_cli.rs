//! `recoup get` as a user meets it (issue 14 scope 6): a dead port fails fast with a clear
//! message, `-o` never leaves a truncated or clobbered file, a missing file reads "not found",
//! and nothing writes colour codes into a log that is not a terminal.

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{fixture, now, recoup, Proc};

fn recoup_serve(root: &Path) -> (Proc, std::net::SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

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
    let (mut server, addr) = recoup_serve(root.path());
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("got.bin");
    std::fs::write(&target, b"the old file").expect("write");

    let out = get(
        &["--insecure", &format!("https://{addr}/missing.bin")],
        Some(&target),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}\n{}", server.output());
    assert!(stderr.contains("not found: /missing.bin"), "{stderr}");
    assert!(!stderr.contains("0x10"), "{stderr}");
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
