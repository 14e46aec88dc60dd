//! The C test: `tests/c/loss_episode.c` is compiled with the system C compiler against the static
//! and the shared library, drives a policy through a loss episode and prints every call with the
//! policy's answer. The same calls are then replayed on the Rust policy directly; every answer must
//! be equal, and the episode must have made the policy decide something (copies, timers).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use recoup_recovery::{
    CopyRequest, DataRange, LossTrigger, LostData, PacketInfo, PolicySpec, RecoveryPolicy,
    RttSample, SendContext, SendKind, SendState, SentRange,
};
use recoup_time::Instant;

/// Where cargo put the static and shared library built for this test run: beside the test binary
/// in `<target>/<profile>/deps/` (`<profile>/` itself holds them only after a `cargo build`, and
/// may be stale).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .expect("test binary sits in <target>/<profile>/deps")
        .to_path_buf()
}

fn compile(out: &Path, link: &[&str]) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/loss_episode.c"))
        .arg("-o")
        .arg(out)
        .args(link)
        .status()
        .expect("run the C compiler (cc)");
    assert!(
        status.success(),
        "compiling loss_episode.c failed: {status}"
    );
}

fn run(exe: &Path, spec: &str, seed: u64) -> String {
    let out = Command::new(exe)
        .args([spec, &seed.to_string()])
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run loss_episode");
    assert!(
        out.status.success(),
        "loss_episode {spec} {seed} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("ASCII log")
}

/// Reads the numbers of one log line.
struct Fields<'a>(std::str::SplitWhitespace<'a>, &'a str);

impl Fields<'_> {
    fn u64(&mut self) -> u64 {
        let tok = self
            .0
            .next()
            .unwrap_or_else(|| panic!("short line: {}", self.1));
        tok.parse()
            .unwrap_or_else(|_| panic!("not a number {tok:?} in: {}", self.1))
    }
    fn at(&mut self) -> Instant {
        Instant::from_nanos(self.u64())
    }
    fn eq(&mut self) {
        assert_eq!(self.0.next(), Some("="), "no '=' in: {}", self.1);
    }
    fn packet(&mut self, ranges: &mut Vec<SentRange>) -> (u64, Instant, usize, SendKind) {
        let pn = self.u64();
        let sent = self.at();
        let bytes = usize::try_from(self.u64()).expect("small");
        let kind = match self.u64() {
            0 => SendKind::New,
            1 => SendKind::Retransmission,
            2 => SendKind::Copy,
            k => panic!("kind {k} in: {}", self.1),
        };
        ranges.clear();
        for _ in 0..self.u64() {
            let range = DataRange {
                stream: self.u64(),
                start: self.u64(),
                end: self.u64(),
            };
            let has = self.u64() != 0;
            let id = self.u64();
            ranges.push(SentRange {
                range,
                loss: has.then_some(id),
            });
        }
        (pn, sent, bytes, kind)
    }
}

fn trigger(v: u64) -> LossTrigger {
    match v {
        0 => LossTrigger::PacketThreshold,
        1 => LossTrigger::TimeThreshold,
        _ => LossTrigger::Pto,
    }
}

fn state(v: u64) -> SendState {
    match v {
        0 => SendState::OnMode,
        1 => SendState::OffMode,
        _ => SendState::CwndLimited,
    }
}

/// Counts of what the policy decided in the episode.
#[derive(Debug, Default)]
struct Decisions {
    copies: usize,
    timers: usize,
    rounds: usize,
}

/// Replays the C host's calls (the log after its `policy` line) on `p` and checks every answer.
fn replay(p: &mut recoup_recovery::Policy, log: &str) -> Decisions {
    let mut ranges = Vec::new();
    let mut decided = Decisions::default();
    for line in log.lines().skip(1) {
        let mut f = Fields(line.split_whitespace(), line);
        match f.0.next().expect("a call") {
            "sent" | "acked" => {
                let acked = line.starts_with("acked");
                let now = f.at();
                let (pn, sent, bytes, kind) = f.packet(&mut ranges);
                let info = PacketInfo {
                    pn,
                    sent,
                    bytes,
                    kind,
                    ranges: &ranges,
                };
                if acked {
                    p.on_packet_acked(now, &info);
                } else {
                    p.on_packet_sent(now, &info);
                }
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            "lost" => {
                let now = f.at();
                let trig = trigger(f.u64());
                let (pn, sent, bytes, kind) = f.packet(&mut ranges);
                let info = PacketInfo {
                    pn,
                    sent,
                    bytes,
                    kind,
                    ranges: &ranges,
                };
                p.on_packet_lost(now, &info, trig);
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            "data_lost" => {
                let now = f.at();
                let id = f.u64();
                let range = DataRange {
                    stream: f.u64(),
                    start: f.u64(),
                    end: f.u64(),
                };
                let round = u32::try_from(f.u64()).expect("small");
                let lost = LostData {
                    id,
                    range,
                    round,
                    first_sent: f.at(),
                    first_detected: f.at(),
                    lost_sent: f.at(),
                    trigger: trigger(f.u64()),
                };
                p.on_data_lost(now, &lost);
                decided.rounds += 1;
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            "data_acked" => {
                let now = f.at();
                let id = f.u64();
                p.on_data_acked(now, id);
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            "rtt" => {
                let now = f.at();
                let sample = RttSample {
                    latest: Duration::from_nanos(f.u64()),
                    smoothed: Duration::from_nanos(f.u64()),
                    min: Duration::from_nanos(f.u64()),
                    var: Duration::from_nanos(f.u64()),
                };
                p.on_rtt_update(now, &sample);
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            "state" => {
                let now = f.at();
                p.on_send_state(now, state(f.u64()));
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            "poll" => {
                let now = f.at();
                let ctx = SendContext {
                    state: state(f.u64()),
                    packets_sent: f.u64(),
                    cwnd: f.u64(),
                    bytes_in_flight: f.u64(),
                    bdp_packets: {
                        let has = f.u64() != 0;
                        let bdp = f.u64();
                        has.then_some(bdp)
                    },
                };
                let rust = p.poll_copy(now, &ctx);
                f.eq();
                let status = f.u64();
                let (id, beyond) = (f.u64(), f.u64() != 0);
                let c = (status == 0).then_some(CopyRequest {
                    id,
                    beyond_cwnd: beyond,
                });
                assert_eq!(c, rust, "C and Rust disagree on: {line}");
                decided.copies += usize::from(c.is_some());
            }
            "poll_timeout" => {
                f.eq();
                let status = f.u64();
                let at = f.u64();
                let c = (status == 0).then_some(at);
                assert_eq!(c, p.poll_timeout().map(Instant::as_nanos), "{line}");
            }
            "timeout" => {
                let now = f.at();
                p.on_timeout(now);
                decided.timers += 1;
                f.eq();
                assert_eq!(f.u64(), 0, "{line}");
            }
            other => panic!("unknown call {other:?} in: {line}"),
        }
    }
    decided
}

/// Builds the Rust twin of the C program's policy, then replays its log.
fn replay_spec(spec: &str, seed: u64, log: &str) -> Decisions {
    let parsed: PolicySpec = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut built = parsed.build(seed);
    let head = log.lines().next().expect("a policy line");
    assert_eq!(head, format!("policy {} {seed}", built.name()));
    replay(&mut built, log)
}

#[test]
fn c_host_decisions_equal_rust_decisions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let libs = lib_dir();
    let static_exe = dir.path().join("loss_episode_static");
    let shared_exe = dir.path().join("loss_episode_shared");
    compile(
        &static_exe,
        &[
            libs.join("librecoup_policy.a")
                .to_str()
                .expect("UTF-8 path"),
            "-lpthread",
            "-ldl",
            "-lm",
        ],
    );
    compile(
        &shared_exe,
        &["-L", libs.to_str().expect("UTF-8 path"), "-lrecoup_policy"],
    );
    for (spec, seed) in [
        ("autorec:alpha=30ms,beta=0.3,gamma=0.2", 7),
        ("art", 3),
        ("too", 5),
    ] {
        let log = run(&static_exe, spec, seed);
        assert_eq!(
            log,
            run(&shared_exe, spec, seed),
            "static and shared libraries differ"
        );
        let decided = replay_spec(spec, seed, &log);
        println!("{spec} seed {seed}: {decided:?}");
        assert!(
            decided.rounds > 50,
            "{spec}: the episode lost too little: {decided:?}"
        );
        assert!(
            decided.copies > 0,
            "{spec}: the policy sent no copy: {decided:?}"
        );
        if spec.starts_with("autorec") || spec == "too" {
            assert!(
                decided.timers > 0,
                "{spec}: no decision interval ran: {decided:?}"
            );
        }
    }
}
