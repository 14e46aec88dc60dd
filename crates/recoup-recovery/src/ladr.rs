//! `ladr-rrl`: LADR's reactive rate limit (LADR §3.3), the sender-side loss-recovery part that
//! fits the policy contract. It never asks for copies; it caps the pacing rate at the ACK rate
//! through [`RecoveryPolicy::rate_limit`] while a severe loss event is being recovered.
//!
//! - Applicable only once a retransmitted packet (retransmission or copy) has been lost in the
//!   session; until then the congestion controller is trusted.
//! - On when n_rec, the data still to be recovered, reaches n_high. n_rec counts lost ranges
//!   (lineages) not yet acknowledged; a QUIC packet normally carries one stream range, so this is
//!   LADR's packet count.
//! - Everything unsent at that moment is "governed". The policy cannot see the send buffer, so it
//!   treats the governed data as sent when the sender next becomes application-limited (off-mode):
//!   at that point everything that was buffered has gone out. Off when n_rec < n_low and the
//!   governed data is sent.
//! - The ACK rate is LADR's per-frame ACK rate: bytes acknowledged over the time between the
//!   first and last acknowledgement of each burst, not over the idle time between bursts. A
//!   transport-level policy cannot see video frames, so a burst is what the sender sent between
//!   two application-limited (off-mode) pauses; the ACK gap before a burst's first packet is idle
//!   time and is not counted. Averaging over the idle time instead would measure the stream's own
//!   bitrate, and pacing a live stream at exactly its bitrate leaves no room for retransmissions:
//!   data queues, the measured rate falls, and the limit with it, without end.
//! - The rate is taken when the limit comes on and held for the episode. Measured under the limit
//!   it could only reproduce the limit less what was lost, and fall again every RTT.
//! - The limit never goes below two of the largest packets per SRTT, so a limit on an idle path
//!   still lets recovery proceed.

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::{mul_div, saturating_nanos, Instant};

use crate::api::{
    CopyRequest, LossId, LossTrigger, LostData, PacketInfo, RecoveryPolicy, RttSample, SendContext,
    SendKind, SendState,
};
use crate::config::LadrConfig;

/// ACK samples kept at most (one per acknowledged packet in the last SRTT).
const MAX_ACK_SAMPLES: usize = 8192;

/// The ACK-rate window before an RTT estimate exists (RFC 9002 §6.2.2 kInitialRtt).
const INITIAL_RTT: Duration = Duration::from_millis(333);

#[derive(Debug, Clone)]
pub struct LadrRrl {
    cfg: LadrConfig,
    applicable: bool,
    enabled: bool,
    governed_unsent: bool,
    to_recover: AscendingSet,
    /// (acknowledged at, bytes counted, busy nanoseconds before it) per acknowledged packet.
    acks: VecDeque<(Instant, u64, u64)>,
    acked_bytes: u64,
    /// Busy time within the window, in nanoseconds.
    busy: u64,
    last_ack: Option<Instant>,
    /// Off-mode was seen since the last packet went out: the next one starts a burst.
    idle: bool,
    /// Packets in flight that started a burst.
    burst_starts: AscendingSet,
    /// The ACK-rate window in nanoseconds: SRTT (at least 1 ms), or [`INITIAL_RTT`] before an
    /// estimate exists.
    window_nanos: u64,
    largest_packet: u64,
    /// The ACK rate at the last refresh.
    rate: AckRate,
    /// A refresh of the rate owed at this instant: acknowledgements defer theirs to the next
    /// call that looks at the rate or at another instant (`settle`).
    refresh_due: Option<Instant>,
    /// What [`RecoveryPolicy::rate_limit`] answers, kept up to date when its inputs change: the
    /// pacer asks several times per packet.
    limit_in_force: Option<u64>,
    /// The ACK rate when the limit came on, held for the episode.
    limit: u64,
    /// The highest ACK rate seen outside an episode within [`PEAK_MEMORY_NANOS`], and when: right
    /// after an outage nothing has been acknowledged for a while, and the path's rate is what it
    /// was before, not zero.
    recent_peak: (u64, Instant),
}

/// An ACK rate as measured, bytes over a span of nanoseconds, kept as the pair: the rate is
/// refreshed before every decision but its value is needed only when it sets a new peak or the
/// limit comes on, and comparing it with a peak needs no division.
#[derive(Debug, Clone, Copy)]
struct AckRate {
    bytes: u64,
    span_nanos: u64,
}

impl AckRate {
    /// Bytes per second, rounded down (saturating).
    fn per_second(self) -> u64 {
        mul_div(self.bytes, NANOS_PER_SECOND, self.span_nanos)
    }

    /// Whether [`Self::per_second`] is at least `per_second`: `floor(b·10⁹/s) >= p` exactly when
    /// `b·10⁹ >= p·s`.
    fn at_least(self, per_second: u64) -> bool {
        u128::from(self.bytes) * u128::from(NANOS_PER_SECOND)
            >= u128::from(per_second) * u128::from(self.span_nanos)
    }
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// How long a measured ACK rate stands for the path's rate after acknowledgements stop (4 s), in
/// nanoseconds.
const PEAK_MEMORY_NANOS: u64 = 4 * NANOS_PER_SECOND;

/// A set of numbers that mostly join in ascending order and leave oldest first (packet numbers
/// only grow; lost ranges are numbered as they are found and mostly recovered in that order): a
/// sorted deque, where those cases cost a compare and a push or pop rather than a tree walk.
#[derive(Debug, Clone, Default)]
struct AscendingSet(VecDeque<u64>);

impl AscendingSet {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn insert(&mut self, value: u64) {
        match self.0.back() {
            Some(&last) if last >= value => {
                if let Err(at) = self.0.binary_search(&value) {
                    self.0.insert(at, value);
                }
            }
            _ => self.0.push_back(value),
        }
    }

    /// Whether `value` was in the set.
    fn remove(&mut self, value: u64) -> bool {
        match self.0.front() {
            None => return false,
            Some(&first) if value < first => return false,
            Some(&first) if value == first => {
                self.0.pop_front();
                return true;
            }
            Some(_) => {}
        }
        match self.0.binary_search(&value) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }
}

impl LadrRrl {
    #[must_use]
    pub fn new(cfg: LadrConfig) -> Self {
        let window_nanos = saturating_nanos(INITIAL_RTT);
        Self {
            cfg,
            applicable: false,
            enabled: false,
            governed_unsent: false,
            to_recover: AscendingSet::default(),
            acks: VecDeque::new(),
            acked_bytes: 0,
            busy: 0,
            last_ack: None,
            idle: true,
            burst_starts: AscendingSet::default(),
            window_nanos,
            largest_packet: 1200,
            rate: AckRate {
                bytes: 0,
                span_nanos: window_nanos,
            },
            refresh_due: None,
            limit_in_force: None,
            limit: 0,
            recent_peak: (0, Instant::ZERO),
        }
    }

    /// Whether the rate limit is in force.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// n_rec: lost ranges not yet acknowledged.
    #[must_use]
    pub fn to_recover(&self) -> usize {
        self.to_recover.len()
    }

    /// Makes the refresh an acknowledgement deferred.
    ///
    /// Deferring changes nothing: until something else happens, only acknowledgements at the
    /// same instant follow, and each adds bytes without busy time (it is zero since the last),
    /// so the rate they lead through only grows, and a peak any of them would set is the one the
    /// last sets. Settled first: an acknowledgement with busy time (the first of an instant
    /// after a poll's refresh is owed), a full sample queue's pop (both can lower the rate), a
    /// new window (it moves the horizon), and every `update` (it reads the rate and turns the
    /// limit on and off, which decides whether a refresh may set a peak).
    fn settle(&mut self) {
        if let Some(at) = self.refresh_due.take() {
            self.refresh_rate(at);
        }
    }

    /// Makes a refresh owed at an instant other than `now`.
    fn settle_before(&mut self, now: Instant) {
        if self.refresh_due.is_some_and(|at| at != now) {
            self.settle();
        }
    }

    /// Owes a refresh at `now`, for a caller that reads nothing of the rate: a poll or the RTT
    /// update. A refresh owed at an earlier instant is dropped when no sample leaves the window
    /// by `now`: nothing but the time has changed since (every change of the samples, the window
    /// or the limit settles first), so both refreshes find the same rate, and a peak the earlier
    /// would set or stamp, the later sets or stamps with the same rate at a later instant.
    fn owe_refresh(&mut self, now: Instant) {
        let horizon = self.horizon(now);
        if self
            .acks
            .front()
            .is_some_and(|&(at, _, _)| at.as_nanos() <= horizon)
        {
            self.settle_before(now);
        }
        self.refresh_due = Some(now);
    }

    /// Refreshes the rate at `now`, after any refresh owed at an earlier instant.
    fn refresh_at(&mut self, now: Instant) {
        self.settle_before(now);
        self.refresh_due = None;
        self.refresh_rate(now);
    }

    /// Samples acknowledged at or before this (in nanoseconds) are out of the window at `now`.
    fn horizon(&self, now: Instant) -> u64 {
        now.as_nanos().saturating_sub(self.window_nanos)
    }

    fn refresh_rate(&mut self, now: Instant) {
        let horizon = self.horizon(now);
        while let Some(&(at, bytes, busy)) = self.acks.front() {
            if at.as_nanos() > horizon {
                break;
            }
            self.acked_bytes -= bytes;
            self.busy = self.busy.saturating_sub(busy);
            self.acks.pop_front();
        }
        // Busy time within the window; an empty one (a single burst acknowledged at once) falls
        // back to the whole window.
        let window = self.window_nanos;
        self.rate = AckRate {
            bytes: self.acked_bytes,
            span_nanos: if self.busy == 0 {
                window
            } else {
                self.busy.min(window)
            },
        };
        let (peak, at) = self.recent_peak;
        if !self.enabled
            && (self.rate.at_least(peak)
                || now.as_nanos().saturating_sub(at.as_nanos()) > PEAK_MEMORY_NANOS)
        {
            self.recent_peak = (self.rate.per_second(), now);
        }
    }

    /// The limit in force: the rate held for the episode, never below two of the largest
    /// packets per window.
    fn set_limit_in_force(&mut self) {
        self.limit_in_force = self.enabled.then(|| {
            let window = Duration::from_nanos(self.window_nanos);
            let floor = (2 * self.largest_packet) as f64 / window.as_secs_f64();
            self.limit.max(floor as u64)
        });
    }

    fn update(&mut self) {
        let n = self.to_recover.len();
        if !self.enabled && self.applicable && n >= self.cfg.n_high as usize {
            self.enabled = true;
            self.governed_unsent = true;
            self.limit = self.rate.per_second().max(self.recent_peak.0);
        } else if self.enabled && n < self.cfg.n_low as usize && !self.governed_unsent {
            self.enabled = false;
        } else {
            return;
        }
        self.set_limit_in_force();
    }
}

impl RecoveryPolicy for LadrRrl {
    fn name(&self) -> &'static str {
        "ladr-rrl"
    }

    fn on_packet_sent(&mut self, _: Instant, packet: &PacketInfo<'_>) {
        if packet.bytes as u64 > self.largest_packet {
            self.largest_packet = packet.bytes as u64;
            self.set_limit_in_force();
        }
        if self.idle && self.burst_starts.len() < MAX_ACK_SAMPLES {
            self.burst_starts.insert(packet.pn);
        }
        self.idle = false;
    }

    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>) {
        let starts_burst = self.burst_starts.remove(packet.pn);
        // The first acknowledgement of a burst only marks its start: the gap before it is idle.
        let (bytes, busy) = match self.last_ack {
            Some(last) if !starts_burst => (
                packet.bytes as u64,
                now.as_nanos().saturating_sub(last.as_nanos()),
            ),
            _ => (0, 0),
        };
        if busy > 0 {
            // Busy time can lower the rate: a refresh owed at this instant (a poll's, before
            // any acknowledgement of the instant) is settled too.
            self.settle();
        } else {
            self.settle_before(now);
        }
        if self.acks.len() == MAX_ACK_SAMPLES {
            self.settle();
            if let Some((_, bytes, busy)) = self.acks.pop_front() {
                self.acked_bytes -= bytes;
                self.busy = self.busy.saturating_sub(busy);
            }
        }
        self.last_ack = Some(now);
        self.acks.push_back((now, bytes, busy));
        self.acked_bytes = self.acked_bytes.saturating_add(bytes);
        self.busy = self.busy.saturating_add(busy);
        self.refresh_due = Some(now);
    }

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, _: LossTrigger) {
        self.burst_starts.remove(packet.pn);
        if packet.kind != SendKind::New {
            self.applicable = true;
        }
        self.refresh_at(now);
        self.update();
    }

    fn on_data_lost(&mut self, _: Instant, lost: &LostData) {
        self.settle();
        self.to_recover.insert(lost.id);
        self.update();
    }

    fn on_data_acked(&mut self, _: Instant, id: LossId) {
        self.settle();
        self.to_recover.remove(id);
        self.update();
    }

    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        let window_nanos = saturating_nanos(rtt.smoothed.max(Duration::from_millis(1)));
        if window_nanos != self.window_nanos {
            self.settle();
            self.window_nanos = window_nanos;
            self.set_limit_in_force();
        }
        self.owe_refresh(now);
    }

    fn on_send_state(&mut self, _: Instant, state: SendState) {
        if state == SendState::OffMode {
            self.settle();
            self.idle = true;
            self.governed_unsent = false;
            self.update();
        }
    }

    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest> {
        if ctx.state == SendState::OffMode {
            self.idle = true;
            if self.governed_unsent {
                self.settle();
                self.governed_unsent = false;
                self.update();
            }
        }
        self.owe_refresh(now);
        None
    }

    fn rate_limit(&self) -> Option<u64> {
        self.limit_in_force
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, ctx_in, lost_round, ms, packet, ranges, rtt};

    fn lose_retransmission(p: &mut LadrRrl) {
        let r = ranges(Some(77));
        let info = packet(1, ms(0), SendKind::Retransmission, &r);
        p.on_packet_lost(ms(1), &info, LossTrigger::PacketThreshold);
    }

    #[test]
    fn stays_off_until_a_retransmission_is_lost() {
        let mut p = LadrRrl::new(LadrConfig::default());
        for id in 0..10 {
            p.on_data_lost(ms(0), &lost_round(id, 1));
        }
        assert!(!p.enabled());
        assert_eq!(p.rate_limit(), None);
        lose_retransmission(&mut p);
        assert!(p.enabled());
    }

    #[test]
    fn hysteresis_between_n_high_and_n_low_and_governed_data() {
        let mut p = LadrRrl::new(LadrConfig::default());
        lose_retransmission(&mut p);
        for id in 0..3 {
            p.on_data_lost(ms(0), &lost_round(id, 1));
        }
        assert!(!p.enabled(), "3 < n_high");
        p.on_data_lost(ms(0), &lost_round(3, 1));
        assert!(p.enabled(), "4 >= n_high");
        p.on_data_acked(ms(5), 0);
        p.on_data_acked(ms(5), 1);
        p.on_data_acked(ms(5), 2);
        assert!(
            p.enabled(),
            "n_rec = 1 < n_low but the governed data is not sent yet"
        );
        assert_eq!(p.poll_copy(ms(6), &ctx(0)), None);
        assert!(p.enabled());
        p.on_send_state(ms(7), SendState::OffMode);
        assert!(!p.enabled(), "governed data sent and n_rec < n_low");

        p.on_data_acked(ms(7), 3);
        // Governed data sent first, then recovery drains below n_low.
        for id in 10..14 {
            p.on_data_lost(ms(8), &lost_round(id, 1));
        }
        assert!(p.enabled());
        assert_eq!(p.poll_copy(ms(9), &ctx_in(SendState::OffMode, 0)), None);
        assert!(p.enabled(), "n_rec = 4");
        p.on_data_acked(ms(10), 10);
        p.on_data_acked(ms(10), 11);
        assert!(p.enabled(), "n_rec = 2 is not below n_low");
        p.on_data_acked(ms(10), 12);
        assert!(!p.enabled());
        p.on_data_acked(ms(10), 13);
        assert_eq!(p.to_recover(), 0);
    }

    #[test]
    fn limit_is_the_ack_rate_over_one_srtt() {
        let mut p = LadrRrl::new(LadrConfig::default());
        p.on_rtt_update(ms(0), &rtt(100));
        let new = ranges(None);
        // 50 packets of 1200 bytes acked over the last 100 ms: 600 kB/s.
        for i in 0..50 {
            p.on_packet_acked(ms(1000 + 2 * i), &packet(i, ms(900), SendKind::New, &new));
        }
        lose_retransmission(&mut p);
        for id in 0..4 {
            p.on_data_lost(ms(1099), &lost_round(id, 1));
        }
        assert!(p.enabled());
        p.poll_copy(ms(1099), &ctx(0));
        assert_eq!(p.rate_limit(), Some(600_000));
        // The limit is held for the episode: acknowledgements slowed by the limit itself do
        // not lower it further.
        p.poll_copy(ms(5000), &ctx(0));
        assert_eq!(p.rate_limit(), Some(600_000));
        p.settle();
        assert_eq!(p.rate.per_second(), 0);
    }

    #[test]
    fn idle_gaps_between_bursts_do_not_count() {
        let mut p = LadrRrl::new(LadrConfig::default());
        p.on_rtt_update(ms(0), &rtt(100));
        let new = ranges(None);
        // Two bursts of 5 packets acked 1 ms apart, 40 ms of application idle between them: the
        // rate is that of the bursts (1.2 MB/s), not the average over the window.
        let mut pn = 0;
        for burst in 0..2 {
            p.on_send_state(ms(burst * 40), SendState::OffMode);
            for _ in 0..5 {
                p.on_packet_sent(
                    ms(burst * 40),
                    &packet(pn, ms(burst * 40), SendKind::New, &new),
                );
                pn += 1;
            }
        }
        for i in 0..10 {
            let at = 1000 + (i / 5) * 40 + i % 5;
            p.on_packet_acked(ms(at), &packet(i, ms(0), SendKind::New, &new));
        }
        p.settle();
        assert_eq!(p.rate.per_second(), 1_200_000);
    }

    /// A full queue of ACK samples drops the oldest, which can lower the rate: that
    /// acknowledgement refreshes at once, as every one did before refreshes were deferred.
    #[test]
    fn a_full_sample_queue_refreshes_at_once() {
        let mut eager = LadrRrl::new(LadrConfig::default());
        eager.on_rtt_update(ms(0), &rtt(1000));
        let mut lazy = eager.clone();
        let new = ranges(None);
        // The queue fills with small packets; then, at one instant, large ones raise the rate
        // to a new peak, and tiny ones, each dropping a small one, lower it again.
        let half = MAX_ACK_SAMPLES as u64 / 2;
        let sizes = (0..2 * half).map(|i| (ms(1 + i / half), 100));
        let sizes = sizes
            .chain((0..100).map(|_| (ms(2), 9000)))
            .chain((0..1000).map(|_| (ms(2), 1)));
        for (pn, (at, bytes)) in (0u64..).zip(sizes) {
            let mut info = packet(pn, ms(0), SendKind::New, &new);
            info.bytes = bytes;
            for p in [&mut eager, &mut lazy] {
                p.on_packet_acked(at, &info);
            }
            eager.settle();
        }
        lazy.settle();
        assert_eq!(format!("{eager:?}"), format!("{lazy:?}"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x1adf_0001),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// The sorted deque agrees with a B-tree set over mostly ascending inserts and removals
        /// in any order.
        #[test]
        fn ascending_set_is_a_set(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u64..64), 0..200),
        ) {
            let mut set = AscendingSet::default();
            let mut model = std::collections::BTreeSet::new();
            for (insert, value) in ops {
                if insert {
                    set.insert(value);
                    model.insert(value);
                } else {
                    proptest::prop_assert_eq!(set.remove(value), model.remove(&value));
                }
                proptest::prop_assert!(set.0.iter().eq(model.iter()));
            }
        }

        /// Deferring the refresh after an acknowledgement changes nothing: a policy that
        /// settles after every call and one that defers agree on every answer, and hold the same
        /// state once both settle. Events come mostly several at one instant, as a batch of
        /// acknowledgements does.
        #[test]
        fn deferred_refresh_is_the_eager_one(
            events in proptest::collection::vec((0u8..8, 0u64..3, 0u64..40), 0..400),
        ) {
            let mut eager = LadrRrl::new(LadrConfig::default());
            let mut lazy = eager.clone();
            let (mut now, mut pn) = (ms(0), 0u64);
            for (i, &(kind, step, x)) in events.iter().enumerate() {
                now += Duration::from_millis(step * x % 7);
                let new = ranges(None);
                let again = ranges(Some(x));
                let acked = packet(pn.saturating_sub(x), ms(0), SendKind::New, &new);
                let lost = packet(pn.saturating_sub(x), ms(0), SendKind::Retransmission, &again);
                let state = if x % 2 == 0 { SendState::OffMode } else { SendState::OnMode };
                for p in [&mut eager, &mut lazy] {
                    match kind {
                        0 | 1 => p.on_packet_acked(now, &acked),
                        2 => p.on_packet_sent(now, &packet(pn, now, SendKind::New, &new)),
                        3 => p.on_packet_lost(now, &lost, LossTrigger::PacketThreshold),
                        4 => p.on_data_lost(now, &lost_round(x, 1)),
                        5 => p.on_data_acked(now, x),
                        6 => p.on_rtt_update(now, &rtt(10 + 20 * (x % 4))),
                        _ => {
                            p.on_send_state(now, state);
                            let copy = p.poll_copy(now, &ctx_in(state, pn));
                            proptest::prop_assert_eq!(copy, None);
                        }
                    }
                }
                pn += 1;
                eager.settle();
                proptest::prop_assert_eq!(eager.rate_limit(), lazy.rate_limit(), "event {}", i);
                proptest::prop_assert_eq!(eager.enabled(), lazy.enabled(), "event {}", i);
            }
            lazy.settle();
            proptest::prop_assert_eq!(format!("{eager:?}"), format!("{lazy:?}"));
        }

        /// The comparison made before every decision agrees with the division it stands for,
        /// also at the rounding boundary (`p` one above or below the rate).
        #[test]
        fn at_least_agrees_with_per_second(
            bytes in 0u64..1 << 40,
            span_nanos in 1u64..10_000_000_000,
            p in 0u64..1 << 45,
            near in -1i64..=1,
        ) {
            // A rate that divides exactly, whose per-second value is the boundary itself.
            let exact = AckRate { bytes: (bytes >> 20) * span_nanos, span_nanos };
            for rate in [AckRate { bytes, span_nanos }, exact] {
                for p in [p, rate.per_second().saturating_add_signed(near)] {
                    proptest::prop_assert_eq!(
                        rate.at_least(p), rate.per_second() >= p, "{:?}, p = {}", rate, p
                    );
                }
            }
        }
    }
}
