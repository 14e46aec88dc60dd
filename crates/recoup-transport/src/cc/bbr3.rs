//! BBR version 3 (draft-ietf-ccwg-bbr-06; "§" below are that draft's sections).
//!
//! BBRv3 keeps BBRv1's model (a windowed maximum of delivery-rate samples, a windowed minimum of
//! the RTT, pacing at a gain times the bandwidth) and adds bounds learnt from loss: a long-term
//! ceiling on the data in flight (`inflight_longterm`, set when a bandwidth probe lost more than
//! 2 % of its flight) and short-term ceilings on the rate and the flight (`bw_shortterm`,
//! `inflight_shortterm`, cut by 30 % per round with losses while not probing). ProbeBW becomes a
//! cycle of four phases (DOWN, CRUISE, REFILL, UP) that probes once every 2 to 3 seconds, or
//! sooner on a small BDP so that Reno and CUBIC flows keep their share (§5.3.3.8).
//!
//! This file holds the controller and the per-ACK orchestration (§5.2) and the control
//! parameters (§5.6); `model` the path model (§5.5) and `states` the state machine (§5.3).

mod model;
mod params;
mod states;
#[cfg(test)]
mod tests;

use std::time::Duration;

use recoup_time::Instant;

use super::bbr::{gain_of, splitmix64, GRANULARITY_RATE_FLOOR};
use super::{AckEvent, CcConfig, CongestionController, LostPacket};
use crate::delivery_rate::RateSample;
use crate::rtt::RttEstimator;
use model::WindowedMax;
pub use params::Bbr3Params;

/// §2.5 StartupPacingGain: 4·ln 2, the smallest gain that doubles the sending rate each round.
const STARTUP_PACING_GAIN: f64 = 2.77;
/// §2.5 DrainPacingGain: at most 1 / StartupCwndGain drains Startup's queue within a round.
const DRAIN_PACING_GAIN: f64 = 0.5;
/// §2.6 DefaultCwndGain: room for the rate to double each round.
const DEFAULT_CWND_GAIN: f64 = 2.0;
/// §5.3.3.1: ProbeBW_DOWN paces at 90 %, the least that lets flows converge to fairness.
const PROBE_DOWN_PACING_GAIN: f64 = 0.9;
/// §5.3.3.5: ProbeBW_UP paces at 125 % and lets the window grow to 2.25 BDP to do so.
const PROBE_UP_PACING_GAIN: f64 = 1.25;
const PROBE_UP_CWND_GAIN: f64 = 2.25;
/// §2.16.2 ProbeRTTCwndGain: ProbeRTT halves the flight to see the path's RTT.
const PROBE_RTT_CWND_GAIN: f64 = 0.5;
/// §2.5 PacingMarginPercent: pacing 1 % under the bandwidth keeps the queue drained.
const PACING_MARGIN: f64 = 0.99;
/// §2.8 MinPipeCwnd, in datagrams: two in flight and two ACKs on the way back.
const MIN_PIPE_CWND_PACKETS: u64 = 4;
/// §5.6.2: the RTT `InitPacingRate` assumes before the first sample.
const NOMINAL_RTT: Duration = Duration::from_millis(1);
/// §5.6.3: the send quantum is a millisecond of pacing, between two datagrams and 64 KB.
const SEND_QUANTUM_INTERVAL: Duration = Duration::from_millis(1);
const MAX_SEND_QUANTUM: u64 = 64 * 1024;
/// "Infinity" of the draft's pseudo-code for the bounds and the probe increment.
const UNBOUNDED: u64 = u64::MAX;

/// The states of §5.1.1's diagram, ProbeBW split into its four phases (§5.3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bbr3State {
    Startup,
    Drain,
    ProbeBwDown,
    ProbeBwCruise,
    ProbeBwRefill,
    ProbeBwUp,
    ProbeRtt,
}

impl Bbr3State {
    /// §5.6.1's table: (pacing gain, cwnd gain) of each state.
    fn gains(self) -> (f64, f64) {
        match self {
            Bbr3State::Startup => (STARTUP_PACING_GAIN, DEFAULT_CWND_GAIN),
            Bbr3State::Drain => (DRAIN_PACING_GAIN, DEFAULT_CWND_GAIN),
            Bbr3State::ProbeBwDown => (PROBE_DOWN_PACING_GAIN, DEFAULT_CWND_GAIN),
            Bbr3State::ProbeBwCruise | Bbr3State::ProbeBwRefill => (1.0, DEFAULT_CWND_GAIN),
            Bbr3State::ProbeBwUp => (PROBE_UP_PACING_GAIN, PROBE_UP_CWND_GAIN),
            Bbr3State::ProbeRtt => (1.0, PROBE_RTT_CWND_GAIN),
        }
    }

    /// §5.3.3.9 IsInAProbeBWState.
    fn is_probe_bw(self) -> bool {
        matches!(
            self,
            Bbr3State::ProbeBwDown
                | Bbr3State::ProbeBwCruise
                | Bbr3State::ProbeBwRefill
                | Bbr3State::ProbeBwUp
        )
    }

    /// §5.3.3.9 IsProbingBW: the states that accelerate on purpose, where loss moves the
    /// long-term bound rather than the short-term one (§5.5.10.3).
    fn is_probing_bw(self) -> bool {
        matches!(
            self,
            Bbr3State::Startup | Bbr3State::ProbeBwRefill | Bbr3State::ProbeBwUp
        )
    }
}

/// §2.14 ack_phase: what the ACKs now arriving say about a bandwidth probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// One ACK's rate sample as the draft's pseudo-code reads it ("RS", §2.3, §4.1.2.1.3).
#[derive(Clone, Copy, Debug)]
struct Sample {
    delivery_rate: u64,
    delivered: u64,
    prior_delivered: u64,
    is_app_limited: bool,
    tx_in_flight: u64,
    lost: u64,
    /// `None` for a zero RTT, which no path has: the draft's "RS.rtt < 0".
    rtt: Option<Duration>,
    newly_acked: u64,
}

/// The BBRv3 congestion controller.
#[derive(Clone, Debug)]
pub struct Bbr3 {
    params: Bbr3Params,
    // Connection state the draft reads as C.* (§2.2, §2.4).
    mds: u64,
    initial_cwnd: u64,
    min_pipe_cwnd: u64,
    cwnd: u64,
    pacing_rate: u64,
    send_quantum: u64,
    in_flight: u64,
    delivered: u64,
    /// The last ACK found the sender with nothing to send (C.app_limited, for §5.4).
    app_limited: bool,
    /// C.is_cwnd_limited: the window was full at some point of this round or the last one.
    cwnd_limited_this_round: bool,
    cwnd_limited_last_round: bool,
    /// The pacing rate was set from a measured RTT (§5.6.2 InitPacingRate).
    pacing_rate_from_rtt: bool,
    /// Seeded randomness for the probe wait (§5.3.3.8.2 PickProbeWait).
    rng: u64,

    // §2.7 general state.
    state: Bbr3State,
    pacing_gain: f64,
    cwnd_gain: f64,
    round_count: u64,
    round_start: bool,
    next_round_delivered: u64,
    idle_restart: bool,
    drain_start_round: u64,

    // §2.9 path model.
    max_bw_filter: WindowedMax,
    max_bw: u64,
    cycle_count: u64,
    bw_shortterm: u64,
    bw: u64,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    extra_acked: u64,
    extra_acked_filter: WindowedMax,
    extra_acked_interval_start: Instant,
    extra_acked_delivered: u64,
    inflight_longterm: u64,
    inflight_shortterm: u64,

    // §2.10 congestion signals.
    bw_latest: u64,
    inflight_latest: u64,
    loss_round_delivered: u64,
    loss_round_start: bool,
    is_loss_in_round: bool,
    /// Loss events (ACKs or timer expiries that declared losses) in this loss round (§5.3.1.3).
    loss_events_in_round: u32,

    // §2.13 Startup.
    full_bw_reached: bool,
    full_bw_now: bool,
    full_bw: u64,
    full_bw_count: u32,

    // §2.14 ProbeBW.
    ack_phase: AckPhase,
    is_bw_probe_sample: bool,
    bw_probe_up_acked: u64,
    probe_up_acked_per_inc: u64,
    bw_probe_up_rounds: u32,
    rounds_since_probe_up: u64,
    bw_probe_wait: Duration,
    cycle_stamp: Instant,
    prev_probe_too_high: bool,
    prev_probe_precautionary: bool,

    // §2.16 ProbeRTT and min_rtt.
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Instant,
    probe_rtt_expired: bool,
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    prior_cwnd: u64,
    /// ProbeRTT's MarkConnectionAppLimited (§5.3.4.3), kept here: samples of packets sent
    /// before this much was delivered count as application-limited; 0 when none.
    app_limited_until: u64,

    // Loss recovery (RFC 9002 §7.3.2's recovery period; §5.6.4.4).
    in_recovery: bool,
    recovery_start: Option<Instant>,
}

impl Bbr3 {
    /// §5.5.10.2 IsInflightTooHigh: more than LossThresh of the flight was lost. QUIC
    /// acknowledges ranges, so the draft's rule for connections without selective ACKs never
    /// applies.
    fn is_inflight_too_high(&self, lost: u64, tx_in_flight: u64) -> bool {
        lost as f64 > tx_in_flight as f64 * self.params.loss_thresh
    }

    /// §5.5.10.2 InflightAtLoss: the flight at which the loss rate crossed LossThresh within
    /// the lost packet of `size`: the loss is declared late (RFC 9002's thresholds), so the
    /// flight of the packet whose ACK revealed it would understate the bound.
    fn inflight_at_loss(&self, size: u64, tx_in_flight: u64, lost: u64) -> u64 {
        let thresh = self.params.loss_thresh;
        let inflight_prev = tx_in_flight.saturating_sub(size);
        let lost_prev = lost.saturating_sub(size);
        let lost_prefix = (thresh * inflight_prev as f64 - lost_prev as f64) / (1.0 - thresh);
        // Between the flight before the packet and the flight with it: losses before the
        // packet alone may already exceed the threshold, which makes the prefix negative.
        let lost_prefix = lost_prefix.clamp(0.0, size as f64) as u64;
        inflight_prev.saturating_add(lost_prefix)
    }

    /// §5.2.1 OnInit.
    #[must_use]
    pub fn new(config: &CcConfig, params: Bbr3Params, now: Instant) -> Self {
        let mds = config.max_datagram_size.max(1);
        let initial_cwnd = config.initial_window();
        let (pacing_gain, cwnd_gain) = Bbr3State::Startup.gains();
        let mut bbr = Self {
            params,
            mds,
            initial_cwnd,
            min_pipe_cwnd: mds.saturating_mul(MIN_PIPE_CWND_PACKETS),
            cwnd: initial_cwnd,
            pacing_rate: 0,
            send_quantum: 0,
            in_flight: 0,
            delivered: 0,
            app_limited: false,
            cwnd_limited_this_round: false,
            cwnd_limited_last_round: false,
            pacing_rate_from_rtt: false,
            rng: config.seed,
            state: Bbr3State::Startup,
            pacing_gain,
            cwnd_gain,
            round_count: 0,
            round_start: false,
            next_round_delivered: 0,
            idle_restart: false,
            drain_start_round: 0,
            max_bw_filter: WindowedMax::default(),
            max_bw: 0,
            cycle_count: 0,
            bw_shortterm: UNBOUNDED,
            bw: 0,
            min_rtt: None,
            min_rtt_stamp: now,
            extra_acked: 0,
            extra_acked_filter: WindowedMax::default(),
            extra_acked_interval_start: now,
            extra_acked_delivered: 0,
            inflight_longterm: UNBOUNDED,
            inflight_shortterm: UNBOUNDED,
            bw_latest: 0,
            inflight_latest: 0,
            loss_round_delivered: 0,
            loss_round_start: false,
            is_loss_in_round: false,
            loss_events_in_round: 0,
            full_bw_reached: false,
            full_bw_now: false,
            full_bw: 0,
            full_bw_count: 0,
            ack_phase: AckPhase::Init,
            is_bw_probe_sample: false,
            bw_probe_up_acked: 0,
            probe_up_acked_per_inc: UNBOUNDED,
            bw_probe_up_rounds: 0,
            rounds_since_probe_up: 0,
            bw_probe_wait: Duration::ZERO,
            cycle_stamp: now,
            prev_probe_too_high: false,
            prev_probe_precautionary: false,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: now,
            probe_rtt_expired: false,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0,
            app_limited_until: 0,
            in_recovery: false,
            recovery_start: None,
        };
        bbr.init_pacing_rate(NOMINAL_RTT);
        bbr.set_send_quantum();
        bbr
    }

    /// The current state.
    #[must_use]
    pub fn bbr_state(&self) -> Bbr3State {
        self.state
    }

    /// Whether BBR ever estimated it filled the pipe (§2.13 full_bw_reached).
    #[must_use]
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }

    /// The windowed minimum RTT (§5.5.7).
    #[must_use]
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The long-term bound on the data in flight, `None` while unbounded (§2.9.2).
    #[must_use]
    pub fn inflight_longterm(&self) -> Option<u64> {
        (self.inflight_longterm != UNBOUNDED).then_some(self.inflight_longterm)
    }

    /// §5.6.2 InitPacingRate: StartupPacingGain · InitialCwnd / `rtt`.
    fn init_pacing_rate(&mut self, rtt: Duration) {
        let nominal = u128::from(self.initial_cwnd) * 1_000_000_000 / rtt.as_nanos().max(1);
        self.pacing_rate = gain_of(
            u64::try_from(nominal).unwrap_or(u64::MAX),
            STARTUP_PACING_GAIN,
        );
    }

    /// Switches to `state` with the gains of §5.6.1's table.
    fn enter(&mut self, state: Bbr3State) {
        self.state = state;
        (self.pacing_gain, self.cwnd_gain) = state.gains();
    }

    /// The rate sample of one ACK, with ProbeRTT's application-limited mark applied (§5.3.4.3:
    /// "ignore low rate samples during ProbeRTT"). The connection's rate sampler marks packets
    /// only when the application runs dry, so the mark is kept here, as the sampler keeps its
    /// own (§4.1.2.3 GenerateRateSample): a packet sent before the marked amount was delivered
    /// carries a `prior_delivered` at most that amount.
    fn sample(&mut self, rs: &RateSample, lost_total: u64, newly_acked: u64) -> Sample {
        let marked = self.app_limited_until != 0 && rs.prior_delivered <= self.app_limited_until;
        if self.app_limited_until != 0 && rs.delivered_total > self.app_limited_until {
            self.app_limited_until = 0;
        }
        Sample {
            delivery_rate: rs.delivery_rate.unwrap_or(0),
            delivered: rs.delivered,
            prior_delivered: rs.prior_delivered,
            is_app_limited: rs.is_app_limited || marked,
            tx_in_flight: rs.tx_in_flight,
            lost: lost_total.saturating_sub(rs.prior_lost),
            rtt: (!rs.rtt.is_zero()).then_some(rs.rtt),
            newly_acked,
        }
    }

    /// §5.2.3 UpdateModelAndState.
    fn update_model_and_state(&mut self, now: Instant, rs: &Sample) {
        self.update_latest_delivery_signals(rs);
        self.update_congestion_signals(rs);
        self.update_ack_aggregation(now, rs);
        self.check_full_bw_reached(rs);
        self.check_startup_done(rs);
        self.check_drain_done(now);
        self.update_probe_bw_cycle_phase(now, rs);
        self.update_min_rtt(now, rs);
        self.check_probe_rtt(now, rs);
        self.advance_latest_delivery_signals(rs);
        self.bound_bw_for_model();
    }

    /// §5.2.3 UpdateControlParameters.
    fn update_control_parameters(&mut self, rs: &Sample) {
        self.set_pacing_rate();
        self.set_send_quantum();
        self.set_cwnd(rs);
    }

    /// §5.6.2 SetPacingRateWithGain: until the pipe is full the rate only rises, so
    /// application-limited samples cannot pull it down while Startup searches.
    fn set_pacing_rate_with_gain(&mut self, gain: f64) {
        let rate = gain_of(self.bw, gain * PACING_MARGIN);
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// §5.6.2 SetPacingRate.
    fn set_pacing_rate(&mut self) {
        self.set_pacing_rate_with_gain(self.pacing_gain);
    }

    /// §5.6.3 SetSendQuantum.
    fn set_send_quantum(&mut self) {
        let quantum =
            u128::from(self.pacing_rate) * SEND_QUANTUM_INTERVAL.as_nanos() / 1_000_000_000;
        self.send_quantum = u64::try_from(quantum)
            .unwrap_or(u64::MAX)
            .min(MAX_SEND_QUANTUM)
            .max(self.mds.saturating_mul(2));
    }

    /// §5.6.4.2 BDPMultiple: `gain` times `bw` over min_rtt, the initial window before any RTT.
    fn bdp_multiple(&self, bw: u64, gain: f64) -> u64 {
        let Some(min_rtt) = self.min_rtt else {
            return self.initial_cwnd;
        };
        let bdp = u128::from(bw) * min_rtt.as_nanos() / 1_000_000_000;
        gain_of(u64::try_from(bdp).unwrap_or(u64::MAX), gain)
    }

    /// §2.9.2 BBR.bdp = BBR.bw · BBR.min_rtt.
    fn bdp(&self) -> u64 {
        self.bdp_multiple(self.bw, 1.0)
    }

    /// §5.6.4.2 QuantizationBudget: room for the quanta the hosts hold (§5.5.8.2: for QUIC the
    /// offload budget is one send quantum), never under the minimum pipe, and two datagrams more
    /// in ProbeBW_UP so a probe is not held back by rounding.
    fn quantization_budget(&self, inflight_cap: u64) -> u64 {
        let cap = inflight_cap.max(self.send_quantum).max(self.min_pipe_cwnd);
        if self.state == Bbr3State::ProbeBwUp {
            cap.saturating_add(self.mds.saturating_mul(2))
        } else {
            cap
        }
    }

    /// §5.6.4.2 Inflight.
    fn inflight(&self, bw: u64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    /// §5.6.4.2 UpdateMaxInflight: the flight the model says fills the pipe, aggregation
    /// included.
    fn max_inflight(&self) -> u64 {
        let cap = self
            .bdp_multiple(self.bw, self.cwnd_gain)
            .saturating_add(self.extra_acked);
        self.quantization_budget(cap)
    }

    /// §5.3.3.8.2 TargetInflight: the BDP, unless congestion cut the window below it.
    fn target_inflight(&self) -> u64 {
        self.bdp().min(self.cwnd)
    }

    /// §5.3.3.9 InflightWithHeadroom: `inflight_longterm` less 15 % (at least a datagram) left
    /// for cross traffic.
    fn inflight_with_headroom(&self) -> u64 {
        if self.inflight_longterm == UNBOUNDED {
            return UNBOUNDED;
        }
        let headroom = self
            .mds
            .max(gain_of(self.inflight_longterm, self.params.headroom));
        self.inflight_longterm
            .saturating_sub(headroom)
            .max(self.min_pipe_cwnd)
    }

    /// §5.6.4.5 ProbeRTTCwnd: half the BDP, at least the minimum pipe.
    fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp_multiple(self.bw, PROBE_RTT_CWND_GAIN)
            .max(self.min_pipe_cwnd)
    }

    /// §5.6.4.6 SetCwnd: cut at once to the model's flight, grow by at most what was
    /// acknowledged.
    fn set_cwnd(&mut self, rs: &Sample) {
        let max_inflight = self.max_inflight();
        if self.full_bw_reached {
            self.cwnd = self.cwnd.saturating_add(rs.newly_acked).min(max_inflight);
        } else if self.cwnd < max_inflight || self.delivered < self.initial_cwnd {
            self.cwnd = self.cwnd.saturating_add(rs.newly_acked);
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd);
        // §5.6.4.5 BoundCwndForProbeRTT.
        if self.state == Bbr3State::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
        self.bound_cwnd_for_model();
    }

    /// §5.6.4.7 BoundCwndForModel: the volume caps of §5.6.1's table.
    fn bound_cwnd_for_model(&mut self) {
        let cap = if self.state.is_probe_bw() && self.state != Bbr3State::ProbeBwCruise {
            self.inflight_longterm
        } else if matches!(self.state, Bbr3State::ProbeRtt | Bbr3State::ProbeBwCruise) {
            self.inflight_with_headroom()
        } else {
            UNBOUNDED
        };
        let cap = cap.min(self.inflight_shortterm).max(self.min_pipe_cwnd);
        self.cwnd = self.cwnd.min(cap);
    }

    /// §5.6.4.4 SaveCwnd: the last window not cut by recovery or ProbeRTT.
    fn save_cwnd(&mut self) {
        self.prior_cwnd = if !self.in_recovery && self.state != Bbr3State::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    /// §5.6.4.4 RestoreCwnd.
    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// §5.4.1 HandleRestartFromIdle: after an idle period pace at the estimated bandwidth, and
    /// leave a ProbeRTT that the idle period completed.
    fn handle_restart_from_idle(&mut self, now: Instant) {
        self.idle_restart = true;
        self.extra_acked_interval_start = now;
        if self.state.is_probe_bw() {
            self.set_pacing_rate_with_gain(1.0);
        } else if self.state == Bbr3State::ProbeRtt {
            self.check_probe_rtt_done(now);
        }
    }
}

impl CongestionController for Bbr3 {
    /// §5.2.2 OnTransmit, and C.is_cwnd_limited: the window is full when the next full datagram
    /// would not fit.
    fn on_packet_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64) {
        if bytes_in_flight == 0 && self.app_limited {
            self.handle_restart_from_idle(now);
        }
        self.in_flight = bytes_in_flight.saturating_add(bytes);
        if self.in_flight.saturating_add(self.mds) > self.cwnd {
            self.cwnd_limited_this_round = true;
        }
    }

    /// §5.2.3 UpdateOnACK.
    fn on_ack(&mut self, ack: &AckEvent<'_>) {
        let now = ack.now;
        self.in_flight = ack.in_flight;
        self.app_limited = ack.app_limited;
        if !self.pacing_rate_from_rtt && ack.rtt.has_sample() {
            // §5.6.2: the initial rate uses the first RTT sample; a QUIC controller starts before
            // the handshake measured one.
            self.pacing_rate_from_rtt = true;
            self.init_pacing_rate(ack.rtt.smoothed());
        }
        let Some(rs) = ack.rate_sample else { return };
        self.delivered = rs.delivered_total;
        let newly_acked = ack
            .acked
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.bytes));
        let rs = self.sample(rs, ack.lost_total, newly_acked);
        self.update_model_and_state(now, &rs);
        // §5.6.4.4: leaving recovery restores the window, which SetCwnd then bounds by the
        // model. RFC 9002 §7.3.2: recovery ends when a packet sent during it is acknowledged.
        // Checked after the model so that Startup's loss exit sees the recovery this ACK ends.
        let recovery_over = self
            .recovery_start
            .is_some_and(|start| ack.acked.iter().any(|p| p.time_sent > start));
        if self.in_recovery && recovery_over {
            self.in_recovery = false;
            self.restore_cwnd();
        }
        self.update_control_parameters(&rs);
    }

    /// §5.5.10.2 HandleLostPacket.
    fn on_packet_lost(&mut self, now: Instant, lost: &LostPacket) {
        self.note_loss();
        if !self.is_bw_probe_sample {
            return;
        }
        let tx_in_flight = lost.rate.tx_in_flight;
        let lost_since_sent = lost.lost_total.saturating_sub(lost.rate.lost);
        if self.is_inflight_too_high(lost_since_sent, tx_in_flight) {
            let at_loss = self.inflight_at_loss(lost.bytes, tx_in_flight, lost_since_sent);
            self.handle_inflight_too_high(now, at_loss, lost.rate.is_app_limited);
        }
    }

    /// §5.6.4.4 OnEnterFastRecovery and OnEnterRTO, with RFC 9002's recovery period (§7.3.2)
    /// and persistent congestion (§7.6.2) as the retransmission timeout.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        largest_lost_sent_time: Instant,
        lost_bytes: u64,
        persistent_congestion: bool,
        _rtt: &RttEstimator,
    ) {
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        // §5.3.1.3 counts loss events per round; one ACK or timer expiry is one event.
        self.loss_events_in_round = self.loss_events_in_round.saturating_add(1);
        if self
            .recovery_start
            .is_none_or(|s| largest_lost_sent_time > s)
        {
            if !self.in_recovery {
                self.save_cwnd();
            }
            self.in_recovery = true;
            self.recovery_start = Some(now);
        }
        if persistent_congestion {
            // OnEnterRTO: room for one datagram beyond what is in flight; not under the minimum
            // pipe (§5.6.4.3), which the next ACK would restore anyway, so that a path MTU
            // change or an empty flight never leaves less than RFC 9002 §7.2's minimum window.
            self.save_cwnd();
            self.cwnd = self
                .in_flight
                .saturating_add(self.mds)
                .max(self.min_pipe_cwnd);
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_max_datagram_size(&mut self, mds: u64) {
        self.mds = mds.max(1);
        self.min_pipe_cwnd = self.mds.saturating_mul(MIN_PIPE_CWND_PACKETS);
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd);
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate.max(GRANULARITY_RATE_FLOOR))
    }

    /// BBR.bw (§2.9.1): the bandwidth the model paces at, bounded by recent loss.
    fn bandwidth_estimate(&self) -> Option<u64> {
        (self.bw > 0).then_some(self.bw)
    }

    fn name(&self) -> &'static str {
        "bbr3"
    }

    fn state(&self) -> &'static str {
        match self.state {
            Bbr3State::Startup => "startup",
            Bbr3State::Drain => "drain",
            Bbr3State::ProbeBwDown => "probe_bw_down",
            Bbr3State::ProbeBwCruise => "probe_bw_cruise",
            Bbr3State::ProbeBwRefill => "probe_bw_refill",
            Bbr3State::ProbeBwUp => "probe_bw_up",
            Bbr3State::ProbeRtt => "probe_rtt",
        }
    }
}
