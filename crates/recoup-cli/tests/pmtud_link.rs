//! Path MTU discovery over real sockets (RFC 9000 §14.3, RFC 8899): `recoup serve` sends a 10 MiB
//! file to the unmodified quinn client through `recoup link --mtu`, a hop that drops datagrams
//! above a size. The server's qlog shows what it sent.

mod common;

use std::path::Path;
use std::process::Command;

use common::{check_download, fixture, link_command, recoup, run_client, Proc};

const FILE_SIZE: usize = 10 * 1024 * 1024;

/// What the server sent: (UDP payload bytes, whether the packet was a probe: PING alone).
fn sent(qlog: &Path) -> Vec<(u64, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(qlog).expect("qlog dir") {
        let path = entry.expect("dir entry").path();
        let bytes = std::fs::read(&path).expect("read qlog");
        for record in bytes.split(|&b| b == 0x1e).filter(|r| !r.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(record).expect("qlog record");
            if v["name"] != "transport:packet_sent" {
                continue;
            }
            let frames = v["data"]["frames"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            let probe = frames.len() == 1 && frames[0]["frame_type"] == "ping";
            out.push((v["data"]["raw"]["length"].as_u64().unwrap_or(0), probe));
        }
    }
    out
}

/// Downloads the file with the quinn client through `recoup link --rtt 10ms --mtu MTU` and any
/// further link flags; returns the server's packets.
fn download_through_mtu(mtu: &str, flags: &[&str]) -> Vec<(u64, bool)> {
    let (root, data) = fixture("file.bin", FILE_SIZE);
    let out = tempfile::tempdir().expect("tempdir");
    let qlog = out.path().join("qlog");
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root.path())
        .env("QLOGDIR", &qlog)
        .env("RUST_LOG", "info");
    let (mut server, server_addr) = Proc::server("recoup serve", cmd);
    let mut link_flags = vec!["--rtt", "10ms", "--mtu", mtu];
    link_flags.extend_from_slice(flags);
    let (mut link, addr) = Proc::server("recoup link", link_command(server_addr, &link_flags));
    let got = out.path().join("got.bin");
    match run_client(recoup_interop::client::get(
        addr,
        "localhost",
        "/file.bin",
        &got,
    )) {
        Some(Ok(_)) => {}
        Some(Err(e)) => panic!(
            "quinn client failed: {e}\n{}\n{}",
            server.output(),
            link.output()
        ),
        None => panic!(
            "quinn client timed out\n{}\n{}",
            server.output(),
            link.output()
        ),
    }
    check_download(&got, &data, &server.output());
    drop(server);
    sent(&qlog)
}

/// A hop carrying 1400 bytes: the search settles within 20 bytes below it, and only probes
/// exceed it.
#[test]
fn discovery_settles_below_a_1400_byte_hop() {
    let packets = download_through_mtu("1400", &[]);
    let too_large: Vec<_> = packets.iter().filter(|&&(len, _)| len > 1400).collect();
    assert!(
        too_large.iter().all(|&&(_, probe)| probe),
        "data above the hop's MTU: {too_large:?}"
    );
    let largest = packets
        .iter()
        .filter(|&&(len, _)| len <= 1400)
        .map(|&(len, _)| len)
        .max()
        .unwrap_or(0);
    assert!(largest > 1380, "discovery stopped at {largest} bytes");
    assert!(
        too_large.len() >= 3,
        "the 1452-byte ceiling is tried three times"
    );
}

/// The hop's MTU drops from 1452 to 1350 bytes mid-download: the server falls back (three PTOs
/// without an acknowledgment) and the download completes byte-exact. The hop's rate keeps the
/// download longer than the 200 ms before the shrink on any machine (10 MiB at 100 Mbit/s take
/// 0.84 s); without it a fast loopback finished the file first.
#[test]
fn a_download_survives_the_path_mtu_shrinking_under_it() {
    let packets = download_through_mtu(
        "1452 then=1350 after=200ms",
        &["--rate", "100Mbps", "--queue", "droptail packets=300"],
    );
    let full = packets.iter().filter(|&&(len, _)| len > 1400).count();
    assert!(
        full > 50,
        "discovery reached 1452 before the MTU shrank: {full} packets"
    );
    let last_full = packets
        .iter()
        .rposition(|&(len, probe)| len > 1350 && !probe)
        .unwrap_or(0);
    let after = &packets[last_full + 1..];
    assert!(
        after.len() > 100,
        "the MTU shrank before the download ended: {} of {} packets after the last full one",
        after.len(),
        packets.len()
    );
}
