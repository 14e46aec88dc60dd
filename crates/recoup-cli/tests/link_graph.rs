//! `recoup plot LOG`: the throughput and delay graph of a `recoup link --log` (mm-link format)
//! file; a malformed log is an error naming the file and the line.

use std::fmt::Write as _;
use std::process::Command;

fn recoup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recoup"))
}

#[test]
fn a_link_log_becomes_a_throughput_and_delay_graph() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("down.log");
    // Two seconds of 1200-byte datagrams every 2 ms through a 30 ms link, as mm-link logs them
    // (with a delivery opportunity line, which recoup's relay does not write).
    let mut text = String::from("# mahimahi mm-link (downlink)\n# init timestamp: 1700000000000\n# base timestamp: 0\n0 # 1504\n");
    for i in 0..1000u64 {
        let _ = writeln!(text, "{} + 1200", 2 * i);
        let _ = writeln!(text, "{} - 1200 30", 2 * i + 30);
    }
    std::fs::write(&log, text).expect("write log");
    let out = recoup().arg("plot").arg(&log).output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(dir.path().join("down.png")).expect("down.png");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);

    std::fs::write(&log, "0 + 1200\n5 ? 1200\n").expect("write bad log");
    let out = recoup().arg("plot").arg(&log).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&log.display().to_string()) && err.contains("line 2"),
        "{err}"
    );
}
