//! Per-connection settings: transport parameters we announce, recovery and congestion control.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use recoup_recovery::{FecSpec, Policy, PolicySpec, RecoveryPolicy};

use crate::cc::CcAlgorithm;
use crate::error::Error;
use crate::loss::{LossDetectionMode, ThresholdRtt};

/// The smallest datagram QUIC allows on a path (RFC 9000 §14): Initial packets are padded to it.
pub const MIN_INITIAL_SIZE: usize = 1200;

/// Builds a user-defined recovery policy for each connection, from the connection's seed.
#[derive(Clone)]
pub struct PolicyFactory(Arc<dyn Fn(u64) -> Box<dyn RecoveryPolicy + Send> + Send + Sync>);

impl PolicyFactory {
    pub fn new(f: impl Fn(u64) -> Box<dyn RecoveryPolicy + Send> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    #[must_use]
    pub fn build(&self, seed: u64) -> Policy {
        Policy::User((self.0)(seed))
    }
}

impl std::fmt::Debug for PolicyFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyFactory(..)")
    }
}

/// Settings shared by every connection of an endpoint. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// Idle timeout we announce (RFC 9000 §10.1); zero disables it.
    pub max_idle_timeout: Duration,
    /// RTT assumed before the first sample (RFC 9002 §6.2.2: 333 ms).
    pub initial_rtt: Duration,
    /// Longest we delay an ACK (RFC 9000 §18.2 `max_ack_delay`, default 25 ms).
    pub max_ack_delay: Duration,
    /// ACK after this many ack-eliciting packets (RFC 9000 §13.2.2 recommends 2).
    pub ack_eliciting_threshold: u32,
    /// Exponent we use to encode ACK delay (RFC 9000 §18.2, default 3).
    pub ack_delay_exponent: u8,
    /// Connection-level receive window (initial_max_data).
    pub receive_window: u64,
    /// Per-stream receive window (initial_max_stream_data_*).
    pub stream_receive_window: u64,
    /// Streams the peer may open (initial_max_streams_bidi / _uni).
    pub max_streams_bidi: u64,
    pub max_streams_uni: u64,
    /// Bytes the application may queue per stream before `write` pushes back.
    pub send_buffer: usize,
    /// Largest UDP payload we send before path MTU discovery finds more (and announce as
    /// max_udp_payload_size without discovery).
    pub max_datagram_size: usize,
    /// Path MTU discovery (RFC 9000 §14.3): once the handshake is confirmed, probe sizes above
    /// `max_datagram_size` up to this one (also announced as max_udp_payload_size). `None`: no
    /// discovery, every datagram at most `max_datagram_size`.
    pub pmtud_max: Option<usize>,
    /// Connection IDs we keep issued to the peer (capped by its active_connection_id_limit).
    pub active_connection_id_limit: u64,
    /// Length of the connection IDs we issue.
    pub local_cid_len: usize,
    /// The first byte of every connection ID we issue, when set: a server with several workers
    /// on one port names the worker that owns the connection, so a datagram the kernel hands
    /// to another worker (after a NAT rebinding or a migration changed its 4-tuple) can be
    /// passed on to it (QUIC-LB's idea, draft-ietf-quic-load-balancers, without encryption).
    pub cid_prefix: Option<u8>,
    /// Congestion controller.
    pub cc: CcAlgorithm,
    /// Initial congestion window in packets of `max_datagram_size`; `None` is RFC 9002 §7.2's.
    pub initial_window: Option<u64>,
    /// Send one PING-only packet after the last packet of each burst of stream data (when
    /// nothing else waits to be sent). A lost tail is otherwise found only when the next burst's
    /// ACKs arrive or the probe timeout fires; the PING arrives after the gap the loss left, which
    /// an RFC 9000 §13.2.1 receiver acknowledges at once, so RFC 9002 §6.1.2's time threshold
    /// finds the tail about 9/8 RTT after its send. Costs one small packet per burst. Off by
    /// default.
    pub tail_ping: bool,
    /// Pace packets (RFC 9002 §7.7).
    pub pacing: bool,
    /// HyStart++ (RFC 9406) in the initial slow start of CUBIC and NewReno.
    pub hystart: bool,
    /// Packets pacing lets leave back to back after an idle period.
    pub pacing_burst: u64,
    /// An upper bound on the pacing rate, bytes per second, on top of the congestion
    /// controller's and the policy's (an ablation knob: do cloud-gaming frames overflow a
    /// shallow buffer because they leave at Copa's 2·cwnd/RTT?). Like the policy's limit, it
    /// replaces the window-based rate of a controller that sets no explicit rate.
    pub max_pacing_rate: Option<u64>,
    /// Which copies may leave when the congestion window is full.
    pub copies_beyond_cwnd: CopiesBeyondCwnd,
    /// Loss-recovery policy; built per connection with a seed derived from `seed`.
    pub policy: PolicySpec,
    /// A user policy (DESIGN.md principle 4): when set, it replaces `policy`.
    pub custom_policy: Option<PolicyFactory>,
    /// FEC scheme for the data we send (docs/FEC.md): used only toward a peer whose transport
    /// parameters say it decodes repair frames; toward any other peer we send plain ARQ.
    pub fec: Option<FecSpec>,
    /// Announce that we decode repair frames (the `recoup_fec` transport parameter), so a recoup
    /// peer with a FEC scheme may send them to us. Off by default so that an endpoint not
    /// using FEC sends exactly the handshake it sent before the extension existed; `recoup get`
    /// and a simulated client with FEC in the scenario turn it on.
    pub fec_receive: bool,
    /// DATAGRAM frames (RFC 9221): what we announce and how much we queue. Off by default.
    pub datagrams: DatagramConfig,
    /// RFC 9002 §6.1.1 kPacketThreshold.
    pub packet_threshold: u64,
    /// RFC 9002 §6.1.2 kTimeThreshold as a fraction (numerator, denominator): 9/8.
    pub time_threshold: (u32, u32),
    /// The RTT sample the time threshold multiplies with smoothed_rtt ([`ThresholdRtt`]).
    pub threshold_rtt: ThresholdRtt,
    /// Loss detection algorithm: RFC 9002's or RACK-TLP (RFC 8985).
    pub loss_detection: LossDetectionMode,
    /// An upper bound on the backed-off probe timeout ([`MaxPto`]).
    pub max_pto: MaxPto,
    /// Initiate a 1-RTT key update after this many packets sent with one key (RFC 9001 §6);
    /// `None` updates only when asked ([`crate::Connection::initiate_key_update`]) or when the
    /// AEAD's confidentiality limit nears (RFC 9001 §6.6, always enforced).
    pub key_update_interval: Option<u64>,
    /// Lower AEAD limits than the cipher's (RFC 9001 §6.6): packets one key may protect, and
    /// received packets that may fail authentication before the connection closes with
    /// AEAD_LIMIT_REACHED. `None` keeps the cipher's (2^23 and 2^52 for AES-GCM); tests lower
    /// them to reach the limits. A limit above the cipher's is ignored.
    pub aead_confidentiality_limit: Option<u64>,
    pub aead_integrity_limit: Option<u64>,
    /// Keep a per-lost-range recovery record for the metrics (DESIGN.md "Metrics").
    pub record_recovery: bool,
    /// Keep per-packet send/ACK/loss records for the application (`Connection::drain_packet_records`),
    /// e.g. a cloud-gaming bitrate controller.
    pub record_packets: bool,
    /// Seed for connection IDs and the policy's random choices. A simulated run is a pure
    /// function of its seed; the real-time driver seeds from the OS.
    pub seed: u64,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_idle_timeout: Duration::from_secs(30),
            initial_rtt: Duration::from_millis(333),
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
            ack_delay_exponent: 3,
            receive_window: 16 * 1024 * 1024,
            stream_receive_window: 8 * 1024 * 1024,
            max_streams_bidi: 128,
            max_streams_uni: 128,
            send_buffer: 4 * 1024 * 1024,
            max_datagram_size: 1350,
            pmtud_max: None,
            active_connection_id_limit: 4,
            local_cid_len: 8,
            cid_prefix: None,
            cc: CcAlgorithm::default(),
            initial_window: None,
            tail_ping: false,
            pacing: true,
            hystart: true,
            pacing_burst: crate::pacing::DEFAULT_BURST_PACKETS,
            max_pacing_rate: None,
            copies_beyond_cwnd: CopiesBeyondCwnd::default(),
            policy: PolicySpec::default(),
            custom_policy: None,
            fec: None,
            fec_receive: false,
            datagrams: DatagramConfig::default(),
            packet_threshold: 3,
            time_threshold: (9, 8),
            threshold_rtt: ThresholdRtt::Latest,
            loss_detection: LossDetectionMode::Rfc9002,
            max_pto: MaxPto::default(),
            key_update_interval: None,
            aead_confidentiality_limit: None,
            aead_integrity_limit: None,
            record_recovery: false,
            record_packets: false,
            seed: 0,
        }
    }
}

/// DATAGRAM frames (RFC 9221): unreliable application data on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramConfig {
    /// The `max_datagram_frame_size` we announce (RFC 9221 §3): the largest DATAGRAM frame
    /// (type, length and data) we accept. 0, the default, announces nothing, so the handshake
    /// is the one sent before DATAGRAM support existed and the peer may send us none; §3
    /// recommends 65535 for most uses. Sending needs only the peer's parameter.
    pub max_frame_size: u64,
    /// Bytes of datagram data queued for sending; a datagram that would exceed it pushes the
    /// oldest out (counted in `ConnectionStats::datagram_frames_dropped`). Datagrams wait for the
    /// congestion window (§5.4), so under congestion the freshest are the ones kept.
    pub send_buffer: usize,
    /// Bytes of received datagram data held until the application reads them; beyond it the
    /// oldest is dropped (§5: a receiver may drop datagrams it cannot process).
    pub receive_buffer: usize,
}

impl Default for DatagramConfig {
    fn default() -> Self {
        Self {
            max_frame_size: 0,
            send_buffer: 1024 * 1024,
            receive_buffer: 1024 * 1024,
        }
    }
}

/// Which copies (replicas, reinjections) may be sent when the congestion window is full. Copies
/// always count in bytes in flight and always wait for pacing.
///
/// The default follows AutoRec: its Fig. 13 discussion (§VII-A) explains the formulas' growing
/// error at large K by "the actual amount of injected replicas is limited by the sending rate
/// determined by the congestion control algorithm", so AutoRec's copies wait for the window.
/// ART §6.4 adds "opportunism, which allows replicas to be sent on time even when the congestion
/// window is insufficient", which a policy asks for per copy. AutoRec §VIII-C says only that
/// reinjection works "without interfering with QUIC's native loss-recovery mechanism".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CopiesBeyondCwnd {
    /// Only copies the policy marks (ART §6.4 opportunism, within the policy's budget).
    #[default]
    Policy,
    /// Also every copy asked for in off-mode (no new data waiting): the application leaves the
    /// path idle, and a copy then delays no new data.
    OffMode,
    /// Every copy.
    Always,
}

impl CopiesBeyondCwnd {
    /// Accepted names, in the order of the error message.
    pub const NAMES: [&'static str; 3] = ["policy", "offmode", "always"];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            CopiesBeyondCwnd::Policy => "policy",
            CopiesBeyondCwnd::OffMode => "offmode",
            CopiesBeyondCwnd::Always => "always",
        }
    }
}

impl fmt::Display for CopiesBeyondCwnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CopiesBeyondCwnd {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        Self::NAMES
            .iter()
            .zip([Self::Policy, Self::OffMode, Self::Always])
            .find(|(n, _)| **n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| {
                Error::invalid(
                    "copies_beyond_cwnd",
                    format!("unknown value {s:?}; accepted: {}", Self::NAMES.join(", ")),
                )
            })
    }
}

/// An upper bound on the probe timeout period after backoff. RFC 9002 §6.2.1 doubles the period
/// on every expiry and names no limit: at high loss, a run of probes whose ACKs are all lost
/// backs it off past the idle timeout, and the connection dies of silence while both ends are
/// alive (RFC 9000 §10.1 makes the idle timeout at least three PTOs so that several probes fit
/// before it; the backoff undoes that). A bound keeps probes coming at most this far apart;
/// the idle timeout still ends a connection whose peer is gone. The bound never shortens the
/// period below the un-backed-off PTO, so a long path keeps RFC 9002's own timing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MaxPto {
    /// RFC 9002 as written: the period doubles without bound. The simulator's default, so the
    /// paper reproductions keep the timing their results were measured with.
    #[default]
    Unbounded,
    /// At most this long.
    Fixed(Duration),
    /// A tenth of the effective idle timeout (3 s at 30 s), unbounded without one.
    /// RFC 9000 §10.1 read from the other side asks for at least three probes inside the idle
    /// timeout; a tenth leaves room for the doubling up to the bound (less than two bounds)
    /// and eight probes at it, because three were measured to be too few: at 30 % loss each
    /// way a round of probes gets no ACK back with probability 0.33-0.5 (docs/INTEROP.md, "30 %
    /// loss benchmark"), so three rounds all fail in 4-12 % of the PTO chains of a transfer and
    /// eight in under 0.4 %. picoquic bounds its timer at a sixteenth of the idle timeout.
    Auto,
}

impl MaxPto {
    /// [`MaxPto::Auto`]'s share of the idle timeout.
    pub const AUTO_SHARE: u32 = 10;

    /// The bound for a connection whose effective idle timeout is `idle` (`None`: no timeout).
    #[must_use]
    pub fn bound(self, idle: Option<Duration>) -> Option<Duration> {
        match self {
            Self::Unbounded => None,
            Self::Fixed(d) => Some(d),
            Self::Auto => idle.map(|t| t / Self::AUTO_SHARE),
        }
    }
}

/// TLS and transport settings for a client connection.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub transport: TransportConfig,
    pub tls: Arc<rustls::ClientConfig>,
    /// Server name for SNI and certificate verification.
    pub server_name: String,
}

/// TLS and transport settings for the connections a server endpoint accepts.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub transport: TransportConfig,
    pub tls: Arc<rustls::ServerConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_pto_auto_is_a_tenth_of_the_idle_timeout_and_nothing_without_one() {
        let idle = Duration::from_secs(30);
        assert_eq!(MaxPto::Auto.bound(Some(idle)), Some(Duration::from_secs(3)));
        assert_eq!(MaxPto::Auto.bound(None), None);
        assert_eq!(MaxPto::Unbounded.bound(Some(idle)), None);
        let d = Duration::from_secs(2);
        assert_eq!(MaxPto::Fixed(d).bound(None), Some(d));
        // At least three probes at the bound fit in the idle timeout (RFC 9000 §10.1).
        let bound = MaxPto::Auto.bound(Some(idle)).expect("a bound");
        assert!(bound * 3 <= idle);
    }

    #[test]
    fn copies_beyond_cwnd_names_parse_and_errors_list_them() {
        for name in CopiesBeyondCwnd::NAMES {
            let v: CopiesBeyondCwnd = name.parse().expect("accepted");
            assert_eq!(v.to_string(), name);
        }
        assert_eq!(
            " OffMode ".parse::<CopiesBeyondCwnd>().ok(),
            Some(CopiesBeyondCwnd::OffMode)
        );
        assert_eq!(CopiesBeyondCwnd::default(), CopiesBeyondCwnd::Policy);
        let err = "sometimes"
            .parse::<CopiesBeyondCwnd>()
            .expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "invalid copies_beyond_cwnd: unknown value \"sometimes\"; accepted: policy, offmode, \
             always"
        );
    }
}
