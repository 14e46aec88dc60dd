//! [`Policy`]: every built-in behind one enum (static dispatch on the transport's hot path), plus
//! user policies through the trait object.

use recoup_time::Instant;

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendState,
};
use crate::arq::Arq;
use crate::art::Art;
use crate::autorec::AutoRec;
use crate::config::PolicySpec;
use crate::crest::Crest;
use crate::draft_wu::DraftWu;
use crate::fixed::Fixed;
use crate::ladr::LadrRrl;
use crate::or3::Or3;
use crate::too::Too;

/// A loss-recovery policy for one connection.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one policy per connection, built once; ART's RNG inline avoids a pointer chase per event"
)]
pub enum Policy {
    Arq(Arq),
    Fixed(Fixed),
    Or3(Or3),
    /// `art`, `art-mab` and `art-dqn`.
    Art(Art),
    AutoRec(AutoRec),
    Too(Too),
    DraftWu(DraftWu),
    LadrRrl(LadrRrl),
    Crest(Crest),
    /// A policy written outside this crate.
    User(Box<dyn RecoveryPolicy + Send>),
}

impl PolicySpec {
    /// A fresh policy for one connection. `seed` drives every random choice (ART's Replica
    /// Scheduler and bandit); the same spec and seed give the same decisions.
    #[must_use]
    pub fn build(&self, seed: u64) -> Policy {
        match self {
            Self::Arq => Policy::Arq(Arq),
            Self::Fixed { copies } => Policy::Fixed(Fixed::new(*copies)),
            Self::Or3 { variant } => Policy::Or3(Or3::new(*variant)),
            Self::Art(cfg) => Policy::Art(Art::new(cfg, seed)),
            Self::ArtMab(cfg) => Policy::Art(Art::new_mab(cfg, seed)),
            Self::ArtDqn(cfg) => Policy::Art(Art::new_dqn(cfg, seed)),
            Self::AutoRec(cfg) => Policy::AutoRec(AutoRec::new(*cfg)),
            Self::Too(cfg) => Policy::Too(Too::new(*cfg)),
            Self::DraftWu(cfg) => Policy::DraftWu(DraftWu::new(*cfg)),
            Self::LadrRrl(cfg) => Policy::LadrRrl(LadrRrl::new(*cfg)),
            Self::Crest(cfg) => Policy::Crest(Crest::new(*cfg)),
        }
    }
}

/// Forward a call to whichever policy is inside.
macro_rules! dispatch {
    ($self:expr, $p:ident => $call:expr) => {
        match $self {
            Policy::Arq($p) => $call,
            Policy::Fixed($p) => $call,
            Policy::Or3($p) => $call,
            Policy::Art($p) => $call,
            Policy::AutoRec($p) => $call,
            Policy::Too($p) => $call,
            Policy::DraftWu($p) => $call,
            Policy::LadrRrl($p) => $call,
            Policy::Crest($p) => $call,
            Policy::User($p) => $call,
        }
    };
}

impl RecoveryPolicy for Policy {
    fn name(&self) -> &'static str {
        dispatch!(self, p => p.name())
    }
    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        dispatch!(self, p => p.on_packet_sent(now, packet));
    }
    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        dispatch!(self, p => p.on_packet_acked(now, packet));
    }
    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, trigger: LossTrigger) {
        dispatch!(self, p => p.on_packet_lost(now, packet, trigger));
    }
    fn on_data_lost(&mut self, now: Instant, lost: &LostData) {
        dispatch!(self, p => p.on_data_lost(now, lost));
    }
    fn on_data_acked(&mut self, now: Instant, id: LossId) {
        dispatch!(self, p => p.on_data_acked(now, id));
    }
    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        dispatch!(self, p => p.on_rtt_update(now, rtt));
    }
    fn on_send_state(&mut self, now: Instant, state: SendState) {
        dispatch!(self, p => p.on_send_state(now, state));
    }
    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        dispatch!(self, p => p.poll_copy(now, ctx))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        dispatch!(self, p => p.poll_timeout())
    }
    fn on_timeout(&mut self, now: Instant) {
        dispatch!(self, p => p.on_timeout(now));
    }
    fn rate_limit(&self) -> Option<u64> {
        dispatch!(self, p => p.rate_limit())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::api::{SendKind, SentRange};
    use crate::testutil::{ctx_in, lost_round, ms, packet, range, rtt};

    const ALL: &[&str] = &[
        "arq",
        "fixed:2",
        "or3",
        "or3:variant=2n+1",
        "art",
        "art:scheduler=off",
        "art:reading=text",
        "art:reading=text,scheduler=off",
        "art-mab",
        "art-mab:algo=eg",
        "art-mab:reading=text",
        "art-mab:reading=text,algo=ucb",
        "autorec",
        "autorec:k=3",
        "autorec:opportunistic=off",
        "too",
        "too:theta=1ms",
        "draft-wu",
        "draft-wu:limit=1",
        "ladr-rrl",
        "crest",
        "crest:deadline=100ms,target=0.001",
    ];

    fn build(spec: &str, seed: u64) -> Policy {
        match spec.parse::<PolicySpec>() {
            Ok(s) => s.build(seed),
            Err(e) => panic!("{spec}: {e}"),
        }
    }

    /// A lossy synthetic connection driven through the trait. Every lineage is acknowledged at
    /// the end; afterwards no policy may ask for anything.
    fn drive(p: &mut Policy, seed: u64) -> usize {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut now = ms(0);
        let mut pn = 0u64;
        let mut copies = 0usize;
        let mut open: Vec<(u64, u32)> = Vec::new();
        let mut next_id = 0u64;
        p.on_rtt_update(now, &rtt(30));
        for step in 0..2000u64 {
            now += Duration::from_millis(1);
            let state = match step % 50 {
                0..=39 => SendState::OnMode,
                40..=44 => SendState::CwndLimited,
                _ => SendState::OffMode,
            };
            if step % 50 == 0 || step % 50 == 40 || step % 50 == 45 {
                p.on_send_state(now, state);
            }
            if now >= p.poll_timeout().unwrap_or(Instant::MAX) {
                p.on_timeout(now);
            }
            let mut ctx = ctx_in(state, pn);
            // Ask for copies, then send one packet of new data (or a retransmission).
            while let Some(c) = p.poll_copy(now, &ctx) {
                assert!(
                    open.iter().any(|&(id, _)| id == c.id),
                    "copy of unknown {}",
                    c.id
                );
                let r = [SentRange {
                    range: range(c.id),
                    loss: Some(c.id),
                }];
                p.on_packet_sent(now, &packet(pn, now, SendKind::Copy, &r));
                pn += 1;
                copies += 1;
                ctx.packets_sent = pn;
                assert!(copies < 100_000, "runaway copies");
            }
            // The contract the transport relies on to ask once per send opportunity: a `None`
            // asked again at the same instant and context is `None`, and changes nothing.
            let before = format!("{p:?}");
            assert_eq!(p.poll_copy(now, &ctx), None, "{} at step {step}", p.name());
            assert_eq!(format!("{p:?}"), before, "{} at step {step}", p.name());
            let (kind, r) = if !open.is_empty() && rng.gen_bool(0.2) {
                let (id, _) = open[rng.gen_range(0..open.len())];
                (
                    SendKind::Retransmission,
                    [SentRange {
                        range: range(id),
                        loss: Some(id),
                    }],
                )
            } else {
                (
                    SendKind::New,
                    [SentRange {
                        range: range(5000 + pn),
                        loss: None,
                    }],
                )
            };
            let info = packet(pn, now, kind, &r);
            p.on_packet_sent(now, &info);
            pn += 1;
            if rng.gen_bool(0.1) {
                p.on_packet_lost(
                    now + Duration::from_millis(30),
                    &info,
                    LossTrigger::TimeThreshold,
                );
                let id = match r[0].loss {
                    Some(id) => id,
                    None => {
                        next_id += 1;
                        open.push((next_id, 0));
                        next_id
                    }
                };
                if let Some(entry) = open.iter_mut().find(|e| e.0 == id) {
                    entry.1 += 1;
                    let mut lost = lost_round(id, entry.1);
                    lost.lost_sent = now;
                    p.on_data_lost(now, &lost);
                }
            } else {
                p.on_packet_acked(now + Duration::from_millis(30), &info);
                if let Some(id) = r[0].loss {
                    open.retain(|e| e.0 != id);
                    p.on_data_acked(now, id);
                }
            }
        }
        for (id, _) in open.drain(..) {
            p.on_data_acked(now, id);
        }
        copies
    }

    #[test]
    fn every_policy_holds_no_state_after_all_data_is_acked() {
        for spec in ALL {
            for seed in 1..=3 {
                let mut p = build(spec, seed);
                let copies = drive(&mut p, seed);
                let end = ms(10_000);
                for state in [
                    SendState::OffMode,
                    SendState::OnMode,
                    SendState::CwndLimited,
                ] {
                    p.on_send_state(end, state);
                    assert_eq!(
                        p.poll_copy(end, &ctx_in(state, 1_000_000)),
                        None,
                        "{spec} seed {seed}"
                    );
                }
                let leftover = match &p {
                    Policy::Art(a) => a.tracked(),
                    Policy::AutoRec(a) => a.tracked(),
                    Policy::Too(t) => t.queue_len(),
                    Policy::DraftWu(d) => d.tracked(),
                    Policy::LadrRrl(l) => l.to_recover(),
                    Policy::Crest(c) => c.tracked(),
                    _ => 0,
                };
                assert_eq!(leftover, 0, "{spec} seed {seed}");
                if *spec == "arq" || spec.starts_with("ladr") {
                    assert_eq!(copies, 0, "{spec}");
                } else if *spec != "autorec:opportunistic=off" && !spec.starts_with("too") {
                    assert!(copies > 0, "{spec} seed {seed} sent no copies");
                }
            }
        }
    }

    #[test]
    fn settings_that_disable_copies_ask_for_none() {
        for spec in ["fixed:0", "autorec:k=0", "arq", "ladr-rrl"] {
            let mut p = build(spec, 1);
            assert_eq!(drive(&mut p, 1), 0, "{spec}");
        }
    }

    #[test]
    fn same_seed_same_decisions() {
        for spec in [
            "art",
            "art:reading=text",
            "art-mab",
            "art-mab:algo=eg",
            "art-mab:reading=text",
            "art-mab:reading=text,algo=ucb",
            "crest",
            "draft-wu",
        ] {
            let a = drive(&mut build(spec, 42), 7);
            let b = drive(&mut build(spec, 42), 7);
            assert_eq!(a, b, "{spec}");
        }
    }

    #[test]
    fn names_and_user_policies() {
        for spec in ALL {
            let p = build(spec, 0);
            let name = spec.split(':').next().unwrap_or_default();
            assert_eq!(p.name(), name);
        }
        let mut user = Policy::User(Box::new(Fixed::new(1)));
        user.on_data_lost(ms(0), &lost_round(4, 1));
        assert_eq!(
            user.poll_copy(ms(0), &ctx_in(SendState::OnMode, 0))
                .map(|c| c.id),
            Some(4)
        );
        assert_eq!(user.name(), "fixed");
    }
}
