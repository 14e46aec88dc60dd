//! Frames about addressing the connection: NEW_TOKEN (RFC 9000 §19.7), NEW_CONNECTION_ID and
//! RETIRE_CONNECTION_ID (§19.15-16), PATH_CHALLENGE and PATH_RESPONSE (§19.17-18).

use super::{unknown_type, Frame, FrameType};
use crate::cid::{ConnectionId, MAX_CID_LEN};
use crate::coding::Reader;
use crate::error::{transport_err, Error};

/// The body of a frame of this family (`ty` one of 0x07, 0x18..=0x1b).
pub(super) fn parse<'a>(r: &mut Reader<'a>, ty: FrameType) -> Result<Frame<'a>, Error> {
    Ok(match ty.0 {
        0x07 => {
            let token = r.length_prefixed("token")?;
            // §19.7: an empty token is a FRAME_ENCODING_ERROR.
            if token.is_empty() {
                return Err(transport_err!(FRAME_ENCODING_ERROR, "empty NEW_TOKEN").into());
            }
            Frame::NewToken { token }
        }
        0x18 => {
            let seq = r.varint("sequence number")?;
            let retire_prior_to = r.varint("retire prior to")?;
            // §19.15: both checks are FRAME_ENCODING_ERROR.
            if retire_prior_to > seq {
                return Err(transport_err!(
                    FRAME_ENCODING_ERROR,
                    "retire prior to {retire_prior_to} > sequence number {seq}"
                )
                .into());
            }
            let len = usize::from(r.u8("connection id length")?);
            if len == 0 || len > MAX_CID_LEN {
                return Err(
                    transport_err!(FRAME_ENCODING_ERROR, "connection id length {len}").into(),
                );
            }
            let cid = ConnectionId::new(r.bytes(len, "connection id")?)?;
            Frame::NewConnectionId {
                seq,
                retire_prior_to,
                cid,
                reset_token: r.array("stateless reset token")?,
            }
        }
        0x19 => Frame::RetireConnectionId {
            seq: r.varint("sequence number")?,
        },
        0x1a => Frame::PathChallenge(r.array("path challenge data")?),
        0x1b => Frame::PathResponse(r.array("path response data")?),
        _ => return Err(unknown_type(ty)),
    })
}
