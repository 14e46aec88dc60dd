//! A closed loop for controller tests: a sender with loss detection, a controller and a pacer over
//! one bottleneck, driven on virtual time the way the connection drives them
//! (`connection/recovery.rs`): losses before acknowledgements, each loss that signals congestion
//! counted by the rate sampler and handed to the controller.

use std::collections::VecDeque;
use std::time::Duration;

use recoup_time::Instant;

use super::{AckEvent, AckedPacket, CongestionController, LostPacket};
use crate::loss::{LossConfig, LossDetection, LossReport, SentPacket, SpaceId, TimeoutOutcome};
use crate::pacing::Pacer;

/// The datagram size of every packet of the loop.
pub(super) const MDS: u64 = 1200;

/// What the sender has to send: always something (bulk), or frames of `frame` bytes every
/// `interval` (an application-limited live stream).
#[derive(Clone, Copy, Debug)]
pub(super) enum Source {
    Bulk,
    Frames { frame: u64, interval: Duration },
}

/// The bottleneck: `rate` bytes/s behind an unlimited queue, a base RTT of `base_rtt`, and each
/// packet dropped before the queue with probability `loss` (drawn from `seed`). Acknowledgements
/// come back one per packet and are never lost.
#[derive(Clone, Copy, Debug)]
pub(super) struct Path {
    pub rate: u64,
    pub base_rtt: Duration,
    pub loss: f64,
    pub seed: u64,
}

impl Path {
    /// A lossless path.
    pub(super) fn lossless(rate: u64, base_rtt: Duration) -> Self {
        Self {
            rate,
            base_rtt,
            loss: 0.0,
            seed: 0,
        }
    }
}

/// What a run measured after its settling time.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Run {
    /// The largest RTT sample.
    pub max_rtt: Duration,
    /// The mean of the RTT samples.
    pub mean_rtt: Duration,
    /// Bytes acknowledged.
    pub delivered: u64,
    /// Packets declared lost over the whole run.
    pub packets_lost: u64,
}

/// A uniform draw in [0, 1) from a splitmix64 stream.
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as f64 / (u64::MAX as f64 + 1.0)
}

/// Hands a loss report to the controller as the connection does (`process_losses`).
fn report_losses<C: CongestionController>(
    cc: &mut C,
    ld: &mut LossDetection<()>,
    now: Instant,
    losses: &LossReport<()>,
) -> u64 {
    for l in losses.lost.iter().filter(|l| l.packet.in_flight) {
        let bytes = l.packet.size as u64;
        ld.on_congestion_loss(bytes);
        cc.on_packet_lost(
            now,
            &LostPacket {
                time_sent: l.packet.time_sent,
                bytes,
                rate: l.packet.rate,
                lost_total: ld.delivery_rate().lost(),
            },
        );
    }
    if let Some((newest, bytes)) = losses.congestion_signal() {
        cc.on_congestion_event(now, newest, bytes, losses.persistent_congestion, ld.rtt());
    }
    losses.lost.len() as u64
}

/// Runs `cc` over `path` from time zero until `until`, measuring from `settle` on.
pub(super) fn closed_loop<C: CongestionController>(
    cc: &mut C,
    path: Path,
    until: Instant,
    settle: Instant,
    source: Source,
) -> Run {
    let mut ld = LossDetection::<()>::new(LossConfig {
        server: true,
        ..LossConfig::default()
    });
    let mut pacer = Pacer::new(MDS, 10, Instant::ZERO);
    let mut acks: VecDeque<(Instant, u64)> = VecDeque::new();
    let mut link_free = Instant::ZERO;
    let service = Duration::from_nanos(MDS * 1_000_000_000 / path.rate);
    let mut rng = path.seed;
    let mut now = Instant::ZERO;
    let mut pn = 0;
    let mut run = Run::default();
    let (mut rtt_sum, mut rtt_samples) = (Duration::ZERO, 0u32);
    // Packets a probe timeout lets leave beyond the window (RFC 9002 §6.2.4).
    let mut probes = 0u8;
    // Bytes the application has handed over and not yet sent, and its next frame.
    let mut backlog = 0;
    let mut next_frame = Some(Instant::ZERO);
    while now < until {
        if let (Source::Frames { frame, interval }, Some(at)) = (source, next_frame) {
            if at <= now {
                backlog += frame;
                next_frame = Some(at + interval);
            }
        }
        let has_data = matches!(source, Source::Bulk) || backlog > 0;
        if !has_data {
            ld.on_app_limited();
        }
        let window_open = ld.bytes_in_flight() + MDS <= cc.window() || probes > 0;
        let send_at = if has_data && window_open {
            let srtt = ld.rtt().smoothed();
            let at = pacer.next_send_time(now, cc.window(), srtt, cc.pacing_rate(), MDS);
            Some(at.unwrap_or(now))
        } else {
            None
        };
        let ack_at = acks.front().map(|&(t, _)| t);
        let timer_at = ld.timeout();
        let frame_at = next_frame.filter(|_| matches!(source, Source::Frames { .. }));
        // The earliest event; ties go to the acknowledgement, then sending, then the timer, and
        // a frame waits for them.
        let earliest = [send_at, ack_at, timer_at, frame_at]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or_else(|| panic!("stalled at {now:?}: nothing to send and nothing in flight"));
        if send_at == Some(earliest) && ack_at != Some(earliest) {
            now = earliest;
            let in_flight = ld.bytes_in_flight();
            let p = SentPacket::new(pn, now, MDS as usize, true, true, ());
            assert!(ld.on_packet_sent(SpaceId::Data, p, now).is_none());
            cc.on_packet_sent(now, MDS, in_flight);
            pacer.on_sent(now, MDS);
            backlog = backlog.saturating_sub(MDS);
            probes = probes.saturating_sub(1);
            if path.loss == 0.0 || uniform(&mut rng) >= path.loss {
                link_free = link_free.max(now + path.base_rtt / 2) + service;
                acks.push_back((link_free + path.base_rtt / 2, pn));
            }
            pn += 1;
        } else if ack_at == Some(earliest) {
            now = earliest;
            let Some((_, acked_pn)) = acks.pop_front() else {
                break;
            };
            let out = ld
                .on_ack_received(SpaceId::Data, &[acked_pn..=acked_pn], Duration::ZERO, now)
                .expect("valid ack");
            // RFC 9002 Appendix A.7: congestion control hears of the losses first.
            run.packets_lost += report_losses(cc, &mut ld, now, &out.losses);
            let acked = AckedPacket::in_flight_of(&out.acked);
            if now > settle {
                let rtt = ld.rtt().latest();
                run.max_rtt = run.max_rtt.max(rtt);
                rtt_sum += rtt;
                rtt_samples += 1;
                run.delivered += acked.iter().map(|p| p.bytes).sum::<u64>();
            }
            cc.on_ack(&AckEvent {
                now,
                acked: &acked,
                rate_sample: out.rate_sample.as_ref(),
                rtt: ld.rtt(),
                rtt_sampled: out.rtt_updated,
                prior_in_flight: out.prior_bytes_in_flight,
                in_flight: ld.bytes_in_flight(),
                app_limited: !has_data,
                lost_total: ld.delivery_rate().lost(),
            });
        } else if timer_at == Some(earliest) {
            now = earliest;
            match ld.on_timeout(now) {
                TimeoutOutcome::Lost { losses, .. } => {
                    run.packets_lost += report_losses(cc, &mut ld, now, &losses);
                }
                TimeoutOutcome::Probe { count, .. } => probes = count,
                TimeoutOutcome::NotDue => {}
            }
        } else {
            now = earliest;
        }
    }
    if rtt_samples > 0 {
        run.mean_rtt = rtt_sum / rtt_samples;
    }
    run
}
