//! Retry (RFC 9000 §8.1.2) across implementations: `recoup serve --retry` with the aioquic
//! client and with `recoup get`, and `recoup get` following aioquic's Retry. The transport's
//! debug log shows that a Retry was really sent, validated, followed.

mod common;

use std::path::Path;
use std::process::Command;

use common::{fixture, interop_dir, python, recoup, run_peer, sha256, Proc};

const SIZE: usize = 1024 * 1024;
const LOG: &str = "info,recoup_transport=debug";

fn serve_with_retry(root: &Path) -> (Proc, std::net::SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--retry", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .env("RUST_LOG", LOG);
    Proc::server("recoup serve --retry", cmd)
}

fn recoup_get(url: &str, out: &Path) -> Command {
    let mut get = Command::new(recoup());
    get.args(["get", "--insecure", url, "-o"])
        .arg(out)
        .env("RUST_LOG", LOG);
    get
}

fn same(got: &Path, want: &[u8], report: &str) {
    let got = std::fs::read(got).unwrap_or_else(|e| panic!("no output ({e}):\n{report}"));
    assert_eq!(sha256(&got), sha256(want), "body differs:\n{report}");
}

#[test]
fn rfc9000_8_1_2_aioquic_client_follows_recoup_serve_retry() {
    let (root, data) = fixture("file.bin", SIZE);
    let (mut server, addr) = serve_with_retry(root.path());
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("aioquic_client.py"))
        .arg(format!("https://{addr}/file.bin"))
        .arg("-o")
        .arg(&got);
    let report = run_peer("aioquic client", cmd, &mut server);
    same(&got, &data, &report);
    assert!(
        report.contains("sent a Retry") && report.contains("Retry token validated"),
        "{report}"
    );
}

#[test]
fn rfc9000_8_1_2_recoup_get_follows_recoup_serve_retry() {
    let (root, data) = fixture("file.bin", SIZE);
    let (mut server, addr) = serve_with_retry(root.path());
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    let report = run_peer(
        "recoup get",
        recoup_get(&format!("https://{addr}/file.bin"), &got),
        &mut server,
    );
    same(&got, &data, &report);
    assert!(
        report.contains("following a Retry") && report.contains("Retry token validated"),
        "{report}"
    );
}

#[test]
fn rfc9000_8_1_2_recoup_get_follows_aioquic_retry() {
    let (root, data) = fixture("file.bin", SIZE);
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("aioquic_server.py"))
        .arg("--retry")
        .arg("--root")
        .arg(root.path());
    let (mut server, addr) = Proc::server("aioquic server --retry", cmd);
    let out = tempfile::tempdir().expect("tempdir");
    let got = out.path().join("got.bin");
    let report = run_peer(
        "recoup get",
        recoup_get(&format!("https://{addr}/file.bin"), &got),
        &mut server,
    );
    same(&got, &data, &report);
    assert!(report.contains("following a Retry"), "{report}");
}
