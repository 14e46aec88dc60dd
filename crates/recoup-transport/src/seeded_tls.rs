//! TLS whose every random choice comes from a seed, for the simulator only.
//!
//! A simulated run must be a pure function of scenario and seed (DESIGN.md principle 3), down to
//! the bytes of each packet. Stock TLS draws client and server randoms, key shares and the
//! certificate key from the operating system. Here they come from a ChaCha stream: the X25519
//! key shares are computed with `x25519-dalek` from seeded secrets, and the certificate is
//! Ed25519 (deterministic signatures) with a key derived from the seed. Never use this outside
//! simulation: the keys are predictable by design.

use std::sync::{Arc, Mutex};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rustls::crypto::{
    ActiveKeyExchange, CryptoProvider, GetRandomFailed, SecureRandom, SharedSecret,
    SupportedKxGroup,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, NamedGroup, ServerConfig};

use crate::error::Error;
use crate::tls::{client_config_with, server_config_with, ServerVerification};

/// Random bytes from a seeded ChaCha stream.
#[derive(Debug)]
struct SeededRandom(Mutex<ChaCha20Rng>);

impl SecureRandom for SeededRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        self.0.lock().map_err(|_| GetRandomFailed)?.fill_bytes(buf);
        Ok(())
    }
}

/// X25519 with key shares drawn from the seeded stream.
#[derive(Debug)]
struct SeededX25519(&'static SeededRandom);

impl SupportedKxGroup for SeededX25519 {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, rustls::Error> {
        let mut secret = [0u8; 32];
        self.0
            .fill(&mut secret)
            .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
        let secret = x25519_dalek::StaticSecret::from(secret);
        let public = x25519_dalek::PublicKey::from(&secret);
        Ok(Box::new(X25519Share {
            secret,
            public: public.to_bytes(),
        }))
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

struct X25519Share {
    secret: x25519_dalek::StaticSecret,
    public: [u8; 32],
}

impl ActiveKeyExchange for X25519Share {
    fn complete(self: Box<Self>, peer: &[u8]) -> Result<SharedSecret, rustls::Error> {
        let peer: [u8; 32] = peer
            .try_into()
            .map_err(|_| rustls::Error::from(rustls::PeerMisbehaved::InvalidKeyShare))?;
        let shared = self
            .secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(peer));
        // RFC 8446 §7.4.2: an all-zero shared secret means a low-order point.
        if !shared.was_contributory() {
            return Err(rustls::PeerMisbehaved::InvalidKeyShare.into());
        }
        Ok(SharedSecret::from(&shared.as_bytes()[..]))
    }

    fn pub_key(&self) -> &[u8] {
        &self.public
    }

    fn group(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

/// How simulated packets are protected once the handshake has keys (Initial packets always use
/// RFC 9001's AES-128-GCM keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protection {
    /// The negotiated suite with a keyed checksum in place of its AEAD and no header protection
    /// (`null_protection`): the same packets authenticate, at a fraction of the cost.
    #[default]
    Null,
    /// [`Self::Null`] with a tag that leaves the payload's bytes out (it still covers the key, the
    /// header, the packet number and the payload's length), for a path on which nothing alters a
    /// datagram's bytes, where a payload always arrives as it was sealed: the same packets
    /// authenticate, without a CRC over every byte. The simulator uses it in place of `Null` for
    /// such paths; it is not a name a scenario can give.
    NullHeader,
    /// The negotiated AEAD and header protection, as over real sockets.
    Aead,
}

impl std::str::FromStr for Protection {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "null" => Ok(Self::Null),
            "aead" => Ok(Self::Aead),
            _ => Err(crate::Error::invalid(
                "packet protection",
                format!("unknown name {s:?}; accepted: null, aead"),
            )),
        }
    }
}

/// rustls wants its random source and key-exchange groups `'static`; a seeded provider is made
/// per simulated connection pair, so these few bytes are leaked once per pair.
fn seeded_provider(seed: u64, protection: Protection) -> Arc<CryptoProvider> {
    let base = rustls::crypto::ring::default_provider();
    let random: &'static SeededRandom = Box::leak(Box::new(SeededRandom(Mutex::new(
        ChaCha20Rng::seed_from_u64(seed),
    ))));
    let kx: &'static SeededX25519 = Box::leak(Box::new(SeededX25519(random)));
    let cipher_suites = match protection {
        Protection::Aead => base.cipher_suites,
        Protection::Null | Protection::NullHeader => base
            .cipher_suites
            .into_iter()
            .map(|suite| crate::null_protection::null_twin(suite, protection == Protection::Null))
            .collect(),
    };
    Arc::new(CryptoProvider {
        cipher_suites,
        kx_groups: vec![kx],
        secure_random: random,
        ..base
    })
}

/// PKCS#8 v1 wrapping of an Ed25519 seed (RFC 8410 §7).
fn ed25519_pkcs8(seed: [u8; 32]) -> Vec<u8> {
    const PREFIX: [u8; 16] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut der = PREFIX.to_vec();
    der.extend_from_slice(&seed);
    der
}

/// Client and server TLS configurations for one simulated connection pair, with every random
/// choice drawn from `seed` and packets protected as `protection` says. The server's certificate
/// is for `server_name`; the client trusts it.
pub fn simulation_tls(
    seed: u64,
    server_name: &str,
    alpn: &[&[u8]],
    protection: Protection,
) -> Result<(Arc<ClientConfig>, Arc<ServerConfig>), Error> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut key_seed = [0u8; 32];
    rng.fill_bytes(&mut key_seed);
    let pkcs8 = PrivatePkcs8KeyDer::from(ed25519_pkcs8(key_seed));
    let key_pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8, &rcgen::PKCS_ED25519)
        .map_err(|e| Error::Tls(format!("simulation key: {e}")))?;
    let params = rcgen::CertificateParams::new(vec![server_name.to_owned()])
        .map_err(|e| Error::Tls(format!("simulation certificate: {e}")))?;
    let cert = params
        .self_signed(&key_pair)
        .map_err(|e| Error::Tls(format!("simulation certificate: {e}")))?;
    let certs: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let (client_seed, server_seed) = (rng.next_u64(), rng.next_u64());
    let client = client_config_with(
        seeded_provider(client_seed, protection),
        alpn,
        ServerVerification::Roots(certs.clone()),
        None,
    )?;
    let mut server = server_config_with(
        seeded_provider(server_seed, protection),
        certs,
        PrivateKeyDer::Pkcs8(pkcs8),
        alpn,
        None,
    )?;
    // Session tickets would be encrypted under a key from the OS: none in simulation.
    server.send_tls13_tickets = 0;
    Ok((Arc::new(client), Arc::new(server)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::TlsSession;

    /// Moves one side's output to the other, one encryption level per read; returns the bytes.
    fn pump(from: &mut TlsSession, to: &mut TlsSession) -> Vec<u8> {
        let mut moved = Vec::new();
        loop {
            let mut chunk = Vec::new();
            let keys = from.write_handshake(&mut chunk);
            if !chunk.is_empty() {
                to.read_handshake(&chunk).expect("peer reads");
                moved.extend_from_slice(&chunk);
            }
            if keys.is_none() && chunk.is_empty() {
                return moved;
            }
        }
    }

    /// Runs a handshake in memory and returns every byte both sides wrote.
    fn handshake_bytes(seed: u64) -> Vec<u8> {
        let (client, server) =
            simulation_tls(seed, "localhost", &[b"hq-interop"], Protection::Aead).expect("tls");
        let mut c = TlsSession::client(client, "localhost", vec![1, 2, 3]).expect("client");
        let mut s = TlsSession::server(server, vec![4, 5, 6]).expect("server");
        let mut all = Vec::new();
        for _ in 0..4 {
            all.extend(pump(&mut c, &mut s));
            all.extend(pump(&mut s, &mut c));
        }
        assert!(
            !c.is_handshaking() && !s.is_handshaking(),
            "handshake completes"
        );
        all
    }

    #[test]
    fn same_seed_same_handshake_bytes_different_seed_different_bytes() {
        let a = handshake_bytes(7);
        assert!(a.len() > 500);
        assert_eq!(a, handshake_bytes(7));
        assert_ne!(a, handshake_bytes(8));
    }
}
