//! `recoup serve --live-policy` / `--file-policy`: a connection's first request chooses its
//! loss-recovery policy. Through `recoup link` at 5 % loss, a file download under `arq` sends no
//! copies and a live stream under `fixed:1` does (the server's qlog), both byte-exact.

mod common;

use common::{count_qlog, fixture, link_command, run_get, serve_files, Proc};

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
    let args = common::get_args(format!("https://{link_addr}/file.bin"), &file);
    let (status, log) = run_get(&args, &mut server);
    assert!(status.success(), "{log}\n{}", server.output());
    common::check_download(&file, &data, &log);
    common::wait_for_released(&mut server, 1);
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
    let args = common::get_args(
        format!("https://{link_addr}/live/cam?bitrate=2Mbps&duration=4s"),
        &live,
    );
    let (status, log) = run_get(&args, &mut server);
    assert!(status.success(), "{log}\n{}", server.output());
    common::wait_for_released(&mut server, 2);
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
