//! What the tests that run the built `recoup` binary and peer processes share: processes that
//! are killed when their guard drops, bounded waits, logs shown when something fails.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Bound on a peer's run ([`run_peer`]).
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on one `recoup get` run ([`run_get`]).
pub const GET_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on a server's start, until it prints its address.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a server behind a lossy `recoup link` may take to see a peer's connection end: a
/// peer's CONNECTION_CLOSE crosses the link once and is not retransmitted (RFC 9000 §10.2), so
/// when the link loses it the server ends the connection at `recoup serve`'s 30 s idle timeout
/// (§10.1; the peers' are no shorter) instead; and a margin.
pub const CLOSE_OVER_LOSS_TIMEOUT: Duration = Duration::from_secs(45);

#[expect(
    clippy::disallowed_methods,
    reason = "the interop tests bound real waits on real processes"
)]
pub fn now() -> Instant {
    Instant::now()
}

pub fn recoup() -> &'static str {
    env!("CARGO_BIN_EXE_recoup")
}

pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// `recoup serve` of the files in `root`, with `extra` flags, logging at info level.
pub fn serve_files(root: &Path, extra: &[&str]) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra)
        .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

/// `recoup serve` of the files in `root` over TLS with `cert` and `key` (HTTP/3 for a browser),
/// with BBR, `policy` and a qlog directory, logging at info level.
pub fn serve_tls(
    root: &Path,
    cert: &Path,
    key: &Path,
    policy: &str,
    qlog: &Path,
) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--cc", "bbr"])
        .args(["--policy", policy, "--root"])
        .arg(root)
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key)
        .arg("--qlog-dir")
        .arg(qlog)
        .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

/// `recoup serve` with BBR, `policy` and a qlog directory, logging at info level (the live tests
/// wait for its log lines).
pub fn serve_live(policy: &str, qlog: &Path) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--cc",
        "bbr",
        "--policy",
        policy,
    ])
    .arg("--qlog-dir")
    .arg(qlog)
    .env("RUST_LOG", "info");
    Proc::server("recoup serve", cmd)
}

/// `recoup link` on a free loopback port in front of `upstream`, emulating the path `flags`.
pub fn link_command(upstream: SocketAddr, flags: &[&str]) -> Command {
    let mut cmd = Command::new(recoup());
    cmd.args(["link", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.to_string())
        .args(flags);
    cmd
}

/// `tests/interop/chromium_player.py` on the page at `url`, pinning `cert`, saving a
/// screenshot, waiting at most `timeout_s` for the page's summary.
pub fn chromium_player(url: &str, cert: &Path, screenshot: &Path, timeout_s: u64) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("chromium_player.py"))
        .args(["--url", url])
        .arg("--cert")
        .arg(cert)
        .arg("--screenshot")
        .arg(screenshot)
        .args(["--timeout", &timeout_s.to_string()]);
    cmd
}

/// The unmodified aioquic live player (`tests/interop/live_player.py`) fetching `url`.
pub fn live_player(url: &str) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(interop_dir().join("live_player.py"))
        .args(["--insecure", "--url", url]);
    cmd
}

/// A directory with `name` holding `size` deterministic pseudo-random bytes (xorshift64).
pub fn fixture(name: &str, size: usize) -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut data = Vec::with_capacity(size);
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(size);
    std::fs::write(dir.path().join(name), &data).expect("write fixture");
    (dir, data)
}

/// Hex SHA-256, for comparing downloads in messages that stay short.
/// Runs an in-process client (`recoup_interop`'s quinn or h3-quinn) on a fresh current-thread
/// runtime for at most [`DOWNLOAD_TIMEOUT`]; `None` if it timed out.
pub fn run_client<F: std::future::Future>(client: F) -> Option<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async { tokio::time::timeout(DOWNLOAD_TIMEOUT, client).await.ok() })
}

/// Panics with `report` unless the file at `got` holds exactly `want`.
pub fn check_download(got: &Path, want: &[u8], report: &str) {
    let got = std::fs::read(got).unwrap_or_else(|e| panic!("no output file ({e}):\n{report}"));
    assert_eq!(
        (got.len(), sha256(&got)),
        (want.len(), sha256(want)),
        "downloaded file differs:\n{report}"
    );
}

pub fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A started process: killed on drop; its stderr (and stdout after the first line) go to files
/// shown when something fails.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log_dir: tempfile::TempDir,
}

impl Proc {
    /// Starts `cmd` and waits for a `listening on ADDR` line on its stdout.
    pub fn server(name: &str, mut cmd: Command) -> (Self, SocketAddr) {
        let log_dir = tempfile::tempdir().expect("tempdir");
        let stderr = std::fs::File::create(log_dir.path().join("stderr")).expect("log");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        let mut rest = std::fs::File::create(log_dir.path().join("stdout")).expect("log");
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            tx.send(first).ok();
            // Keep draining so the server never blocks on a full pipe.
            for line in lines.map_while(Result::ok) {
                writeln!(rest, "{line}").ok();
            }
        });
        let mut proc = Self {
            name: name.to_owned(),
            child,
            log_dir,
        };
        let line = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            other => panic!(
                "{name} did not print its address ({other:?})\n{}",
                proc.output()
            ),
        };
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} printed {line:?}\n{}", proc.output()));
        (proc, addr)
    }

    /// What it printed on stdout after its address.
    pub fn stdout(&self) -> String {
        read_log(&self.log_dir.path().join("stdout"))
    }

    /// Every line of its stderr (the whole log, not its end) that contains `needle`.
    pub fn stderr_lines(&self, needle: &str) -> Vec<String> {
        std::fs::read_to_string(self.log_dir.path().join("stderr"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    pub fn output(&mut self) -> String {
        if let Ok(Some(status)) = self.child.try_wait() {
            format!(
                "--- {} exited ({status}); stderr:\n{}",
                self.name,
                read_log(&self.log_dir.path().join("stderr"))
            )
        } else {
            format!(
                "--- {} (running) stderr:\n{}",
                self.name,
                read_log(&self.log_dir.path().join("stderr"))
            )
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

pub fn read_log(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        f.read_to_string(&mut s).ok();
    }
    // The end of a long log is where the failure is.
    let cut = s.len().saturating_sub(20_000);
    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    s[cut..].to_owned()
}

/// Runs a peer to completion within `DOWNLOAD_TIMEOUT`; panics with its output (and the
/// server's) if it fails or hangs.
pub fn run_peer(name: &str, cmd: Command, server: &mut Proc) -> String {
    run_peer_within(name, cmd, server, DOWNLOAD_TIMEOUT)
}

/// [`run_peer`] with another bound on its run time.
pub fn run_peer_within(name: &str, cmd: Command, server: &mut Proc, timeout: Duration) -> String {
    match run_peer_status_within(name, cmd, server, timeout) {
        (Some(s), report) if s.success() => report,
        (Some(s), report) => panic!("{name} failed ({s}):\n{report}"),
        (None, report) => panic!("{name} did not finish within {timeout:?}:\n{report}"),
    }
}

/// Runs a peer within `timeout` (killed past it); its exit status (`None` if killed) and a
/// report of its stdout, its stderr and the server's output, for tests that expect it to fail.
pub fn run_peer_status_within(
    name: &str,
    mut cmd: Command,
    server: &mut Proc,
    timeout: Duration,
) -> (Option<std::process::ExitStatus>, String) {
    let log_dir = tempfile::tempdir().expect("tempdir");
    let out = log_dir.path().join("out");
    let err = log_dir.path().join("err");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("log"))
        .stderr(std::fs::File::create(&err).expect("log"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
    let status = wait_child(&mut child, timeout);
    let report = format!(
        "--- {name} stdout:\n{}\n--- {name} stderr:\n{}\n{}",
        read_log(&out),
        read_log(&err),
        server.output()
    );
    (status, report)
}

impl Proc {
    /// Waits until the process's stderr contains `needle`; `false` if it did not within `timeout`.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = now() + timeout;
        let path = self.log_dir.path().join("stderr");
        loop {
            if read_log(&path).contains(needle) {
                return true;
            }
            if now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Packets in the qlog traces (`.sqlog`, JSON text sequences) of a directory.
#[derive(Debug, Default)]
pub struct QlogCount {
    pub traces: usize,
    pub packets_sent: u64,
    /// Packets marked as carrying copies of lost data (`"recoup": {"kind": "copy"}`).
    pub copies: u64,
    pub retransmissions: u64,
    /// Packets carrying a FEC repair symbol (recoup's REPAIR frame, docs/FEC.md).
    pub repairs: u64,
    /// The longest packet sent (qlog `raw.length`), and how many were longer than 1400 bytes.
    pub longest: u64,
    pub over_1400: u64,
}

/// Counts the packets of every `.sqlog` trace in `dir`; panics on a record that is not JSON.
pub fn count_qlog(dir: &Path) -> QlogCount {
    let mut count = QlogCount::default();
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("qlog dir {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "sqlog") {
            continue;
        }
        count.traces += 1;
        let bytes = std::fs::read(&path).expect("read qlog");
        for record in bytes.split(|&b| b == 0x1e).filter(|r| !r.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(record)
                .unwrap_or_else(|e| panic!("{}: bad record ({e})", path.display()));
            if v["name"] != "transport:packet_sent" {
                continue;
            }
            count.packets_sent += 1;
            let length = v["data"]["raw"]["length"].as_u64().unwrap_or(0);
            count.longest = count.longest.max(length);
            count.over_1400 += u64::from(length > 1400);
            match v["data"]["recoup"]["kind"].as_str() {
                Some("copy") => count.copies += 1,
                Some("retransmission") => count.retransmissions += 1,
                _ => {}
            }
            let frames = v["data"]["frames"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            if frames.iter().any(|f| f["frame_type"] == "recoup_repair") {
                count.repairs += 1;
            }
        }
    }
    count
}

/// Runs `recoup get` with `args` (RUST_LOG=info, no terminal) within [`GET_TIMEOUT`]; its exit
/// status and stderr. `server`'s log is in the panic if it hangs.
pub fn run_get(args: &[String], server: &mut Proc) -> (std::process::ExitStatus, String) {
    let logs = tempfile::tempdir().expect("tempdir");
    let err = logs.path().join("err");
    let mut child = spawn_get(args, &err);
    match wait_child(&mut child, GET_TIMEOUT) {
        Some(status) => (status, read_log(&err)),
        None => panic!(
            "recoup get {args:?} still running after {GET_TIMEOUT:?}:\n{}\n{}",
            read_log(&err),
            server.output()
        ),
    }
}

/// Starts `recoup get ARGS` (RUST_LOG=info, no terminal) with its stderr in `err`.
pub fn spawn_get<S: AsRef<std::ffi::OsStr>>(args: &[S], err: &Path) -> Child {
    Command::new(recoup())
        .arg("get")
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).expect("log"))
        .spawn()
        .expect("recoup get")
}

/// Waits for `child` to exit within `timeout`; `None` (and the child killed) if it did not.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if now() > deadline {
            child.kill().ok();
            child.wait().ok();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A self-signed certificate and key in `dir` (rcgen: ECDSA P-256, which Chromium's QUIC
/// accepts), for the server to use and the browser to pin.
pub fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("rcgen");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, generated.cert.pem()).expect("write cert");
    std::fs::write(&key, generated.key_pair.serialize_pem()).expect("write key");
    (cert, key)
}

/// Percent-encodes a query value: everything but unreserved characters (RFC 3986 §2.3) and `/`
/// (allowed in a query, §3.4).
pub fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `recoup get`'s arguments to fetch `url` from a self-signed server into `out`.
pub fn get_args(url: String, out: &Path) -> [String; 4] {
    [
        url,
        "--insecure".into(),
        "-o".into(),
        out.display().to_string(),
    ]
}

/// Waits until `server` logged `n` connections released (their traces and counters are final).
pub fn wait_for_released(server: &mut Proc, n: usize) {
    let deadline = now() + Duration::from_secs(30);
    while server.stderr_lines("connection released").len() < n {
        assert!(
            now() < deadline,
            "{n} connections not released:\n{}",
            server.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
