//! The path model (§5.5): round counting, the bandwidth and min-RTT filters, ACK aggregation and
//! the short-term bounds that loss moves while BBR is not probing.

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

use super::{gain_of, Bbr3, Sample, UNBOUNDED};

/// §2.11 MaxBwFilterLen: the bandwidth filter spans this ProbeBW cycle and the previous one.
const MAX_BW_FILTER_LEN: u64 = 2;
/// §2.12 ExtraAckedFilterLen, in rounds (one round in Startup, §5.5.9).
const EXTRA_ACKED_FILTER_LEN: u64 = 10;
/// §2.16.1 MinRTTFilterLen.
const MIN_RTT_FILTER_LEN: Duration = Duration::from_secs(10);
/// §2.16.2 ProbeRTTInterval: how long a min-RTT sample may go unrefreshed before ProbeRTT.
pub(super) const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);

/// A windowed maximum over a virtual time (rounds or ProbeBW cycles): the largest value of
/// the last `window` time units, one entry per unit, as §5.5.5's UpdateWindowedMaxFilter. Its
/// windows are 10 units at most, so a short list does what Kathleen Nichols' three-sample
/// filter does, exactly.
#[derive(Clone, Debug, Default)]
pub(super) struct WindowedMax {
    /// (time, largest value at that time), oldest first.
    samples: VecDeque<(u64, u64)>,
}

impl WindowedMax {
    /// Adds `value` at `time` and returns the maximum over `(time - window, time]`.
    pub(super) fn update(&mut self, value: u64, time: u64, window: u64) -> u64 {
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| t.saturating_add(window) <= time)
        {
            self.samples.pop_front();
        }
        match self.samples.back_mut() {
            Some((t, v)) if *t == time => *v = (*v).max(value),
            _ => self.samples.push_back((time, value)),
        }
        self.samples.iter().map(|&(_, v)| v).max().unwrap_or(value)
    }
}

impl Bbr3 {
    /// §5.5.1 StartRound: the round ends when a packet sent from now on is acknowledged.
    pub(super) fn start_round(&mut self) {
        self.next_round_delivered = self.delivered;
    }

    /// §5.5.1 UpdateRound. A round's start also rolls C.is_cwnd_limited over, which covers
    /// this round and the last.
    pub(super) fn update_round(&mut self, rs: &Sample) {
        if rs.prior_delivered >= self.next_round_delivered {
            self.start_round();
            self.round_count += 1;
            self.rounds_since_probe_up += 1;
            self.round_start = true;
            self.cwnd_limited_last_round = self.cwnd_limited_this_round;
            self.cwnd_limited_this_round = false;
        } else {
            self.round_start = false;
        }
    }

    /// C.is_cwnd_limited (§2.2): the window was full at some point in the last round.
    pub(super) fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited_this_round || self.cwnd_limited_last_round
    }

    /// §5.5.5 UpdateMaxBw: application-limited samples count only when they raise the estimate.
    pub(super) fn update_max_bw(&mut self, rs: &Sample) {
        self.update_round(rs);
        if rs.delivery_rate > 0 && (rs.delivery_rate >= self.max_bw || !rs.is_app_limited) {
            self.max_bw =
                self.max_bw_filter
                    .update(rs.delivery_rate, self.cycle_count, MAX_BW_FILTER_LEN);
        }
    }

    /// §5.5.6 AdvanceMaxBwFilter: the filter's time is the ProbeBW cycle.
    pub(super) fn advance_max_bw_filter(&mut self) {
        self.cycle_count += 1;
    }

    /// §5.3.4.3 UpdateMinRTT: `probe_rtt_min_delay` is the minimum of the last ProbeRTTInterval
    /// and schedules ProbeRTT; min_rtt takes it when lower or when its own 10 s have passed.
    pub(super) fn update_min_rtt(&mut self, now: Instant, rs: &Sample) {
        self.probe_rtt_expired = now > self.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
        if let Some(rtt) = rs.rtt {
            if self.probe_rtt_min_delay.is_none_or(|d| rtt < d) || self.probe_rtt_expired {
                self.probe_rtt_min_delay = Some(rtt);
                self.probe_rtt_min_stamp = now;
            }
        }
        let min_rtt_expired = now > self.min_rtt_stamp + MIN_RTT_FILTER_LEN;
        if let Some(delay) = self.probe_rtt_min_delay {
            if self.min_rtt.is_none_or(|m| delay < m) || min_rtt_expired {
                self.min_rtt = Some(delay);
                self.min_rtt_stamp = self.probe_rtt_min_stamp;
            }
        }
    }

    /// §5.5.9 UpdateACKAggregation: data acknowledged beyond what `bw` delivers over the same
    /// interval, remembered over 10 rounds (one in Startup), lets the window cover the silences
    /// of an aggregating path.
    pub(super) fn update_ack_aggregation(&mut self, now: Instant, rs: &Sample) {
        let interval = now.saturating_duration_since(self.extra_acked_interval_start);
        let expected = u128::from(self.bw) * interval.as_nanos() / 1_000_000_000;
        let mut expected = u64::try_from(expected).unwrap_or(u64::MAX);
        // The ACK rate fell below the estimate: the aggregation episode is over.
        if self.extra_acked_delivered <= expected {
            self.extra_acked_delivered = 0;
            self.extra_acked_interval_start = now;
            expected = 0;
        }
        self.extra_acked_delivered = self.extra_acked_delivered.saturating_add(rs.newly_acked);
        let extra = self
            .extra_acked_delivered
            .saturating_sub(expected)
            .min(self.cwnd);
        let window = if self.full_bw_reached {
            EXTRA_ACKED_FILTER_LEN
        } else {
            1
        };
        self.extra_acked = self
            .extra_acked_filter
            .update(extra, self.round_count, window);
    }

    /// §5.5.10.3 UpdateLatestDeliverySignals: the delivery of the last round, and whether a
    /// loss round (from the first loss, §5.5.10.2 NoteLoss) ended.
    pub(super) fn update_latest_delivery_signals(&mut self, rs: &Sample) {
        self.loss_round_start = false;
        self.bw_latest = self.bw_latest.max(rs.delivery_rate);
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = self.delivered;
            self.loss_round_start = true;
        }
    }

    /// §5.5.10.3 AdvanceLatestDeliverySignals.
    pub(super) fn advance_latest_delivery_signals(&mut self, rs: &Sample) {
        if self.loss_round_start {
            self.bw_latest = rs.delivery_rate;
            self.inflight_latest = rs.delivered;
        }
    }

    /// §5.5.10.3 ResetCongestionSignals.
    pub(super) fn reset_congestion_signals(&mut self) {
        self.is_loss_in_round = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    /// §5.5.10.3 UpdateCongestionSignals: once per loss round, adapt to its losses.
    pub(super) fn update_congestion_signals(&mut self, rs: &Sample) {
        self.update_max_bw(rs);
        if !self.loss_round_start {
            return;
        }
        // §5.5.10.3 AdaptLowerBoundsFromCongestion: probing states answer loss through
        // `inflight_longterm` instead (§5.5.10.2).
        if !self.state.is_probing_bw() && self.is_loss_in_round {
            // InitLowerBounds: the first congestion of the cycle starts from the model.
            if self.bw_shortterm == UNBOUNDED {
                self.bw_shortterm = self.max_bw;
            }
            if self.inflight_shortterm == UNBOUNDED {
                self.inflight_shortterm = self.cwnd;
            }
            // LossLowerBounds: down to the last round's delivery, by at most Beta per round.
            self.bw_shortterm = self
                .bw_latest
                .max(gain_of(self.bw_shortterm, self.params.beta));
            self.inflight_shortterm = self
                .inflight_latest
                .max(gain_of(self.inflight_shortterm, self.params.beta));
        }
        self.is_loss_in_round = false;
    }

    /// §5.5.10.3 ResetShortTermModel.
    pub(super) fn reset_short_term_model(&mut self) {
        self.bw_shortterm = UNBOUNDED;
        self.inflight_shortterm = UNBOUNDED;
    }

    /// §5.5.10.3 BoundBWForModel.
    pub(super) fn bound_bw_for_model(&mut self) {
        self.bw = self.max_bw.min(self.bw_shortterm);
    }

    /// §5.5.10.2 NoteLoss: a loss round starts at the first loss, and the window before it is
    /// the one to restore (§5.5.11.1 SaveStateUponLoss; without the undo state, as the
    /// connection reports no spurious recovery).
    pub(super) fn note_loss(&mut self) {
        if !self.is_loss_in_round {
            self.loss_round_delivered = self.delivered;
            self.save_cwnd();
        }
        self.is_loss_in_round = true;
    }
}
