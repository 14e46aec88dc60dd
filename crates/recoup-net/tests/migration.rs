//! Connection migration and NAT rebinding over real loopback sockets (RFC 9000 §9): a download
//! whose client moves to a new port mid-transfer, and one whose client's source port is changed
//! by a NAT-like relay the client does not know about, both complete byte-exact.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use recoup_net::tls::{client_tls, Identity};
use recoup_net::url::Url;
use recoup_net::{Client, GetOptions, LiveParams, Protocol, ServeOptions, Server, Stopper};
use recoup_transport::TransportConfig;

const FILE_LEN: usize = 24 * 1024 * 1024;

struct RunningServer {
    addr: SocketAddr,
    /// Where its metrics are served (with several workers).
    metrics: Option<SocketAddr>,
    stopper: Stopper,
    thread: JoinHandle<()>,
    _root: tempfile::TempDir,
    body: Vec<u8>,
}

fn start_server(workers: usize) -> RunningServer {
    let root = tempfile::tempdir().expect("tempdir");
    // Bytes that differ with their position (a misplaced chunk shows), without a random source.
    let body: Vec<u8> = (0..FILE_LEN as u64)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect();
    std::fs::write(root.path().join("big.bin"), &body).expect("write file");
    let options = ServeOptions {
        listen: "127.0.0.1:0".parse().expect("addr"),
        root: Some(root.path().to_path_buf()),
        live: LiveParams::default(),
        identity: Identity::self_signed(&["localhost"]).expect("identity"),
        transport: TransportConfig::default(),
        qlog: None,
        gso: true,
        origin: None,
        retry: recoup_net::server::RetryMode::Off,
        max_connections: None,
        metrics: (workers > 1).then(|| "127.0.0.1:0".parse().expect("addr")),
        workers,
        moq: None,
        live_policy: Default::default(),
        origin_kind: recoup_net::content::ContentKind::File,
    };
    let server = Server::bind(options).expect("bind server");
    let addr = server.local_addr().expect("addr");
    let metrics = server.metrics_addr();
    let stopper = server.stopper();
    let thread = std::thread::spawn(move || server.run().expect("server run"));
    RunningServer {
        addr,
        metrics,
        stopper,
        thread,
        _root: root,
        body,
    }
}

impl RunningServer {
    fn stop(self) {
        self.stopper.stop();
        self.thread.join().expect("server thread");
    }
}

fn download(to: SocketAddr, migrate_after: Option<Duration>) -> (Vec<u8>, Option<u64>) {
    let url = Url::parse(&format!("https://127.0.0.1:{}/big.bin", to.port())).expect("url");
    let client = Client::connect(GetOptions {
        urls: vec![url],
        tls: client_tls(None, true, Protocol::offer(None)).expect("tls"),
        protocol: None,
        range: None,
        transport: TransportConfig::default(),
        qlog: None,
        gso: true,
        timeout: Duration::from_secs(10),
        migrate_after,
    })
    .expect("connect");
    let mut out = Vec::new();
    let d = client.run(&mut out, &mut |_| {}).expect("download");
    (out, d.migrated_at)
}

/// RFC 9000 §9.2, §9.5: `get --migrate-after` moves to a new local socket mid-transfer (the old
/// one closes) with a new connection ID; the server routes by that ID, follows the client to
/// its new port, and the download completes byte-exact.
#[test]
fn client_migration_mid_transfer_completes_byte_exact() {
    let server = start_server(1);
    let (got, migrated_at) = download(server.addr, Some(Duration::from_millis(20)));
    let at = migrated_at.expect("the transfer ended before the migration");
    println!("migrated after {at} of {FILE_LEN} bytes");
    assert!(at < FILE_LEN as u64, "nothing left to send on the new path");
    assert_eq!(got.len(), server.body.len());
    assert!(got == server.body, "bytes differ");
    server.stop();
}

/// A UDP relay that plays a NAT: the client talks to `listen`; the relay forwards from an
/// upstream socket and, once it carried `rebind_after` bytes to the client (mid-transfer, after
/// the handshake: RFC 9000 §9 expects stable addresses during it), moves to a new upstream
/// socket (a new source port) and closes the old one. The client never learns of it.
struct Nat {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<u64>,
}

impl Nat {
    /// Rebinds each time it carried another `rebind_after` bytes, `rebinds` times in all.
    fn start(server: SocketAddr, rebind_after: u64, rebinds: u32) -> Self {
        let listen = UdpSocket::bind("127.0.0.1:0").expect("bind");
        listen.set_nonblocking(true).expect("nonblocking");
        let addr = listen.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let upstream = || {
                let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
                s.set_nonblocking(true).expect("nonblocking");
                s
            };
            let mut up = upstream();
            let mut client: Option<SocketAddr> = None;
            let mut carried = 0;
            let mut rebound = 0;
            let mut after_rebinding = 0;
            let mut buf = vec![0u8; 65536];
            while !flag.load(Ordering::Relaxed) {
                let mut idle = true;
                while let Ok((n, from)) = listen.recv_from(&mut buf) {
                    idle = false;
                    client = Some(from);
                    let _ = up.send_to(&buf[..n], server);
                }
                while let Ok((n, _)) = up.recv_from(&mut buf) {
                    idle = false;
                    if let Some(c) = client {
                        let _ = listen.send_to(&buf[..n], c);
                        carried += n as u64;
                        if rebound > 0 {
                            after_rebinding += n as u64;
                        }
                    }
                }
                if rebound < rebinds && carried >= rebind_after * u64::from(rebound + 1) {
                    // The old mapping is gone: replies to it are lost.
                    up = upstream();
                    rebound += 1;
                }
                if idle {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            after_rebinding
        });
        Self { addr, stop, thread }
    }

    /// Stops the relay; returns the bytes it carried to the client after rebinding.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("nat thread")
    }
}

/// RFC 9000 §9.3: the client's source port changes under it (NAT rebinding). The server sees
/// the client's next packets come from a new address, validates it, moves there, and the
/// download completes byte-exact.
#[test]
fn nat_rebinding_mid_transfer_completes_byte_exact() {
    let server = start_server(1);
    let nat = Nat::start(server.addr, 4 * 1024 * 1024, 1);
    let (got, _) = download(nat.addr, None);
    let after = nat.stop();
    println!("{after} bytes reached the client after the rebinding");
    // The server only reaches the new mapping once it followed the client there.
    assert!(after > 1_000_000, "only {after} bytes after the rebinding");
    assert_eq!(got.len(), server.body.len());
    assert!(got == server.body, "bytes differ");
    server.stop();
}

/// A counter of the server's metrics, from `/metrics`.
fn counter(metrics: SocketAddr, name: &str) -> f64 {
    let text = ureq::get(&format!("http://{metrics}/metrics"))
        .call()
        .expect("metrics")
        .body_mut()
        .read_to_string()
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

/// Two workers on one port (SO_REUSEPORT): the kernel hashes each new source port of a
/// rebinding NAT to either socket; the worker that gets a datagram of the other's connection
/// reads the owner from the connection ID and passes it on, and the download completes
/// byte-exact. Ten rebindings: the chance that none lands on the other worker is 2^-10.
#[test]
fn with_two_workers_rebindings_reach_the_worker_that_owns_the_connection() {
    let server = start_server(2);
    let nat = Nat::start(server.addr, 2 * 1024 * 1024, 10);
    let (got, _) = download(nat.addr, None);
    let after = nat.stop();
    println!("{after} bytes reached the client after the first rebinding");
    assert_eq!(got.len(), server.body.len());
    assert!(got == server.body, "bytes differ");
    let metrics = server.metrics.expect("metrics");
    let passed = counter(metrics, "recoup_datagrams_passed_total");
    println!("{passed} datagrams passed between the workers");
    assert!(passed > 0.0, "no datagram reached the other worker");
    server.stop();
}

/// Two workers: a client that migrates mid-transfer (a new socket, RFC 9000 §9.2) reaches its
/// connection's worker whichever socket the kernel picks, and the download completes.
#[test]
fn with_two_workers_client_migration_completes_byte_exact() {
    let server = start_server(2);
    let (got, migrated_at) = download(server.addr, Some(Duration::from_millis(20)));
    assert!(
        migrated_at.is_some(),
        "the transfer ended before the migration"
    );
    assert_eq!(got.len(), server.body.len());
    assert!(got == server.body, "bytes differ");
    server.stop();
}
