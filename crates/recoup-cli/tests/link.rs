//! A real QUIC transfer through `recoup link`: `recoup get` downloads from `recoup serve` across
//! an emulated 20 ms, 20 Mbit/s path with 2 % random loss each way; the file must arrive intact
//! and the link must have dropped datagrams (so recovery was exercised). Every process is
//! killed when its guard drops, and every wait is bounded.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const FILE_SIZE: usize = 2 * 1024 * 1024;
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(30);
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);

#[expect(
    clippy::disallowed_methods,
    reason = "the test bounds real waits on real processes"
)]
fn now() -> Instant {
    Instant::now()
}

fn recoup() -> &'static str {
    env!("CARGO_BIN_EXE_recoup")
}

/// A started process, killed on drop; its stdout after the first line is kept for reports.
struct Proc {
    child: Child,
    rest: mpsc::Receiver<String>,
    log_dir: tempfile::TempDir,
}

impl Proc {
    /// Starts `recoup ARGS` and waits for its `listening on ADDR` line.
    fn server(args: &[&str]) -> (Self, SocketAddr) {
        let log_dir = tempfile::tempdir().expect("tempdir");
        let stderr = std::fs::File::create(log_dir.path().join("stderr")).expect("log");
        let mut child = Command::new(recoup())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start recoup");
        let stdout = child.stdout.take().expect("stdout");
        let (first_tx, first_rx) = mpsc::channel();
        let (rest_tx, rest) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            first_tx.send(lines.next()).ok();
            for line in lines.map_while(Result::ok) {
                rest_tx.send(line).ok();
            }
        });
        let proc = Self {
            child,
            rest,
            log_dir,
        };
        let line = match first_rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            other => panic!("{args:?} did not print its address ({other:?})"),
        };
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("{args:?} printed {line:?}"));
        (proc, addr)
    }

    fn stderr(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.log_dir.path().join("stderr")) {
            f.read_to_string(&mut s).ok();
        }
        let cut = s.len().saturating_sub(10_000);
        let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        s[cut..].to_owned()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `FILE_SIZE` deterministic pseudo-random bytes (xorshift64).
fn content() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut data = Vec::with_capacity(FILE_SIZE);
    while data.len() < FILE_SIZE {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(FILE_SIZE);
    data
}

#[test]
fn quic_download_through_a_lossy_link_is_intact() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = content();
    std::fs::write(root.path().join("file.bin"), &data).expect("write");
    let root_arg = root.path().to_str().expect("utf-8 path");
    let (server, server_addr) =
        Proc::server(&["serve", "--listen", "127.0.0.1:0", "--root", root_arg]);
    let upstream = server_addr.to_string();
    let (link, link_addr) = Proc::server(&[
        "link",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &upstream,
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

    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("file.bin");
    let mut get = Command::new(recoup())
        .args(["get", "--insecure", "-o"])
        .arg(&out)
        .arg(format!("https://{link_addr}/file.bin"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start recoup get");
    let deadline = now() + DOWNLOAD_TIMEOUT;
    let status = loop {
        if let Some(status) = get.try_wait().expect("wait") {
            break Some(status);
        }
        if now() > deadline {
            get.kill().ok();
            get.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut get_err = String::new();
    if let Some(mut e) = get.stderr.take() {
        e.read_to_string(&mut get_err).ok();
    }
    let context = || {
        format!(
            "--- get stderr:\n{get_err}\n--- link stderr:\n{}\n--- serve stderr:\n{}",
            link.stderr(),
            server.stderr()
        )
    };
    assert!(
        status.is_some_and(|s| s.success()),
        "recoup get failed or hung ({status:?}):\n{}",
        context()
    );
    let got = std::fs::read(&out).unwrap_or_else(|e| panic!("no output ({e}):\n{}", context()));
    assert_eq!(
        (got.len(), sha256(&got)),
        (data.len(), sha256(&data)),
        "{}",
        context()
    );

    // SIGINT, as Ctrl-C would: the link then prints its summary and exits.
    let pid = link.child.id().to_string();
    let interrupted = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(interrupted, "could not interrupt the link");
    let mut summary = Vec::new();
    let until = now() + STARTUP_TIMEOUT;
    while now() < until {
        match link.rest.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => summary.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) if summary.len() >= 5 => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let summary = summary.join("\n");
    println!("{summary}");
    let lost = |dir: &str| -> u64 {
        summary
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{dir}:")))
            .and_then(|l| l.split("lost ").nth(1))
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {dir} loss count in the summary:\n{summary}"))
    };
    assert!(
        lost("down") > 0,
        "2 % loss over a 2 MB download dropped nothing:\n{summary}"
    );
}
