//! File transfers and RPC: flow completion time (FCT) per transfer, from its first byte written
//! to its last byte received.
//!
//! Each transfer is one frame ([`crate::frame`]) on its own stream, so the receiver checks it
//! and learns when it was written (file: the header's capture time is the write time) without a
//! side channel.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use recoup_time::Instant;

use crate::frame::{
    FrameError, FrameHeader, FrameKind, FrameParser, FrameSource, ReceivedFrame, FRAME_HEADER_LEN,
};
use crate::{keep_first_error, unexpected, write_front, StreamApp, StreamKey, Write};

/// `count` files of `size` bytes, the i-th written at `start + i * interval` on its own stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileConfig {
    /// Bytes per transfer, the 32-byte frame header included (smaller sizes send the header).
    pub size: u64,
    pub count: u32,
    pub interval: Duration,
}

/// `count` request/response pairs in sequence: the client sends request i, the server answers
/// on the same stream, and request i + 1 goes out `think` after response i completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcConfig {
    /// Request bytes, header included.
    pub request: u64,
    /// Response bytes, header included.
    pub response: u64,
    pub count: u32,
    pub think: Duration,
}

/// What the receiving side of transfers measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TransferOutcome {
    /// Transfers the configuration asked for.
    pub expected: u64,
    /// Flow completion times of the transfers that completed, by completion order.
    pub fct: Vec<Duration>,
    pub bytes_received: u64,
    pub error: Option<FrameError>,
}

fn payload_len(total: u64) -> u32 {
    u32::try_from(total.saturating_sub(FRAME_HEADER_LEN as u64)).unwrap_or(u32::MAX)
}

/// One incoming transfer: exactly one frame with a given sequence number, then FIN.
#[derive(Debug)]
pub(crate) struct Incoming {
    parser: FrameParser,
    frame: Option<ReceivedFrame>,
}

impl Incoming {
    pub(crate) fn new(sequence: u64) -> Self {
        Self {
            parser: FrameParser::new(Some(sequence)),
            frame: None,
        }
    }

    /// Feeds bytes; returns the frame when it completes with this call.
    pub(crate) fn push(
        &mut self,
        now: Instant,
        data: &[u8],
        fin: bool,
        scratch: &mut Vec<ReceivedFrame>,
    ) -> Result<Option<ReceivedFrame>, FrameError> {
        if self.frame.is_some() && !data.is_empty() {
            return Err(FrameError::Protocol(
                "bytes after the end of a transfer".into(),
            ));
        }
        scratch.clear();
        self.parser.push(now, data, scratch)?;
        if scratch.len() > 1 || (self.frame.is_some() && !scratch.is_empty()) {
            return Err(FrameError::Protocol(
                "more than one frame in a transfer".into(),
            ));
        }
        if fin {
            self.parser.finish()?;
            if self.frame.is_none() && scratch.is_empty() {
                return Err(FrameError::Protocol(
                    "transfer ended without its frame".into(),
                ));
            }
        }
        let done = scratch.first().copied();
        if done.is_some() {
            self.frame = done;
        }
        Ok(done)
    }
}

/// The file server.
#[derive(Debug)]
pub struct FileSender {
    config: FileConfig,
    start: Instant,
    next: u64,
    active: VecDeque<(StreamKey, FrameSource)>,
}

impl FileSender {
    #[must_use]
    pub fn new(config: &FileConfig, start: Instant) -> Self {
        Self {
            config: *config,
            start,
            next: 0,
            active: VecDeque::new(),
        }
    }

    fn start_of(&self, i: u64) -> Instant {
        let offset = self
            .config
            .interval
            .checked_mul(u32::try_from(i).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX);
        self.start.checked_add(offset).unwrap_or(Instant::MAX)
    }
}

impl StreamApp for FileSender {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        while self.next < u64::from(self.config.count) && self.start_of(self.next) <= now {
            let source = FrameSource::new(
                FrameKind::Delta,
                self.next,
                now,
                payload_len(self.config.size),
            );
            self.active.push_back((StreamKey::Local(self.next), source));
            self.next += 1;
        }
        write_front(&mut self.active, max)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        (self.next < u64::from(self.config.count)).then(|| self.start_of(self.next))
    }

    fn finish(&mut self, _now: Instant) {}
}

/// The file client: FCT = arrival of a transfer's last byte - its write time (from the header).
#[derive(Debug)]
pub struct FileReceiver {
    expected: u64,
    streams: BTreeMap<u64, Incoming>,
    fct: Vec<Duration>,
    bytes: u64,
    error: Option<FrameError>,
    scratch: Vec<ReceivedFrame>,
}

impl FileReceiver {
    #[must_use]
    pub fn new(config: &FileConfig) -> Self {
        Self {
            expected: u64::from(config.count),
            streams: BTreeMap::new(),
            fct: Vec::new(),
            bytes: 0,
            error: None,
            scratch: Vec::new(),
        }
    }

    #[must_use]
    pub fn outcome(&self) -> TransferOutcome {
        TransferOutcome {
            expected: self.expected,
            fct: self.fct.clone(),
            bytes_received: self.bytes,
            error: self.error.clone(),
        }
    }

    fn receive(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let StreamKey::Peer(i) = stream else {
            return Err(unexpected(stream));
        };
        if i >= self.expected {
            return Err(unexpected(stream));
        }
        self.bytes += data.len() as u64;
        let incoming = self.streams.entry(i).or_insert_with(|| Incoming::new(i));
        if let Some(f) = incoming.push(now, data, fin, &mut self.scratch)? {
            let written = Instant::from_nanos(f.header.capture_us.saturating_mul(1_000));
            self.fct
                .push(f.completed.saturating_duration_since(written));
        }
        Ok(())
    }
}

impl StreamApp for FileReceiver {
    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let r = self.receive(now, stream, data, fin);
        keep_first_error(&mut self.error, r)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, _now: Instant) {}
}

/// The RPC client: FCT = arrival of the response's last byte - the request's first byte written.
#[derive(Debug)]
pub struct RpcClient {
    config: RpcConfig,
    /// Index of the next request and when it may go out.
    next: u64,
    next_at: Option<Instant>,
    outgoing: VecDeque<(StreamKey, FrameSource)>,
    /// The request in flight: its index, first-byte write time and response parser.
    in_flight: Option<(u64, Instant, Incoming)>,
    fct: Vec<Duration>,
    bytes: u64,
    error: Option<FrameError>,
    scratch: Vec<ReceivedFrame>,
}

impl RpcClient {
    #[must_use]
    pub fn new(config: &RpcConfig, start: Instant) -> Self {
        Self {
            config: *config,
            next: 0,
            next_at: (config.count > 0).then_some(start),
            outgoing: VecDeque::new(),
            in_flight: None,
            fct: Vec::new(),
            bytes: 0,
            error: None,
            scratch: Vec::new(),
        }
    }

    #[must_use]
    pub fn outcome(&self) -> TransferOutcome {
        TransferOutcome {
            expected: u64::from(self.config.count),
            fct: self.fct.clone(),
            bytes_received: self.bytes,
            error: self.error.clone(),
        }
    }

    fn receive(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let Some((i, written, incoming)) = &mut self.in_flight else {
            return Err(unexpected(stream));
        };
        if stream != StreamKey::Local(*i) {
            return Err(unexpected(stream));
        }
        self.bytes += data.len() as u64;
        if incoming.push(now, data, fin, &mut self.scratch)?.is_some() {
            self.fct.push(now.saturating_duration_since(*written));
            self.next += 1;
            self.next_at =
                (self.next < u64::from(self.config.count)).then(|| now + self.config.think);
            self.in_flight = None;
        }
        Ok(())
    }
}

impl StreamApp for RpcClient {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        if max == 0 {
            return None;
        }
        if self.next_at.is_some_and(|t| t <= now) {
            self.next_at = None;
            let i = self.next;
            let source =
                FrameSource::new(FrameKind::Request, i, now, payload_len(self.config.request));
            self.outgoing.push_back((StreamKey::Local(i), source));
            self.in_flight = Some((i, now, Incoming::new(i)));
        }
        write_front(&mut self.outgoing, max)
    }

    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let r = self.receive(now, stream, data, fin);
        keep_first_error(&mut self.error, r)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.next_at
    }

    fn finish(&mut self, _now: Instant) {}
}

/// The server side of request/response pairs (RPC, VoD segments): one request frame on each
/// stream the peer opens, answered on that stream with one frame whose payload length the
/// caller decides from the request.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    requests: BTreeMap<u64, Incoming>,
    outgoing: VecDeque<(StreamKey, FrameSource)>,
    scratch: Vec<ReceivedFrame>,
}

impl Responder {
    pub(crate) fn poll_write(&mut self, max: usize) -> Option<Write> {
        write_front(&mut self.outgoing, max)
    }

    /// Bytes of request stream `stream` (at most `count` requests); once request i is whole,
    /// queues a response of `answer(i, request)` payload bytes (`answer` may refuse it).
    pub(crate) fn on_request(
        &mut self,
        now: Instant,
        (stream, data, fin): (StreamKey, &[u8], bool),
        count: u64,
        answer: impl FnOnce(u64, &FrameHeader) -> Result<u32, FrameError>,
    ) -> Result<(), FrameError> {
        let StreamKey::Peer(i) = stream else {
            return Err(unexpected(stream));
        };
        if i >= count {
            return Err(FrameError::Protocol(format!(
                "request {i}: only {count} requests are expected"
            )));
        }
        let incoming = self.requests.entry(i).or_insert_with(|| Incoming::new(i));
        let request = incoming.push(now, data, fin, &mut self.scratch)?;
        if fin {
            self.requests.remove(&i);
        }
        if let Some(request) = request {
            let payload = answer(i, &request.header)?;
            let response = FrameSource::new(FrameKind::Delta, i, now, payload);
            self.outgoing.push_back((stream, response));
        }
        Ok(())
    }
}

/// The RPC server: answers each complete request on its stream.
#[derive(Debug)]
pub struct RpcServer {
    config: RpcConfig,
    responder: Responder,
}

impl RpcServer {
    #[must_use]
    pub fn new(config: &RpcConfig) -> Self {
        Self {
            config: *config,
            responder: Responder::default(),
        }
    }
}

impl StreamApp for RpcServer {
    fn poll_write(&mut self, _now: Instant, max: usize) -> Option<Write> {
        self.responder.poll_write(max)
    }

    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        let response = payload_len(self.config.response);
        let count = u64::from(self.config.count);
        self.responder
            .on_request(now, (stream, data, fin), count, |_, _| Ok(response))
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn finish(&mut self, _now: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, pipe};

    #[test]
    fn files_complete_with_their_fct() {
        let cfg = FileConfig {
            size: 10_000,
            count: 3,
            interval: Duration::from_millis(100),
        };
        let mut tx = FileSender::new(&cfg, ms(0));
        let mut rx = FileReceiver::new(&cfg);
        // An ideal pipe that takes 30 ms.
        while let Some(t) = tx.next_wakeup() {
            let sent = pipe(&mut tx, &mut rx, t, t + Duration::from_millis(30));
            assert_eq!(sent, 10_000);
        }
        let o = rx.outcome();
        assert_eq!(o.expected, 3);
        assert_eq!(o.fct, vec![Duration::from_millis(30); 3]);
        assert_eq!(o.bytes_received, 30_000);
        assert_eq!(o.error, None);
    }

    #[test]
    fn file_receiver_rejects_bad_streams() {
        let cfg = FileConfig {
            size: 100,
            count: 1,
            interval: Duration::ZERO,
        };
        let mut rx = FileReceiver::new(&cfg);
        assert!(rx
            .on_stream_bytes(ms(0), StreamKey::Peer(1), b"x", false)
            .is_err());
        let mut rx = FileReceiver::new(&cfg);
        let f = crate::frame::encode_frame(FrameKind::Delta, 0, ms(0), 68);
        rx.on_stream_bytes(ms(1), StreamKey::Peer(0), &f, false)
            .expect("valid");
        let e = rx
            .on_stream_bytes(ms(1), StreamKey::Peer(0), b"extra", true)
            .expect_err("extra bytes");
        assert!(e.to_string().contains("after the end"), "{e}");
        assert!(rx.outcome().error.is_some());
        let mut rx = FileReceiver::new(&cfg);
        assert!(rx
            .on_stream_bytes(ms(1), StreamKey::Peer(0), &[], true)
            .is_err());
    }

    #[test]
    fn rpc_pairs_run_in_sequence_with_think_time() {
        let cfg = RpcConfig {
            request: 200,
            response: 5_000,
            count: 3,
            think: Duration::from_millis(50),
        };
        let mut client = RpcClient::new(&cfg, ms(0));
        let mut server = RpcServer::new(&cfg);
        let mut now = ms(0);
        for round in 0..3u64 {
            assert_eq!(client.next_wakeup(), Some(now), "round {round}");
            // Request: 10 ms one way; response: 10 ms back.
            assert_eq!(
                pipe(
                    &mut client,
                    &mut server,
                    now,
                    now + Duration::from_millis(10)
                ),
                200
            );
            assert_eq!(client.next_wakeup(), None);
            let back = now + Duration::from_millis(10);
            assert_eq!(
                pipe(
                    &mut server,
                    &mut client,
                    back,
                    back + Duration::from_millis(10)
                ),
                5_000
            );
            now = back + Duration::from_millis(10 + 50);
        }
        assert_eq!(client.next_wakeup(), None);
        let o = client.outcome();
        assert_eq!(o.fct, vec![Duration::from_millis(20); 3]);
        assert_eq!(o.bytes_received, 15_000);
        assert_eq!(o.error, None);
    }
}
