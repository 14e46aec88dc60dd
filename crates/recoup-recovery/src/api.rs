//! The transport <-> policy contract (DESIGN.md "The transport <-> policy contract").
//!
//! A policy sees transport-neutral events: no QUIC types, only packet numbers, stream ranges and
//! times. Lost data is identified by a [`LossId`] that the transport assigns when a range is first
//! declared lost; the transport keeps the range's lineage (first send, first loss detection,
//! retransmission round, copies) with [`crate::Lineages`] and reports it in [`LostData`].
//!
//! The transport always retransmits lost data once per round (plain ARQ, RFC 9000 §13.3). A policy
//! adds *copies*: further sends of the same stream range in new packets. The transport asks for
//! them through [`RecoveryPolicy::poll_copy`] every time it is about to build a packet, so a policy
//! can place copies back to back (ask repeatedly), spread them over the next packets (ART's escape
//! space: answer only when the packet count reaches a target) or hold them for off-mode (AutoRec,
//! TOO).
//!
//! Only the newest send of a lineage is checked for loss (AutoRec §V-B, "only the last injected
//! replica is checked for loss"): when it is declared lost and the data is still unacknowledged,
//! the transport starts the next round with an ARQ retransmission and calls
//! [`RecoveryPolicy::on_data_lost`] again with `round + 1`. Losing an older copy ends nothing.

use std::time::Duration;

use recoup_time::Instant;

/// Identity of a lost data range, assigned by the transport at its first loss detection and kept
/// by all its retransmissions and copies.
pub type LossId = u64;

/// A half-open range `[start, end)` of a stream's bytes: AutoRec's `Data_ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataRange {
    pub stream: u64,
    pub start: u64,
    pub end: u64,
}

impl DataRange {
    /// Number of bytes in the range.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the range holds no bytes (a bare FIN).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Why a packet carries the stream data it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendKind {
    /// First transmission of new data (or a packet with no stream data).
    New,
    /// The ARQ retransmission that opens a round.
    Retransmission,
    /// An extra copy asked for by the policy.
    Copy,
}

/// One stream range in a sent packet, with its lineage if it was lost before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentRange {
    pub range: DataRange,
    /// `Some` for retransmissions and copies of lost data.
    pub loss: Option<LossId>,
}

/// A packet as the policy sees it, on send, acknowledgement and loss.
#[derive(Clone, Copy, Debug)]
pub struct PacketInfo<'a> {
    pub pn: u64,
    pub sent: Instant,
    pub bytes: usize,
    pub kind: SendKind,
    pub ranges: &'a [SentRange],
}

/// What made the transport declare a packet lost (RFC 9002 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossTrigger {
    /// RFC 9002 §6.1.1: kPacketThreshold later packets were acknowledged.
    PacketThreshold,
    /// RFC 9002 §6.1.2: older than 9/8 of the RTT when a later packet was acknowledged.
    TimeThreshold,
    /// RFC 9002 §6.2: probe timeout (or RACK-TLP's tail loss probe).
    Pto,
}

/// A lost range and its lineage, reported when a round starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostData {
    pub id: LossId,
    pub range: DataRange,
    /// 1 for the first retransmission, n for the n-th.
    pub round: u32,
    /// When the data was first sent.
    pub first_sent: Instant,
    /// When the data was first declared lost.
    pub first_detected: Instant,
    /// When the send whose loss opened this round went out.
    pub lost_sent: Instant,
    pub trigger: LossTrigger,
}

/// The transport's RTT estimate after an update (RFC 9002 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttSample {
    pub latest: Duration,
    pub smoothed: Duration,
    pub min: Duration,
    pub var: Duration,
}

/// What the sender could do when it last looked (DESIGN.md: on-mode / off-mode / cwnd-limited).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendState {
    /// New data waiting and congestion window to send it.
    OnMode,
    /// Application-limited: nothing new to send.
    OffMode,
    /// New data waiting but the congestion window is full.
    CwndLimited,
}

/// Where the transport stands when it asks for a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendContext {
    pub state: SendState,
    /// Packets sent so far in the application data space (counts every packet, all kinds).
    pub packets_sent: u64,
    /// Current congestion window and bytes in flight, for policies that budget opportunism.
    pub cwnd: u64,
    pub bytes_in_flight: u64,
    /// Estimated bandwidth-delay product in packets, if the congestion controller has one.
    pub bdp_packets: Option<u64>,
}

/// A copy the policy wants sent now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRequest {
    pub id: LossId,
    /// Send even if the congestion window is full (ART §6.4 "opportunism"). The policy bounds how
    /// often it says so.
    pub beyond_cwnd: bool,
}

/// A loss-recovery policy. All methods take `now`; none may read a clock.
///
/// Call order, per connection: `on_packet_sent` for every application-data packet; then for each
/// packet exactly one of `on_packet_acked` or `on_packet_lost` (a packet declared lost and acked
/// later gets `on_packet_acked` too — spurious loss); `on_data_lost` when a round starts;
/// `on_data_acked` once when every byte of a lineage is acknowledged, after which the policy must
/// hold no state for that id; `poll_copy` before building each packet, repeatedly until it answers
/// `None` or the transport cannot send.
pub trait RecoveryPolicy: std::fmt::Debug {
    /// Short name, as accepted by the parser (`arq`, `fixed`, ...).
    fn name(&self) -> &'static str;

    fn on_packet_sent(&mut self, now: Instant, packet: &PacketInfo<'_>);

    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>);

    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, trigger: LossTrigger);

    /// A round of recovery starts for `lost`; the transport has queued its ARQ retransmission.
    fn on_data_lost(&mut self, now: Instant, lost: &LostData);

    /// Every byte of lineage `id` is acknowledged (or its stream was reset): forget it.
    fn on_data_acked(&mut self, now: Instant, id: LossId);

    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample);

    /// The sending state changed (called on every transition, not every packet).
    fn on_send_state(&mut self, now: Instant, state: SendState);

    /// Which lost data to copy in the packet about to be built, if any.
    ///
    /// A `None` stands until something changes: asked again at the same `now`, with the same
    /// context and no other call between, the policy answers `None` again and its state stays as
    /// the first answer left it. The transport relies on this to ask once per `poll_transmit`
    /// where nothing can be sent, not once for whether to send and again for when to wake up.
    ///
    /// Asked before about every packet and again when nothing could be sent, so several times per
    /// packet, mostly with nothing to copy: the built-in policies answer those asks from state
    /// kept as it changes (a stored deadline, the bounds of a schedule), not by searching.
    fn poll_copy(&mut self, now: Instant, ctx: &SendContext) -> Option<CopyRequest>;

    /// When the policy next wants [`RecoveryPolicy::on_timeout`] (decision intervals). Asked at
    /// every timer query of the connection, several times per packet: keep the answer rather
    /// than compute it.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn on_timeout(&mut self, _now: Instant) {}

    /// An upper bound on the sending rate in bytes per second (LADR's reactive rate limit).
    fn rate_limit(&self) -> Option<u64> {
        None
    }
}

/// Identity of the data a packet carries, for simulated loss elements that draw per packet
/// (common random numbers, DESIGN.md principle 3): a packet's fate is a function of this key, so
/// a copy one policy adds cannot shift the fate of any other packet. `send` is 0 for the first
/// transmission of `[start, ..)` and n for the n-th send of a lineage starting at `start`
/// (retransmissions and copies counted together, as [`crate::Lineages`] counts them).
#[must_use]
pub fn data_send_key(stream: u64, start: u64, send: u32) -> u64 {
    mix(mix(mix(0x5e4d_0001, stream), start), u64::from(send))
}

/// Identity of a packet without stream data (ACK-only, control, handshake): its packet number
/// space and number. Only stream data is retransmitted by policies, so these keys need not be
/// stable across policies beyond what the packet numbers are.
#[must_use]
pub fn packet_key(space: u8, pn: u64) -> u64 {
    mix(mix(0x5e4d_0002, u64::from(space)), pn)
}

/// SplitMix64's finaliser over `state ^ value`: a cheap, well-mixed combination of two words.
fn mix(state: u64, value: u64) -> u64 {
    let mut z = (state ^ value).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
