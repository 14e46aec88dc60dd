//! `recoup get`: download one URL over QUIC (hq-interop).

use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use recoup_net::url::Url;
use recoup_net::{Client, Error, GetOptions};

use super::transport::TransportArgs;

/// Download a file over QUIC with ALPN hq-interop (HTTP/0.9) from `recoup serve` or any
/// hq-interop server.
///
/// The body goes to FILE (-o) or stdout. FILE appears only when the download completes (it is
/// written to a temporary file beside it first); a failed download leaves an existing FILE as it
/// was. A progress bar shows on a terminal. Honours SSLKEYLOGFILE and QLOGDIR.
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
    /// Give up when the server has not completed the handshake after this long (e.g. 5s).
    #[arg(long, value_name = "TIME", value_parser = super::simulate::parse_duration, default_value = "10s")]
    pub timeout: Duration,
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
        timeout: args.timeout,
    })?;
    let stopper = client.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    let bar = progress_bar();
    let mut progress = |bytes| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
        }
    };
    let download = match &args.output {
        Some(path) => {
            let mut file = temporary_beside(path)?;
            let mut out = BufWriter::new(file.as_file_mut());
            let download = client.run(&mut out, &mut progress);
            drop(out);
            if download.is_ok() {
                // The temporary file is private (0600); the download is an ordinary file.
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = std::fs::Permissions::from_mode(0o644);
                    if let Err(e) = std::fs::set_permissions(file.path(), mode) {
                        tracing::warn!("{}: {e}", file.path().display());
                    }
                }
                file.persist(path).map_err(|e| {
                    Error::Config(format!("cannot write {}: {}", path.display(), e.error))
                })?;
            }
            download
        }
        None => client.run(&mut BufWriter::new(std::io::stdout().lock()), &mut progress),
    };
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
    Ok(())
}

/// An empty temporary file in `path`'s directory (so the final rename stays on one file system),
/// deleted when dropped unless persisted.
fn temporary_beside(path: &Path) -> Result<tempfile::NamedTempFile, Error> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(".recoup-get-")
        .suffix(".part")
        .tempfile_in(dir)
        .map_err(|e| Error::Config(format!("cannot create a file in {}: {e}", dir.display())))
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
