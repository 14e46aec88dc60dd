//! Transport options shared by the subcommands that open QUIC connections.

use std::path::PathBuf;
use std::time::Duration;

use recoup_recovery::{FecSpec, PolicySpec};
use recoup_transport::cc::CcAlgorithm;
use recoup_transport::loss::{LossDetectionMode, ThresholdRtt};
use recoup_transport::{DatagramConfig, MaxPto, TransportConfig};

#[derive(clap::Args, Debug, Clone)]
pub struct TransportArgs {
    /// Loss-recovery policy, e.g. `arq`, `fixed:2`, `autorec:alpha=30ms` (see recoup-recovery).
    /// Default `arq`; for `serve`, the policy of live streams and files alike unless
    /// --live-policy or --file-policy says otherwise (their defaults: docs/EDGE.md).
    #[arg(long, value_name = "SPEC", value_parser = parse_policy)]
    pub policy: Option<PolicySpec>,
    /// Congestion controller: newreno, cubic, bbr (BBRv1), bbr3 (BBRv3), copa or none (no
    /// congestion control). bbr3 takes its loss response as `bbr3:loss_thresh=0.02,beta=0.7,
    /// headroom=0.15` (draft-ietf-ccwg-bbr §2.8; those are the defaults). The default, bbr, was chosen by measurement: under random loss the
    /// loss-based controllers hold a window below one object and lose to quic-go's server at p95
    /// (docs/OBJECTS-BENCH.md, docs/cc-objects.md).
    #[arg(long, default_value = "bbr", value_parser = parse_cc)]
    pub cc: CcAlgorithm,
    /// Loss detection: rfc9002 (RFC 9002 §6 thresholds) or rack-tlp (RFC 8985).
    #[arg(long, default_value = "rfc9002", value_parser = parse_loss_detection)]
    pub loss_detection: LossDetectionMode,
    /// The RTT sample RFC 9002's time threshold multiplies with smoothed_rtt: `latest` as
    /// measured (RFC 9002 §6.1.2) or `adjusted`, less the peer's ACK delay (quic-go's reading;
    /// docs/RECOVERY-BENCH.md measures both).
    #[arg(long, value_name = "latest|adjusted", default_value = "latest", value_parser = parse_threshold_rtt)]
    pub threshold_rtt: ThresholdRtt,
    /// Initial congestion window in packets of --max-datagram-size. The default is RFC 9002
    /// §7.2's: ten packets, at most 14720 bytes. quic-go starts with 32 packets
    /// (docs/RECOVERY-BENCH.md measures what that changes).
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u64).range(1..))]
    pub initial_window: Option<u64>,
    /// After the last packet of each burst of stream data, send one PING-only packet: a
    /// receiver that finds the burst's tail missing acknowledges the PING at once (RFC 9000
    /// §13.2.1), so the lost tail is found about 9/8 RTT after its send instead of by the next
    /// burst's ACKs or the probe timeout. One small packet per burst (docs/RECOVERY-BENCH.md
    /// measures it on the live push).
    #[arg(long)]
    pub tail_ping: bool,
    /// Dual-side FEC for the data this endpoint sends, e.g. `block:k=9,m=1` (docs/FEC.md):
    /// repair symbols go only to a recoup peer that negotiated FEC; toward any other peer a
    /// warning is logged and recovery is plain ARQ. recoup endpoints always offer to decode.
    #[arg(long, value_name = "SCHEME", value_parser = parse_fec)]
    pub fec: Option<FecSpec>,
    /// Write one qlog trace per connection here (default: $QLOGDIR if set).
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// Send one datagram per system call instead of UDP GSO batches (for packet captures on
    /// loopback, which record a GSO batch as one oversized datagram).
    #[arg(long)]
    pub no_gso: bool,
    /// Start a 1-RTT key update after this many packets sent with one key (RFC 9001 §6; at
    /// least three PTOs apart). Without it keys update only before the AEAD limit.
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u64).range(1..))]
    pub key_update_interval: Option<u64>,
    /// Idle timeout this endpoint announces (RFC 9000 §10.1); the connection uses the smaller
    /// of both ends' and never less than three PTOs. `0s` announces none.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = super::simulate::parse_duration)]
    pub idle_timeout: Duration,
    /// Upper bound on the probe timeout after backoff (RFC 9002 §6.2.1 doubles it on every
    /// expiry): a TIME, `auto` (a tenth of the idle timeout both ends agreed on, so that the
    /// doubling up to the bound and eight probes at it fit before the idle timeout) or `off`
    /// (RFC 9002 as written). A TIME must leave room for three probes in --idle-timeout (RFC
    /// 9000 §10.1). The bound never shortens the probe timeout below its value without
    /// backoff (docs/EDGE.md, "Bounded probe timeout").
    #[arg(long, value_name = "TIME|auto|off", default_value = "auto", value_parser = parse_max_pto)]
    pub max_pto: MaxPto,
    /// UDP payload size to start with, in bytes, assumed to fit the path. 1200 is QUIC's
    /// minimum (RFC 9000 §14); 1452 fits a 1500-byte Ethernet MTU over IPv6.
    #[arg(long, value_name = "BYTES", default_value_t = default_max_datagram_size(),
          value_parser = clap::value_parser!(u16).range(1200..=65527))]
    pub max_datagram_size: u16,
    /// Path MTU discovery (RFC 9000 §14.3): once the handshake is confirmed, probe payload sizes
    /// above --max-datagram-size up to this one (1452 fits a 1500-byte Ethernet MTU over IPv6),
    /// and fall back if the path stops carrying them. At or below --max-datagram-size: off.
    #[arg(long, value_name = "BYTES", default_value_t = 1452,
          value_parser = clap::value_parser!(u16).range(1200..=65527))]
    pub pmtud_max: u16,
    /// Accept DATAGRAM frames (RFC 9221) of up to this many bytes (frame type, length and
    /// data; RFC 9221 §3 recommends 65535), announced as max_datagram_frame_size. 0, the
    /// default, announces nothing. `recoup serve` echoes datagrams on hq-interop connections,
    /// and above 0 offers WebTransport on HTTP/3 (an echo session at /webtransport/echo).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub datagram_frame_size: u64,
}

impl TransportArgs {
    /// The transport configuration these flags describe; an error names the flags that
    /// contradict each other.
    pub fn config(&self) -> Result<TransportConfig, recoup_net::Error> {
        if let MaxPto::Fixed(bound) = self.max_pto {
            if !self.idle_timeout.is_zero() && bound.saturating_mul(3) > self.idle_timeout {
                return Err(recoup_net::Error::Config(format!(
                    "--max-pto {bound:?} leaves room for fewer than three probes in \
                     --idle-timeout {:?} (RFC 9000 §10.1); use at most a third of it, or auto",
                    self.idle_timeout
                )));
            }
        }
        Ok(TransportConfig {
            cc: self.cc,
            loss_detection: self.loss_detection,
            threshold_rtt: self.threshold_rtt,
            initial_window: self.initial_window,
            tail_ping: self.tail_ping,
            policy: self.policy.clone().unwrap_or_default(),
            key_update_interval: self.key_update_interval,
            max_idle_timeout: self.idle_timeout,
            fec: self.fec,
            fec_receive: true,
            max_datagram_size: usize::from(self.max_datagram_size),
            pmtud_max: (self.pmtud_max > self.max_datagram_size)
                .then_some(usize::from(self.pmtud_max)),
            max_pto: self.max_pto,
            seed: recoup_net::os_seed(),
            datagrams: DatagramConfig {
                max_frame_size: self.datagram_frame_size,
                ..DatagramConfig::default()
            },
            ..TransportConfig::default()
        })
    }

    #[must_use]
    pub fn qlog(&self) -> Option<recoup_net::qlog_dir::QlogDir> {
        recoup_net::qlog_dir::QlogDir::from_option_or_env(self.qlog_dir.clone())
    }
}

pub fn parse_policy(s: &str) -> Result<PolicySpec, String> {
    s.parse::<PolicySpec>().map_err(|e| e.to_string())
}

fn parse_max_pto(s: &str) -> Result<MaxPto, String> {
    match s.trim() {
        "auto" => Ok(MaxPto::Auto),
        "off" => Ok(MaxPto::Unbounded),
        time => match super::simulate::parse_duration(time) {
            Ok(d) if d.is_zero() => Err("a bound of 0 would leave no time for a probe; \
                                         use a positive TIME, auto or off"
                .into()),
            Ok(d) => Ok(MaxPto::Fixed(d)),
            Err(e) => Err(format!("{e}; or auto, or off")),
        },
    }
}

fn parse_threshold_rtt(s: &str) -> Result<ThresholdRtt, String> {
    s.parse::<ThresholdRtt>().map_err(|e| e.to_string())
}

fn parse_fec(s: &str) -> Result<FecSpec, String> {
    s.parse::<FecSpec>().map_err(|e| e.to_string())
}

fn parse_cc(s: &str) -> Result<CcAlgorithm, String> {
    s.parse::<CcAlgorithm>().map_err(|e| e.to_string())
}

fn parse_loss_detection(s: &str) -> Result<LossDetectionMode, String> {
    s.parse::<LossDetectionMode>().map_err(|e| e.to_string())
}

/// The transport's default payload size, as the flag's type.
fn default_max_datagram_size() -> u16 {
    u16::try_from(TransportConfig::default().max_datagram_size).unwrap_or(u16::MAX)
}
