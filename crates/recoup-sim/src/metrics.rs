//! Per-run metrics and their aggregation over seeds (DESIGN.md "Metrics (definitions)" and
//! "Result columns").
//!
//! Input: one [`Recovered`] record per lost data range from the transport, the run's
//! [`RunCounters`], and the receiving application's [`AppOutcome`]. Output: a [`RunRow`] whose
//! field names are the result columns, and [`SummaryRow`]s per policy and metric.
//!
//! # Empty sets
//!
//! A mean, percentile or maximum over nothing (no lost range, no range whose first
//! retransmission was lost, no completed transfer) and a share of nothing (deterioration rate of
//! a run without loss, redundancy cost without new packets) is `None`: an empty CSV cell, `null`
//! in JSON, and left out of aggregation; never NaN. Counts and maxima of counts (`lost_ranges`,
//! `copies_sent`, `n_max`, `k_max`) are 0. Columns of another application kind are `None`.

use std::io;
use std::time::Duration;

use recoup_transport::Recovered;
use serde::{Deserialize, Serialize};

use recoup_apps::gaming::{GamingOutcome, GamingViewerOutcome};
use recoup_apps::stats::sorted;
pub use recoup_apps::stats::{mean, percentile};

use crate::app::AppOutcome;

/// Per-run counters from the sender's transport and the path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounters {
    /// Length of the measured run: the time goodput is measured over ([`goodput_window`]).
    pub duration: Duration,
    /// Packets carrying data sent for the first time.
    pub packets_new: u64,
    /// ARQ retransmissions (one per round).
    pub packets_retransmitted: u64,
    /// Copies (replicas, reinjections) besides the retransmissions.
    pub packets_copies: u64,
    /// Bytes (UDP payload) of the packets above, by kind.
    pub bytes_new: u64,
    pub bytes_retransmitted: u64,
    pub bytes_copies: u64,
    /// Packets the sender's loss detection declared lost.
    pub packets_lost: u64,
    /// Application bytes delivered to the receiving application, in order, once each.
    pub goodput_bytes: u64,
    /// Copies the congestion window held back; `None` where unknown (a qlog does not say).
    pub cwnd_holds: Option<CwndHolds>,
    /// FEC repair packets (docs/FEC.md) and their REPAIR frame bytes: redundancy like copies.
    pub packets_repair: u64,
    pub bytes_repair: u64,
    /// Packets the receiver restored from repair symbols and their stream bytes; `None` where
    /// unknown (a sender's qlog does not say).
    pub fec_recovered: Option<(u64, u64)>,
    /// Packets sent while the policy's rate limit was in force, and those of them sent while it
    /// was below the congestion controller's rate; `None` where unknown (a qlog does not say).
    pub packets_rate_limited: Option<(u64, u64)>,
}

/// Copies that found the congestion window full and were not allowed beyond it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CwndHolds {
    /// Held copies that went out once the window opened, and their total wait.
    pub sent: u64,
    pub wait: Duration,
    /// Held copies dropped because their data was acknowledged while they waited.
    pub dropped: u64,
}

impl RunCounters {
    fn packets_sent(&self) -> u64 {
        self.packets_new + self.packets_retransmitted + self.packets_copies + self.packets_repair
    }
}

/// One run's results. Field names are the result columns (DESIGN.md): the first 21 are fixed;
/// the others are additions. Rates and costs are fractions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub policy: String,
    pub seed: u64,
    /// Lost data ranges (each first-transmission loss declared by the sender).
    pub lost_ranges: u64,
    /// Mean loss detection time: first send to first retransmission.
    pub t_unit_ms: Option<f64>,
    /// Recovery latency (AutoRec §III-C) over all lost ranges: mean, p95, max.
    pub recovery_latency_ms: Option<f64>,
    pub recovery_latency_p95_ms: Option<f64>,
    pub recovery_latency_max_ms: Option<f64>,
    /// Mean recovery latency over ranges whose first retransmission did not arrive.
    pub recovery_latency_multi_ms: Option<f64>,
    /// Share of lost ranges with recovery latency >= their T_unit (AutoRec §VII).
    pub deterioration_rate: Option<f64>,
    /// Copies sent / new packets sent (AutoRec).
    pub redundancy_cost: Option<f64>,
    pub copies_sent: u64,
    /// Application bytes delivered * 8 / the goodput window ([`goodput_window`]), Mbit/s.
    pub goodput_mbps: Option<f64>,
    /// 1 - goodput / goodput of the baseline policy on the same seed
    /// ([`fill_baseline_columns`]).
    pub goodput_reduction: Option<f64>,
    /// Packets declared lost / packets sent.
    pub loss_rate: Option<f64>,
    /// Largest retransmission round N (ART §5.1) of any range.
    pub n_max: u32,
    /// Largest number of retransmissions and copies K of any range.
    pub k_max: u32,
    /// Mean flow completion time (file, rpc).
    pub fct_ms: Option<f64>,
    /// Live: freezes and frozen time per 100 s of session.
    pub freezes_per_100s: Option<f64>,
    pub frozen_ms_per_100s: Option<f64>,
    /// RTC: frames not complete by their deadline / frames due.
    pub deadline_miss_rate: Option<f64>,
    /// Non-first-transmission bytes (retransmissions, copies, FEC repair) / all bytes sent.
    pub bandwidth_cost: Option<f64>,
    // Additions.
    /// Ranges whose first retransmission did not arrive, and their p95 and max latency.
    pub lost_ranges_multi: u64,
    pub recovery_latency_multi_p95_ms: Option<f64>,
    pub recovery_latency_multi_max_ms: Option<f64>,
    pub packets_sent: u64,
    pub retransmissions_sent: u64,
    /// p95 and max flow completion time; transfers that did not complete.
    pub fct_p95_ms: Option<f64>,
    pub fct_max_ms: Option<f64>,
    pub transfers_incomplete: Option<u64>,
    /// Live: start-up delay.
    pub startup_delay_ms: Option<f64>,
    /// RTC: missed frames' time / playback time (AutoRec's "percent of video spent frozen",
    /// as a fraction).
    pub frozen_fraction: Option<f64>,
    /// RTC: frozen time by the WebRTC statistics definition (a rendered frame lasting at least
    /// max(3·avg, avg + 150 ms)) / playback time: the videoconferencing FEC testbeds' "percent of
    /// video frozen" (AutoRec Fig. 20, Tambur), as a fraction.
    pub video_frozen_fraction: Option<f64>,
    /// Copies the full congestion window held back before they went out, their mean wait, and
    /// held copies dropped because their data was acknowledged first (the transport's counters;
    /// empty for a qlog analysis).
    pub copies_held_by_cwnd: Option<u64>,
    pub copy_cwnd_wait_ms: Option<f64>,
    pub held_copies_dropped: Option<u64>,
    /// The receiving application's first integrity error; any value makes the run invalid.
    pub app_error: Option<String>,
    /// TOO's invalid response time (TOO §3, Fig. 3a): from a loss's detection to the send of
    /// the recovery packet that is received, mean and p95 over the data whose recovery required
    /// two or more retransmissions. TOO's definition is AutoRec's recovery latency (§III-C) and
    /// "two or more retransmissions" is data whose first retransmission did not arrive, so
    /// `irt_ms` equals `recovery_latency_multi_ms` and `irt_p95_ms` equals
    /// `recovery_latency_multi_p95_ms` by construction; they are kept under TOO's name so that
    /// TOO's tables read its own metric.
    pub irt_ms: Option<f64>,
    pub irt_p95_ms: Option<f64>,
    /// Dual-side FEC (docs/FEC.md): repair packets sent (also counted in `redundancy_cost`,
    /// `bandwidth_cost`, `retran_ratio` and `packets_sent`), and the packets and stream bytes the
    /// receiver restored from repair symbols (restored data counts as delivered: it reaches the
    /// application through the stream like data that arrived).
    pub repair_packets: Option<u64>,
    pub fec_recovered_packets: Option<u64>,
    pub fec_recovered_bytes: Option<u64>,
    /// TOO's retran_ratio (§3, Fig. 3b): packets that were not first transmissions
    /// (retransmissions and copies) / all packets sent.
    pub retran_ratio: Option<f64>,
    /// retran_ratio minus the baseline policy's on the same seed (TOO: "1.9 % of redundancy
    /// (retran_ratio) is additionally introduced") ([`fill_baseline_columns`]).
    pub retran_ratio_added: Option<f64>,
    /// Cloud gaming (docs/LADR.md "Frame metrics"), measured at the sender: frames encoded, the
    /// share the pending-data limit skipped (skipped / ticks), lossy and loss-affected frames,
    /// frames over the deadline (LADR's ">100 ms frames"), the frame delay (mean, p90) and its
    /// breakdown (means), the recovery time of lossy frames (mean, p90), the encoder's mean
    /// target and LBBC's congestion signals; the viewer's frame delay (capture to last byte).
    pub frames_sent: Option<u64>,
    pub frames_skipped_rate: Option<f64>,
    pub lossy_frame_rate: Option<f64>,
    pub loss_affected_frame_rate: Option<f64>,
    pub frames_over_deadline_rate: Option<f64>,
    pub frame_delay_ms: Option<f64>,
    pub frame_delay_p90_ms: Option<f64>,
    pub frame_propagation_ms: Option<f64>,
    pub frame_queuing_ms: Option<f64>,
    pub frame_recovery_ms: Option<f64>,
    pub frame_recovery_lossy_ms: Option<f64>,
    pub frame_recovery_lossy_p90_ms: Option<f64>,
    pub encoder_bitrate_mbps: Option<f64>,
    pub lbbc_signals: Option<u64>,
    pub viewer_frame_delay_ms: Option<f64>,
    /// The viewer's 90th percentile of that delay, and its frames over the deadline (frames
    /// captured that never arrived whole count as over) / frames captured: LADR's metrics at
    /// the receiver, where data FEC restored counts when it arrives, not when the sender hears.
    pub viewer_frame_delay_p90_ms: Option<f64>,
    pub viewer_frames_over_deadline_rate: Option<f64>,
    /// The share of packets sent while the policy's rate limit (LADR's reactive rate limit) was
    /// in force, and while it was also below the congestion controller's rate (it bound).
    pub rate_limited_rate: Option<f64>,
    pub rate_limit_binding_rate: Option<f64>,
    /// Video on demand (ART Fig. 25): the mean bitrate of the segments received, rebuffering
    /// events and their total time, bitrate changes between consecutive segments, and segments
    /// not received by the end of the run.
    pub vod_bitrate_kbps: Option<f64>,
    pub rebuffers: Option<u64>,
    pub rebuffer_s: Option<f64>,
    pub bitrate_switches: Option<u64>,
    pub segments_incomplete: Option<u64>,
    /// Median flow completion time (file, rpc): with `fct_p95_ms`, the typical transfer next to
    /// its tail.
    pub fct_p50_ms: Option<f64>,
    /// MoQ: each object's delay from capture to its last byte at the subscriber (mean, 95th
    /// percentile, over the objects received whole), objects received whole after their
    /// delivery deadline, and objects never received whole (their group was reset at the
    /// deadline, or the run ended). `deadline_miss_rate` holds (late + dropped) / due.
    pub object_delay_ms: Option<f64>,
    pub object_delay_p95_ms: Option<f64>,
    pub objects_late: Option<u64>,
    pub objects_dropped: Option<u64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// Whether a range's recovery deteriorated (AutoRec §VII): its recovery latency is at least
/// its loss detection time T_unit (it took two or more T_unit to recover). A range without a
/// retransmission (recovered before one went out) is measured against `fallback_t_unit`, the
/// run's mean; a zero latency never counts.
#[must_use]
pub fn deteriorated(r: &Recovered, fallback_t_unit: Option<Duration>) -> bool {
    let latency = r.recovery_latency();
    match r.loss_detection_time().or(fallback_t_unit) {
        Some(t_unit) => !latency.is_zero() && latency >= t_unit,
        None => false,
    }
}

/// The time a run's goodput is measured over, from the run's start. A transfer application whose
/// transfers all completed is measured up to its last delivery: goodput is bytes / (completion -
/// start), not bytes / duration, which would count the idle rest of the run (a 200 MB file at 100
/// Mbit/s finishing in 17.4 s of a 60 s run is 92 Mbit/s, not 26.7). Otherwise (live, rtc,
/// unfinished transfers) it is the scenario's `duration`, or longer when data still arrived after
/// it, during the drain.
#[must_use]
pub fn goodput_window(
    duration: Duration,
    last_delivery: Duration,
    app: Option<&AppOutcome>,
) -> Duration {
    match app {
        Some(AppOutcome::Transfer(o))
            if o.expected > 0 && o.fct.len() as u64 >= o.expected && !last_delivery.is_zero() =>
        {
            last_delivery
        }
        _ => duration.max(last_delivery),
    }
}

/// Computes one run's row. `goodput_reduction` and `retran_ratio_added` are left `None`: they
/// need the baseline run ([`fill_baseline_columns`]).
#[must_use]
pub fn run_row(
    policy: &str,
    seed: u64,
    recovered: &[Recovered],
    counters: &RunCounters,
    app: Option<&AppOutcome>,
) -> RunRow {
    let t_units: Vec<f64> = recovered
        .iter()
        .filter_map(|r| r.loss_detection_time().map(ms))
        .collect();
    let t_unit_ms = mean(&t_units);
    let fallback = t_unit_ms.map(|m| Duration::from_secs_f64(m / 1e3));
    let latencies = sorted(recovered.iter().map(|r| ms(r.recovery_latency())).collect());
    let multi = sorted(
        recovered
            .iter()
            .filter(|r| !r.first_retransmit_arrived)
            .map(|r| ms(r.recovery_latency()))
            .collect(),
    );
    let deteriorated_count = recovered
        .iter()
        .filter(|r| deteriorated(r, fallback))
        .count() as u64;
    let lost = recovered.len() as u64;
    let secs = counters.duration.as_secs_f64();
    let bytes_all = counters.bytes_new
        + counters.bytes_retransmitted
        + counters.bytes_copies
        + counters.bytes_repair;
    let mut row = RunRow {
        policy: policy.to_owned(),
        seed,
        lost_ranges: lost,
        t_unit_ms,
        recovery_latency_ms: mean(&latencies),
        recovery_latency_p95_ms: percentile(&latencies, 0.95),
        recovery_latency_max_ms: latencies.last().copied(),
        recovery_latency_multi_ms: mean(&multi),
        deterioration_rate: ratio(deteriorated_count, lost),
        redundancy_cost: ratio(
            counters.packets_copies + counters.packets_repair,
            counters.packets_new,
        ),
        copies_sent: counters.packets_copies,
        goodput_mbps: (secs > 0.0).then(|| counters.goodput_bytes as f64 * 8.0 / secs / 1e6),
        goodput_reduction: None,
        loss_rate: ratio(counters.packets_lost, counters.packets_sent()),
        n_max: recovered.iter().map(|r| r.rounds).max().unwrap_or(0),
        k_max: recovered.iter().map(|r| r.sends).max().unwrap_or(0),
        fct_ms: None,
        freezes_per_100s: None,
        frozen_ms_per_100s: None,
        deadline_miss_rate: None,
        bandwidth_cost: ratio(
            counters.bytes_retransmitted + counters.bytes_copies + counters.bytes_repair,
            bytes_all,
        ),
        lost_ranges_multi: multi.len() as u64,
        recovery_latency_multi_p95_ms: percentile(&multi, 0.95),
        recovery_latency_multi_max_ms: multi.last().copied(),
        packets_sent: counters.packets_sent(),
        retransmissions_sent: counters.packets_retransmitted,
        fct_p95_ms: None,
        fct_max_ms: None,
        transfers_incomplete: None,
        startup_delay_ms: None,
        frozen_fraction: None,
        video_frozen_fraction: None,
        copies_held_by_cwnd: counters.cwnd_holds.map(|h| h.sent),
        copy_cwnd_wait_ms: counters
            .cwnd_holds
            .filter(|h| h.sent > 0)
            .map(|h| ms(h.wait) / h.sent as f64),
        held_copies_dropped: counters.cwnd_holds.map(|h| h.dropped),
        app_error: None,
        irt_ms: mean(&multi),
        irt_p95_ms: percentile(&multi, 0.95),
        retran_ratio: ratio(
            counters.packets_retransmitted + counters.packets_copies + counters.packets_repair,
            counters.packets_sent(),
        ),
        retran_ratio_added: None,
        repair_packets: (counters.packets_repair > 0).then_some(counters.packets_repair),
        fec_recovered_packets: counters.fec_recovered.map(|(p, _)| p),
        fec_recovered_bytes: counters.fec_recovered.map(|(_, b)| b),
        frames_sent: None,
        frames_skipped_rate: None,
        lossy_frame_rate: None,
        loss_affected_frame_rate: None,
        frames_over_deadline_rate: None,
        frame_delay_ms: None,
        frame_delay_p90_ms: None,
        frame_propagation_ms: None,
        frame_queuing_ms: None,
        frame_recovery_ms: None,
        frame_recovery_lossy_ms: None,
        frame_recovery_lossy_p90_ms: None,
        encoder_bitrate_mbps: None,
        lbbc_signals: None,
        viewer_frame_delay_ms: None,
        viewer_frame_delay_p90_ms: None,
        viewer_frames_over_deadline_rate: None,
        rate_limited_rate: counters
            .packets_rate_limited
            .and_then(|(on, _)| ratio(on, counters.packets_sent())),
        rate_limit_binding_rate: counters
            .packets_rate_limited
            .and_then(|(_, binding)| ratio(binding, counters.packets_sent())),
        vod_bitrate_kbps: None,
        rebuffers: None,
        rebuffer_s: None,
        bitrate_switches: None,
        segments_incomplete: None,
        fct_p50_ms: None,
        object_delay_ms: None,
        object_delay_p95_ms: None,
        objects_late: None,
        objects_dropped: None,
    };
    match app {
        Some(AppOutcome::Live(o)) => {
            let session = o.session.as_secs_f64();
            if session > 0.0 {
                row.freezes_per_100s = Some(o.freezes as f64 * 100.0 / session);
                row.frozen_ms_per_100s = Some(ms(o.frozen) * 100.0 / session);
            }
            row.startup_delay_ms = o.startup_delay.map(ms);
            row.app_error = o.error.as_ref().map(ToString::to_string);
        }
        Some(AppOutcome::Transfer(o)) => {
            let fct = sorted(o.fct.iter().copied().map(ms).collect());
            row.fct_ms = mean(&fct);
            row.fct_p50_ms = percentile(&fct, 0.5);
            row.fct_p95_ms = percentile(&fct, 0.95);
            row.fct_max_ms = fct.last().copied();
            row.transfers_incomplete = Some(o.expected.saturating_sub(fct.len() as u64));
            row.app_error = o.error.as_ref().map(ToString::to_string);
        }
        Some(AppOutcome::Rtc(o)) => {
            row.deadline_miss_rate = ratio(
                o.frames_due - o.frames_on_time.min(o.frames_due),
                o.frames_due,
            );
            let playback = o.playback.as_secs_f64();
            row.frozen_fraction = (playback > 0.0).then(|| o.frozen.as_secs_f64() / playback);
            row.video_frozen_fraction =
                (playback > 0.0).then(|| o.frozen_webrtc.as_secs_f64() / playback);
            row.app_error = o.error.as_ref().map(ToString::to_string);
        }
        Some(AppOutcome::Moq(o)) => {
            row.deadline_miss_rate = ratio(
                o.objects_due - o.objects_on_time.min(o.objects_due),
                o.objects_due,
            );
            let delays = sorted(o.delays_ms.clone());
            row.object_delay_ms = mean(&delays);
            row.object_delay_p95_ms = percentile(&delays, 0.95);
            row.objects_late = Some(o.objects_late);
            row.objects_dropped = Some(o.objects_dropped);
            row.app_error = o.error.as_ref().map(ToString::to_string);
        }
        Some(AppOutcome::Gaming(o)) => gaming_columns(&mut row, o, None),
        Some(AppOutcome::GamingViewer(o)) => {
            row.viewer_frame_delay_ms = mean(&o.delays_ms);
            row.viewer_frame_delay_p90_ms = percentile(&sorted(o.delays_ms.clone()), 0.9);
            row.app_error = o.error.as_ref().map(ToString::to_string);
        }
        Some(AppOutcome::Vod(o)) => {
            row.vod_bitrate_kbps = o.mean_bitrate.map(|b| b / 1e3);
            row.rebuffers = Some(u64::from(o.rebuffers));
            row.rebuffer_s = Some(o.rebuffer_time.as_secs_f64());
            row.bitrate_switches = Some(u64::from(o.switches));
            row.segments_incomplete =
                Some(u64::from(o.segments - o.segments_received.min(o.segments)));
            row.startup_delay_ms = o.startup_delay.map(ms);
            row.app_error = o.error.as_ref().map(ToString::to_string);
        }
        None => {}
    }
    row
}

/// Fills the cloud-gaming sender's columns (LADR's frame metrics), and with the `viewer`'s
/// outcome its share of frames over the deadline.
pub fn gaming_columns(row: &mut RunRow, o: &GamingOutcome, viewer: Option<&GamingViewerOutcome>) {
    if let Some(v) = viewer {
        let missing = o.frames.saturating_sub(v.frames);
        row.viewer_frames_over_deadline_rate = ratio(v.frames_over_deadline + missing, o.frames);
    }
    let delays = sorted(o.delays_ms.clone());
    let recovery = sorted(o.recovery_lossy_ms.clone());
    row.frames_sent = Some(o.frames);
    row.frames_skipped_rate = ratio(o.frames_skipped, o.frames + o.frames_skipped);
    row.lossy_frame_rate = ratio(o.lossy_frames, o.frames);
    row.loss_affected_frame_rate = ratio(o.loss_affected_frames, o.frames);
    row.frames_over_deadline_rate = ratio(o.frames_over_deadline, o.frames);
    row.frame_delay_ms = mean(&delays);
    row.frame_delay_p90_ms = percentile(&delays, 0.9);
    row.frame_propagation_ms = o.propagation_ms;
    row.frame_queuing_ms = o.queuing_ms;
    row.frame_recovery_ms = o.recovery_ms;
    row.frame_recovery_lossy_ms = mean(&recovery);
    row.frame_recovery_lossy_p90_ms = percentile(&recovery, 0.9);
    row.encoder_bitrate_mbps = o.mean_bitrate_mbps;
    row.lbbc_signals = Some(o.lbbc_signals);
}

/// Sets the columns measured against the `baseline` policy's row with the same seed:
/// `goodput_reduction = 1 - goodput / goodput_baseline` and
/// `retran_ratio_added = retran_ratio - retran_ratio_baseline`. Each stays `None` without such a
/// row or when either value is unknown (or the baseline's goodput is zero).
pub fn fill_baseline_columns(rows: &mut [RunRow], baseline: &str) {
    let base: Vec<(u64, Option<f64>, Option<f64>)> = rows
        .iter()
        .filter(|r| r.policy == baseline)
        .map(|r| (r.seed, r.goodput_mbps, r.retran_ratio))
        .collect();
    for row in rows.iter_mut() {
        let b = base.iter().find(|(s, _, _)| *s == row.seed);
        row.goodput_reduction = match (row.goodput_mbps, b.and_then(|b| b.1)) {
            (Some(g), Some(b)) if b > 0.0 => Some(1.0 - g / b),
            _ => None,
        };
        row.retran_ratio_added = row
            .retran_ratio
            .zip(b.and_then(|b| b.2))
            .map(|(r, b)| r - b);
    }
}

impl RunRow {
    /// The numeric columns, in column order, for aggregation (`seed` excluded).
    #[must_use]
    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        let n = |v: u64| Some(v as f64);
        vec![
            ("lost_ranges", n(self.lost_ranges)),
            ("t_unit_ms", self.t_unit_ms),
            ("recovery_latency_ms", self.recovery_latency_ms),
            ("recovery_latency_p95_ms", self.recovery_latency_p95_ms),
            ("recovery_latency_max_ms", self.recovery_latency_max_ms),
            ("recovery_latency_multi_ms", self.recovery_latency_multi_ms),
            ("deterioration_rate", self.deterioration_rate),
            ("redundancy_cost", self.redundancy_cost),
            ("copies_sent", n(self.copies_sent)),
            ("goodput_mbps", self.goodput_mbps),
            ("goodput_reduction", self.goodput_reduction),
            ("loss_rate", self.loss_rate),
            ("n_max", n(u64::from(self.n_max))),
            ("k_max", n(u64::from(self.k_max))),
            ("fct_ms", self.fct_ms),
            ("freezes_per_100s", self.freezes_per_100s),
            ("frozen_ms_per_100s", self.frozen_ms_per_100s),
            ("deadline_miss_rate", self.deadline_miss_rate),
            ("bandwidth_cost", self.bandwidth_cost),
            ("lost_ranges_multi", n(self.lost_ranges_multi)),
            (
                "recovery_latency_multi_p95_ms",
                self.recovery_latency_multi_p95_ms,
            ),
            (
                "recovery_latency_multi_max_ms",
                self.recovery_latency_multi_max_ms,
            ),
            ("packets_sent", n(self.packets_sent)),
            ("retransmissions_sent", n(self.retransmissions_sent)),
            ("fct_p95_ms", self.fct_p95_ms),
            ("fct_max_ms", self.fct_max_ms),
            (
                "transfers_incomplete",
                self.transfers_incomplete.map(|v| v as f64),
            ),
            ("startup_delay_ms", self.startup_delay_ms),
            ("frozen_fraction", self.frozen_fraction),
            ("video_frozen_fraction", self.video_frozen_fraction),
            ("irt_ms", self.irt_ms),
            ("irt_p95_ms", self.irt_p95_ms),
            ("retran_ratio", self.retran_ratio),
            ("retran_ratio_added", self.retran_ratio_added),
            ("repair_packets", self.repair_packets.map(|v| v as f64)),
            (
                "fec_recovered_packets",
                self.fec_recovered_packets.map(|v| v as f64),
            ),
            (
                "fec_recovered_bytes",
                self.fec_recovered_bytes.map(|v| v as f64),
            ),
            (
                "copies_held_by_cwnd",
                self.copies_held_by_cwnd.map(|v| v as f64),
            ),
            ("copy_cwnd_wait_ms", self.copy_cwnd_wait_ms),
            (
                "held_copies_dropped",
                self.held_copies_dropped.map(|v| v as f64),
            ),
            ("frames_sent", self.frames_sent.map(|v| v as f64)),
            ("frames_skipped_rate", self.frames_skipped_rate),
            ("lossy_frame_rate", self.lossy_frame_rate),
            ("loss_affected_frame_rate", self.loss_affected_frame_rate),
            ("frames_over_deadline_rate", self.frames_over_deadline_rate),
            ("frame_delay_ms", self.frame_delay_ms),
            ("frame_delay_p90_ms", self.frame_delay_p90_ms),
            ("frame_propagation_ms", self.frame_propagation_ms),
            ("frame_queuing_ms", self.frame_queuing_ms),
            ("frame_recovery_ms", self.frame_recovery_ms),
            ("frame_recovery_lossy_ms", self.frame_recovery_lossy_ms),
            (
                "frame_recovery_lossy_p90_ms",
                self.frame_recovery_lossy_p90_ms,
            ),
            ("encoder_bitrate_mbps", self.encoder_bitrate_mbps),
            ("lbbc_signals", self.lbbc_signals.map(|v| v as f64)),
            ("viewer_frame_delay_ms", self.viewer_frame_delay_ms),
            ("viewer_frame_delay_p90_ms", self.viewer_frame_delay_p90_ms),
            (
                "viewer_frames_over_deadline_rate",
                self.viewer_frames_over_deadline_rate,
            ),
            ("rate_limited_rate", self.rate_limited_rate),
            ("rate_limit_binding_rate", self.rate_limit_binding_rate),
            ("vod_bitrate_kbps", self.vod_bitrate_kbps),
            ("rebuffers", self.rebuffers.map(|v| v as f64)),
            ("rebuffer_s", self.rebuffer_s),
            ("bitrate_switches", self.bitrate_switches.map(|v| v as f64)),
            (
                "segments_incomplete",
                self.segments_incomplete.map(|v| v as f64),
            ),
            ("fct_p50_ms", self.fct_p50_ms),
            ("object_delay_ms", self.object_delay_ms),
            ("object_delay_p95_ms", self.object_delay_p95_ms),
            ("objects_late", self.objects_late.map(|v| v as f64)),
            ("objects_dropped", self.objects_dropped.map(|v| v as f64)),
        ]
    }
}

/// One metric of one policy aggregated over its runs (seeds, repetitions). Statistics over no
/// values are `None`; the confidence interval needs two values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    pub policy: String,
    pub metric: String,
    /// Runs with a value for this metric.
    pub n: u64,
    pub mean: Option<f64>,
    /// Sample standard deviation.
    pub std: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    /// 95 % confidence interval of the mean (Student's t).
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t quantile for `df` degrees of freedom; beyond the table, the value of the next smaller
/// tabulated df (conservative).
fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::NAN,
        1..=30 => T_975[df - 1],
        31..=39 => 2.042,
        40..=59 => 2.021,
        60..=119 => 2.000,
        120..=999 => 1.980,
        _ => 1.960,
    }
}

/// Aggregates `values` (any order).
fn summary(policy: &str, metric: &str, values: Vec<f64>) -> SummaryRow {
    let v = sorted(values);
    let n = v.len();
    let m = mean(&v);
    let std = m
        .filter(|_| n >= 2)
        .map(|m| (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64).sqrt());
    let half = std.map(|s| t_975(n - 1) * s / (n as f64).sqrt());
    SummaryRow {
        policy: policy.to_owned(),
        metric: metric.to_owned(),
        n: n as u64,
        mean: m,
        std,
        p50: percentile(&v, 0.5),
        p95: percentile(&v, 0.95),
        p99: percentile(&v, 0.99),
        ci95_low: m.zip(half).map(|(m, h)| m - h),
        ci95_high: m.zip(half).map(|(m, h)| m + h),
    }
}

/// Per policy (in order of first appearance) and metric (in column order): the runs' non-empty
/// values, sorted.
#[must_use]
pub fn metric_values(rows: &[RunRow]) -> Vec<(String, &'static str, Vec<f64>)> {
    let mut policies: Vec<&str> = Vec::new();
    for r in rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let mut out = Vec::new();
    for policy in policies {
        let runs: Vec<Vec<(&'static str, Option<f64>)>> = rows
            .iter()
            .filter(|r| r.policy == policy)
            .map(RunRow::metrics)
            .collect();
        let Some(first) = runs.first() else { continue };
        for (i, (metric, _)) in first.iter().enumerate() {
            let values = runs.iter().filter_map(|m| m[i].1).collect();
            out.push((policy.to_owned(), *metric, sorted(values)));
        }
    }
    out
}

/// Per policy (in order of first appearance) and metric (in column order): statistics over the
/// runs' non-empty values.
#[must_use]
pub fn summarize(rows: &[RunRow]) -> Vec<SummaryRow> {
    metric_values(rows)
        .into_iter()
        .map(|(policy, metric, values)| summary(&policy, metric, values))
        .collect()
}

/// Writes `rows` as CSV with a header line (`None` is an empty cell).
/// One lost data range of a run's sender (`recoup run --losses`): where it sits in the stream,
/// its times (ms of simulated time since the run's start) and its retransmission rounds and
/// sends, as [`Recovered`] holds them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossRecord {
    pub stream: u64,
    /// Stream offsets `[start, end)`.
    pub start: u64,
    pub end: u64,
    pub first_sent_ms: f64,
    pub first_detected_ms: f64,
    /// The first ARQ retransmission, if one went out.
    pub first_retransmit_sent_ms: Option<f64>,
    /// The send of the earliest copy the receiver got.
    pub recovered_by_sent_ms: f64,
    /// When the acknowledgement that completed the range arrived.
    pub completed_ms: f64,
    /// Retransmission rounds N (ART §5.1).
    pub rounds: u32,
    /// Retransmissions and copies sent (K).
    pub sends: u32,
    pub copies: u32,
    pub first_retransmit_arrived: bool,
    pub recovery_latency_ms: f64,
}

impl From<&Recovered> for LossRecord {
    fn from(r: &Recovered) -> Self {
        Self {
            stream: r.range.stream,
            start: r.range.start,
            end: r.range.end,
            first_sent_ms: r.first_sent.as_millis_f64(),
            first_detected_ms: r.first_detected.as_millis_f64(),
            first_retransmit_sent_ms: r.first_retransmit_sent.map(|t| t.as_millis_f64()),
            recovered_by_sent_ms: r.recovered_by_sent.as_millis_f64(),
            completed_ms: r.completed.as_millis_f64(),
            rounds: r.rounds,
            sends: r.sends,
            copies: r.copies,
            first_retransmit_arrived: r.first_retransmit_arrived,
            recovery_latency_ms: ms(r.recovery_latency()),
        }
    }
}

pub fn write_csv<T: Serialize>(rows: &[T], out: impl io::Write) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use recoup_apps::live::LiveOutcome;
    use recoup_apps::rtc::RtcOutcome;
    use recoup_apps::transfer::TransferOutcome;
    use recoup_recovery::DataRange;
    use recoup_time::Instant;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[expect(clippy::too_many_arguments, reason = "one row of a hand-built table")]
    /// A range first sent at `sent`, detected lost and retransmitted at `detected`; recovered by
    /// a send at `by` (acknowledged at `by + 30`); `arrived`: the first retransmission arrived.
    fn range(
        id: u64,
        sent: u64,
        detected: u64,
        by: u64,
        rounds: u32,
        sends: u32,
        copies: u32,
        arrived: bool,
    ) -> Recovered {
        Recovered {
            id,
            range: DataRange {
                stream: 0,
                start: id * 1000,
                end: id * 1000 + 1000,
            },
            first_sent: at(sent),
            first_detected: at(detected),
            first_retransmit_sent: Some(at(detected)),
            recovered_by_sent: at(by),
            completed: at(by + 30),
            rounds,
            sends,
            copies,
            first_retransmit_arrived: arrived,
        }
    }

    fn counters() -> RunCounters {
        RunCounters {
            duration: Duration::from_secs(10),
            packets_new: 1000,
            packets_retransmitted: 30,
            packets_copies: 70,
            bytes_new: 1_000_000,
            bytes_retransmitted: 30_000,
            bytes_copies: 70_000,
            packets_lost: 55,
            goodput_bytes: 5_000_000,
            cwnd_holds: None,
            ..RunCounters::default()
        }
    }

    #[test]
    fn fec_repair_counts_as_redundancy_and_restored_data_is_reported() {
        let c = RunCounters {
            packets_repair: 100,
            bytes_repair: 100_000,
            fec_recovered: Some((40, 48_000)),
            ..counters()
        };
        let row = run_row("block", 1, &[], &c, None);
        assert!(close(row.redundancy_cost, (70.0 + 100.0) / 1000.0));
        assert!(close(
            row.bandwidth_cost,
            (30_000.0 + 70_000.0 + 100_000.0) / 1_200_000.0
        ));
        assert!(close(row.retran_ratio, (30.0 + 70.0 + 100.0) / 1200.0));
        assert_eq!(row.packets_sent, 1200);
        assert_eq!(row.copies_sent, 70, "copies stay copies");
        assert_eq!(
            (
                row.repair_packets,
                row.fec_recovered_packets,
                row.fec_recovered_bytes
            ),
            (Some(100), Some(40), Some(48_000))
        );
        let plain = run_row("arq", 1, &[], &counters(), None);
        assert_eq!(
            (plain.repair_packets, plain.fec_recovered_packets),
            (None, None),
            "no FEC columns without FEC"
        );
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn autorec_worked_example_gives_fifty_percent() {
        // AutoRec §VII with Fig. 7: packet (a) is detected lost at t3 and its retransmission
        // arrives (one T_unit); packet (b)'s retransmission at t3 is lost too, and the one sent
        // at t6 = t3 + T_unit arrives (two T_unit). D_k = 1 of 2 lost: 50 %.
        let a = range(0, 0, 100, 100, 1, 1, 0, true);
        let b = range(1, 0, 100, 200, 2, 2, 0, false);
        let row = run_row("arq", 1, &[a, b], &counters(), None);
        assert_eq!(row.lost_ranges, 2);
        assert!(close(row.deterioration_rate, 0.5));
        assert!(close(row.t_unit_ms, 100.0));
        // Recovery latency: 0 for (a), t6 - t3 = 100 ms for (b).
        assert!(close(row.recovery_latency_ms, 50.0));
        assert!(close(row.recovery_latency_max_ms, 100.0));
        assert!(close(row.recovery_latency_p95_ms, 95.0));
        assert!(close(row.recovery_latency_multi_ms, 100.0));
        assert_eq!(row.lost_ranges_multi, 1);
        assert_eq!((row.n_max, row.k_max), (2, 2));
    }

    #[test]
    fn a_copy_that_arrives_within_t_unit_is_no_deterioration() {
        // The first retransmission is lost but a copy sent 40 ms after detection arrives:
        // latency 40 ms < T_unit 100 ms.
        let r = range(0, 0, 100, 140, 1, 2, 1, false);
        let row = run_row("autorec", 1, &[r], &counters(), None);
        assert!(close(row.recovery_latency_ms, 40.0));
        assert!(close(row.deterioration_rate, 0.0));
    }

    #[test]
    fn per_run_ratios_follow_the_definitions() {
        let row = run_row("or3", 3, &[], &counters(), None);
        assert!(close(row.redundancy_cost, 0.07));
        assert_eq!(row.copies_sent, 70);
        assert!(close(row.bandwidth_cost, 100_000.0 / 1_100_000.0));
        assert!(close(row.goodput_mbps, 4.0));
        assert!(close(row.loss_rate, 0.05));
        assert_eq!(row.packets_sent, 1100);
        let mut rows = vec![
            run_row("arq", 3, &[], &counters(), None),
            row,
            run_row("or3", 4, &[], &counters(), None),
        ];
        rows[1].goodput_mbps = Some(3.0);
        fill_baseline_columns(&mut rows, "arq");
        assert!(close(rows[0].goodput_reduction, 0.0));
        assert!(close(rows[1].goodput_reduction, 0.25));
        assert_eq!(rows[2].goodput_reduction, None, "no arq run on seed 4");
    }

    #[test]
    fn zero_loss_runs_have_no_nan() {
        let quiet = RunCounters {
            duration: Duration::from_secs(60),
            packets_new: 500,
            bytes_new: 600_000,
            goodput_bytes: 500_000,
            ..RunCounters::default()
        };
        let row = run_row("arq", 1, &[], &quiet, None);
        assert_eq!(row.lost_ranges, 0);
        assert_eq!(row.recovery_latency_ms, None);
        assert_eq!(row.recovery_latency_p95_ms, None);
        assert_eq!(row.deterioration_rate, None);
        assert_eq!(row.t_unit_ms, None);
        assert!(close(row.redundancy_cost, 0.0));
        assert!(close(row.bandwidth_cost, 0.0));
        assert!(close(row.loss_rate, 0.0));
        assert_eq!((row.n_max, row.k_max, row.copies_sent), (0, 0, 0));
        let empty = run_row("arq", 1, &[], &RunCounters::default(), None);
        for (name, v) in empty.metrics() {
            assert!(v.is_none_or(f64::is_finite), "{name} = {v:?}");
        }
        assert_eq!(empty.goodput_mbps, None);
        let mut csv = Vec::new();
        write_csv(&[empty], &mut csv).expect("csv");
        let text = String::from_utf8(csv).expect("utf8");
        assert!(!text.contains("NaN"), "{text}");
        let header = text.lines().next().expect("header");
        assert!(header.starts_with(
            "policy,seed,lost_ranges,t_unit_ms,recovery_latency_ms,recovery_latency_p95_ms,\
             recovery_latency_max_ms,recovery_latency_multi_ms,deterioration_rate,\
             redundancy_cost,copies_sent,goodput_mbps,goodput_reduction,loss_rate,n_max,k_max,\
             fct_ms,freezes_per_100s,frozen_ms_per_100s,deadline_miss_rate,bandwidth_cost,"
        ));
        assert!(text.lines().nth(1).expect("row").starts_with("arq,1,0,,,"));
    }

    #[test]
    fn every_copy_lost() {
        // fixed:2 — round 1 sends a retransmission and two copies, all lost; round 2's
        // retransmission (sent 100 ms after detection) arrives. Then a range whose copies of
        // rounds 1 and 2 are all lost, recovered in round 3.
        let a = range(0, 0, 100, 200, 2, 4, 2, false);
        let b = range(1, 0, 100, 300, 3, 7, 4, false);
        let mut c = counters();
        c.packets_copies = 6;
        let row = run_row("fixed", 1, &[a, b], &c, None);
        assert!(close(row.deterioration_rate, 1.0));
        assert!(close(row.recovery_latency_ms, 150.0));
        assert!(close(row.recovery_latency_multi_ms, 150.0));
        assert_eq!((row.n_max, row.k_max), (3, 7));
        assert!(close(row.redundancy_cost, 0.006));
    }

    #[test]
    fn application_outcomes_fill_their_columns() {
        let live = AppOutcome::Live(LiveOutcome {
            frames_received: 1800,
            frames_played: 1790,
            bytes_received: 1,
            startup_delay: Some(Duration::from_millis(1100)),
            freezes: 3,
            frozen: Duration::from_millis(900),
            session: Duration::from_secs(60),
            frame_delay_mean: None,
            frame_delay_max: None,
            ended: true,
            error: None,
        });
        let row = run_row("arq", 1, &[], &counters(), Some(&live));
        assert!(close(row.freezes_per_100s, 5.0));
        assert!(close(row.frozen_ms_per_100s, 1500.0));
        assert!(close(row.startup_delay_ms, 1100.0));
        assert_eq!(row.fct_ms, None);
        let file = AppOutcome::Transfer(TransferOutcome {
            expected: 3,
            fct: vec![Duration::from_millis(10), Duration::from_millis(30)],
            bytes_received: 0,
            error: Some(recoup_apps::FrameError::Protocol("bad".into())),
        });
        let row = run_row("arq", 1, &[], &counters(), Some(&file));
        assert!(close(row.fct_ms, 20.0));
        assert!(close(row.fct_p50_ms, 20.0));
        assert!(close(row.fct_max_ms, 30.0));
        assert_eq!(row.transfers_incomplete, Some(1));
        assert_eq!(row.app_error.as_deref(), Some("bad"));
        assert_eq!(row.freezes_per_100s, None);
        let rtc = AppOutcome::Rtc(RtcOutcome {
            frames_due: 200,
            frames_on_time: 190,
            frames_late: 4,
            freezes: 2,
            frozen: Duration::from_millis(10 * 50),
            playback: Duration::from_secs(10),
            frozen_webrtc: Duration::from_millis(300),
            error: None,
        });
        let row = run_row("arq", 1, &[], &counters(), Some(&rtc));
        assert!(close(row.deadline_miss_rate, 0.05));
        assert!(close(row.frozen_fraction, 0.05));
        assert!(close(row.video_frozen_fraction, 0.03));
    }

    #[test]
    fn irt_is_measured_over_data_that_needed_two_or_more_retransmissions() {
        // TOO §3: IRT runs from a loss's detection to the send of the recovery packet that is
        // received. (a): first retransmission arrives, not counted. (b): retransmission at 100
        // lost, the one at 160 arrives: 60 ms. (c): lost twice, recovered by the third send at
        // 400: 300 ms. (d): a copy sent 20 ms after detection arrives while the retransmission
        // is lost: 20 ms.
        let lineage = [
            range(0, 0, 100, 100, 1, 1, 0, true),
            range(1, 0, 100, 160, 2, 2, 0, false),
            range(2, 0, 100, 400, 3, 3, 0, false),
            range(3, 50, 150, 170, 1, 2, 1, false),
        ];
        let mut c = counters();
        c.packets_new = 900;
        c.packets_retransmitted = 60;
        c.packets_copies = 40;
        let row = run_row("too", 1, &lineage, &c, None);
        assert_eq!(row.lost_ranges_multi, 3);
        assert!(close(row.irt_ms, (60.0 + 300.0 + 20.0) / 3.0));
        // p95 of [20, 60, 300]: rank 1.9 between 60 and 300.
        assert!(close(row.irt_p95_ms, 60.0 + 0.9 * 240.0));
        assert_eq!(row.irt_ms, row.recovery_latency_multi_ms);
        assert_eq!(row.irt_p95_ms, row.recovery_latency_multi_p95_ms);
        // retran_ratio: 100 of 1000 packets were not first transmissions.
        assert!(close(row.retran_ratio, 0.1));
        let mut rows = vec![run_row("arq", 1, &[], &counters(), None), row];
        fill_baseline_columns(&mut rows, "arq");
        // arq's counters: 100 of 1100 packets.
        assert!(close(rows[1].retran_ratio_added, 0.1 - 100.0 / 1100.0));
        assert!(close(rows[0].retran_ratio_added, 0.0));
        let none = run_row("arq", 1, &lineage[..1], &c, None);
        assert_eq!((none.irt_ms, none.irt_p95_ms), (None, None));
    }

    #[test]
    fn goodput_of_a_finished_transfer_is_bytes_over_its_completion_time() {
        // 200 MB at 100 Mbit/s completes after about 17.4 s of a 60 s run.
        // bytes / duration would say 26.7 Mbit/s; bytes / (completion - start) says 92.
        let done = AppOutcome::Transfer(TransferOutcome {
            expected: 1,
            fct: vec![Duration::from_millis(17_300)],
            bytes_received: 200_000_000,
            error: None,
        });
        let run = Duration::from_secs(60);
        let last = Duration::from_millis(17_400);
        let window = goodput_window(run, last, Some(&done));
        assert_eq!(window, last);
        let c = RunCounters {
            duration: window,
            goodput_bytes: 200_000_000,
            ..counters()
        };
        let row = run_row("arq", 1, &[], &c, Some(&done));
        let g = row.goodput_mbps.expect("goodput");
        assert!((g - 1600.0 / 17.4).abs() < 1e-9, "goodput {g} Mbit/s");
        // Unfinished transfers and live streams are measured over the run (or its drain).
        let unfinished = AppOutcome::Transfer(TransferOutcome {
            expected: 2,
            fct: vec![Duration::from_millis(17_300)],
            bytes_received: 200_000_000,
            error: None,
        });
        assert_eq!(goodput_window(run, last, Some(&unfinished)), run);
        assert_eq!(goodput_window(run, last, None), run);
        let late = Duration::from_millis(61_000);
        assert_eq!(goodput_window(run, late, Some(&unfinished)), late);
    }

    #[test]
    fn percentiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&v, 0.5), Some(3.0));
        assert_eq!(percentile(&v, 0.95), Some(4.8));
        assert_eq!(percentile(&v, 1.0), Some(5.0));
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn summary_over_seeds() {
        let mut rows = Vec::new();
        for (seed, latency) in [(1u64, 10.0), (2, 20.0), (3, 30.0), (4, 40.0)] {
            let mut r = run_row("autorec", seed, &[], &counters(), None);
            r.recovery_latency_ms = Some(latency);
            rows.push(r);
        }
        rows.push(run_row("arq", 1, &[], &counters(), None));
        let s = summarize(&rows);
        let get = |p: &str, m: &str| {
            s.iter()
                .find(|r| r.policy == p && r.metric == m)
                .expect("row")
                .clone()
        };
        let lat = get("autorec", "recovery_latency_ms");
        assert_eq!(lat.n, 4);
        assert!(close(lat.mean, 25.0));
        assert!(close(lat.p50, 25.0));
        assert!(close(lat.p95, 38.5));
        // s = 12.9099..., t(3) = 3.182: half-width 20.540...
        let half = 3.182 * (500.0f64 / 3.0).sqrt() / 2.0;
        assert!(close(lat.ci95_low, 25.0 - half));
        assert!(close(lat.ci95_high, 25.0 + half));
        // One run: no spread, no interval; no values: all None.
        let one = get("arq", "goodput_mbps");
        assert_eq!((one.n, one.std, one.ci95_low), (1, None, None));
        let none = get("arq", "recovery_latency_ms");
        assert_eq!((none.n, none.mean, none.p50), (0, None, None));
        assert_eq!(s.first().map(|r| r.policy.as_str()), Some("autorec"));
        let mut csv = Vec::new();
        write_csv(&s, &mut csv).expect("csv");
        assert!(String::from_utf8(csv)
            .expect("utf8")
            .starts_with("policy,metric,n,mean,std,p50,p95,p99,ci95_low,ci95_high\n"));
    }
}
