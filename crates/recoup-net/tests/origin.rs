//! `recoup serve --origin`: a server relaying a local HTTP/1.1 origin (a small server on std's
//! TcpListener in this test) to `recoup get`'s client over QUIC, once over hq-interop and once
//! over HTTP/3. A file arrives byte for byte; a growing chunked stream is relayed as it grows
//! (the origin holds back its second part until the client has received the first, so a relay
//! that waited for the whole body would never finish); a 404 reaches the client (hq: a reset,
//! HTTP/3: the status), and an origin that breaks off or cannot be reached fails the download.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use recoup_net::tls::{self, Identity};
use recoup_net::url::Url;
use recoup_net::{Client, Error, GetOptions, LiveParams, Protocol, ServeOptions, Server, Stopper};
use recoup_transport::TransportConfig;

const FILE_LEN: usize = 3 * 1024 * 1024 + 17;
const PART_LEN: usize = 200_000;
/// How long the origin waits for the client to see the first part of the growing stream.
const STREAM_WAIT: Duration = Duration::from_secs(20);
/// How long the origin waits for the relay's next request.
const ORIGIN_WAIT: Duration = Duration::from_secs(30);

fn body(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The origin: `/file.bin` with Content-Length, `/grow` chunked in two parts (the second once
/// `first_part_seen` fires), `/cut` a Content-Length the body never reaches, anything else 404.
fn origin(first_part_seen: mpsc::Receiver<()>) -> (SocketAddr, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind origin");
    let addr = listener.local_addr().expect("addr");
    let thread = std::thread::spawn(move || {
        let mut paths = Vec::new();
        // Four requests in this test, one at a time.
        for _ in 0..4 {
            let Some(mut stream) = accept_within(&listener, ORIGIN_WAIT) else {
                return paths;
            };
            let path = request_path(&stream);
            paths.push(path.clone());
            match path.as_str() {
                "/media/file.bin" => {
                    let data = body(FILE_LEN, 1);
                    write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {FILE_LEN}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
                    )
                    .expect("head");
                    stream.write_all(&data).expect("body");
                }
                "/media/grow?fps=30" => {
                    let data = body(2 * PART_LEN, 2);
                    stream
                        .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
                        .expect("head");
                    write_chunk(&mut stream, &data[..PART_LEN]);
                    // A live origin: the rest does not exist yet.
                    if first_part_seen.recv_timeout(STREAM_WAIT).is_err() {
                        return paths;
                    }
                    write_chunk(&mut stream, &data[PART_LEN..]);
                    stream.write_all(b"0\r\n\r\n").expect("last chunk");
                }
                "/media/cut" => {
                    stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this")
                        .expect("cut");
                }
                _ => {
                    stream
                        .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
                        .expect("404");
                }
            }
        }
        paths
    });
    (addr, thread)
}

/// The origin's next connection, or `None` after `wait` without one: a request that never
/// reaches the origin fails the test's check of the paths seen instead of hanging it.
fn accept_within(listener: &TcpListener, wait: Duration) -> Option<TcpStream> {
    const POLL: Duration = Duration::from_millis(5);
    listener.set_nonblocking(true).expect("non-blocking origin");
    // Counted polls rather than a clock: each sleeps at least POLL.
    for _ in 0..=wait.as_millis() / POLL.as_millis() {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).expect("blocking stream");
                return Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => panic!("origin accept: {e}"),
        }
    }
    None
}

fn request_path(stream: &TcpStream) -> String {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("request line");
    let path = line.split(' ').nth(1).expect("path").to_owned();
    // The headers, up to the blank line.
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).expect("header") == 0 || header == "\r\n" {
            return path;
        }
    }
}

fn write_chunk(stream: &mut TcpStream, data: &[u8]) {
    write!(stream, "{:x}\r\n", data.len()).expect("chunk size");
    stream.write_all(data).expect("chunk");
    stream.write_all(b"\r\n").expect("chunk end");
    stream.flush().expect("flush");
}

struct Running {
    addr: SocketAddr,
    stopper: Stopper,
    thread: JoinHandle<()>,
}

fn serve(origin: &str) -> Running {
    let server = Server::bind(ServeOptions {
        listen: "127.0.0.1:0".parse().expect("addr"),
        root: None,
        origin: Some(origin.to_owned()),
        live: LiveParams::default(),
        identity: Identity::self_signed(&["localhost"]).expect("cert"),
        transport: TransportConfig::default(),
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
    .expect("bind server");
    let addr = server.local_addr().expect("addr");
    let stopper = server.stopper();
    let thread = std::thread::spawn(move || server.run().expect("serve"));
    Running {
        addr,
        stopper,
        thread,
    }
}

impl Running {
    fn stop(self) {
        self.stopper.stop();
        self.thread.join().expect("server thread");
    }
}

/// `GET path` through the relay; `progress` sees the byte count as it grows.
fn get(
    protocol: Protocol,
    server: SocketAddr,
    path: &str,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<u8>, Error> {
    let client = Client::connect(GetOptions {
        urls: vec![Url::parse(&format!("https://localhost:{}{path}", server.port())).expect("url")],
        tls: tls::client_tls(None, true, Protocol::offer(Some(protocol))).expect("tls"),
        protocol: Some(protocol),
        range: None,
        transport: TransportConfig::default(),
        qlog: None,
        gso: true,
        timeout: std::time::Duration::from_secs(10),
        migrate_after: None,
    })?;
    let mut out = Vec::new();
    client.run(&mut out, progress)?;
    Ok(out)
}

/// Whether `result` is the failure of a download whose origin failed: a reset over hq-interop,
/// a status (or a reset midway) over HTTP/3.
fn origin_failed(protocol: Protocol, result: &Result<Vec<u8>, Error>, status: &str) -> bool {
    match (protocol, result) {
        (_, Err(Error::Refused(why))) => why.contains("reset"),
        (Protocol::H3, Err(Error::Connection(why))) => why.contains("reset: H3_INTERNAL_ERROR"),
        (Protocol::H3, Err(Error::Status { status: s, .. })) => s.starts_with(status),
        _ => false,
    }
}

#[test]
fn relays_over_hq_interop() {
    relays_files_and_growing_streams_byte_for_byte(Protocol::Hq);
}

#[test]
fn relays_over_http3() {
    relays_files_and_growing_streams_byte_for_byte(Protocol::H3);
}

fn relays_files_and_growing_streams_byte_for_byte(protocol: Protocol) {
    let (seen_tx, seen_rx) = mpsc::channel();
    let (origin_addr, origin_thread) = origin(seen_rx);
    let server = serve(&format!("http://{origin_addr}/media/"));

    let file =
        get(protocol, server.addr, "/file.bin", &mut |_| {}).expect("file through the relay");
    assert_eq!(file.len(), FILE_LEN);
    assert!(file == body(FILE_LEN, 1), "the relayed file differs");

    let mut signalled = false;
    let grown = get(protocol, server.addr, "/grow?fps=30", &mut |n| {
        if n >= PART_LEN as u64 && !signalled {
            signalled = true;
            seen_tx.send(()).ok();
        }
    })
    .expect("growing stream through the relay");
    assert!(
        signalled,
        "the first part never reached the client on its own"
    );
    assert!(grown == body(2 * PART_LEN, 2), "the relayed stream differs");

    for (path, status) in [("/missing", "404"), ("/cut", "")] {
        let result = get(protocol, server.addr, path, &mut |_| {});
        assert!(
            origin_failed(protocol, &result, status),
            "{protocol:?} {path}: {result:?}"
        );
    }
    server.stop();
    assert_eq!(
        origin_thread.join().expect("origin thread"),
        [
            "/media/file.bin",
            "/media/grow?fps=30",
            "/media/missing",
            "/media/cut"
        ]
    );
}

#[test]
fn an_unreachable_origin_fails_the_download() {
    // A TCP socket bound but never listening holds its port for the whole test, so no origin
    // another test starts meanwhile can take it, and a connection there is refused. (A port
    // that was merely free a moment ago was handed to the relay test's origin when both ran
    // at once.)
    let holder = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("tcp socket");
    holder
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind without listening");
    let port = holder
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("bound address")
        .port();
    let server = serve(&format!("http://127.0.0.1:{port}"));
    for protocol in [Protocol::Hq, Protocol::H3] {
        let result = get(protocol, server.addr, "/anything", &mut |_| {});
        assert!(
            origin_failed(protocol, &result, "502"),
            "{protocol:?}: {result:?}"
        );
    }
    server.stop();
    drop(holder);
}

#[test]
fn a_root_and_an_origin_exclude_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Server::bind(ServeOptions {
        listen: "127.0.0.1:0".parse().expect("addr"),
        root: Some(dir.path().to_owned()),
        origin: Some("http://127.0.0.1:1".into()),
        live: LiveParams::default(),
        identity: Identity::self_signed(&["localhost"]).expect("cert"),
        transport: TransportConfig::default(),
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
    .map(|_| ())
    .expect_err("both accepted");
    assert!(e.to_string().contains("exclude"), "{e}");
}
