//! A client following a Retry (RFC 9000 §17.2.5.2). The server's side is the endpoint's
//! (`endpoint.rs`) and `Connection::accept_with_ids`.

use recoup_time::Instant;

use super::handshake::FollowedRetry;
use super::Connection;
use crate::crypto::Side;
use crate::error::Error;
use crate::loss::SpaceId;
use crate::packet::PartialDecode;
use crate::retry::tag_is_valid;

impl Connection {
    /// A Retry arrived. A client follows the first valid one (RFC 9000 §17.2.5.2); anything
    /// else is dropped.
    pub(super) fn on_retry(
        &mut self,
        now: Instant,
        header: &PartialDecode<'_>,
    ) -> Result<(), Error> {
        let odcid = self.handshake.original_dcid;
        let answered = self.spaces[SpaceId::Initial].largest_received.is_some()
            || self.spaces[SpaceId::Handshake].largest_received.is_some();
        // §17.2.5.2: only a client, only one Retry, none after the server's first Initial, never
        // one with an empty token; RFC 9001 §5.8: the tag must verify against our first ID.
        if self.side == Side::Server
            || self.handshake.retry.is_some()
            || answered
            || header.token.is_empty()
            || !tag_is_valid(&odcid, header.packet)
        {
            return Err(Error::Decrypt);
        }
        tracing::debug!(scid = ?header.scid, "following a Retry");
        self.cids.follow_retry(header.scid);
        // RFC 9001 §5.2: new Initial keys from the new destination ID; RFC 9002 §6.3: the
        // Initials sent so far will never be acknowledged, so recovery forgets them, and the
        // ClientHello goes again (RFC 9000 §17.2.5.3: packet numbers continue).
        self.keys.rederive_initial(&header.scid, Side::Client);
        let _ = self.recovery.loss.forget_sent(SpaceId::Initial, now);
        self.spaces[SpaceId::Initial].crypto_send.requeue_unacked();
        self.handshake.retry = Some(FollowedRetry {
            scid: header.scid,
            token: header.token.to_vec(),
        });
        Ok(())
    }
}
