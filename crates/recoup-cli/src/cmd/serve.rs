//! `recoup serve`: serve a directory and live streams over QUIC (HTTP/3 or hq-interop) until
//! Ctrl-C, or SIGTERM and a graceful drain.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use recoup_net::content::ContentKind;
use recoup_net::moq::MoqOptions;
use recoup_net::server::RetryMode;
use recoup_net::tls::Identity;
use recoup_net::{Error, LiveParams, ServeOptions, Server};
use recoup_recovery::PolicySpec;

use super::transport::{parse_policy, TransportArgs};

/// The default policy of live streams: crest. In the Pareto study (EXPERIMENTS.md, "Beyond the
/// papers: the oracle bound and `crest`"; 16 live cells: RTT 20-200 ms x random loss 1-10 %,
/// Gilbert-Elliott bursts, two LTE traces; 5 seeds) crest recovered faster than autorec in 12
/// cells and cheaper in 12, and was dominated by another policy's means in 4, by a lead seen in
/// every seed in 2 (200 ms at 10 %: fixed:1; the Verizon trace: too). `arq` sends no copies: a
/// viewer waits a round trip per lost packet, two when the retransmission is lost too.
pub const DEFAULT_LIVE_POLICY: &str = "crest";
/// The default policy of files: crest too. In the same study's 16 file cells (100 MB files)
/// crest was faster than autorec in 12 and cheaper in 13, dominated in 3. Its copies cost what
/// the loss rate is (about 5 % of packets at 5 % loss).
pub const DEFAULT_FILE_POLICY: &str = "crest";

/// Serve the files under a directory, and synthetic live streams, over QUIC: HTTP/3 (ALPN h3)
/// or hq-interop (HTTP/0.9: `GET /path`), whichever the client offers.
///
/// Prints the address it listens on, then serves until Ctrl-C (at once) or SIGTERM (after a
/// graceful drain, --drain-timeout). Without --cert/--key a
/// self-signed certificate for localhost is generated. Honours SSLKEYLOGFILE (TLS secrets for
/// Wireshark) and QLOGDIR (qlog traces). Requests for paths outside DIR are refused.
///
/// `GET /live/NAME?bitrate=4Mbps&fps=30&gop=30&duration=20s` (also `key_ratio`, `size_noise`,
/// `seed`) streams video frames as the simulator's live application does, on the real clock,
/// and ends the stream after the duration; the --live-* flags set what the query leaves out. A
/// bad query is answered with a line `error: ...` and FIN (HTTP/3: status 400).
///
/// Over HTTP/3, files carry a Content-Type from their extension and honour single byte ranges
/// (206, or 416 when unsatisfiable); a missing file is 404, a path outside DIR or an unreadable
/// file 403, a method other than GET/HEAD 405. Live streams are sent as they are produced,
/// without a length and with `cache-control: no-store`.
///
/// With --origin it is a CDN edge instead: every request (files and live streams alike) is
/// fetched from the HTTP/1.1 origin at the same path under the URL's path, and the body is
/// relayed as it arrives, with this server's loss recovery policy towards the client. Over
/// HTTP/3 the origin's status, Content-Type and Content-Length are passed on (502 when it
/// cannot be reached); over hq-interop any other answer than 2xx resets the stream. Each
/// origin error is logged with the origin URL.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup serve --listen 127.0.0.1:4433 --root ./www
  recoup serve --listen 127.0.0.1:0 --root ./www --policy fixed:2 --cc bbr
  recoup serve --policy autorec --cc bbr --live-bitrate 4Mbps --live-duration 20s
  recoup serve --policy autorec --origin http://127.0.0.1:8080/streams
  SSLKEYLOGFILE=keys.log QLOGDIR=qlog recoup serve --root ./www --cert cert.pem --key key.pem
  recoup serve --config edge.toml --listen 0.0.0.0:443")]
pub struct Args {
    /// Read flags from this TOML file, one key per flag (`root = \"./www\"`, `no_gso = true`,
    /// `live_policy = \"crest\"`); a flag on the command line wins over the file. An unknown
    /// key or a bad value is an error naming the key (docs/EDGE.md, "Config file").
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// UDP address to listen on (port 0 picks a free port; the real one is printed).
    #[arg(long, default_value = "127.0.0.1:4433")]
    pub listen: SocketAddr,
    /// Directory whose files are served (without it, only live streams are).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Relay every request from this HTTP/1.1 origin (http://HOST:PORT[/PREFIX]) instead of
    /// serving DIR and synthetic live streams.
    #[arg(long, value_name = "URL", conflicts_with = "root")]
    pub origin: Option<String>,
    /// PEM certificate chain (with --key).
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key (with --cert).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// When a new client must prove its address with a Retry first (RFC 9000 §8.1.2; a round
    /// trip for the client, no state for the server): `auto` while --retry-threshold handshakes
    /// are in flight (a flood of Initials that never complete), `on` always (`--retry` alone),
    /// `off` never (docs/EDGE.md, "Floods").
    #[arg(long, value_name = "WHEN", default_value = "auto", num_args = 0..=1,
          default_missing_value = "on", value_parser = ["auto", "on", "off"])]
    pub retry: String,
    /// With --retry auto: handshakes in flight at which Retry starts. A half-open connection
    /// holds about 51 KB (measured: docs/EDGE.md, "Floods"), so 128 hold about 6.5 MB; at 1000
    /// new connections a second with 100 ms handshakes, about 100 are in flight.
    #[arg(long, value_name = "N", default_value_t = 128,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub retry_threshold: u64,
    /// Serve at most N connections at a time; beyond that a new client is refused at once with
    /// CONNECTION_REFUSED (RFC 9000 §5.2.2) and no state is kept for it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
    /// Loss-recovery policy of a connection whose first request is a live stream (default:
    /// crest, or --policy; the reason is in docs/EDGE.md, "Policies per content"). A connection
    /// has one policy: its first request chooses it.
    #[arg(long, value_name = "SPEC", value_parser = parse_policy)]
    pub live_policy: Option<PolicySpec>,
    /// Loss-recovery policy of every other connection, and of each one until its first request
    /// (default: crest, or --policy).
    #[arg(long, value_name = "SPEC", value_parser = parse_policy)]
    pub file_policy: Option<PolicySpec>,
    /// Workers (default: one per core): each a thread with its own socket on the --listen
    /// address (SO_REUSEPORT); connection IDs name their worker, so a datagram the kernel hands
    /// to another worker after a NAT rebinding or a migration is passed on to it (docs/EDGE.md,
    /// "Workers").
    #[arg(long, value_name = "N", value_parser = parse_workers)]
    pub workers: Option<usize>,
    /// On SIGTERM, how long requests in flight may take to finish: new connections are refused,
    /// HTTP/3 clients get GOAWAY, live streams end at a frame boundary; past this, every
    /// connection is closed. The exit status is 0 either way (docs/EDGE.md, "Drain").
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = super::simulate::parse_duration)]
    pub drain_timeout: Duration,
    /// Serve Prometheus metrics at http://ADDR/metrics and a health check at /healthz
    /// (docs/EDGE.md, "Metrics"). An address in use is an error naming it.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// What --origin serves: `live` (a live packager's output, relayed under --live-policy) or
    /// `file` (stored files, under --file-policy).
    #[arg(long, value_name = "KIND", default_value = "file", value_parser = parse_kind)]
    pub origin_kind: ContentKind,
    /// Be a MoQ relay egress (docs/moq.md): subscribe to the broadcasts of the MoQ relay or
    /// publisher at URL (`https://HOST:PORT/PATH`, moq-lite over WebTransport) and serve them
    /// to WebTransport sessions at /moq, under this server's loss-recovery policy. Redials
    /// with backoff when the upstream goes.
    #[arg(long, value_name = "URL")]
    pub moq: Option<String>,
    /// With --moq: a PEM certificate to trust for the upstream besides the system's roots
    /// (repeatable).
    #[arg(long, value_name = "FILE", requires = "moq")]
    pub moq_root: Vec<PathBuf>,
    /// With --moq: every byte of a group must be acknowledged within this time of its write,
    /// or the group's stream is reset (not retransmitted or copied any more).
    #[arg(long, value_name = "TIME", default_value = "500ms", requires = "moq",
          value_parser = super::simulate::parse_duration)]
    pub moq_deadline: Duration,
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// Defaults of live streams (`/live/NAME`) for what a request's query leaves out.
#[derive(clap::Args, Debug, Clone)]
pub struct LiveArgs {
    /// Live stream bit rate, frame headers included (e.g. 4Mbps, 500kbps).
    #[arg(long, value_name = "RATE", default_value = "4Mbps", value_parser = recoup_elements::parse_rate)]
    pub live_bitrate: u64,
    /// Live stream frames per second.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub live_fps: u32,
    /// Frames per GOP (one key frame, 5 times larger than the others, every N frames).
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub live_gop: u32,
    /// How long a live stream lasts before the server ends it (FIN).
    #[arg(long, value_name = "TIME", default_value = "20s", value_parser = super::simulate::parse_duration)]
    pub live_duration: Duration,
}

impl LiveArgs {
    #[must_use]
    pub fn params(&self) -> LiveParams {
        let mut p = LiveParams::default();
        p.encoder.bitrate = self.live_bitrate;
        p.encoder.fps = self.live_fps;
        p.encoder.gop = self.live_gop;
        p.duration = self.live_duration;
        p
    }
}

/// SIGTERM drains (a second one stops at once); SIGINT (Ctrl-C) stops at once.
fn watch_signals(stopper: recoup_net::Stopper) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Error::Config(format!("signal handlers: {e}")))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGTERM && !stopper.is_draining() {
                    tracing::info!("SIGTERM: draining (another SIGTERM or Ctrl-C stops at once)");
                    stopper.drain();
                } else {
                    stopper.stop();
                }
            }
        })
        .map_err(|e| Error::Config(format!("signal thread: {e}")))?;
    Ok(())
}

fn parse_workers(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number of workers: {e}"))?;
    if !(1..=recoup_net::server::MAX_WORKERS).contains(&n) {
        return Err(format!(
            "a server needs 1 to {} workers, not {n}",
            recoup_net::server::MAX_WORKERS
        ));
    }
    Ok(n)
}

/// One worker per core the OS lets this process use (at least one).
fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(recoup_net::server::MAX_WORKERS)
}

fn parse_kind(s: &str) -> Result<ContentKind, String> {
    s.parse::<ContentKind>().map_err(|e| e.to_string())
}

impl Args {
    /// The live and file policies: each its own flag, else --policy, else the default.
    #[must_use]
    pub fn policies(&self) -> (PolicySpec, PolicySpec) {
        let pick = |own: &Option<PolicySpec>, default: &str| {
            own.clone()
                .or_else(|| self.transport.policy.clone())
                .unwrap_or_else(|| parse_policy(default).unwrap_or_default())
        };
        (
            pick(&self.live_policy, DEFAULT_LIVE_POLICY),
            pick(&self.file_policy, DEFAULT_FILE_POLICY),
        )
    }
}

pub fn run(args: Args) -> Result<(), Error> {
    let identity = Identity::from_options(args.cert.as_deref(), args.key.as_deref())?;
    let (live_policy, file_policy) = args.policies();
    let mut transport = args.transport.config()?;
    transport.policy = file_policy;
    let mut server = Server::bind(ServeOptions {
        listen: args.listen,
        root: args.root,
        origin: args.origin,
        live: args.live.params(),
        identity,
        transport,
        live_policy,
        origin_kind: args.origin_kind,
        qlog: args.transport.qlog(),
        gso: !args.transport.no_gso,
        retry: match args.retry.as_str() {
            "on" => RetryMode::Always,
            "off" => RetryMode::Off,
            _ => RetryMode::Auto {
                handshakes: usize::try_from(args.retry_threshold).unwrap_or(usize::MAX),
            },
        },
        max_connections: args
            .max_connections
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        metrics: args.metrics,
        workers: args.workers.unwrap_or_else(default_workers),
        moq: args.moq.map(|upstream| MoqOptions {
            upstream,
            upstream_roots: args.moq_root,
            deadline: args.moq_deadline,
        }),
    })?;
    server.set_drain_timeout(args.drain_timeout);
    watch_signals(server.stopper())?;
    // Tests and scripts read this line to learn the port.
    println!("listening on {}", server.local_addr()?);
    if let Some(addr) = server.metrics_addr() {
        println!("metrics on http://{addr}/metrics");
    }
    server.run()?;
    tracing::info!("stopped");
    Ok(())
}
