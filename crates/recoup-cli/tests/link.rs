//! A real QUIC transfer through `recoup link`: `recoup get` downloads from `recoup serve` across
//! an emulated 20 ms, 20 Mbit/s path with 2 % random loss each way; the file must arrive intact,
//! and the link's summary (printed on Ctrl-C) must show that it dropped datagrams, so recovery
//! was exercised. The same with FEC (docs/FEC.md) at 5 % loss: `recoup get` must report packets
//! restored from repair symbols. The same through netem's duplication and reordering: the file
//! arrives intact and the summary counts copies and reordered datagrams. Every process is
//! killed when its guard drops, and every wait is bounded.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    count_qlog, fixture, link_command, now, recoup, run_peer, sha256, Proc, STARTUP_TIMEOUT,
};

const FILE_SIZE: usize = 2 * 1024 * 1024;

/// The number after `counter ` (e.g. `lost`) on the summary line of direction `dir`.
fn count(summary: &str, dir: &str, counter: &str) -> Option<u64> {
    summary
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dir}:")))?
        .split(&format!(" {counter} "))
        .nth(1)?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// Sends SIGINT, as Ctrl-C would: the link prints its summary and exits. Returns its stdout.
fn interrupt(link: &mut Proc) -> String {
    let interrupted = Command::new("kill")
        .args(["-INT", &link.child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(interrupted, "could not interrupt the link");
    let deadline = now() + STARTUP_TIMEOUT;
    while link.child.try_wait().expect("wait").is_none() && now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The reader thread may still be writing the last lines.
    std::thread::sleep(Duration::from_millis(200));
    let summary = link.stdout();
    println!("{summary}");
    summary
}

/// Runs `recoup serve` and `recoup get` of a 2 MB file through `recoup link` with `flags`,
/// checks the download is byte-exact, and returns the link's summary.
fn download_through(flags: &[&str]) -> String {
    let (root, data) = fixture("file.bin", FILE_SIZE);
    let mut serve = Command::new(recoup());
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root.path());
    let (mut server, server_addr) = Proc::server("recoup serve", serve);
    let (mut link, link_addr) = Proc::server("recoup link", link_command(server_addr, flags));
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("file.bin");
    let mut get = Command::new(recoup());
    get.args(["get", "--insecure", "-o"])
        .arg(&out)
        .arg(format!("https://{link_addr}/file.bin"));
    let report = run_peer("recoup get", get, &mut server);
    let got = std::fs::read(&out)
        .unwrap_or_else(|e| panic!("no output ({e}):\n{report}\n{}", link.output()));
    assert_eq!(
        (got.len(), sha256(&got)),
        (data.len(), sha256(&data)),
        "{report}\n{}",
        link.output()
    );
    println!("{report}");
    interrupt(&mut link)
}

#[test]
fn quic_download_through_a_lossy_link_is_intact() {
    let summary = download_through(&[
        "--rtt",
        "20ms",
        "--rate",
        "20Mbps",
        "--queue",
        "droptail packets=200",
        "--loss",
        "bernoulli 2%",
        "--seed",
        "3",
        "--duration",
        "60s",
    ]);
    let lost_down =
        count(&summary, "down", "lost").unwrap_or_else(|| panic!("no summary:\n{summary}"));
    assert!(
        lost_down > 0,
        "2 % loss over a 2 MB download dropped nothing:\n{summary}"
    );
}

/// netem's `duplicate` and `delay … reorder` in both directions: QUIC must discard the copies
/// and reassemble the overtaken packets into a byte-exact file, and the summary must show that
/// the link did both.
#[test]
fn quic_download_through_duplication_and_reordering_is_intact() {
    let summary = download_through(&[
        "--rtt",
        "20ms",
        "--rate",
        "20Mbps",
        "--queue",
        "droptail packets=200",
        "--duplicate",
        "5%",
        "--reorder",
        "25% 50% gap 5",
        "--seed",
        "3",
        "--duration",
        "60s",
    ]);
    for dir in ["down", "up"] {
        for counter in ["duplicated", "reordered"] {
            let n = count(&summary, dir, counter)
                .unwrap_or_else(|| panic!("no {counter} count for {dir}:\n{summary}"));
            assert!(
                n > 0,
                "{dir}: {counter} {n} over a 2 MB download:\n{summary}"
            );
        }
    }
}

#[test]
fn fec_download_through_a_lossy_link_restores_packets_and_is_intact() {
    let (root, data) = fixture("file.bin", FILE_SIZE);
    let qlog = tempfile::tempdir().expect("tempdir");
    let mut serve = Command::new(recoup());
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--fec", "block:k=4,m=1"])
        .arg("--qlog-dir")
        .arg(qlog.path())
        .arg("--root")
        .arg(root.path());
    let (mut server, server_addr) = Proc::server("recoup serve", serve);
    let link = link_command(
        server_addr,
        &[
            "--rtt",
            "20ms",
            "--rate",
            "20Mbps",
            "--queue",
            "droptail packets=200",
            "--loss",
            "bernoulli 5%",
            "--seed",
            "5",
            "--duration",
            "60s",
        ],
    );
    let (mut link, link_addr) = Proc::server("recoup link", link);
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("file.bin");
    let mut get = Command::new(recoup());
    get.args(["get", "--insecure", "-o"])
        .arg(&out)
        .arg(format!("https://{link_addr}/file.bin"));
    let report = run_peer("recoup get", get, &mut server);
    let got = std::fs::read(&out)
        .unwrap_or_else(|e| panic!("no output ({e}):\n{report}\n{}", link.output()));
    assert_eq!(
        (got.len(), sha256(&got)),
        (data.len(), sha256(&data)),
        "{report}\n{}",
        link.output()
    );
    println!("{report}");
    let restored: u64 = report
        .split("FEC restored ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("recoup get reported no FEC:\n{report}"));
    assert!(restored > 0, "nothing restored at 5 % loss:\n{report}");
    drop(server);
    let count = count_qlog(qlog.path());
    assert!(
        count.repairs > 0,
        "the server's qlog shows no repair packet: {count:?}"
    );
}
