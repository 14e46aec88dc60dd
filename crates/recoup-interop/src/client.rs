//! hq-interop downloads with the unmodified quinn client: several files on one connection,
//! each on its own stream, optionally with a key update or an active migration (the QUIC interop
//! runner's `transfer`, `multiplexing`, `keyupdate` and `connectionmigration` test cases).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::error::Error;
use crate::tls;

/// What one download measured.
#[derive(Clone, Copy, Debug)]
pub struct Download {
    pub bytes: u64,
    /// From the connection attempt to the last byte.
    pub elapsed: Duration,
}

impl Download {
    /// Application bytes per second, in Mbit/s.
    #[must_use]
    pub fn goodput_mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }
}

/// `https://HOST:PORT/PATH` split into an address, a server name and a path.
pub fn parse_url(url: &str) -> Result<(SocketAddr, String, String), Error> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| Error::Usage(format!("{url}: not an https:// URL")))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| Error::Usage(format!("{url}: {e}")))?
        .next()
        .ok_or_else(|| Error::Usage(format!("{url}: no address")))?;
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    Ok((addr, host.to_owned(), path.to_owned()))
}

/// What a connection does besides downloading.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Update the 1-RTT keys once data flows (RFC 9001 §6).
    pub key_update: bool,
    /// Move to a new local socket once data flows (RFC 9000 §9).
    pub migrate: bool,
    /// Send without GSO, so a loopback capture shows each datagram (not one per batch).
    pub no_gso: bool,
}

/// Downloads `path` from `addr` over hq-interop into `out`, then closes the connection.
pub async fn get(
    addr: SocketAddr,
    server_name: &str,
    path: &str,
    out: &Path,
) -> Result<Download, Error> {
    get_all(
        addr,
        server_name,
        &[(path.to_owned(), out.to_owned())],
        Options::default(),
    )
    .await
}

/// Downloads every `(path, output)` over one connection, all streams at once, then closes it.
pub async fn get_all(
    addr: SocketAddr,
    server_name: &str,
    requests: &[(String, std::path::PathBuf)],
    options: Options,
) -> Result<Download, Error> {
    let bind: SocketAddr = if addr.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    }
    .parse()
    .map_err(|_| Error::Usage("bind address".into()))?;
    let mut endpoint = quinn::Endpoint::client(bind).map_err(Error::io("client socket"))?;
    let mut config = tls::insecure_client(tls::ALPN)?;
    if options.no_gso {
        let mut transport = quinn::TransportConfig::default();
        transport.enable_segmentation_offload(false);
        config.transport_config(std::sync::Arc::new(transport));
    }
    endpoint.set_default_client_config(config);
    let start = tokio::time::Instant::now();
    let conn = endpoint.connect(addr, server_name)?.await?;
    let events = std::sync::Arc::new(Events {
        fired: AtomicBool::new(false),
        options,
        endpoint: endpoint.clone(),
        conn: conn.clone(),
        bind,
    });
    let mut downloads = tokio::task::JoinSet::new();
    for (path, out) in requests {
        let (path, out, events) = (path.clone(), out.clone(), events.clone());
        downloads.spawn(async move { fetch(&path, &out, &events).await });
    }
    let mut bytes = 0u64;
    for r in downloads.join_all().await {
        bytes += r?;
    }
    let elapsed = start.elapsed();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    Ok(Download { bytes, elapsed })
}

/// What happens once, when the first data arrives.
struct Events {
    fired: AtomicBool,
    options: Options,
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    bind: SocketAddr,
}

impl Events {
    fn on_data(&self) -> Result<(), Error> {
        if self.fired.swap(true, Ordering::Relaxed) {
            return Ok(());
        }
        if self.options.key_update {
            self.conn.force_key_update();
        }
        if self.options.migrate {
            let socket =
                std::net::UdpSocket::bind(self.bind).map_err(Error::io("migration socket"))?;
            self.endpoint
                .rebind(socket)
                .map_err(Error::io("migrating to a new socket"))?;
        }
        Ok(())
    }
}

/// One request on its own bidirectional stream, body into `out`.
async fn fetch(path: &str, out: &Path, events: &Events) -> Result<u64, Error> {
    let (mut send, mut recv) = events.conn.open_bi().await?;
    send.write_all(format!("GET {path}\r\n").as_bytes()).await?;
    send.finish()
        .map_err(|e| Error::Usage(format!("finish: {e}")))?;
    let mut file = create_output(out).await?;
    let mut bytes = 0u64;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await? {
        events.on_data()?;
        bytes += chunk.bytes.len() as u64;
        file.write_all(&chunk.bytes)
            .await
            .map_err(Error::io("writing output"))?;
    }
    file.flush().await.map_err(Error::io("writing output"))?;
    Ok(bytes)
}

/// Bytes of a body gathered before they go to the file. Written one chunk (one STREAM frame,
/// about 1.4 KB) at a time, tokio hands every write to its blocking pool: the client spent most
/// of its CPU waking that pool's thread, not in QUIC, so it was the bottleneck of every download
/// it timed, whatever the server.
const OUTPUT_BUFFER: usize = 1 << 20;

/// The file a body is written to, buffered (see [`OUTPUT_BUFFER`]); flush it when done.
pub(crate) async fn create_output(
    out: &Path,
) -> Result<tokio::io::BufWriter<tokio::fs::File>, Error> {
    let file = tokio::fs::File::create(out)
        .await
        .map_err(Error::io("output file"))?;
    Ok(tokio::io::BufWriter::with_capacity(OUTPUT_BUFFER, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_address_name_and_path() {
        let (addr, host, path) = parse_url("https://127.0.0.1:4433/f/x.bin").expect("url");
        assert_eq!(addr, "127.0.0.1:4433".parse().expect("addr"));
        assert_eq!((host.as_str(), path.as_str()), ("127.0.0.1", "/f/x.bin"));
        assert!(parse_url("http://127.0.0.1:1/").is_err());
        assert!(parse_url("https://127.0.0.1/").is_err(), "no port");
    }
}
