//! `recoup serve`: serve a directory over QUIC (hq-interop) until Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;

use recoup_net::tls::Identity;
use recoup_net::{Error, ServeOptions, Server};

use super::transport::TransportArgs;

/// Serve the files under a directory over QUIC with ALPN hq-interop (HTTP/0.9: `GET /path`).
///
/// Prints the address it listens on, then serves until Ctrl-C. Without --cert/--key a
/// self-signed certificate for localhost is generated. Honours SSLKEYLOGFILE (TLS secrets for
/// Wireshark) and QLOGDIR (qlog traces). Requests for paths outside DIR are refused.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup serve --listen 127.0.0.1:4433 --root ./www
  recoup serve --listen 127.0.0.1:0 --root ./www --policy fixed:2 --cc bbr
  SSLKEYLOGFILE=keys.log QLOGDIR=qlog recoup serve --root ./www --cert cert.pem --key key.pem")]
pub struct Args {
    /// UDP address to listen on (port 0 picks a free port; the real one is printed).
    #[arg(long, default_value = "127.0.0.1:4433")]
    pub listen: SocketAddr,
    /// Directory whose files are served.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// PEM certificate chain (with --key).
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key (with --cert).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    #[command(flatten)]
    pub transport: TransportArgs,
}

pub fn run(args: Args) -> Result<(), Error> {
    let identity = Identity::from_options(args.cert.as_deref(), args.key.as_deref())?;
    let server = Server::bind(ServeOptions {
        listen: args.listen,
        root: args.root,
        identity,
        transport: args.transport.config(),
        qlog: args.transport.qlog(),
        gso: !args.transport.no_gso,
    })?;
    let stopper = server.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    // Tests and scripts read this line to learn the port.
    println!("listening on {}", server.local_addr()?);
    server.run()?;
    tracing::info!("stopped");
    Ok(())
}
