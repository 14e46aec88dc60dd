//! BBR version 1 (draft-cardwell-iccrg-bbr-congestion-control-00).
//!
//! BBR models the path by its bottleneck bandwidth (a windowed maximum of delivery-rate samples
//! over 10 round trips) and its round-trip propagation time (a 10-second windowed minimum), paces
//! at a gain times the bandwidth, and caps the data in flight at a gain times their product.

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

use super::{AckEvent, CcConfig, CongestionController};
use crate::rtt::{RttEstimator, GRANULARITY};

/// Draft §4.1.1.3: 2/ln(2), the smallest gain that doubles the sending rate each round.
const HIGH_GAIN: f64 = 2.885;
/// Draft §4.1.1.4: BtlBwFilterLen, in round trips.
const BTL_BW_FILTER_LEN: u64 = 10;
/// Draft §4.1.2.3: RTpropFilterLen.
const RT_PROP_FILTER_LEN: Duration = Duration::from_secs(10);
/// Draft §4.3.4.4: ProbeRTTDuration.
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// Draft §4.3.1.1: the pacing gain cycle of ProbeBW.
const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Draft §4.2.3.2: cwnd_gain in ProbeBW.
const CWND_GAIN: f64 = 2.0;
/// Draft §4.3.2.2: bandwidth growth that counts as progress in Startup, and the rounds without it
/// after which the pipe is full.
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
/// The RTT the initial pacing rate assumes before any sample: LSQUIC's default min RTT.
const NO_RTT_NOMINAL: Duration = Duration::from_millis(25);

/// BBR's state machine (draft §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrState {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// The BBRv1 congestion controller.
#[derive(Clone, Debug)]
pub struct Bbr {
    mds: u64,
    initial_cwnd: u64,
    min_pipe_cwnd: u64,
    state: BbrState,
    pacing_gain: f64,
    cwnd_gain: f64,
    cwnd: u64,
    pacing_rate: u64,
    /// Whether the pacing rate was set from a measured RTT (tcp_bbr's `has_seen_rtt`).
    has_seen_rtt: bool,
    /// Per-round maxima of the last BtlBwFilterLen rounds: (round, bytes/s).
    bw_samples: VecDeque<(u64, u64)>,
    btl_bw: u64,
    rt_prop: Option<Duration>,
    rt_prop_stamp: Instant,
    rt_prop_expired: bool,
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    filled_pipe: bool,
    full_bw: u64,
    full_bw_count: u32,
    cycle_index: usize,
    cycle_stamp: Instant,
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    idle_restart: bool,
    prior_cwnd: u64,
    packet_conservation: bool,
    conservation_round: u64,
    recovery_start: Option<Instant>,
    in_recovery: bool,
    lost_since_ack: bool,
    in_flight: u64,
    delivered: u64,
    seed: u64,
}

impl Bbr {
    /// Draft §4.2.1 BBRInit.
    #[must_use]
    pub fn new(config: &CcConfig, now: Instant) -> Self {
        let mds = config.max_datagram_size.max(1);
        let initial_cwnd = config.initial_window();
        let mut bbr = Self {
            mds,
            initial_cwnd,
            min_pipe_cwnd: mds.saturating_mul(4),
            state: BbrState::Startup,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            cwnd: initial_cwnd,
            pacing_rate: 0,
            has_seen_rtt: false,
            bw_samples: VecDeque::new(),
            btl_bw: 0,
            rt_prop: None,
            rt_prop_stamp: now,
            rt_prop_expired: false,
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            filled_pipe: false,
            full_bw: 0,
            full_bw_count: 0,
            cycle_index: 0,
            cycle_stamp: now,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            idle_restart: false,
            prior_cwnd: 0,
            packet_conservation: false,
            conservation_round: 0,
            recovery_start: None,
            in_recovery: false,
            lost_since_ack: false,
            in_flight: 0,
            delivered: 0,
            seed: config.seed,
        };
        // Draft §4.2.1 BBRInitPacingRate takes a nominal 1 ms RTT while there is no sample;
        // LSQUIC's BBR (the AutoRec and ART testbeds' controller) takes 25 ms
        // (`get_min_rtt` in lsquic_bbr.c), which we follow. `init_pacing_rate_from_rtt`
        // replaces it at the first sample, which a QUIC connection has from its handshake.
        bbr.pacing_rate = gain_of(
            initial_cwnd.saturating_mul(1000) / NO_RTT_NOMINAL.as_millis() as u64,
            HIGH_GAIN,
        );
        bbr
    }

    /// Draft §4.2.1 BBRInitPacingRate with the SRTT in place of 1 ms, at the first RTT sample:
    /// high_gain · cwnd / SRTT, as Linux `tcp_bbr` (`bbr_init_pacing_rate_from_rtt`, called by
    /// `bbr_set_pacing_rate` until an RTT was seen) and LSQUIC's BBR do. Without it the 1 ms rate
    /// stays: `set_pacing_rate` only raises the rate before the pipe is full, and an
    /// application-limited stream never fills it.
    fn init_pacing_rate_from_rtt(&mut self, srtt: Duration) {
        if self.has_seen_rtt || srtt.is_zero() {
            return;
        }
        self.has_seen_rtt = true;
        let rate = u128::from(self.cwnd) * 1_000_000_000 / srtt.as_nanos();
        self.pacing_rate = gain_of(u64::try_from(rate).unwrap_or(u64::MAX), HIGH_GAIN);
    }

    /// The current state.
    #[must_use]
    pub fn bbr_state(&self) -> BbrState {
        self.state
    }

    /// Whether Startup found the bottleneck (draft §4.3.2.2).
    #[must_use]
    pub fn filled_pipe(&self) -> bool {
        self.filled_pipe
    }

    /// The round-trip propagation time estimate (draft §4.1.2).
    #[must_use]
    pub fn rt_prop(&self) -> Option<Duration> {
        self.rt_prop
    }

    /// Draft §4.2.3.2 BBRInflight: gain · BDP plus three datagrams for quantization.
    fn inflight(&self, gain: f64) -> u64 {
        let Some(rt_prop) = self.rt_prop else {
            return self.initial_cwnd;
        };
        let bdp = u128::from(self.btl_bw) * rt_prop.as_nanos() / 1_000_000_000;
        let bdp = u64::try_from(bdp).unwrap_or(u64::MAX);
        gain_of(bdp, gain).saturating_add(self.mds.saturating_mul(3))
    }

    /// Draft §4.1.1.5 BBRUpdateRound and BBRUpdateBtlBw.
    fn update_btl_bw(
        &mut self,
        prior_delivered: u64,
        delivered_total: u64,
        rate: Option<u64>,
        app_limited: bool,
    ) {
        self.round_start = false;
        if prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = delivered_total;
            self.round_count += 1;
            self.round_start = true;
        }
        let Some(rate) = rate else { return };
        // App-limited samples only count when they raise the estimate.
        if rate < self.btl_bw && app_limited {
            return;
        }
        match self.bw_samples.back_mut() {
            Some((round, max)) if *round == self.round_count => *max = (*max).max(rate),
            _ => self.bw_samples.push_back((self.round_count, rate)),
        }
        while self
            .bw_samples
            .front()
            .is_some_and(|&(round, _)| round + BTL_BW_FILTER_LEN <= self.round_count)
        {
            self.bw_samples.pop_front();
        }
        self.btl_bw = self.bw_samples.iter().map(|&(_, bw)| bw).max().unwrap_or(0);
    }

    /// Draft §4.3.4.3 BBREnterProbeBW: start the cycle at a random phase other than 0.75.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.state = BbrState::ProbeBw;
        self.pacing_gain = 1.0;
        self.cwnd_gain = CWND_GAIN;
        self.seed = splitmix64(self.seed);
        let r = (self.seed % (PACING_GAIN_CYCLE.len() as u64 - 1)) as usize;
        self.cycle_index = PACING_GAIN_CYCLE.len() - 1 - r;
        self.advance_cycle_phase(now);
    }

    fn advance_cycle_phase(&mut self, now: Instant) {
        self.cycle_stamp = now;
        self.cycle_index = (self.cycle_index + 1) % PACING_GAIN_CYCLE.len();
        self.pacing_gain = PACING_GAIN_CYCLE[self.cycle_index];
    }

    /// Draft §4.3.4.3 BBRIsNextCyclePhase.
    fn is_next_cycle_phase(&self, now: Instant, prior_in_flight: u64) -> bool {
        let full_length = self
            .rt_prop
            .is_some_and(|rt| now.saturating_duration_since(self.cycle_stamp) > rt);
        if self.pacing_gain > 1.0 {
            full_length
                && (self.lost_since_ack || prior_in_flight >= self.inflight(self.pacing_gain))
        } else if self.pacing_gain < 1.0 {
            full_length || prior_in_flight <= self.inflight(1.0)
        } else {
            full_length
        }
    }

    /// Draft §4.3.2.2 BBRCheckFullPipe.
    fn check_full_pipe(&mut self, app_limited: bool) {
        if self.filled_pipe || !self.round_start || app_limited {
            return;
        }
        if self.btl_bw as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
            self.full_bw = self.btl_bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= FULL_BW_ROUNDS {
            self.filled_pipe = true;
        }
    }

    /// Draft §4.3.3 BBRCheckDrain.
    fn check_drain(&mut self, now: Instant, in_flight: u64) {
        if self.state == BbrState::Startup && self.filled_pipe {
            self.state = BbrState::Drain;
            self.pacing_gain = 1.0 / HIGH_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.state == BbrState::Drain && in_flight <= self.inflight(1.0) {
            self.enter_probe_bw(now);
        }
    }

    /// Draft §4.1.2.3 BBRUpdateRTprop.
    fn update_rt_prop(&mut self, now: Instant, rtt: Option<Duration>) {
        self.rt_prop_expired =
            now.saturating_duration_since(self.rt_prop_stamp) > RT_PROP_FILTER_LEN;
        let Some(rtt) = rtt else { return };
        if self.rt_prop.is_none_or(|rt| rtt <= rt) || self.rt_prop_expired {
            self.rt_prop = Some(rtt);
            self.rt_prop_stamp = now;
        }
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if !self.in_recovery && self.state != BbrState::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// Draft §4.3.4.4 BBRCheckProbeRTT and BBRHandleProbeRTT.
    fn check_probe_rtt(&mut self, now: Instant, in_flight: u64) {
        if self.state != BbrState::ProbeRtt && self.rt_prop_expired && !self.idle_restart {
            self.state = BbrState::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
        }
        if self.state == BbrState::ProbeRtt {
            match self.probe_rtt_done_stamp {
                None if in_flight <= self.min_pipe_cwnd => {
                    self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = self.delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now > done {
                        self.rt_prop_stamp = now;
                        self.restore_cwnd();
                        if self.filled_pipe {
                            self.enter_probe_bw(now);
                        } else {
                            self.state = BbrState::Startup;
                            self.pacing_gain = HIGH_GAIN;
                            self.cwnd_gain = HIGH_GAIN;
                        }
                    }
                }
            }
        }
        self.idle_restart = false;
    }

    /// Draft §4.2.1 BBRSetPacingRateWithGain.
    fn set_pacing_rate(&mut self) {
        let rate = gain_of(self.btl_bw, self.pacing_gain);
        if rate > 0 && (self.filled_pipe || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
    }

    /// Draft §4.2.3 BBRSetCwnd.
    fn set_cwnd(&mut self, acked: u64, in_flight: u64) {
        let target = self.inflight(self.cwnd_gain);
        if self.packet_conservation {
            self.cwnd = self.cwnd.max(in_flight.saturating_add(acked));
        } else if self.filled_pipe {
            self.cwnd = self.cwnd.saturating_add(acked).min(target);
        } else if self.cwnd < target || self.delivered < self.initial_cwnd {
            self.cwnd = self.cwnd.saturating_add(acked);
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd);
        if self.state == BbrState::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_pipe_cwnd);
        }
    }
}

/// `value · gain`, saturating.
pub(super) fn gain_of(value: u64, gain: f64) -> u64 {
    let v = value as f64 * gain;
    if v >= u64::MAX as f64 {
        u64::MAX
    } else {
        v as u64
    }
}

/// A step of the splitmix64 generator: deterministic, seeded randomness for one phase choice.
pub(super) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl CongestionController for Bbr {
    /// Draft §4.3.4.4: restarting from idle paces at the estimated bandwidth.
    fn on_packet_sent(&mut self, _now: Instant, bytes: u64, bytes_in_flight: u64) {
        if bytes_in_flight == 0 && self.delivered > 0 {
            self.idle_restart = true;
            if self.state == BbrState::ProbeBw {
                let rate = self.btl_bw;
                if rate > 0 {
                    self.pacing_rate = rate;
                }
            }
        }
        self.in_flight = bytes_in_flight.saturating_add(bytes);
    }

    /// Draft §4.2 BBRUpdateOnACK.
    fn on_ack(&mut self, ack: &AckEvent<'_>) {
        let now = ack.now;
        let acked: u64 = ack.acked.iter().map(|p| p.bytes).sum();
        self.in_flight = ack.in_flight;
        if let Some(rs) = ack.rate_sample {
            self.delivered = rs.delivered_total;
            self.update_btl_bw(
                rs.prior_delivered,
                rs.delivered_total,
                rs.delivery_rate,
                rs.is_app_limited,
            );
        } else {
            self.round_start = false;
        }
        // RFC 9002 §7.3.2: recovery ends when a packet sent during it is acknowledged.
        let recovery_over = self
            .recovery_start
            .is_some_and(|start| ack.acked.iter().any(|p| p.time_sent > start));
        if self.in_recovery && recovery_over {
            self.in_recovery = false;
            self.packet_conservation = false;
            self.restore_cwnd();
        }
        // Draft §4.2.3.4: packet conservation lasts one round.
        if self.packet_conservation
            && self.round_start
            && self.round_count > self.conservation_round
        {
            self.packet_conservation = false;
        }
        if self.state == BbrState::ProbeBw && self.is_next_cycle_phase(now, ack.prior_in_flight) {
            self.advance_cycle_phase(now);
        }
        let app_limited = ack.rate_sample.is_some_and(|rs| rs.is_app_limited);
        self.check_full_pipe(app_limited);
        self.check_drain(now, ack.in_flight);
        let rtt = ack
            .rate_sample
            .map(|rs| rs.rtt)
            .filter(|rtt| !rtt.is_zero());
        self.update_rt_prop(
            now,
            rtt.or_else(|| ack.rtt.has_sample().then(|| ack.rtt.latest())),
        );
        self.check_probe_rtt(now, ack.in_flight);
        if ack.rtt.has_sample() {
            self.init_pacing_rate_from_rtt(ack.rtt.smoothed());
        }
        self.set_pacing_rate();
        self.set_cwnd(acked, ack.in_flight);
        self.lost_since_ack = false;
    }

    /// Draft §4.2.3.4 BBRModulateCwndForRecovery, with RFC 9002's recovery period and
    /// persistent congestion. The window never falls below the minimum pipe (four datagrams) on a
    /// loss, as LSQUIC's recovery window (`lsquic_bbr.c`, `calculate_recovery_window`) and
    /// tcp_bbr's `bbr_cwnd_min_target`: a loss found by the timer between two frames would
    /// otherwise hold the next frame to one datagram until an ACK came back.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        largest_lost_sent_time: Instant,
        lost_bytes: u64,
        persistent_congestion: bool,
        _rtt: &RttEstimator,
    ) {
        self.lost_since_ack = true;
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        let new_event = self
            .recovery_start
            .is_none_or(|s| largest_lost_sent_time > s);
        if new_event && !self.in_recovery {
            // Draft §4.2.3.4 BBROnEnterFastRecovery.
            self.save_cwnd();
            self.recovery_start = Some(now);
            self.in_recovery = true;
            self.packet_conservation = true;
            self.conservation_round = self.round_count;
            // cwnd = packets_in_flight + max(packets_delivered, 1): room for the fast
            // retransmit. The packets this ACK delivered are added by `set_cwnd`'s
            // conservation step; a loss found by the timer delivered none.
            self.cwnd = self
                .in_flight
                .saturating_add(self.mds)
                .max(self.min_pipe_cwnd);
        } else {
            self.cwnd = self.cwnd.saturating_sub(lost_bytes).max(self.min_pipe_cwnd);
        }
        if persistent_congestion {
            // Like a TCP retransmission timeout: remember the window, restart from the minimum.
            self.cwnd = self.min_pipe_cwnd;
            self.packet_conservation = false;
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_max_datagram_size(&mut self, mds: u64) {
        self.mds = mds.max(1);
        self.min_pipe_cwnd = self.mds.saturating_mul(4);
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd);
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate.max(GRANULARITY_RATE_FLOOR))
    }

    fn bandwidth_estimate(&self) -> Option<u64> {
        (self.btl_bw > 0).then_some(self.btl_bw)
    }

    fn name(&self) -> &'static str {
        "bbr"
    }

    fn state(&self) -> &'static str {
        match self.state {
            BbrState::Startup => "startup",
            BbrState::Drain => "drain",
            BbrState::ProbeBw => "probe_bw",
            BbrState::ProbeRtt => "probe_rtt",
        }
    }
}

/// A floor under the pacing rate: one byte per timer granularity, so a collapsed estimate never
/// reads as "do not send".
pub(super) const GRANULARITY_RATE_FLOOR: u64 = 1_000_000_000 / GRANULARITY.as_nanos() as u64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_support::{closed_loop, Path, Source, MDS};

    #[test]
    fn finds_the_bottleneck_in_a_closed_loop() {
        // 10 Mbit/s, 40 ms: BDP 50 000 bytes.
        let rate = 1_250_000;
        let base = Duration::from_millis(40);
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        let run = closed_loop(
            &mut cc,
            Path::lossless(rate, base),
            Instant::ZERO + Duration::from_secs(4),
            Instant::ZERO + Duration::from_secs(2),
            Source::Bulk,
        );
        assert_eq!(run.packets_lost, 0, "lossless link");
        let max_rtt = run.max_rtt;
        assert!(cc.filled_pipe(), "Startup never exited");
        assert_ne!(cc.bbr_state(), BbrState::Startup);
        let bw = cc.bandwidth_estimate().expect("an estimate");
        assert!(
            bw.abs_diff(rate) * 100 <= rate * 5,
            "bandwidth estimate {bw} vs bottleneck {rate}"
        );
        let rt_prop = cc.rt_prop().expect("rt_prop");
        assert!(
            rt_prop >= base && rt_prop < base + Duration::from_millis(3),
            "{rt_prop:?}"
        );
        // Once drained, the queue stays within about one BDP (cwnd_gain 2 over ProbeBW), and a
        // few milliseconds on average, while the link stays busy.
        assert!(
            max_rtt < base * 2 + Duration::from_millis(10),
            "max RTT {max_rtt:?}"
        );
        assert!(run.mean_rtt < base * 5 / 4, "mean RTT {:?}", run.mean_rtt);
        assert!(
            run.delivered * 100 >= 2 * rate * 95,
            "{} bytes in 2 s",
            run.delivered
        );
        // The window follows 2 · BDP + 3 datagrams.
        let target = 2 * 50_000 + 3 * MDS;
        assert!(
            cc.window().abs_diff(target) * 10 <= target,
            "cwnd {}",
            cc.window()
        );
    }

    #[test]
    fn an_app_limited_stream_paces_from_its_first_rtt() {
        // A 4 Mbit/s, 30 fps stream over a 12 Mbit/s path with a 200 ms RTT: the pipe never
        // fills, so the pacing rate is whatever the first RTT sample and the bandwidth samples
        // since made it, never the 1 ms initial-window rate (2.885 x 12 000 B / 1 ms, 277 Mbit/s).
        let frame: u64 = 4_000_000 / 8 / 30;
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        closed_loop(
            &mut cc,
            Path::lossless(12_000_000 / 8, Duration::from_millis(200)),
            Instant::ZERO + Duration::from_secs(1),
            Instant::ZERO,
            Source::Frames {
                frame: frame.div_ceil(MDS) * MDS,
                interval: Duration::from_nanos(1_000_000_000 / 30),
            },
        );
        assert!(
            !cc.filled_pipe(),
            "an app-limited stream never fills the pipe"
        );
        let mbps = cc.pacing_rate().expect("BBR paces") * 8 / 1_000_000;
        assert!(mbps < 40, "pacing at {mbps} Mbit/s one second in");
        assert!(
            mbps >= 4,
            "pacing at {mbps} Mbit/s, below the stream's rate"
        );
        // The rate is Startup's gain over the measured bandwidth, not a rate set before any
        // measurement (the nominal 25 ms one is 11.1 Mbit/s, close to it by chance).
        assert_eq!(cc.pacing_rate, gain_of(cc.btl_bw, HIGH_GAIN));
    }

    #[test]
    fn the_first_rtt_sample_sets_the_pacing_rate() {
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        let initial = CcConfig::default().initial_window();
        assert_eq!(cc.pacing_rate, gain_of(initial * 40, HIGH_GAIN));
        cc.init_pacing_rate_from_rtt(Duration::from_millis(100));
        assert_eq!(cc.pacing_rate, gain_of(initial * 10, HIGH_GAIN));
        // Only the first sample: later ones leave the rate to the bandwidth model.
        cc.init_pacing_rate_from_rtt(Duration::from_millis(10));
        assert_eq!(cc.pacing_rate, gain_of(initial * 10, HIGH_GAIN));
    }

    #[test]
    fn probe_bw_never_starts_in_the_draining_phase_and_cycles() {
        for seed in 0..32 {
            let mut cc = Bbr::new(
                &CcConfig {
                    seed,
                    ..CcConfig::default()
                },
                Instant::ZERO,
            );
            cc.enter_probe_bw(Instant::ZERO);
            assert_ne!(cc.pacing_gain, 0.75, "seed {seed}");
            let start = cc.cycle_index;
            for i in 1..=8 {
                cc.advance_cycle_phase(Instant::ZERO);
                assert_eq!(
                    cc.pacing_gain,
                    PACING_GAIN_CYCLE[(start + i) % 8],
                    "seed {seed}"
                );
            }
        }
    }

    #[test]
    fn bandwidth_filter_forgets_after_ten_rounds() {
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        let mut delivered = 0;
        cc.update_btl_bw(0, 1000, Some(5_000_000), false);
        assert_eq!(cc.btl_bw, 5_000_000);
        for _ in 0..9 {
            delivered += 1000;
            cc.update_btl_bw(delivered, delivered + 1000, Some(1_000_000), false);
            assert_eq!(cc.btl_bw, 5_000_000);
        }
        delivered += 1000;
        cc.update_btl_bw(delivered, delivered + 1000, Some(1_000_000), false);
        assert_eq!(cc.btl_bw, 1_000_000);
        assert_eq!(cc.round_count, 11);
        // A lower app-limited sample is ignored; a higher one counts.
        cc.update_btl_bw(delivered, delivered, Some(2_000_000), true);
        assert_eq!(cc.btl_bw, 2_000_000);
        cc.update_btl_bw(delivered, delivered, Some(100), true);
        assert_eq!(cc.btl_bw, 2_000_000);
        assert!(cc.bw_samples.len() <= BTL_BW_FILTER_LEN as usize);
    }

    #[test]
    fn probe_rtt_after_ten_seconds_without_a_lower_rtt() {
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        cc.filled_pipe = true;
        cc.enter_probe_bw(Instant::ZERO);
        cc.btl_bw = 1_000_000;
        cc.cwnd = 100_000;
        cc.update_rt_prop(Instant::ZERO, Some(Duration::from_millis(50)));
        let t = Instant::ZERO + Duration::from_secs(11);
        cc.update_rt_prop(t, Some(Duration::from_millis(60)));
        assert!(cc.rt_prop_expired);
        // Expired: the sample is taken even though it is larger.
        assert_eq!(cc.rt_prop, Some(Duration::from_millis(60)));
        cc.rt_prop_expired = true;
        cc.check_probe_rtt(t, 50_000);
        assert_eq!(cc.bbr_state(), BbrState::ProbeRtt);
        cc.set_cwnd(0, 50_000);
        assert_eq!(cc.window(), 4 * MDS);
        // In flight drains to the minimum pipe: 200 ms plus a round, then back to ProbeBW with
        // the saved window.
        cc.check_probe_rtt(t, 4 * MDS);
        let done = cc.probe_rtt_done_stamp.expect("timer");
        assert_eq!(done, t + PROBE_RTT_DURATION);
        cc.round_start = true;
        cc.check_probe_rtt(done + Duration::from_millis(1), 4 * MDS);
        assert_eq!(cc.bbr_state(), BbrState::ProbeBw);
        assert_eq!(cc.window(), 100_000);
    }

    #[test]
    fn loss_enters_packet_conservation_and_persistent_congestion_collapses() {
        let rtt = RttEstimator::default();
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        cc.on_packet_sent(Instant::ZERO, 12_000, 0);
        assert_eq!(cc.in_flight, 12_000);
        cc.on_congestion_event(
            Instant::from_nanos(10),
            Instant::from_nanos(1),
            2400,
            false,
            &rtt,
        );
        assert!(cc.packet_conservation);
        // What is still in flight, plus one datagram for the fast retransmit (draft §4.2.3.4:
        // packets_in_flight + max(packets_delivered, 1); the timer delivered none).
        assert_eq!(cc.window(), 9600 + MDS);
        assert_eq!(cc.prior_cwnd, 12_000);
        cc.on_congestion_event(
            Instant::from_nanos(11),
            Instant::from_nanos(2),
            1200,
            true,
            &rtt,
        );
        assert_eq!(cc.window(), 4 * MDS);
    }

    #[test]
    fn a_loss_never_takes_the_window_below_the_minimum_pipe() {
        let rtt = RttEstimator::default();
        let mut cc = Bbr::new(&CcConfig::default(), Instant::ZERO);
        // One datagram in flight, found lost by the timer: recovery starts from four datagrams,
        // not from the one left in flight.
        cc.on_packet_sent(Instant::ZERO, MDS, 0);
        cc.on_congestion_event(Instant::from_nanos(10), Instant::ZERO, MDS, false, &rtt);
        assert_eq!(cc.window(), 4 * MDS);
        // A further loss in the same event does not shrink it either.
        cc.on_congestion_event(Instant::from_nanos(11), Instant::ZERO, MDS, false, &rtt);
        assert_eq!(cc.window(), 4 * MDS);
    }
}
