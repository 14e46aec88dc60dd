//! QUIC transport parameters (RFC 9000 §18), carried in the TLS `quic_transport_parameters`
//! extension.
//!
//! [`TransportParameters::decode`] validates everything that can be checked from the bytes alone
//! (§18.2) and fails with TRANSPORT_PARAMETER_ERROR. What needs connection state is left to the
//! connection: that `initial_source_connection_id`, `original_destination_connection_id` and
//! `retry_source_connection_id` are present and match the CIDs seen on the wire (§7.3).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

use crate::cid::{ConnectionId, StatelessResetToken, MAX_CID_LEN};
use crate::coding::{varint_size, BufMutExt, Reader};
use crate::error::{transport_err, Error, TransportError};
use crate::frame::MAX_STREAM_COUNT;

pub use crate::crypto::Side;

/// Parameter IDs (RFC 9000 §18.2).
mod id {
    pub const ORIGINAL_DESTINATION_CONNECTION_ID: u64 = 0x00;
    pub const MAX_IDLE_TIMEOUT: u64 = 0x01;
    pub const STATELESS_RESET_TOKEN: u64 = 0x02;
    pub const MAX_UDP_PAYLOAD_SIZE: u64 = 0x03;
    pub const INITIAL_MAX_DATA: u64 = 0x04;
    pub const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
    pub const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
    pub const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
    pub const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
    pub const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
    pub const ACK_DELAY_EXPONENT: u64 = 0x0a;
    pub const MAX_ACK_DELAY: u64 = 0x0b;
    pub const DISABLE_ACTIVE_MIGRATION: u64 = 0x0c;
    pub const PREFERRED_ADDRESS: u64 = 0x0d;
    pub const ACTIVE_CONNECTION_ID_LIMIT: u64 = 0x0e;
    pub const INITIAL_SOURCE_CONNECTION_ID: u64 = 0x0f;
    pub const RETRY_SOURCE_CONNECTION_ID: u64 = 0x10;
    /// RFC 9221 §3: the largest DATAGRAM frame the sender accepts.
    pub const MAX_DATAGRAM_FRAME_SIZE: u64 = 0x20;
    /// recoup's FEC extension (docs/FEC.md): the sender decodes REPAIR frames.
    pub const RECOUP_FEC: u64 = crate::fec::TRANSPORT_PARAMETER_ID;
}

/// The smallest max_udp_payload_size allowed (§18.2).
pub const MIN_UDP_PAYLOAD_SIZE: u64 = 1200;
/// The largest ack_delay_exponent allowed (§18.2).
pub const MAX_ACK_DELAY_EXPONENT: u64 = 20;
/// max_ack_delay must be below this many milliseconds (§18.2).
pub const MAX_ACK_DELAY_LIMIT_MS: u64 = 1 << 14;

/// A server's preferred address (§18.2, §9.6). An all-zero address and port on the wire means
/// that family is not offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreferredAddress {
    pub ipv4: Option<SocketAddrV4>,
    pub ipv6: Option<SocketAddrV6>,
    /// 1 to 20 bytes.
    pub connection_id: ConnectionId,
    pub stateless_reset_token: StatelessResetToken,
}

/// An endpoint's transport parameters. [`Default`] gives the RFC 9000 §18.2 defaults, which is
/// also what an absent parameter means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportParameters {
    /// Server only.
    pub original_destination_connection_id: Option<ConnectionId>,
    /// Milliseconds; 0 means no idle timeout.
    pub max_idle_timeout: u64,
    /// Server only.
    pub stateless_reset_token: Option<StatelessResetToken>,
    pub max_udp_payload_size: u64,
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    pub ack_delay_exponent: u64,
    /// Milliseconds.
    pub max_ack_delay: u64,
    pub disable_active_migration: bool,
    /// Server only.
    pub preferred_address: Option<PreferredAddress>,
    pub active_connection_id_limit: u64,
    pub initial_source_connection_id: Option<ConnectionId>,
    /// Server only, after a Retry.
    pub retry_source_connection_id: Option<ConnectionId>,
    /// `recoup_fec`: this endpoint decodes REPAIR frames (recoup's FEC extension).
    pub recoup_fec: bool,
    /// RFC 9221 §3: the largest DATAGRAM frame (type, length and data) this endpoint accepts;
    /// 0, the default when absent, means it accepts none.
    pub max_datagram_frame_size: u64,
}

impl Default for TransportParameters {
    fn default() -> Self {
        Self {
            original_destination_connection_id: None,
            max_idle_timeout: 0,
            stateless_reset_token: None,
            max_udp_payload_size: 65_527,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            ack_delay_exponent: 3,
            max_ack_delay: 25,
            disable_active_migration: false,
            preferred_address: None,
            active_connection_id_limit: 2,
            initial_source_connection_id: None,
            retry_source_connection_id: None,
            recoup_fec: false,
            max_datagram_frame_size: 0,
        }
    }
}

impl TransportParameters {
    /// Decode and validate the peer's parameters. `sender` is the peer's role: a client sending a
    /// server-only parameter is an error (§18.2). Unknown IDs, including the reserved
    /// `31 * N + 27` ones (§18.1), are skipped.
    pub fn decode(bytes: &[u8], sender: Side) -> Result<Self, TransportError> {
        let mut params = Self::default();
        let mut seen = BTreeSet::new();
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let id = r.varint("transport parameter id").map_err(param_err)?;
            let value = r
                .length_prefixed("transport parameter value")
                .map_err(param_err)?;
            // §18.2: duplicates SHOULD be a TRANSPORT_PARAMETER_ERROR.
            if !seen.insert(id) {
                return Err(transport_err!(
                    TRANSPORT_PARAMETER_ERROR,
                    "transport parameter 0x{id:x} repeated"
                ));
            }
            params.decode_one(id, value, sender)?;
        }
        Ok(params)
    }

    fn decode_one(&mut self, id: u64, value: &[u8], sender: Side) -> Result<(), TransportError> {
        let server_only = matches!(
            id,
            id::ORIGINAL_DESTINATION_CONNECTION_ID
                | id::STATELESS_RESET_TOKEN
                | id::PREFERRED_ADDRESS
                | id::RETRY_SOURCE_CONNECTION_ID
        );
        if server_only && sender == Side::Client {
            return Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "client sent server-only transport parameter 0x{id:x}"
            ));
        }
        let mut r = Reader::new(value);
        let r = &mut r;
        match id {
            id::ORIGINAL_DESTINATION_CONNECTION_ID => {
                self.original_destination_connection_id = Some(cid(r.rest())?);
            }
            id::MAX_IDLE_TIMEOUT => self.max_idle_timeout = varint(r, "max_idle_timeout")?,
            id::STATELESS_RESET_TOKEN => {
                self.stateless_reset_token =
                    Some(r.array("stateless_reset_token").map_err(param_err)?);
            }
            id::MAX_UDP_PAYLOAD_SIZE => {
                let v = varint(r, "max_udp_payload_size")?;
                if v < MIN_UDP_PAYLOAD_SIZE {
                    return Err(invalid("max_udp_payload_size", v));
                }
                self.max_udp_payload_size = v;
            }
            id::INITIAL_MAX_DATA => self.initial_max_data = varint(r, "initial_max_data")?,
            id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => {
                self.initial_max_stream_data_bidi_local = varint(r, "initial_max_stream_data")?;
            }
            id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => {
                self.initial_max_stream_data_bidi_remote = varint(r, "initial_max_stream_data")?;
            }
            id::INITIAL_MAX_STREAM_DATA_UNI => {
                self.initial_max_stream_data_uni = varint(r, "initial_max_stream_data")?;
            }
            id::INITIAL_MAX_STREAMS_BIDI | id::INITIAL_MAX_STREAMS_UNI => {
                let v = varint(r, "initial_max_streams")?;
                // §4.6: more than 2^60 streams is a TRANSPORT_PARAMETER_ERROR here.
                if v > MAX_STREAM_COUNT {
                    return Err(invalid("initial_max_streams", v));
                }
                if id == id::INITIAL_MAX_STREAMS_BIDI {
                    self.initial_max_streams_bidi = v;
                } else {
                    self.initial_max_streams_uni = v;
                }
            }
            id::ACK_DELAY_EXPONENT => {
                let v = varint(r, "ack_delay_exponent")?;
                if v > MAX_ACK_DELAY_EXPONENT {
                    return Err(invalid("ack_delay_exponent", v));
                }
                self.ack_delay_exponent = v;
            }
            id::MAX_ACK_DELAY => {
                let v = varint(r, "max_ack_delay")?;
                if v >= MAX_ACK_DELAY_LIMIT_MS {
                    return Err(invalid("max_ack_delay", v));
                }
                self.max_ack_delay = v;
            }
            id::DISABLE_ACTIVE_MIGRATION => self.disable_active_migration = true,
            id::RECOUP_FEC => self.recoup_fec = true,
            id::MAX_DATAGRAM_FRAME_SIZE => {
                self.max_datagram_frame_size = varint(r, "max_datagram_frame_size")?;
            }
            id::PREFERRED_ADDRESS => {
                self.preferred_address = Some(preferred_address(r).map_err(param_err)?);
            }
            id::ACTIVE_CONNECTION_ID_LIMIT => {
                let v = varint(r, "active_connection_id_limit")?;
                if v < 2 {
                    return Err(invalid("active_connection_id_limit", v));
                }
                self.active_connection_id_limit = v;
            }
            id::INITIAL_SOURCE_CONNECTION_ID => {
                self.initial_source_connection_id = Some(cid(r.rest())?);
            }
            id::RETRY_SOURCE_CONNECTION_ID => {
                self.retry_source_connection_id = Some(cid(r.rest())?);
            }
            // §18.1: unknown parameters are ignored.
            _ => return Ok(()),
        }
        if r.is_empty() {
            Ok(())
        } else {
            Err(transport_err!(
                TRANSPORT_PARAMETER_ERROR,
                "transport parameter 0x{id:x} has {} trailing bytes",
                r.remaining()
            ))
        }
    }

    /// Append the parameters that differ from the defaults (and every CID or token present).
    ///
    /// # Panics
    /// If a value exceeds 2^62-1 or a preferred address has an empty CID.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let d = Self::default();
        let cids = [
            (
                id::ORIGINAL_DESTINATION_CONNECTION_ID,
                &self.original_destination_connection_id,
            ),
            (
                id::INITIAL_SOURCE_CONNECTION_ID,
                &self.initial_source_connection_id,
            ),
            (
                id::RETRY_SOURCE_CONNECTION_ID,
                &self.retry_source_connection_id,
            ),
        ];
        for (id, cid) in cids {
            if let Some(cid) = cid {
                put_param(buf, id, cid);
            }
        }
        if let Some(token) = &self.stateless_reset_token {
            put_param(buf, id::STATELESS_RESET_TOKEN, token);
        }
        let ints = [
            (
                id::MAX_IDLE_TIMEOUT,
                self.max_idle_timeout,
                d.max_idle_timeout,
            ),
            (
                id::MAX_UDP_PAYLOAD_SIZE,
                self.max_udp_payload_size,
                d.max_udp_payload_size,
            ),
            (
                id::INITIAL_MAX_DATA,
                self.initial_max_data,
                d.initial_max_data,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL,
                self.initial_max_stream_data_bidi_local,
                d.initial_max_stream_data_bidi_local,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE,
                self.initial_max_stream_data_bidi_remote,
                d.initial_max_stream_data_bidi_remote,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_UNI,
                self.initial_max_stream_data_uni,
                d.initial_max_stream_data_uni,
            ),
            (
                id::INITIAL_MAX_STREAMS_BIDI,
                self.initial_max_streams_bidi,
                d.initial_max_streams_bidi,
            ),
            (
                id::INITIAL_MAX_STREAMS_UNI,
                self.initial_max_streams_uni,
                d.initial_max_streams_uni,
            ),
            (
                id::ACK_DELAY_EXPONENT,
                self.ack_delay_exponent,
                d.ack_delay_exponent,
            ),
            (id::MAX_ACK_DELAY, self.max_ack_delay, d.max_ack_delay),
            (
                id::ACTIVE_CONNECTION_ID_LIMIT,
                self.active_connection_id_limit,
                d.active_connection_id_limit,
            ),
            // RFC 9221 §3: 0 (no DATAGRAM support) is the absent parameter's meaning; not sent.
            (
                id::MAX_DATAGRAM_FRAME_SIZE,
                self.max_datagram_frame_size,
                d.max_datagram_frame_size,
            ),
        ];
        for (id, value, default) in ints {
            if value != default {
                buf.put_varint(id);
                buf.put_varint(varint_size(value) as u64);
                buf.put_varint(value);
            }
        }
        if self.disable_active_migration {
            put_param(buf, id::DISABLE_ACTIVE_MIGRATION, &[]);
        }
        if self.recoup_fec {
            put_param(buf, id::RECOUP_FEC, &[]);
        }
        if let Some(pa) = &self.preferred_address {
            assert!(
                !pa.connection_id.is_empty(),
                "preferred address with an empty CID"
            );
            let mut v = Vec::with_capacity(41 + pa.connection_id.len());
            let v4 = pa
                .ipv4
                .unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
            v.put_bytes(&v4.ip().octets());
            v.put_u16(v4.port());
            let v6 = pa
                .ipv6
                .unwrap_or(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0));
            v.put_bytes(&v6.ip().octets());
            v.put_u16(v6.port());
            v.put_u8(pa.connection_id.len() as u8);
            v.put_bytes(&pa.connection_id);
            v.put_bytes(&pa.stateless_reset_token);
            put_param(buf, id::PREFERRED_ADDRESS, &v);
        }
    }
}

fn put_param(buf: &mut Vec<u8>, id: u64, value: &[u8]) {
    buf.put_varint(id);
    buf.put_varint(value.len() as u64);
    buf.put_bytes(value);
}

fn param_err(e: Error) -> TransportError {
    transport_err!(TRANSPORT_PARAMETER_ERROR, "{e}")
}

fn invalid(name: &str, value: u64) -> TransportError {
    transport_err!(TRANSPORT_PARAMETER_ERROR, "invalid {name} {value}")
}

fn varint(r: &mut Reader<'_>, what: &'static str) -> Result<u64, TransportError> {
    r.varint(what).map_err(param_err)
}

fn cid(bytes: &[u8]) -> Result<ConnectionId, TransportError> {
    ConnectionId::new(bytes).map_err(param_err)
}

fn preferred_address(r: &mut Reader<'_>) -> Result<PreferredAddress, Error> {
    let ip4 = Ipv4Addr::from(r.array::<4>("preferred address ipv4")?);
    let port4 = r.u16("preferred address ipv4 port")?;
    let ip6 = Ipv6Addr::from(r.array::<16>("preferred address ipv6")?);
    let port6 = r.u16("preferred address ipv6 port")?;
    let len = usize::from(r.u8("preferred address connection id")?);
    // §18.2: a zero-length CID here is a TRANSPORT_PARAMETER_ERROR.
    if len == 0 || len > MAX_CID_LEN {
        return Err(Error::invalid(
            "preferred address connection id",
            format!("length {len}"),
        ));
    }
    let connection_id = ConnectionId::new(r.bytes(len, "preferred address connection id")?)?;
    let stateless_reset_token = r.array("preferred address stateless reset token")?;
    Ok(PreferredAddress {
        ipv4: (!ip4.is_unspecified() || port4 != 0).then(|| SocketAddrV4::new(ip4, port4)),
        ipv6: (!ip6.is_unspecified() || port6 != 0).then(|| SocketAddrV6::new(ip6, port6, 0, 0)),
        connection_id,
        stateless_reset_token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;

    fn full() -> TransportParameters {
        TransportParameters {
            original_destination_connection_id: Some(ConnectionId::new(&[1; 8]).unwrap()),
            max_idle_timeout: 30_000,
            stateless_reset_token: Some([7; 16]),
            max_udp_payload_size: 1452,
            initial_max_data: 1 << 20,
            initial_max_stream_data_bidi_local: 1 << 16,
            initial_max_stream_data_bidi_remote: 1 << 17,
            initial_max_stream_data_uni: 1 << 18,
            initial_max_streams_bidi: 100,
            initial_max_streams_uni: MAX_STREAM_COUNT,
            ack_delay_exponent: 20,
            max_ack_delay: (1 << 14) - 1,
            disable_active_migration: true,
            preferred_address: Some(PreferredAddress {
                ipv4: Some("192.0.2.1:4433".parse().unwrap()),
                ipv6: None,
                connection_id: ConnectionId::new(&[9; 20]).unwrap(),
                stateless_reset_token: [3; 16],
            }),
            active_connection_id_limit: 8,
            initial_source_connection_id: Some(ConnectionId::EMPTY),
            retry_source_connection_id: Some(ConnectionId::new(&[2; 4]).unwrap()),
            recoup_fec: true,
            max_datagram_frame_size: 65_535,
        }
    }

    #[test]
    fn max_datagram_frame_size_is_a_varint_sent_only_when_nonzero() {
        // RFC 9221 §3: parameter 0x20, a varint; absent means 0, no DATAGRAM support.
        let p = TransportParameters::decode(&int_param(0x20, 1200), Side::Client).unwrap();
        assert_eq!(p.max_datagram_frame_size, 1200);
        let datagrams = TransportParameters {
            max_datagram_frame_size: 65_535,
            ..TransportParameters::default()
        };
        assert_eq!(encode(&datagrams), int_param(0x20, 65_535));
        assert!(encode(&TransportParameters::default()).is_empty());
        assert_param_error(&param(0x20, &[]), Side::Server);
        assert_param_error(&param(0x20, &[0x05, 0]), Side::Client);
    }

    #[test]
    fn recoup_fec_is_an_empty_private_parameter() {
        let id = id::RECOUP_FEC;
        // Not a greasing codepoint (RFC 9000 §18.1), which a peer would read as meaningless.
        assert_ne!(id % 31, 27);
        let p = TransportParameters::decode(&param(id, &[]), Side::Client).unwrap();
        assert!(p.recoup_fec);
        let fec_only = TransportParameters {
            recoup_fec: true,
            ..TransportParameters::default()
        };
        assert_eq!(encode(&fec_only), param(id, &[]));
        assert_param_error(&param(id, &[1]), Side::Server);
    }

    fn encode(p: &TransportParameters) -> Vec<u8> {
        let mut buf = Vec::new();
        p.encode(&mut buf);
        buf
    }

    fn param(id: u64, value: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        put_param(&mut buf, id, value);
        buf
    }

    fn int_param(id: u64, value: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.put_varint(value);
        param(id, &v)
    }

    fn assert_param_error(bytes: &[u8], sender: Side) {
        let err = TransportParameters::decode(bytes, sender).unwrap_err();
        assert_eq!(
            err.code,
            TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
            "{err}"
        );
    }

    #[test]
    fn defaults_follow_rfc() {
        let d = TransportParameters::default();
        assert_eq!(d.max_udp_payload_size, 65_527);
        assert_eq!(d.ack_delay_exponent, 3);
        assert_eq!(d.max_ack_delay, 25);
        assert_eq!(d.active_connection_id_limit, 2);
        assert!(encode(&d).is_empty());
        assert_eq!(TransportParameters::decode(&[], Side::Client).unwrap(), d);
    }

    #[test]
    fn every_parameter_round_trips() {
        let p = full();
        assert_eq!(
            TransportParameters::decode(&encode(&p), Side::Server).unwrap(),
            p
        );
        // Each field alone, too, so no field hides behind another.
        let client = TransportParameters {
            initial_source_connection_id: Some(ConnectionId::new(&[5; 3]).unwrap()),
            initial_max_data: 77,
            ..Default::default()
        };
        assert_eq!(
            TransportParameters::decode(&encode(&client), Side::Client).unwrap(),
            client
        );
        let v6_only = TransportParameters {
            preferred_address: Some(PreferredAddress {
                ipv4: None,
                ipv6: Some("[2001:db8::1]:443".parse().unwrap()),
                connection_id: ConnectionId::new(&[1]).unwrap(),
                stateless_reset_token: [0; 16],
            }),
            ..Default::default()
        };
        assert_eq!(
            TransportParameters::decode(&encode(&v6_only), Side::Server).unwrap(),
            v6_only
        );
    }

    #[test]
    fn unknown_and_grease_parameters_are_ignored() {
        let mut bytes = param(31 * 5 + 27, b"grease");
        bytes.extend(param(0x3fff_ffff, &[]));
        bytes.extend(int_param(id::INITIAL_MAX_DATA, 5));
        let p = TransportParameters::decode(&bytes, Side::Client).unwrap();
        assert_eq!(p.initial_max_data, 5);
    }

    #[test]
    fn each_validation_rule_is_a_transport_parameter_error() {
        use Side::*;
        // Duplicates, known and unknown.
        let mut dup = int_param(id::INITIAL_MAX_DATA, 1);
        dup.extend(int_param(id::INITIAL_MAX_DATA, 2));
        assert_param_error(&dup, Server);
        let mut dup = param(0x99, b"");
        dup.extend(param(0x99, b"x"));
        assert_param_error(&dup, Server);
        // Range rules.
        assert_param_error(&int_param(id::MAX_UDP_PAYLOAD_SIZE, 1199), Server);
        assert!(
            TransportParameters::decode(&int_param(id::MAX_UDP_PAYLOAD_SIZE, 1200), Server).is_ok()
        );
        assert_param_error(&int_param(id::ACK_DELAY_EXPONENT, 21), Server);
        assert_param_error(&int_param(id::MAX_ACK_DELAY, 1 << 14), Server);
        assert_param_error(&int_param(id::ACTIVE_CONNECTION_ID_LIMIT, 1), Server);
        assert_param_error(&int_param(id::ACTIVE_CONNECTION_ID_LIMIT, 0), Server);
        assert_param_error(
            &int_param(id::INITIAL_MAX_STREAMS_BIDI, MAX_STREAM_COUNT + 1),
            Server,
        );
        assert_param_error(
            &int_param(id::INITIAL_MAX_STREAMS_UNI, MAX_STREAM_COUNT + 1),
            Client,
        );
        // Server-only parameters from a client.
        let f = full();
        let server_only = [
            TransportParameters {
                original_destination_connection_id: f.original_destination_connection_id,
                ..Default::default()
            },
            TransportParameters {
                stateless_reset_token: f.stateless_reset_token,
                ..Default::default()
            },
            TransportParameters {
                preferred_address: f.preferred_address,
                ..Default::default()
            },
            TransportParameters {
                retry_source_connection_id: f.retry_source_connection_id,
                ..Default::default()
            },
        ];
        for p in server_only {
            let bytes = encode(&p);
            assert_eq!(TransportParameters::decode(&bytes, Server).unwrap(), p);
            assert_param_error(&bytes, Client);
        }
        // Malformed values: wrong token size, trailing bytes, truncation, CID of 21 bytes.
        assert_param_error(&param(id::STATELESS_RESET_TOKEN, &[0; 15]), Server);
        assert_param_error(&param(id::STATELESS_RESET_TOKEN, &[0; 17]), Server);
        assert_param_error(&param(id::MAX_IDLE_TIMEOUT, &[0x01, 0x00]), Server);
        assert_param_error(&param(id::MAX_IDLE_TIMEOUT, &[]), Server);
        assert_param_error(&param(id::INITIAL_SOURCE_CONNECTION_ID, &[0; 21]), Server);
        assert_param_error(&[0x04, 0x05, 0x01], Server);
        assert_param_error(&[0x40], Server);
        assert_param_error(&param(id::DISABLE_ACTIVE_MIGRATION, &[0]), Server);
    }

    #[test]
    fn preferred_address_rules() {
        let good = encode(&full());
        let p = TransportParameters::decode(&good, Side::Server).unwrap();
        let pa = p.preferred_address.unwrap();
        assert_eq!(pa.ipv4.unwrap().port(), 4433);
        assert_eq!(pa.ipv6, None, "all-zero address means not offered");
        // Zero-length CID, CID over 20 bytes, truncation.
        let value = |cid_len: u8, extra: usize| {
            let mut v = vec![0; 4 + 2 + 16 + 2];
            v.push(cid_len);
            v.extend(std::iter::repeat_n(1, usize::from(cid_len) + 16 + extra));
            param(id::PREFERRED_ADDRESS, &v)
        };
        assert!(TransportParameters::decode(&value(4, 0), Side::Server).is_ok());
        assert_param_error(&value(0, 0), Side::Server);
        assert_param_error(&value(21, 0), Side::Server);
        assert_param_error(&value(4, 1), Side::Server);
        let mut short = value(4, 0);
        short.truncate(short.len() - 1);
        assert_param_error(&short, Side::Server);
    }
}
