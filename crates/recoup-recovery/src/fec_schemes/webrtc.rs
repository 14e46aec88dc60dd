//! WebRTC's FEC protection factor (the baseline "WebRTC FEC" of AutoRec §VII, Fig. 19).
//!
//! WebRTC protects each video frame with `n_fec = round(n_media · factor / 256)` XOR repair
//! packets (at least one when the factor is nonzero). The factor, in Q8, comes from a
//! 50 × 129 table (`kFecRateTable`) indexed by the frame's effective size and the loss rate in Q8;
//! the table is read in place from `../shared/data/webrtc_fec_rate_table.txt`, never copied. The
//! steps below are those of libwebrtc's `VCMFecMethod` / `VCMNackFecMethod` (media_opt_util):
//! - row = clamp((r_eff − 5) / 5, 0, 49), r_eff = bits per frame in kbit scaled by the
//!   resolution factor (w·h / (704·576))^−0.3 (1 at 704×576);
//! - a delta frame's factor is the table entry, at least 20 % (51/256) once there is loss and a
//!   frame spans more than one packet, at most 128 (50 % of the media);
//! - a key frame's row uses r_eff boosted by max(2, key packets / delta packets) plus one, and its
//!   factor is at least the loss rate and twice the delta factor;
//! - hybrid NACK/FEC (Holmer, Shemer, Paniconi, ICIP 2013 §3): below 20 ms RTT NACK alone
//!   recovers in time and delta frames get no FEC; above 100 ms FEC alone.
//!
//! The two variants differ only in the RTT range between: `webrtc14` (the 2013/2014 design,
//! AutoRec's WebRTC₁₄, "adjusts redundancy based on RTT") scales the delta factor down there,
//! `webrtc-now` (AutoRec's WebRTC_NOW, "more aggressive") keeps it whole, as libwebrtc has done
//! since it fixed the RTT adjustment to 1. The 2013 adjustment table is not public in our sources,
//! so `webrtc14` ramps it linearly from 0 at the low threshold to 1 at the high one (an assumption,
//! named in EXPERIMENTS.md).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use recoup_time::Instant;

use super::config::WebRtcConfig;
use super::frames::{repair_windows, Frame, FrameCollector, LossFilter};
use crate::api::{PacketInfo, RttSample, SendKind};
use crate::error::Error;
use crate::fec::{FecContext, FecScheme, RepairRequest, SourcePacket};

/// Table rows (effective-rate bins) and columns (loss rate in Q8, 0..=128).
pub const TABLE_ROWS: usize = 50;
pub const TABLE_COLS: usize = 129;
/// The table's file name under `shared/data/`.
pub const TABLE_FILE: &str = "webrtc_fec_rate_table.txt";

/// The largest factor: 128/256, FEC at most half the media (`kPacketLossMax − 1`).
const MAX_FACTOR: u8 = 128;
/// The least delta-frame factor once there is loss: 20 % in Q8 (`firstPartitionProt`).
const MIN_FACTOR_WITH_LOSS: u8 = 51;
/// Effective-rate bin width and offset, kbit per frame (`ratePar1`).
const RATE_BIN_KBIT: f64 = 5.0;
/// Reference resolution of the effective rate (CIF ×4).
const REFERENCE_PIXELS: f64 = 704.0 * 576.0;

/// WebRTC's FEC rate table, one Q8 factor per (row, loss).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateTable {
    factors: Vec<u8>,
}

impl RateTable {
    /// Reads the table from `path`: 6450 integers 0..=255, one a line.
    ///
    /// # Errors
    /// When the file cannot be read or is not such a table (the error names the path and line).
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::RateTable {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::parse(&text).map_err(|detail| Error::RateTable {
            path: path.display().to_string(),
            detail,
        })
    }

    fn parse(text: &str) -> Result<Self, String> {
        let mut factors = Vec::with_capacity(TABLE_ROWS * TABLE_COLS);
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let v: u8 = line
                .parse()
                .map_err(|_| format!("line {}: {line:?} is not an integer 0..=255", i + 1))?;
            factors.push(v);
        }
        if factors.len() != TABLE_ROWS * TABLE_COLS {
            return Err(format!(
                "{} values; a {TABLE_ROWS} x {TABLE_COLS} table has {}",
                factors.len(),
                TABLE_ROWS * TABLE_COLS
            ));
        }
        Ok(Self { factors })
    }

    /// The factor at `row` (clamped to the table) and `loss_q8` (clamped to 128).
    #[must_use]
    pub fn factor(&self, row: usize, loss_q8: u8) -> u8 {
        let row = row.min(TABLE_ROWS - 1);
        let col = usize::from(loss_q8.min(MAX_FACTOR));
        self.factors[row * TABLE_COLS + col]
    }
}

/// Where the table is when no path is given: `shared/data/` in the first ancestor of the current
/// directory that has it (the repository's sibling `../shared`, from the repository or any crate
/// folder in it, as tests run).
#[must_use]
pub fn default_table_path() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .map(|a| a.join("shared").join("data").join(TABLE_FILE))
        .find(|p| p.is_file())
}

/// Which WebRTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebRtcVariant {
    /// The 2013/2014 hybrid NACK/FEC: the delta factor shrinks with RTT in the hybrid range.
    V14,
    /// Today's: the delta factor is whole once the RTT is above the low threshold.
    Now,
}

/// What WebRTC's protection logic looks at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebRtcInputs {
    /// Encoder bits per frame (bitrate / frame rate).
    pub bits_per_frame: f64,
    /// Filtered loss rate, a fraction.
    pub loss: f64,
    pub rtt: Duration,
    /// Frame width × height; `None` is the reference 704×576.
    pub pixels: Option<u64>,
    /// Mean packets per delta frame and per key frame (for the minimum and the key boost).
    pub packets_per_delta: f64,
    pub packets_per_key: f64,
}

/// The RTT thresholds of hybrid NACK/FEC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HybridThresholds {
    /// Below: NACK only (`kLowRttNackMs` = 20 ms).
    pub low: Duration,
    /// At or above: FEC only (`kHighRttNackMs` = 100 ms).
    pub high: Duration,
}

impl Default for HybridThresholds {
    fn default() -> Self {
        Self {
            low: Duration::from_millis(20),
            high: Duration::from_millis(100),
        }
    }
}

/// Protection factors in Q8 (repair packets per 256 media packets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protection {
    pub delta: u8,
    pub key: u8,
}

fn loss_q8(loss: f64) -> u8 {
    // Saturating float-to-int cast: NaN gives 0, anything above 1 the largest column.
    (loss.clamp(0.0, 1.0) * 255.0)
        .round()
        .min(f64::from(MAX_FACTOR)) as u8
}

fn row_of(effective_kbit: f64, boost: f64, offset: f64) -> usize {
    let r = offset + (boost * effective_kbit - RATE_BIN_KBIT) / RATE_BIN_KBIT;
    // Truncation toward zero as WebRTC's integer division; negative rates give row 0.
    r.clamp(0.0, (TABLE_ROWS - 1) as f64) as usize
}

/// The protection factors for the next frames.
#[must_use]
pub fn protection(
    table: &RateTable,
    variant: WebRtcVariant,
    hybrid: HybridThresholds,
    x: &WebRtcInputs,
) -> Protection {
    let kbit_per_frame = x.bits_per_frame.max(0.0) / 1000.0;
    let resolution = x.pixels.map_or(1.0, |p| {
        1.0 / (p.max(1) as f64 / REFERENCE_PIXELS).powf(0.3)
    });
    let effective = (resolution * kbit_per_frame).floor();
    let loss = loss_q8(x.loss);

    let mut delta = table.factor(row_of(effective, 1.0, 0.0), loss);
    if loss > 0 && x.packets_per_delta.round() > 1.0 {
        delta = delta.max(MIN_FACTOR_WITH_LOSS);
    }
    delta = delta.min(MAX_FACTOR);

    let ratio = if x.packets_per_delta.round() > 0.0 {
        (x.packets_per_key.round() / x.packets_per_delta.round()).floor()
    } else {
        0.0
    };
    let boost = ratio.max(2.0);
    let key_table = table
        .factor(row_of(effective, boost, 1.0), loss)
        .min(MAX_FACTOR);
    let key = loss.max(delta.saturating_mul(2)).max(key_table);

    let delta = if x.rtt < hybrid.low {
        0
    } else if x.rtt < hybrid.high && variant == WebRtcVariant::V14 {
        let span = (hybrid.high - hybrid.low).as_secs_f64();
        let scale = if span > 0.0 {
            (x.rtt - hybrid.low).as_secs_f64() / span
        } else {
            1.0
        };
        (f64::from(delta) * scale) as u8
    } else {
        delta
    };
    Protection { delta, key }
}

/// Repair packets WebRTC sends for `media` packets at `factor`: `(media · factor + 128) >> 8`,
/// and one when that rounds to zero but the factor is not.
#[must_use]
pub fn repair_packets(media: usize, factor: u8) -> usize {
    let n = (media * usize::from(factor) + 128) >> 8;
    if factor > 0 && n == 0 {
        1
    } else {
        n
    }
}

/// The WebRTC FEC scheme: every frame gets `repair_packets(n, factor)` repair symbols over its
/// first transmissions, delta or key factor by the frame's size.
#[derive(Debug)]
pub struct WebRtcFec {
    variant: WebRtcVariant,
    config: WebRtcConfig,
    table: Option<&'static RateTable>,
    frames: FrameCollector,
    loss: LossFilter,
    rtt: Option<Duration>,
    /// Exponentially filtered packets and bits per delta frame, packets per key frame.
    delta_packets: Option<f64>,
    delta_bits: Option<f64>,
    key_packets: Option<f64>,
    /// Bits of the frame being sent so far.
    frame_bits: f64,
    ready: VecDeque<RepairRequest>,
}

/// Weight of a new frame in the per-frame filters.
const FRAME_FILTER: f64 = 0.1;
/// A frame this many times the delta frames' packets is a key frame (the scheme does not see
/// the encoder; key frames are several times a delta frame's size).
const KEY_FRAME_FACTOR: f64 = 2.0;

fn filtered(old: Option<f64>, x: f64) -> Option<f64> {
    Some(old.map_or(x, |o| o + FRAME_FILTER * (x - o)))
}

impl WebRtcFec {
    /// `config`'s table is loaded when [`crate::FecSpec`] parses it; a config built by hand
    /// without one has nothing to size repairs by, and the scheme sends none.
    #[must_use]
    pub fn new(variant: WebRtcVariant, config: WebRtcConfig) -> Self {
        Self {
            variant,
            config,
            table: config.table.table(),
            frames: FrameCollector::default(),
            loss: LossFilter::default(),
            rtt: None,
            delta_packets: None,
            delta_bits: None,
            key_packets: None,
            frame_bits: 0.0,
            ready: VecDeque::new(),
        }
    }

    fn on_frame(&mut self, frame: &Frame, bits: f64) {
        let Some(table) = self.table else {
            return;
        };
        let n = frame.packets.len() as f64;
        // The first frame of a call is a key frame; until a delta frame is seen, a frame well
        // below the key frames' size is one.
        let key = match (self.delta_packets, self.key_packets) {
            (Some(d), _) => n >= KEY_FRAME_FACTOR * d.max(1.0),
            (None, Some(k)) => n * KEY_FRAME_FACTOR >= k,
            (None, None) => true,
        };
        if key {
            self.key_packets = filtered(self.key_packets, n);
        } else {
            self.delta_packets = filtered(self.delta_packets, n);
            self.delta_bits = filtered(self.delta_bits, bits);
        }
        let inputs = WebRtcInputs {
            bits_per_frame: self.delta_bits.unwrap_or(bits),
            loss: self.loss.loss(),
            // Before the first sample the handshake's RTT is unknown: assume FEC-only.
            rtt: self.rtt.unwrap_or(self.config.high_rtt),
            pixels: None,
            packets_per_delta: self.delta_packets.unwrap_or(n),
            packets_per_key: self.key_packets.unwrap_or(n),
        };
        let p = protection(table, self.variant, self.config.hybrid(), &inputs);
        let factor = if key { p.key } else { p.delta };
        let repairs = repair_packets(frame.packets.len(), factor);
        self.ready.extend(repair_windows(&frame.packets, repairs));
    }
}

impl FecScheme for WebRtcFec {
    fn name(&self) -> &'static str {
        match self.variant {
            WebRtcVariant::V14 => "webrtc14",
            WebRtcVariant::Now => "webrtc-now",
        }
    }

    fn on_source_sent(&mut self, _now: Instant, packet: &SourcePacket<'_>) {
        if packet.kind == SendKind::New {
            self.frame_bits += packet.symbol_bytes as f64 * 8.0;
        }
        if let Some(frame) = self.frames.on_source(packet) {
            let bits = std::mem::take(&mut self.frame_bits);
            self.on_frame(&frame, bits);
        }
    }

    fn on_packet_acked(&mut self, now: Instant, _packet: &PacketInfo<'_>, _repair: bool) {
        self.loss.record(now, false);
    }

    fn on_packet_lost(&mut self, now: Instant, _packet: &PacketInfo<'_>, _repair: bool) {
        self.loss.record(now, true);
    }

    fn on_rtt_update(&mut self, _now: Instant, rtt: &RttSample) {
        self.rtt = Some(rtt.smoothed);
    }

    fn poll_repair(&mut self, _now: Instant, _ctx: &FecContext) -> Option<RepairRequest> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> RateTable {
        let path = default_table_path().expect(
            "webrtc_fec_rate_table.txt under shared/data in an ancestor of the test's directory",
        );
        RateTable::load(&path).expect("the table")
    }

    fn inputs(loss: f64, rtt_ms: u64) -> WebRtcInputs {
        WebRtcInputs {
            bits_per_frame: 4_000_000.0 / 60.0,
            loss,
            rtt: Duration::from_millis(rtt_ms),
            pixels: None,
            packets_per_delta: 5.0,
            packets_per_key: 25.0,
        }
    }

    #[test]
    fn the_table_has_its_shape_and_grows_with_loss() {
        let t = table();
        // No loss, no protection, in every row.
        for row in 0..TABLE_ROWS {
            assert_eq!(t.factor(row, 0), 0, "row {row}");
        }
        // More loss never lowers a row's factor up to 40 % loss (the table dips once, at column
        // 120, in rows 1-4).
        for row in 0..TABLE_ROWS {
            for l in 1..=100u8 {
                assert!(
                    t.factor(row, l) >= t.factor(row, l - 1),
                    "row {row} loss {l}"
                );
            }
        }
        // Indices beyond the table clamp to its edge.
        assert_eq!(t.factor(999, 255), t.factor(TABLE_ROWS - 1, 128));
    }

    #[test]
    fn bad_tables_are_named() {
        let dir = std::env::temp_dir().join(format!("recoup-rate-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let p = dir.join("short.txt");
        std::fs::write(&p, "1\n2\n").expect("write");
        let e = RateTable::load(&p).expect_err("short").to_string();
        assert!(e.contains("short.txt") && e.contains("2 values"), "{e}");
        std::fs::write(&p, "1\nx\n").expect("write");
        let e = RateTable::load(&p).expect_err("not a number").to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = RateTable::load(&dir.join("missing.txt")).expect_err("missing");
        assert!(e.to_string().contains("missing.txt"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn row_and_loss_pick_the_table_entry() {
        let t = table();
        // 4 Mbit/s at 60 fps: 66 kbit per frame at the reference resolution: row (66-5)/5 = 12.
        // 5 % loss is 13 in Q8.
        let x = inputs(0.05, 200);
        let p = protection(&t, WebRtcVariant::Now, HybridThresholds::default(), &x);
        assert_eq!(p.delta, t.factor(12, 13).clamp(51, 128));
        // The key frame: boost max(2, 25/5) = 5, row 1 + (5·66 - 5)/5 = 66 -> clamped to 49.
        let key_entry = t.factor(49, 13).min(128);
        assert_eq!(p.key, 13u8.max(p.delta.saturating_mul(2)).max(key_entry));
        assert!(p.key >= p.delta);
    }

    #[test]
    fn rtt_decides_between_nack_and_fec() {
        let t = table();
        let h = HybridThresholds::default();
        let full = protection(&t, WebRtcVariant::Now, h, &inputs(0.05, 200)).delta;
        assert!(full > 0);
        for v in [WebRtcVariant::V14, WebRtcVariant::Now] {
            // NACK alone below 20 ms.
            assert_eq!(protection(&t, v, h, &inputs(0.05, 10)).delta, 0);
            // FEC whole from 100 ms.
            assert_eq!(protection(&t, v, h, &inputs(0.05, 100)).delta, full);
        }
        // In between, 2014 scales down (60 ms is half way), today's does not.
        let mid14 = protection(&t, WebRtcVariant::V14, h, &inputs(0.05, 60)).delta;
        let mid_now = protection(&t, WebRtcVariant::Now, h, &inputs(0.05, 60)).delta;
        assert_eq!(mid_now, full);
        assert_eq!(mid14, full / 2);
    }

    #[test]
    fn no_loss_no_repair_and_rounding_keeps_one() {
        let t = table();
        let p = protection(
            &t,
            WebRtcVariant::Now,
            HybridThresholds::default(),
            &inputs(0.0, 200),
        );
        assert_eq!(p, Protection { delta: 0, key: 0 });
        assert_eq!(repair_packets(10, 0), 0);
        assert_eq!(repair_packets(1, 10), 1);
        assert_eq!(repair_packets(10, 128), 5);
        assert_eq!(repair_packets(7, 51), 1);
        assert_eq!(repair_packets(20, 51), 4);
    }
}
