//! The TLS 1.3 handshake for QUIC (RFC 9001 §4), driven through `rustls::quic`, and the rustls
//! configurations the transport uses.
//!
//! TLS key logs: pass `Some(Arc::new(rustls::KeyLogFile::new()))` as `key_log` to
//! [`client_config`] or [`server_config`]; rustls then appends secrets to the file named by the
//! `SSLKEYLOGFILE` environment variable (and does nothing when it is unset), which Wireshark
//! reads to decrypt captures. This module does no file IO itself.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, KeyLog, ServerConfig, SignatureScheme};

use crate::crypto::{Keys, OneRttKeys, Side};
use crate::error::{Error, TransportError, TransportErrorCode};

/// How a client checks the server's certificate.
#[derive(Clone, Debug)]
pub enum ServerVerification {
    /// WebPKI path validation against these trust anchors (a self-signed certificate can be its
    /// own anchor), including the server name.
    Roots(Vec<CertificateDer<'static>>),
    /// Accept any certificate and name. The handshake signature is still checked against the
    /// certificate's key, but nothing ties that key to the server: for tests and interop only.
    Insecure,
}

/// Keys that became available during the handshake (RFC 9001 §4.1.4).
#[derive(Debug)]
pub enum NewKeys {
    /// Handshake-level keys.
    Handshake(Keys),
    /// 1-RTT keys, key phase 0 (boxed: they carry the secrets for later key updates).
    OneRtt(Box<OneRttKeys>),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// RFC 9001 §4.2: QUIC requires TLS 1.3.
const TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

fn alpn_list(alpn: &[&[u8]]) -> Vec<Vec<u8>> {
    alpn.iter().map(|p| p.to_vec()).collect()
}

fn tls_error(context: &str, e: impl std::fmt::Display) -> Error {
    Error::Tls(format!("{context}: {e}"))
}

/// A client configuration: TLS 1.3 only, ring, the given ALPN protocols, no 0-RTT.
pub fn client_config(
    alpn: &[&[u8]],
    verify: ServerVerification,
    key_log: Option<Arc<dyn KeyLog>>,
) -> Result<ClientConfig, Error> {
    client_config_with(provider(), alpn, verify, key_log)
}

pub(crate) fn client_config_with(
    provider: Arc<CryptoProvider>,
    alpn: &[&[u8]],
    verify: ServerVerification,
    key_log: Option<Arc<dyn KeyLog>>,
) -> Result<ClientConfig, Error> {
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(TLS13_ONLY)
        .map_err(|e| tls_error("client config", e))?;
    let mut config = match verify {
        ServerVerification::Roots(certs) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certs {
                roots.add(cert).map_err(|e| tls_error("trust anchor", e))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        ServerVerification::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
            .with_no_client_auth(),
    };
    config.alpn_protocols = alpn_list(alpn);
    // RFC 9001 §4.6: no 0-RTT in this transport.
    config.enable_early_data = false;
    if let Some(key_log) = key_log {
        config.key_log = key_log;
    }
    Ok(config)
}

/// A server configuration: TLS 1.3 only, ring, one certificate chain, the given ALPN protocols
/// (a client offering none of them is refused with no_application_protocol, RFC 9001 §8.1), no
/// 0-RTT.
pub fn server_config(
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[&[u8]],
    key_log: Option<Arc<dyn KeyLog>>,
) -> Result<ServerConfig, Error> {
    server_config_with(provider(), cert_chain, key, alpn, key_log)
}

pub(crate) fn server_config_with(
    provider: Arc<CryptoProvider>,
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[&[u8]],
    key_log: Option<Arc<dyn KeyLog>>,
) -> Result<ServerConfig, Error> {
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(TLS13_ONLY)
        .map_err(|e| tls_error("server config", e))?
        .with_no_client_auth()
        .with_single_cert(cert_chain, key)
        .map_err(|e| tls_error("server certificate", e))?;
    config.alpn_protocols = alpn_list(alpn);
    // rustls::quic accepts only 0 or 2^32-1 here; 0 disables 0-RTT (RFC 9001 §4.6.1).
    config.max_early_data_size = 0;
    if let Some(key_log) = key_log {
        config.key_log = key_log;
    }
    Ok(config)
}

/// A self-signed certificate for `names` (DNS names or IP addresses) and its PKCS#8 key.
/// Behind the `self-signed` feature, so embedders that bring their own certificates do not
/// build rcgen.
#[cfg(feature = "self-signed")]
pub fn self_signed(
    names: &[&str],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let certified =
        rcgen::generate_simple_self_signed(names).map_err(|e| tls_error("self-signed", e))?;
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der());
    Ok((vec![certified.cert.der().clone()], key.into()))
}

/// Accepts any server certificate, but still verifies handshake signatures with it.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// One endpoint's TLS handshake.
///
/// The connection moves handshake bytes between this and CRYPTO frames, one encryption level at a
/// time (RFC 9001 §4.1.3):
///
/// - [`Self::read_handshake`] with the in-order CRYPTO data of one level (never mixing levels in a
///   call);
/// - then, after every such call, [`Self::write_handshake`] in a loop: bytes it appends belong to
///   the current send level; when it returns [`NewKeys`], install them, send further output at
///   the new level, and call it again until it returns `None` having appended nothing. Do not
///   defer this loop: the keys needed to read the peer's next level come out of it (a client gets
///   Handshake keys right after the ServerHello), and rustls only separates output by level
///   correctly when drained after each read.
pub struct TlsSession {
    conn: rustls::quic::Connection,
    side: Side,
}

impl std::fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSession")
            .field("side", &self.side)
            .field("handshaking", &self.is_handshaking())
            .finish_non_exhaustive()
    }
}

impl TlsSession {
    /// Starts a client handshake to `server_name` (DNS name or IP address), sending our encoded
    /// transport parameters (RFC 9000 §18) in the quic_transport_parameters extension.
    pub fn client(
        config: Arc<ClientConfig>,
        server_name: &str,
        transport_params: Vec<u8>,
    ) -> Result<Self, Error> {
        let name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| tls_error("server name", e))?;
        let conn = rustls::quic::ClientConnection::new(
            config,
            rustls::quic::Version::V1,
            name,
            transport_params,
        )
        .map_err(|e| tls_error("client", e))?;
        Ok(Self {
            conn: conn.into(),
            side: Side::Client,
        })
    }

    /// Starts a server handshake, sending our encoded transport parameters.
    pub fn server(config: Arc<ServerConfig>, transport_params: Vec<u8>) -> Result<Self, Error> {
        let conn = rustls::quic::ServerConnection::new(
            config,
            rustls::quic::Version::V1,
            transport_params,
        )
        .map_err(|e| tls_error("server", e))?;
        Ok(Self {
            conn: conn.into(),
            side: Side::Server,
        })
    }

    /// Feeds handshake bytes received in CRYPTO frames of one encryption level.
    ///
    /// A TLS failure becomes CRYPTO_ERROR 0x100 + the TLS alert (RFC 9001 §4.8); a failure without
    /// an alert becomes PROTOCOL_VIOLATION if the peer's messages were at fault, INTERNAL_ERROR
    /// otherwise.
    pub fn read_handshake(&mut self, data: &[u8]) -> Result<(), TransportError> {
        self.conn.read_hs(data).map_err(|e| {
            let code = match self.conn.alert() {
                Some(alert) => TransportErrorCode::crypto(u8::from(alert)),
                None => match e {
                    rustls::Error::InappropriateMessage { .. }
                    | rustls::Error::InappropriateHandshakeMessage { .. }
                    | rustls::Error::InvalidMessage(_)
                    | rustls::Error::PeerIncompatible(_)
                    | rustls::Error::PeerMisbehaved(_)
                    | rustls::Error::AlertReceived(_) => TransportErrorCode::PROTOCOL_VIOLATION,
                    _ => TransportErrorCode::INTERNAL_ERROR,
                },
            };
            TransportError::new(code, format!("TLS: {e}"))
        })
    }

    /// Appends handshake bytes to send at the current level; returns the keys of the next level
    /// when they become available (see the type's documentation for the loop).
    #[must_use = "new keys must be installed"]
    pub fn write_handshake(&mut self, out: &mut Vec<u8>) -> Option<NewKeys> {
        self.conn.write_hs(out).map(|change| match change {
            rustls::quic::KeyChange::Handshake { keys } => NewKeys::Handshake(keys.into()),
            rustls::quic::KeyChange::OneRtt { keys, next } => {
                NewKeys::OneRtt(Box::new(OneRttKeys::new(keys, next)))
            }
        })
    }

    /// Whether the handshake is still running (RFC 9001 §4.1.1: false once complete).
    #[must_use]
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The peer's encoded transport parameters, once received.
    #[must_use]
    pub fn peer_transport_params(&self) -> Option<&[u8]> {
        self.conn.quic_transport_parameters()
    }

    /// The negotiated application protocol.
    #[must_use]
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// The peer's certificate chain, once received.
    #[must_use]
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.conn.peer_certificates()
    }

    #[must_use]
    pub fn side(&self) -> Side {
        self.side
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALPN: &[u8] = b"hq-interop";

    /// One side of an in-memory handshake: the session, the keys it produced and its output,
    /// tagged with the encryption level (0 Initial, 1 Handshake, 2 1-RTT).
    #[derive(Debug)]
    struct Peer {
        tls: TlsSession,
        level: usize,
        handshake: Option<Keys>,
        one_rtt: Option<Box<OneRttKeys>>,
        sent: [usize; 3],
        outbox: Vec<(usize, Vec<u8>)>,
    }

    impl Peer {
        fn new(tls: TlsSession) -> Self {
            Self {
                tls,
                level: 0,
                handshake: None,
                one_rtt: None,
                sent: [0; 3],
                outbox: Vec::new(),
            }
        }

        /// Collects everything the session wants to send, switching level on new keys, as a
        /// connection does after every read.
        fn drain(&mut self) {
            loop {
                let mut out = Vec::new();
                let keys = self.tls.write_handshake(&mut out);
                if !out.is_empty() {
                    self.sent[self.level] += out.len();
                    self.outbox.push((self.level, out.clone()));
                }
                match keys {
                    Some(NewKeys::Handshake(k)) => {
                        assert_eq!(self.level, 0, "handshake keys after Initial");
                        self.handshake = Some(k);
                        self.level = 1;
                    }
                    Some(NewKeys::OneRtt(k)) => {
                        assert_eq!(self.level, 1, "1-RTT keys after handshake keys");
                        self.one_rtt = Some(k);
                        self.level = 2;
                    }
                    None if out.is_empty() => return,
                    None => {}
                }
            }
        }

        /// Delivers our output to `to`, one level's chunk per call as CRYPTO frames would.
        fn deliver(&mut self, to: &mut Self) -> Result<bool, TransportError> {
            let outbox = std::mem::take(&mut self.outbox);
            let moved = !outbox.is_empty();
            for (level, data) in outbox {
                // The receiver can only decrypt packets of a level it has keys for.
                assert!(to.level >= level, "data at level {level} arrived too early");
                to.tls.read_handshake(&data)?;
                to.drain();
            }
            Ok(moved)
        }
    }

    /// Runs the handshake to completion or to the first error.
    fn handshake(client: TlsSession, server: TlsSession) -> Result<(Peer, Peer), TransportError> {
        let (mut c, mut s) = (Peer::new(client), Peer::new(server));
        c.drain();
        for _ in 0..10 {
            let moved = c.deliver(&mut s)? | s.deliver(&mut c)?;
            if !moved {
                return Ok((c, s));
            }
        }
        panic!("handshake did not settle");
    }

    fn server_session(params: &[u8]) -> (TlsSession, Vec<CertificateDer<'static>>) {
        let (chain, key) = self_signed(&["localhost"]).unwrap();
        let config = server_config(chain.clone(), key, &[ALPN], None).unwrap();
        (
            TlsSession::server(Arc::new(config), params.to_vec()).unwrap(),
            chain,
        )
    }

    fn client_session(verify: ServerVerification, params: &[u8]) -> TlsSession {
        let config = client_config(&[ALPN], verify, None).unwrap();
        TlsSession::client(Arc::new(config), "localhost", params.to_vec()).unwrap()
    }

    fn short_packet(pn_byte: u8, payload: &[u8]) -> (Vec<u8>, usize) {
        // Short header, 1-byte packet number, 4-byte connection ID.
        let mut buf = vec![0x40, 1, 2, 3, 4, pn_byte];
        buf.extend_from_slice(payload);
        (buf, 5)
    }

    fn send(keys: &OneRttKeys, pn: u64, payload: &[u8]) -> Vec<u8> {
        let (mut buf, pn_offset) = short_packet(pn as u8, payload);
        keys.seal(pn, &mut buf, pn_offset, 1).unwrap();
        buf
    }

    fn receive(
        keys: &mut OneRttKeys,
        pn: u64,
        mut packet: Vec<u8>,
    ) -> Result<(Vec<u8>, bool), Error> {
        let (pn_len, truncated) = keys.unprotect_header(&mut packet, 5)?;
        assert_eq!((pn_len, truncated), (1, pn & 0xff));
        let opened = keys.open(pn, &mut packet, 5 + pn_len)?;
        Ok((opened.payload.to_vec(), opened.peer_updated))
    }

    #[test]
    fn full_handshake_exchanges_params_and_keys() {
        let (server, chain) = server_session(b"server-params");
        let client = client_session(ServerVerification::Roots(chain), b"client-params");
        assert_eq!(client.side(), Side::Client);
        assert_eq!(server.side(), Side::Server);
        assert!(client.is_handshaking() && server.is_handshaking());

        let (mut c, mut s) = handshake(client, server).unwrap();
        let (client, server) = (&c.tls, &s.tls);

        assert!(!client.is_handshaking() && !server.is_handshaking());
        assert_eq!(client.peer_transport_params(), Some(&b"server-params"[..]));
        assert_eq!(server.peer_transport_params(), Some(&b"client-params"[..]));
        assert_eq!(client.alpn(), Some(ALPN));
        assert_eq!(server.alpn(), Some(ALPN));
        assert!(client.peer_certificates().is_some_and(|c| c.len() == 1));
        // ClientHello at Initial, the server's flight at Initial and Handshake, client Finished at
        // Handshake, the server's session ticket at 1-RTT.
        assert!(c.sent[0] > 0 && c.sent[1] > 0);
        assert!(s.sent[0] > 0 && s.sent[1] > 0 && s.sent[2] > 0);
        assert_eq!(c.sent[2], 0);

        // Handshake keys work across.
        let (ch, sh) = (c.handshake.take().unwrap(), s.handshake.take().unwrap());
        let mut buf = vec![0xe1, 0, 0, 0, 1, 0, 0, 0, 0x02];
        buf.extend_from_slice(b"handshake payload");
        let plain = buf.clone();
        ch.local.seal(2, &mut buf, 7, 2).unwrap();
        let (pn_len, pn) = sh.remote.unprotect_header(&mut buf, 7).unwrap();
        assert_eq!((pn_len, pn), (2, 2));
        assert_eq!(sh.remote.open(2, &mut buf, 9).unwrap(), &plain[9..]);

        // 1-RTT both ways.
        let (mut c1, mut s1) = (c.one_rtt.take().unwrap(), s.one_rtt.take().unwrap());
        assert!(!c1.key_phase() && !s1.key_phase());
        assert_eq!(c1.tag_len(), 16);
        let p = send(&c1, 0, b"hello server");
        assert_eq!(
            receive(&mut s1, 0, p).unwrap(),
            (b"hello server".to_vec(), false)
        );
        let p = send(&s1, 0, b"hello client");
        assert_eq!(
            receive(&mut c1, 0, p).unwrap(),
            (b"hello client".to_vec(), false)
        );
    }

    fn one_rtt_pair() -> (Box<OneRttKeys>, Box<OneRttKeys>) {
        let (server, _) = server_session(b"s");
        let client = client_session(ServerVerification::Insecure, b"c");
        let (c, s) = handshake(client, server).unwrap();
        (c.one_rtt.unwrap(), s.one_rtt.unwrap())
    }

    #[test]
    fn key_update_round_trip() {
        let (mut client, mut server) = one_rtt_pair();
        let before = send(&client, 1, b"old phase, sent before the update");
        let from_server_before = send(&server, 5, b"server, old phase");

        client.initiate_update();
        assert!(client.key_phase());
        assert!(client.has_previous_remote());
        let p = send(&client, 2, b"new phase");
        let mut peek = p.clone();
        server.unprotect_header(&mut peek, 5).unwrap();
        assert_ne!(peek[0] & 0x04, 0, "sealed with the Key Phase bit set");

        // The server tries the next key, it authenticates, the update commits.
        assert_eq!(
            receive(&mut server, 2, p).unwrap(),
            (b"new phase".to_vec(), true)
        );
        assert!(server.key_phase());
        assert!(server.has_previous_remote());
        // A packet of the old phase reordered behind the update still opens with the kept key,
        // and does not move the phase back.
        assert_eq!(
            receive(&mut server, 1, before.clone()).unwrap(),
            (b"old phase, sent before the update".to_vec(), false)
        );
        assert!(server.key_phase());

        // The server answers in the new phase; its older packet, reordered, still opens.
        let p = send(&server, 6, b"answer");
        assert_eq!(
            receive(&mut client, 6, p).unwrap(),
            (b"answer".to_vec(), false)
        );
        assert_eq!(
            receive(&mut client, 5, from_server_before).unwrap(),
            (b"server, old phase".to_vec(), false)
        );
        assert!(client.key_phase());

        // After dropping the previous key, old-phase packets are rejected and change nothing.
        server.drop_previous_remote();
        assert!(!server.has_previous_remote());
        assert!(matches!(
            receive(&mut server, 1, before),
            Err(Error::Decrypt)
        ));
        assert!(
            server.key_phase(),
            "a failed packet must not move the phase"
        );

        // A second update, now initiated by the server.
        server.initiate_update();
        assert!(!server.key_phase());
        let p = send(&server, 7, b"second update");
        assert_eq!(
            receive(&mut client, 7, p).unwrap(),
            (b"second update".to_vec(), true)
        );
        assert!(!client.key_phase());
        let p = send(&client, 8, b"both in phase 0 again");
        assert_eq!(
            receive(&mut server, 8, p).unwrap(),
            (b"both in phase 0 again".to_vec(), false)
        );
    }

    #[test]
    fn forged_key_phase_does_not_update() {
        let (client, mut server) = one_rtt_pair();
        // Flip the Key Phase bit under header protection: the header (AAD) then disagrees, the
        // next key fails, and nothing changes.
        let mut p = send(&client, 3, b"payload");
        let (pn_len, _) = server.unprotect_header(&mut p, 5).unwrap();
        p[0] ^= 0x04;
        assert!(matches!(
            server.open(3, &mut p, 5 + pn_len),
            Err(Error::Decrypt)
        ));
        assert!(!server.key_phase());
        assert!(!server.has_previous_remote());
        let p = send(&client, 4, b"still fine");
        assert_eq!(
            receive(&mut server, 4, p).unwrap(),
            (b"still fine".to_vec(), false)
        );
        // Long headers are refused by 1-RTT keys.
        let mut long = vec![0xc0; 40];
        assert!(client.seal(1, &mut long, 10, 1).is_err());
    }

    #[test]
    fn insecure_accepts_self_signed_but_roots_reject_unknown() {
        let (server, _) = server_session(b"s");
        let client = client_session(ServerVerification::Insecure, b"c");
        let (c, s) = handshake(client, server).unwrap();
        assert!(!c.tls.is_handshaking() && !s.tls.is_handshaking());
        assert!(c.one_rtt.is_some() && s.one_rtt.is_some());

        // Trusting another self-signed certificate: the client refuses the server's. rcgen gives
        // every such certificate the same issuer name, so webpki finds the anchor and the
        // signature check fails: bad signature, alert decrypt_error (51).
        let (other, _) = self_signed(&["localhost"]).unwrap();
        let (server, _) = server_session(b"s");
        let client = client_session(ServerVerification::Roots(other), b"c");
        let err = handshake(client, server).unwrap_err();
        // RFC 9001 §4.8: CRYPTO_ERROR is 0x100 + the TLS alert.
        assert_eq!(err.code, TransportErrorCode::crypto(51), "{err}");
        assert!(err.reason.contains("certificate"), "{err}");

        // A root store without any anchor for it: unknown issuer, alert unknown_ca (48).
        let (server, _) = server_session(b"s");
        let client = client_session(ServerVerification::Roots(Vec::new()), b"c");
        let err = handshake(client, server).unwrap_err();
        assert_eq!(err.code, TransportErrorCode::crypto(48), "{err}");
    }

    #[test]
    fn alpn_mismatch_is_no_application_protocol() {
        let (server, _) = server_session(b"s");
        let config = client_config(&[b"h3"], ServerVerification::Insecure, None).unwrap();
        let client = TlsSession::client(Arc::new(config), "localhost", vec![]).unwrap();
        let err = handshake(client, server).unwrap_err();
        // RFC 9001 §8.1: 0x0178.
        assert_eq!(err.code, TransportErrorCode(0x178));
    }

    #[test]
    fn garbage_handshake_data_is_a_crypto_error() {
        let (mut server, _) = server_session(b"s");
        // A handshake message of type 0xff (unknown), length 3.
        let err = server
            .read_handshake(&[0xff, 0, 0, 3, 1, 2, 3])
            .unwrap_err();
        assert!((0x100..=0x1ff).contains(&err.code.0), "{err}");
        // A ClientHello with a truncated body.
        let (mut server, _) = server_session(b"s");
        let err = server
            .read_handshake(&[0x01, 0, 0, 4, 3, 3, 0, 0])
            .unwrap_err();
        assert!((0x100..=0x1ff).contains(&err.code.0), "{err}");
    }

    #[test]
    fn config_errors_are_reported() {
        assert!(TlsSession::client(
            Arc::new(client_config(&[ALPN], ServerVerification::Insecure, None).unwrap()),
            "not a valid name!",
            vec![]
        )
        .is_err());
        let (chain, _) = self_signed(&["localhost"]).unwrap();
        let (_, other_key) = self_signed(&["localhost"]).unwrap();
        assert!(server_config(chain.clone(), other_key, &[ALPN], None).is_err());
        assert!(client_config(
            &[ALPN],
            ServerVerification::Roots(vec![CertificateDer::from(vec![1, 2, 3])]),
            None
        )
        .is_err());
    }
}
