//! One test per state and transition of the draft's pseudo-code, driven through the controller's
//! own entry points with hand-made rate samples, then closed loops over a simulated bottleneck.

use std::time::Duration;

use recoup_time::Instant;

use super::states::PROBE_RTT_DURATION;
use super::*;
use crate::cc::test_support::{closed_loop, Path, Source, MDS};
use crate::cc::AckedPacket;
use crate::delivery_rate::RateSnapshot;

fn secs(s: f64) -> Instant {
    Instant::ZERO + Duration::from_secs_f64(s)
}

/// A 10 Mbit/s, 40 ms path: a BDP of 50 000 bytes.
const RATE: u64 = 1_250_000;
const RTT: Duration = Duration::from_millis(40);
const BDP: u64 = 50_000;

/// One ACK as the draft's pseudo-code reads it (§2.3): the rate sample of its newest packet and
/// what it acknowledged.
#[derive(Clone, Copy, Debug)]
struct Ack {
    /// RS.newly_acked.
    bytes: u64,
    /// RS.delivery_rate; RS.delivered is a round trip of it.
    rate: u64,
    /// C.inflight after the ACK.
    in_flight: u64,
    /// The newest packet acknowledged left after everything acknowledged before it: a
    /// packet-timed round (§5.5.1) and a loss round (§5.5.10.3) end.
    round: bool,
    app_limited: bool,
    /// RS.tx_in_flight and RS.lost.
    tx_in_flight: u64,
    lost: u64,
}

impl Ack {
    /// A round trip's worth of data acknowledged at `rate`, one BDP in flight.
    fn round(rate: u64) -> Self {
        Self {
            bytes: bytes_in(rate, RTT),
            rate,
            in_flight: BDP,
            round: true,
            app_limited: false,
            tx_in_flight: BDP,
            lost: 0,
        }
    }

    /// The same within a round.
    fn mid_round(self) -> Self {
        Self {
            round: false,
            ..self
        }
    }

    fn in_flight(self, in_flight: u64) -> Self {
        Self { in_flight, ..self }
    }

    fn bytes(self, bytes: u64) -> Self {
        Self { bytes, ..self }
    }
}

fn bytes_in(rate: u64, d: Duration) -> u64 {
    (u128::from(rate) * d.as_nanos() / 1_000_000_000) as u64
}

/// A controller fed by hand, the way the connection feeds it: ACKs carry rate samples of a
/// 40 ms path, losses come as the connection reports them (`on_packet_lost`, then
/// `on_congestion_event`).
#[derive(Clone)]
struct Feed {
    cc: Bbr3,
    rtt: RttEstimator,
    now: Instant,
    delivered: u64,
    lost_total: u64,
}

impl Feed {
    fn new() -> Self {
        let mut rtt = RttEstimator::new(RTT);
        rtt.update(Instant::ZERO, RTT, Duration::ZERO, Duration::ZERO, true);
        Self {
            cc: Bbr3::new(&CcConfig::default(), Bbr3Params::default(), Instant::ZERO),
            rtt,
            now: Instant::ZERO,
            delivered: 0,
            // Losses long before: a sample may count losses its controller never heard of.
            lost_total: 100 * MDS,
        }
    }

    /// One ACK at `now`.
    fn ack_at(&mut self, now: Instant, a: Ack) {
        self.now = now;
        let prior_delivered = if a.round {
            self.delivered
        } else {
            // Sent before the current round and loss round began.
            (self.cc.next_round_delivered)
                .min(self.cc.loss_round_delivered)
                .saturating_sub(1)
        };
        self.delivered += a.bytes;
        let rs = RateSample {
            delivered_total: self.delivered,
            prior_delivered,
            delivered: bytes_in(a.rate, RTT),
            interval: RTT,
            delivery_rate: (a.rate > 0).then_some(a.rate),
            is_app_limited: a.app_limited,
            rtt: RTT,
            tx_in_flight: a.tx_in_flight,
            prior_lost: self.lost_total - a.lost,
        };
        let acked = [AckedPacket {
            time_sent: now - RTT,
            bytes: a.bytes,
            rate: RateSnapshot::default(),
        }];
        self.cc.on_ack(&AckEvent {
            now,
            acked: &acked,
            rate_sample: Some(&rs),
            rtt: &self.rtt,
            rtt_sampled: true,
            prior_in_flight: a.in_flight + a.bytes,
            in_flight: a.in_flight,
            app_limited: a.app_limited,
            lost_total: self.lost_total,
        });
    }

    /// One ACK a round trip after the last one if it ends a round, else a millisecond after.
    fn ack(&mut self, a: Ack) {
        let step = if a.round {
            RTT
        } else {
            Duration::from_millis(1)
        };
        self.ack_at(self.now + step, a);
    }

    /// A datagram sent with `tx_in_flight` in flight is declared lost now, `lost` bytes having
    /// been lost since it left (itself included).
    fn lose(&mut self, tx_in_flight: u64, lost: u64) {
        self.lost_total += MDS;
        let rate = RateSnapshot {
            tx_in_flight,
            lost: self.lost_total - lost,
            ..RateSnapshot::default()
        };
        let sent = self.now - RTT;
        self.cc.on_packet_lost(
            self.now,
            &LostPacket {
                time_sent: sent,
                bytes: MDS,
                rate,
                lost_total: self.lost_total,
            },
        );
        self.cc
            .on_congestion_event(self.now, sent, MDS, false, &self.rtt);
    }

    /// The window is full: the next datagram would not fit.
    fn fill_window(&mut self) {
        let cwnd = self.cc.window();
        self.cc.on_packet_sent(self.now, MDS, cwnd - MDS);
    }

    fn gains(&self) -> (f64, f64) {
        (self.cc.pacing_gain, self.cc.cwnd_gain)
    }
}

/// Startup until the rate plateaus at [`RATE`], three BDPs in flight so Drain stays.
fn startup_to_drain(f: &mut Feed) {
    for rate in [100_000, 200_000, 400_000, 800_000, RATE, RATE, RATE, RATE] {
        f.ack(Ack::round(rate).in_flight(3 * BDP));
    }
    assert_eq!(f.cc.bbr_state(), Bbr3State::Drain);
}

/// Drain until the flight is one BDP: ProbeBW_DOWN finds the queue gone and cruises at once.
fn cruising() -> Feed {
    let mut f = Feed::new();
    startup_to_drain(&mut f);
    f.ack(Ack::round(RATE).mid_round());
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
    f
}

/// From CRUISE, the probe wait elapses (REFILL) and a round passes (UP).
fn probing_up(f: &mut Feed) {
    let due = f.cc.cycle_stamp + f.cc.bw_probe_wait;
    f.ack_at(due + Duration::from_millis(1), Ack::round(RATE).mid_round());
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwRefill);
    f.ack(Ack::round(RATE));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwUp);
}

#[test]
fn startup_gains_and_the_initial_pacing_rate() {
    let mut f = Feed::new();
    assert_eq!(f.cc.bbr_state(), Bbr3State::Startup);
    assert_eq!(f.gains(), (2.77, 2.0));
    assert_eq!(f.cc.window(), 12_000);
    // §5.6.2 InitPacingRate: 2.77 · InitialCwnd over the nominal 1 ms before any RTT sample.
    assert_eq!(f.cc.pacing_rate, gain_of(12_000 * 1000, 2.77));
    // The first sample (40 ms) replaces the nominal RTT, even though the rate falls.
    f.ack(Ack::round(100_000).bytes(MDS));
    assert_eq!(f.cc.pacing_rate, gain_of(12_000 * 25, 2.77));
    assert_eq!(
        f.cc.window(),
        12_000 + MDS,
        "Startup grows by what is acknowledged"
    );
    // Then the bandwidth model raises it: 2.77 · 99 % of the bandwidth.
    f.ack(Ack::round(400_000));
    assert_eq!(f.cc.pacing_rate, gain_of(400_000, 2.77 * 0.99));
    // Until the pipe is full it never falls.
    f.ack(Ack::round(300_000).mid_round());
    assert_eq!(f.cc.pacing_rate, gain_of(400_000, 2.77 * 0.99));
    assert_eq!(f.cc.bbr_state(), Bbr3State::Startup);
}

#[test]
fn startup_exits_after_three_rounds_under_25_percent_growth() {
    let mut f = Feed::new();
    for rate in [100_000, 200_000, 400_000, 800_000, RATE] {
        f.ack(Ack::round(rate).in_flight(3 * BDP));
    }
    // Two rounds under 1.25 x 1.25 MB/s, then one above it: the count starts again.
    for rate in [RATE, 1_500_000, 1_600_000] {
        f.ack(Ack::round(rate).in_flight(3 * BDP));
        assert_eq!(f.cc.bbr_state(), Bbr3State::Startup);
    }
    assert_eq!((f.cc.full_bw, f.cc.full_bw_count), (1_600_000, 0));
    // An application-limited round says nothing of the pipe.
    f.ack(Ack {
        app_limited: true,
        ..Ack::round(1_600_000).in_flight(3 * BDP)
    });
    assert_eq!(f.cc.full_bw_count, 0);
    for (i, rate) in [1_700_000, 1_800_000, 1_900_000].into_iter().enumerate() {
        assert_eq!(f.cc.bbr_state(), Bbr3State::Startup, "round {i}");
        f.ack(Ack::round(rate).in_flight(3 * BDP));
    }
    assert!(f.cc.full_bw_reached() && f.cc.full_bw_now);
    assert_eq!(f.cc.bbr_state(), Bbr3State::Drain);
    assert_eq!(f.gains(), (0.5, 2.0));
}

#[test]
fn startup_exits_on_excessive_loss() {
    // `events` loss events in the round, `lost` bytes of the 100 000 in flight: more than 2 %
    // and at least six events end Startup.
    let run = |events: u64, lost: u64| {
        let mut f = Feed::new();
        for rate in [100_000, 200_000, 400_000] {
            f.ack(Ack::round(rate).in_flight(3 * BDP));
        }
        for _ in 0..events {
            f.lose(100_000, MDS);
        }
        assert!(f.cc.in_recovery);
        f.ack(Ack {
            tx_in_flight: 100_000,
            lost,
            ..Ack::round(800_000).in_flight(3 * BDP)
        });
        f
    };
    let f = run(6, 6 * MDS);
    assert!(f.cc.full_bw_reached());
    assert_eq!(f.cc.bbr_state(), Bbr3State::Drain);
    // The bound is the larger of the BDP (400 kB/s x 40 ms) and the last round's delivery
    // (800 kB/s x 40 ms).
    assert_eq!(f.cc.inflight_longterm(), Some(32_000));
    // Five events are not enough, nor six losing only 1.8 %.
    for (events, lost) in [(5, 6 * MDS), (6, 1800)] {
        let f = run(events, lost);
        assert_eq!(f.cc.bbr_state(), Bbr3State::Startup, "{events} events");
        assert_eq!(f.cc.inflight_longterm(), None);
    }
}

#[test]
fn drain_exits_when_the_flight_is_down_to_the_bdp() {
    let mut f = Feed::new();
    startup_to_drain(&mut f);
    assert_eq!(f.gains(), (0.5, 2.0));
    assert_eq!(f.cc.pacing_rate, gain_of(RATE, 0.5 * 0.99));
    f.ack(Ack::round(RATE).mid_round().in_flight(BDP + MDS));
    assert_eq!(f.cc.bbr_state(), Bbr3State::Drain);
    // At one BDP Drain enters ProbeBW_DOWN, whose own exit (the queue drained) holds too.
    f.ack(Ack::round(RATE).mid_round().in_flight(BDP));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
    assert_eq!(f.gains(), (1.0, 2.0));

    // A flight that never drains: ProbeBW after three rounds anyway.
    let mut f = Feed::new();
    startup_to_drain(&mut f);
    for _ in 0..3 {
        f.ack(Ack::round(RATE).in_flight(3 * BDP));
        assert_eq!(f.cc.bbr_state(), Bbr3State::Drain);
    }
    f.ack(Ack::round(RATE).in_flight(3 * BDP));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwDown);
    assert_eq!(f.gains(), (0.9, 2.0));
}

#[test]
fn probe_bw_cycles_down_cruise_refill_up_down() {
    let mut f = cruising();
    assert_eq!(f.gains(), (1.0, 2.0));
    // CRUISE lasts the probe wait, drawn in [2 s, 3 s) (no rounds pass here, so the Reno
    // bound does not apply).
    let wait = f.cc.bw_probe_wait;
    assert!(wait >= Duration::from_secs(2) && wait < Duration::from_secs(3));
    let due = f.cc.cycle_stamp + wait;
    f.ack_at(due, Ack::round(RATE).mid_round());
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
    f.ack_at(due + Duration::from_millis(1), Ack::round(RATE).mid_round());
    // REFILL: the short-term model forgotten, the rate of CRUISE, for one round.
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwRefill);
    assert_eq!(f.gains(), (1.0, 2.0));
    assert_eq!(
        (f.cc.bw_shortterm, f.cc.inflight_shortterm),
        (UNBOUNDED, UNBOUNDED)
    );
    f.ack(Ack::round(RATE).mid_round());
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwRefill);
    f.ack(Ack::round(RATE));
    // UP until the rate plateaus for three rounds.
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwUp);
    assert_eq!(f.gains(), (1.25, 2.25));
    assert!(f.cc.is_bw_probe_sample);
    for _ in 0..2 {
        f.ack(Ack::round(RATE).in_flight(2 * BDP));
        assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwUp);
    }
    let up_ends = f.now + RTT;
    f.ack(Ack::round(RATE).in_flight(2 * BDP));
    // DOWN: a new cycle with a new wait, until the queue UP built is gone.
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwDown);
    assert_eq!(f.gains(), (0.9, 2.0));
    assert_eq!(f.cc.cycle_stamp, up_ends);
    assert!(f.cc.bw_probe_wait >= Duration::from_secs(2));
    f.ack(Ack::round(RATE).mid_round().in_flight(BDP + MDS));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwDown);
    f.ack(Ack::round(RATE).mid_round().in_flight(BDP));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
}

#[test]
fn probe_bw_probes_after_a_bdp_of_rounds_to_coexist_with_reno() {
    let mut f = cruising();
    let start = f.now;
    // min(BDP, cwnd) is 41 datagrams: Reno would need 41 rounds to grow through it.
    let reno_rounds = f.cc.target_inflight() / MDS;
    assert_eq!(reno_rounds, 41);
    let rounds = reno_rounds - f.cc.rounds_since_probe_up;
    for _ in 1..rounds {
        f.ack(Ack::round(RATE));
        assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
    }
    f.ack(Ack::round(RATE));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwRefill);
    assert!(
        f.now - start < Duration::from_secs(2),
        "before the wall clock"
    );
}

#[test]
fn loss_above_the_threshold_in_up_cuts_inflight_longterm_and_ends_the_probe() {
    let mut f = cruising();
    probing_up(&mut f);
    // Exactly 2 % of the flight lost: tolerated.
    f.lose(60_000, MDS);
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwUp);
    assert_eq!(f.cc.inflight_longterm(), None);
    // More: the flight at which losses crossed 2 %, within the lost datagram, becomes the
    // bound (here the flight before it; 0.7 x the 50 000-byte target is lower).
    f.lose(60_000, 2 * MDS);
    assert_eq!(f.cc.inflight_longterm(), Some(60_000 - MDS));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwDown);
    assert!(f.cc.prev_probe_too_high && !f.cc.is_bw_probe_sample);
    // Once per probe.
    f.lose(40_000, 10 * MDS);
    assert_eq!(f.cc.inflight_longterm(), Some(60_000 - MDS));
    // §5.5.10.2 InflightAtLoss: 600 bytes lost before a 1200-byte datagram with 58 800 in
    // flight before it; losses cross 2 % after (0.02 x 58 800 - 600) / 0.98 = 587 more bytes.
    assert_eq!(f.cc.inflight_at_loss(MDS, 60_000, 1800), 58_800 + 587);
    assert_eq!(f.cc.inflight_at_loss(MDS, 60_000, 60_000), 58_800);
}

#[test]
fn up_raises_inflight_longterm_while_held_at_it() {
    let mut f = cruising();
    f.cc.inflight_longterm = 60_000;
    probing_up(&mut f);
    assert_eq!(f.cc.window(), 60_000, "capped by the bound");
    // The first round of UP adds one datagram per window acknowledged while window-limited.
    assert_eq!(f.cc.probe_up_acked_per_inc, 60_000);
    f.fill_window();
    f.ack(Ack::round(RATE).mid_round().bytes(30_000));
    assert_eq!(f.cc.inflight_longterm(), Some(60_000));
    f.ack(Ack::round(RATE).mid_round().bytes(30_000));
    assert_eq!(f.cc.inflight_longterm(), Some(60_000 + MDS));
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwUp);
    // Each round doubles the step: two datagrams per window in the second.
    f.fill_window();
    f.ack(Ack::round(RATE).bytes(MDS));
    assert_eq!(f.cc.probe_up_acked_per_inc, f.cc.window() / 2);
    f.ack(Ack::round(RATE).mid_round().bytes(f.cc.window()));
    assert_eq!(f.cc.inflight_longterm(), Some(60_000 + 3 * MDS));
    // Not held at the bound for a round: no growth.
    let bound = f.cc.inflight_longterm;
    f.ack(Ack::round(RATE).bytes(MDS));
    f.ack(Ack::round(RATE).bytes(MDS));
    assert!(!f.cc.is_cwnd_limited());
    f.ack(Ack::round(RATE).mid_round().bytes(200_000));
    assert_eq!(f.cc.inflight_longterm, bound);
}

#[test]
fn loss_in_cruise_lowers_the_short_term_bounds_by_beta_at_most() {
    let mut f = cruising();
    let cwnd = f.cc.window();
    let slow = 1_000_000;
    // A round with a loss delivering 1 MB/s, 40 000 bytes: at its end the short-term bounds
    // start from the model (max_bw, the window) and fall to that delivery, by 30 % at most.
    f.lose(BDP, MDS);
    f.ack(Ack::round(slow));
    assert_eq!(f.cc.bw_shortterm, slow.max(gain_of(RATE, 0.7)));
    let first = gain_of(cwnd, 0.7).max(40_000);
    assert_eq!(f.cc.inflight_shortterm, first);
    assert_eq!(f.cc.bandwidth_estimate(), Some(slow));
    assert_eq!(f.cc.pacing_rate, gain_of(slow, 0.99));
    assert!(f.cc.window() <= first);
    // Rounds delivering a quarter of the rate: the next loss round's latest delivery still
    // holds the 1 MB/s sample that started it; the one after falls by 30 % only.
    for _ in 0..2 {
        f.lose(BDP, MDS);
        f.ack(Ack::round(RATE / 4));
    }
    assert_eq!(f.cc.bw_shortterm, gain_of(slow, 0.7));
    let second = gain_of(first, 0.7).max(40_000);
    assert_eq!(f.cc.inflight_shortterm, gain_of(second, 0.7).max(10_000));
    assert!(f.cc.window() <= f.cc.inflight_shortterm);
    // A round without loss leaves them.
    let bounds = (f.cc.bw_shortterm, f.cc.inflight_shortterm);
    f.ack(Ack::round(RATE / 8));
    assert_eq!((f.cc.bw_shortterm, f.cc.inflight_shortterm), bounds);
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
}

#[test]
fn probe_rtt_after_five_seconds_for_200_ms_and_a_round() {
    use super::model::PROBE_RTT_INTERVAL;
    let mut f = cruising();
    let cwnd = f.cc.window();
    let due = f.cc.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
    f.ack_at(due, Ack::round(RATE).mid_round());
    assert_ne!(f.cc.bbr_state(), Bbr3State::ProbeRtt);
    f.ack_at(due + Duration::from_millis(1), Ack::round(RATE).mid_round());
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeRtt);
    assert_eq!(f.gains(), (1.0, 0.5));
    // Half the BDP (1.25 MB/s x 40 ms).
    assert_eq!(f.cc.window(), BDP / 2);
    assert_eq!(f.cc.prior_cwnd, cwnd);
    // The 200 ms start once the flight is down to that window.
    f.ack(Ack::round(RATE).mid_round().in_flight(BDP));
    assert_eq!(f.cc.probe_rtt_done_stamp, None);
    f.ack(Ack::round(RATE).mid_round().in_flight(BDP / 2));
    let done = f.now + PROBE_RTT_DURATION;
    assert_eq!(f.cc.probe_rtt_done_stamp, Some(done));
    // 200 ms without a round: not yet.
    let mut g = f.clone();
    g.ack_at(
        done + Duration::from_millis(1),
        Ack::round(RATE).mid_round().in_flight(0),
    );
    assert_eq!(g.cc.bbr_state(), Bbr3State::ProbeRtt);
    // A round without the 200 ms: not yet.
    f.ack_at(
        done - Duration::from_millis(10),
        Ack::round(RATE).in_flight(0),
    );
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeRtt);
    // Both: back to ProbeBW (the pipe was full) with the window restored, the next ProbeRTT
    // five seconds on.
    f.ack_at(
        done + Duration::from_millis(1),
        Ack::round(RATE).mid_round().in_flight(0),
    );
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeBwCruise);
    assert_eq!(f.cc.window(), cwnd);
    assert_eq!(f.cc.probe_rtt_min_stamp, done + Duration::from_millis(1));
}

#[test]
fn probe_rtt_in_startup_returns_to_startup() {
    let mut f = Feed::new();
    // Application-limited rounds never fill the pipe.
    let limited = Ack {
        app_limited: true,
        ..Ack::round(200_000)
    };
    while f.now < secs(5.1) {
        f.ack(limited);
    }
    assert_eq!(f.cc.bbr_state(), Bbr3State::ProbeRtt);
    f.ack(limited.in_flight(0));
    f.ack_at(f.now + PROBE_RTT_DURATION + RTT, limited.in_flight(0));
    assert_eq!(f.cc.bbr_state(), Bbr3State::Startup);
    assert_eq!(f.gains(), (2.77, 2.0));
}

/// §5.4.1: an idle period counts as draining the queue, so ProbeRTT is skipped, and the sender
/// restarts at the estimated bandwidth.
#[test]
fn restarting_from_idle_paces_at_the_bandwidth_and_skips_probe_rtt() {
    use super::model::PROBE_RTT_INTERVAL;
    let mut f = cruising();
    let due = f.cc.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
    // The last ACK finds the application with nothing to send; long after, it sends again.
    f.ack(Ack {
        app_limited: true,
        ..Ack::round(RATE).mid_round().in_flight(0)
    });
    f.cc.pacing_rate = 1;
    f.cc.on_packet_sent(due + Duration::from_secs(1), MDS, 0);
    assert_eq!(f.cc.pacing_rate, gain_of(RATE, 0.99));
    assert!(f.cc.idle_restart);
    f.ack_at(
        due + Duration::from_secs(1) + RTT,
        Ack::round(RATE).mid_round().bytes(0).in_flight(0),
    );
    assert_ne!(f.cc.bbr_state(), Bbr3State::ProbeRtt);
}

/// §5.5.5, §5.5.6: max_bw is the largest sample of this ProbeBW cycle and the previous one.
#[test]
fn the_bandwidth_filter_spans_two_probe_bw_cycles() {
    let mut f = cruising();
    assert_eq!(f.cc.max_bw, RATE);
    let cycle = f.cc.cycle_count;
    f.cc.advance_max_bw_filter();
    f.ack(Ack::round(RATE / 2).mid_round());
    assert_eq!(f.cc.max_bw, RATE, "the previous cycle's sample holds");
    f.cc.advance_max_bw_filter();
    f.ack(Ack::round(RATE / 2).mid_round());
    assert_eq!(f.cc.cycle_count, cycle + 2);
    assert_eq!(f.cc.max_bw, RATE / 2, "two cycles on, it is forgotten");
    // Application-limited samples count only when they raise the estimate.
    f.ack(Ack {
        app_limited: true,
        ..Ack::round(RATE / 4).mid_round()
    });
    assert_eq!(f.cc.max_bw, RATE / 2);
    f.ack(Ack {
        app_limited: true,
        ..Ack::round(RATE).mid_round()
    });
    assert_eq!(f.cc.max_bw, RATE);
}

/// §5.3.4.3 UpdateMinRTT: the ProbeRTT filter keeps its minimum for 5 s, min_rtt for 10 s.
#[test]
fn min_rtt_lasts_ten_seconds_its_probe_rtt_filter_five() {
    let mut cc = Bbr3::new(&CcConfig::default(), Bbr3Params::default(), Instant::ZERO);
    let sample = |rtt_ms: u64| Sample {
        delivery_rate: 0,
        delivered: 0,
        prior_delivered: 0,
        is_app_limited: false,
        tx_in_flight: 0,
        lost: 0,
        rtt: Some(Duration::from_millis(rtt_ms)),
        newly_acked: 0,
    };
    cc.update_min_rtt(secs(0.1), &sample(40));
    cc.update_min_rtt(secs(3.0), &sample(50));
    assert_eq!(cc.probe_rtt_min_delay, Some(RTT));
    // 5 s on, the ProbeRTT filter takes the next sample; min_rtt keeps the lower one.
    cc.update_min_rtt(secs(5.2), &sample(50));
    assert!(cc.probe_rtt_expired);
    assert_eq!(cc.probe_rtt_min_delay, Some(Duration::from_millis(50)));
    assert_eq!(cc.min_rtt(), Some(RTT));
    // 10 s on, min_rtt takes the ProbeRTT filter's, with its time.
    cc.update_min_rtt(secs(10.2), &sample(60));
    assert_eq!(cc.min_rtt(), Some(Duration::from_millis(50)));
    assert_eq!(cc.min_rtt_stamp, secs(5.2));
}

/// §5.5.9: data acknowledged faster than the bandwidth widens the window by as much, over
/// ten rounds once the pipe is full.
#[test]
fn ack_aggregation_widens_the_window() {
    let mut f = cruising();
    f.cc.extra_acked_filter = WindowedMax::default();
    f.cc.extra_acked_delivered = 0;
    // ACKs at the bandwidth, 1250 bytes a millisecond: one ACK's worth beyond the expected.
    for _ in 0..10 {
        f.ack(Ack::round(RATE).mid_round().bytes(1250));
    }
    assert_eq!(f.cc.extra_acked, 1250);
    // After a silence the ACK rate fell below the bandwidth, so a new interval starts; ten ACKs
    // at one instant then deliver 25 000 bytes where the bandwidth delivers none.
    let burst = f.now + Duration::from_millis(10);
    for _ in 0..10 {
        f.ack_at(burst, Ack::round(RATE).mid_round().bytes(2500));
    }
    assert_eq!(f.cc.extra_acked, 25_000);
    assert_eq!(
        f.cc.max_inflight(),
        f.cc.quantization_budget(2 * f.cc.bdp() + 25_000)
    );
}

#[test]
fn finds_the_bottleneck_in_a_closed_loop() {
    let mut cc = Bbr3::new(&CcConfig::default(), Bbr3Params::default(), Instant::ZERO);
    let (until, settle) = (secs(10.0), secs(4.0));
    let run = closed_loop(
        &mut cc,
        Path::lossless(RATE, RTT),
        until,
        settle,
        Source::Bulk,
    );
    assert_eq!(run.packets_lost, 0, "lossless link");
    assert!(cc.full_bw_reached(), "Startup never exited");
    let bw = cc.bandwidth_estimate().expect("an estimate");
    assert!(
        bw.abs_diff(RATE) * 100 <= RATE * 5,
        "bandwidth estimate {bw} vs bottleneck {RATE}"
    );
    // The base RTT plus one datagram's service time.
    let min_rtt = cc.min_rtt().expect("min_rtt");
    assert!(
        min_rtt >= RTT && min_rtt < RTT + Duration::from_millis(3),
        "{min_rtt:?}"
    );
    // The queue stays small: a few milliseconds on average, and never more than ProbeBW_UP's
    // window (2.25 BDP) allows.
    assert!(
        run.mean_rtt < min_rtt * 6 / 5,
        "mean RTT {:?}",
        run.mean_rtt
    );
    assert!(run.max_rtt < min_rtt * 9 / 4, "max RTT {:?}", run.max_rtt);
    let goodput = run.delivered as f64 / (until - settle).as_secs_f64();
    assert!(goodput > 0.9 * RATE as f64, "goodput {goodput}");
}

/// BBRv3 tolerates random loss up to LossThresh (2 %) per round while probing, and answers it
/// in CRUISE by following the delivery of the last round (§5.3.3.8.3 expects about (1 - p)^N
/// over N rounds of CRUISE). Pooled over seeds: on this path (a BDP of 43 datagrams) a single
/// loss already exceeds 2 % of a probe's flight, so single runs range from about 75 % to 87 %.
#[test]
fn keeps_most_of_the_bottleneck_under_one_percent_random_loss() {
    let (until, settle) = (secs(60.0), secs(5.0));
    let mut delivered = 0;
    let seeds = 1..=6;
    for seed in seeds.clone() {
        let mut cc = Bbr3::new(
            &CcConfig {
                seed,
                ..CcConfig::default()
            },
            Bbr3Params::default(),
            Instant::ZERO,
        );
        let path = Path {
            loss: 0.01,
            seed,
            ..Path::lossless(RATE, RTT)
        };
        let run = closed_loop(&mut cc, path, until, settle, Source::Bulk);
        assert!(run.packets_lost > 0);
        delivered += run.delivered;
    }
    let runs = seeds.count() as f64;
    let goodput = delivered as f64 / runs / (until - settle).as_secs_f64();
    assert!(goodput >= 0.8 * RATE as f64, "goodput {goodput}");
}
