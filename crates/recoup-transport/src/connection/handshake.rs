//! The handshake's progress and what the peer's transport parameters set (RFC 9000 §7, RFC 9001
//! §4): driving TLS, confirming the handshake, discarding the keys of finished spaces.
//!
//! Invariants: the peer's parameters are applied once, after they are authenticated (a client
//! applies the server's only once the server's Finished was read); the handshake is confirmed
//! once, which discards the Handshake space; `Connected` is reported once.

use std::time::Duration;

use recoup_time::Instant;

use super::{Connection, Event, State};
use crate::cid::ConnectionId;
use crate::config::TransportConfig;
use crate::crypto::Side;
use crate::error::TransportError;
use crate::loss::SpaceId;
use crate::streams::FlowLimits;
use crate::transport_params::TransportParameters;

#[derive(Debug)]
pub(super) struct Handshake {
    /// The destination ID of the client's first Initial (derives Initial keys, RFC 9001 §5.2).
    pub original_dcid: ConnectionId,
    pub confirmed: bool,
    /// HANDSHAKE_DONE is to be sent (again, if lost).
    pub done_pending: bool,
    pub connected_reported: bool,
    pub peer_params: Option<TransportParameters>,
    pub peer_ack_delay_exponent: u8,
    /// 1-RTT packets (still protected) that arrived before the handshake completed, to be
    /// processed once it has (RFC 9001 §5.7); at most [`MAX_EARLY_ONE_RTT`].
    pub early_one_rtt: Vec<Vec<u8>>,
    /// Client: the Retry it followed (RFC 9000 §17.2.5.2: at most one per connection attempt).
    pub retry: Option<FollowedRetry>,
}

/// What a client keeps of the Retry it followed.
#[derive(Debug)]
pub(super) struct FollowedRetry {
    /// The Retry's source ID, which the server must echo in retry_source_connection_id (§7.3).
    pub scid: ConnectionId,
    /// Sent in every Initial from then on (RFC 9000 §17.2.5.2).
    pub token: Vec<u8>,
}

/// How many 1-RTT packets wait for the handshake to complete. A peer's first 1-RTT flight is
/// bounded by its initial congestion window of 10 packets (RFC 9002 §7.2); more are dropped
/// (RFC 9001 §5.7 allows either) and recovered as losses.
pub(super) const MAX_EARLY_ONE_RTT: usize = 10;

impl Handshake {
    pub fn new(original_dcid: ConnectionId) -> Self {
        Self {
            original_dcid,
            confirmed: false,
            done_pending: false,
            connected_reported: false,
            peer_params: None,
            peer_ack_delay_exponent: 3,
            early_one_rtt: Vec::new(),
            retry: None,
        }
    }

    /// Keeps a 1-RTT packet that arrived before the handshake completed; false if the buffer
    /// is full and the packet is dropped.
    pub fn buffer_early_one_rtt(&mut self, packet: &[u8]) -> bool {
        if self.early_one_rtt.len() >= MAX_EARLY_ONE_RTT {
            return false;
        }
        self.early_one_rtt.push(packet.to_vec());
        true
    }

    /// How many of our connection IDs the peer holds: its limit, capped by our configuration.
    pub fn active_cid_limit(&self, config: &TransportConfig) -> u64 {
        self.peer_params
            .as_ref()
            .map_or(2, |p| p.active_connection_id_limit)
            .min(config.active_connection_id_limit)
    }
}

impl Connection {
    pub(super) fn local_params(
        config: &TransportConfig,
        scid: ConnectionId,
        original_dcid: Option<ConnectionId>,
    ) -> TransportParameters {
        TransportParameters {
            original_destination_connection_id: original_dcid,
            max_idle_timeout: config.max_idle_timeout.as_millis() as u64,
            max_udp_payload_size: config.pmtud_max.unwrap_or(0).max(config.max_datagram_size)
                as u64,
            initial_max_data: config.receive_window,
            initial_max_stream_data_bidi_local: config.stream_receive_window,
            initial_max_stream_data_bidi_remote: config.stream_receive_window,
            initial_max_stream_data_uni: config.stream_receive_window,
            initial_max_streams_bidi: config.max_streams_bidi,
            initial_max_streams_uni: config.max_streams_uni,
            ack_delay_exponent: u64::from(config.ack_delay_exponent),
            max_ack_delay: config.max_ack_delay.as_millis() as u64,
            // A server follows its peer to a new address (RFC 9000 §9.3, `migration`).
            disable_active_migration: false,
            active_connection_id_limit: config.active_connection_id_limit,
            initial_source_connection_id: Some(scid),
            recoup_fec: config.fec_receive,
            max_datagram_frame_size: config.datagrams.max_frame_size,
            ..TransportParameters::default()
        }
    }

    /// Feeds TLS and moves whatever it writes into the CRYPTO streams, installing keys as they
    /// come (the write loop the `tls` module documents).
    pub(super) fn drive_tls(&mut self, now: Instant) -> Result<(), TransportError> {
        loop {
            let mut out = Vec::new();
            let keys = self.keys.tls.write_handshake(&mut out);
            if !out.is_empty() {
                self.spaces[self.keys.write_level].crypto_send.write(&out);
            }
            match keys {
                None => break,
                Some(k) => self.keys.install(k),
            }
        }
        // A resuming client's TLS session offers the parameters remembered with the ticket
        // until the server's EncryptedExtensions replace them; they are the server's own only
        // once its Finished was read, which is when the 1-RTT keys come (RFC 9000 §7.4.1).
        let params_final = self.side == Side::Server || self.keys.has(SpaceId::Data);
        if self.handshake.peer_params.is_none() && params_final {
            if let Some(bytes) = self.keys.tls.peer_transport_params() {
                let params = TransportParameters::decode(bytes, self.side.peer())?;
                self.apply_peer_params(now, params)?;
            }
        }
        if self.state == State::Handshaking && !self.keys.tls.is_handshaking() {
            self.state = State::Established;
            if self.side == Side::Server {
                // RFC 9001 §4.1.2: the server's handshake is confirmed when it completes.
                self.handshake.done_pending = true;
                self.confirm_handshake(now);
            }
            if !self.handshake.connected_reported {
                self.handshake.connected_reported = true;
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
            && params.original_destination_connection_id != Some(self.handshake.original_dcid)
        {
            return Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "original_destination_connection_id does not match"
            ));
        }
        // RFC 9000 §7.3: retry_source_connection_id is the source ID of the Retry the client
        // followed, and absent if there was none.
        if self.side == Side::Client
            && params.retry_source_connection_id != self.handshake.retry.as_ref().map(|r| r.scid)
        {
            return Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "retry_source_connection_id does not match the Retry"
            ));
        }
        if let Some(token) = params
            .stateless_reset_token
            .filter(|_| self.side == Side::Client)
        {
            // RFC 9000 §10.3: the server's token for its handshake ID, checked on every
            // datagram that cannot be processed.
            self.cids.set_remote_reset_token(token);
        }
        self.fec_on_peer_params(&params);
        self.streams.set_peer_params(FlowLimits {
            initial_max_data: params.initial_max_data,
            initial_max_stream_data_bidi_local: params.initial_max_stream_data_bidi_local,
            initial_max_stream_data_bidi_remote: params.initial_max_stream_data_bidi_remote,
            initial_max_stream_data_uni: params.initial_max_stream_data_uni,
            initial_max_streams_bidi: params.initial_max_streams_bidi,
            initial_max_streams_uni: params.initial_max_streams_uni,
        })?;
        // RFC 9000 §10.1: the effective idle timeout is the smaller of the two, zero meaning none.
        self.idle
            .negotiate(Duration::from_millis(params.max_idle_timeout));
        // The probe timeout's bound follows the effective idle timeout (`MaxPto::Auto`).
        let bound = self.config.max_pto.bound(self.idle.timeout());
        self.recovery.loss.set_max_pto(bound, now);
        self.recovery
            .loss
            .set_max_ack_delay(Duration::from_millis(params.max_ack_delay), now);
        self.handshake.peer_ack_delay_exponent = params.ack_delay_exponent.min(20) as u8;
        let peer_max: usize = params.max_udp_payload_size.try_into().unwrap_or(usize::MAX);
        self.path.max_datagram_size = self
            .config
            .max_datagram_size
            .min(peer_max)
            .max(crate::config::MIN_INITIAL_SIZE);
        self.pmtud = self.config.pmtud_max.and_then(|ceiling| {
            super::pmtud::Pmtud::new(self.path.max_datagram_size, ceiling.min(peer_max))
        });
        if let Some(q) = self.qlog.as_mut() {
            q.log(
                now,
                crate::qlog::Event::ParametersSet(crate::qlog::ParametersSet::of(
                    crate::qlog::Owner::Remote,
                    &params,
                )),
            );
        }
        self.handshake.peer_params = Some(params);
        Ok(())
    }

    pub(super) fn confirm_handshake(&mut self, now: Instant) {
        if self.handshake.confirmed {
            return;
        }
        self.handshake.confirmed = true;
        self.recovery.loss.set_handshake_confirmed(now);
        self.discard_space(SpaceId::Handshake, now);
        let limit = self.handshake.active_cid_limit(&self.config);
        self.cids.issue_up_to(limit, &mut self.rng);
    }

    /// RFC 9001 §4.9: keys of a space are gone; its packets no longer count.
    pub(super) fn discard_space(&mut self, space: SpaceId, now: Instant) {
        if !self.keys.discard(space) {
            return;
        }
        let _ = self.recovery.loss.discard_space(space, now);
        let s = &mut self.spaces[space];
        s.probes = 0;
        s.on_ack_sent();
    }
}
