//! The state machine (§5.3): Startup, Drain, the ProbeBW cycle with the long-term model it
//! adapts (§5.3.3.9), and ProbeRTT.

use std::time::Duration;

use recoup_time::Instant;

use super::{gain_of, splitmix64, AckPhase, Bbr3, Bbr3State, Sample, UNBOUNDED};

/// §5.3.1.2: growth under 25 % for three rounds is a plateau.
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
/// §5.3.1.3 BBRStartupFullLossCnt: loss events in a round before Startup exits on loss.
const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// §5.3.2: Drain gives up waiting for the flight to fall to the BDP after three rounds.
const DRAIN_MAX_ROUNDS: u64 = 3;
/// §5.3.3.8.2: the BBR-native time between probes, uniform in [2 s, 3 s).
const PROBE_WAIT_BASE: Duration = Duration::from_secs(2);
const PROBE_WAIT_SPREAD_NANOS: u64 = 1_000_000_000;
/// §5.3.3.8.2: the Reno-coexistence bound, 62 or 63 rounds (63 less a random 0 or 1).
const RENO_ROUNDS_MAX: u64 = 63;
/// §5.3.3.9 RaiseInflightLongtermSlope: the growth of `inflight_longterm` doubles each round
/// of ProbeBW_UP, up to 2^30 datagrams a round.
const MAX_PROBE_UP_ROUNDS: u32 = 30;
/// §2.16.2 ProbeRTTDuration.
pub(super) const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);

impl Bbr3 {
    /// §5.3.1.1 EnterStartup.
    fn enter_startup(&mut self) {
        self.enter(Bbr3State::Startup);
    }

    /// §5.3.1.2 ResetFullBW.
    fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// §5.3.1.2 CheckFullBWReached: three non-application-limited rounds with a delivery rate
    /// under 1.25 times the baseline mean the pipe is full.
    pub(super) fn check_full_bw_reached(&mut self, rs: &Sample) {
        if self.full_bw_now || !self.round_start || rs.is_app_limited {
            return;
        }
        if rs.delivery_rate as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_now = self.full_bw_count >= FULL_BW_ROUNDS;
        if self.full_bw_now {
            self.full_bw_reached = true;
        }
    }

    /// §5.3.1.1 CheckStartupDone.
    pub(super) fn check_startup_done(&mut self, rs: &Sample) {
        self.check_startup_high_loss(rs);
        if self.state == Bbr3State::Startup && self.full_bw_reached {
            self.enter_drain();
        }
    }

    /// §5.3.1.3 CheckStartupHighLoss, which the draft gives in prose: at the end of a loss round
    /// in recovery with at least six loss events and more than LossThresh of the flight lost,
    /// the pipe is full and the flight of the last round is a safe bound. RFC 9002's recovery
    /// period ends one round after it starts, so "in recovery for a full round" is taken as Linux
    /// takes it (`bbr_check_loss_too_high_in_startup`): in recovery when the loss round ends.
    fn check_startup_high_loss(&mut self, rs: &Sample) {
        if self.full_bw_reached || self.state != Bbr3State::Startup {
            return;
        }
        if self.loss_round_start
            && self.in_recovery
            && self.loss_events_in_round >= STARTUP_FULL_LOSS_COUNT
            && self.is_inflight_too_high(rs.lost, rs.tx_in_flight)
        {
            self.full_bw_reached = true;
            self.full_bw_now = true;
            self.inflight_longterm = self.bdp().max(self.inflight_latest);
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    /// §5.3.2 EnterDrain.
    fn enter_drain(&mut self) {
        self.enter(Bbr3State::Drain);
        self.drain_start_round = self.round_count;
    }

    /// §5.3.2 CheckDrainDone: the queue is gone when the flight is at most a BDP, or Startup
    /// overestimated and three rounds are enough.
    pub(super) fn check_drain_done(&mut self, now: Instant) {
        if self.state == Bbr3State::Drain
            && (self.in_flight <= self.inflight(self.bw, 1.0)
                || self.round_count > self.drain_start_round + DRAIN_MAX_ROUNDS)
        {
            self.enter_probe_bw(now);
        }
    }

    /// §5.3.3.9 EnterProbeBW.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.start_probe_bw_down(now);
    }

    /// §5.3.3.9 StartProbeBW_DOWN: a new cycle, its probe wait drawn afresh.
    fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_up_acked_per_inc = UNBOUNDED;
        self.pick_probe_wait();
        self.cycle_stamp = now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round();
        self.enter(Bbr3State::ProbeBwDown);
    }

    /// §5.3.3.9 StartProbeBW_CRUISE.
    fn start_probe_bw_cruise(&mut self) {
        self.enter(Bbr3State::ProbeBwCruise);
    }

    /// §5.3.3.3, §5.3.3.9 StartProbeBW_REFILL: forget the short-term model (losses from cross
    /// traffic) and refill the pipe for a round before probing.
    fn start_probe_bw_refill(&mut self) {
        self.reset_short_term_model();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acked = 0;
        self.prev_probe_precautionary = false;
        self.ack_phase = AckPhase::Refilling;
        self.start_round();
        self.enter(Bbr3State::ProbeBwRefill);
    }

    /// §5.3.3.9 StartProbeBW_UP.
    fn start_probe_bw_up(&mut self, rs: &Sample) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = rs.delivery_rate;
        self.enter(Bbr3State::ProbeBwUp);
        self.raise_inflight_longterm_slope();
    }

    /// §5.3.3.9 UpdateProbeBWCyclePhase.
    pub(super) fn update_probe_bw_cycle_phase(&mut self, now: Instant, rs: &Sample) {
        if !self.full_bw_reached || self.adapt_long_term_model(rs) || !self.state.is_probe_bw() {
            return;
        }
        match self.state {
            Bbr3State::ProbeBwDown => {
                if !self.is_time_to_probe_bw(now) && self.is_time_to_cruise() {
                    self.start_probe_bw_cruise();
                }
            }
            Bbr3State::ProbeBwCruise => {
                self.is_time_to_probe_bw(now);
            }
            Bbr3State::ProbeBwRefill => {
                // After one round of REFILL the pipe is full: probe.
                if self.round_start {
                    self.is_bw_probe_sample = true;
                    self.start_probe_bw_up(rs);
                }
            }
            Bbr3State::ProbeBwUp => {
                if self.is_time_to_go_down(rs) {
                    // No high loss (yet): the next probe need not be precautionary.
                    self.prev_probe_too_high = false;
                    self.start_probe_bw_down(now);
                }
            }
            Bbr3State::Startup | Bbr3State::Drain | Bbr3State::ProbeRtt => {}
        }
    }

    /// §5.3.3.8.2 PickProbeWait: 0 or 1 round toward the Reno bound, and 2 to 3 s of wall clock.
    fn pick_probe_wait(&mut self) {
        self.rng = splitmix64(self.rng);
        self.rounds_since_probe_up = self.rng & 1;
        self.rng = splitmix64(self.rng);
        self.bw_probe_wait =
            PROBE_WAIT_BASE + Duration::from_nanos(self.rng % PROBE_WAIT_SPREAD_NANOS);
    }

    /// §5.3.3.8.2 IsTimeToProbeBW: the sooner of the BBR-native and the Reno time scales.
    fn is_time_to_probe_bw(&mut self, now: Instant) -> bool {
        let waited = now > self.cycle_stamp + self.bw_probe_wait;
        if waited || self.is_reno_coexistence_probe_time() {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    /// §5.3.3.8.2 IsRenoCoexistenceProbeTime: Reno grows its window a datagram per round, so
    /// a BDP of N datagrams needs N rounds without loss; the target flight is in datagrams here,
    /// as the draft's T_reno counts it.
    fn is_reno_coexistence_probe_time(&self) -> bool {
        let reno_rounds = self.target_inflight() / self.mds;
        self.rounds_since_probe_up >= reno_rounds.min(RENO_ROUNDS_MAX)
    }

    /// §5.3.3.9 IsTimeToCruise: DOWN has left headroom and drained the queue.
    fn is_time_to_cruise(&self) -> bool {
        self.in_flight <= self.inflight_with_headroom()
            && self.in_flight <= self.inflight(self.max_bw, 1.0)
    }

    /// §5.3.3.7, §5.3.3.9 IsTimeToGoDown.
    fn is_time_to_go_down(&mut self, rs: &Sample) -> bool {
        // Precautionary bandwidth probing, deceleration (§5.3.3.6): the last probe lost too
        // much at this flight, so do not hold it for a round.
        if self.prev_probe_too_high && self.in_flight >= self.inflight_longterm {
            self.prev_probe_precautionary = true;
            return true;
        }
        if self.is_cwnd_limited() && self.cwnd >= self.inflight_longterm {
            // The bound, not the path, limits the rate: no plateau can be seen yet.
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate;
        } else if self.full_bw_now {
            return true;
        }
        false
    }

    /// §5.3.3.9 RaiseInflightLongtermSlope: 1, 2, 4, ... datagrams more per round of UP.
    fn raise_inflight_longterm_slope(&mut self) {
        let growth_this_round = 1u64 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(MAX_PROBE_UP_ROUNDS);
        self.probe_up_acked_per_inc = (self.cwnd / growth_this_round).max(self.mds);
    }

    /// §5.3.3.9 ProbeInflightLongtermUpward: grow the bound only while the flight is held at it.
    fn probe_inflight_longterm_upward(&mut self, rs: &Sample) {
        if !self.is_cwnd_limited() || self.cwnd < self.inflight_longterm {
            return;
        }
        self.bw_probe_up_acked = self.bw_probe_up_acked.saturating_add(rs.newly_acked);
        if self.bw_probe_up_acked >= self.probe_up_acked_per_inc {
            let delta = self.bw_probe_up_acked / self.probe_up_acked_per_inc;
            self.bw_probe_up_acked -= delta * self.probe_up_acked_per_inc;
            self.inflight_longterm = self
                .inflight_longterm
                .saturating_add(delta.saturating_mul(self.mds));
        }
        if self.round_start {
            self.raise_inflight_longterm_slope();
        }
    }

    /// §5.3.3.9 AdaptLongTermModel: track which ACKs carry probe feedback, advance the
    /// bandwidth filter once per cycle, and raise `inflight_longterm` while the loss rate is
    /// safe. Returns whether it decided a state change.
    fn adapt_long_term_model(&mut self, rs: &Sample) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // The samples of the probe are over: one round after UP ends (§5.5.6).
            self.is_bw_probe_sample = false;
            self.ack_phase = AckPhase::Init;
            if self.state.is_probe_bw() && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            // Precautionary bandwidth probing, acceleration (§5.3.3.6): the cautious probe
            // lost nothing to speak of, so probe again at once and hold the flight this time.
            if self.state.is_probe_bw()
                && self.prev_probe_precautionary
                && !self.prev_probe_too_high
            {
                self.start_probe_bw_refill();
                return true;
            }
        }
        if !self.is_inflight_too_high(rs.lost, rs.tx_in_flight) {
            if self.inflight_longterm == UNBOUNDED {
                return false;
            }
            if rs.tx_in_flight > self.inflight_longterm {
                self.inflight_longterm = rs.tx_in_flight;
            }
            if self.state == Bbr3State::ProbeBwUp {
                self.probe_inflight_longterm_upward(rs);
            }
        }
        false
    }

    /// §5.5.10.2 HandleInflightTooHigh: a probe lost too much at `tx_in_flight`, which becomes
    /// the long-term bound (by at most Beta below the target, CUBIC's cut), and ends the probe.
    pub(super) fn handle_inflight_too_high(
        &mut self,
        now: Instant,
        tx_in_flight: u64,
        is_app_limited: bool,
    ) {
        self.prev_probe_too_high = true;
        // React once per probe.
        self.is_bw_probe_sample = false;
        if !is_app_limited {
            self.inflight_longterm =
                tx_in_flight.max(gain_of(self.target_inflight(), self.params.beta));
        }
        if self.state == Bbr3State::ProbeBwUp {
            self.start_probe_bw_down(now);
        }
    }

    /// §5.3.4.3 CheckProbeRTT: after ProbeRTTInterval without a lower RTT, and unless an idle
    /// period just drained the queue, halve the flight for 200 ms and a round.
    pub(super) fn check_probe_rtt(&mut self, now: Instant, rs: &Sample) {
        if self.state != Bbr3State::ProbeRtt && self.probe_rtt_expired && !self.idle_restart {
            self.enter(Bbr3State::ProbeRtt);
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round();
        }
        if self.state == Bbr3State::ProbeRtt {
            self.handle_probe_rtt(now);
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// §5.3.4.3 HandleProbeRTT.
    fn handle_probe_rtt(&mut self, now: Instant) {
        // MarkConnectionAppLimited: the low rates of ProbeRTT say nothing of the path.
        self.app_limited_until = self.delivered.saturating_add(self.in_flight).max(1);
        match self.probe_rtt_done_stamp {
            None if self.in_flight <= self.probe_rtt_cwnd() => {
                self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
                self.probe_rtt_round_done = false;
                self.start_round();
            }
            None => {}
            Some(_) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(now);
                }
            }
        }
    }

    /// §5.3.4.3 CheckProbeRTTDone: schedule the next ProbeRTT in ProbeRTTInterval and leave.
    pub(super) fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done_stamp.is_some_and(|done| now > done) {
            self.probe_rtt_min_stamp = now;
            self.restore_cwnd();
            self.exit_probe_rtt(now);
        }
    }

    /// §5.3.4.4 ExitProbeRTT: the flight is below the BDP already, so a new cycle can skip
    /// DOWN; without a full pipe, back to Startup.
    fn exit_probe_rtt(&mut self, now: Instant) {
        self.reset_short_term_model();
        if self.full_bw_reached {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.enter_startup();
        }
    }
}
