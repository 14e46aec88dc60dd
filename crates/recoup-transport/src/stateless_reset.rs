//! Stateless reset (RFC 9000 §10.3): the tokens a server derives from a static key and a
//! connection ID (§10.3.2), the reset packet it sends for a short-header packet it has no
//! connection for (§10.3, sizes and loop avoidance §10.3.3), and the comparison a peer makes.

use ring::hmac;

use crate::cid::{ConnectionId, StatelessResetToken};

/// RFC 9000 §10.3: a reset is at least 5 unpredictable bytes (38 bits after the fixed first
/// bits) and the 16-byte token.
pub const MIN_RESET_LEN: usize = 21;

/// RFC 9000 §10.3.3: up to this size a reset is one byte shorter than the packet that
/// triggered it; larger triggers get a reset of this size, the size of a short 1-RTT packet.
const MAX_RESET_LEN: usize = 43;

/// The server's static key for reset tokens. With the same key, a restarted server derives the
/// same token for a connection ID it handed out before the restart, and can end that connection
/// (RFC 9000 §10.3.2).
#[derive(Clone, Debug)]
pub struct ResetKey {
    key: hmac::Key,
}

impl ResetKey {
    #[must_use]
    pub fn new(secret: &[u8; 32]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// RFC 9000 §10.3.2: the token for `cid`, a keyed hash no one without the key can compute.
    #[must_use]
    pub fn token(&self, cid: &ConnectionId) -> StatelessResetToken {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(b"recoup stateless reset token");
        ctx.update(cid);
        let mut token = [0u8; 16];
        token.copy_from_slice(&ctx.sign().as_ref()[..16]);
        token
    }

    /// The reset answering `trigger`, a short-header datagram whose destination ID (the first
    /// `cid_len` bytes after the first byte) no connection has; `None` when the trigger is too
    /// small to answer with a smaller reset (§10.3.3: that rule ends any loop of resets).
    #[must_use]
    pub fn reset_for(&self, trigger: &[u8], cid_len: usize) -> Option<Vec<u8>> {
        let len = trigger.len().checked_sub(1)?.min(MAX_RESET_LEN);
        if len < MIN_RESET_LEN {
            return None;
        }
        let dcid = ConnectionId::new(trigger.get(1..1 + cid_len)?).ok()?;
        // The unpredictable bytes: a keyed hash of the trigger, so that the reset looks random
        // to anyone without the key and the endpoint needs no random source.
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(b"recoup stateless reset padding");
        ctx.update(trigger);
        let fill = ctx.sign();
        let mut out: Vec<u8> = fill
            .as_ref()
            .iter()
            .cycle()
            .take(len - 16)
            .copied()
            .collect();
        // §10.3: the first byte looks like a short header: form 0, fixed bit 1.
        out[0] = (out[0] & 0x3f) | 0x40;
        out.extend_from_slice(&self.token(&dcid));
        Some(out)
    }
}

/// RFC 9000 §10.3.1: the last 16 bytes of `datagram`, where a stateless reset carries its token,
/// if it can be one (a short header, at least [`MIN_RESET_LEN`] bytes).
#[must_use]
pub fn reset_tail(datagram: &[u8]) -> Option<StatelessResetToken> {
    if datagram.len() < MIN_RESET_LEN || datagram[0] & 0x80 != 0 {
        return None;
    }
    datagram[datagram.len() - 16..].try_into().ok()
}

/// Whether two tokens are equal, compared in constant time so that timing reveals nothing about
/// a token (RFC 9000 §10.3.1 "MUST NOT ... timing").
#[must_use]
pub fn tokens_equal(a: &StatelessResetToken, b: &StatelessResetToken) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9000_10_3_tokens_depend_on_key_and_id_and_resets_shrink() {
        let key = ResetKey::new(&[1; 32]);
        let a = ConnectionId::new(&[1; 8]).expect("cid");
        let b = ConnectionId::new(&[2; 8]).expect("cid");
        assert_eq!(key.token(&a), ResetKey::new(&[1; 32]).token(&a), "stable");
        assert_ne!(key.token(&a), key.token(&b));
        assert_ne!(key.token(&a), ResetKey::new(&[3; 32]).token(&a));
        let mut trigger = vec![0x40];
        trigger.extend_from_slice(&a);
        trigger.resize(1200, 0xaa);
        let reset = key.reset_for(&trigger, 8).expect("a reset");
        assert_eq!(reset.len(), MAX_RESET_LEN);
        assert_eq!(reset[0] & 0xc0, 0x40, "short header form, fixed bit");
        let tail = reset_tail(&reset).expect("a reset can be one");
        assert!(tokens_equal(&tail, &key.token(&a)));
        assert!(!tokens_equal(&tail, &key.token(&b)));
        // §10.3.3: always smaller than the trigger, and none below the minimum size.
        for n in 1..=60 {
            match key.reset_for(&trigger[..n], 8) {
                Some(r) => assert!(r.len() < n && r.len() >= MIN_RESET_LEN, "{n}"),
                None => assert!(n <= MIN_RESET_LEN, "{n}"),
            }
        }
        // A reset answered with a reset answered with a reset... stops.
        let mut packet = reset;
        let mut rounds = 0;
        while let Some(r) = key.reset_for(&packet, 8) {
            packet = r;
            rounds += 1;
        }
        assert!(rounds < MAX_RESET_LEN - MIN_RESET_LEN + 1);
    }
}
