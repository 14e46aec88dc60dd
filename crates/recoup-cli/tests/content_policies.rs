//! `recoup serve --live-policy` / `--file-policy`: a connection's first request chooses its
//! loss-recovery policy. Through `recoup link` at 5 % loss, a file download under `arq` sends no
//! copies and a live stream under `fixed:1` does (the server's qlog), both byte-exact.

mod common;

use std::time::Duration;

use common::{count_qlog, fixture, link_command, run_get, serve_files, Proc};

/// Waits until the server logged `n` connection closes (its qlog traces are then complete).
fn wait_for_closes(server: &mut Proc, n: usize) {
    let deadline = common::now() + Duration::from_secs(30);
    while server.stderr_lines("connection closed").len() < n {
        assert!(
            common::now() < deadline,
            "{n} closes not seen:\n{}",
            server.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_first_request_chooses_the_live_or_the_file_policy() {
    let (root, data) = fixture("file.bin", 2 << 20);
    let qlog = tempfile::tempdir().expect("tempdir");
    let qlog_dir = qlog.path().to_str().expect("utf-8 path");
    let (mut server, addr) = serve_files(
        root.path(),
        &[
            "--live-policy",
            "fixed:1",
            "--file-policy",
            "arq",
            "--idle-timeout",
            "3s",
            "--qlog-dir",
            qlog_dir,
        ],
    );
    let link_flags = ["--rtt", "40ms", "--loss", "bernoulli 5%", "--seed", "7"];
    let (_link, link_addr) = Proc::server("recoup link", link_command(addr, &link_flags));
    let out = tempfile::tempdir().expect("tempdir");

    let file = out.path().join("file.bin");
    let args = [
        format!("https://{link_addr}/file.bin"),
        "--insecure".into(),
        "-o".into(),
        file.display().to_string(),
    ];
    let (status, log) = run_get(&args, &mut server);
    assert!(status.success(), "{log}\n{}", server.output());
    common::check_download(&file, &data, &log);
    wait_for_closes(&mut server, 1);
    let files = count_qlog(qlog.path());
    assert_eq!(files.traces, 1, "{files:?}");
    assert!(
        files.retransmissions > 0,
        "5 % loss lost nothing: {files:?}"
    );
    assert_eq!(
        files.copies, 0,
        "the file policy, arq, sent copies: {files:?}"
    );

    let live = out.path().join("live.bin");
    let args = [
        format!("https://{link_addr}/live/cam?bitrate=2Mbps&duration=4s"),
        "--insecure".into(),
        "-o".into(),
        live.display().to_string(),
    ];
    let (status, log) = run_get(&args, &mut server);
    assert!(status.success(), "{log}\n{}", server.output());
    wait_for_closes(&mut server, 2);
    let both = count_qlog(qlog.path());
    assert_eq!(both.traces, 2, "{both:?}");
    assert!(
        both.copies > 0,
        "the live policy, fixed:1, sent no copies: {both:?}"
    );
    assert!(
        !server.stderr_lines("loss-recovery policy set").is_empty(),
        "{}",
        server.output()
    );
}
