//! An HTTP/3 download with the unmodified h3 client on h3-quinn and quinn.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Buf;
use tokio::io::AsyncWriteExt;

use crate::client::Download;
use crate::error::Error;
use crate::tls;

fn h3_err(e: impl std::fmt::Display) -> Error {
    Error::H3(e.to_string())
}

/// Downloads `https://{server_name}:{port}{path}` from `addr` over HTTP/3 into `out`; a status
/// other than 200 is an error. Closes the connection afterwards.
pub async fn get(
    addr: SocketAddr,
    server_name: &str,
    path: &str,
    out: &Path,
) -> Result<Download, Error> {
    get_all(addr, server_name, &[(path.to_owned(), out.to_path_buf())]).await
}

/// Downloads every `(path, out)` of `requests` from `addr` over HTTP/3, one request after the
/// other on one connection (the interop runner's http3 case asks for several files on one
/// connection); a status other than 200 is an error. Closes the connection afterwards.
pub async fn get_all(
    addr: SocketAddr,
    server_name: &str,
    requests: &[(String, PathBuf)],
) -> Result<Download, Error> {
    let bind: SocketAddr = if addr.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    }
    .parse()
    .map_err(|_| Error::Usage("bind address".into()))?;
    let mut endpoint = quinn::Endpoint::client(bind).map_err(Error::io("client socket"))?;
    endpoint.set_default_client_config(tls::insecure_client(tls::H3_ALPN)?);
    let start = tokio::time::Instant::now();
    let conn = endpoint.connect(addr, server_name)?.await?;
    let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(h3_err)?;
    // The connection's control streams are served while the driver is polled.
    let driving = tokio::spawn(async move { driver.wait_idle().await });
    let mut bytes = 0u64;
    for (path, out) in requests {
        let uri = format!("https://{server_name}:{}{path}", addr.port());
        let request = http::Request::get(uri).body(()).map_err(h3_err)?;
        let mut stream = sender.send_request(request).await.map_err(h3_err)?;
        stream.finish().await.map_err(h3_err)?;
        let response = stream.recv_response().await.map_err(h3_err)?;
        if response.status() != http::StatusCode::OK {
            return Err(Error::Status(response.status().as_u16()));
        }
        let mut file = crate::client::create_output(out).await?;
        while let Some(mut chunk) = stream.recv_data().await.map_err(h3_err)? {
            let data = chunk.copy_to_bytes(chunk.remaining());
            bytes += data.len() as u64;
            file.write_all(&data)
                .await
                .map_err(Error::io("writing output"))?;
        }
        file.flush().await.map_err(Error::io("writing output"))?;
    }
    let elapsed = start.elapsed();
    drop(sender);
    // Dropping the last request sender closes the connection with H3_NO_ERROR.
    driving.await.ok();
    endpoint.wait_idle().await;
    Ok(Download { bytes, elapsed })
}
