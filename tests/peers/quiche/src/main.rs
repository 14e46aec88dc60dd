//! `quiche-h3-server --listen ADDR --root DIR`: serves the files of DIR over HTTP/3 (ALPN h3)
//! with Cloudflare's quiche, for the recovery benchmark (tests/interop/recovery_peers.py).
//!
//! quiche is configured as its users would: its defaults for congestion control (CUBIC with
//! HyStart++), loss recovery and pacing, and the flow-control windows of quiche's own example
//! HTTP/3 server. The certificate is self-signed, made at start. With QLOGDIR set, one qlog
//! (JSON-SEQ, quiche's own) per connection is written there as `ODCID_server.sqlog`.
//! Prints `listening on ADDR` once bound and serves until SIGINT or SIGTERM.

mod client;
mod files;
mod server;

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

const USAGE: &str = "usage: quiche-h3-server [--listen ADDR] --root DIR | --version
  --listen ADDR  UDP address to serve on [default: 127.0.0.1:4433]
  --root DIR     directory whose files are served
  env QLOGDIR    write one qlog per connection into this directory";

struct Args {
    listen: SocketAddr,
    root: PathBuf,
}

/// The arguments, or None when the version or usage was asked for (and printed).
fn parse_args() -> Result<Option<Args>> {
    let mut listen = None;
    let mut root = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .with_context(|| format!("{name} needs a value\n{USAGE}"))
        };
        match name.as_str() {
            "--version" | "-V" => {
                println!("quiche-h3-server (quiche {})", env!("QUICHE_VERSION"));
                return Ok(None);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--listen" => {
                let v = value()?;
                listen = Some(v.parse().with_context(|| {
                    format!("--listen {v}: not an IP address with a port (e.g. 127.0.0.1:0)")
                })?);
            }
            "--root" => root = Some(PathBuf::from(value()?)),
            _ => bail!("unknown argument {name}\n{USAGE}"),
        }
    }
    let root = root.with_context(|| format!("--root is required\n{USAGE}"))?;
    Ok(Some(Args {
        listen: listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 4433))),
        root,
    }))
}

fn run() -> Result<()> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    let root = args
        .root
        .canonicalize()
        .with_context(|| format!("--root {}", args.root.display()))?;
    if !root.is_dir() {
        bail!("--root {}: not a directory", args.root.display());
    }
    let qlog_dir = match std::env::var_os("QLOGDIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).with_context(|| format!("QLOGDIR {}", dir.display()))?;
            Some(dir)
        }
        _ => None,
    };
    let socket = UdpSocket::bind(args.listen)
        .with_context(|| format!("--listen {}: cannot bind", args.listen))?;
    let local = socket.local_addr().context("the bound socket's address")?;

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing the signal handlers")?;
    }
    let mut server = server::Server::new(socket, local, root, qlog_dir)?;
    println!("listening on {local}");
    server.run(&stop)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quiche-h3-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}
