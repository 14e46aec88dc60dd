//! `recoup viewers` (the scale benchmark's load generator): many live viewers from one process,
//! every frame checked, and the server releasing each connection when its viewer closes it.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{recoup, serve_files};

#[test]
fn forty_viewers_see_every_frame_and_the_server_releases_each_connection() {
    let www = tempfile::tempdir().expect("tempdir");
    let (server, addr) = serve_files(www.path(), &[]);
    let out = Command::new(recoup())
        .args(["viewers", "--insecure", "--count", "40"])
        .arg(format!(
            "https://{addr}/live/v{{i}}?bitrate=300kbps&fps=20&duration=2s"
        ))
        .output()
        .expect("recoup viewers");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "recoup viewers failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 2 s at 20 fps: 40 frames each.
    assert!(
        stdout.contains("40 of 40 viewers saw their whole stream: 1600 of 1600 frames intact"),
        "{stdout}"
    );
    assert!(
        server.wait_for_log("open=0", Duration::from_secs(5)),
        "the server did not release every connection"
    );
}

#[test]
fn a_url_that_is_not_a_live_stream_is_refused_before_connecting() {
    let out = Command::new(recoup())
        .args([
            "viewers",
            "--insecure",
            "--count",
            "3",
            "https://127.0.0.1:9/file.bin",
        ])
        .output()
        .expect("recoup viewers");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("/file.bin is not a live stream"),
        "{stderr}"
    );
}
