//! `art`, `art-mab` and `art-dqn` under `reading=text` decide exactly as they did before
//! `reading=code` (quic-art's behaviour) became their default: a scripted connection drives each configuration,
//! and a digest of everything the policy answered (every copy asked for, with its time and
//! whether it may pass the window; every timer; the final levels, p_r and arm means) must equal
//! the digest recorded from the code before the change. The simulator's end-to-end results are
//! checked on top of this by running the scenarios.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::{
    ArtReading, DataRange, LossTrigger, LostData, PacketInfo, Policy, PolicySpec, RecoveryPolicy,
    RttSample, SendContext, SendKind, SendState, SentRange,
};
use recoup_time::Instant;

mod common;

/// FNV-1a over 64-bit words: a stable digest of the policy's answers.
struct Digest(u64);

impl Digest {
    fn word(&mut self, w: u64) {
        for b in w.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

struct Sent {
    pn: u64,
    sent: Instant,
    kind: SendKind,
    ranges: [SentRange; 1],
    /// When its fate is known, and whether it is lost.
    resolves: Instant,
    lost: bool,
}

impl Sent {
    fn info(&self) -> PacketInfo<'_> {
        PacketInfo {
            pn: self.pn,
            sent: self.sent,
            bytes: 1200,
            kind: self.kind,
            ranges: &self.ranges,
        }
    }
}

struct Lineage {
    range: DataRange,
    round: u32,
    first_sent: Instant,
    first_detected: Instant,
    /// The newest send: only its loss starts the next round.
    newest: u64,
}

/// A lossy connection driven in the transport's order: acknowledgements of one instant before
/// its losses, `on_data_acked` after the acknowledgement that completes a lineage, copies asked
/// for only after the round's retransmission went out, then one retransmission or new packet.
struct Connection {
    p: Policy,
    rng: ChaCha8Rng,
    digest: Digest,
    now: Instant,
    pn: u64,
    copies: u64,
    next_id: u64,
    loss: f64,
    min_rtt: Duration,
    in_flight: Vec<Sent>,
    open: BTreeMap<u64, Lineage>,
    /// Lineages whose round's retransmission has not gone out yet, in loss order.
    queued: Vec<u64>,
    state: SendState,
    /// A copy taken from the policy and held by the transport.
    pending: Option<u64>,
}

impl Connection {
    fn send(&mut self, kind: SendKind, range: DataRange, loss: Option<u64>) {
        let jitter = Duration::from_micros(self.rng.gen_range(0..15_000));
        let s = Sent {
            pn: self.pn,
            sent: self.now,
            kind,
            ranges: [SentRange { range, loss }],
            resolves: self.now + self.min_rtt + jitter,
            lost: self.rng.gen_bool(self.loss),
        };
        self.p.on_packet_sent(self.now, &s.info());
        if let Some(id) = loss {
            if let Some(l) = self.open.get_mut(&id) {
                l.newest = s.pn;
            }
        }
        self.pn += 1;
        self.in_flight.push(s);
    }

    fn resolve(&mut self) {
        let now = self.now;
        let (due, rest): (Vec<Sent>, Vec<Sent>) =
            self.in_flight.drain(..).partition(|s| s.resolves <= now);
        self.in_flight = rest;
        for s in due.iter().filter(|s| !s.lost) {
            self.p.on_packet_acked(now, &s.info());
            if let Some(id) = s.ranges[0].loss.filter(|id| self.open.contains_key(id)) {
                self.open.remove(&id);
                self.queued.retain(|&q| q != id);
                self.p.on_data_acked(now, id);
            }
        }
        for s in due.iter().filter(|s| s.lost) {
            let trigger = if self.rng.gen_bool(0.8) {
                LossTrigger::PacketThreshold
            } else {
                LossTrigger::TimeThreshold
            };
            self.p.on_packet_lost(now, &s.info(), trigger);
            let id = match s.ranges[0].loss {
                None => {
                    self.next_id += 1;
                    let lineage = Lineage {
                        range: s.ranges[0].range,
                        round: 1,
                        first_sent: s.sent,
                        first_detected: now,
                        newest: s.pn,
                    };
                    self.open.insert(self.next_id, lineage);
                    self.next_id
                }
                Some(id) => match self.open.get_mut(&id) {
                    Some(l) if l.newest == s.pn => {
                        l.round += 1;
                        id
                    }
                    _ => continue,
                },
            };
            let l = &self.open[&id];
            let lost = LostData {
                id,
                range: l.range,
                round: l.round,
                first_sent: l.first_sent,
                first_detected: l.first_detected,
                lost_sent: s.sent,
                trigger,
            };
            self.queued.push(id);
            self.p.on_data_lost(now, &lost);
        }
    }

    fn step(&mut self, step: u64) {
        self.now += Duration::from_micros(self.rng.gen_range(0..2500));
        let now = self.now;
        if step % 7 == 0 {
            let smoothed = self.min_rtt + Duration::from_micros(self.rng.gen_range(0..20_000));
            let rtt = RttSample {
                latest: smoothed,
                smoothed,
                min: self.min_rtt,
                var: smoothed / 4,
            };
            self.p.on_rtt_update(now, &rtt);
        }
        if self.rng.gen_bool(0.05) {
            self.state = match self.rng.gen_range(0..3) {
                0 => SendState::OnMode,
                1 => SendState::OffMode,
                _ => SendState::CwndLimited,
            };
            self.p.on_send_state(now, self.state);
        }
        if let Some(t) = self.p.poll_timeout() {
            self.digest.word(t.as_nanos());
            if t <= now {
                self.p.on_timeout(now);
            }
        }
        self.resolve();
        let cwnd = self.rng.gen_range(10..200) * 1200;
        let bdp_packets = if self.rng.gen_bool(0.8) {
            Some(self.rng.gen_range(1..150))
        } else {
            None
        };
        loop {
            if self.pending.is_none() {
                let ctx = SendContext {
                    state: self.state,
                    packets_sent: self.pn,
                    cwnd,
                    bytes_in_flight: self.in_flight.len() as u64 * 1200,
                    bdp_packets,
                };
                let Some(c) = self.p.poll_copy(now, &ctx) else {
                    break;
                };
                self.digest.word(c.id);
                self.digest.word(u64::from(c.beyond_cwnd));
                self.digest.word(self.pn);
                self.digest.word(now.as_nanos());
                self.pending = Some(c.id);
            }
            let Some(id) = self.pending else { break };
            // The transport holds a copy whose round's retransmission is still queued, and drops
            // one whose data was acknowledged meanwhile.
            if self.queued.contains(&id) {
                break;
            }
            self.pending = None;
            if let Some(l) = self.open.get(&id) {
                let range = l.range;
                self.copies += 1;
                self.send(SendKind::Copy, range, Some(id));
            }
        }
        if self.state == SendState::OffMode && self.queued.is_empty() {
            return;
        }
        if self.queued.is_empty() {
            let range = DataRange {
                stream: 0,
                start: self.pn * 1000,
                end: self.pn * 1000 + 1000,
            };
            self.send(SendKind::New, range, None);
        } else {
            let id = self.queued.remove(0);
            let range = self.open[&id].range;
            self.send(SendKind::Retransmission, range, Some(id));
        }
    }
}

/// The digest of `spec`'s answers over a scripted connection, and the copies it asked for.
fn drive(spec: &str, seed: u64, loss: f64) -> (u64, u64) {
    let parsed: PolicySpec = spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xa7);
    let min_rtt = Duration::from_millis(rng.gen_range(10..40));
    let mut c = Connection {
        p: parsed.build(seed),
        rng,
        digest: Digest(0xcbf2_9ce4_8422_2325),
        now: Instant::ZERO,
        pn: 0,
        copies: 0,
        next_id: 0,
        loss,
        min_rtt,
        in_flight: Vec::new(),
        open: BTreeMap::new(),
        queued: Vec::new(),
        state: SendState::OnMode,
        pending: None,
    };
    for step in 0..3000 {
        c.step(step);
    }
    let now = c.now;
    for id in std::mem::take(&mut c.open).into_keys() {
        c.p.on_data_acked(now, id);
    }
    let Policy::Art(a) = &c.p else {
        panic!("{spec} is not an ART policy")
    };
    for round in 1..=5 {
        c.digest.word(u64::from(a.redundancy(round).unwrap_or(0)));
    }
    c.digest.word(a.p_r().unwrap_or(-1.0).to_bits());
    for r in 1..=10 {
        c.digest.word(a.arm_mean(r).unwrap_or(-1.0).to_bits());
    }
    assert_eq!(a.tracked(), 0, "{spec}");
    c.digest.word(c.copies);
    (c.digest.0, c.copies)
}

/// (configuration without its reading, seed, loss rate, digest, copies), recorded from the
/// code before `reading=` existed, when these configurations were the only reading of `art` and
/// `art-mab`.
const BEFORE_READINGS: &[(&str, u64, f64, u64, u64)] = &[
    ("art:", 1, 0.05, 0xf079273e5d3e4629, 24),
    ("art:", 2, 0.2, 0x8ca25b1ad5f25fce, 295),
    ("art:", 3, 0.4, 0x441fc635feee92a7, 965),
    ("art:level=copies", 1, 0.05, 0x67f594f4510388bb, 109),
    ("art:level=copies", 2, 0.2, 0x7a48183061f4afe4, 602),
    ("art:level=copies", 3, 0.4, 0xc57901f6ba3580f9, 1709),
    ("art:scheduler=off", 1, 0.05, 0xf079273e5d3e4629, 24),
    ("art:scheduler=off", 2, 0.2, 0x12112295d6a10d64, 287),
    ("art:scheduler=off", 3, 0.4, 0x50fa9a4f1a4ba21c, 1174),
    ("art:fixed=3", 1, 0.05, 0x872f6b7977368167, 184),
    ("art:fixed=3", 2, 0.2, 0xfb1f21fc2cc19e27, 612),
    ("art:fixed=3", 3, 0.4, 0xfac6ae1834b08306, 1409),
    (
        "art:opportunism=4,a=2,burst_rtts=5",
        1,
        0.05,
        0x7e3eece7816dd85d,
        24,
    ),
    (
        "art:opportunism=4,a=2,burst_rtts=5",
        2,
        0.2,
        0xd2680570b3581acf,
        276,
    ),
    (
        "art:opportunism=4,a=2,burst_rtts=5",
        3,
        0.4,
        0x6cd8a2bc346e0116,
        1085,
    ),
    (
        "art:l_queue=20,r_max=6,opportunism=off",
        1,
        0.05,
        0xb419a5b5d892fa42,
        51,
    ),
    (
        "art:l_queue=20,r_max=6,opportunism=off",
        2,
        0.2,
        0x8ae6fc80e97df1fe,
        365,
    ),
    (
        "art:l_queue=20,r_max=6,opportunism=off",
        3,
        0.4,
        0x9ab94445480cb6cb,
        1053,
    ),
    ("art-mab:", 1, 0.05, 0x120db6d77185e50c, 46),
    ("art-mab:", 2, 0.2, 0x7ebf918b1e266747, 1315),
    ("art-mab:", 3, 0.4, 0xd20b7eb15ca5da0e, 3621),
    ("art-mab:algo=ucb", 1, 0.05, 0x40f95bb4933c096a, 408),
    ("art-mab:algo=ucb", 2, 0.2, 0x3c8f69e11ff93f5b, 1652),
    ("art-mab:algo=ucb", 3, 0.4, 0x803341d3f47c353d, 2914),
    (
        "art-mab:eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off,r_max=6",
        1,
        0.05,
        0x6f58beecbee26ed1,
        54,
    ),
    (
        "art-mab:eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off,r_max=6",
        2,
        0.2,
        0x91711cac62641252,
        653,
    ),
    (
        "art-mab:eta=1.05,epsilon=0.2,ucb_c=1.5,scheduler=off,r_max=6",
        3,
        0.4,
        0xd947d8df1a299e22,
        1364,
    ),
];

#[test]
fn reading_text_decides_as_before_readings_existed() {
    for &(config, seed, loss, digest, copies) in BEFORE_READINGS {
        let sep = if config.ends_with(':') { "" } else { "," };
        let spec = format!("{config}{sep}reading=text");
        assert_eq!(
            drive(&spec, seed, loss),
            (digest, copies),
            "{spec} seed {seed} loss {loss}"
        );
    }
}

#[test]
fn reading_code_is_the_default_and_differs() {
    // The same script under the default reading: quic-art's behaviour, not the text's.
    let text_only = |config: &str| config.contains("a=") || config.contains("burst_rtts=");
    for &(config, seed, loss, digest, _) in BEFORE_READINGS {
        if text_only(config) {
            continue;
        }
        let sep = if config.ends_with(':') { "" } else { "," };
        let default = drive(config.trim_end_matches(':'), seed, loss);
        let code = drive(&format!("{config}{sep}reading=code"), seed, loss);
        assert_eq!(default, code, "{config}");
        assert_ne!(default.0, digest, "{config} seed {seed}");
    }
}

/// A weights file of `art-dqn:reading=text` with random weights drawn from `seed` (an untrained
/// network's: its greedy choices vary with the state), `actions` outputs, in a directory of this
/// process.
fn dqn_weights(seed: u64, actions: usize) -> std::path::PathBuf {
    let net = common::random_net(ArtReading::Text, seed, actions);
    let dir = std::env::temp_dir().join(format!("recoup-art-readings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir.join(format!("net-{seed}-{actions}.safetensors"));
    net.save(&path).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// (weights seed, actions, further parameters, seed, loss rate, digest, copies) of `art-dqn`,
/// recorded from the code before `art-dqn` had `reading=`.
const DQN_BEFORE_READINGS: &[(u64, usize, &str, u64, f64, u64, u64)] = &[
    (1, 10, "", 1, 0.05, 0x7db1c60f13483f8a, 281),
    (1, 10, "", 2, 0.2, 0x51049f2cf98f0298, 1077),
    (1, 10, "", 3, 0.4, 0xf412c0f73263e36a, 2045),
    (2, 10, "", 2, 0.2, 0x54acb002f251d4c8, 2425),
    (4, 4, "", 3, 0.4, 0xbfddb18055b85a1f, 2132),
    (5, 4, "", 3, 0.4, 0x87f0fed5b353b32c, 725),
    (6, 4, "", 1, 0.2, 0xf2e73f77d353fc7e, 372),
    (2, 10, ",scheduler=off", 2, 0.2, 0xcb1837990555b999, 2350),
    (
        2,
        10,
        ",a=2,burst_rtts=5,opportunism=off",
        3,
        0.4,
        0xb0febd9b69b3cd62,
        4965,
    ),
];

#[test]
fn art_dqn_reading_text_decides_as_before_readings_existed() {
    for &(net, actions, params, seed, loss, digest, copies) in DQN_BEFORE_READINGS {
        let path = dqn_weights(net, actions);
        let spec = format!("art-dqn:reading=text,weights={}{params}", path.display());
        assert_eq!(
            drive(&spec, seed, loss),
            (digest, copies),
            "{spec} seed {seed} loss {loss}"
        );
    }
}
