//! Packet protection that costs almost nothing, for the simulator only.
//!
//! AES-GCM was about 15 % of a simulated run's instructions (BENCHMARKS.md), yet a simulated
//! result depends only on which packets authenticate, never on the ciphertext. Each TLS 1.3
//! suite of a provider gets a twin with the same key schedule, negotiation and AEAD limits whose
//! QUIC packet protection sends the plaintext and, in place of the AEAD tag, a CRC-32 of the
//! payload whose initial value is keyed by the packet key and IV and by a hash of the packet
//! number and header; header protection is the identity. (Those two are short, where a CRC costs
//! most per byte; a different initial value changes the CRC of any payload, so they are covered
//! as if the CRC ran over them, short of a 2^-32 collision of the hash.) So a packet that a real AEAD would reject (corrupted, wrong key phase, wrong packet
//! number) still fails to open, short of a 2^-32 CRC collision, and the packets keep their sizes.
//!
//! On a path where nothing alters a datagram's bytes (no corrupting element: the simulator knows
//! its path) a payload can only arrive as it was sealed, so the payload's CRC decides nothing
//! there; [`Protection::NullHeader`](crate::Protection::NullHeader) leaves it out and keys the tag
//! by the header, packet number and payload length alone (the CRC was about 4 % of a 100 Mbit/s
//! bulk transfer's run time).
//! `crates/recoup-cli/tests/results_unchanged.rs` shows every result column of the same runs is
//! identical under both protections. Never use this outside simulation: it protects nothing.

use rustls::crypto::cipher::{AeadKey, Iv};
use rustls::quic::{Algorithm, HeaderProtectionKey, PacketKey, Tag};
use rustls::{Error, SupportedCipherSuite, Tls13CipherSuite};

/// rustls's `Tag` length, which the twin's tag also has: packets keep their real sizes.
const TAG_LEN: usize = 16;

/// The null-protected twin of `suite` (TLS 1.2 suites and suites without QUIC support are
/// returned as they are), whose tag covers the payload if `payload_covered`. rustls wants suites
/// `'static`: each twin is made once and leaked.
pub(crate) fn null_twin(
    suite: SupportedCipherSuite,
    payload_covered: bool,
) -> SupportedCipherSuite {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    type Twins = HashMap<(u16, bool), &'static Tls13CipherSuite>;
    static TWINS: OnceLock<Mutex<Twins>> = OnceLock::new();
    let SupportedCipherSuite::Tls13(real) = suite else {
        return suite;
    };
    let Some(quic) = real.quic else {
        return suite;
    };
    let mut twins = TWINS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let twin = *twins
        .entry((u16::from(real.common.suite), payload_covered))
        .or_insert_with(|| {
            let algorithm: &'static NullAlgorithm = Box::leak(Box::new(NullAlgorithm {
                real: quic,
                payload_covered,
            }));
            Box::leak(Box::new(Tls13CipherSuite {
                common: rustls::CipherSuiteCommon {
                    suite: real.common.suite,
                    hash_provider: real.common.hash_provider,
                    confidentiality_limit: real.common.confidentiality_limit,
                },
                hkdf_provider: real.hkdf_provider,
                aead_alg: real.aead_alg,
                quic: Some(algorithm),
            }))
        });
    SupportedCipherSuite::Tls13(twin)
}

/// A suite's QUIC algorithm with the AEAD and header protection replaced.
struct NullAlgorithm {
    /// The real algorithm: its key length, sample length and AEAD limits are kept.
    real: &'static dyn Algorithm,
    /// Whether the tag's CRC runs over the payload.
    payload_covered: bool,
}

impl Algorithm for NullAlgorithm {
    fn packet_key(&self, key: AeadKey, iv: Iv) -> Box<dyn PacketKey> {
        // The key and IV seed the checksum, so keys of different phases or directions do not
        // open each other's packets, as with a real AEAD.
        let mut seed = crc32fast::Hasher::new();
        seed.update(key.as_ref());
        seed.update(iv.as_ref());
        let real = self.real.packet_key(key, iv);
        let seed = seed.finalize();
        Box::new(NullPacketKey {
            seed,
            payload_covered: self.payload_covered,
            header_hash: foldhash::quality::FixedState::with_seed(u64::from(seed)),
            confidentiality_limit: real.confidentiality_limit(),
            integrity_limit: real.integrity_limit(),
        })
    }

    fn header_protection_key(&self, key: AeadKey) -> Box<dyn HeaderProtectionKey> {
        Box::new(NullHeaderKey {
            sample_len: self.real.header_protection_key(key).sample_len(),
        })
    }

    fn aead_key_len(&self) -> usize {
        self.real.aead_key_len()
    }
}

struct NullPacketKey {
    seed: u32,
    /// Whether the CRC runs over the payload; without, the tag covers its length only.
    payload_covered: bool,
    /// Hashes the packet number and header into the CRC's initial value, keyed like it.
    header_hash: foldhash::quality::FixedState,
    confidentiality_limit: u64,
    integrity_limit: u64,
}

impl NullPacketKey {
    fn tag(&self, packet_number: u64, header: &[u8], payload: &[u8]) -> [u8; TAG_LEN] {
        use std::hash::BuildHasher;
        let h = self
            .header_hash
            .hash_one((packet_number, header, payload.len()));
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the 64-bit hash folded into 32 bits"
        )]
        let folded = (h ^ (h >> 32)) as u32;
        let mut crc = crc32fast::Hasher::new_with_initial(self.seed ^ folded);
        if self.payload_covered {
            crc.update(payload);
        }
        let mut tag = [0; TAG_LEN];
        tag[..4].copy_from_slice(&crc.finalize().to_be_bytes());
        tag
    }
}

impl PacketKey for NullPacketKey {
    fn encrypt_in_place(
        &self,
        packet_number: u64,
        header: &[u8],
        payload: &mut [u8],
    ) -> Result<Tag, Error> {
        Ok(Tag::from(&self.tag(packet_number, header, payload)[..]))
    }

    fn decrypt_in_place<'a>(
        &self,
        packet_number: u64,
        header: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a [u8], Error> {
        let Some(plain_len) = payload.len().checked_sub(TAG_LEN) else {
            return Err(Error::DecryptError);
        };
        let (plain, tag) = payload.split_at(plain_len);
        if self.tag(packet_number, header, plain)[..] != *tag {
            return Err(Error::DecryptError);
        }
        Ok(plain)
    }

    fn tag_len(&self) -> usize {
        TAG_LEN
    }

    fn confidentiality_limit(&self) -> u64 {
        self.confidentiality_limit
    }

    fn integrity_limit(&self) -> u64 {
        self.integrity_limit
    }
}

/// Header protection that leaves the header as it is, with the real sample-length checks.
struct NullHeaderKey {
    sample_len: usize,
}

impl NullHeaderKey {
    fn check(&self, sample: &[u8], packet_number: &[u8]) -> Result<(), Error> {
        // RFC 9001 §5.4.2 (the sample) and RFC 9000 §17.1 (at most 4 packet number bytes).
        if sample.len() != self.sample_len || packet_number.len() > 4 {
            return Err(Error::General("header protection input".into()));
        }
        Ok(())
    }
}

impl HeaderProtectionKey for NullHeaderKey {
    fn encrypt_in_place(
        &self,
        sample: &[u8],
        _first: &mut u8,
        packet_number: &mut [u8],
    ) -> Result<(), Error> {
        self.check(sample, packet_number)
    }

    fn decrypt_in_place(
        &self,
        sample: &[u8],
        _first: &mut u8,
        packet_number: &mut [u8],
    ) -> Result<(), Error> {
        self.check(sample, packet_number)
    }

    fn sample_len(&self) -> usize {
        self.sample_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys of the twin of AES-256-GCM (the suite simulated handshakes negotiate: 32-byte keys).
    fn keys(byte: u8) -> (Box<dyn PacketKey>, Box<dyn HeaderProtectionKey>) {
        keys_covering(byte, true)
    }

    fn keys_covering(
        byte: u8,
        payload_covered: bool,
    ) -> (Box<dyn PacketKey>, Box<dyn HeaderProtectionKey>) {
        let SupportedCipherSuite::Tls13(suite) = null_twin(
            rustls::crypto::ring::cipher_suite::TLS13_AES_256_GCM_SHA384,
            payload_covered,
        ) else {
            unreachable!("a TLS 1.3 suite's twin is a TLS 1.3 suite")
        };
        let quic = suite.quic.expect("QUIC support kept");
        let key = || AeadKey::from([byte; 32]);
        (
            quic.packet_key(key(), Iv::copy(&[byte; 12])),
            quic.header_protection_key(key()),
        )
    }

    #[test]
    fn tag_authenticates_key_packet_number_header_and_payload() {
        let (key, _) = keys(1);
        let header = [0x41, 1, 2, 3, 4, 5];
        let mut payload = b"some payload".to_vec();
        let plain = payload.clone();
        let tag = key.encrypt_in_place(9, &header, &mut payload).unwrap();
        assert_eq!(payload, plain, "null protection sends the plaintext");
        payload.extend_from_slice(tag.as_ref());
        assert_eq!(payload.len(), plain.len() + key.tag_len());
        assert_eq!(
            key.decrypt_in_place(9, &header, &mut payload.clone())
                .unwrap(),
            &plain[..]
        );
        assert!(key
            .decrypt_in_place(10, &header, &mut payload.clone())
            .is_err());
        assert!(key
            .decrypt_in_place(9, &header[1..], &mut payload.clone())
            .is_err());
        let (other, _) = keys(2);
        assert!(other
            .decrypt_in_place(9, &header, &mut payload.clone())
            .is_err());
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 0x10;
            assert!(
                key.decrypt_in_place(9, &header, &mut bad).is_err(),
                "bit flip at {i}"
            );
        }
        for i in 0..header.len() {
            for bit in 0..8 {
                let mut bad = header;
                bad[i] ^= 1 << bit;
                assert!(
                    key.decrypt_in_place(9, &bad, &mut payload.clone()).is_err(),
                    "header bit {bit} of byte {i}"
                );
            }
        }
        for bit in 0..62 {
            assert!(
                key.decrypt_in_place(9 ^ (1 << bit), &header, &mut payload.clone())
                    .is_err(),
                "packet number bit {bit}"
            );
        }
        assert!(key.decrypt_in_place(9, &header, &mut [0; 15]).is_err());
    }

    /// Without the payload, the tag still authenticates the key, the packet number, the header
    /// and the payload's length: only a payload's bytes, which nothing on such a path alters,
    /// go unchecked.
    #[test]
    fn header_only_tag_authenticates_all_but_the_payload_bytes() {
        let (key, _) = keys_covering(1, false);
        let header = [0x41, 1, 2, 3, 4, 5];
        let plain = b"some payload".to_vec();
        let mut payload = plain.clone();
        let tag = key.encrypt_in_place(9, &header, &mut payload).unwrap();
        payload.extend_from_slice(tag.as_ref());
        let opens = |pn: u64, header: &[u8], payload: &[u8]| {
            key.decrypt_in_place(pn, header, &mut payload.to_vec())
                .is_ok()
        };
        assert!(opens(9, &header, &payload));
        assert!(!opens(10, &header, &payload), "packet number");
        assert!(!opens(9, &header[1..], &payload), "header");
        let mut longer = plain.clone();
        longer.push(0);
        longer.extend_from_slice(tag.as_ref());
        assert!(!opens(9, &header, &longer), "payload length");
        let mut flipped = payload.clone();
        flipped[0] ^= 1;
        assert!(opens(9, &header, &flipped), "payload bytes are not covered");
        let mut bad_tag = payload.clone();
        *bad_tag.last_mut().unwrap() ^= 1;
        assert!(!opens(9, &header, &bad_tag), "tag");
        let (other, _) = keys_covering(2, false);
        assert!(other
            .decrypt_in_place(9, &header, &mut payload.clone())
            .is_err());
        let (covering, _) = keys_covering(1, true);
        assert!(
            covering
                .decrypt_in_place(9, &header, &mut payload.clone())
                .is_err(),
            "the two twins' tags differ"
        );
    }

    #[test]
    fn limits_and_sample_length_are_the_real_suites() {
        let (key, header) = keys(1);
        assert_eq!(key.confidentiality_limit(), 1 << 23);
        assert_eq!(key.integrity_limit(), 1 << 52);
        assert_eq!(header.sample_len(), 16);
        let (mut first, mut pn) = (0x43, [1, 2]);
        header
            .encrypt_in_place(&[0; 16], &mut first, &mut pn)
            .unwrap();
        assert_eq!((first, pn), (0x43, [1, 2]));
        assert!(header
            .decrypt_in_place(&[0; 15], &mut first, &mut pn)
            .is_err());
    }
}
