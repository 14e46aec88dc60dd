//! The event loop: one UDP socket, the connections found by their connection IDs, quiche's
//! timers and paced packets waited for with the socket's receive timeout.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use boring::pkey::PKey;
use boring::ssl::{SslContextBuilder, SslMethod};
use boring::x509::X509;

use crate::client::{Client, MAX_DATAGRAM};

/// How often a stop signal is looked for while nothing else wakes the loop.
const SIGNAL_POLL: Duration = Duration::from_millis(100);
/// Datagrams read in one go before the connections get to send.
const BATCH: usize = 64;

pub struct Server {
    socket: UdpSocket,
    local: SocketAddr,
    config: quiche::Config,
    h3_config: quiche::h3::Config,
    root: PathBuf,
    qlog_dir: Option<PathBuf>,
    clients: HashMap<u64, Client>,
    /// Connection ID -> key in `clients`.
    ids: HashMap<Vec<u8>, u64>,
    next_key: u64,
}

impl Server {
    pub fn new(
        socket: UdpSocket,
        local: SocketAddr,
        root: PathBuf,
        qlog_dir: Option<PathBuf>,
    ) -> Result<Self> {
        Ok(Self {
            socket,
            local,
            config: quic_config()?,
            h3_config: quiche::h3::Config::new().context("HTTP/3 configuration")?,
            root,
            qlog_dir,
            clients: HashMap::new(),
            ids: HashMap::new(),
            next_key: 0,
        })
    }

    /// Serves until `stop` is set, then closes every connection.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<()> {
        let mut buf = vec![0; 65535];
        while !stop.load(Ordering::Relaxed) {
            let wait = self
                .clients
                .values()
                .filter_map(Client::deadline)
                .min()
                .map_or(SIGNAL_POLL, |t| {
                    t.saturating_duration_since(clock()).min(SIGNAL_POLL)
                });
            self.receive(&mut buf, wait)?;
            let now = clock();
            for client in self.clients.values_mut() {
                client.on_timeout(now);
                client.flush(&self.socket, now, true);
            }
            self.collect_closed();
        }
        let now = clock();
        for client in self.clients.values_mut() {
            client.close();
            client.flush(&self.socket, now, false);
            report(client, "closed at stop");
        }
        Ok(())
    }

    /// Waits up to `wait` for a datagram, then handles it and whatever else is queued.
    fn receive(&mut self, buf: &mut [u8], wait: Duration) -> Result<()> {
        if !wait.is_zero() {
            self.socket
                .set_read_timeout(Some(wait))
                .context("setting the socket's receive timeout")?;
            match self.socket.recv_from(buf) {
                Ok((len, from)) => self.datagram(&mut buf[..len], from),
                Err(e) if is_nothing(&e) => return Ok(()),
                Err(e) => eprintln!("receive failed: {e}"),
            }
        }
        self.socket
            .set_nonblocking(true)
            .context("making the socket non-blocking")?;
        for _ in 0..BATCH {
            match self.socket.recv_from(buf) {
                Ok((len, from)) => self.datagram(&mut buf[..len], from),
                Err(e) if is_nothing(&e) => break,
                Err(e) => eprintln!("receive failed: {e}"),
            }
        }
        self.socket
            .set_nonblocking(false)
            .context("making the socket blocking")
    }

    fn datagram(&mut self, datagram: &mut [u8], from: SocketAddr) {
        let Ok(hdr) = quiche::Header::from_slice(datagram, quiche::MAX_CONN_ID_LEN) else {
            return;
        };
        let key = match self.ids.get(&hdr.dcid[..]) {
            Some(&key) => key,
            None if hdr.ty != quiche::Type::Initial => return,
            None if !quiche::version_is_supported(hdr.version) => {
                let mut out = [0; MAX_DATAGRAM];
                if let Ok(len) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut out) {
                    let _ = self.socket.send_to(&out[..len], from);
                }
                return;
            }
            None => match self.accept(&hdr.dcid, from) {
                Ok(key) => key,
                Err(e) => {
                    eprintln!("refused a connection from {from}: {e:#}");
                    return;
                }
            },
        };
        let info = quiche::RecvInfo {
            from,
            to: self.local,
        };
        if let Some(client) = self.clients.get_mut(&key) {
            client.receive(datagram, info, &self.h3_config, &self.root);
        }
    }

    /// A new connection for a client's first Initial packet, found by a random connection ID
    /// of ours and by the client's original one (its next Initials still carry it). No Retry:
    /// the address is not validated first, as quic-go's and quinn's servers do by default.
    fn accept(&mut self, odcid: &[u8], from: SocketAddr) -> Result<u64> {
        let mut scid = [0; quiche::MAX_CONN_ID_LEN];
        boring::rand::rand_bytes(&mut scid).context("a random connection ID")?;
        let mut conn = quiche::accept(
            &quiche::ConnectionId::from_ref(&scid),
            None,
            self.local,
            from,
            &mut self.config,
        )
        .context("quiche::accept")?;
        let odcid_hex: String = odcid.iter().map(|b| format!("{b:02x}")).collect();
        if let Some(dir) = &self.qlog_dir {
            let path = dir.join(format!("{odcid_hex}_server.sqlog"));
            let file = File::create(&path).with_context(|| format!("qlog {}", path.display()))?;
            conn.set_qlog(
                Box::new(BufWriter::new(file)),
                "quiche-h3-server".into(),
                format!("quiche-h3-server connection {odcid_hex}"),
            );
        }
        let key = self.next_key;
        self.next_key += 1;
        let ids = vec![scid.to_vec(), odcid.to_vec()];
        for id in &ids {
            self.ids.insert(id.clone(), key);
        }
        self.clients.insert(key, Client::new(conn, ids));
        Ok(key)
    }

    /// Drops closed connections (their qlog writers flush as they go), reporting each.
    fn collect_closed(&mut self) {
        let closed: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| c.conn.is_closed())
            .map(|(k, _)| *k)
            .collect();
        for key in closed {
            let Some(client) = self.clients.remove(&key) else {
                continue;
            };
            for id in &client.ids {
                self.ids.remove(id);
            }
            report(&client, "closed");
        }
    }
}

/// One line on a connection that ends: what it sent and lost.
fn report(client: &Client, how: &str) {
    let s = client.conn.stats();
    eprintln!(
        "{} {how}: {} packets sent, {} lost, {} bytes sent",
        client.conn.trace_id(),
        s.sent,
        s.lost,
        s.sent_bytes
    );
}

/// The wall clock: this event loop is real-time I/O, the one place quiche's time comes from.
#[expect(
    clippy::disallowed_methods,
    reason = "the event loop reads the real clock"
)]
fn clock() -> Instant {
    Instant::now()
}

/// Nothing to read (the timeout passed, a signal came, or the non-blocking socket is empty).
fn is_nothing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// quiche's configuration: its defaults for congestion control, loss recovery and pacing, the
/// windows of quiche's example HTTP/3 server, and a self-signed certificate for 127.0.0.1.
fn quic_config() -> Result<quiche::Config> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .context("making the self-signed certificate")?;
    let x509 = X509::from_der(cert.cert.der()).context("certificate")?;
    let key = PKey::private_key_from_pkcs8(&cert.signing_key.serialize_der()).context("key")?;
    let mut tls = SslContextBuilder::new(SslMethod::tls()).context("TLS context")?;
    tls.set_certificate(&x509).context("certificate")?;
    tls.set_private_key(&key).context("key")?;
    let mut config = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, tls)
        .context("QUIC configuration")?;
    config
        .set_application_protos(quiche::h3::APPLICATION_PROTOCOL)
        .context("ALPN")?;
    config.set_max_idle_timeout(30_000);
    config.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    config.set_max_send_udp_payload_size(MAX_DATAGRAM);
    config.set_initial_max_data(10_000_000);
    config.set_initial_max_stream_data_bidi_local(1_000_000);
    config.set_initial_max_stream_data_bidi_remote(1_000_000);
    config.set_initial_max_stream_data_uni(1_000_000);
    config.set_initial_max_streams_bidi(100);
    config.set_initial_max_streams_uni(100);
    config.set_disable_active_migration(true);
    Ok(config)
}
