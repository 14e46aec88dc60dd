//! An HTTP/3 file server on the unmodified h3 server, h3-quinn and quinn: `GET /name` answers
//! 200 with a file directly under the root, anything else 404.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use h3::server::RequestResolver;

use crate::error::Error;
use crate::server::file_under;
use crate::tls;

const CHUNK: usize = 64 * 1024;

fn h3_err(e: impl std::fmt::Display) -> Error {
    Error::H3(e.to_string())
}

/// A bound quinn endpoint serving files from `root` over HTTP/3.
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    root: Arc<PathBuf>,
}

impl Server {
    pub fn bind(listen: SocketAddr, root: &Path) -> Result<Self, Error> {
        let endpoint = quinn::Endpoint::server(tls::self_signed_server(tls::H3_ALPN)?, listen)
            .map_err(Error::io("server socket"))?;
        let root = root.canonicalize().map_err(Error::io("root"))?;
        Ok(Self {
            endpoint,
            root: Arc::new(root),
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
            let root = self.root.clone();
            tokio::spawn(async move {
                let result = async {
                    let conn = incoming.await?;
                    serve_connection(conn, root).await
                };
                if let Err(e) = result.await {
                    tracing::warn!("connection failed: {e}");
                }
            });
        }
    }
}

async fn serve_connection(conn: quinn::Connection, root: Arc<PathBuf>) -> Result<(), Error> {
    let mut h3_conn: h3::server::Connection<h3_quinn::Connection, Bytes> =
        h3::server::Connection::new(h3_quinn::Connection::new(conn))
            .await
            .map_err(h3_err)?;
    loop {
        match h3_conn.accept().await {
            Ok(Some(resolver)) => {
                let root = root.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_request(resolver, &root).await {
                        tracing::warn!("request failed: {e}");
                    }
                });
            }
            Ok(None) => return Ok(()),
            Err(e) if e.is_h3_no_error() => return Ok(()),
            Err(e) => return Err(h3_err(e)),
        }
    }
}

async fn serve_request(
    resolver: RequestResolver<h3_quinn::Connection, Bytes>,
    root: &Path,
) -> Result<(), Error> {
    let (request, mut stream) = resolver.resolve_request().await.map_err(h3_err)?;
    let file = (request.method() == http::Method::GET)
        .then(|| file_under(root, request.uri().path()))
        .flatten();
    let Some(file) = file else {
        let response = http::Response::builder()
            .status(http::StatusCode::NOT_FOUND)
            .body(())
            .map_err(h3_err)?;
        stream.send_response(response).await.map_err(h3_err)?;
        return stream.finish().await.map_err(h3_err);
    };
    let mut file = std::fs::File::open(file).map_err(Error::io("open"))?;
    let len = file.metadata().map_err(Error::io("metadata"))?.len();
    let response = http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_LENGTH, len)
        .body(())
        .map_err(h3_err)?;
    stream.send_response(response).await.map_err(h3_err)?;
    loop {
        let mut buf = vec![0; CHUNK];
        let n = file.read(&mut buf).map_err(Error::io("read"))?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        stream.send_data(Bytes::from(buf)).await.map_err(h3_err)?;
    }
    stream.finish().await.map_err(h3_err)
}
