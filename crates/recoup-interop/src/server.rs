//! An hq-interop file server on the unmodified quinn server.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Error;
use crate::tls;

const CHUNK: usize = 64 * 1024;
const MAX_REQUEST: usize = 8 * 1024;

/// A bound quinn endpoint serving files from `root`.
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    root: Arc<PathBuf>,
    retry: bool,
}

/// How the server behaves beyond serving files.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerOptions {
    /// Send a Retry to every new client (RFC 9000 §8.1).
    pub retry: bool,
    /// Send without GSO, so a loopback capture shows each datagram (not one per batch).
    pub no_gso: bool,
}

impl Server {
    pub fn bind(listen: SocketAddr, root: &Path, options: ServerOptions) -> Result<Self, Error> {
        let mut config = tls::self_signed_server(tls::ALPN)?;
        if options.no_gso {
            let mut transport = quinn::TransportConfig::default();
            transport.enable_segmentation_offload(false);
            config.transport_config(Arc::new(transport));
        }
        let endpoint =
            quinn::Endpoint::server(config, listen).map_err(Error::io("server socket"))?;
        let root = root.canonicalize().map_err(Error::io("root"))?;
        Ok(Self {
            endpoint,
            root: Arc::new(root),
            retry: options.retry,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.endpoint
            .local_addr()
            .map_err(Error::io("local address"))
    }

    /// Serves until the endpoint is closed.
    pub async fn run(self) {
        while let Some(incoming) = self.endpoint.accept().await {
            if self.retry && !incoming.remote_address_validated() {
                if let Err(e) = incoming.retry() {
                    tracing::warn!("retry: {e}");
                }
                continue;
            }
            let root = self.root.clone();
            tokio::spawn(async move {
                match incoming.await {
                    Ok(conn) => serve_connection(conn, root).await,
                    Err(e) => tracing::warn!("handshake failed: {e}"),
                }
            });
        }
    }
}

async fn serve_connection(conn: quinn::Connection, root: Arc<PathBuf>) {
    while let Ok((send, recv)) = conn.accept_bi().await {
        let root = root.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_request(send, recv, &root).await {
                tracing::warn!("request failed: {e}");
            }
        });
    }
}

async fn serve_request(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    root: &Path,
) -> Result<(), Error> {
    let request = recv
        .read_to_end(MAX_REQUEST)
        .await
        .map_err(|e| Error::Usage(format!("request: {e}")))?;
    let Some(file) = resolve(root, &request) else {
        send.reset(0x10u32.into()).ok();
        return Ok(());
    };
    let mut file = std::fs::File::open(file).map_err(Error::io("open"))?;
    let mut buf = vec![0; CHUNK];
    loop {
        let n = file.read(&mut buf).map_err(Error::io("read"))?;
        if n == 0 {
            break;
        }
        send.write_all(&buf[..n]).await?;
    }
    send.finish()
        .map_err(|e| Error::Usage(format!("finish: {e}")))?;
    send.stopped().await.ok();
    Ok(())
}

/// `GET /name` to a regular file directly under `root` (test server: no subdirectories).
fn resolve(root: &Path, request: &[u8]) -> Option<PathBuf> {
    let line = std::str::from_utf8(request).ok()?;
    file_under(root, line.trim_end().strip_prefix("GET ")?)
}

/// The regular file `/name` names directly under `root`, if any.
pub(crate) fn file_under(root: &Path, path: &str) -> Option<PathBuf> {
    let path = path.strip_prefix('/')?;
    if path.is_empty() || path.contains('/') || path.contains('\\') || path.starts_with('.') {
        return None;
    }
    let full = root.join(path);
    full.is_file().then_some(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_under_the_root_resolve() {
        let dir = std::env::temp_dir();
        assert!(resolve(&dir, b"GET /../etc/passwd\r\n").is_none());
        assert!(resolve(&dir, b"GET /a/b\r\n").is_none());
        assert!(resolve(&dir, b"PUT /x\r\n").is_none());
        assert!(resolve(Path::new("/etc"), b"GET /hostname-that-is-missing\r\n").is_none());
    }
}
