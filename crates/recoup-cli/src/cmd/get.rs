//! `recoup get`: download one URL over QUIC (hq-interop).

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use recoup_net::url::Url;
use recoup_net::{Client, Error, GetOptions};

use super::transport::TransportArgs;

/// Download a file over QUIC with ALPN hq-interop (HTTP/0.9) from `recoup serve` or any
/// hq-interop server.
///
/// The body goes to FILE (-o) or stdout. A progress bar shows on a terminal. Honours
/// SSLKEYLOGFILE and QLOGDIR.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup get --insecure https://127.0.0.1:4433/video.bin -o video.bin
  recoup get --ca cert.pem https://localhost:4433/index.html
  recoup get --insecure --cc bbr https://127.0.0.1:4433/big > /dev/null")]
pub struct Args {
    /// https://HOST:PORT/PATH
    pub url: String,
    /// Write the body here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Skip certificate checks (for self-signed test servers).
    #[arg(long)]
    pub insecure: bool,
    /// PEM trust anchors for the server's certificate.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub ca: Option<PathBuf>,
    #[command(flatten)]
    pub transport: TransportArgs,
}

pub fn run(args: Args) -> Result<(), Error> {
    let url = Url::parse(&args.url)?;
    let tls = recoup_net::tls::client_tls(args.ca.as_deref(), args.insecure)?;
    let client = Client::connect(GetOptions {
        url,
        tls,
        transport: args.transport.config(),
        qlog: args.transport.qlog(),
        gso: !args.transport.no_gso,
    })?;
    let stopper = client.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(BufWriter::new(File::create(path).map_err(|e| {
            Error::Config(format!("cannot create {}: {e}", path.display()))
        })?)),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let bar = progress_bar();
    let download = client.run(&mut out, &mut |bytes| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let download = download?;
    tracing::info!(
        bytes = download.bytes,
        seconds = download.elapsed.as_secs_f64(),
        mbit_per_s = download.bytes as f64 * 8.0 / download.elapsed.as_secs_f64().max(1e-9) / 1e6,
        "download complete"
    );
    if download.repair_frames > 0 {
        // On stderr, like the log, so that a body on stdout stays clean.
        eprintln!(
            "recoup get: FEC restored {} packets ({} stream bytes) from {} repair symbols",
            download.fec_recovered_packets, download.fec_recovered_bytes, download.repair_frames
        );
    }
    Ok(())
}

/// A byte counter with rate on stderr, when stderr is a terminal (HTTP/0.9 sends no length).
fn progress_bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {bytes} received ({bytes_per_sec}) {elapsed}")
    {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}
