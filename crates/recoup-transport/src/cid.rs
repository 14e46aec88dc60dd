//! Connection IDs (RFC 9000 §5.1) and stateless reset tokens (§10.3).

use std::fmt;
use std::ops::Deref;

use rand::RngCore;

use crate::error::Error;

/// The longest connection ID QUIC v1 allows (RFC 9000 §17.2).
pub const MAX_CID_LEN: usize = 20;

/// A stateless reset token (RFC 9000 §10.3): 16 bytes tied to a connection ID.
pub type StatelessResetToken = [u8; 16];

/// A connection ID of 0 to 20 bytes, stored inline so it is `Copy` and needs no allocation.
///
/// Bytes past `len` are always zero, so the derived comparisons and hash see only the ID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ConnectionId {
    len: u8,
    bytes: [u8; MAX_CID_LEN],
}

impl ConnectionId {
    /// The zero-length connection ID.
    pub const EMPTY: Self = Self {
        len: 0,
        bytes: [0; MAX_CID_LEN],
    };

    /// Copies `bytes`; rejects more than [`MAX_CID_LEN`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, Error> {
        if bytes.len() > MAX_CID_LEN {
            return Err(Error::invalid(
                "connection id",
                format!("{} bytes, at most {MAX_CID_LEN} allowed", bytes.len()),
            ));
        }
        let mut cid = Self::EMPTY;
        cid.bytes[..bytes.len()].copy_from_slice(bytes);
        cid.len = bytes.len() as u8;
        Ok(cid)
    }

    /// A random ID of `len` bytes (clamped to [`MAX_CID_LEN`]).
    #[must_use]
    pub fn random<R: RngCore + ?Sized>(rng: &mut R, len: usize) -> Self {
        let len = len.min(MAX_CID_LEN);
        let mut cid = Self::EMPTY;
        rng.fill_bytes(&mut cid.bytes[..len]);
        cid.len = len as u8;
        cid
    }

    /// A random ID of `len` bytes whose first byte is `prefix` when given (and `len` > 0): the
    /// ID names the worker that owns its connection (`TransportConfig::cid_prefix`).
    #[must_use]
    pub fn random_with_prefix<R: RngCore + ?Sized>(
        rng: &mut R,
        len: usize,
        prefix: Option<u8>,
    ) -> Self {
        let mut cid = Self::random(rng, len);
        if let (Some(p), Some(first)) = (prefix, cid.bytes[..usize::from(cid.len)].first_mut()) {
            *first = p;
        }
        cid
    }

    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Deref for ConnectionId {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ConnectionId {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl TryFrom<&[u8]> for ConnectionId {
    type Error = Error;

    fn try_from(bytes: &[u8]) -> Result<Self, Error> {
        Self::new(bytes)
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.as_slice() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConnectionId({self})")
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn lengths_zero_to_twenty_accepted_twenty_one_rejected() {
        assert!(ConnectionId::new(&[]).unwrap().is_empty());
        let max = ConnectionId::new(&[7; 20]).unwrap();
        assert_eq!(max.len(), 20);
        assert_eq!(&*max, &[7; 20]);
        assert!(matches!(
            ConnectionId::new(&[0; 21]),
            Err(Error::Invalid { .. })
        ));
    }

    #[test]
    fn displays_as_hex_and_compares_by_content() {
        let a = ConnectionId::new(&[0x01, 0xab, 0xff]).unwrap();
        assert_eq!(a.to_string(), "01abff");
        assert_eq!(format!("{a:?}"), "ConnectionId(01abff)");
        assert_eq!(ConnectionId::EMPTY.to_string(), "");
        assert_eq!(a, ConnectionId::try_from(&[0x01, 0xab, 0xff][..]).unwrap());
        assert_ne!(a, ConnectionId::new(&[0x01, 0xab]).unwrap());
    }

    #[test]
    fn a_prefix_names_the_first_byte_and_keeps_the_length() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for prefix in [0u8, 1, 7] {
            let cid = ConnectionId::random_with_prefix(&mut rng, 8, Some(prefix));
            assert_eq!((cid.len(), cid.as_slice()[0]), (8, prefix));
        }
        assert!(ConnectionId::random_with_prefix(&mut rng, 0, Some(1)).is_empty());
    }

    #[test]
    fn random_ids_have_the_asked_length() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let a = ConnectionId::random(&mut rng, 8);
        let b = ConnectionId::random(&mut rng, 8);
        assert_eq!(a.len(), 8);
        assert_ne!(a, b);
        assert_eq!(ConnectionId::random(&mut rng, 99).len(), MAX_CID_LEN);
    }
}
