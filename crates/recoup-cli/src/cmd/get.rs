//! `recoup get`: download URLs over QUIC (HTTP/3 or hq-interop), several on one connection.

use std::collections::HashMap;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use recoup_net::url::Url;
use recoup_net::{Bodies, Client, Error, GetOptions, Protocol};

use super::transport::TransportArgs;

/// Download files over QUIC: HTTP/3 (ALPN h3, preferred) or hq-interop (HTTP/0.9), from
/// `recoup serve` or any server speaking either.
///
/// Several URLs (all on one host and port) are fetched on one connection, concurrently, as many
/// at a time as the server's stream limit allows. With one URL the body goes to FILE (-o) or
/// stdout; with several, -o names a directory (created if missing) and each body goes there
/// under the last segment of its URL's path. An existing directory as -o takes one URL's body
/// the same way. A file appears only when its download completes (it is written to a
/// temporary file beside it first); a failed download leaves an existing file as it was. An
/// HTTP error status is reported ("404 Not Found: /x"); any failed URL fails the command,
/// which names them. Each finished file is reported on stderr, above a progress bar on a
/// terminal. Honours SSLKEYLOGFILE and QLOGDIR.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup get --insecure https://127.0.0.1:4433/video.bin -o video.bin
  recoup get --insecure https://127.0.0.1:4433/a.bin https://127.0.0.1:4433/b.bin -o downloads
  recoup get --ca cert.pem https://localhost:4433/index.html
  recoup get --insecure --cc bbr https://127.0.0.1:4433/big > /dev/null
  recoup get --insecure --range 0-1023 https://127.0.0.1:4433/video.mp4 -o head.bin
  recoup get --insecure --alpn hq-interop https://127.0.0.1:4433/video.bin -o video.bin")]
pub struct Args {
    /// https://HOST:PORT/PATH, one or more on the same host and port.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,
    /// Write the body here instead of stdout; with several URLs, the directory for them.
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Application protocol: h3 (HTTP/3) or hq-interop (HTTP/0.9). Without it both are
    /// offered, HTTP/3 first, and the server chooses.
    #[arg(long, value_name = "ALPN")]
    pub alpn: Option<Protocol>,
    /// Ask for these bytes only: A-B, A- or -N (HTTP/3; the server answers 206).
    #[arg(long, value_name = "RANGE")]
    pub range: Option<String>,
    /// Move to a new local port this long after the start, mid-transfer, with a new
    /// connection ID (QUIC connection migration, RFC 9000 §9), e.g. 200ms.
    #[arg(long, value_name = "TIME", value_parser = super::simulate::parse_duration)]
    pub migrate_after: Option<Duration>,
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// How a client reaches a server: the handshake's time limit and the certificate check
/// (`recoup get`, `recoup game`).
#[derive(clap::Args, Debug)]
pub struct ConnectArgs {
    /// Give up when the server has not completed the handshake after this long (e.g. 5s).
    #[arg(long, value_name = "TIME", value_parser = super::simulate::parse_duration, default_value = "10s")]
    pub timeout: Duration,
    /// Skip certificate checks (for self-signed test servers).
    #[arg(long)]
    pub insecure: bool,
    /// PEM trust anchors for the server's certificate.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub ca: Option<PathBuf>,
}

/// Most failed URLs a failure message lists (each is also reported on its own line).
const LISTED_FAILURES: usize = 10;

pub fn run(args: Args) -> Result<(), Error> {
    let urls = Url::parse_all(&args.urls)?;
    let targets = targets(&args.urls, &urls, args.output.as_deref())?;
    let tls = recoup_net::tls::client_tls(
        args.connect.ca.as_deref(),
        args.connect.insecure,
        Protocol::offer(args.alpn),
    )?;
    let client = Client::connect(GetOptions {
        urls,
        tls,
        protocol: args.alpn,
        range: args.range,
        transport: args.transport.config()?,
        qlog: args.transport.qlog(),
        gso: !args.transport.no_gso,
        timeout: args.connect.timeout,
        migrate_after: args.migrate_after,
    })?;
    let stopper = client.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    let mut sinks = Sinks {
        urls: &args.urls,
        targets,
        open: HashMap::new(),
        stdout: None,
        progress: Progress::new(args.urls.len()),
    };
    let download = client.run_all(&mut sinks);
    sinks.progress.finish();
    let mut download = download?;
    tracing::info!(
        files = download.files.len(),
        bytes = download.bytes,
        seconds = download.elapsed.as_secs_f64(),
        key_updates = download.key_updates,
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
    if download.files.len() == 1 {
        // One URL: its error is the command's, as it reads without a list.
        return match download.files.pop() {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        };
    }
    let failed: Vec<&str> = download
        .files
        .iter()
        .zip(&args.urls)
        .filter(|(outcome, _)| outcome.is_err())
        .map(|(_, url)| url.as_str())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let mut urls = failed[..failed.len().min(LISTED_FAILURES)].join(", ");
    if failed.len() > LISTED_FAILURES {
        urls.push_str(&format!(" and {} more", failed.len() - LISTED_FAILURES));
    }
    Err(Error::Downloads {
        failed: failed.len(),
        total: download.files.len(),
        urls,
    })
}

/// Where each URL's body goes: `None` for stdout (one URL without -o), else the file.
fn targets(
    texts: &[String],
    urls: &[Url],
    output: Option<&Path>,
) -> Result<Vec<Option<PathBuf>>, Error> {
    let dir = match output {
        None if urls.len() == 1 => return Ok(vec![None]),
        None => {
            return Err(Error::Config(format!(
                "{} URLs need -o DIR: one output cannot take several bodies",
                urls.len()
            )));
        }
        Some(path) if urls.len() == 1 && !path.is_dir() => {
            return Ok(vec![Some(path.to_owned())]);
        }
        Some(dir) => dir,
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Config(format!("cannot create {}: {e}", dir.display())))?;
    let mut seen = HashMap::new();
    let mut targets = Vec::with_capacity(urls.len());
    for (url, text) in urls.iter().zip(texts) {
        let name = file_name(&url.path).ok_or_else(|| Error::Url {
            url: text.clone(),
            why: "its path ends in no file name to save it under",
        })?;
        if let Some(first) = seen.insert(name.clone(), text) {
            return Err(Error::Config(format!(
                "{text} and {first} would both be saved as {}",
                dir.join(&name).display()
            )));
        }
        targets.push(Some(dir.join(name)));
    }
    Ok(targets)
}

/// The last segment of a URL path (query left out, percent escapes decoded), if it can name a
/// file inside the output directory.
fn file_name(path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    let name = recoup_net::hq::percent_decode(last).ok()?;
    let usable = !matches!(name.as_str(), "" | "." | "..") && !name.contains(['/', '\\']);
    usable.then_some(name)
}

/// The bodies as `Client::run_all` hands them over: to stdout, or each to a temporary file
/// beside its target that becomes the target when the body is complete.
struct Sinks<'a> {
    urls: &'a [String],
    targets: Vec<Option<PathBuf>>,
    /// The files being written, opened at their first byte (so that no more are open than
    /// streams are under way).
    open: HashMap<usize, BufWriter<tempfile::NamedTempFile>>,
    stdout: Option<BufWriter<std::io::Stdout>>,
    progress: Progress,
}

impl Sinks<'_> {
    fn writer(&mut self, index: usize) -> Result<&mut dyn Write, Error> {
        let Some(path) = &self.targets[index] else {
            return Ok(self
                .stdout
                .get_or_insert_with(|| BufWriter::new(std::io::stdout())));
        };
        let file = match self.open.entry(index) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(BufWriter::new(temporary_beside(path)?))
            }
        };
        Ok(file)
    }

    fn write_error(&self, index: usize, e: &std::io::Error) -> Error {
        match &self.targets[index] {
            Some(path) => Error::Config(format!("writing {}: {e}", path.display())),
            None => Error::Config(format!("writing stdout: {e}")),
        }
    }
}

impl Bodies for Sinks<'_> {
    fn write(&mut self, index: usize, data: &[u8]) -> Result<(), Error> {
        let written = self.writer(index)?.write_all(data);
        written.map_err(|e| self.write_error(index, &e))?;
        self.progress.add(data.len() as u64);
        Ok(())
    }

    fn complete(&mut self, index: usize, bytes: u64) -> Result<(), Error> {
        // An empty body opens its file here.
        self.writer(index)?;
        if let Some(path) = self.targets[index].clone() {
            if let Some(file) = self.open.remove(&index) {
                persist(file, &path)?;
            }
        } else if let Some(out) = &mut self.stdout {
            let flushed = out.flush();
            flushed.map_err(|e| self.write_error(index, &e))?;
        }
        self.progress
            .file_done(&format!("{}: {bytes} bytes", self.urls[index]));
        Ok(())
    }

    fn failed(&mut self, index: usize, error: &Error) {
        // Dropping the temporary file deletes it: a failed URL leaves nothing behind.
        self.open.remove(&index);
        self.progress
            .file_done(&format!("{}: failed: {error}", self.urls[index]));
    }
}

/// Flushes `file` and moves it to `path`.
fn persist(file: BufWriter<tempfile::NamedTempFile>, path: &Path) -> Result<(), Error> {
    let file = file
        .into_inner()
        .map_err(|e| Error::Config(format!("writing {}: {}", path.display(), e.error())))?;
    // The temporary file is private (0600); the download is an ordinary file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o644);
        if let Err(e) = std::fs::set_permissions(file.path(), mode) {
            tracing::warn!("{}: {e}", file.path().display());
        }
    }
    file.persist(path)
        .map_err(|e| Error::Config(format!("cannot write {}: {}", path.display(), e.error)))?;
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

/// What a person sees on stderr: a line per finished file and, on a terminal, a byte counter
/// with the rate and the files done below them (no escape codes anywhere else).
struct Progress {
    bar: Option<ProgressBar>,
    files: usize,
    done: usize,
}

impl Progress {
    fn new(files: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {bytes} received ({bytes_per_sec}) {elapsed} {msg}",
            ) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        let progress = Self {
            bar,
            files,
            done: 0,
        };
        progress.show_count();
        progress
    }

    fn add(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
        }
    }

    fn file_done(&mut self, line: &str) {
        self.done += 1;
        match &self.bar {
            Some(bar) => bar.println(format!("recoup get: {line}")),
            None => eprintln!("recoup get: {line}"),
        }
        self.show_count();
    }

    fn show_count(&self) {
        if let (Some(bar), true) = (&self.bar, self.files > 1) {
            bar.set_message(format!("{}/{} files", self.done, self.files));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
