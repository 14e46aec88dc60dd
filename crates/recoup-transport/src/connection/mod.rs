//! One QUIC connection as a sans-IO state machine.
//!
//! # Driving a connection
//!
//! The driver (the simulator, or the UDP loop in `recoup-net`) owns the socket and the clock and
//! repeats, forever:
//!
//! 1. hand every datagram received for this connection to [`Connection::handle_datagram`];
//! 2. call [`Connection::poll_transmit`] until it returns `None`, sending each datagram;
//! 3. wait until [`Connection::poll_timeout`] (or the next datagram) and call
//!    [`Connection::handle_timeout`] when it passes;
//! 4. after each of these, drain [`Connection::poll_event`] and use the stream API.
//!
//! Every call takes `now`; nothing here reads a clock.

mod cids;
mod recv;
mod send;
mod spaces;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::{
    CopyRequest, DataRange, PacketInfo, Policy, RecoveryPolicy, SendKind, SendState, SentRange,
};
use recoup_time::Instant;

use crate::cc::{CcConfig, CongestionController, Controller};
use crate::cid::ConnectionId;
use crate::config::{ClientConfig, ServerConfig, TransportConfig};
use crate::crypto::{initial_keys, Keys, OneRttKeys, Side};
use crate::error::{Error, TransportError, TransportErrorCode};
use crate::lineage::{Lineages, Recovered};
use crate::loss::{LossConfig, LossDetection, PerSpace, SpaceId};
use crate::pacing::{Pacer, DEFAULT_BURST_PACKETS};
use crate::qlog::QlogWriter;
use crate::streams::{ControlFrame, FlowLimits, StreamEvent, StreamId, Streams};
use crate::tls::{NewKeys, TlsSession};
use crate::transport_params::TransportParameters;

use cids::CidState;
pub use cids::{CidEvent, IssuedCid};
use spaces::PacketSpace;

/// A datagram to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub destination: SocketAddr,
    pub contents: Vec<u8>,
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// We closed it: the application asked, or we found a protocol violation.
    Local(CloseError),
    /// The peer sent CONNECTION_CLOSE.
    Remote(CloseError),
    /// Nothing was heard for the idle timeout (RFC 9000 §10.1).
    IdleTimeout,
}

/// The error code and reason of a CONNECTION_CLOSE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseError {
    /// Transport error code (`application == false`) or application code.
    pub code: u64,
    pub application: bool,
    pub frame_type: Option<u64>,
    pub reason: String,
}

impl CloseError {
    /// The transport error code, if this is a transport close.
    #[must_use]
    pub fn transport_code(&self) -> Option<TransportErrorCode> {
        (!self.application).then_some(TransportErrorCode(self.code))
    }
}

impl From<&TransportError> for CloseError {
    fn from(e: &TransportError) -> Self {
        Self {
            code: e.code.0,
            application: false,
            frame_type: e.frame_type,
            reason: e.reason.clone(),
        }
    }
}

/// What the application should learn, from [`Connection::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed; streams may carry data both ways.
    Connected,
    /// A stream event (peer reset, peer stop, all data acknowledged).
    Stream(StreamEvent),
    /// The connection is closed (or closing); no more data moves.
    Closed(CloseReason),
}

/// Counters for tests, benchmarks and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Packets that could not be decrypted or parsed and were dropped.
    pub packets_dropped: u64,
    pub packets_lost: u64,
    /// Application-data packets by why they carried stream data.
    pub new_packets: u64,
    pub retransmission_packets: u64,
    pub copy_packets: u64,
    /// Stream bytes sent for the first time, as retransmissions, as copies.
    pub stream_bytes_new: u64,
    pub stream_bytes_retransmitted: u64,
    pub stream_bytes_copied: u64,
    /// Loss events the congestion controller saw (RFC 9002 §7.3.2 congestion events).
    pub congestion_events: u64,
    /// Lost packets that, by ART §6.4, did not signal congestion (an older copy of a round).
    pub losses_hidden_from_cc: u64,
    /// Copies that found the congestion window full (and were not allowed beyond it) and went
    /// out once it opened; their total wait; and held copies dropped because their data was
    /// acknowledged meanwhile.
    pub copies_held_by_cwnd: u64,
    pub copy_cwnd_wait: Duration,
    pub held_copies_dropped: u64,
    pub key_updates: u64,
    pub spurious_losses: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Handshaking,
    Established,
    /// We sent CONNECTION_CLOSE; answer further packets with it until `until` (RFC 9000 §10.2.1).
    Closing {
        until: Instant,
    },
    /// The peer closed; stay silent until `until` (RFC 9000 §10.2.2).
    Draining {
        until: Instant,
    },
    Closed,
}

/// What a sent packet carried, kept until it is acknowledged or lost.
#[derive(Clone, Debug, Default)]
struct SentFrames {
    kind: Option<SendKind>,
    /// Stream ranges, with their lineage for retransmissions and copies.
    stream: Vec<SentRange>,
    /// Bit i set: `stream[i]` carried the FIN.
    fins: u64,
    crypto: Option<(u64, u64)>,
    control: Vec<ControlFrame>,
    handshake_done: bool,
    new_cids: Vec<u64>,
    retire_cids: Vec<u64>,
    /// Largest packet number acknowledged by an ACK frame in this packet.
    ack_largest: Option<u64>,
}

impl SentFrames {
    fn info(&self, pn: u64, sent: Instant, bytes: usize) -> PacketInfo<'_> {
        PacketInfo {
            pn,
            sent,
            bytes,
            kind: self.kind.unwrap_or(SendKind::New),
            ranges: &self.stream,
        }
    }
}

/// Key update bookkeeping (RFC 9001 §6).
#[derive(Debug, Default)]
struct KeyUpdate {
    /// Packets sent with the current key phase.
    sent_in_phase: u64,
    /// First packet number sent in the current phase; an update needs one of them acknowledged.
    first_pn_in_phase: Option<u64>,
    phase_acked: bool,
    /// When to drop the previous phase's receive key.
    drop_previous_at: Option<Instant>,
    /// The application asked for an update.
    requested: bool,
}

/// A QUIC connection. See the module documentation for how to drive it.
#[derive(Debug)]
pub struct Connection {
    side: Side,
    config: TransportConfig,
    state: State,
    tls: TlsSession,
    initial_keys: Option<Keys>,
    handshake_keys: Option<Keys>,
    one_rtt: Option<OneRttKeys>,
    /// Encryption level TLS writes at.
    write_level: SpaceId,
    spaces: PerSpace<PacketSpace>,
    loss: LossDetection<SentFrames>,
    cc: Controller,
    pacer: Pacer,
    streams: Streams,
    lineage: Lineages,
    policy: Policy,
    send_state: Option<SendState>,
    cids: CidState,
    /// The destination ID of the client's first Initial (derives Initial keys, RFC 9001 §5.2).
    original_dcid: ConnectionId,
    /// Client: whether the server's source ID replaced our random initial destination yet.
    remote_cid_set: bool,
    remote: SocketAddr,
    peer_params: Option<TransportParameters>,
    /// Bytes received and sent before the peer's address is validated (RFC 9000 §8.1).
    anti_amplification: Option<(u64, u64)>,
    handshake_confirmed: bool,
    handshake_done_pending: bool,
    connected_reported: bool,
    idle_timeout: Option<Duration>,
    idle_deadline: Option<Instant>,
    /// An ack-eliciting packet was sent since the last packet was received (RFC 9000 §10.1).
    eliciting_since_receive: bool,
    close_frame: Option<CloseError>,
    /// Send CONNECTION_CLOSE in the next datagram (closing state answers each packet once).
    close_pending: bool,
    key_update: KeyUpdate,
    events: VecDeque<Event>,
    qlog: Option<QlogWriter>,
    stats: ConnectionStats,
    rng: ChaCha8Rng,
    /// Application-data packets sent, for policies that count packets (ART's escape space).
    data_packets_sent: u64,
    peer_ack_delay_exponent: u8,
    max_datagram_size: usize,
    /// When the policy's timer was last run; deadlines at or before it are not re-armed.
    policy_timer_served: Option<Instant>,
    /// A copy the policy asked for that has not gone out yet.
    pending_copy: Option<CopyRequest>,
    /// When the congestion window first held `pending_copy` back.
    copy_held_since: Option<Instant>,
    /// When pacing lets the next waiting packet go (set when `poll_transmit` ran dry).
    pacing_wakeup: Option<Instant>,
}

impl Connection {
    /// Starts a client connection to `remote`. The first datagram (the padded Initial with the
    /// ClientHello) is ready from [`Connection::poll_transmit`].
    pub fn connect(now: Instant, config: &ClientConfig, remote: SocketAddr) -> Result<Self, Error> {
        let mut rng = ChaCha8Rng::seed_from_u64(config.transport.seed);
        let dcid = ConnectionId::random(&mut rng, 8);
        let scid = ConnectionId::random(&mut rng, config.transport.local_cid_len);
        let params = Self::local_params(&config.transport, scid, None);
        let tls = TlsSession::client(config.tls.clone(), &config.server_name, encode(&params))?;
        let mut conn = Self::new(
            Side::Client,
            now,
            config.transport.clone(),
            tls,
            rng,
            scid,
            dcid,
            dcid,
            remote,
        );
        conn.drive_tls(now)?;
        Ok(conn)
    }

    /// Accepts a connection whose first Initial was sent to `original_dcid` from `remote`, with
    /// source ID `peer_scid`. The endpoint calls this, then [`Connection::handle_datagram`] with
    /// the datagram.
    pub fn accept(
        now: Instant,
        config: &ServerConfig,
        remote: SocketAddr,
        original_dcid: ConnectionId,
        peer_scid: ConnectionId,
    ) -> Result<Self, Error> {
        let mut rng = ChaCha8Rng::seed_from_u64(
            config.transport.seed ^ u64::from_le_bytes(first8(&original_dcid)),
        );
        let scid = ConnectionId::random(&mut rng, config.transport.local_cid_len);
        let params = Self::local_params(&config.transport, scid, Some(original_dcid));
        let tls = TlsSession::server(config.tls.clone(), encode(&params))?;
        Ok(Self::new(
            Side::Server,
            now,
            config.transport.clone(),
            tls,
            rng,
            scid,
            peer_scid,
            original_dcid,
            remote,
        ))
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "private constructor shared by both roles"
    )]
    fn new(
        side: Side,
        now: Instant,
        config: TransportConfig,
        tls: TlsSession,
        mut rng: ChaCha8Rng,
        local_cid: ConnectionId,
        remote_cid: ConnectionId,
        original_dcid: ConnectionId,
        remote: SocketAddr,
    ) -> Self {
        let mds = config.max_datagram_size as u64;
        let loss = LossDetection::new(LossConfig {
            server: side == Side::Server,
            packet_threshold: config.packet_threshold,
            time_threshold: config.time_threshold,
            initial_rtt: config.initial_rtt,
            max_ack_delay: Duration::from_millis(25),
            detection: config.loss_detection,
        });
        let cc = Controller::new(
            config.cc,
            &CcConfig {
                max_datagram_size: mds,
                initial_window: config.initial_window.map(|p| p.saturating_mul(mds)),
                seed: config.seed,
            },
            now,
        );
        let local_limits = FlowLimits {
            initial_max_data: config.receive_window,
            initial_max_stream_data_bidi_local: config.stream_receive_window,
            initial_max_stream_data_bidi_remote: config.stream_receive_window,
            initial_max_stream_data_uni: config.stream_receive_window,
            initial_max_streams_bidi: config.max_streams_bidi,
            initial_max_streams_uni: config.max_streams_uni,
        };
        let streams = Streams::new(side, local_limits, config.send_buffer);
        let policy_seed = rng.next_u64();
        let policy = match &config.custom_policy {
            Some(factory) => factory.build(policy_seed),
            None => config.policy.build(policy_seed),
        };
        let idle_timeout = (!config.max_idle_timeout.is_zero()).then_some(config.max_idle_timeout);
        Self {
            side,
            state: State::Handshaking,
            tls,
            initial_keys: Some(initial_keys(&original_dcid, side)),
            handshake_keys: None,
            one_rtt: None,
            write_level: SpaceId::Initial,
            spaces: PerSpace([PacketSpace::new(), PacketSpace::new(), PacketSpace::new()]),
            loss,
            cc,
            pacer: Pacer::new(mds, DEFAULT_BURST_PACKETS, now),
            streams,
            lineage: Lineages::new(config.record_recovery),
            policy,
            send_state: None,
            cids: CidState::new(
                local_cid,
                remote_cid,
                config.local_cid_len,
                config.active_connection_id_limit,
            ),
            original_dcid,
            remote_cid_set: side == Side::Server,
            remote,
            peer_params: None,
            anti_amplification: (side == Side::Server).then_some((0, 0)),
            handshake_confirmed: false,
            handshake_done_pending: false,
            connected_reported: false,
            idle_timeout,
            idle_deadline: idle_timeout.map(|t| now + t),
            eliciting_since_receive: false,
            close_frame: None,
            close_pending: false,
            key_update: KeyUpdate::default(),
            events: VecDeque::new(),
            qlog: None,
            stats: ConnectionStats::default(),
            rng,
            data_packets_sent: 0,
            peer_ack_delay_exponent: 3,
            max_datagram_size: config.max_datagram_size,
            policy_timer_served: None,
            pending_copy: None,
            copy_held_since: None,
            pacing_wakeup: None,
            config,
        }
    }

    fn local_params(
        config: &TransportConfig,
        scid: ConnectionId,
        original_dcid: Option<ConnectionId>,
    ) -> TransportParameters {
        TransportParameters {
            original_destination_connection_id: original_dcid,
            max_idle_timeout: config.max_idle_timeout.as_millis() as u64,
            max_udp_payload_size: config.max_datagram_size as u64,
            initial_max_data: config.receive_window,
            initial_max_stream_data_bidi_local: config.stream_receive_window,
            initial_max_stream_data_bidi_remote: config.stream_receive_window,
            initial_max_stream_data_uni: config.stream_receive_window,
            initial_max_streams_bidi: config.max_streams_bidi,
            initial_max_streams_uni: config.max_streams_uni,
            ack_delay_exponent: u64::from(config.ack_delay_exponent),
            max_ack_delay: config.max_ack_delay.as_millis() as u64,
            // We do not follow a peer to a new address; say so (RFC 9000 §18.2).
            disable_active_migration: true,
            active_connection_id_limit: config.active_connection_id_limit,
            initial_source_connection_id: Some(scid),
            ..TransportParameters::default()
        }
    }

    /// Writes a qlog trace of this connection to `writer` from now on.
    pub fn set_qlog(&mut self, writer: QlogWriter) {
        self.qlog = Some(writer);
    }

    // ----- state -----

    #[must_use]
    pub fn side(&self) -> Side {
        self.side
    }

    #[must_use]
    pub fn remote_address(&self) -> SocketAddr {
        self.remote
    }

    /// Whether the handshake completed (1-RTT data may flow).
    #[must_use]
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Whether the connection is fully closed and may be dropped.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Whether the connection is closing, draining or closed.
    #[must_use]
    pub fn is_closing(&self) -> bool {
        matches!(
            self.state,
            State::Closing { .. } | State::Draining { .. } | State::Closed
        )
    }

    #[must_use]
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }

    /// Smoothed RTT, congestion window and bytes in flight, for logs and metrics.
    #[must_use]
    pub fn path_stats(&self) -> (Duration, u64, u64) {
        (
            self.loss.rtt().smoothed(),
            self.cc.window(),
            self.loss.bytes_in_flight(),
        )
    }

    /// The application protocol TLS agreed on.
    #[must_use]
    pub fn alpn(&self) -> Option<&[u8]> {
        self.tls.alpn()
    }

    /// The loss-recovery policy in use.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Lost ranges whose recovery completed since the last call (only with
    /// [`TransportConfig::record_recovery`]).
    pub fn drain_recovered(&mut self) -> impl Iterator<Item = Recovered> + '_ {
        self.lineage.drain_recovered()
    }

    /// Lineages still open (lost data not yet acknowledged): the policy's state is bounded by it.
    #[must_use]
    pub fn open_lineages(&self) -> usize {
        self.lineage.len()
    }

    /// Connection IDs this connection answers to (for the endpoint's routing table).
    pub fn local_cids(&self) -> impl Iterator<Item = ConnectionId> + '_ {
        self.cids.local_ids().map(|c| c.cid)
    }

    /// Changes to [`Connection::local_cids`] since the last call.
    pub fn poll_cid_event(&mut self) -> Option<CidEvent> {
        self.cids.poll_event()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        self.streams.poll_event().map(Event::Stream)
    }

    // ----- streams -----

    /// Opens a stream (bidirectional or unidirectional).
    pub fn open_stream(&mut self, bidi: bool) -> Result<StreamId, Error> {
        self.check_open()?;
        self.streams.open(bidi)
    }

    /// A stream the peer opened, if any is waiting.
    pub fn accept_stream(&mut self, bidi: bool) -> Option<StreamId> {
        self.streams.accept(bidi)
    }

    /// Queues bytes on a stream; returns how many were taken (flow control and the send buffer
    /// limit it). Call [`Connection::poll_transmit`] afterwards.
    pub fn stream_write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, Error> {
        self.check_open()?;
        self.streams.write(id, data)
    }

    /// Ends the stream after the bytes written so far.
    pub fn stream_finish(&mut self, id: StreamId) -> Result<(), Error> {
        self.check_open()?;
        self.streams.finish(id)
    }

    /// Abandons sending on a stream (RESET_STREAM); lost data of it is no longer recovered.
    pub fn stream_reset(&mut self, id: StreamId, code: u64) -> Result<(), Error> {
        self.check_open()?;
        self.streams.reset(id, code)?;
        for loss in self.lineage.remove_stream(id.0) {
            self.policy.on_data_acked(Instant::ZERO, loss);
        }
        Ok(())
    }

    /// Asks the peer to stop sending on a stream (STOP_SENDING).
    pub fn stream_stop(&mut self, id: StreamId, code: u64) -> Result<(), Error> {
        self.check_open()?;
        self.streams.stop_sending(id, code)
    }

    /// Reads in-order bytes; `(n, true)` once the stream's end is reached.
    pub fn stream_read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<(usize, bool), Error> {
        self.streams.read(id, buf)
    }

    /// Streams with bytes (or the end) to read.
    #[must_use]
    pub fn readable_streams(&self) -> Vec<StreamId> {
        self.streams.readable()
    }

    /// Streams that can take more bytes.
    #[must_use]
    pub fn writable_streams(&self) -> Vec<StreamId> {
        self.streams.writable()
    }

    /// Bytes queued for sending but not yet acknowledged, and bytes received but not yet read.
    #[must_use]
    pub fn stream_buffered(&self, id: StreamId) -> (usize, usize) {
        self.streams.buffered(id)
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.is_closing() {
            return Err(Error::Closed("connection is closing".into()));
        }
        Ok(())
    }

    /// Starts a 1-RTT key update at the next opportunity (RFC 9001 §6).
    pub fn initiate_key_update(&mut self) {
        self.key_update.requested = true;
    }

    /// Closes the connection with an application error code (CONNECTION_CLOSE 0x1d).
    pub fn close(&mut self, now: Instant, code: u64, reason: &str) {
        if self.is_closing() {
            return;
        }
        let err = CloseError {
            code,
            application: true,
            frame_type: None,
            reason: reason.to_owned(),
        };
        self.enter_closing(now, err.clone());
        self.events
            .push_back(Event::Closed(CloseReason::Local(err)));
    }

    fn close_with_error(&mut self, now: Instant, error: &TransportError) {
        if self.is_closing() {
            return;
        }
        tracing::debug!(side = ?self.side, %error, "closing connection");
        let err = CloseError::from(error);
        self.enter_closing(now, err.clone());
        self.events
            .push_back(Event::Closed(CloseReason::Local(err)));
    }

    fn enter_closing(&mut self, now: Instant, err: CloseError) {
        self.close_frame = Some(err);
        self.close_pending = true;
        self.state = State::Closing {
            until: now + self.three_pto(),
        };
        self.flush_qlog();
    }

    fn enter_draining(&mut self, now: Instant, err: CloseError) {
        if self.is_closing() {
            // Closing already; the peer's close only shortens the wait (RFC 9000 §10.2.2).
            if matches!(self.state, State::Closing { .. }) {
                self.state = State::Draining {
                    until: now + self.three_pto(),
                };
            }
            return;
        }
        self.state = State::Draining {
            until: now + self.three_pto(),
        };
        self.events
            .push_back(Event::Closed(CloseReason::Remote(err)));
        self.flush_qlog();
    }

    fn three_pto(&self) -> Duration {
        self.loss.pto_period() * 3
    }

    fn flush_qlog(&mut self) {
        if let Some(q) = self.qlog.as_mut() {
            q.flush();
        }
    }

    // ----- timers -----

    /// When [`Connection::handle_timeout`] must next be called, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Closed => return None,
            State::Closing { until } | State::Draining { until } => return Some(until),
            _ => {}
        }
        let mut t = [
            self.loss.timeout(),
            self.idle_deadline,
            self.key_update.drop_previous_at,
            // A policy deadline already served stays quiet until it moves: a copy that falls due
            // while the window is full waits for the next ACK, not for a busy timer.
            self.policy
                .poll_timeout()
                .filter(|&t| self.policy_timer_served.is_none_or(|served| t > served)),
        ]
        .into_iter()
        .flatten()
        .min();
        for space in SpaceId::ALL {
            if let Some(a) = self.spaces[space].timeout() {
                t = Some(t.map_or(a, |t| t.min(a)));
            }
        }
        if let Some(p) = self.pacing_wakeup {
            t = Some(t.map_or(p, |t| t.min(p)));
        }
        t
    }

    /// Runs whatever timers are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Closed => return,
            State::Closing { until } | State::Draining { until } => {
                if now >= until {
                    self.state = State::Closed;
                    self.flush_qlog();
                }
                return;
            }
            _ => {}
        }
        if self.idle_deadline.is_some_and(|d| now >= d) {
            self.state = State::Closed;
            self.events
                .push_back(Event::Closed(CloseReason::IdleTimeout));
            self.flush_qlog();
            return;
        }
        if self.key_update.drop_previous_at.is_some_and(|d| now >= d) {
            self.key_update.drop_previous_at = None;
            if let Some(k) = self.one_rtt.as_mut() {
                k.drop_previous_remote();
            }
        }
        if self.policy.poll_timeout().is_some_and(|d| now >= d) {
            self.policy.on_timeout(now);
            self.policy_timer_served = Some(now);
        }
        if self.loss.timeout().is_some_and(|d| now >= d) {
            self.on_loss_timeout(now);
        }
    }

    // ----- TLS -----

    /// Feeds TLS and moves whatever it writes into the CRYPTO streams, installing keys as they
    /// come (the write loop the `tls` module documents).
    fn drive_tls(&mut self, now: Instant) -> Result<(), TransportError> {
        loop {
            let mut out = Vec::new();
            let keys = self.tls.write_handshake(&mut out);
            if !out.is_empty() {
                self.spaces[self.write_level].crypto_send.write(&out);
            }
            match keys {
                None => break,
                Some(NewKeys::Handshake(k)) => {
                    self.handshake_keys = Some(k);
                    self.write_level = SpaceId::Handshake;
                }
                Some(NewKeys::OneRtt(k)) => {
                    self.one_rtt = Some(*k);
                    self.write_level = SpaceId::Data;
                }
            }
        }
        // A resuming client's TLS session offers the parameters remembered with the ticket
        // until the server's EncryptedExtensions replace them; they are the server's own only
        // once its Finished was read, which is when the 1-RTT keys come (RFC 9000 §7.4.1).
        let params_final = self.side == Side::Server || self.one_rtt.is_some();
        if self.peer_params.is_none() && params_final {
            if let Some(bytes) = self.tls.peer_transport_params() {
                let params = TransportParameters::decode(bytes, self.side.peer())?;
                self.apply_peer_params(now, params)?;
            }
        }
        if self.state == State::Handshaking && !self.tls.is_handshaking() {
            self.state = State::Established;
            if self.side == Side::Server {
                // RFC 9001 §4.1.2: the server's handshake is confirmed when it completes.
                self.handshake_done_pending = true;
                self.confirm_handshake(now);
            }
            if !self.connected_reported {
                self.connected_reported = true;
                self.events.push_back(Event::Connected);
            }
        }
        Ok(())
    }

    fn apply_peer_params(
        &mut self,
        now: Instant,
        params: TransportParameters,
    ) -> Result<(), TransportError> {
        use crate::error::transport_err;
        // RFC 9000 §7.3: authenticate the connection IDs of the handshake.
        if params.initial_source_connection_id != Some(self.cids.remote()) {
            return Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "initial_source_connection_id does not match the peer's source ID"
            ));
        }
        if self.side == Side::Client
            && params.original_destination_connection_id != Some(self.original_dcid)
        {
            return Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "original_destination_connection_id does not match"
            ));
        }
        self.streams.set_peer_params(FlowLimits {
            initial_max_data: params.initial_max_data,
            initial_max_stream_data_bidi_local: params.initial_max_stream_data_bidi_local,
            initial_max_stream_data_bidi_remote: params.initial_max_stream_data_bidi_remote,
            initial_max_stream_data_uni: params.initial_max_stream_data_uni,
            initial_max_streams_bidi: params.initial_max_streams_bidi,
            initial_max_streams_uni: params.initial_max_streams_uni,
        })?;
        // RFC 9000 §10.1: the effective idle timeout is the smaller of the two, zero meaning none.
        let peer_idle = Duration::from_millis(params.max_idle_timeout);
        self.idle_timeout = match (self.idle_timeout, peer_idle.is_zero()) {
            (Some(ours), false) => Some(ours.min(peer_idle)),
            (None, false) => Some(peer_idle),
            (ours, true) => ours,
        };
        self.loss
            .set_max_ack_delay(Duration::from_millis(params.max_ack_delay), now);
        self.peer_ack_delay_exponent = params.ack_delay_exponent.min(20) as u8;
        self.max_datagram_size = self
            .config
            .max_datagram_size
            .min(params.max_udp_payload_size.try_into().unwrap_or(usize::MAX))
            .max(crate::config::MIN_INITIAL_SIZE);
        self.peer_params = Some(params);
        Ok(())
    }

    fn confirm_handshake(&mut self, now: Instant) {
        if self.handshake_confirmed {
            return;
        }
        self.handshake_confirmed = true;
        self.loss.set_handshake_confirmed(now);
        self.discard_space(SpaceId::Handshake, now);
        let limit = self
            .peer_params
            .as_ref()
            .map_or(2, |p| p.active_connection_id_limit)
            .min(self.config.active_connection_id_limit);
        self.cids.issue_up_to(limit, &mut self.rng);
    }

    /// RFC 9001 §4.9: keys of a space are gone; its packets no longer count.
    fn discard_space(&mut self, space: SpaceId, now: Instant) {
        match space {
            SpaceId::Initial => {
                if self.initial_keys.take().is_none() {
                    return;
                }
            }
            SpaceId::Handshake => {
                if self.handshake_keys.take().is_none() {
                    return;
                }
            }
            SpaceId::Data => return,
        }
        let _ = self.loss.discard_space(space, now);
        let s = &mut self.spaces[space];
        s.probes = 0;
        s.on_ack_sent();
    }

    // ----- bookkeeping shared by send and receive -----

    fn space_has_keys(&self, space: SpaceId) -> bool {
        match space {
            SpaceId::Initial => self.initial_keys.is_some(),
            SpaceId::Handshake => self.handshake_keys.is_some(),
            SpaceId::Data => self.one_rtt.is_some(),
        }
    }

    /// The sending state the policy sees (DESIGN.md: on-mode, off-mode, cwnd-limited).
    fn update_send_state(&mut self, now: Instant) {
        let state = if !self.streams.has_new_data() {
            SendState::OffMode
        } else if self.loss.bytes_in_flight() + self.max_datagram_size as u64 > self.cc.window() {
            SendState::CwndLimited
        } else {
            SendState::OnMode
        };
        if self.send_state != Some(state) {
            self.send_state = Some(state);
            self.policy.on_send_state(now, state);
        }
    }

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
        for (i, r) in f.stream.iter().enumerate() {
            let fin = f.fins & (1 << i) != 0;
            let len = r.range.len() as usize;
            self.streams
                .on_acked(StreamId(r.range.stream), r.range.start, len, fin);
            if let Some(id) = r.loss {
                self.lineage.on_send_acked(id, pn, sent);
            }
            let streams = &self.streams;
            let closed = self.lineage.on_range_acked(r.range, sent, now, |range| {
                streams
                    .unacked(
                        StreamId(range.stream),
                        range.start,
                        range.end.max(range.start),
                    )
                    .is_empty()
            });
            for id in closed {
                self.policy.on_data_acked(now, id);
            }
        }
        for c in &f.control {
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
        if let Some((start, end)) = f.crypto {
            self.spaces[space].crypto_send.on_lost(start..end);
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
                        let lost = self.lineage.on_first_loss(range, sent, now, trigger);
                        self.policy.on_data_lost(now, &lost);
                    }
                }
                Some(id) => {
                    if self.lineage.is_newest(id, pn) {
                        signals = true;
                        if let Some(lost) = self.lineage.on_send_lost(id, pn, trigger) {
                            self.policy.on_data_lost(now, &lost);
                        }
                    }
                }
            }
        }
        for c in &f.control {
            self.streams.on_control_lost(*c);
        }
        if f.handshake_done {
            self.handshake_done_pending = true;
        }
        for &seq in &f.new_cids {
            self.cids.on_new_lost(seq);
        }
        for &seq in &f.retire_cids {
            self.cids.on_retire_lost(seq);
        }
        signals
    }

    fn on_loss_timeout(&mut self, now: Instant) {
        use crate::loss::TimeoutOutcome;
        match self.loss.on_timeout(now) {
            TimeoutOutcome::NotDue => {}
            TimeoutOutcome::Lost { space, losses } => {
                self.process_losses(now, space, losses);
            }
            TimeoutOutcome::Probe { space, count } => {
                let space = if self.space_has_keys(space) {
                    space
                } else {
                    self.write_level
                };
                self.spaces[space].probes = count;
                if space != SpaceId::Data {
                    // RFC 9002 §6.2.4: probe with the handshake data that may be missing.
                    self.spaces[space].crypto_send.retransmit_all();
                }
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
                self.policy.on_packet_lost(
                    now,
                    &p.data.info(p.pn, p.time_sent, p.size),
                    lost.trigger,
                );
            }
            self.qlog_packet_lost(now, space, p.pn, lost.trigger);
            let signals = self.on_frames_lost(now, space, p.pn, p.time_sent, &p.data, lost.trigger);
            if signals && p.in_flight {
                newest_signal = newest_signal.max(Some(p.time_sent));
                signal_bytes += p.size as u64;
            } else if p.in_flight {
                self.stats.losses_hidden_from_cc += 1;
            }
        }
        if let Some(t) = newest_signal {
            self.stats.congestion_events += 1;
            self.cc.on_congestion_event(
                now,
                t,
                signal_bytes,
                losses.persistent_congestion,
                self.loss.rtt(),
            );
        }
    }

    fn reset_idle_timer(&mut self, now: Instant) {
        if let Some(t) = self.idle_timeout {
            // RFC 9000 §10.1: at least three PTOs so probes can run.
            self.idle_deadline = Some(now + t.max(self.three_pto()));
        }
    }
}

fn encode(params: &TransportParameters) -> Vec<u8> {
    let mut buf = Vec::new();
    params.encode(&mut buf);
    buf
}

fn first8(cid: &ConnectionId) -> [u8; 8] {
    let mut out = [0u8; 8];
    for (o, b) in out.iter_mut().zip(cid.iter()) {
        *o = *b;
    }
    out
}
