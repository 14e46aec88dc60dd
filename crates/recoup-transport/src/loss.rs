//! Loss detection (RFC 9002 §6 and its Appendix A pseudocode).
//!
//! [`LossDetection`] keeps the sent-but-unacknowledged packets of the three packet number spaces,
//! turns ACK frames into acknowledged and lost packets, estimates the RTT and runs the loss
//! detection timer (time-threshold losses and probe timeouts). It knows nothing of frames: each
//! packet carries the connection's payload `T`, handed back when the packet is acknowledged, lost
//! or discarded. Lost packets are removed at once, so state is bounded by what is in flight.
//!
//! [`LossDetectionMode::RackTlp`] swaps in RACK-TLP (RFC 8985): RACK's time-based detection
//! (`loss::rack`) replaces RFC 9002's thresholds, and a tail loss probe replaces the first PTO.
//! Both run on the same sent-packet maps, RTT estimator and timer.

mod rack;
mod sent;

use std::collections::VecDeque;
use std::fmt;
use std::ops::{Index, IndexMut, RangeInclusive};
use std::str::FromStr;
use std::time::Duration;

use recoup_recovery::LossTrigger;
use recoup_time::Instant;

use crate::delivery_rate::{DeliveryRateEstimator, RateSample, RateSnapshot};
use crate::error::{transport_err, Error, TransportError};
use crate::rtt::{mul_ratio, RttEstimator, DEFAULT_INITIAL_RTT, GRANULARITY};
use rack::{Rack, RackAck};
use sent::SentPackets;

/// A packet number space (RFC 9000 §12.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpaceId {
    Initial,
    Handshake,
    /// 0-RTT and 1-RTT packets.
    Data,
}

impl SpaceId {
    /// All spaces, in the order RFC 9002 Appendix A iterates them.
    pub const ALL: [SpaceId; 3] = [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data];

    /// Position in [`SpaceId::ALL`], for per-space arrays.
    #[must_use]
    pub const fn index(self) -> usize {
        match self {
            SpaceId::Initial => 0,
            SpaceId::Handshake => 1,
            SpaceId::Data => 2,
        }
    }
}

/// One value per packet number space, indexed by [`SpaceId`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerSpace<V>(pub [V; 3]);

impl<V> Index<SpaceId> for PerSpace<V> {
    type Output = V;
    fn index(&self, space: SpaceId) -> &V {
        &self.0[space.index()]
    }
}

impl<V> IndexMut<SpaceId> for PerSpace<V> {
    fn index_mut(&mut self, space: SpaceId) -> &mut V {
        &mut self.0[space.index()]
    }
}

/// A sent packet as loss detection tracks it (RFC 9002 Appendix A.1.1).
#[derive(Clone, Debug)]
pub struct SentPacket<T> {
    pub pn: u64,
    pub time_sent: Instant,
    /// Bytes of the UDP payload this packet occupies (counts toward bytes in flight).
    pub size: usize,
    pub ack_eliciting: bool,
    /// Counts toward bytes in flight and congestion control (RFC 9002 §2: ack-eliciting or
    /// PADDING-carrying packets).
    pub in_flight: bool,
    /// Delivery-rate snapshot; filled by [`LossDetection::on_packet_sent`].
    pub rate: RateSnapshot,
    /// The connection's record of what the packet carried.
    pub data: T,
}

impl<T> SentPacket<T> {
    /// A packet about to be handed to [`LossDetection::on_packet_sent`].
    #[must_use]
    pub fn new(
        pn: u64,
        time_sent: Instant,
        size: usize,
        ack_eliciting: bool,
        in_flight: bool,
        data: T,
    ) -> Self {
        Self {
            pn,
            time_sent,
            size,
            ack_eliciting,
            in_flight,
            rate: RateSnapshot::default(),
            data,
        }
    }
}

/// A packet declared lost, and why.
#[derive(Clone, Debug)]
pub struct LostPacket<T> {
    pub packet: SentPacket<T>,
    pub trigger: LossTrigger,
}

/// Losses declared by one ACK or one timer expiry, all in one space.
#[derive(Clone, Debug)]
pub struct LossReport<T> {
    /// Ascending packet numbers.
    pub lost: Vec<LostPacket<T>>,
    /// RFC 9002 §7.6.2: the lost packets establish persistent congestion.
    pub persistent_congestion: bool,
}

impl<T> Default for LossReport<T> {
    fn default() -> Self {
        Self {
            lost: Vec::new(),
            persistent_congestion: false,
        }
    }
}

impl<T> LossReport<T> {
    /// What the congestion controller needs (RFC 9002 Appendix B.8): the send time of the newest
    /// in-flight lost packet and the in-flight bytes lost. `None` if no in-flight packet was lost.
    #[must_use]
    pub fn congestion_signal(&self) -> Option<(Instant, u64)> {
        let mut newest = None;
        let mut bytes = 0u64;
        for l in self.lost.iter().filter(|l| l.packet.in_flight) {
            bytes = bytes.saturating_add(l.packet.size as u64);
            newest = newest.max(Some(l.packet.time_sent));
        }
        newest.map(|t| (t, bytes))
    }
}

/// What one ACK frame did.
#[derive(Clone, Debug)]
pub struct AckOutcome<T> {
    /// Newly acknowledged packets, ascending packet numbers.
    pub acked: Vec<SentPacket<T>>,
    /// Packets declared lost while processing the ACK.
    pub losses: LossReport<T>,
    /// The largest acknowledged packet was newly acknowledged and an ack-eliciting packet was
    /// among the newly acknowledged: the RTT estimate was updated (RFC 9002 §5.1).
    pub rtt_updated: bool,
    /// Acknowledgements of packets this detector had already declared lost (spurious losses).
    /// Counted only for recent losses (the last few hundred per space).
    pub spurious: u64,
    /// Delivery-rate sample, if in-flight packets were acknowledged.
    pub rate_sample: Option<RateSample>,
    /// Bytes in flight before this ACK was processed.
    pub prior_bytes_in_flight: u64,
}

impl<T> AckOutcome<T> {
    fn empty(prior_bytes_in_flight: u64, acked: Vec<SentPacket<T>>) -> Self {
        Self {
            acked,
            losses: LossReport::default(),
            rtt_updated: false,
            spurious: 0,
            rate_sample: None,
            prior_bytes_in_flight,
        }
    }
}

/// What the loss detection timer did when it fired (RFC 9002 Appendix A.9).
#[derive(Clone, Debug)]
pub enum TimeoutOutcome<T> {
    /// The timer is not armed or not yet due.
    NotDue,
    /// Packets of `space` were declared lost by the time threshold.
    Lost {
        space: SpaceId,
        losses: LossReport<T>,
    },
    /// A probe timeout: the connection must send `count` ack-eliciting packets in `space` (new
    /// data if it has some, else retransmitted data, else PING; RFC 9002 §6.2.4). For the client's
    /// anti-deadlock probe (nothing in flight, RFC 9002 §6.2.2.1) `count` is 1 and the Initial
    /// probe must be padded to 1200 bytes.
    Probe { space: SpaceId, count: u8 },
}

/// Which loss detection algorithm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LossDetectionMode {
    /// RFC 9002 §6: packet and time thresholds, probe timeouts.
    #[default]
    Rfc9002,
    /// RFC 8985: RACK's time-based detection with an adaptive reordering window, and a tail loss
    /// probe before the first PTO (the loss detection of the LADR paper).
    RackTlp,
}

impl LossDetectionMode {
    /// Accepted names, in the order of the error message.
    pub const NAMES: [&'static str; 2] = ["rfc9002", "rack-tlp"];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LossDetectionMode::Rfc9002 => "rfc9002",
            LossDetectionMode::RackTlp => "rack-tlp",
        }
    }
}

impl fmt::Display for LossDetectionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LossDetectionMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rfc9002" => Ok(LossDetectionMode::Rfc9002),
            "rack-tlp" | "rack_tlp" | "racktlp" | "rack" => Ok(LossDetectionMode::RackTlp),
            _ => Err(Error::invalid(
                "loss detection",
                format!(
                    "unknown name {s:?}; accepted: {}",
                    LossDetectionMode::NAMES.join(", ")
                ),
            )),
        }
    }
}

/// Which RTT sample, besides smoothed_rtt, sets the time threshold (RFC 9002 §6.1.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThresholdRtt {
    /// The latest RTT sample as measured, ACK delay included: RFC 9002 §6.1.2 and Appendix A.7.
    #[default]
    Latest,
    /// The latest sample less the peer's reported ACK delay, adjusted as RFC 9002 §5.3 adjusts
    /// it for smoothed_rtt. quic-go's time threshold reads this sample
    /// (`RTTStats.UpdateRTT` stores the adjusted sample as its latest RTT). On application
    /// limited traffic the last packet of a burst is acknowledged only after the peer's
    /// max_ack_delay, so the measured sample carries that delay into the loss delay.
    Adjusted,
}

impl ThresholdRtt {
    /// Accepted names, in the order of the error message.
    pub const NAMES: [&'static str; 2] = ["latest", "adjusted"];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ThresholdRtt::Latest => "latest",
            ThresholdRtt::Adjusted => "adjusted",
        }
    }
}

impl fmt::Display for ThresholdRtt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ThresholdRtt {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "latest" => Ok(ThresholdRtt::Latest),
            "adjusted" => Ok(ThresholdRtt::Adjusted),
            _ => Err(Error::invalid(
                "time threshold RTT",
                format!(
                    "unknown name {s:?}; accepted: {}",
                    ThresholdRtt::NAMES.join(", ")
                ),
            )),
        }
    }
}

/// Loss detection settings. Defaults are RFC 9002's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossConfig {
    /// Whether this endpoint is the server (a server always considers its peer's address
    /// validated, RFC 9002 Appendix A.6 "PeerCompletedAddressValidation").
    pub server: bool,
    /// RFC 9002 §6.1.1 kPacketThreshold.
    pub packet_threshold: u64,
    /// RFC 9002 §6.1.2 kTimeThreshold as `(numerator, denominator)`; 9/8.
    pub time_threshold: (u32, u32),
    /// The RTT sample the time threshold multiplies, with smoothed_rtt.
    pub threshold_rtt: ThresholdRtt,
    /// RFC 9002 §6.2.2 kInitialRtt.
    pub initial_rtt: Duration,
    /// The peer's max_ack_delay (RFC 9000 §18.2); replace with
    /// [`LossDetection::set_max_ack_delay`] once transport parameters arrive.
    pub max_ack_delay: Duration,
    /// The detection algorithm. In [`LossDetectionMode::RackTlp`] `time_threshold` is unused and
    /// `packet_threshold` applies only until reordering is seen.
    pub detection: LossDetectionMode,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            server: false,
            packet_threshold: 3,
            time_threshold: (9, 8),
            threshold_rtt: ThresholdRtt::Latest,
            initial_rtt: DEFAULT_INITIAL_RTT,
            max_ack_delay: Duration::from_millis(25),
            detection: LossDetectionMode::Rfc9002,
        }
    }
}

/// RFC 9002 §7.6.1 kPersistentCongestionThreshold.
const PERSISTENT_CONGESTION_THRESHOLD: u32 = 3;

/// How many recently lost packet numbers a space remembers to recognise spurious losses.
const SPURIOUS_MEMORY: usize = 256;

/// A cap on the PTO backoff exponent; beyond it the timer is already years away.
const MAX_BACKOFF_EXPONENT: u32 = 30;

/// The last [`SPURIOUS_MEMORY`] packet numbers declared lost, oldest first. An ACK range is
/// checked against every remembered number; the sorted copy answers "none in this range", the
/// common case, without scanning them all. A sorted `Vec` rather than a tree: losses are mostly
/// declared in packet-number order (so a new one goes at the end), and every ACK frame walks the
/// numbers within its span, which a slice does in a few instructions each.
#[derive(Debug, Default)]
struct RecentlyLost {
    order: VecDeque<u64>,
    /// The numbers of `order`, ascending.
    sorted: Vec<u64>,
}

impl RecentlyLost {
    /// A packet number is declared lost at most once, so the two copies hold the same set.
    fn push(&mut self, pn: u64) {
        if self.order.len() == SPURIOUS_MEMORY {
            if let Some(old) = self.order.pop_front() {
                self.forget(old);
            }
        }
        self.order.push_back(pn);
        let at = self.sorted.partition_point(|&x| x < pn);
        self.sorted.insert(at, pn);
    }

    fn forget(&mut self, pn: u64) {
        if let Ok(i) = self.sorted.binary_search(&pn) {
            self.sorted.remove(i);
        }
    }

    /// The remembered numbers within `r`, as indices into `sorted`.
    fn span(&self, r: &RangeInclusive<u64>) -> std::ops::Range<usize> {
        let from = self.sorted.partition_point(|&x| x < *r.start());
        let to = self.sorted.partition_point(|&x| x <= *r.end());
        from..to.max(from)
    }

    /// Forgets the numbers the non-empty `ranges` acknowledge and says how many there were.
    fn remove_acked(&mut self, ranges: &[RangeInclusive<u64>]) -> u64 {
        let mut acked = Vec::new();
        let nonempty = || ranges.iter().filter(|r| !r.is_empty());
        let descending = nonempty()
            .zip(nonempty().skip(1))
            .all(|(a, b)| b.end() < a.start());
        if descending {
            // An ACK frame's ranges come largest first and disjoint: one walk down the
            // remembered numbers within their span, in step with the ranges.
            let (Some(hi), Some(lo)) = (nonempty().next(), nonempty().next_back()) else {
                return 0;
            };
            let mut rs = nonempty().peekable();
            for &pn in self.sorted[self.span(&(*lo.start()..=*hi.end()))]
                .iter()
                .rev()
            {
                while rs.next_if(|r| *r.start() > pn).is_some() {}
                if rs.peek().is_some_and(|r| r.contains(&pn)) {
                    acked.push(pn);
                }
            }
            for &pn in &acked {
                self.forget(pn);
            }
        } else {
            // Ranges in any order may overlap: each number is taken once.
            for r in nonempty() {
                let span = self.span(r);
                acked.extend(self.sorted.drain(span));
            }
        }
        if acked.is_empty() {
            return 0;
        }
        self.order
            .retain(|pn| self.sorted.binary_search(pn).is_ok());
        acked.len() as u64
    }

    fn clear(&mut self) {
        self.order.clear();
        self.sorted.clear();
    }
}

#[derive(Debug)]
struct Space<T> {
    sent: SentPackets<T>,
    largest_sent: Option<u64>,
    largest_acked: Option<u64>,
    loss_time: Option<Instant>,
    time_of_last_ack_eliciting: Option<Instant>,
    ack_eliciting_in_flight: u64,
    recently_lost: RecentlyLost,
    discarded: bool,
    /// Used only in [`LossDetectionMode::RackTlp`].
    rack: Rack,
}

impl<T> Space<T> {
    fn new() -> Self {
        Self {
            sent: SentPackets::default(),
            largest_sent: None,
            largest_acked: None,
            loss_time: None,
            time_of_last_ack_eliciting: None,
            ack_eliciting_in_flight: 0,
            recently_lost: RecentlyLost::default(),
            discarded: false,
            rack: Rack::new(),
        }
    }
}

/// Loss detection for one connection (RFC 9002 §6, Appendix A).
#[derive(Debug)]
pub struct LossDetection<T> {
    config: LossConfig,
    spaces: [Space<T>; 3],
    rtt: RttEstimator,
    rate: DeliveryRateEstimator,
    bytes_in_flight: u64,
    pto_count: u32,
    /// An upper bound on the backed-off probe timeout period (`MaxPto`), never below the
    /// un-backed-off period.
    max_pto: Option<Duration>,
    /// RackTlp: the tail loss probe fired and no ACK has made progress since (RFC 8985 §7.3).
    tlp_fired: bool,
    handshake_confirmed: bool,
    handshake_ack_received: bool,
    amplification_blocked: bool,
    timer: Option<Instant>,
    /// An emptied [`AckOutcome::acked`] handed back ([`Self::recycle_acked`]): the next ACK's
    /// fills it rather than a new allocation.
    spare_acked: Vec<SentPacket<T>>,
}

impl<T> LossDetection<T> {
    #[must_use]
    pub fn new(config: LossConfig) -> Self {
        Self {
            config,
            spaces: [Space::new(), Space::new(), Space::new()],
            rtt: RttEstimator::new(config.initial_rtt),
            rate: DeliveryRateEstimator::new(),
            bytes_in_flight: 0,
            pto_count: 0,
            max_pto: None,
            tlp_fired: false,
            handshake_confirmed: false,
            handshake_ack_received: false,
            amplification_blocked: false,
            timer: None,
            spare_acked: Vec::new(),
        }
    }

    /// Takes back an [`AckOutcome::acked`] its caller is done with, for the next ACK to fill.
    pub fn recycle_acked(&mut self, mut acked: Vec<SentPacket<T>>) {
        acked.clear();
        self.spare_acked = acked;
    }

    fn space(&self, id: SpaceId) -> &Space<T> {
        &self.spaces[id.index()]
    }

    fn space_mut(&mut self, id: SpaceId) -> &mut Space<T> {
        &mut self.spaces[id.index()]
    }

    /// RFC 9002 Appendix A.5 OnPacketSent. Fills `packet.rate`. Packets of a discarded space are
    /// dropped (the keys are gone; nothing can acknowledge them). Returns the packet back if the
    /// space was discarded or `packet.pn` does not increase, so the caller can release it.
    pub fn on_packet_sent(
        &mut self,
        space: SpaceId,
        mut packet: SentPacket<T>,
        now: Instant,
    ) -> Option<SentPacket<T>> {
        let bytes_in_flight = self.bytes_in_flight;
        let s = self.space_mut(space);
        if s.discarded || s.largest_sent.is_some_and(|l| packet.pn <= l) {
            return Some(packet);
        }
        s.largest_sent = Some(packet.pn);
        if packet.in_flight {
            if packet.ack_eliciting {
                s.time_of_last_ack_eliciting = Some(packet.time_sent);
                s.ack_eliciting_in_flight += 1;
            }
            packet.rate =
                self.rate
                    .on_packet_sent(packet.time_sent, packet.size as u64, bytes_in_flight);
            self.bytes_in_flight = self.bytes_in_flight.saturating_add(packet.size as u64);
        }
        self.space_mut(space).sent.push(packet);
        self.set_timer(now);
        None
    }

    /// RFC 9002 Appendix A.7 OnAckReceived. `ranges` are the acknowledged packet numbers, in any
    /// order; `ack_delay` is the decoded ACK Delay field.
    ///
    /// # Errors
    /// PROTOCOL_VIOLATION if a range acknowledges a packet number never sent (RFC 9000 §13.1).
    pub fn on_ack_received(
        &mut self,
        space: SpaceId,
        ranges: &[RangeInclusive<u64>],
        ack_delay: Duration,
        now: Instant,
    ) -> Result<AckOutcome<T>, TransportError> {
        let spare = std::mem::take(&mut self.spare_acked);
        let mut outcome = AckOutcome::empty(self.bytes_in_flight, spare);
        let s = self.space(space);
        if s.discarded {
            return Ok(outcome);
        }
        let Some(largest) = ranges
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| *r.end())
            .max()
        else {
            return Ok(outcome);
        };
        if s.largest_sent.is_none_or(|l| largest > l) {
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "ACK of unsent packet {largest} in {space:?} space"
            ));
        }
        if space == SpaceId::Handshake {
            self.handshake_ack_received = true;
        }
        let s = self.space_mut(space);
        s.largest_acked = Some(s.largest_acked.map_or(largest, |l| l.max(largest)));

        // DetectAndRemoveAckedPackets.
        let mut sampler = DeliveryRateEstimator::sampler();
        for r in ranges {
            let s = &mut self.spaces[space.index()];
            // Most ranges of an ACK repeat packets acknowledged long ago: outside the window
            // of tracked packets, an empty span.
            for pn in s.sent.window(r.clone()) {
                let Some(p) = s.sent.remove(pn) else {
                    continue;
                };
                if p.in_flight {
                    self.bytes_in_flight = self.bytes_in_flight.saturating_sub(p.size as u64);
                    if p.ack_eliciting {
                        s.ack_eliciting_in_flight = s.ack_eliciting_in_flight.saturating_sub(1);
                    }
                    self.rate.on_packet_acked(
                        &mut sampler,
                        now,
                        p.size as u64,
                        p.time_sent,
                        &p.rate,
                    );
                }
                outcome.acked.push(p);
            }
        }
        outcome.spurious += self.spaces[space.index()]
            .recently_lost
            .remove_acked(ranges);
        if self.config.detection == LossDetectionMode::RackTlp {
            // RFC 8985 §6.2 steps 2-4, before detection (step 5). A spurious-only ACK still
            // counts as reordering evidence.
            let s = &mut self.spaces[space.index()];
            let ack = RackAck {
                newest: outcome
                    .acked
                    .iter()
                    .max_by_key(|p| p.pn)
                    .map(|p| (p.pn, p.time_sent)),
                oldest: outcome.acked.iter().map(|p| p.pn).min(),
                spurious: outcome.spurious > 0,
                largest_sent: s.largest_sent,
            };
            s.rack.on_ack(&ack, now);
        }
        if outcome.acked.is_empty() {
            return Ok(outcome);
        }
        outcome.acked.sort_unstable_by_key(|p| p.pn);
        outcome.rate_sample = self.rate.finish(sampler, now, self.rtt.min());

        // RFC 9002 §5.1: sample only if the largest acknowledged is new and ack-eliciting
        // packets were acknowledged.
        let newest = outcome.acked.last().filter(|p| p.pn == largest);
        if let Some(newest) = newest {
            if outcome.acked.iter().any(|p| p.ack_eliciting) {
                // RFC 9002 §5.3 allows ignoring the delay for Initial packets, and RFC 9000
                // §13.2.1 has Initial and Handshake packets acknowledged without delay.
                let ack_delay = if space == SpaceId::Data {
                    ack_delay
                } else {
                    Duration::ZERO
                };
                let latest = now.saturating_duration_since(newest.time_sent);
                self.rtt.update(
                    now,
                    latest,
                    ack_delay,
                    self.config.max_ack_delay,
                    self.handshake_confirmed,
                );
                outcome.rtt_updated = true;
            }
        }

        outcome.losses = self.detect_and_remove_lost(space, now);

        // RFC 9002 §6.2.1 / Appendix A.7: a client unsure that the server validated its address
        // keeps backing off.
        if self.peer_completed_address_validation() {
            self.pto_count = 0;
            self.tlp_fired = false;
        }
        self.set_timer(now);
        Ok(outcome)
    }

    /// RFC 9002 Appendix A.10 DetectAndRemoveLostPackets, plus the persistent congestion check of
    /// Appendix B.8.
    fn detect_and_remove_lost(&mut self, space: SpaceId, now: Instant) -> LossReport<T> {
        let rack_mode = self.config.detection == LossDetectionMode::RackTlp;
        let loss_delay = if rack_mode {
            // RFC 8985 §6.2 step 5: RACK.rtt + RACK.reo_wnd.
            self.space(space).rack.loss_delay(&self.rtt)
        } else {
            let (num, den) = self.config.time_threshold;
            // RFC 9002 §6.1.2: kTimeThreshold · max(smoothed_rtt, latest_rtt), at least
            // kGranularity.
            let latest = match self.config.threshold_rtt {
                ThresholdRtt::Latest => self.rtt.latest(),
                ThresholdRtt::Adjusted => self.rtt.latest_adjusted(),
            };
            mul_ratio(
                latest.max(self.rtt.smoothed()),
                u64::from(num),
                u64::from(den),
            )
            .max(GRANULARITY)
        };
        let lost_send_time = now.checked_sub(loss_delay);
        let packet_threshold = self.config.packet_threshold;
        // A loss found only because a probe was acknowledged is the probe timeout's doing.
        let after_pto = self.pto_count > 0 || self.tlp_fired;
        let s = &mut self.spaces[space.index()];
        s.loss_time = None;
        // RACK judges only packets sent before the newest delivered one (RACK.end_seq), which
        // with increasing packet numbers are those below it, as with RFC 9002's largest acked.
        let horizon = if rack_mode {
            s.rack.end_seq()
        } else {
            s.largest_acked
        };
        let Some(largest_acked) = horizon else {
            return LossReport::default();
        };
        // RFC 8985 §6.2: counting later deliveries is only sound until reordering is seen.
        let count_applies = !rack_mode || s.rack.packet_threshold_applies();
        let mut lost_pns = Vec::new();
        for p in s.sent.range(..largest_acked) {
            let pn = p.pn;
            if rack_mode && !s.rack.sent_before_newest(p.time_sent, pn) {
                continue;
            }
            // RFC 9002 §6.1.1 (assumes no sender-induced gaps in packet numbers).
            let by_count = count_applies && largest_acked - pn >= packet_threshold;
            let by_time = lost_send_time.is_some_and(|t| p.time_sent <= t);
            if by_count || by_time {
                let trigger = if after_pto {
                    LossTrigger::Pto
                } else if by_count {
                    LossTrigger::PacketThreshold
                } else {
                    LossTrigger::TimeThreshold
                };
                lost_pns.push((pn, trigger));
            } else {
                let t = p.time_sent.saturating_add(loss_delay);
                s.loss_time = Some(s.loss_time.map_or(t, |l| l.min(t)));
            }
        }
        let mut lost = Vec::with_capacity(lost_pns.len());
        for (pn, trigger) in lost_pns {
            let Some(packet) = s.sent.remove(pn) else {
                continue;
            };
            if packet.in_flight {
                self.bytes_in_flight = self.bytes_in_flight.saturating_sub(packet.size as u64);
                if packet.ack_eliciting {
                    s.ack_eliciting_in_flight = s.ack_eliciting_in_flight.saturating_sub(1);
                }
            }
            s.recently_lost.push(pn);
            lost.push(LostPacket { packet, trigger });
        }
        if rack_mode && !lost.is_empty() {
            s.rack.on_loss(s.largest_sent);
        }
        let persistent_congestion = self.persistent_congestion(&lost);
        LossReport {
            lost,
            persistent_congestion,
        }
    }

    /// RFC 9002 §7.6: the persistent congestion duration.
    fn persistent_congestion_duration(&self) -> Duration {
        self.rtt
            .pto_base()
            .saturating_add(self.config.max_ack_delay)
            .saturating_mul(PERSISTENT_CONGESTION_THRESHOLD)
    }

    /// RFC 9002 §7.6.2: two ack-eliciting packets, sent after the first RTT sample, lost with
    /// nothing acknowledged between them, sent more than the persistent congestion duration
    /// apart. Packets between them must all be in this loss (consecutive packet numbers), which
    /// conservatively ignores runs spanning earlier losses or other spaces.
    fn persistent_congestion(&self, lost: &[LostPacket<T>]) -> bool {
        let Some(first_sample) = self.rtt.first_sample_time() else {
            return false;
        };
        let duration = self.persistent_congestion_duration();
        let mut run_start: Option<Instant> = None;
        let mut prev_pn: Option<u64> = None;
        for l in lost {
            let p = &l.packet;
            if prev_pn.is_some_and(|prev| prev.checked_add(1) != Some(p.pn)) {
                run_start = None;
            }
            prev_pn = Some(p.pn);
            if !p.ack_eliciting || p.time_sent <= first_sample {
                continue;
            }
            match run_start {
                None => run_start = Some(p.time_sent),
                Some(start) => {
                    if p.time_sent.saturating_duration_since(start) > duration {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// RFC 9002 Appendix A.6 PeerCompletedAddressValidation.
    fn peer_completed_address_validation(&self) -> bool {
        self.config.server || self.handshake_ack_received || self.handshake_confirmed
    }

    fn pto_backoff(&self) -> u32 {
        1u32 << self.pto_count.min(MAX_BACKOFF_EXPONENT)
    }

    /// RFC 9002 Appendix A.8 GetPtoTimeAndSpace.
    fn pto_time_and_space(&self, now: Instant) -> Option<(Instant, SpaceId)> {
        let backoff = self.pto_backoff();
        let duration = self.rtt.pto_base().saturating_mul(backoff);
        if self.spaces.iter().all(|s| s.ack_eliciting_in_flight == 0) {
            // Anti-deadlock probe, timed from now (RFC 9002 §6.2.2.1). RFC 9001 §4.9.1: a client
            // discards Initial keys when it first sends a Handshake packet, so it has Handshake
            // keys exactly when Initial is gone or a Handshake packet was sent.
            let hs = self.space(SpaceId::Handshake);
            let space = if self.space(SpaceId::Initial).discarded || hs.largest_sent.is_some() {
                SpaceId::Handshake
            } else {
                SpaceId::Initial
            };
            return Some((now.saturating_add(self.bounded(duration, space)), space));
        }
        let mut best: Option<(Instant, SpaceId)> = None;
        for id in SpaceId::ALL {
            let s = self.space(id);
            if s.ack_eliciting_in_flight == 0 {
                continue;
            }
            let mut d = duration;
            if id == SpaceId::Data {
                // RFC 9002 §6.2.1: no Application Data PTO before handshake confirmation.
                if !self.handshake_confirmed {
                    return best;
                }
                d = d.saturating_add(self.config.max_ack_delay.saturating_mul(backoff));
            }
            d = self.bounded(d, id);
            if self.tlp_armed() {
                d = d.min(self.tlp_period(id));
            }
            let Some(last) = s.time_of_last_ack_eliciting else {
                continue;
            };
            let t = last.saturating_add(d);
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, id));
            }
        }
        best
    }

    /// `backed_off`, the period of `space` after backoff, held to the bound set with
    /// [`Self::set_max_pto`] but never below the period without backoff (RFC 9002 §6.2.1's
    /// formula, which the bound only keeps from doubling further).
    fn bounded(&self, backed_off: Duration, space: SpaceId) -> Duration {
        let Some(bound) = self.max_pto else {
            return backed_off;
        };
        let mut unbacked = self.rtt.pto_base();
        if space == SpaceId::Data {
            unbacked = unbacked.saturating_add(self.config.max_ack_delay);
        }
        backed_off.min(bound.max(unbacked))
    }

    /// Bounds the backed-off probe timeout period (`TransportConfig::max_pto`); `None` lets it
    /// double without limit, as RFC 9002 §6.2.1 is written.
    pub fn set_max_pto(&mut self, bound: Option<Duration>, now: Instant) {
        self.max_pto = bound;
        self.set_timer(now);
    }

    /// RFC 8985 §7.2: a tail loss probe takes the place of the first probe timeout. Without an
    /// RTT sample RFC 8985 falls back to the initial RTO; here that is RFC 9002's PTO.
    fn tlp_armed(&self) -> bool {
        self.config.detection == LossDetectionMode::RackTlp
            && self.pto_count == 0
            && !self.tlp_fired
            && self.rtt.has_sample()
    }

    /// RFC 8985 §7.2: PTO = 2·SRTT, plus the peer's worst-case ACK delay when a lone packet is
    /// in flight (it may wait for the delayed-ACK timer). Only Application Data ACKs are delayed
    /// (RFC 9000 §13.2.1). The caller caps it by the regular PTO, as RFC 8985 caps it by the RTO.
    fn tlp_period(&self, id: SpaceId) -> Duration {
        let mut d = self.rtt.smoothed().saturating_mul(2).max(GRANULARITY);
        if id == SpaceId::Data && self.space(id).ack_eliciting_in_flight == 1 {
            d = d.saturating_add(self.config.max_ack_delay);
        }
        d
    }

    fn earliest_loss_time(&self) -> Option<(Instant, SpaceId)> {
        SpaceId::ALL
            .into_iter()
            .filter_map(|id| self.space(id).loss_time.map(|t| (t, id)))
            .min()
    }

    /// RFC 9002 Appendix A.8 SetLossDetectionTimer.
    fn set_timer(&mut self, now: Instant) {
        if let Some((t, _)) = self.earliest_loss_time() {
            self.timer = Some(t);
            return;
        }
        // RFC 9002 §6.2.2.1: an amplification-limited server could not send a probe anyway.
        if self.config.server && self.amplification_blocked {
            self.timer = None;
            return;
        }
        let nothing_in_flight = self.spaces.iter().all(|s| s.ack_eliciting_in_flight == 0);
        if nothing_in_flight && self.peer_completed_address_validation() {
            self.timer = None;
            return;
        }
        self.timer = self.pto_time_and_space(now).map(|(t, _)| t);
    }

    /// When [`LossDetection::on_timeout`] must be called next, if at all (RFC 9002 Appendix A.8).
    #[must_use]
    pub fn timeout(&self) -> Option<Instant> {
        self.timer
    }

    /// RFC 9002 Appendix A.9 OnLossDetectionTimeout. Does nothing before [`Self::timeout`].
    pub fn on_timeout(&mut self, now: Instant) -> TimeoutOutcome<T> {
        if self.timer.is_none_or(|t| now < t) {
            return TimeoutOutcome::NotDue;
        }
        if let Some((_, space)) = self.earliest_loss_time() {
            let losses = self.detect_and_remove_lost(space, now);
            self.set_timer(now);
            return TimeoutOutcome::Lost { space, losses };
        }
        let outcome = if self.spaces.iter().all(|s| s.ack_eliciting_in_flight == 0) {
            // Client anti-deadlock probe (RFC 9002 §6.2.2.1).
            let space = self
                .pto_time_and_space(now)
                .map_or(SpaceId::Initial, |(_, s)| s);
            TimeoutOutcome::Probe { space, count: 1 }
        } else {
            match self.pto_time_and_space(now) {
                Some((_, space)) if self.tlp_armed() => {
                    // RFC 8985 §7.3: one probe; the PTO that follows is not backed off, as TCP
                    // arms its unbacked RTO after a TLP.
                    self.tlp_fired = true;
                    self.set_timer(now);
                    return TimeoutOutcome::Probe { space, count: 1 };
                }
                // RFC 9002 §6.2.4: up to two probes.
                Some((_, space)) => TimeoutOutcome::Probe { space, count: 2 },
                None => {
                    self.set_timer(now);
                    return TimeoutOutcome::NotDue;
                }
            }
        };
        self.pto_count = self.pto_count.saturating_add(1);
        self.set_timer(now);
        outcome
    }

    /// RFC 9002 §6.4 / Appendix A.11: keys for `space` are gone. Its packets leave bytes in flight
    /// and are returned, ascending, for the caller to release.
    pub fn discard_space(&mut self, space: SpaceId, now: Instant) -> Vec<SentPacket<T>> {
        if self.space(space).discarded {
            return Vec::new();
        }
        let sent = self.forget_sent(space, now);
        self.space_mut(space).discarded = true;
        sent
    }

    /// Forgets the packets in flight in `space` as if never sent, without declaring them lost:
    /// a client does this with its Initials after a Retry (RFC 9002 §6.3), whose answer the
    /// server never acknowledges.
    pub fn forget_sent(&mut self, space: SpaceId, now: Instant) -> Vec<SentPacket<T>> {
        let s = self.space_mut(space);
        let sent = std::mem::take(&mut s.sent);
        s.loss_time = None;
        s.time_of_last_ack_eliciting = None;
        s.ack_eliciting_in_flight = 0;
        s.recently_lost.clear();
        let in_flight: u64 = sent
            .values()
            .filter(|p| p.in_flight)
            .map(|p| p.size as u64)
            .sum();
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(in_flight);
        self.pto_count = 0;
        self.tlp_fired = false;
        self.set_timer(now);
        sent.into_values().collect()
    }

    /// Whether the peer acknowledged one of our Handshake packets.
    #[must_use]
    pub fn handshake_ack_received(&self) -> bool {
        self.handshake_ack_received
    }

    /// RFC 9001 §4.1.2: the handshake is confirmed (enables Application Data PTO and the
    /// max_ack_delay cap on RTT samples).
    pub fn set_handshake_confirmed(&mut self, now: Instant) {
        self.handshake_confirmed = true;
        self.set_timer(now);
    }

    /// RFC 9000 §8.1: whether a server is blocked by the anti-amplification limit. Unblocking may
    /// arm a timer that is already due (RFC 9002 §6.2.2.1: then it fires at once).
    pub fn set_amplification_blocked(&mut self, blocked: bool, now: Instant) {
        self.amplification_blocked = blocked;
        self.set_timer(now);
    }

    /// The peer's max_ack_delay transport parameter (RFC 9000 §18.2).
    pub fn set_max_ack_delay(&mut self, max_ack_delay: Duration, now: Instant) {
        self.config.max_ack_delay = max_ack_delay;
        self.set_timer(now);
    }

    /// The sender is application-limited (draft-cheng-iccrg-delivery-rate-estimation §3.4).
    pub fn on_app_limited(&mut self) {
        self.rate.on_app_limited(self.bytes_in_flight);
    }

    /// An in-flight packet of `bytes` was declared lost and congestion control hears of it: the
    /// rate sampler counts it lost ([`DeliveryRateEstimator::on_packet_lost`]).
    pub fn on_congestion_loss(&mut self, bytes: u64) {
        self.rate.on_packet_lost(bytes);
    }

    /// Bytes of in-flight packets not yet acknowledged, lost or discarded.
    #[must_use]
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// Whether any ack-eliciting packet is in flight in any space.
    #[must_use]
    pub fn ack_eliciting_in_flight(&self) -> bool {
        self.spaces.iter().any(|s| s.ack_eliciting_in_flight > 0)
    }

    /// Forgets the RTT estimate for a new path (RFC 9000 §9.4, RFC 9002 Appendix A.3): back to
    /// the initial RTT, and the timers follow.
    pub fn reset_rtt(&mut self, now: Instant) {
        self.rtt = RttEstimator::new(self.config.initial_rtt);
        self.set_timer(now);
    }

    #[must_use]
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    #[must_use]
    pub fn delivery_rate(&self) -> &DeliveryRateEstimator {
        &self.rate
    }

    /// RACK.reo_wnd of `space` (RFC 8985 §6.2 step 4), in [`LossDetectionMode::RackTlp`] only.
    #[must_use]
    pub fn reordering_window(&self, space: SpaceId) -> Option<Duration> {
        (self.config.detection == LossDetectionMode::RackTlp)
            .then(|| self.space(space).rack.reo_wnd(&self.rtt))
    }

    /// Consecutive probe timeouts without progress (RFC 9002 §6.2.1). A tail loss probe does not
    /// count.
    #[must_use]
    pub fn pto_count(&self) -> u32 {
        self.pto_count
    }

    /// The current probe timeout period for Application Data without backoff, for the closing,
    /// draining and idle timeouts (RFC 9000 §10.1, §10.2: "three times the current PTO").
    #[must_use]
    pub fn pto_period(&self) -> Duration {
        self.rtt
            .pto_base()
            .saturating_add(self.config.max_ack_delay)
    }

    #[must_use]
    pub fn largest_acked(&self, space: SpaceId) -> Option<u64> {
        self.space(space).largest_acked
    }

    #[must_use]
    pub fn largest_sent(&self, space: SpaceId) -> Option<u64> {
        self.space(space).largest_sent
    }

    /// When a packet of `space` will cross the time threshold, if one is waiting to.
    #[must_use]
    pub fn loss_time(&self, space: SpaceId) -> Option<Instant> {
        self.space(space).loss_time
    }

    /// Unacknowledged packets of `space`, ascending: where probes find data to resend.
    pub fn unacked(&self, space: SpaceId) -> impl Iterator<Item = &SentPacket<T>> {
        self.space(space).sent.values()
    }

    #[must_use]
    pub fn config(&self) -> &LossConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;
    use std::collections::BTreeSet;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    proptest::proptest! {
        /// The remembered lost numbers behave as the plain FIFO with a per-range retain they
        /// replace: same count removed, same numbers left in the same order, whatever the
        /// ranges' order, overlap or emptiness.
        #[test]
        fn recently_lost_matches_a_plain_fifo(
            lost in proptest::collection::vec(0u64..600, 0..400),
            ranges in proptest::collection::vec((0u64..700, 0u64..40), 0..40),
            descending in proptest::bool::ANY,
        ) {
            let mut fifo = VecDeque::new();
            let mut rl = RecentlyLost::default();
            let mut seen = BTreeSet::new();
            // Each number is declared lost at most once.
            for pn in lost.into_iter().filter(|pn| seen.insert(*pn)) {
                if fifo.len() == SPURIOUS_MEMORY {
                    fifo.pop_front();
                }
                fifo.push_back(pn);
                rl.push(pn);
            }
            let mut ranges: Vec<RangeInclusive<u64>> = ranges
                .into_iter()
                .map(|(start, len)| start..=start + len)
                .collect();
            if descending {
                // Disjoint and largest first, as decoded from an ACK frame; a few inverted.
                ranges.sort_by_key(|r| std::cmp::Reverse(*r.start()));
                ranges.dedup_by(|b, a| b.end() >= a.start());
                for r in ranges.iter_mut().step_by(5) {
                    *r = *r.end()..=r.start().saturating_sub(1);
                }
            }
            let mut want = 0;
            for r in ranges.iter().filter(|r| !r.is_empty()) {
                let before = fifo.len();
                fifo.retain(|pn| !r.contains(pn));
                want += (before - fifo.len()) as u64;
            }
            proptest::prop_assert_eq!(rl.remove_acked(&ranges), want);
            proptest::prop_assert_eq!(&rl.order, &fifo);
            proptest::prop_assert_eq!(rl.sorted.len(), fifo.len());
        }
    }

    fn send(ld: &mut LossDetection<u64>, space: SpaceId, pn: u64, t: Instant) {
        let p = SentPacket::new(pn, t, 1000, true, true, pn);
        assert!(ld.on_packet_sent(space, p, t).is_none());
    }

    fn confirmed(server: bool) -> LossDetection<u64> {
        let mut ld = LossDetection::new(LossConfig {
            server,
            ..LossConfig::default()
        });
        ld.set_handshake_confirmed(Instant::ZERO);
        ld
    }

    fn pns(acked: &[SentPacket<u64>]) -> Vec<u64> {
        acked.iter().map(|p| p.pn).collect()
    }

    fn lost_pns(l: &LossReport<u64>) -> Vec<(u64, LossTrigger)> {
        l.lost.iter().map(|l| (l.packet.pn, l.trigger)).collect()
    }

    #[test]
    fn space_helpers() {
        let mut a = PerSpace([0u8; 3]);
        a[SpaceId::Handshake] = 7;
        assert_eq!(a.0, [0, 7, 0]);
        assert_eq!(SpaceId::ALL.map(SpaceId::index), [0, 1, 2]);
    }

    #[test]
    fn acking_an_unsent_packet_is_a_protocol_violation() {
        let mut ld = confirmed(true);
        let err = ld
            .on_ack_received(SpaceId::Data, &[0..=0], ms(0), at(1))
            .expect_err("nothing sent");
        assert_eq!(err.code, TransportErrorCode::PROTOCOL_VIOLATION);
        send(&mut ld, SpaceId::Data, 0, at(0));
        send(&mut ld, SpaceId::Data, 1, at(0));
        let err = ld
            .on_ack_received(SpaceId::Data, &[5..=9, 0..=1], ms(0), at(1))
            .expect_err("5..=9 never sent");
        assert_eq!(err.code, TransportErrorCode::PROTOCOL_VIOLATION);
        // Nothing was changed by the rejected ACK.
        assert_eq!(ld.bytes_in_flight(), 2000);
        // Another space's numbers are independent.
        assert!(ld
            .on_ack_received(SpaceId::Handshake, &[0..=0], ms(0), at(1))
            .is_err());
        let ok = ld
            .on_ack_received(SpaceId::Data, &[0..=1], ms(0), at(1))
            .expect("valid");
        assert_eq!(pns(&ok.acked), [0, 1]);
        assert_eq!(ld.bytes_in_flight(), 0);
    }

    /// A first sample of 100 ms, then packets 1 and 2 sent together and 2 acknowledged 125 ms
    /// later after 25 ms of ACK delay. Packet 1 is only one behind, so the time threshold alone
    /// decides it: 9/8 of the sample as measured (RFC 9002 §6.1.2) or less its ACK delay
    /// (quic-go). Returns what was declared lost at the ACK and the loss timer left.
    fn after_delayed_ack(threshold_rtt: ThresholdRtt) -> (Vec<u64>, Option<Instant>) {
        let mut ld = LossDetection::new(LossConfig {
            server: true,
            threshold_rtt,
            ..LossConfig::default()
        });
        ld.set_handshake_confirmed(Instant::ZERO);
        send(&mut ld, SpaceId::Data, 0, at(0));
        ld.on_ack_received(SpaceId::Data, &[0..=0], ms(0), at(100))
            .expect("valid");
        send(&mut ld, SpaceId::Data, 1, at(200));
        send(&mut ld, SpaceId::Data, 2, at(200));
        let out = ld
            .on_ack_received(SpaceId::Data, &[2..=2], ms(25), at(325))
            .expect("valid");
        assert_eq!(ld.rtt().latest(), ms(125));
        assert_eq!(ld.rtt().latest_adjusted(), ms(100));
        let lost = out.losses.lost.iter().map(|l| l.packet.pn).collect();
        (lost, ld.loss_time(SpaceId::Data))
    }

    #[test]
    fn time_threshold_reads_the_measured_or_the_adjusted_sample() {
        // 9/8 of max(smoothed 100 ms, latest 125 ms): 1 is lost 140.625 ms after its send.
        assert_eq!(
            after_delayed_ack(ThresholdRtt::Latest),
            (vec![], Some(at(200) + Duration::from_micros(140_625)))
        );
        // 9/8 of max(smoothed 100 ms, adjusted 100 ms) = 112.5 ms < 125 ms: lost at the ACK.
        assert_eq!(after_delayed_ack(ThresholdRtt::Adjusted), (vec![1], None));
        assert_eq!(
            "adjusted".parse::<ThresholdRtt>().ok(),
            Some(ThresholdRtt::Adjusted)
        );
        let err = "raw".parse::<ThresholdRtt>().expect_err("unknown name");
        assert!(err.to_string().contains("latest, adjusted"), "{err}");
    }

    #[test]
    fn packet_threshold_loss_and_rtt_sample() {
        let mut ld = confirmed(true);
        for pn in 0..6 {
            send(&mut ld, SpaceId::Data, pn, at(pn));
        }
        // Ack 4 and 5 (descending ranges): 0, 1 and 2 are >= 3 behind 5; 3 is not.
        let out = ld
            .on_ack_received(SpaceId::Data, &[4..=5], ms(0), at(105))
            .expect("valid");
        assert_eq!(pns(&out.acked), [4, 5]);
        assert!(out.rtt_updated);
        assert_eq!(ld.rtt().latest(), ms(100));
        assert_eq!(
            lost_pns(&out.losses),
            [
                (0, LossTrigger::PacketThreshold),
                (1, LossTrigger::PacketThreshold),
                (2, LossTrigger::PacketThreshold)
            ]
        );
        assert_eq!(out.losses.congestion_signal(), Some((at(2), 3000)));
        assert!(!out.losses.persistent_congestion);
        assert_eq!(ld.bytes_in_flight(), 1000);
        // 3 waits for the time threshold: sent at 3 ms + 9/8 * 100 ms.
        assert_eq!(
            ld.loss_time(SpaceId::Data),
            Some(at(3) + ms(112) + Duration::from_micros(500))
        );
        assert_eq!(ld.timeout(), ld.loss_time(SpaceId::Data));
        assert_eq!(ld.largest_acked(SpaceId::Data), Some(5));
        assert_eq!(
            pns(&ld.unacked(SpaceId::Data).cloned().collect::<Vec<_>>()),
            [3]
        );
        // A late ACK of a lost packet counts as spurious and acknowledges nothing.
        let late = ld
            .on_ack_received(SpaceId::Data, &[0..=1], ms(0), at(106))
            .expect("valid");
        assert!(late.acked.is_empty());
        assert_eq!(late.spurious, 2);
        assert!(!late.rtt_updated);
    }

    #[test]
    fn time_threshold_loss_on_timeout() {
        let mut ld = confirmed(true);
        send(&mut ld, SpaceId::Data, 0, at(0));
        send(&mut ld, SpaceId::Data, 1, at(10));
        let out = ld
            .on_ack_received(SpaceId::Data, &[1..=1], ms(0), at(110))
            .expect("valid");
        assert!(out.losses.lost.is_empty());
        // loss_delay = 9/8 * 100 = 112.5 ms after 0's send time.
        let due = at(0) + Duration::from_micros(112_500);
        assert_eq!(ld.timeout(), Some(due));
        assert!(matches!(ld.on_timeout(at(112)), TimeoutOutcome::NotDue));
        match ld.on_timeout(due) {
            TimeoutOutcome::Lost { space, losses } => {
                assert_eq!(space, SpaceId::Data);
                assert_eq!(lost_pns(&losses), [(0, LossTrigger::TimeThreshold)]);
            }
            other => panic!("expected a loss, got {other:?}"),
        }
        assert_eq!(ld.bytes_in_flight(), 0);
        assert_eq!(ld.pto_count(), 0);
        // Server, nothing in flight: no timer.
        assert_eq!(ld.timeout(), None);
    }

    #[test]
    fn thresholds_are_configurable() {
        let mut ld = LossDetection::new(LossConfig {
            server: true,
            packet_threshold: 5,
            time_threshold: (2, 1),
            ..LossConfig::default()
        });
        for pn in 0..5 {
            send(&mut ld, SpaceId::Initial, pn, at(0));
        }
        let out = ld
            .on_ack_received(SpaceId::Initial, &[4..=4], ms(0), at(100))
            .expect("valid");
        assert!(out.losses.lost.is_empty());
        assert_eq!(ld.loss_time(SpaceId::Initial), Some(at(200)));
    }

    #[test]
    fn pto_timer_values_and_backoff() {
        let mut ld = confirmed(true);
        send(&mut ld, SpaceId::Data, 0, at(0));
        let _ = ld.on_ack_received(SpaceId::Data, &[0..=0], ms(0), at(100));
        // srtt 100, rttvar 50: PTO = 100 + 200 + max_ack_delay 25 = 325 ms after the last send.
        send(&mut ld, SpaceId::Data, 1, at(200));
        assert_eq!(ld.timeout(), Some(at(525)));
        assert!(matches!(ld.on_timeout(at(524)), TimeoutOutcome::NotDue));
        match ld.on_timeout(at(525)) {
            TimeoutOutcome::Probe { space, count } => {
                assert_eq!((space, count), (SpaceId::Data, 2));
            }
            other => panic!("expected a probe, got {other:?}"),
        }
        assert_eq!(ld.pto_count(), 1);
        // Backoff doubles the whole period, max_ack_delay included.
        assert_eq!(ld.timeout(), Some(at(200 + 650)));
        send(&mut ld, SpaceId::Data, 2, at(525));
        send(&mut ld, SpaceId::Data, 3, at(525));
        assert_eq!(ld.timeout(), Some(at(525 + 650)));
        assert!(matches!(
            ld.on_timeout(at(1175)),
            TimeoutOutcome::Probe { count: 2, .. }
        ));
        assert_eq!(ld.pto_count(), 2);
        assert_eq!(ld.timeout(), Some(at(525 + 1300)));
        // An ACK of a probe resets the backoff; the packets before it are lost, attributed to
        // the probe timeout.
        let out = ld
            .on_ack_received(SpaceId::Data, &[3..=3], ms(0), at(1200))
            .expect("valid");
        assert_eq!(ld.pto_count(), 0);
        assert_eq!(
            lost_pns(&out.losses),
            [(1, LossTrigger::Pto)],
            "1 is old enough by time; 2 is within both thresholds"
        );
        assert!(ld.loss_time(SpaceId::Data).is_some());
    }

    /// `TransportConfig::max_pto`: the period doubles up to the bound and stays there; a bound
    /// below the un-backed-off period leaves that period as it is, without backoff.
    #[test]
    fn a_bound_holds_the_backed_off_pto_but_never_shortens_the_first() {
        let periods = |bound_ms: u64| {
            let mut ld = confirmed(true);
            ld.set_max_pto(Some(ms(bound_ms)), Instant::ZERO);
            send(&mut ld, SpaceId::Data, 0, at(0));
            let _ = ld.on_ack_received(SpaceId::Data, &[0..=0], ms(0), at(100));
            // PTO = 325 ms, as in `pto_timer_values_and_backoff`.
            let (mut last, mut pn, mut periods) = (at(200), 1, Vec::new());
            send(&mut ld, SpaceId::Data, pn, last);
            for _ in 0..5 {
                let due = ld.timeout().expect("armed");
                periods.push(due.saturating_duration_since(last).as_millis());
                assert!(matches!(ld.on_timeout(due), TimeoutOutcome::Probe { .. }));
                pn += 1;
                send(&mut ld, SpaceId::Data, pn, due);
                last = due;
            }
            periods
        };
        assert_eq!(periods(1000), [325, 650, 1000, 1000, 1000]);
        assert_eq!(periods(100), [325, 325, 325, 325, 325]);
        assert_eq!(periods(1_000_000), [325, 650, 1300, 2600, 5200]);
    }

    #[test]
    fn no_application_pto_before_confirmation() {
        let mut ld = LossDetection::<u64>::new(LossConfig::default());
        send(&mut ld, SpaceId::Data, 0, at(0));
        // Client, unconfirmed, only 0-RTT/1-RTT in flight: nothing to probe with Data, and the
        // anti-deadlock rule does not apply because something is in flight.
        assert_eq!(ld.timeout(), None);
        send(&mut ld, SpaceId::Handshake, 0, at(5));
        // Initial RTT 333: PTO = 333 + 4 * 166.5 = 999 ms, no max_ack_delay for Handshake.
        assert_eq!(ld.timeout(), Some(at(5 + 999)));
        ld.set_handshake_confirmed(at(6));
        // The Data packet's PTO (0 + 999 + 25) is later than the Handshake one.
        assert_eq!(ld.timeout(), Some(at(1004)));
        let _ = ld.discard_space(SpaceId::Handshake, at(7));
        assert_eq!(ld.timeout(), Some(at(1024)));
        assert_eq!(ld.bytes_in_flight(), 1000);
    }

    #[test]
    fn client_anti_deadlock_and_amplification_limit() {
        let mut ld = LossDetection::<u64>::new(LossConfig::default());
        send(&mut ld, SpaceId::Initial, 0, at(0));
        let out = ld
            .on_ack_received(SpaceId::Initial, &[0..=0], ms(0), at(50))
            .expect("valid");
        assert!(out.rtt_updated);
        // Nothing in flight but the client does not know its address is validated: a PTO armed
        // from now (50 + 50 + 100 = 200), and the Initial ACK did not reset the backoff.
        assert_eq!(ld.timeout(), Some(at(200)));
        match ld.on_timeout(at(200)) {
            TimeoutOutcome::Probe { space, count } => {
                assert_eq!((space, count), (SpaceId::Initial, 1));
            }
            other => panic!("expected an anti-deadlock probe, got {other:?}"),
        }
        assert_eq!(ld.pto_count(), 1);
        assert_eq!(ld.timeout(), Some(at(200 + 300)));
        // A Handshake ACK validates the address: no more timer once nothing is in flight.
        let _ = ld.discard_space(SpaceId::Initial, at(210));
        send(&mut ld, SpaceId::Handshake, 0, at(210));
        let _ = ld.on_ack_received(SpaceId::Handshake, &[0..=0], ms(0), at(260));
        assert_eq!(ld.timeout(), None);

        // A server blocked by the amplification limit arms nothing.
        let mut srv = LossDetection::<u64>::new(LossConfig {
            server: true,
            ..LossConfig::default()
        });
        srv.set_amplification_blocked(true, at(0));
        send(&mut srv, SpaceId::Initial, 0, at(0));
        assert_eq!(srv.timeout(), None);
        srv.set_amplification_blocked(false, at(2000));
        // Unblocked after the PTO would have fired: due at once.
        assert_eq!(srv.timeout(), Some(at(999)));
        assert!(matches!(
            srv.on_timeout(at(2000)),
            TimeoutOutcome::Probe {
                space: SpaceId::Initial,
                count: 2
            }
        ));
    }

    #[test]
    fn persistent_congestion_positive_and_negative() {
        fn run(ack_middle: bool) -> bool {
            let mut ld = confirmed(true);
            send(&mut ld, SpaceId::Data, 0, at(0));
            let _ = ld.on_ack_received(SpaceId::Data, &[0..=0], ms(0), at(100));
            // After the second sample (97 ms) the duration is (99.6 + 153 + 25) * 3 ≈ 833 ms.
            for (pn, t) in [
                (1, 200),
                (2, 700),
                (3, 1300),
                (4, 1301),
                (5, 1302),
                (6, 1303),
            ] {
                send(&mut ld, SpaceId::Data, pn, at(t));
            }
            let ranges: Vec<RangeInclusive<u64>> = if ack_middle {
                vec![6..=6, 2..=2]
            } else {
                vec![6..=6]
            };
            let out = ld
                .on_ack_received(SpaceId::Data, &ranges, ms(0), at(1400))
                .expect("valid");
            out.losses.persistent_congestion
        }
        // 1..=3 lost, 1100 ms apart > 833 ms, nothing acknowledged between.
        assert!(run(false));
        // Acknowledging 2 breaks the run: 1 alone, 3 alone.
        assert!(!run(true));
    }

    #[test]
    fn no_persistent_congestion_before_the_first_sample_or_within_duration() {
        let mut ld = confirmed(true);
        for (pn, t) in [(0, 0), (1, 2000), (2, 2001), (3, 2002), (4, 2003)] {
            send(&mut ld, SpaceId::Data, pn, at(t));
        }
        // The ACK of 4 is the first sample; 0 was sent before it, so only 1..=1 could count.
        let out = ld
            .on_ack_received(SpaceId::Data, &[4..=4], ms(0), at(2100))
            .expect("valid");
        assert_eq!(out.losses.lost.len(), 2, "0 and 1 by packet threshold");
        assert!(!out.losses.persistent_congestion);
    }

    #[test]
    fn discard_space_releases_packets() {
        let mut ld = LossDetection::<u64>::new(LossConfig::default());
        send(&mut ld, SpaceId::Initial, 0, at(0));
        send(&mut ld, SpaceId::Initial, 1, at(1));
        let p = SentPacket::new(2, at(2), 50, false, false, 2);
        assert!(ld.on_packet_sent(SpaceId::Initial, p, at(2)).is_none());
        assert_eq!(ld.bytes_in_flight(), 2000);
        let gone = ld.discard_space(SpaceId::Initial, at(3));
        assert_eq!(pns(&gone), [0, 1, 2]);
        assert_eq!(ld.bytes_in_flight(), 0);
        // Later sends and ACKs in the space are ignored.
        let p = SentPacket::new(3, at(4), 1000, true, true, 3);
        assert!(ld.on_packet_sent(SpaceId::Initial, p, at(4)).is_some());
        let out = ld
            .on_ack_received(SpaceId::Initial, &[0..=9], ms(0), at(5))
            .expect("ignored");
        assert!(out.acked.is_empty());
    }

    fn rack_tlp() -> LossDetection<u64> {
        let mut ld = LossDetection::new(LossConfig {
            server: true,
            detection: LossDetectionMode::RackTlp,
            ..LossConfig::default()
        });
        ld.set_handshake_confirmed(Instant::ZERO);
        // One sample: srtt = min_rtt = 100 ms, rttvar 50 ms, so RACK.reo_wnd = 25 ms.
        send(&mut ld, SpaceId::Data, 0, at(0));
        let out = ld
            .on_ack_received(SpaceId::Data, &[0..=0], ms(0), at(100))
            .expect("valid");
        assert!(out.rtt_updated);
        ld
    }

    #[test]
    fn detection_mode_names() {
        assert_eq!(
            "rfc9002".parse::<LossDetectionMode>().ok(),
            Some(LossDetectionMode::Rfc9002)
        );
        assert_eq!(
            " RACK-TLP ".parse::<LossDetectionMode>().ok(),
            Some(LossDetectionMode::RackTlp)
        );
        for m in [LossDetectionMode::Rfc9002, LossDetectionMode::RackTlp] {
            assert_eq!(m.to_string().parse::<LossDetectionMode>().ok(), Some(m));
        }
        let err = "fack".parse::<LossDetectionMode>().expect_err("unknown");
        assert!(err.to_string().contains("rfc9002, rack-tlp"), "{err}");
        assert_eq!(LossConfig::default().detection, LossDetectionMode::Rfc9002);
        assert_eq!(confirmed(true).reordering_window(SpaceId::Data), None);
    }

    #[test]
    fn rack_loses_a_packet_one_rtt_plus_reo_wnd_after_its_send_with_a_short_tail() {
        let mut ld = rack_tlp();
        assert_eq!(ld.reordering_window(SpaceId::Data), Some(ms(25)));
        // 1 is followed by only two packets: the packet threshold cannot fire.
        send(&mut ld, SpaceId::Data, 1, at(200));
        send(&mut ld, SpaceId::Data, 2, at(201));
        send(&mut ld, SpaceId::Data, 3, at(202));
        let out = ld
            .on_ack_received(SpaceId::Data, &[2..=3], ms(0), at(302))
            .expect("valid");
        assert!(out.losses.lost.is_empty());
        // RACK.rtt (100 ms, measured on 3) + reo_wnd after 1's send; RFC 9002 would use
        // 9/8 · 100 ms instead.
        assert_eq!(ld.loss_time(SpaceId::Data), Some(at(325)));
        assert_eq!(ld.timeout(), Some(at(325)));
        assert!(matches!(ld.on_timeout(at(324)), TimeoutOutcome::NotDue));
        match ld.on_timeout(at(325)) {
            TimeoutOutcome::Lost { space, losses } => {
                assert_eq!(space, SpaceId::Data);
                assert_eq!(lost_pns(&losses), [(1, LossTrigger::TimeThreshold)]);
            }
            other => panic!("expected a RACK loss, got {other:?}"),
        }
        assert_eq!(ld.bytes_in_flight(), 0);

        // A packet sent more than reo_wnd before the newest delivered one is lost on the ACK
        // itself, with a single later packet acknowledged.
        send(&mut ld, SpaceId::Data, 4, at(400));
        send(&mut ld, SpaceId::Data, 5, at(430));
        let out = ld
            .on_ack_received(SpaceId::Data, &[5..=5], ms(0), at(530))
            .expect("valid");
        assert_eq!(lost_pns(&out.losses), [(4, LossTrigger::TimeThreshold)]);
        assert_eq!(ld.loss_time(SpaceId::Data), None);
    }

    #[test]
    fn rack_tolerates_reordering_within_the_window() {
        fn run(detection: LossDetectionMode) -> (u64, u64) {
            let mut ld = rack_tlp();
            ld.config.detection = detection;
            let mut lost = 0;
            let mut spurious = 0;
            let mut ack = |ld: &mut LossDetection<u64>, r: RangeInclusive<u64>, t: u64| {
                let out = ld
                    .on_ack_received(SpaceId::Data, &[r], ms(0), at(t))
                    .expect("valid");
                lost += out.losses.lost.len() as u64;
                spurious += out.spurious;
            };
            // 1 arrives 15 ms after 2 (inside reo_wnd = 25 ms).
            send(&mut ld, SpaceId::Data, 1, at(200));
            send(&mut ld, SpaceId::Data, 2, at(210));
            ack(&mut ld, 2..=2, 310);
            if detection == LossDetectionMode::RackTlp {
                assert_eq!(ld.timeout(), Some(at(325)));
            }
            ack(&mut ld, 1..=1, 315);
            // Reordering was seen: four later packets acknowledged no longer mean a loss.
            for pn in 3..=7 {
                send(&mut ld, SpaceId::Data, pn, at(397 + pn));
            }
            ack(&mut ld, 4..=7, 504);
            ack(&mut ld, 3..=3, 510);
            assert!(!ld.ack_eliciting_in_flight());
            (lost, spurious)
        }
        assert_eq!(run(LossDetectionMode::RackTlp), (0, 0));
        // RFC 9002's packet threshold declares 3 lost, spuriously.
        assert_eq!(run(LossDetectionMode::Rfc9002), (1, 1));
    }

    #[test]
    fn rack_spurious_loss_widens_the_reordering_window() {
        let mut ld = rack_tlp();
        for pn in 1..=4 {
            send(&mut ld, SpaceId::Data, pn, at(199 + pn));
        }
        // No reordering seen yet: the packet threshold applies.
        let out = ld
            .on_ack_received(SpaceId::Data, &[2..=4], ms(0), at(303))
            .expect("valid");
        assert_eq!(lost_pns(&out.losses), [(1, LossTrigger::PacketThreshold)]);
        let late = ld
            .on_ack_received(SpaceId::Data, &[1..=4], ms(0), at(305))
            .expect("valid");
        assert_eq!(late.spurious, 1);
        assert_eq!(ld.reordering_window(SpaceId::Data), Some(ms(50)));
        // Now neither the count nor the old window declares 5 lost; the wider one will.
        for pn in 5..=8 {
            send(&mut ld, SpaceId::Data, pn, at(395 + pn));
        }
        let out = ld
            .on_ack_received(SpaceId::Data, &[6..=8], ms(0), at(503))
            .expect("valid");
        assert!(out.losses.lost.is_empty());
        assert_eq!(ld.loss_time(SpaceId::Data), Some(at(400 + 100 + 50)));
    }

    #[test]
    fn tlp_fires_at_two_srtt_with_one_probe_then_pto_backs_off() {
        let mut ld = rack_tlp();
        // One packet in flight: 2·SRTT + max_ack_delay = 225 ms (the PTO would be 325 ms).
        send(&mut ld, SpaceId::Data, 1, at(200));
        assert_eq!(ld.timeout(), Some(at(425)));
        assert!(matches!(ld.on_timeout(at(424)), TimeoutOutcome::NotDue));
        match ld.on_timeout(at(425)) {
            TimeoutOutcome::Probe { space, count } => {
                assert_eq!((space, count), (SpaceId::Data, 1));
            }
            other => panic!("expected a tail loss probe, got {other:?}"),
        }
        assert_eq!(ld.pto_count(), 0);
        // The probe goes out; then the regular, unbacked PTO.
        send(&mut ld, SpaceId::Data, 2, at(425));
        assert_eq!(ld.timeout(), Some(at(425 + 325)));
        assert!(matches!(
            ld.on_timeout(at(750)),
            TimeoutOutcome::Probe {
                space: SpaceId::Data,
                count: 2
            }
        ));
        assert_eq!(ld.pto_count(), 1);
        send(&mut ld, SpaceId::Data, 3, at(750));
        send(&mut ld, SpaceId::Data, 4, at(750));
        assert_eq!(ld.timeout(), Some(at(750 + 650)));
        assert!(matches!(
            ld.on_timeout(at(1400)),
            TimeoutOutcome::Probe { count: 2, .. }
        ));
        assert_eq!(ld.pto_count(), 2);
        assert_eq!(ld.timeout(), Some(at(750 + 1300)));
    }

    #[test]
    fn tlp_ack_reveals_the_tail_loss_and_rearms() {
        let mut ld = rack_tlp();
        // Two packets in flight: no max_ack_delay, TLP at 2·SRTT after the last.
        send(&mut ld, SpaceId::Data, 1, at(200));
        send(&mut ld, SpaceId::Data, 2, at(201));
        assert_eq!(ld.timeout(), Some(at(401)));
        assert!(matches!(
            ld.on_timeout(at(401)),
            TimeoutOutcome::Probe { count: 1, .. }
        ));
        send(&mut ld, SpaceId::Data, 3, at(401));
        let out = ld
            .on_ack_received(SpaceId::Data, &[3..=3], ms(0), at(501))
            .expect("valid");
        assert_eq!(
            lost_pns(&out.losses),
            [(1, LossTrigger::Pto), (2, LossTrigger::Pto)]
        );
        // Progress re-arms the TLP for the next tail.
        send(&mut ld, SpaceId::Data, 4, at(510));
        assert_eq!(ld.timeout(), Some(at(510 + 225)));
        assert!(matches!(
            ld.on_timeout(at(735)),
            TimeoutOutcome::Probe { count: 1, .. }
        ));
    }

    #[test]
    fn huge_ranges_cost_only_what_is_in_flight() {
        let mut ld = confirmed(true);
        send(&mut ld, SpaceId::Data, 1 << 40, at(0));
        let out = ld
            .on_ack_received(SpaceId::Data, &[0..=(1 << 40)], ms(0), at(10))
            .expect("valid");
        assert_eq!(pns(&out.acked), [1 << 40]);
        // Inverted ranges acknowledge nothing (and do not panic).
        #[expect(
            clippy::reversed_empty_ranges,
            reason = "the malformed input under test"
        )]
        let inverted = [5..=3];
        let out = ld
            .on_ack_received(SpaceId::Data, &inverted, ms(0), at(10))
            .expect("empty");
        assert!(out.acked.is_empty());
        let err = ld.on_ack_received(SpaceId::Data, &[0..=u64::MAX], ms(0), at(11));
        assert!(err.is_err());
    }
}
