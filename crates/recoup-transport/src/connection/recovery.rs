//! The recovery host: loss detection (RFC 9002 §6), congestion control and pacing (§7), the
//! lineage of lost data, and the loss-recovery policy they feed (DESIGN.md "The transport <->
//! policy contract").
//!
//! Invariants: every packet sent is recorded with loss detection until it is acknowledged, lost
//! or its space is discarded, and what it carried ([`SentFrames`]) comes back exactly once;
//! the policy hears of every application-data packet sent, acknowledged and lost, and of every
//! change of the sending state; a copy taken from the policy is held in `pending_copy` until it
//! is sent (policies pop copy requests, so asking twice would lose one); congestion control sees
//! a loss only when it ends a round of copies (ART §6.4).

use std::time::Duration;

use recoup_recovery::{
    CopyRequest, DataRange, Lineages, PacketInfo, Policy, RecoveryPolicy, SendContext, SendKind,
    SendState, SentRange,
};
use recoup_time::{earliest, Instant};
use smallvec::SmallVec;

use super::send::packet_type_name;
use super::Connection;
use crate::cc::{
    app_limited, AckEvent, AckedPacket, CcConfig, CongestionController, Controller, LostPacket,
};
use crate::config::{CopiesBeyondCwnd, TransportConfig};
use crate::crypto::Side;
use crate::error::TransportError;
use crate::frame::{AckFrame, AckRepeats};
use crate::loss::{LossConfig, LossDetection, PerSpace, SpaceId};
use crate::pacing::Pacer;
use crate::qlog::{CcDetail, Event, MetricsUpdated, PacketHeader, PacketLost};
use crate::streams::{ControlFrame, StreamId};

/// What a sent packet carried, kept until it is acknowledged or lost.
#[derive(Clone, Debug, Default)]
pub(super) struct SentFrames {
    pub kind: Option<SendKind>,
    /// Stream ranges, with their lineage for retransmissions and copies. Almost every packet
    /// carries one: kept inline, that is one allocation fewer per packet sent.
    pub stream: SmallVec<[SentRange; 1]>,
    /// Bit i set: `stream[i]` carried the FIN.
    pub fins: u64,
    /// The frames few packets carry, boxed: this record is moved several times per packet sent
    /// (built, sealed, tracked, acknowledged), and four empty vectors inline were 96 of its
    /// bytes.
    pub rare: Option<Box<RareFrames>>,
    pub handshake_done: bool,
    /// Largest packet number acknowledged by an ACK frame in this packet.
    pub ack_largest: Option<u64>,
    /// Carried a FEC repair symbol.
    pub repair: bool,
    /// A path MTU probe (PING and PADDING of the size being tried).
    pub mtu_probe: bool,
    /// DATAGRAM frames carried (RFC 9221): counted when lost, never retransmitted (§5.2).
    pub datagrams: u16,
}

/// CRYPTO ranges, flow-control and connection-ID frames of a sent packet.
#[derive(Clone, Debug, Default)]
pub(super) struct RareFrames {
    /// CRYPTO ranges (more than one when retransmissions and new bytes share the packet).
    pub crypto: Vec<std::ops::Range<u64>>,
    pub control: Vec<ControlFrame>,
    pub new_cids: Vec<u64>,
    pub retire_cids: Vec<u64>,
}

impl SentFrames {
    /// The rare frames, made on first use.
    pub fn rare_mut(&mut self) -> &mut RareFrames {
        self.rare.get_or_insert_with(Box::default)
    }

    pub fn info(&self, pn: u64, sent: Instant, bytes: usize) -> PacketInfo<'_> {
        PacketInfo {
            pn,
            sent,
            bytes,
            kind: self.kind.unwrap_or(SendKind::New),
            ranges: &self.stream,
        }
    }
}

/// Loss detection, congestion control, pacing, lineage and the policy of one connection.
#[derive(Debug)]
pub(super) struct RecoveryHost {
    pub loss: LossDetection<SentFrames>,
    pub cc: Controller,
    /// `None` when pacing is off.
    pub pacer: Option<Pacer>,
    /// When pacing lets the next waiting packet go (set when `poll_transmit` ran dry).
    pub pacing_wakeup: Option<Instant>,
    pub lineage: Lineages,
    pub policy: Policy,
    pub send_state: Option<SendState>,
    /// Application-data packets sent, for policies that count packets (ART's escape space).
    pub data_packets_sent: u64,
    /// When the policy's timer was last run; deadlines at or before it are not re-armed.
    pub policy_timer_served: Option<Instant>,
    /// A copy the policy asked for that has not gone out yet.
    pub pending_copy: Option<CopyRequest>,
    /// The policy answered `None` to `poll_copy` in this `poll_transmit` call and has heard of
    /// nothing since, so it is not asked again in the call: a `None` stands until an event, a
    /// later instant or another context (`RecoveryPolicy::poll_copy`). When nothing can be sent,
    /// the call would otherwise ask twice, for whether to send and for when to wake up.
    pub copy_declined: bool,
    /// When the congestion window first held `pending_copy` back.
    pub copy_held_since: Option<Instant>,
    /// Which copies may exceed the congestion window besides those the policy marks.
    copies_beyond_cwnd: CopiesBeyondCwnd,
    /// `TransportConfig::max_pacing_rate`.
    max_pacing_rate: Option<u64>,
    /// What each space's ACK frames repeat of the previous one, not read again.
    ack_repeats: PerSpace<AckRepeats>,
    /// `TransportConfig::tail_ping`.
    tail_ping: bool,
    /// The last ack-eliciting 1-RTT packet carried stream data: a burst's tail, until another
    /// ack-eliciting packet follows it.
    tail_unprobed: bool,
}

impl RecoveryHost {
    pub fn new(side: Side, config: &TransportConfig, policy: Policy, now: Instant) -> Self {
        let mds = config.max_datagram_size as u64;
        let mut loss = LossDetection::new(LossConfig {
            server: side == Side::Server,
            packet_threshold: config.packet_threshold,
            time_threshold: config.time_threshold,
            threshold_rtt: config.threshold_rtt,
            initial_rtt: config.initial_rtt,
            max_ack_delay: Duration::from_millis(25),
            detection: config.loss_detection,
        });
        // Our own idle timeout until the peer's arrives (`Connection::on_peer_params`).
        loss.set_max_pto(
            config
                .max_pto
                .bound((!config.max_idle_timeout.is_zero()).then_some(config.max_idle_timeout)),
            now,
        );
        let cc = new_controller(config, now);
        Self {
            loss,
            cc,
            pacer: config
                .pacing
                .then(|| Pacer::new(mds, config.pacing_burst, now)),
            max_pacing_rate: config.max_pacing_rate,
            pacing_wakeup: None,
            lineage: Lineages::new(config.record_recovery),
            policy,
            send_state: None,
            data_packets_sent: 0,
            policy_timer_served: None,
            pending_copy: None,
            copy_declined: false,
            copy_held_since: None,
            copies_beyond_cwnd: config.copies_beyond_cwnd,
            ack_repeats: PerSpace::default(),
            tail_ping: config.tail_ping,
            tail_unprobed: false,
        }
    }

    /// A 1-RTT packet left: one with stream data is a tail until an ack-eliciting packet
    /// follows it.
    pub fn on_data_packet_sent(&mut self, stream_data: bool, ack_eliciting: bool) {
        if stream_data {
            self.tail_unprobed = true;
        } else if ack_eliciting {
            self.tail_unprobed = false;
        }
    }

    /// Whether a tail PING is due (`TransportConfig::tail_ping`): the last packet carried
    /// stream data, and neither new data nor a copy waits to follow it. (A waiting
    /// retransmission goes first and is ack-eliciting itself: the PING is written only into
    /// a packet with nothing else that elicits an ACK.)
    pub fn tail_ping_due(&self, has_new_data: bool) -> bool {
        self.tail_ping && self.tail_unprobed && !has_new_data && self.pending_copy.is_none()
    }

    /// A new path to the peer was validated (RFC 9000 §9.4): congestion control, pacing and the
    /// RTT estimate start again from their initial values (RFC 9002 Appendices A.3, B.3).
    pub fn reset_for_new_path(&mut self, now: Instant, config: &TransportConfig) {
        let mds = config.max_datagram_size as u64;
        self.cc = new_controller(config, now);
        if self.pacer.is_some() {
            self.pacer = Some(Pacer::new(mds, config.pacing_burst, now));
        }
        self.loss.reset_rtt(now);
    }

    /// The earliest of loss detection's timer, the policy's and the pacer's wake-up.
    pub fn timeout(&self) -> Option<Instant> {
        // A policy deadline already served stays quiet until it moves: a copy that falls due
        // while the window is full waits for the next ACK, not for a busy timer.
        let policy = self
            .policy
            .poll_timeout()
            .filter(|&t| self.policy_timer_served.is_none_or(|served| t > served));
        earliest(earliest(self.loss.timeout(), policy), self.pacing_wakeup)
    }

    /// Three PTO periods: how long closing and draining last, the least idle timeout, and the
    /// wait between key updates (RFC 9000 §10.1, §10.2; RFC 9001 §6.5).
    pub fn three_pto(&self) -> Duration {
        self.loss.pto_period() * 3
    }

    /// Runs the policy's timer if it is due.
    pub fn on_policy_timeout(&mut self, now: Instant) {
        if self.policy.poll_timeout().is_some_and(|d| now >= d) {
            self.policy.on_timeout(now);
            self.policy_timer_served = Some(now);
        }
    }

    /// The sending state the policy sees (DESIGN.md: on-mode, off-mode, cwnd-limited).
    pub fn update_send_state(&mut self, now: Instant, has_new_data: bool, mds: usize) {
        let state = if !has_new_data {
            SendState::OffMode
        } else if self.loss.bytes_in_flight() + mds as u64 > self.cc.window() {
            SendState::CwndLimited
        } else {
            SendState::OnMode
        };
        if self.send_state != Some(state) {
            self.send_state = Some(state);
            self.policy.on_send_state(now, state);
        }
    }

    /// Whether a full-sized packet would exceed the congestion window.
    fn cwnd_full(&self, mds: usize) -> bool {
        self.loss.bytes_in_flight() + mds as u64 > self.cc.window()
    }

    /// Whether the waiting copy may exceed the congestion window: the policy marked it (ART
    /// §6.4 "opportunism"), or the `copies_beyond_cwnd` setting lets it (`has_new_data`: the
    /// sender is in on-mode).
    fn copy_exempt_from_cwnd(&self, has_new_data: bool) -> bool {
        self.pending_copy.is_some_and(|c| {
            c.beyond_cwnd
                || match self.copies_beyond_cwnd {
                    CopiesBeyondCwnd::Policy => false,
                    CopiesBeyondCwnd::OffMode => !has_new_data,
                    CopiesBeyondCwnd::Always => true,
                }
        })
    }

    /// Whether the waiting copy may exceed the congestion window and pacing lets it go now.
    pub fn copy_may_exceed_cwnd(&mut self, now: Instant, has_new_data: bool, mds: usize) -> bool {
        self.copy_exempt_from_cwnd(has_new_data) && self.pacing_delay(now, mds).is_none()
    }

    /// Starts the clock on a waiting copy that the full congestion window holds back.
    pub fn note_copy_held(&mut self, now: Instant, has_new_data: bool, mds: usize) {
        if self.pending_copy.is_some()
            && self.cwnd_full(mds)
            && !self.copy_exempt_from_cwnd(has_new_data)
        {
            self.copy_held_since.get_or_insert(now);
        }
    }

    /// Whether congestion control and pacing let an ack-eliciting packet go now.
    pub fn congestion_allows(&mut self, now: Instant, mds: usize) -> bool {
        if self.cwnd_full(mds) {
            return false;
        }
        self.pacing_delay(now, mds).is_none()
    }

    /// When pacing next lets a full packet go, if it holds one back now.
    pub fn pacing_delay(&mut self, now: Instant, mds: usize) -> Option<Instant> {
        let rate = self.pacing_rate();
        let pacer = self.pacer.as_mut()?;
        pacer.next_send_time(
            now,
            self.cc.window(),
            self.loss.rtt().smoothed(),
            rate,
            mds as u64,
        )
    }

    /// The explicit pacing rate, bytes per second: the congestion controller's, capped by the
    /// policy's rate limit and `max_pacing_rate`. `None` when none of them sets one.
    pub fn pacing_rate(&self) -> Option<u64> {
        // Asked several times per packet sent: no iterator over the three.
        let lower = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        lower(
            lower(self.cc.pacing_rate(), self.policy.rate_limit()),
            self.max_pacing_rate,
        )
    }

    /// Whether the policy's rate limit is in force and below the congestion controller's rate.
    pub fn rate_limit_binding(&self) -> Option<bool> {
        let limit = self.policy.rate_limit()?;
        Some(self.cc.pacing_rate().is_none_or(|cc| limit < cc))
    }

    fn send_context(&self, mds: usize) -> SendContext {
        SendContext {
            state: self
                .send_state
                .unwrap_or(recoup_recovery::SendState::OffMode),
            packets_sent: self.data_packets_sent,
            cwnd: self.cc.window(),
            bytes_in_flight: self.loss.bytes_in_flight(),
            bdp_packets: self.cc.bandwidth_estimate().map(|bw| {
                // bw · min_rtt / 1 s / mds in one division (⌊⌊x/a⌋/b⌋ = ⌊x/ab⌋): asked before
                // every packet.
                let nanos = recoup_time::saturating_nanos(self.loss.rtt().min());
                recoup_time::mul_div(bw, nanos, 1_000_000_000 * mds as u64)
            }),
        }
    }

    /// Peeks whether the policy would copy something now. Policies answer `poll_copy` by
    /// popping a request, so a copy asked for here is remembered and sent next.
    pub fn policy_has_copy(&mut self, now: Instant, mds: usize) -> bool {
        if self.pending_copy.is_some() {
            return true;
        }
        if self.copy_declined {
            return false;
        }
        let ctx = self.send_context(mds);
        self.pending_copy = self
            .policy
            .poll_copy(now, &ctx)
            .filter(|c| self.lineage.range(c.id).is_some());
        self.copy_declined = self.pending_copy.is_none();
        self.pending_copy.is_some()
    }

    /// When the pacer will let the next packet go, if something waits for it: new data
    /// (`has_new_data`), other frames that wait for pacing (`control`), a retransmission or a
    /// copy. Without a wake-up for each, a connection that nothing else wakes would hold them
    /// until the peer's next datagram.
    pub fn pacing_wakeup_at(
        &mut self,
        now: Instant,
        has_new_data: bool,
        control: bool,
        mds: usize,
    ) -> Option<Instant> {
        self.pacer.as_ref()?;
        let copy = self.policy_has_copy(now, mds);
        let waiting = copy || has_new_data || control || self.lineage.has_retransmit();
        if !waiting {
            return None;
        }
        if self.cwnd_full(mds) && !self.copy_exempt_from_cwnd(has_new_data) {
            // An acknowledgement opens the window; no timer needed.
            return None;
        }
        self.pacing_delay(now, mds)
    }
}

/// The host's side of the contract: what acknowledged and lost packets mean for the streams,
/// the lineage, the policy and congestion control.
impl Connection {
    /// The packet's stream frames were acknowledged: release the data, close lineages.
    fn on_frames_acked(
        &mut self,
        now: Instant,
        space: SpaceId,
        pn: u64,
        sent: Instant,
        f: &SentFrames,
    ) {
        if let Some(largest) = f.ack_largest {
            self.spaces[space].on_ack_acked(largest);
        }
        let rare = f.rare.as_deref();
        for r in rare.iter().flat_map(|r| &r.crypto) {
            self.spaces[space].crypto_send.on_acked(r.clone());
        }
        for (i, r) in f.stream.iter().enumerate() {
            let fin = f.fins & (1 << i) != 0;
            let len = r.range.len() as usize;
            self.streams
                .on_acked(StreamId(r.range.stream), r.range.start, len, fin);
            let streams = &self.streams;
            let closed =
                self.recovery
                    .lineage
                    .on_range_acked(r.range, r.loss, pn, sent, now, |range| {
                        streams
                            .unacked(
                                StreamId(range.stream),
                                range.start,
                                range.end.max(range.start),
                            )
                            .is_empty()
                    });
            for id in closed {
                self.recovery.policy.on_data_acked(now, id);
            }
        }
        for c in rare.iter().flat_map(|r| &r.control) {
            self.streams.on_control_acked(*c);
        }
    }

    /// The packet was declared lost: queue what it carried again. Returns whether the loss
    /// signals congestion (ART §6.4: an older copy of a round does not).
    fn on_frames_lost(
        &mut self,
        now: Instant,
        space: SpaceId,
        pn: u64,
        sent: Instant,
        f: &SentFrames,
        trigger: recoup_recovery::LossTrigger,
    ) -> bool {
        let mut signals = f.stream.is_empty();
        self.stats.datagram_frames_lost += u64::from(f.datagrams);
        let rare = f.rare.as_deref();
        for r in rare.iter().flat_map(|r| &r.crypto) {
            self.spaces[space].crypto_send.on_lost(r.clone());
        }
        for r in &f.stream {
            // The FIN needs no lineage of its own: `unacked` reports it with the range that
            // ends at the final size until it is acknowledged.
            match r.loss {
                None => {
                    signals = true;
                    // First transmission: every still-unacknowledged piece opens a lineage.
                    let end = r.range.end;
                    for chunk in self
                        .streams
                        .unacked(StreamId(r.range.stream), r.range.start, end)
                    {
                        let range = DataRange {
                            stream: chunk.id.0,
                            start: chunk.offset,
                            end: chunk.offset + chunk.len as u64,
                        };
                        let lost = self
                            .recovery
                            .lineage
                            .on_first_loss(range, sent, now, trigger);
                        self.recovery.policy.on_data_lost(now, &lost);
                    }
                }
                Some(id) => {
                    let loss = self.recovery.lineage.on_send_lost(id, pn, trigger);
                    signals |= loss.newest;
                    if let Some(lost) = loss.next_round {
                        self.recovery.policy.on_data_lost(now, &lost);
                    }
                }
            }
        }
        if f.handshake_done {
            self.handshake.done_pending = true;
        }
        if let Some(rare) = rare {
            for c in &rare.control {
                self.streams.on_control_lost(*c);
            }
            for &seq in &rare.new_cids {
                self.cids.on_new_lost(seq);
            }
            for &seq in &rare.retire_cids {
                self.cids.on_retire_lost(seq);
            }
        }
        signals
    }

    pub(super) fn on_loss_timeout(&mut self, now: Instant) {
        use crate::loss::TimeoutOutcome;
        match self.recovery.loss.on_timeout(now) {
            TimeoutOutcome::NotDue => {}
            TimeoutOutcome::Lost { space, losses } => {
                self.process_losses(now, space, losses);
            }
            TimeoutOutcome::Probe { space, count } => {
                self.stats.pto_expirations += 1;
                if space == SpaceId::Data
                    && self.recovery.loss.pto_count() >= super::pmtud::BLACK_HOLE_PTOS
                {
                    // Nothing acknowledged for several PTOs: if only our larger datagrams stopped
                    // getting through, the probes must be of the base size to be answered.
                    self.restart_pmtud(true);
                }
                let space = if self.keys.has(space) {
                    space
                } else {
                    self.keys.write_level
                };
                // `write_packet` puts the unacknowledged CRYPTO data in each of them.
                self.spaces[space].probes = count;
            }
        }
    }

    /// Handles packets declared lost in `space`: requeue their frames, tell the policy, and give
    /// congestion control the losses that count.
    fn process_losses(
        &mut self,
        now: Instant,
        space: SpaceId,
        losses: crate::loss::LossReport<SentFrames>,
    ) {
        let mut newest_signal: Option<Instant> = None;
        let mut signal_bytes = 0u64;
        for lost in &losses.lost {
            let p = &lost.packet;
            self.stats.packets_lost += 1;
            if space == SpaceId::Data {
                let info = p.data.info(p.pn, p.time_sent, p.size);
                self.recovery
                    .policy
                    .on_packet_lost(now, &info, lost.trigger);
                self.fec_on_packet_lost(now, &info, p.data.repair);
                self.record_lost(p.pn, now);
            }
            self.qlog_packet_lost(now, space, p.pn, lost.trigger);
            let signals = self.on_frames_lost(now, space, p.pn, p.time_sent, &p.data, lost.trigger);
            if p.data.mtu_probe {
                // RFC 9000 §14.4: a lost probe says its size is too large, not that the path
                // is congested.
                self.stats.mtu_probes_lost += 1;
                if let Some(d) = self.pmtud.as_mut() {
                    d.on_probe_lost(p.pn);
                }
            } else if signals && p.in_flight {
                newest_signal = newest_signal.max(Some(p.time_sent));
                signal_bytes += p.size as u64;
                // The rate sampler counts the losses congestion control hears of, so the loss
                // rate BBRv3 computes from them is over the same losses.
                let recovery = &mut self.recovery;
                recovery.loss.on_congestion_loss(p.size as u64);
                recovery.cc.on_packet_lost(
                    now,
                    &LostPacket {
                        time_sent: p.time_sent,
                        bytes: p.size as u64,
                        rate: p.rate,
                        lost_total: recovery.loss.delivery_rate().lost(),
                    },
                );
            } else if p.in_flight {
                self.stats.losses_hidden_from_cc += 1;
            }
        }
        if losses.persistent_congestion && space == SpaceId::Data {
            self.restart_pmtud(true);
        }
        if let Some(t) = newest_signal {
            self.stats.congestion_events += 1;
            self.recovery.cc.on_congestion_event(
                now,
                t,
                signal_bytes,
                losses.persistent_congestion,
                self.recovery.loss.rtt(),
            );
            self.qlog_congestion_state(now);
        }
    }

    /// A path MTU probe was acknowledged: the path carries its size (RFC 9000 §14.3).
    fn on_mtu_probe_acked(&mut self, pn: u64) {
        if let Some(size) = self.pmtud.as_mut().and_then(|d| d.on_probe_acked(pn)) {
            self.set_datagram_size(size);
        }
    }

    /// The path's datagram size changed: congestion control's floors follow it.
    fn set_datagram_size(&mut self, size: usize) {
        self.path.max_datagram_size = size;
        self.recovery.cc.on_max_datagram_size(size as u64);
    }

    /// Back to the base datagram size and a new search (see [`super::pmtud::Pmtud::restart`]);
    /// `black_hole`: the cause is a suspected black hole, not a new path.
    pub(super) fn restart_pmtud(&mut self, black_hole: bool) {
        if let Some(size) = self.pmtud.as_mut().and_then(|d| d.restart()) {
            self.set_datagram_size(size);
            if black_hole {
                self.stats.mtu_black_holes += 1;
                tracing::debug!(size, "no acknowledgment above the base size: PMTU reset");
            }
        }
    }

    /// Logs the congestion controller's state when it changed.
    fn qlog_congestion_state(&mut self, now: Instant) {
        if let Some(q) = self.qlog.as_mut() {
            q.congestion_state(now, self.recovery.cc.state());
        }
    }

    pub(super) fn on_ack_frame(
        &mut self,
        now: Instant,
        space: SpaceId,
        ack: &AckFrame<'_>,
    ) -> Result<(), TransportError> {
        // An ACK-only receiver repeats up to 32 ranges in every ACK (RFC 9000 §13.2.4): only
        // those that changed since the previous frame are looked at, on the stack.
        let ranges = self.recovery.ack_repeats[space].new_ranges(ack);
        let ack_delay = if space == SpaceId::Data {
            Duration::from_micros(ack.ack_delay_micros(self.handshake.peer_ack_delay_exponent))
        } else {
            Duration::ZERO
        };
        let outcome = self
            .recovery
            .loss
            .on_ack_received(space, &ranges, ack_delay, now)?;
        self.stats.spurious_losses += outcome.spurious;
        if outcome.acked.is_empty() && outcome.losses.lost.is_empty() {
            self.recovery.loss.recycle_acked(outcome.acked);
            return Ok(());
        }
        // What the acknowledged packets carried first: a lineage whose data this ACK completes
        // is closed before the losses it reports are looked at, so losing the newest copy of
        // data an older send delivered starts no new round and signals no congestion (ART §6.4).
        for p in &outcome.acked {
            if p.data.mtu_probe {
                self.on_mtu_probe_acked(p.pn);
            }
            if space == SpaceId::Data {
                self.keys.update.on_acked(p.pn, now);
                let info = p.data.info(p.pn, p.time_sent, p.size);
                self.recovery.policy.on_packet_acked(now, &info);
                self.fec_on_packet_acked(now, &info, p.data.repair);
                self.record_acked(p.pn, now);
            }
            self.on_frames_acked(now, space, p.pn, p.time_sent, &p.data);
        }
        // Then the losses, and congestion control hears of them before of the acknowledged
        // packets (RFC 9002 Appendix A.7): packets acknowledged with a loss must not grow the
        // window.
        self.process_losses(now, space, outcome.losses);
        if outcome.rtt_updated {
            let sample = self.recovery.loss.rtt().sample();
            self.recovery.policy.on_rtt_update(now, &sample);
            self.fec_on_rtt_update(now, &sample);
        }
        let mds = self.path.max_datagram_size as u64;
        let recovery = &mut self.recovery;
        if outcome.rtt_updated {
            if let Some(q) = self.qlog.as_mut() {
                let rtt = recovery.loss.rtt();
                let cc = &recovery.cc;
                q.log(
                    now,
                    Event::MetricsUpdated(MetricsUpdated {
                        min_rtt: ms(rtt.min()),
                        smoothed_rtt: ms(rtt.smoothed()),
                        latest_rtt: ms(rtt.latest()),
                        rtt_variance: ms(rtt.var()),
                        congestion_window: cc.window(),
                        bytes_in_flight: recovery.loss.bytes_in_flight(),
                        pacing_rate: cc.pacing_rate().map(|r| r.saturating_mul(8)),
                        recoup: Some(CcDetail {
                            cc_state: cc.state().into(),
                            bandwidth_estimate: cc.bandwidth_estimate(),
                            pacing_rate: cc.pacing_rate(),
                        }),
                    }),
                );
            }
        }
        let acked = AckedPacket::in_flight_of(&outcome.acked);
        if !acked.is_empty() {
            let has_new_data = self.streams.has_new_data();
            if !has_new_data {
                // Rate samples (BBR's) are marked on an empty queue (draft-cheng-iccrg-delivery-
                // rate-estimation §3.4); the window's own test is the flight's, below.
                recovery.loss.on_app_limited();
            }
            let prior_in_flight = outcome.prior_bytes_in_flight;
            recovery.cc.on_ack(&AckEvent {
                now,
                acked: &acked,
                rate_sample: outcome.rate_sample.as_ref(),
                rtt: recovery.loss.rtt(),
                rtt_sampled: outcome.rtt_updated,
                prior_in_flight,
                in_flight: recovery.loss.bytes_in_flight(),
                app_limited: app_limited(has_new_data, prior_in_flight, recovery.cc.window(), mds),
                lost_total: recovery.loss.delivery_rate().lost(),
            });
        }
        recovery.loss.recycle_acked(outcome.acked);
        self.qlog_congestion_state(now);
        Ok(())
    }

    fn qlog_packet_lost(
        &mut self,
        now: Instant,
        space: SpaceId,
        pn: u64,
        trigger: recoup_recovery::LossTrigger,
    ) {
        if let Some(q) = self.qlog.as_mut() {
            let trigger = match trigger {
                recoup_recovery::LossTrigger::PacketThreshold => "reordering_threshold",
                recoup_recovery::LossTrigger::TimeThreshold => "time_threshold",
                recoup_recovery::LossTrigger::Pto => "pto_expired",
            };
            q.log(
                now,
                Event::PacketLost(PacketLost {
                    header: PacketHeader {
                        packet_type: packet_type_name(space).into(),
                        packet_number: pn,
                    },
                    trigger: trigger.into(),
                }),
            );
        }
    }
}

/// The congestion controller `config` asks for, in its initial state.
fn new_controller(config: &TransportConfig, now: Instant) -> Controller {
    let mds = config.max_datagram_size as u64;
    Controller::new(
        config.cc,
        &CcConfig {
            max_datagram_size: mds,
            initial_window: config.initial_window.map(|p| p.saturating_mul(mds)),
            seed: config.seed,
            hystart: config.hystart,
            paced: config.pacing,
        },
        now,
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
