//! Retry (RFC 9000 §8.1.2, §17.2.5): the packet with its integrity tag (RFC 9001 §5.8), and the
//! address-validation tokens a server puts in it.
//!
//! A token is `issued (8 bytes, µs) | odcid length | odcid | HMAC-SHA256` over the client's
//! address, the issue time, the client's original destination ID and the Retry's source ID
//! (which the client's next Initial carries as its destination ID). The server keeps no state per
//! Retry: the MAC with a key only it holds proves it issued the token, to this address, for this
//! connection attempt, within [`TOKEN_LIFETIME`].

use std::net::SocketAddr;
use std::time::Duration;

use recoup_time::Instant;
use ring::{aead, hmac};

use crate::cid::ConnectionId;
use crate::packet::{LONG_FORM_BIT, QUIC_VERSION_1};

/// RFC 9001 §5.8: the fixed AES-128-GCM key and nonce of the Retry Integrity Tag (QUIC v1).
const TAG_KEY: [u8; 16] = [
    0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e,
];
const TAG_NONCE: [u8; 12] = [
    0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb,
];
pub const TAG_LEN: usize = 16;

/// RFC 9000 §17.2.5: long header packet type 3, the fixed bit set.
const RETRY_FIRST_BYTE: u8 = LONG_FORM_BIT | 0x40 | 0x30;

/// How long a Retry token is accepted. RFC 9000 §8.1.3: tokens from Retry are used at once
/// (the client answers within a round trip), so they SHOULD expire soon.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10);

/// Length of the Retry's source ID (the client's next destination ID): RFC 9000 §7.2 asks at
/// least 8 bytes of a client's first destination ID, and the endpoint routes on that rule.
pub const RETRY_SCID_LEN: usize = 8;

/// The Retry Integrity Tag of `packet` (a Retry without its tag), sent in answer to a client
/// whose first Initial had destination ID `odcid` (RFC 9001 §5.8).
#[must_use]
pub fn integrity_tag(odcid: &[u8], packet: &[u8]) -> [u8; TAG_LEN] {
    // The Retry Pseudo-Packet: the original destination ID, length-prefixed, then the Retry.
    let mut pseudo = Vec::with_capacity(1 + odcid.len() + packet.len());
    pseudo.push(odcid.len() as u8);
    pseudo.extend_from_slice(odcid);
    pseudo.extend_from_slice(packet);
    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_128_GCM, &TAG_KEY).expect("a 16-byte AES-128 key"),
    );
    let nonce = aead::Nonce::assume_unique_for_key(TAG_NONCE);
    let mut empty = [0u8; 0];
    let tag = key
        .seal_in_place_separate_tag(nonce, aead::Aad::from(&pseudo), &mut empty)
        .expect("sealing an empty plaintext cannot fail");
    let mut out = [0u8; TAG_LEN];
    out.copy_from_slice(tag.as_ref());
    out
}

/// Whether `packet`, a whole Retry, ends with the right tag for `odcid` (constant time).
#[must_use]
pub fn tag_is_valid(odcid: &[u8], packet: &[u8]) -> bool {
    let Some(split) = packet.len().checked_sub(TAG_LEN) else {
        return false;
    };
    let (body, tag) = packet.split_at(split);
    let want = integrity_tag(odcid, body);
    // No early exit on the first differing byte (RFC 9000 §10.3.1 asks this of reset tokens;
    // the same care costs nothing here).
    want.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Appends a Retry from a server to a client whose Initial had source ID `dcid` and destination
/// ID `odcid` (RFC 9000 §17.2.5).
pub fn write_retry(
    buf: &mut Vec<u8>,
    dcid: &ConnectionId,
    scid: &ConnectionId,
    token: &[u8],
    odcid: &ConnectionId,
) {
    let start = buf.len();
    buf.push(RETRY_FIRST_BYTE);
    buf.extend_from_slice(&QUIC_VERSION_1.to_be_bytes());
    for cid in [dcid, scid] {
        buf.push(cid.len() as u8);
        buf.extend_from_slice(cid);
    }
    buf.extend_from_slice(token);
    let tag = integrity_tag(odcid, &buf[start..]);
    buf.extend_from_slice(&tag);
}

/// A server's Retry tokens: issues them and checks them (RFC 9000 §8.1.2, §8.1.3).
#[derive(Debug)]
pub struct RetryTokens {
    key: hmac::Key,
    /// Retries sent; makes each Retry's source ID different.
    issued: u64,
}

impl RetryTokens {
    /// Tokens authenticated with `key`, which only this server may know (draw it from the OS).
    #[must_use]
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            issued: 0,
        }
    }

    /// A fresh source ID for a Retry answering `odcid`: unpredictable without the key.
    pub fn new_scid(&mut self, odcid: &ConnectionId) -> ConnectionId {
        self.issued += 1;
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(b"recoup retry scid");
        ctx.update(&self.issued.to_be_bytes());
        ctx.update(odcid);
        let mac = ctx.sign();
        ConnectionId::new(&mac.as_ref()[..RETRY_SCID_LEN]).expect("8 bytes is a valid ID")
    }

    /// The token for a Retry with source ID `retry_scid`, sent at `now` to `remote`, whose
    /// Initial had destination ID `odcid`.
    #[must_use]
    pub fn issue(
        &self,
        now: Instant,
        remote: SocketAddr,
        odcid: &ConnectionId,
        retry_scid: &ConnectionId,
    ) -> Vec<u8> {
        let issued = micros(now);
        let mut token = Vec::with_capacity(9 + odcid.len() + 32);
        token.extend_from_slice(&issued.to_be_bytes());
        token.push(odcid.len() as u8);
        token.extend_from_slice(odcid);
        let mac = hmac::sign(&self.key, &mac_input(remote, issued, odcid, retry_scid));
        token.extend_from_slice(mac.as_ref());
        token
    }

    /// The original destination ID a token from `remote` carries, if we issued it for an
    /// Initial now addressed to `dcid` and it has not expired.
    #[must_use]
    pub fn validate(
        &self,
        now: Instant,
        remote: SocketAddr,
        token: &[u8],
        dcid: &ConnectionId,
    ) -> Option<ConnectionId> {
        let issued = u64::from_be_bytes(token.get(..8)?.try_into().ok()?);
        let odcid_len = usize::from(*token.get(8)?);
        let odcid = ConnectionId::new(token.get(9..9 + odcid_len)?).ok()?;
        let mac = token.get(9 + odcid_len..)?;
        hmac::verify(&self.key, &mac_input(remote, issued, &odcid, dcid), mac).ok()?;
        let age = micros(now).checked_sub(issued)?;
        (Duration::from_micros(age) <= TOKEN_LIFETIME).then_some(odcid)
    }
}

/// What a token's MAC covers: the client's address (so a token is not replayed from elsewhere,
/// RFC 9000 §8.1.3), the issue time, and the connection attempt's two IDs.
fn mac_input(
    remote: SocketAddr,
    issued: u64,
    odcid: &ConnectionId,
    retry_scid: &ConnectionId,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(b"recoup retry token");
    match remote {
        SocketAddr::V4(a) => {
            v.push(4);
            v.extend_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            v.push(6);
            v.extend_from_slice(&a.ip().octets());
        }
    }
    v.extend_from_slice(&remote.port().to_be_bytes());
    v.extend_from_slice(&issued.to_be_bytes());
    for cid in [odcid, retry_scid] {
        v.push(cid.len() as u8);
        v.extend_from_slice(cid);
    }
    v
}

fn micros(t: Instant) -> u64 {
    t.saturating_duration_since(Instant::ZERO).as_micros() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cid(b: &[u8]) -> ConnectionId {
        ConnectionId::new(b).expect("cid")
    }

    #[test]
    fn rfc9001_a_4_retry_integrity_tag() {
        // RFC 9001 Appendix A.4: the Retry for the client Initial of A.2 (odcid 8394c8f03e515708).
        let odcid = hex_bytes("8394c8f03e515708");
        let packet =
            hex_bytes("ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba");
        let (body, tag) = packet.split_at(packet.len() - TAG_LEN);
        assert_eq!(integrity_tag(&odcid, body).as_slice(), tag);
        assert!(tag_is_valid(&odcid, &packet));
        let mut bad = packet.clone();
        bad[10] ^= 1;
        assert!(!tag_is_valid(&odcid, &bad), "a changed byte fails the tag");
        assert!(!tag_is_valid(&hex_bytes("8394c8f03e515709"), &packet));
        // Our writer produces the same bytes (its first byte's unused bits are 0, A.4's are 0xf).
        let mut ours = Vec::new();
        write_retry(
            &mut ours,
            &cid(&[]),
            &cid(&hex_bytes("f067a5502a4262b5")),
            b"token",
            &cid(&odcid),
        );
        assert!(tag_is_valid(&odcid, &ours));
        assert_eq!(ours[1..ours.len() - TAG_LEN], body[1..]);
    }

    fn hex_bytes(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn rfc9000_8_1_3_tokens_are_bound_to_address_ids_and_time() {
        let mut tokens = RetryTokens::new(&[7; 32]);
        let odcid = cid(&[1; 8]);
        let scid = tokens.new_scid(&odcid);
        assert_ne!(scid, tokens.new_scid(&odcid), "each Retry gets its own ID");
        let from: SocketAddr = "192.0.2.1:4000".parse().expect("addr");
        let t0 = Instant::ZERO + Duration::from_secs(100);
        let token = tokens.issue(t0, from, &odcid, &scid);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(tokens.validate(later, from, &token, &scid), Some(odcid));
        let other: SocketAddr = "192.0.2.1:4001".parse().expect("addr");
        assert_eq!(tokens.validate(later, other, &token, &scid), None, "port");
        assert_eq!(tokens.validate(later, from, &token, &odcid), None, "dcid");
        let expired = t0 + TOKEN_LIFETIME + Duration::from_millis(1);
        assert_eq!(tokens.validate(expired, from, &token, &scid), None, "age");
        for i in 0..token.len() {
            let mut bad = token.clone();
            bad[i] ^= 0x20;
            assert_eq!(tokens.validate(later, from, &bad, &scid), None, "byte {i}");
        }
        assert_eq!(tokens.validate(later, from, &token[..20], &scid), None);
        let stranger = RetryTokens::new(&[8; 32]);
        assert_eq!(stranger.validate(later, from, &token, &scid), None, "key");
    }
}
