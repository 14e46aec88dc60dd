//! Stream reads and writes where "nothing now" is a normal answer, not an error.

use bytes::Bytes;
use recoup_transport::streams::StreamId;
use recoup_transport::Connection;

/// Queues what the stream takes now; 0 when flow control or the send buffer pushes back.
pub(crate) fn write(
    conn: &mut Connection,
    id: StreamId,
    data: &[u8],
) -> Result<usize, recoup_transport::Error> {
    match conn.stream_write(id, data) {
        Err(recoup_transport::Error::Blocked) => Ok(0),
        other => other,
    }
}

/// As [`write`], taking the accepted front of `data` without copying it.
pub(crate) fn write_chunk(
    conn: &mut Connection,
    id: StreamId,
    data: &mut Bytes,
) -> Result<usize, recoup_transport::Error> {
    match conn.stream_write_chunk(id, data) {
        Err(recoup_transport::Error::Blocked) => Ok(0),
        other => other,
    }
}

/// Reads what has arrived in order; `(0, false)` when nothing has.
pub(crate) fn read(
    conn: &mut Connection,
    id: StreamId,
    buf: &mut [u8],
) -> Result<(usize, bool), recoup_transport::Error> {
    match conn.stream_read(id, buf) {
        Err(recoup_transport::Error::Blocked) => Ok((0, false)),
        other => other,
    }
}
