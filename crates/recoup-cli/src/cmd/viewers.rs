//! `recoup viewers`: many live viewers of `recoup serve` from one process (a load generator).

use std::collections::BTreeMap;

use recoup_net::{Error, Viewers, ViewersOptions};

use super::get::ConnectArgs;
use super::transport::TransportArgs;

/// Watch N live streams from `recoup serve` at once, each on its own QUIC connection (hq-interop)
/// from one socket and one event loop, checking every frame (checksum, sequence, count: the
/// stream's duration at its frame rate, with `recoup serve`'s defaults for keys the URL leaves
/// out). Prints how many viewers saw their whole stream and why the others did not; exits with
/// an error if any failed.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup serve --listen 127.0.0.1:4433 &
  recoup viewers --insecure --count 100 \\
      'https://127.0.0.1:4433/live/v{i}?bitrate=500kbps&fps=30&duration=60s'")]
pub struct Args {
    /// https://HOST:PORT/live/NAME?...; `{i}` becomes each viewer's number.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Viewers (connections) to start at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub count: u64,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// Failure reasons printed, most common first.
const LISTED_REASONS: usize = 5;

pub fn run(args: Args) -> Result<(), Error> {
    let tls = recoup_net::tls::client_tls(
        args.connect.ca.as_deref(),
        args.connect.insecure,
        &[recoup_net::hq::ALPN],
    )?;
    let viewers = Viewers::connect(ViewersOptions {
        url: args.url,
        count: usize::try_from(args.count).unwrap_or(usize::MAX),
        tls,
        transport: args.transport.config()?,
        gso: !args.transport.no_gso,
        timeout: args.connect.timeout,
    })?;
    let stopper = viewers.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    let r = viewers.run()?;
    println!(
        "{} of {} viewers saw their whole stream: {} of {} frames intact, {:.1} MB, {:.1} s",
        r.complete,
        r.viewers,
        r.frames,
        r.frames_expected,
        r.bytes as f64 / 1e6,
        r.elapsed.as_secs_f64()
    );
    if r.failures.is_empty() {
        return Ok(());
    }
    let mut reasons: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, why) in &r.failures {
        reasons.entry(why.as_str()).or_default().push(*i);
    }
    let mut by_count: Vec<(&str, Vec<usize>)> = reasons.into_iter().collect();
    by_count.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    for (why, who) in by_count.iter().take(LISTED_REASONS) {
        let first: Vec<String> = who.iter().take(10).map(ToString::to_string).collect();
        println!("  {} viewers (e.g. {}): {why}", who.len(), first.join(", "));
    }
    Err(Error::Connection(format!(
        "{} of {} viewers failed",
        r.failures.len(),
        r.viewers
    )))
}
