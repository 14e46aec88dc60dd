//! HTTP/3 between `recoup get` and `recoup serve` (the library behind them) on 127.0.0.1:
//! files byte-exact, byte ranges (206 / 416), 404, 403 for a path leaving the root, a live
//! stream frame-exact, hq-interop still served beside HTTP/3, and a peer breaking HTTP/3's
//! framing rules closed with the RFC 9114 error code.

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
        let server = Server::bind(ServeOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            root: Some(root.to_owned()),
            origin: None,
            live: LiveParams::default(),
            identity: Identity::self_signed(&["localhost"]).expect("certificate"),
            transport: transport(),
            qlog: None,
            gso: true,
            retry: recoup_net::server::RetryMode::Off,
            max_connections: None,
            metrics: None,
            workers: 1,
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

fn close_code_for(control: &[u8], request: Option<&[u8]>) -> u64 {
    let dir = root_with(&[]);
    let server = Running::serve(dir.path());
    let config = ClientConfig {
        transport: transport(),
        tls: client_tls(None, true, &[b"h3"]).expect("tls"),
        server_name: "localhost".into(),
    };
    let endpoint = Endpoint::new(None, config.transport.local_cid_len);
    let mut driver =
        Driver::bind("127.0.0.1:0".parse().expect("addr"), endpoint, true).expect("bind");
    let now = driver.clock().now();
    driver
        .endpoint_mut()
        .connect(now, &config, server.addr)
        .expect("connect");
    let mut peer = BadPeer {
        control: control.to_vec(),
        request: request.map(<[u8]>::to_vec),
        closed: None,
    };
    driver.run(&mut peer, 0).expect("run");
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
