//! Forward erasure correction schemes: the sender-side half of recoup's dual-side FEC extension.
//!
//! FEC is not a loss-recovery policy: it needs the receiver's help (a decoder), so it runs only
//! between recoup endpoints that negotiated it (DESIGN.md principle 5; the wire format is in the
//! transport's `fec` module and docs/FEC.md). A [`FecScheme`] decides *when* repair symbols are
//! sent and *over which* source symbols; the transport does the coding, the framing and the
//! decoding. The scheme sees the same transport-neutral events as a [`RecoveryPolicy`]
//! (packet numbers, stream ranges, times) plus what a video-call scheme needs: the frame
//! boundaries (in the rtc application one stream is one video frame, so a FIN ends a frame) and
//! the playout deadline the application gave the stream.
//!
//! *Source symbols.* Every 1-RTT packet that carries STREAM frames is a source symbol,
//! identified by its packet number: first transmissions, retransmissions and copies alike, so a
//! scheme that protects retransmissions (Hairpin) or only new data (block FEC, WebRTC, Tambur)
//! picks by [`SourcePacket::kind`]. A [`RepairRequest`] names a window of those packet numbers
//! and how many repair symbols to code over it; the transport sends them, each in its own
//! packet, before new data, within the congestion window.
//!
//! Schemes are named like policies, `name:key=value,...` ([`FecSpec`]); `block:k=9,m=1` is ART's
//! 9:1 block FEC baseline (ART §7, Fig. 22).
//!
//! [`RecoveryPolicy`]: crate::RecoveryPolicy

mod block;
mod spec;

use std::fmt;

use recoup_time::Instant;

use crate::api::{PacketInfo, RttSample, SendKind, SendState, SentRange};

pub use block::{BlockConfig, BlockFec};
pub use spec::{FecSpec, FEC_NAMES};

/// Most packet numbers one repair symbol can cover: the span from the window's first to its
/// last source packet (the repair frame names the window as a bitmap over this span).
pub const MAX_WINDOW_SPAN: u64 = 96;
/// Most repair symbols one window can have.
pub const MAX_REPAIRS: u16 = 96;

/// A packet carrying stream data (a source symbol), as the scheme sees it when it is sent.
#[derive(Clone, Copy, Debug)]
pub struct SourcePacket<'a> {
    pub pn: u64,
    pub sent: Instant,
    /// Length of the source symbol (the packet's STREAM frames): what one repair symbol over a
    /// window holding this packet costs at least.
    pub symbol_bytes: usize,
    pub kind: SendKind,
    pub ranges: &'a [SentRange],
    /// Bit i set: `ranges[i]` carries its stream's FIN (in the rtc application: the end of a
    /// video frame).
    pub fins: u64,
    /// The earliest playout deadline the application gave a stream in this packet, if any.
    pub deadline: Option<Instant>,
}

impl SourcePacket<'_> {
    /// Whether the packet ends a stream (a video frame in the rtc application).
    #[must_use]
    pub fn ends_stream(&self) -> bool {
        self.fins != 0
    }
}

/// Where the transport stands when it asks for repairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecContext {
    pub state: SendState,
    /// The RTT estimate, once there is a sample.
    pub rtt: Option<RttSample>,
    pub cwnd: u64,
    pub bytes_in_flight: u64,
}

/// Repair symbols to send: `repairs` symbols coded over the source packets `window`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairRequest {
    /// Packet numbers of source packets, ascending, spanning at most [`MAX_WINDOW_SPAN`].
    pub window: Vec<u64>,
    /// 1 ..= [`MAX_REPAIRS`].
    pub repairs: u16,
}

/// When and over which source symbols repair symbols go (the sender half of FEC).
///
/// The transport calls [`FecScheme::on_source_sent`] for every packet carrying stream data,
/// [`FecScheme::on_packet_acked`] / [`FecScheme::on_packet_lost`] for every application-data
/// packet (source, repair or neither, `repair` says which was a repair), and asks
/// [`FecScheme::poll_repair`] whenever it could send, until it answers `None`. A request for
/// packets the transport no longer holds or that carried no stream data is narrowed to those it
/// holds, and dropped if none is left.
pub trait FecScheme: fmt::Debug {
    /// The scheme's name as [`FecSpec`] parses it.
    fn name(&self) -> &'static str;
    fn on_source_sent(&mut self, now: Instant, packet: &SourcePacket<'_>);
    fn on_packet_acked(&mut self, _now: Instant, _packet: &PacketInfo<'_>, _repair: bool) {}
    fn on_packet_lost(&mut self, _now: Instant, _packet: &PacketInfo<'_>, _repair: bool) {}
    fn on_rtt_update(&mut self, _now: Instant, _rtt: &RttSample) {}
    fn on_send_state(&mut self, _now: Instant, _state: SendState) {}
    /// The next repair to send now, if any.
    fn poll_repair(&mut self, now: Instant, ctx: &FecContext) -> Option<RepairRequest>;
    /// When [`FecScheme::on_timeout`] should run next (e.g. a frame's repair deadline).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn on_timeout(&mut self, _now: Instant) {}
}

/// A scheme for one connection: the built-ins behind one enum, user schemes through the trait.
#[derive(Debug)]
pub enum Fec {
    Block(BlockFec),
    WebRtc(Box<crate::fec_schemes::WebRtcFec>),
    Hairpin(Box<crate::fec_schemes::HairpinFec>),
    Tambur(Box<crate::fec_schemes::TamburFec>),
    Ladr(Box<crate::fec_schemes::LadrFec>),
    /// A scheme written outside this crate.
    User(Box<dyn FecScheme + Send>),
}

macro_rules! dispatch {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Fec::Block($s) => $call,
            Fec::WebRtc($s) => $call,
            Fec::Hairpin($s) => $call,
            Fec::Tambur($s) => $call,
            Fec::Ladr($s) => $call,
            Fec::User($s) => $call,
        }
    };
}

impl FecScheme for Fec {
    fn name(&self) -> &'static str {
        dispatch!(self, s => s.name())
    }
    fn on_source_sent(&mut self, now: Instant, packet: &SourcePacket<'_>) {
        dispatch!(self, s => s.on_source_sent(now, packet));
    }
    fn on_packet_acked(&mut self, now: Instant, packet: &PacketInfo<'_>, repair: bool) {
        dispatch!(self, s => s.on_packet_acked(now, packet, repair));
    }
    fn on_packet_lost(&mut self, now: Instant, packet: &PacketInfo<'_>, repair: bool) {
        dispatch!(self, s => s.on_packet_lost(now, packet, repair));
    }
    fn on_rtt_update(&mut self, now: Instant, rtt: &RttSample) {
        dispatch!(self, s => s.on_rtt_update(now, rtt));
    }
    fn on_send_state(&mut self, now: Instant, state: SendState) {
        dispatch!(self, s => s.on_send_state(now, state));
    }
    fn poll_repair(&mut self, now: Instant, ctx: &FecContext) -> Option<RepairRequest> {
        dispatch!(self, s => s.poll_repair(now, ctx))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        dispatch!(self, s => s.poll_timeout())
    }
    fn on_timeout(&mut self, now: Instant) {
        dispatch!(self, s => s.on_timeout(now));
    }
}
