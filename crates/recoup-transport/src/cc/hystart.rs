//! HyStart++ (RFC 9406): slow start that watches the RTT of each round, moves to Conservative
//! Slow Start (CSS) when it grows, and to congestion avoidance after a few rounds of CSS, so the
//! first slow start ends before it overshoots the path by a full window. CUBIC and NewReno use
//! it in their initial slow start.
//!
//! quiche's CUBIC runs HyStart++ too. quic-go (`internal/congestion/hybrid_slow_start.go`,
//! called from `sent_packet_handler.go:420`, commit 2cfe6ee) and Linux's CUBIC run the older
//! HyStart of Ha and Rhee, which leaves slow start for congestion avoidance at once on the
//! delay increase, with no CSS to recover from a false exit.

use std::time::Duration;

use recoup_time::Instant;

use super::AckEvent;

/// RFC 9406 §4.3: the bounds of the RTT increase that ends slow start.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// RFC 9406 §4.3: the RTT increase threshold is the last round's minimum RTT over this.
const MIN_RTT_DIVISOR: u32 = 8;
/// RFC 9406 §4.3: RTT samples a round needs before its minimum is compared.
const N_RTT_SAMPLE: u32 = 8;
/// RFC 9406 §4.3: CSS grows the window this many times slower than slow start.
const CSS_GROWTH_DIVISOR: u64 = 4;
/// RFC 9406 §4.3: rounds of CSS before congestion avoidance.
pub(crate) const CSS_ROUNDS: u32 = 5;
/// RFC 9406 §4.3: L, the datagrams one ACK may grow the window by, for a sender that does not
/// pace; "A paced TCP implementation SHOULD use L = infinity".
const NON_PACED_L: u64 = 8;

/// The HyStart++ state of one slow start.
#[derive(Clone, Debug)]
pub struct HyStart {
    /// L in datagrams; `None` is infinity (a paced sender).
    limit: Option<u64>,
    /// RFC 9406 §4.2 windowEnd, as the send time of the round's first packet: the round ends
    /// when a packet sent then or later is acknowledged (packet numbers grow with send time).
    /// `None` between the ACK that ended a round and the next packet sent.
    window_end: Option<Instant>,
    last_round_min_rtt: Option<Duration>,
    current_round_min_rtt: Option<Duration>,
    rtt_sample_count: u32,
    /// RFC 9406 §4.2 cssBaselineMinRtt; `Some` while in CSS.
    css_baseline_min_rtt: Option<Duration>,
    /// Rounds that ended in CSS, the one CSS began in included (RFC 9406 §4.2).
    css_rounds: u32,
}

impl HyStart {
    /// `paced`: the sender paces its packets (RFC 9406 §4.3 L).
    #[must_use]
    pub fn new(paced: bool) -> Self {
        Self {
            limit: (!paced).then_some(NON_PACED_L),
            window_end: None,
            last_round_min_rtt: None,
            current_round_min_rtt: None,
            rtt_sample_count: 0,
            css_baseline_min_rtt: None,
            css_rounds: 0,
        }
    }

    /// Whether slow start is conservative (RFC 9406 §4.2 CSS).
    #[must_use]
    pub fn in_css(&self) -> bool {
        self.css_baseline_min_rtt.is_some()
    }

    /// A packet left at `now`. The first after a round ended starts the next round, whose
    /// minimum RTT starts over (RFC 9406 §4.2: "lastRoundMinRTT = currentRoundMinRTT;
    /// currentRoundMinRTT = infinity; rttSampleCount = 0").
    pub fn on_packet_sent(&mut self, now: Instant) {
        if self.window_end.is_none() {
            self.window_end = Some(now);
            self.last_round_min_rtt = self.current_round_min_rtt;
            self.current_round_min_rtt = None;
            self.rtt_sample_count = 0;
        }
    }

    /// An ACK arrived in slow start, with an RTT sample if it gave one: tracks the round's
    /// minimum RTT and moves between slow start and CSS (RFC 9406 §4.2).
    pub fn on_ack(&mut self, rtt: Option<Duration>) {
        if let Some(rtt) = rtt {
            // RFC 9406 §4.2: "currentRoundMinRTT = min(currentRoundMinRTT, currRTT);
            // rttSampleCount += 1".
            self.current_round_min_rtt =
                Some(self.current_round_min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.rtt_sample_count += 1;
        }
        if self.rtt_sample_count < N_RTT_SAMPLE {
            return;
        }
        let Some(current) = self.current_round_min_rtt else {
            return;
        };
        if let Some(baseline) = self.css_baseline_min_rtt {
            // RFC 9406 §4.2: a CSS round whose minimum RTT drops below the baseline says the
            // exit was spurious: "resume slow start including HyStart++".
            if current < baseline {
                self.css_baseline_min_rtt = None;
                self.css_rounds = 0;
            }
            return;
        }
        // RFC 9406 §4.2: "RttThresh = max(MIN_RTT_THRESH, min(lastRoundMinRTT /
        // MIN_RTT_DIVISOR, MAX_RTT_THRESH))"; a round whose minimum RTT rose by it ends slow
        // start and enters CSS.
        if let Some(last) = self.last_round_min_rtt {
            let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
            if current >= last.saturating_add(thresh) {
                self.css_baseline_min_rtt = Some(current);
            }
        }
    }

    /// The window growth for `acked` bytes newly acknowledged by one ACK, of datagrams of
    /// `mds` bytes: "cwnd = cwnd + min(N, L * SMSS)" in slow start, that over
    /// CSS_GROWTH_DIVISOR in CSS (RFC 9406 §4.2).
    #[must_use]
    pub fn growth(&self, acked: u64, mds: u64) -> u64 {
        let n = self
            .limit
            .map_or(acked, |l| acked.min(l.saturating_mul(mds)));
        if self.in_css() {
            n / CSS_GROWTH_DIVISOR
        } else {
            n
        }
    }

    /// After an ACK whose newest acknowledged packet was sent at `newest_sent`: ends the round
    /// if that packet was of a later round, and says whether slow start is over: CSS lasted
    /// CSS_ROUNDS rounds, so "enter congestion avoidance by setting the ssthresh to the current
    /// cwnd" (RFC 9406 §4.2).
    pub fn end_of_ack(&mut self, newest_sent: Instant) -> bool {
        if self.window_end.is_none_or(|end| newest_sent < end) {
            return false;
        }
        self.window_end = None;
        if !self.in_css() {
            return false;
        }
        self.css_rounds += 1;
        self.css_rounds >= CSS_ROUNDS
    }
}

/// What a controller in its initial slow start does with HyStart++ before its own growth: the
/// ACK's RTT sample goes to `hystart`, and the answer is the growth this ACK allows (`None` once
/// HyStart++ is over or off, when the controller grows by its own rules).
pub fn ack_growth(hystart: Option<&mut HyStart>, ack: &AckEvent<'_>, mds: u64) -> Option<u64> {
    let h = hystart?;
    h.on_ack(ack.rtt_sampled.then(|| ack.rtt.latest()));
    let acked = ack.acked.iter().map(|p| p.bytes).sum::<u64>();
    Some(h.growth(acked, mds))
}

/// After a controller's growth for `ack`: whether HyStart++'s slow start ended with it (CSS
/// lasted CSS_ROUNDS rounds), in which case `hystart` is dropped and the caller "enter\[s\]
/// congestion avoidance by setting the ssthresh to the current cwnd" (RFC 9406 §4.2).
pub fn slow_start_over(hystart: &mut Option<HyStart>, ack: &AckEvent<'_>) -> bool {
    let newest_sent = ack.acked.iter().map(|p| p.time_sent).max();
    let over = match (hystart.as_mut(), newest_sent) {
        (Some(h), Some(newest)) => h.end_of_ack(newest),
        _ => false,
    };
    if over {
        *hystart = None;
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;

    const MDS: u64 = 1200;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// One round: its first packet leaves at `start`, then N_RTT_SAMPLE ACKs of `rtt` and the ACK
    /// of the round's first packet. Returns whether slow start ended.
    fn round(h: &mut HyStart, start: u64, rtt: u64) -> bool {
        h.on_packet_sent(at(start));
        for _ in 0..N_RTT_SAMPLE {
            h.on_ack(Some(ms(rtt)));
        }
        h.end_of_ack(at(start))
    }

    #[test]
    fn a_round_whose_rtt_rose_by_the_threshold_enters_css() {
        let mut h = HyStart::new(true);
        assert!(!round(&mut h, 0, 200));
        // 200 ms / 8 is above MAX_RTT_THRESH: 16 ms more is needed.
        assert!(!round(&mut h, 200, 215));
        assert!(!h.in_css());
        // Against the last round's 215 ms.
        assert!(!round(&mut h, 400, 231));
        assert!(h.in_css());
        assert_eq!(h.css_baseline_min_rtt, Some(ms(231)));
    }

    #[test]
    fn the_threshold_is_an_eighth_of_the_rtt_within_4_and_16_ms() {
        for (base, below, at_threshold) in [(20, 23, 24), (80, 89, 90), (400, 415, 416)] {
            let mut h = HyStart::new(true);
            round(&mut h, 0, base);
            round(&mut h, 1000, below);
            assert!(!h.in_css(), "{base} ms then {below} ms");
            let mut h = HyStart::new(true);
            round(&mut h, 0, base);
            round(&mut h, 1000, at_threshold);
            assert!(h.in_css(), "{base} ms then {at_threshold} ms");
        }
    }

    #[test]
    fn fewer_than_n_rtt_samples_decide_nothing() {
        let mut h = HyStart::new(true);
        round(&mut h, 0, 100);
        h.on_packet_sent(at(100));
        for _ in 1..N_RTT_SAMPLE {
            h.on_ack(Some(ms(200)));
        }
        // ACKs without an RTT sample do not count.
        h.on_ack(None);
        assert!(!h.in_css());
        h.on_ack(Some(ms(200)));
        assert!(h.in_css());
    }

    #[test]
    fn an_rtt_back_below_the_baseline_resumes_slow_start() {
        let mut h = HyStart::new(true);
        round(&mut h, 0, 100);
        round(&mut h, 100, 130);
        assert!(h.in_css());
        // A CSS round at the baseline stays in CSS; one below it was a spurious exit.
        round(&mut h, 200, 130);
        assert!(h.in_css());
        assert_eq!(h.css_rounds, 2);
        round(&mut h, 300, 110);
        assert!(!h.in_css());
        assert_eq!(h.css_rounds, 0);
        assert_eq!(h.growth(3 * MDS, MDS), 3 * MDS);
    }

    #[test]
    fn css_rounds_end_slow_start() {
        let mut h = HyStart::new(true);
        round(&mut h, 0, 100);
        // The round CSS begins in counts as its first.
        assert!(!round(&mut h, 100, 130));
        for r in 2..CSS_ROUNDS {
            assert!(!round(&mut h, 100 * u64::from(r + 1), 130), "CSS round {r}");
        }
        assert!(round(&mut h, 1000, 130));
    }

    #[test]
    fn a_round_ends_on_the_ack_of_a_packet_sent_in_it() {
        let mut h = HyStart::new(true);
        round(&mut h, 0, 100);
        round(&mut h, 100, 130);
        assert!(h.in_css());
        h.on_packet_sent(at(200));
        // Packets sent after the round began do not start another.
        h.on_packet_sent(at(210));
        assert_eq!(h.window_end, Some(at(200)));
        // An ACK of a packet of the previous round does not end it.
        assert!(!h.end_of_ack(at(190)));
        assert_eq!(h.css_rounds, 1);
        assert!(!h.end_of_ack(at(210)));
        assert_eq!(h.css_rounds, 2);
        assert_eq!(h.window_end, None);
    }

    #[test]
    fn css_grows_a_quarter_as_fast_and_l_caps_an_unpaced_ack() {
        let mut h = HyStart::new(true);
        assert_eq!(h.growth(20 * MDS, MDS), 20 * MDS);
        round(&mut h, 0, 100);
        round(&mut h, 100, 130);
        assert!(h.in_css());
        assert_eq!(h.growth(4 * MDS, MDS), MDS);
        assert_eq!(h.growth(20 * MDS, MDS), 5 * MDS);

        let mut unpaced = HyStart::new(false);
        assert_eq!(unpaced.growth(20 * MDS, MDS), 8 * MDS);
        round(&mut unpaced, 0, 100);
        round(&mut unpaced, 100, 130);
        assert_eq!(unpaced.growth(20 * MDS, MDS), 2 * MDS);
    }
}
