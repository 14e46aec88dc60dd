//! One QUIC connection as a sans-IO state machine.
//!
//! # Driving a connection
//!
//! The driver (the simulator, or the UDP loop in `recoup-net`) owns the socket and the clock and
//! repeats, forever:
//!
//! 1. hand every datagram received for this connection to
//!    [`Connection::handle_datagram_in_place`];
//! 2. call [`Connection::poll_transmit`] until it returns `None`, sending each datagram;
//! 3. wait until [`Connection::poll_timeout`] (or the next datagram) and call
//!    [`Connection::handle_timeout`] when it passes;
//! 4. after each of these, drain [`Connection::poll_event`] and use the stream API.
//!
//! Every call takes `now`; nothing here reads a clock.
//!
//! # Parts
//!
//! A [`Connection`] is the composition of parts, each with its own module and invariants:
//! the TLS session and packet protection keys per space (`keys`), the packet number spaces
//! with their ACK state and CRYPTO streams (`spaces`), the network path and its
//! anti-amplification limit (`path`), the recovery host (loss detection, congestion control,
//! pacing, lineage and the loss-recovery policy, `recovery`), the streams with their flow
//! control ([`Streams`]), the connection IDs (`cids`), the handshake's progress and the peer's
//! parameters (`handshake`), path validation and migration (`migration`) and the idle timer
//! (`idle`). This module holds the sans-IO entry
//! points and the connection's lifecycle; `send` builds datagrams, `recv` processes them.

mod cids;
mod datagrams;
mod fec;
mod feedback;
mod handshake;
mod idle;
mod keys;
mod migration;
mod path;
mod pmtud;
mod recovery;
mod recv;
mod retry;
mod send;
mod spaces;
mod stateless_reset;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use recoup_recovery::{Policy, RecoveryPolicy};
use recoup_time::{earliest, Instant};

use crate::cc::CongestionController;
use crate::cid::ConnectionId;
use crate::config::{ClientConfig, ServerConfig, TransportConfig};
use crate::crypto::Side;
use crate::error::{Error, TransportError, TransportErrorCode};
use crate::loss::{PerSpace, SpaceId};
use crate::qlog::{self, ConnectionClosed, ConnectionStarted, Owner, ParametersSet, QlogWriter};
use crate::stateless_reset::ResetKey;
use crate::streams::{FlowLimits, SourcedBytes, StreamEvent, StreamId, Streams};
use crate::tls::TlsSession;
use crate::transport_params::TransportParameters;
use recoup_recovery::Recovered;

use cids::CidState;
pub use cids::{CidEvent, IssuedCid};
use datagrams::DatagramQueues;
use fec::FecState;
pub use feedback::PacketRecord;
use handshake::Handshake;
use idle::IdleTimer;
use keys::KeyState;
use migration::Migration;
pub use migration::MigrationStats;
use path::Path;
use recovery::{RecoveryHost, SentFrames};
use spaces::PacketSpace;

/// A datagram to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub destination: SocketAddr,
    pub contents: Vec<u8>,
    /// Identity of what the datagram carries ([`recoup_recovery::data_send_key`] for stream
    /// data, else [`recoup_recovery::packet_key`]); `None` for stateless packets. Real sockets
    /// ignore it; a simulated loss element drawing per packet decides the fate from it.
    pub key: Option<u64>,
}

/// Where a datagram written by [`Connection::poll_transmit_into`] goes: its destination, its
/// length at the end of the caller's buffer, and its key (as [`Transmit::key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct TransmitInfo {
    pub destination: SocketAddr,
    pub len: usize,
    pub key: Option<u64>,
}

impl Transmit {
    /// Appends the datagram to `buf`, for a caller of [`Connection::poll_transmit_into`].
    pub(crate) fn append_to(self, buf: &mut Vec<u8>) -> TransmitInfo {
        buf.extend_from_slice(&self.contents);
        TransmitInfo {
            destination: self.destination,
            len: self.contents.len(),
            key: self.key,
        }
    }
}

impl TransmitInfo {
    /// The datagram as a [`Transmit`] owning its bytes: `contents` is the buffer
    /// [`Connection::poll_transmit_into`] wrote it into.
    #[must_use]
    pub fn with_contents(self, contents: Vec<u8>) -> Transmit {
        Transmit {
            destination: self.destination,
            contents,
            key: self.key,
        }
    }
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
    /// The peer sent a stateless reset (RFC 9000 §10.3): it no longer has this connection,
    /// having restarted or lost its state.
    StatelessReset,
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
    /// Datagrams (RFC 9221) arrived while none was waiting to be read: read them with
    /// [`Connection::datagram_recv`] until it returns `None`.
    DatagramReceived,
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
    /// FEC (docs/FEC.md): packets with a repair symbol sent and their REPAIR frame bytes
    /// (redundancy); REPAIR frames received; packets restored from repair symbols and the
    /// stream bytes they held.
    pub repair_packets_sent: u64,
    pub repair_bytes_sent: u64,
    pub repair_frames_received: u64,
    pub fec_recovered_packets: u64,
    pub fec_recovered_bytes: u64,
    /// Application-data packets sent while the policy's rate limit was in force (LADR's reactive
    /// rate limit), and those of them sent while it was below the congestion controller's rate.
    pub rate_limited_packets: u64,
    pub rate_limit_binding_packets: u64,
    /// Path MTU probes sent and lost (RFC 9000 §14.3), and returns to the base size on a
    /// suspected black hole: three PTOs in a row or persistent congestion (RFC 8899 §4.3).
    pub mtu_probes_sent: u64,
    pub mtu_probes_lost: u64,
    pub mtu_black_holes: u64,
    /// Times `poll_transmit` found data waiting (new, a retransmission or a copy) with nothing
    /// in flight and no timer armed, and sent nothing: only the peer could wake the sender.
    /// Always 0 unless there is a bug (the first occurrence is logged with the sender's state).
    pub send_stalls: u64,
    /// DATAGRAM frames (RFC 9221) sent, received, and carried by packets declared lost (never
    /// retransmitted, §5.2); datagrams dropped from the send queue (full, or too large for the
    /// path's shrunk datagram size) and from the receive queue (the application did not read
    /// them before it filled).
    pub datagram_frames_sent: u64,
    pub datagram_frames_received: u64,
    pub datagram_frames_lost: u64,
    pub datagram_frames_dropped: u64,
    pub datagram_frames_unread: u64,
    /// Probe timeouts that expired (RFC 9002 §6.2; a RACK-TLP tail loss probe counts too).
    pub pto_expirations: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Handshaking,
    Established,
    /// We sent CONNECTION_CLOSE; answer further packets with it until `until` (RFC 9000 §10.2.1).
    Closing {
        until: Instant,
        /// The CONNECTION_CLOSE we send.
        frame: CloseError,
        /// Send it in the next datagram.
        pending: bool,
    },
    /// The peer closed; stay silent until `until` (RFC 9000 §10.2.2).
    Draining {
        until: Instant,
    },
    Closed,
}

/// A QUIC connection. See the module documentation for how to drive it.
#[derive(Debug)]
pub struct Connection {
    side: Side,
    config: TransportConfig,
    state: State,
    /// TLS and the packet protection keys of each space.
    keys: KeyState,
    /// Packet numbers, ACK state and CRYPTO streams of each space.
    spaces: PerSpace<PacketSpace>,
    /// The peer's address, the datagram size, anti-amplification.
    path: Path,
    /// Path validation and migration (RFC 9000 §8.2, §9).
    migration: Migration,
    /// Path MTU discovery, once the peer's transport parameters are known and if configured.
    pmtud: Option<pmtud::Pmtud>,
    /// Loss detection, congestion control, pacing, lineage and the loss-recovery policy.
    recovery: RecoveryHost,
    /// Application streams and flow control.
    streams: Streams,
    cids: CidState,
    /// Handshake progress and the peer's transport parameters.
    handshake: Handshake,
    idle: IdleTimer,
    /// Connection-level events for the application (stream events come from `streams`).
    events: VecDeque<Event>,
    qlog: Option<QlogWriter>,
    /// A server's first received packet, logged when a qlog writer arrives.
    qlog_first: Option<(Instant, qlog::Event)>,
    stats: ConnectionStats,
    /// The key of the datagram being built (see [`Transmit::key`]).
    datagram_key: Option<u64>,
    rng: ChaCha8Rng,
    /// recoup's FEC extension (`fec`): active only when negotiated.
    fec: FecState,
    /// DATAGRAM frames (RFC 9221) waiting to be sent or read.
    datagrams: DatagramQueues,
    /// Packet events for the application (`feedback`), when `record_packets` is set.
    packet_records: Vec<PacketRecord>,
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
    /// source ID `peer_scid`. The endpoint calls this, then
    /// [`Connection::handle_datagram_in_place`] with the datagram.
    pub fn accept(
        now: Instant,
        config: &ServerConfig,
        remote: SocketAddr,
        original_dcid: ConnectionId,
        peer_scid: ConnectionId,
    ) -> Result<Self, Error> {
        Self::accept_with_ids(now, config, remote, original_dcid, None, peer_scid, None)
    }

    /// [`Connection::accept`], after a Retry with source ID `retry_scid` when given (the
    /// client's Initial is then addressed to that ID, and its keys derive from it), with reset
    /// tokens from `reset_key` when given.
    pub(crate) fn accept_with_ids(
        now: Instant,
        config: &ServerConfig,
        remote: SocketAddr,
        original_dcid: ConnectionId,
        retry_scid: Option<ConnectionId>,
        peer_scid: ConnectionId,
        reset_key: Option<&ResetKey>,
    ) -> Result<Self, Error> {
        let mut rng = ChaCha8Rng::seed_from_u64(
            config.transport.seed ^ u64::from_le_bytes(first8(&original_dcid)),
        );
        let scid = ConnectionId::random_with_prefix(
            &mut rng,
            config.transport.local_cid_len,
            config.transport.cid_prefix,
        );
        let mut params = Self::local_params(&config.transport, scid, Some(original_dcid));
        params.retry_source_connection_id = retry_scid;
        // RFC 9000 §18.2: the server's token for the ID of its handshake packets.
        params.stateless_reset_token = reset_key.map(|k| k.token(&scid));
        let tls = TlsSession::server(config.tls.clone(), encode(&params))?;
        let mut conn = Self::new(
            Side::Server,
            now,
            config.transport.clone(),
            tls,
            rng,
            scid,
            peer_scid,
            retry_scid.unwrap_or(original_dcid),
            remote,
        );
        if retry_scid.is_some() {
            // RFC 9000 §8.1.2: a valid Retry token proves the client's address, lifting the
            // anti-amplification limit at once.
            conn.path.validate();
        }
        if let Some(key) = reset_key {
            conn.cids.set_reset_key(key.clone());
        }
        Ok(conn)
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
        Self {
            side,
            state: State::Handshaking,
            keys: KeyState::new(tls, &original_dcid, side),
            spaces: PerSpace([PacketSpace::new(), PacketSpace::new(), PacketSpace::new()]),
            path: Path::new(side, remote, config.max_datagram_size),
            migration: Migration::default(),
            pmtud: None,
            recovery: RecoveryHost::new(side, &config, policy, now),
            streams,
            cids: CidState::new(
                local_cid,
                remote_cid,
                (config.local_cid_len, config.cid_prefix),
                config.active_connection_id_limit,
            ),
            handshake: Handshake::new(original_dcid),
            idle: IdleTimer::new(config.max_idle_timeout, now),
            events: VecDeque::new(),
            qlog: None,
            qlog_first: None,
            stats: ConnectionStats::default(),
            datagram_key: None,
            rng,
            fec: FecState::new(&config),
            datagrams: DatagramQueues::default(),
            packet_records: Vec::new(),
            config,
        }
    }

    /// Writes a qlog trace of this connection to `writer` from now on: the header naming the
    /// connection by its original destination connection ID (so both ends' traces pair),
    /// `connection_started`, our transport parameters, and a server's first Initial.
    pub fn set_qlog(&mut self, mut writer: QlogWriter) {
        let now = writer.start();
        writer.write_header(&qlog::hex(&self.handshake.original_dcid));
        let remote = self.path.remote;
        writer.log(
            now,
            qlog::Event::ConnectionStarted(ConnectionStarted {
                ip_version: if remote.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
                dst_ip: remote.ip().to_string(),
                dst_port: remote.port(),
                src_cid: qlog::hex(&self.cids.initial_local()),
                dst_cid: qlog::hex(&self.cids.remote()),
            }),
        );
        let odcid = (self.side == Side::Server).then_some(self.handshake.original_dcid);
        let params = Self::local_params(&self.config, self.cids.initial_local(), odcid);
        writer.log(
            now,
            qlog::Event::ParametersSet(ParametersSet::of(Owner::Local, &params)),
        );
        if let Some(params) = &self.handshake.peer_params {
            writer.log(
                now,
                qlog::Event::ParametersSet(ParametersSet::of(Owner::Remote, params)),
            );
        }
        if let Some((at, event)) = self.qlog_first.take() {
            writer.log(at, event);
        }
        self.qlog = Some(writer);
    }

    /// The destination connection ID of the client's first Initial, which names the connection
    /// in both ends' qlog traces.
    #[must_use]
    pub fn original_dcid(&self) -> ConnectionId {
        self.handshake.original_dcid
    }

    fn qlog_closed(&mut self, now: Instant, owner: Owner, err: Option<&CloseError>) {
        let Some(q) = self.qlog.as_mut() else {
            return;
        };
        let trigger = match err {
            None => "idle_timeout",
            Some(e) if e.application => "application",
            Some(e) if e.code == 0 => "clean",
            Some(_) => "error",
        };
        q.log(
            now,
            qlog::Event::ConnectionClosed(ConnectionClosed {
                owner,
                connection_code: err.filter(|e| !e.application).map(|e| e.code),
                application_code: err.filter(|e| e.application).map(|e| e.code),
                reason: err.map(|e| e.reason.clone()).filter(|r| !r.is_empty()),
                trigger: trigger.into(),
            }),
        );
    }

    // ----- state -----

    #[must_use]
    pub fn side(&self) -> Side {
        self.side
    }

    #[must_use]
    pub fn remote_address(&self) -> SocketAddr {
        self.path.remote
    }

    /// The largest UDP payload sent now: the configured size, or what path MTU discovery found.
    #[must_use]
    pub fn max_datagram_size(&self) -> usize {
        self.path.max_datagram_size
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
            self.recovery.loss.rtt().smoothed(),
            self.recovery.cc.window(),
            self.recovery.loss.bytes_in_flight(),
        )
    }

    /// The application protocol TLS agreed on.
    #[must_use]
    pub fn alpn(&self) -> Option<&[u8]> {
        self.keys.tls.alpn()
    }

    /// The loss-recovery policy in use.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.recovery.policy
    }

    /// Replaces the loss-recovery policy with `spec`'s, for a server that learns from the first
    /// request what it serves (a live stream or a file). The new policy hears of every
    /// application-data packet still in flight, at its send time, then of the sending state and
    /// the RTT, so its call order is the one `RecoveryPolicy` documents, as if it had been there
    /// from the start. Refused while lost data is in recovery, whose rounds the new policy never
    /// heard begin, or while a copy is waiting to be sent.
    pub fn set_policy(
        &mut self,
        now: Instant,
        spec: &recoup_recovery::PolicySpec,
    ) -> Result<(), Error> {
        if !self.recovery.lineage.is_empty() || self.recovery.pending_copy.is_some() {
            return Err(Error::InvalidState(
                "the policy cannot change while lost data is in recovery",
            ));
        }
        let mut policy = spec.build(self.rng.next_u64());
        for p in self.recovery.loss.unacked(SpaceId::Data) {
            let info = p.data.info(p.pn, p.time_sent, p.size);
            policy.on_packet_sent(p.time_sent, &info);
        }
        if let Some(state) = self.recovery.send_state {
            policy.on_send_state(now, state);
        }
        if self.recovery.loss.rtt().has_sample() {
            policy.on_rtt_update(now, &self.recovery.loss.rtt().sample());
        }
        self.recovery.policy = policy;
        self.recovery.copy_declined = false;
        self.recovery.policy_timer_served = None;
        Ok(())
    }

    /// Lost ranges whose recovery completed since the last call (only with
    /// [`TransportConfig::record_recovery`]).
    pub fn drain_recovered(&mut self) -> impl Iterator<Item = Recovered> + '_ {
        self.recovery.lineage.drain_recovered()
    }

    /// Lineages still open (lost data not yet acknowledged): the policy's state is bounded by it.
    #[must_use]
    pub fn open_lineages(&self) -> usize {
        self.recovery.lineage.len()
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

    /// As [`Connection::stream_write`], but takes the accepted front of `data` without
    /// copying it; what the stream did not take stays in `data`.
    pub fn stream_write_chunk(&mut self, id: StreamId, data: &mut Bytes) -> Result<usize, Error> {
        self.check_open()?;
        self.streams.write_chunk(id, data)
    }

    /// As [`Connection::stream_write_chunk`], for bytes a source produces each time they are
    /// sent (and re-sent) rather than bytes held in memory: for a writer whose bytes are a
    /// function of their offset, which then reach each packet hot from the source instead of
    /// from a buffer written long before ([`crate::streams::ByteSource`]).
    pub fn stream_write_sourced(
        &mut self,
        id: StreamId,
        data: &mut SourcedBytes,
    ) -> Result<usize, Error> {
        self.check_open()?;
        self.streams.write_sourced(id, data)
    }

    /// Ends the stream after the bytes written so far.
    pub fn stream_finish(&mut self, id: StreamId) -> Result<(), Error> {
        self.check_open()?;
        self.streams.finish(id)
    }

    /// Abandons sending on a stream (RESET_STREAM); lost data of it is no longer recovered.
    pub fn stream_reset(&mut self, now: Instant, id: StreamId, code: u64) -> Result<(), Error> {
        self.check_open()?;
        self.streams.reset(id, code)?;
        self.forget_stream_losses(now, id);
        Ok(())
    }

    /// The stream's sending half was reset (by us or, through STOP_SENDING, by the peer): its
    /// lost data will never be recovered, so its lineages close and the policy forgets them
    /// (the recovery contract: `on_data_acked` once per lineage, when acknowledged or reset).
    fn forget_stream_losses(&mut self, now: Instant, id: StreamId) {
        for loss in self.recovery.lineage.remove_stream(id.0) {
            self.recovery.policy.on_data_acked(now, loss);
        }
    }

    /// Sets where stream `id`'s new data goes among the other streams' (higher first,
    /// round-robin among equals; 0 for every stream until set): [`Streams::set_send_order`].
    pub fn stream_set_send_order(&mut self, id: StreamId, order: u8) -> Result<(), Error> {
        self.streams.set_send_order(id, order)
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

    /// Every in-order byte stream `id` holds, handed to `visit` in the pieces it holds them in
    /// rather than copied out: each piece with whether it ends the stream (an empty piece when
    /// only the end is left to report). Returns what [`Connection::stream_read`] with a large
    /// enough buffer would: the bytes taken and whether the end was reached.
    pub fn stream_read_with(
        &mut self,
        id: StreamId,
        visit: impl FnMut(&[u8], bool),
    ) -> Result<(usize, bool), Error> {
        self.streams.read_with(id, visit)
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

    /// How many of the first bytes we sent on `id` the peer has acknowledged in order, for an
    /// application that gives up on data past a deadline (a MoQ group); `None` once the sending
    /// part is gone (all acknowledged, or reset) or was never there.
    #[must_use]
    pub fn stream_acked_prefix(&self, id: StreamId) -> Option<u64> {
        self.streams.acked_prefix(id)
    }

    /// Bytes queued for sending but not yet acknowledged, and bytes received but not yet read.
    #[must_use]
    pub fn stream_buffered(&self, id: StreamId) -> (usize, usize) {
        self.streams.buffered(id)
    }

    /// Whether the peer has acknowledged every byte written to every stream: a server that
    /// closes then loses nothing it sent (closing discards what is not yet delivered).
    #[must_use]
    pub fn all_stream_data_acked(&self) -> bool {
        self.streams.all_acked()
    }

    /// Sends a PING (RFC 9000 §19.2) in the next packet: an ack-eliciting packet that checks
    /// the peer still has the connection (a peer that lost it answers with a stateless reset,
    /// §10.3) or keeps the connection from idling out (§10.1.2).
    pub fn ping(&mut self) {
        if self.state == State::Established {
            let probes = &mut self.spaces[SpaceId::Data].probes;
            *probes = (*probes).max(1);
        }
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.is_closing() {
            return Err(Error::Closed("connection is closing".into()));
        }
        Ok(())
    }

    /// Starts a 1-RTT key update at the next opportunity (RFC 9001 §6).
    pub fn initiate_key_update(&mut self) {
        self.keys.update.requested = true;
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

    /// An AEAD limit was reached where no packet may be protected any more (RFC 9001 §6.6):
    /// the connection ends at once, silently.
    fn stop_at_aead_limit(&mut self, reason: &str) {
        if self.is_closing() {
            return;
        }
        tracing::debug!(side = ?self.side, reason, "AEAD limit");
        self.state = State::Closed;
        self.events
            .push_back(Event::Closed(CloseReason::Local(CloseError {
                code: TransportErrorCode::AEAD_LIMIT_REACHED.0,
                application: false,
                frame_type: None,
                reason: reason.to_owned(),
            })));
        self.flush_qlog();
    }

    fn enter_closing(&mut self, now: Instant, err: CloseError) {
        self.qlog_closed(now, Owner::Local, Some(&err));
        self.state = State::Closing {
            until: now + self.three_pto(),
            frame: err,
            pending: true,
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
        self.qlog_closed(now, Owner::Remote, Some(&err));
        self.events
            .push_back(Event::Closed(CloseReason::Remote(err)));
        self.flush_qlog();
    }

    fn three_pto(&self) -> Duration {
        self.recovery.three_pto()
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
            State::Closing { until, .. } | State::Draining { until } => return Some(until),
            _ => {}
        }
        // Written out rather than as an iterator chain over an array: this runs several times
        // per packet, in the simulator and on the server.
        let mut t = earliest(self.recovery.timeout(), self.idle.deadline());
        t = earliest(t, self.keys.update.drop_previous_at);
        t = earliest(t, self.migration.timeout());
        t = earliest(
            t,
            self.keys.update.timeout(
                || self.handshake.confirmed && self.key_update_due().0,
                || self.three_pto(),
            ),
        );
        t = earliest(t, self.fec_timeout());
        for space in SpaceId::ALL {
            t = earliest(t, self.spaces[space].timeout());
        }
        t
    }

    /// Runs whatever timers are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Closed => return,
            State::Closing { until, .. } | State::Draining { until } => {
                if now >= until {
                    self.state = State::Closed;
                    self.flush_qlog();
                }
                return;
            }
            _ => {}
        }
        if self.idle.deadline().is_some_and(|d| now >= d) {
            self.state = State::Closed;
            self.qlog_closed(now, Owner::Local, None);
            self.events
                .push_back(Event::Closed(CloseReason::IdleTimeout));
            self.flush_qlog();
            return;
        }
        if self.keys.update.drop_previous_at.is_some_and(|d| now >= d) {
            self.keys.update.drop_previous_at = None;
            if let Some(k) = self.keys.one_rtt_mut() {
                k.drop_previous_remote();
            }
        }
        self.on_migration_timeout(now);
        self.recovery.on_policy_timeout(now);
        self.fec_on_timeout(now);
        if self.recovery.loss.timeout().is_some_and(|d| now >= d) {
            self.on_loss_timeout(now);
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
