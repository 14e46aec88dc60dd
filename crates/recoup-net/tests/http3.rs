//! HTTP/3 between `recoup get` and `recoup serve` (the library behind them) on 127.0.0.1:
//! files byte-exact, byte ranges (206 / 416), 404, 403 for a path leaving the root, a live
//! stream frame-exact, hq-interop still served beside HTTP/3, a peer breaking HTTP/3's
//! framing rules closed with the RFC 9114 error code, and WebTransport (extended CONNECT, HTTP
//! Datagrams) spoken byte by byte by a client written here.

use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use recoup_apps::frame::{FrameParser, FRAME_HEADER_LEN};
use recoup_net::tls::{client_tls, Identity};
use recoup_net::url::Url;
use recoup_net::{
    Client, ConnectionHandler, Driver, Error, GetOptions, LiveParams, Protocol, ServeOptions,
    Server, Stopper,
};
use recoup_time::Instant;
use recoup_transport::streams::{StreamEvent, StreamId};
use recoup_transport::{
    ClientConfig, CloseReason, Connection, ConnectionHandle, Endpoint, Event, TransportConfig,
};

/// Bounds every wait: a stalled transfer fails the test instead of hanging it.
fn transport() -> TransportConfig {
    TransportConfig {
        max_idle_timeout: Duration::from_secs(5),
        ..TransportConfig::default()
    }
}

struct Running {
    addr: SocketAddr,
    stopper: Stopper,
    thread: Option<JoinHandle<Result<(), Error>>>,
}

impl Running {
    fn serve(root: &Path) -> Self {
        Self::serve_with(root, transport())
    }

    fn serve_with(root: &Path, transport: TransportConfig) -> Self {
        let server = Server::bind(ServeOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            root: Some(root.to_owned()),
            origin: None,
            live: LiveParams::default(),
            identity: Identity::self_signed(&["localhost"]).expect("certificate"),
            transport,
            qlog: None,
            gso: true,
            retry: recoup_net::server::RetryMode::Off,
            max_connections: None,
            metrics: None,
            workers: 1,
            moq: None,
            live_policy: Default::default(),
            origin_kind: recoup_net::content::ContentKind::File,
        })
        .expect("bind");
        let addr = server.local_addr().expect("addr");
        let stopper = server.stopper();
        let thread = Some(std::thread::spawn(move || server.run()));
        Self {
            addr,
            stopper,
            thread,
        }
    }

    fn get(
        &self,
        path: &str,
        protocol: Option<Protocol>,
        range: Option<&str>,
    ) -> Result<Vec<u8>, Error> {
        let url = Url::parse(&format!("https://{}{path}", self.addr)).expect("url");
        let client = Client::connect(GetOptions {
            urls: vec![url],
            tls: client_tls(None, true, Protocol::offer(protocol)).expect("tls"),
            protocol,
            range: range.map(str::to_owned),
            transport: transport(),
            qlog: None,
            gso: true,
            timeout: std::time::Duration::from_secs(10),
            migrate_after: None,
        })?;
        let mut body = Vec::new();
        client.run(&mut body, &mut |_| {})?;
        Ok(body)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(t) = self.thread.take() {
            let result = t.join().expect("server thread");
            if !std::thread::panicking() {
                result.expect("server");
            }
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

fn root_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, data) in files {
        std::fs::write(dir.path().join(name), data).expect("write");
    }
    dir
}

fn status_of(result: Result<Vec<u8>, Error>) -> (String, String) {
    match result {
        Err(Error::Status { status, path }) => (status, path),
        other => panic!("expected an HTTP error status, got {other:?}"),
    }
}

#[test]
fn files_over_h3_and_hq_from_one_server() {
    let big = pattern(3_000_000);
    let dir = root_with(&[("big.bin", &big), ("index.html", b"<p>hi</p>\n")]);
    let server = Running::serve(dir.path());
    let got = server
        .get("/big.bin", Some(Protocol::H3), None)
        .expect("h3 get");
    assert!(got == big, "HTTP/3 body differs: {} bytes", got.len());
    let got = server
        .get("/big.bin", Some(Protocol::Hq), None)
        .expect("hq get");
    assert!(got == big, "hq-interop body differs: {} bytes", got.len());
    // Offered both, the server picks HTTP/3.
    assert_eq!(
        server.get("/index.html", None, None).expect("small"),
        b"<p>hi</p>\n"
    );
}

#[test]
fn byte_ranges_and_error_statuses() {
    let data = pattern(100);
    let secret = root_with(&[("secret", b"s")]);
    let dir = root_with(&[("f.bin", &data)]);
    #[cfg(unix)]
    std::os::unix::fs::symlink(secret.path().join("secret"), dir.path().join("leak"))
        .expect("symlink");
    let server = Running::serve(dir.path());
    let get = |range| server.get("/f.bin", Some(Protocol::H3), Some(range));
    assert_eq!(get("10-19").expect("a-b"), &data[10..20]);
    assert_eq!(get("90-").expect("a-"), &data[90..]);
    assert_eq!(get("-5").expect("-n"), &data[95..]);
    assert_eq!(get("95-1000").expect("past the end"), &data[95..]);
    assert_eq!(
        status_of(get("100-")),
        ("416 Range Not Satisfiable".into(), "/f.bin".into())
    );
    assert_eq!(
        status_of(server.get("/missing", Some(Protocol::H3), None)),
        ("404 Not Found".into(), "/missing".into())
    );
    for path in ["/../etc/passwd", "/%2e%2e/etc/passwd", "/leak"] {
        let (status, _) = status_of(server.get(path, Some(Protocol::H3), None));
        assert_eq!(status, "403 Forbidden", "{path}");
    }
    assert!(matches!(
        server.get("/f.bin", Some(Protocol::Hq), Some("0-1")),
        Err(Error::Config(_))
    ));
}

/// The live stream's bytes with every frame's capture time zeroed: the rest (sizes, sequence
/// numbers, payloads) is a function of the seed alone.
fn without_capture_times(stream: &[u8]) -> Vec<u8> {
    let mut out = stream.to_vec();
    let mut at = 0;
    while at + FRAME_HEADER_LEN <= out.len() {
        out[at + 16..at + 24].fill(0);
        let len = u32::from_be_bytes(out[at + 24..at + 28].try_into().expect("4 bytes"));
        at += FRAME_HEADER_LEN + len as usize;
    }
    out
}

#[test]
fn live_stream_over_h3_is_frame_exact() {
    let dir = root_with(&[]);
    let server = Running::serve(dir.path());
    let path = "/live/cam?bitrate=2Mbps&fps=30&gop=15&duration=1s&seed=7";
    let got = server.get(path, Some(Protocol::H3), None).expect("live");
    let mut parser = FrameParser::new(Some(0));
    let mut frames = Vec::new();
    parser
        .push(Instant::ZERO, &got, &mut frames)
        .expect("frames parse, checksums and sequence numbers hold");
    parser.finish().expect("the stream ends between frames");
    assert_eq!(frames.len(), 30);
    // The same stream made locally: identical but for the capture times.
    let (_, params) = LiveParams::default().from_request(path).expect("params");
    let mut local = recoup_net::live::LiveStream::new(&params, Instant::ZERO, 0);
    let (want, fin) = local
        .take_due(
            Instant::ZERO + Duration::from_secs(2),
            recoup_transport::streams::StreamId(0),
        )
        .expect("local stream");
    assert!(fin);
    assert!(
        without_capture_times(&got) == without_capture_times(&want),
        "live bytes differ: got {} want {}",
        got.len(),
        want.len()
    );
}

/// A client that opens HTTP/3's control stream and sends `control` on it (RFC 9114 §6.2.1),
/// then waits for the server to close the connection.
struct BadPeer {
    control: Vec<u8>,
    request: Option<Vec<u8>>,
    closed: Option<CloseReason>,
}

impl ConnectionHandler for BadPeer {
    fn accepted(&mut self, _: Instant, _: ConnectionHandle, _: &mut Connection) {}

    fn drive(&mut self, now: Instant, _: ConnectionHandle, conn: &mut Connection) {
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected => {
                    let id = conn.open_stream(false).expect("control stream");
                    let n = conn.stream_write(id, &self.control).expect("write");
                    assert_eq!(n, self.control.len());
                    if let Some(request) = self.request.take() {
                        let id = conn.open_stream(true).expect("request stream");
                        conn.stream_write(id, &request).expect("write");
                        conn.stream_finish(id).expect("fin");
                    }
                }
                Event::Closed(reason) => self.closed = Some(reason),
                Event::Stream(_) | Event::DatagramReceived => {}
            }
        }
        let _ = now;
    }

    fn removed(&mut self, _: ConnectionHandle) {}

    fn finished(&self) -> bool {
        self.closed.is_some()
    }
}

/// Runs `peer` as an HTTP/3 client of `server` until it is finished.
fn run_h3_client(
    peer: &mut impl ConnectionHandler,
    server: SocketAddr,
    transport: TransportConfig,
) {
    let config = ClientConfig {
        transport,
        tls: client_tls(None, true, &[b"h3"]).expect("tls"),
        server_name: "localhost".into(),
    };
    let endpoint = Endpoint::new(None, config.transport.local_cid_len);
    let mut driver =
        Driver::bind("127.0.0.1:0".parse().expect("addr"), endpoint, true).expect("bind");
    let now = driver.clock().now();
    driver
        .endpoint_mut()
        .connect(now, &config, server)
        .expect("connect");
    driver.run(peer, 0).expect("run");
}

fn close_code_for(control: &[u8], request: Option<&[u8]>) -> u64 {
    let dir = root_with(&[]);
    let server = Running::serve(dir.path());
    let mut peer = BadPeer {
        control: control.to_vec(),
        request: request.map(<[u8]>::to_vec),
        closed: None,
    };
    run_h3_client(&mut peer, server.addr, transport());
    match peer.closed {
        Some(CloseReason::Remote(e)) if e.application => e.code,
        other => panic!("expected the server to close with an HTTP/3 code, got {other:?}"),
    }
}

/// Control stream type 0x00, then frames (type, length, payload).
const CONTROL: u8 = 0x00;
const SETTINGS_EMPTY: [u8; 2] = [0x04, 0x00];

#[test]
fn http3_framing_errors_close_with_rfc_9114_codes() {
    // §6.2.1: the first frame on the control stream must be SETTINGS: H3_MISSING_SETTINGS.
    assert_eq!(close_code_for(&[CONTROL, 0x07, 0x01, 0x00], None), 0x10a);
    // §7.2.1: DATA is not allowed on the control stream: H3_FRAME_UNEXPECTED.
    let mut data_on_control = vec![CONTROL];
    data_on_control.extend_from_slice(&SETTINGS_EMPTY);
    data_on_control.extend_from_slice(&[0x00, 0x01, 0xff]);
    assert_eq!(close_code_for(&data_on_control, None), 0x105);
    // §7.2.4.1: a setting sent twice: H3_SETTINGS_ERROR.
    let twice = [CONTROL, 0x04, 0x04, 0x06, 0x10, 0x06, 0x10];
    assert_eq!(close_code_for(&twice, None), 0x109);
}

#[test]
fn qpack_garbage_closes_with_rfc_9204_code() {
    let mut control = vec![CONTROL];
    control.extend_from_slice(&SETTINGS_EMPTY);
    // A HEADERS frame whose field section refers to a dynamic table entry that does not
    // exist (Required Insert Count 1 with a table capacity of 0): RFC 9204 §2.2.3 makes it
    // QPACK_DECOMPRESSION_FAILED.
    let headers = [0x01, 0x03, 0x02, 0x00, 0x80];
    assert_eq!(close_code_for(&control, Some(&headers)), 0x200);
}

/// A WebTransport client written byte by byte: SETTINGS on its control stream, requests on
/// bidirectional streams (QPACK with the static table only, RFC 9204 §4.5), then, once the
/// last request's response begins, `then` on that stream and `datagrams` as QUIC DATAGRAMs.
struct WtPeer {
    settings: Vec<u8>,
    requests: Vec<Vec<u8>>,
    then: Vec<u8>,
    datagrams: Vec<Vec<u8>>,
    last: Option<StreamId>,
    received: std::collections::HashMap<u64, (Vec<u8>, bool)>,
    resets: Vec<(u64, u64)>,
    echoed: Vec<Vec<u8>>,
    closed: Option<CloseReason>,
    done: fn(&WtPeer) -> bool,
}

impl WtPeer {
    fn new(settings: Vec<u8>, requests: Vec<Vec<u8>>, done: fn(&WtPeer) -> bool) -> Self {
        Self {
            settings,
            requests,
            then: Vec::new(),
            datagrams: Vec::new(),
            last: None,
            received: std::collections::HashMap::new(),
            resets: Vec::new(),
            echoed: Vec::new(),
            closed: None,
            done,
        }
    }

    /// The first field line of the response on stream `id`, which names its status (RFC 9204
    /// Appendix A: index 25 is `:status 200`, 27 `:status 404`).
    fn status_line(&self, id: u64) -> Option<u8> {
        let (bytes, _) = self.received.get(&id)?;
        // HEADERS (type 1), a one-byte length, the prefix (2 bytes), the first field line.
        (bytes.first() == Some(&0x01)).then(|| bytes.get(4).copied())?
    }

    /// Runs the peer against `server`, announcing DATAGRAM support (RFC 9221 §3).
    fn run(mut self, server: SocketAddr) -> Self {
        run_h3_client(&mut self, server, webtransport_transport());
        self
    }
}

impl ConnectionHandler for WtPeer {
    fn accepted(&mut self, _: Instant, _: ConnectionHandle, _: &mut Connection) {}

    fn drive(&mut self, now: Instant, _: ConnectionHandle, conn: &mut Connection) {
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Connected => {
                    let control = conn.open_stream(false).expect("control stream");
                    conn.stream_write(control, &self.settings).expect("write");
                    for request in std::mem::take(&mut self.requests) {
                        let id = conn.open_stream(true).expect("request stream");
                        conn.stream_write(id, &request).expect("write");
                        self.last = Some(id);
                    }
                }
                Event::Closed(reason) => self.closed = Some(reason),
                Event::Stream(StreamEvent::Reset { id, code }) => self.resets.push((id.0, code)),
                Event::Stream(_) => {}
                Event::DatagramReceived => {
                    while let Some(d) = conn.datagram_recv() {
                        self.echoed.push(d.to_vec());
                    }
                }
            }
        }
        let mut buf = vec![0; 65536];
        for id in conn.readable_streams() {
            while let Ok((n, fin)) = conn.stream_read(id, &mut buf) {
                let entry = self.received.entry(id.0).or_default();
                entry.0.extend_from_slice(&buf[..n]);
                entry.1 |= fin;
                if n == 0 || fin {
                    break;
                }
            }
        }
        if let Some(id) = self.last {
            if self.received.contains_key(&id.0) {
                if !self.then.is_empty() {
                    let then = std::mem::take(&mut self.then);
                    conn.stream_write(id, &then).expect("write");
                }
                for d in self.datagrams.drain(..) {
                    conn.datagram_send(now, d.into()).expect("datagram");
                }
            }
        }
    }

    fn removed(&mut self, _: ConnectionHandle) {}

    fn finished(&self) -> bool {
        self.closed.is_some() || (self.done)(self)
    }
}

fn varint(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    recoup_transport::coding::BufMutExt::put_varint(&mut out, v);
    out
}

fn h3_frame(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = varint(kind);
    out.extend(varint(payload.len() as u64));
    out.extend_from_slice(payload);
    out
}

/// A control stream: its type, then SETTINGS with `settings` (identifier, value).
fn control_stream(settings: &[(u64, u64)]) -> Vec<u8> {
    let payload: Vec<u8> = settings
        .iter()
        .flat_map(|&(id, v)| [varint(id), varint(v)].concat())
        .collect();
    [vec![CONTROL], h3_frame(0x04, &payload)].concat()
}

/// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220 §3), SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1) and
/// SETTINGS_ENABLE_WEBTRANSPORT (draft-ietf-webtrans-http3-02).
const WEBTRANSPORT_SETTINGS: [(u64, u64); 3] = [(0x08, 1), (0x33, 1), (0x2b60_3742, 1)];

/// A string literal of QPACK with a `prefix`-bit length (RFC 9204 §4.1.2), no Huffman coding.
fn qpack_literal(first: u8, prefix: u32, text: &str) -> Vec<u8> {
    let max = (1u8 << prefix) - 1;
    let len = text.len();
    let mut out = if len < usize::from(max) {
        vec![first | len as u8]
    } else {
        vec![first | max, (len - usize::from(max)) as u8]
    };
    out.extend_from_slice(text.as_bytes());
    out
}

/// HEADERS of a request: `method` (a static table index), `path`, and for CONNECT `:protocol`.
fn request(method_index: u8, path: &str, protocol: Option<&str>) -> Vec<u8> {
    // Required Insert Count 0, Delta Base 0; indexed static lines (§4.5.2): the method and
    // :scheme https (23); literals with a static name reference (§4.5.4): :authority (0) and
    // :path (1); a literal with a literal name (§4.5.6): :protocol.
    let mut fields = vec![0x00, 0x00, 0xc0 | method_index, 0xc0 | 23];
    fields.push(0x50);
    fields.extend(qpack_literal(0, 7, "localhost"));
    fields.push(0x51);
    fields.extend(qpack_literal(0, 7, path));
    if let Some(p) = protocol {
        fields.extend(qpack_literal(0x20, 3, ":protocol"));
        fields.extend(qpack_literal(0, 7, p));
    }
    h3_frame(0x01, &fields)
}

/// QPACK static table (RFC 9204 Appendix A): `:method CONNECT`, `:method GET`, `:status 200`,
/// `:status 404` as indexed field lines.
const CONNECT: u8 = 15;
const GET: u8 = 17;
const STATUS_200: u8 = 0xc0 | 25;
const STATUS_404: u8 = 0xc0 | 27;

fn webtransport_transport() -> TransportConfig {
    let mut t = transport();
    t.datagrams.max_frame_size = 65535;
    t
}

#[test]
fn webtransport_sessions_over_extended_connect_with_http_datagrams() {
    let dir = root_with(&[]);
    let server = Running::serve_with(dir.path(), webtransport_transport());
    // A GET on stream 0 (404: no such file), then a session at an unknown path on stream 4
    // (404), then the echo session on stream 8, with a datagram for it (Quarter Stream ID 2)
    // and one for stream 4, which has no session (dropped, RFC 9297 §2.1).
    let mut peer = WtPeer::new(
        control_stream(&WEBTRANSPORT_SETTINGS),
        vec![
            request(GET, "/missing", None),
            request(CONNECT, "/elsewhere", Some("webtransport")),
            request(CONNECT, "/webtransport/echo", Some("webtransport")),
        ],
        |p| !p.echoed.is_empty() && p.received.len() >= 3,
    );
    peer.datagrams = vec![
        [&[1][..], b"no session"].concat(),
        [&[2][..], b"echo me"].concat(),
    ];
    let peer = peer.run(server.addr);
    assert!(peer.closed.is_none(), "{:?}", peer.closed);
    assert_eq!(peer.status_line(0), Some(STATUS_404));
    assert_eq!(peer.status_line(4), Some(STATUS_404));
    assert_eq!(peer.status_line(8), Some(STATUS_200));
    assert_eq!(peer.echoed, [[&[2][..], b"echo me"].concat()]);
}

#[test]
fn webtransport_bad_input_is_answered_with_its_error_code() {
    let dir = root_with(&[]);
    let server = Running::serve_with(dir.path(), webtransport_transport());
    // A client whose SETTINGS offer no WebTransport: the session is refused, the connection
    // closed with H3_SETTINGS_ERROR (h3-webtransport's answer).
    let peer = WtPeer::new(
        control_stream(&[(0x08, 1)]),
        vec![request(CONNECT, "/webtransport/echo", Some("webtransport"))],
        |_| false,
    )
    .run(server.addr);
    match peer.closed {
        Some(CloseReason::Remote(e)) if e.application => assert_eq!(e.code, 0x109),
        other => panic!("expected H3_SETTINGS_ERROR, got {other:?}"),
    }
    // A CLOSE_WEBTRANSPORT_SESSION too short for its error code: the CONNECT stream is reset
    // with H3_MESSAGE_ERROR (RFC 9297 §3.3); the connection stays.
    let mut peer = WtPeer::new(
        control_stream(&WEBTRANSPORT_SETTINGS),
        vec![request(CONNECT, "/webtransport/echo", Some("webtransport"))],
        |p| !p.resets.is_empty(),
    );
    peer.then = h3_frame(0x00, &[0x68, 0x43, 0x02, 0x00, 0x01]);
    let peer = peer.run(server.addr);
    assert!(peer.closed.is_none(), "{:?}", peer.closed);
    assert_eq!(peer.status_line(0), Some(STATUS_200));
    assert_eq!(peer.resets, [(0, 0x10e)]);
}
