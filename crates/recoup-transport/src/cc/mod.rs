//! Congestion control: the controller trait, the built-in controllers and their configuration.
//!
//! The connection drives a controller from what [`crate::loss::LossDetection`] reports. For one
//! ACK it calls [`CongestionController::on_congestion_event`] first (if the ACK declared in-flight
//! packets lost) and then [`CongestionController::on_ack`], the order of RFC 9002 Appendix A.7, so
//! packets acknowledged together with a loss do not grow the window. Built-ins are dispatched
//! through the [`Controller`] enum; user controllers go in [`Controller::Custom`].

pub mod bbr;
pub mod bbr3;
pub mod copa;
pub mod cubic;
pub mod hystart;
pub mod newreno;
pub mod none;
#[cfg(test)]
mod test_support;

use std::fmt;
use std::str::FromStr;

use recoup_time::Instant;
use smallvec::SmallVec;

use crate::delivery_rate::{RateSample, RateSnapshot};
use crate::error::Error;
use crate::loss::SentPacket;
use crate::rtt::RttEstimator;

pub use bbr::Bbr;
pub use bbr3::{Bbr3, Bbr3Params};
pub use copa::Copa;
pub use cubic::Cubic;
pub use newreno::NewReno;
pub use none::NoControl;

/// RFC 9000 §14: the smallest maximum datagram size every path supports.
pub const DEFAULT_MAX_DATAGRAM_SIZE: u64 = 1200;

/// An acknowledged in-flight packet as a controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckedPacket {
    pub time_sent: Instant,
    pub bytes: u64,
    pub rate: RateSnapshot,
}

impl AckedPacket {
    #[must_use]
    pub fn from_sent<T>(p: &SentPacket<T>) -> Self {
        Self {
            time_sent: p.time_sent,
            bytes: p.size as u64,
            rate: p.rate,
        }
    }

    /// The in-flight packets of `acked` (what controllers count), in order; an ACK's few are
    /// kept on the stack.
    #[must_use]
    pub fn in_flight_of<T>(acked: &[SentPacket<T>]) -> SmallVec<[Self; 8]> {
        acked
            .iter()
            .filter(|p| p.in_flight)
            .map(Self::from_sent)
            .collect()
    }
}

/// An in-flight packet declared lost whose loss congestion control hears of (ARCHITECTURE.md "The
/// path of a loss": not an older copy of a round, not a path MTU probe), as a controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostPacket {
    pub time_sent: Instant,
    pub bytes: u64,
    pub rate: RateSnapshot,
    /// Bytes declared lost so far, this packet included ("C.lost" of draft-ietf-ccwg-bbr-06
    /// §2.2): minus `rate.lost`, the losses since this packet left.
    pub lost_total: u64,
}

/// Everything a controller learns from one ACK frame.
#[derive(Clone, Copy, Debug)]
pub struct AckEvent<'a> {
    pub now: Instant,
    /// Newly acknowledged in-flight packets, ascending packet numbers.
    pub acked: &'a [AckedPacket],
    pub rate_sample: Option<&'a RateSample>,
    /// The RTT estimate after this ACK's sample.
    pub rtt: &'a RttEstimator,
    /// The ACK gave an RTT sample (RFC 9002 §5.1), now `rtt.latest()`.
    pub rtt_sampled: bool,
    /// Bytes in flight before the ACK was processed.
    pub prior_in_flight: u64,
    /// Bytes in flight after it (acknowledged and lost packets removed).
    pub in_flight: u64,
    /// The sender was application-limited ([`app_limited`]): the window was not the limit, so
    /// it must not grow (RFC 9002 §7.8).
    pub app_limited: bool,
    /// Bytes declared lost so far whose loss congestion control heard of, this ACK's losses
    /// included ("C.lost" of draft-ietf-ccwg-bbr-06 §2.2): minus the sample's `prior_lost`, the
    /// losses since the newest acknowledged packet left ("RS.lost").
    pub lost_total: u64,
}

/// Packets of the window a flight may leave unused and still count as using it: quic-go's
/// `maxBurstPackets`.
pub const CWND_LIMITED_SLACK_PACKETS: u64 = 3;

/// Whether an ACK finds the sender application-limited: it has nothing queued to send
/// (`has_new_data` false) and the flight before the ACK, `prior_in_flight`, left more than
/// [`CWND_LIMITED_SLACK_PACKETS`] datagrams of `window` unused.
///
/// RFC 9002 §7.8 calls the window underutilized "when bytes in flight is smaller than the
/// congestion window and sending is not pacing limited", and RFC 9438 §5.8 calls a flow
/// application-limited when it is "currently sending less than what is allowed by the congestion
/// window": the test is the flight against the window, not whether data is queued when the ACK
/// comes. An empty queue alone would call a flight that filled the window application-limited
/// because the application wrote nothing more within the RTT, so a sender of objects no larger
/// than the window would never grow it while every loss still cut it. A window within a few
/// packets of full still counts as used, as quic-go's `isCwndLimited` does
/// (internal/congestion/cubic_sender.go:267-275 and `maxBurstPackets` at :17, commit 2cfe6ee):
/// a flight whose last packets waited for the window, or for the pacer, leaves a little of it
/// free.
#[must_use]
pub fn app_limited(has_new_data: bool, prior_in_flight: u64, window: u64, mds: u64) -> bool {
    let slack = CWND_LIMITED_SLACK_PACKETS.saturating_mul(mds);
    !has_new_data && prior_in_flight.saturating_add(slack) < window
}

/// Controller settings shared by the built-ins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcConfig {
    /// The path's maximum datagram size (RFC 9002 §7.2).
    pub max_datagram_size: u64,
    /// Overrides RFC 9002 §7.2's initial window.
    pub initial_window: Option<u64>,
    /// Seeds the controller's randomness (BBR's starting ProbeBW phase).
    pub seed: u64,
    /// HyStart++ (RFC 9406) in the initial slow start of CUBIC and NewReno.
    pub hystart: bool,
    /// The sender paces its packets (HyStart++'s L, RFC 9406 §4.3).
    pub paced: bool,
}

impl Default for CcConfig {
    fn default() -> Self {
        Self {
            max_datagram_size: DEFAULT_MAX_DATAGRAM_SIZE,
            initial_window: None,
            seed: 0,
            hystart: true,
            paced: true,
        }
    }
}

impl CcConfig {
    /// RFC 9002 §7.2: min(10·mds, max(14720, 2·mds)) unless overridden.
    #[must_use]
    pub fn initial_window(&self) -> u64 {
        let mds = self.max_datagram_size;
        self.initial_window.unwrap_or_else(|| {
            mds.saturating_mul(10)
                .min(14_720.max(mds.saturating_mul(2)))
        })
    }

    /// RFC 9002 §7.2 kMinimumWindow: 2·mds.
    #[must_use]
    pub fn minimum_window(&self) -> u64 {
        self.max_datagram_size.saturating_mul(2)
    }
}

/// A congestion controller.
pub trait CongestionController: fmt::Debug + Send {
    /// An in-flight packet of `bytes` left; `bytes_in_flight` is before it.
    fn on_packet_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64);

    /// Packets were acknowledged.
    fn on_ack(&mut self, ack: &AckEvent<'_>);

    /// An in-flight packet was declared lost and its loss signals congestion. Called for each
    /// such packet of a loss event, before [`Self::on_congestion_event`] for the event, for
    /// controllers that look at each loss (BBRv3's per-loss steps, draft-ietf-ccwg-bbr-06
    /// §5.2.4).
    fn on_packet_lost(&mut self, now: Instant, lost: &LostPacket) {
        let _ = (now, lost);
    }

    /// In-flight packets were declared lost by one ACK or one timer expiry; the newest was sent at
    /// `largest_lost_sent_time` (RFC 9002 §7.3.2: a new reduction only if it was sent after the
    /// current recovery period began).
    fn on_congestion_event(
        &mut self,
        now: Instant,
        largest_lost_sent_time: Instant,
        lost_bytes: u64,
        persistent_congestion: bool,
        rtt: &RttEstimator,
    );

    /// The congestion window in bytes.
    fn window(&self) -> u64;

    /// Path MTU discovery changed the datagram size (RFC 9000 §14.3). Windows floored in
    /// datagrams follow it, so the minimum window still holds two full packets (RFC 9002 §7.2):
    /// a floor below one packet would let nothing leave until a PTO.
    fn on_max_datagram_size(&mut self, mds: u64) {
        let _ = mds;
    }

    /// The rate the controller wants packets paced at, bytes per second, if it has one
    /// (window-based controllers have none: the pacer derives one from the window).
    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    /// The estimated bottleneck bandwidth in bytes per second, if the controller measures it.
    fn bandwidth_estimate(&self) -> Option<u64> {
        None
    }

    /// The algorithm's name, as [`CcAlgorithm`] parses it.
    fn name(&self) -> &'static str;

    /// The controller's current state, for qlog's `congestion_state_updated`.
    fn state(&self) -> &'static str;
}

/// The built-in algorithms, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CcAlgorithm {
    /// RFC 9002 §7.
    NewReno,
    /// RFC 9438.
    #[default]
    Cubic,
    /// BBRv1 (draft-cardwell-iccrg-bbr-congestion-control-00).
    Bbr,
    /// BBRv3 (draft-ietf-ccwg-bbr-06), with its loss-response parameters (`bbr3:beta=0.8`).
    Bbr3(Bbr3Params),
    /// Copa (Arun & Balakrishnan, NSDI 2018) with δ = 0.5.
    Copa,
    /// No congestion control (a constant-bitrate real-time sender, AutoRec §VII Fig. 20).
    None,
}

impl CcAlgorithm {
    /// Accepted names, in the order of the error message.
    pub const NAMES: [&'static str; 6] = ["newreno", "cubic", "bbr", "bbr3", "copa", "none"];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            CcAlgorithm::NewReno => "newreno",
            CcAlgorithm::Cubic => "cubic",
            CcAlgorithm::Bbr => "bbr",
            CcAlgorithm::Bbr3(_) => "bbr3",
            CcAlgorithm::Copa => "copa",
            CcAlgorithm::None => "none",
        }
    }
}

/// The name, then any parameter that differs from its default (`bbr3:beta=0.8`), as
/// [`FromStr`] parses it back.
impl fmt::Display for CcAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match self {
            CcAlgorithm::Bbr3(p) if *p != Bbr3Params::default() => write!(f, ":{p}"),
            _ => Ok(()),
        }
    }
}

impl FromStr for CcAlgorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, params) = match s.split_once(':') {
            Some((name, params)) => (name, Some(params)),
            None => (s, None),
        };
        let name = name.trim().to_ascii_lowercase();
        match (name.as_str(), params) {
            ("bbr3" | "bbrv3", params) => {
                return Ok(CcAlgorithm::Bbr3(
                    params.map_or(Ok(Bbr3Params::default()), Bbr3Params::parse)?,
                ))
            }
            (_, Some(_)) if CcAlgorithm::NAMES.contains(&name.as_str()) => {
                return Err(Error::invalid(
                    "congestion controller",
                    format!("`{name}` takes no parameters; only bbr3 does (`bbr3:beta=0.8`)"),
                ))
            }
            _ => {}
        }
        match name.as_str() {
            "newreno" | "reno" => Ok(CcAlgorithm::NewReno),
            "cubic" => Ok(CcAlgorithm::Cubic),
            "bbr" | "bbr1" | "bbrv1" => Ok(CcAlgorithm::Bbr),
            "copa" => Ok(CcAlgorithm::Copa),
            "none" => Ok(CcAlgorithm::None),
            _ => Err(Error::invalid(
                "congestion controller",
                format!(
                    "unknown name {s:?}; accepted: {}",
                    CcAlgorithm::NAMES.join(", ")
                ),
            )),
        }
    }
}

/// A controller: a built-in (enum dispatch) or a user's.
#[derive(Debug)]
pub enum Controller {
    NewReno(NewReno),
    Cubic(Cubic),
    Bbr(Box<Bbr>),
    Bbr3(Box<Bbr3>),
    Copa(Box<Copa>),
    None(NoControl),
    Custom(Box<dyn CongestionController>),
}

impl Controller {
    /// A built-in controller.
    #[must_use]
    pub fn new(algorithm: CcAlgorithm, config: &CcConfig, now: Instant) -> Self {
        match algorithm {
            CcAlgorithm::NewReno => Controller::NewReno(NewReno::new(config)),
            CcAlgorithm::Cubic => Controller::Cubic(Cubic::new(config)),
            CcAlgorithm::Bbr => Controller::Bbr(Box::new(Bbr::new(config, now))),
            CcAlgorithm::Bbr3(params) => Controller::Bbr3(Box::new(Bbr3::new(config, params, now))),
            CcAlgorithm::Copa => Controller::Copa(Box::new(Copa::new(config))),
            CcAlgorithm::None => Controller::None(NoControl),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Controller::NewReno($c) => $e,
            Controller::Cubic($c) => $e,
            Controller::Bbr($c) => $e,
            Controller::Bbr3($c) => $e,
            Controller::Copa($c) => $e,
            Controller::None($c) => $e,
            Controller::Custom($c) => $e,
        }
    };
}

impl CongestionController for Controller {
    fn on_packet_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64) {
        dispatch!(self, c => c.on_packet_sent(now, bytes, bytes_in_flight));
    }

    fn on_ack(&mut self, ack: &AckEvent<'_>) {
        dispatch!(self, c => c.on_ack(ack));
    }

    fn on_packet_lost(&mut self, now: Instant, lost: &LostPacket) {
        dispatch!(self, c => c.on_packet_lost(now, lost));
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        largest_lost_sent_time: Instant,
        lost_bytes: u64,
        persistent_congestion: bool,
        rtt: &RttEstimator,
    ) {
        dispatch!(self, c => c.on_congestion_event(
            now,
            largest_lost_sent_time,
            lost_bytes,
            persistent_congestion,
            rtt,
        ));
    }

    fn window(&self) -> u64 {
        dispatch!(self, c => c.window())
    }

    fn on_max_datagram_size(&mut self, mds: u64) {
        dispatch!(self, c => c.on_max_datagram_size(mds));
    }

    fn pacing_rate(&self) -> Option<u64> {
        dispatch!(self, c => c.pacing_rate())
    }

    fn bandwidth_estimate(&self) -> Option<u64> {
        dispatch!(self, c => c.bandwidth_estimate())
    }

    fn name(&self) -> &'static str {
        dispatch!(self, c => c.name())
    }

    fn state(&self) -> &'static str {
        dispatch!(self, c => c.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_in_flight_packets_reach_controllers() {
        let t = Instant::from_nanos(7);
        let sent = [
            SentPacket::new(1, t, 1200, true, true, ()),
            SentPacket::new(2, t, 40, false, false, ()),
        ];
        let acked = AckedPacket::in_flight_of(&sent);
        assert_eq!(acked.len(), 1);
        assert_eq!((acked[0].time_sent, acked[0].bytes), (t, 1200));
    }

    /// RFC 9002 §7.8: application-limited means the flight did not use the window, not that the
    /// queue was empty when the ACK came.
    #[test]
    fn app_limited_is_a_flight_below_the_window() {
        let (mds, window) = (1200, 12_000);
        // Queued data: never application-limited, whatever the flight.
        assert!(!app_limited(true, 0, window, mds));
        // The flight filled the window, or came within three datagrams of it.
        assert!(!app_limited(false, window, window, mds));
        assert!(!app_limited(false, window - 3 * mds, window, mds));
        // More than three datagrams of it unused.
        assert!(app_limited(false, window - 3 * mds - 1, window, mds));
        assert!(app_limited(false, 0, window, mds));
    }

    #[test]
    fn windows_from_rfc_9002() {
        let c = CcConfig::default();
        assert_eq!(c.initial_window(), 12_000);
        assert_eq!(c.minimum_window(), 2400);
        let big = CcConfig {
            max_datagram_size: 1500,
            ..CcConfig::default()
        };
        assert_eq!(big.initial_window(), 14_720);
        let jumbo = CcConfig {
            max_datagram_size: 9000,
            ..CcConfig::default()
        };
        assert_eq!(jumbo.initial_window(), 18_000);
        let fixed = CcConfig {
            initial_window: Some(4000),
            ..CcConfig::default()
        };
        assert_eq!(fixed.initial_window(), 4000);
    }

    /// A datagram size raised by path MTU discovery raises the floors too: after persistent
    /// congestion every window still holds two full packets of the new size (RFC 9002 §7.2),
    /// or nothing could leave until a PTO.
    #[test]
    fn window_floors_follow_a_larger_datagram_size() {
        let config = CcConfig {
            max_datagram_size: 1350,
            ..CcConfig::default()
        };
        let rtt = crate::rtt::RttEstimator::new(std::time::Duration::from_millis(100));
        for name in CcAlgorithm::NAMES {
            let a: CcAlgorithm = name.parse().expect("accepted");
            if a == CcAlgorithm::None {
                continue;
            }
            let mut c = Controller::new(a, &config, Instant::ZERO);
            c.on_max_datagram_size(1452);
            let t = Instant::ZERO + std::time::Duration::from_secs(1);
            c.on_congestion_event(t, t, 30_000, true, &rtt);
            assert!(c.window() >= 2 * 1452, "{name}: {}", c.window());
        }
    }

    #[test]
    fn algorithm_names_parse_and_errors_list_them() {
        for name in CcAlgorithm::NAMES {
            let a: CcAlgorithm = name.parse().expect("accepted");
            assert_eq!(a.to_string(), name);
            let c = Controller::new(a, &CcConfig::default(), Instant::ZERO);
            assert_eq!(c.name(), name);
            // RFC 9002 §7.2's initial window, except for the controller that has none.
            let initial = if a == CcAlgorithm::None {
                c.window()
            } else {
                12_000
            };
            assert_eq!(c.window(), initial);
        }
        assert_eq!(" BBR ".parse::<CcAlgorithm>().ok(), Some(CcAlgorithm::Bbr));
        assert_eq!(
            "BBRv3".parse::<CcAlgorithm>().ok(),
            Some(CcAlgorithm::Bbr3(Bbr3Params::default()))
        );
        let tuned: CcAlgorithm = "bbr3:beta=0.8,headroom=10%"
            .parse()
            .expect("bbr3 parameters");
        assert_eq!(tuned.to_string(), "bbr3:beta=0.8,headroom=0.1");
        assert_eq!(tuned.to_string().parse::<CcAlgorithm>().ok(), Some(tuned));
        let err = "bbr3:beta=2"
            .parse::<CcAlgorithm>()
            .expect_err("out of range");
        assert!(err.to_string().contains("`beta`"), "{err}");
        let err = "cubic:beta=0.7"
            .parse::<CcAlgorithm>()
            .expect_err("cubic takes none");
        assert!(
            err.to_string().contains("`cubic` takes no parameters"),
            "{err}"
        );
        let err = "vegas".parse::<CcAlgorithm>().expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "invalid congestion controller: unknown name \"vegas\"; accepted: newreno, cubic, bbr, \
             bbr3, copa, none"
        );
    }

    #[test]
    fn custom_controllers_dispatch() {
        #[derive(Debug)]
        struct Fixed;
        impl CongestionController for Fixed {
            fn on_packet_sent(&mut self, _: Instant, _: u64, _: u64) {}
            fn on_ack(&mut self, _: &AckEvent<'_>) {}
            fn on_congestion_event(
                &mut self,
                _: Instant,
                _: Instant,
                _: u64,
                _: bool,
                _: &RttEstimator,
            ) {
            }
            fn window(&self) -> u64 {
                42
            }
            fn pacing_rate(&self) -> Option<u64> {
                Some(7)
            }
            fn bandwidth_estimate(&self) -> Option<u64> {
                None
            }
            fn name(&self) -> &'static str {
                "fixed"
            }
            fn state(&self) -> &'static str {
                "fixed"
            }
        }
        let c = Controller::Custom(Box::new(Fixed));
        assert_eq!(
            (c.window(), c.pacing_rate(), c.name()),
            (42, Some(7), "fixed")
        );
    }
}
