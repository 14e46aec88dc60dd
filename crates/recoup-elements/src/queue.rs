//! Queue disciplines in front of a link: infinite, droptail, drophead (mahimahi's
//! `DroppingPacketQueue` semantics) and CoDel (RFC 8289).
//!
//! A queue never stands alone: the link in front of which it sits decides when to dequeue, which
//! is what makes CoDel's sojourn times and the droptail limits mean what they mean in mm-link.
//! The packet being transmitted has left the queue and counts towards no limit, as in mm-link.

use std::collections::VecDeque;
use std::str::FromStr;
use std::time::Duration;

use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::error::Error;
use crate::log::DropReason;
use crate::trace::MM_PACKET_SIZE;
use crate::units::parse_duration;

/// RFC 8289 §4.4 default target.
pub const CODEL_TARGET: Duration = Duration::from_millis(5);
/// RFC 8289 §4.3 default interval.
pub const CODEL_INTERVAL: Duration = Duration::from_millis(100);

/// Limits of a dropping queue; a limit of `None` is unlimited. At least one is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Limits {
    /// Maximum packets waiting.
    pub packets: Option<u64>,
    /// Maximum bytes (wire length) waiting.
    pub bytes: Option<u64>,
}

impl Limits {
    fn allows(&self, packets: u64, bytes: u64) -> bool {
        self.packets.is_none_or(|l| packets <= l) && self.bytes.is_none_or(|l| bytes <= l)
    }
}

/// Which queue discipline, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueSpec {
    /// Never drops (mm-link's default).
    Infinite,
    /// Drops the arriving packet if it would exceed a limit.
    DropTail(Limits),
    /// Accepts the arriving packet, then drops from the head until within limits.
    DropHead(Limits),
    /// CoDel (RFC 8289), optionally with a droptail limit on enqueue.
    CoDel {
        /// Acceptable standing queue delay.
        target: Duration,
        /// Sliding window for the minimum sojourn time.
        interval: Duration,
        /// Droptail limits applied on enqueue (unlimited when both are `None`).
        limits: Limits,
    },
}

impl FromStr for QueueSpec {
    type Err = Error;

    /// `infinite`, `droptail packets=100`, `droptail bytes=150000`, `drophead packets=50 bytes=…`,
    /// `codel`, `codel target=5ms interval=100ms packets=1000`.
    fn from_str(input: &str) -> Result<Self, Error> {
        let mut words = input.split_whitespace();
        let kind = words
            .next()
            .ok_or_else(|| Error::spec(input, input, "empty queue description"))?;
        let mut limits = Limits::default();
        let mut target = CODEL_TARGET;
        let mut interval = CODEL_INTERVAL;
        let codel = kind == "codel";
        for word in words {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| Error::spec(input, word, "expected key=value"))?;
            let count = || -> Result<u64, Error> {
                match value.parse::<u64>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(Error::spec(input, word, "expected a positive integer")),
                }
            };
            let time = || parse_duration(value).map_err(|d| Error::spec(input, word, d));
            match key {
                "packets" if kind != "infinite" => limits.packets = Some(count()?),
                "bytes" if kind != "infinite" => limits.bytes = Some(count()?),
                "target" if codel => target = time()?,
                "interval" if codel => interval = time()?,
                _ => {
                    return Err(Error::spec(
                        input,
                        word,
                        format!("unknown parameter for `{kind}`"),
                    ))
                }
            }
        }
        let need_limit = |limits: Limits| {
            if limits.packets.is_none() && limits.bytes.is_none() {
                Err(Error::spec(
                    input,
                    kind,
                    "needs a limit: packets=N and/or bytes=N",
                ))
            } else {
                Ok(limits)
            }
        };
        match kind {
            "infinite" => Ok(Self::Infinite),
            "droptail" => Ok(Self::DropTail(need_limit(limits)?)),
            "drophead" => Ok(Self::DropHead(need_limit(limits)?)),
            "codel" if interval.is_zero() => Err(Error::spec(input, "interval", "must be > 0")),
            "codel" => Ok(Self::CoDel {
                target,
                interval,
                limits,
            }),
            _ => Err(Error::spec(
                input,
                kind,
                "unknown queue (infinite, droptail, drophead, codel)",
            )),
        }
    }
}

/// A packet waiting in a queue.
#[derive(Debug)]
pub(crate) struct Queued {
    pub dgram: Datagram,
    pub arrival: Instant,
    pub size: usize,
}

#[derive(Debug, Default)]
struct CoDelState {
    first_above_time: Option<Instant>,
    drop_next: Instant,
    count: u32,
    lastcount: u32,
    dropping: bool,
}

/// A FIFO with a discipline.
#[derive(Debug)]
pub(crate) struct Queue {
    spec: QueueSpec,
    items: VecDeque<Queued>,
    bytes: u64,
    codel: CoDelState,
}

impl Queue {
    pub fn new(spec: QueueSpec) -> Self {
        Self {
            spec,
            items: VecDeque::new(),
            bytes: 0,
            codel: CoDelState::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Arrival time of the packet at the head.
    pub fn head_arrival(&self) -> Option<Instant> {
        self.items.front().map(|q| q.arrival)
    }

    pub fn enqueue(&mut self, item: Queued, on_drop: &mut dyn FnMut(Queued, DropReason)) {
        let len = self.items.len() as u64;
        let size = item.size as u64;
        match self.spec {
            QueueSpec::Infinite => self.push(item),
            QueueSpec::DropTail(limits) | QueueSpec::CoDel { limits, .. } => {
                if limits.allows(len + 1, self.bytes + size) {
                    self.push(item);
                } else {
                    on_drop(item, DropReason::QueueFull);
                }
            }
            QueueSpec::DropHead(limits) => {
                self.push(item);
                while !limits.allows(self.items.len() as u64, self.bytes) {
                    match self.pop() {
                        Some(head) => on_drop(head, DropReason::QueueFull),
                        None => break,
                    }
                }
            }
        }
    }

    pub fn dequeue(
        &mut self,
        now: Instant,
        on_drop: &mut dyn FnMut(Queued, DropReason),
    ) -> Option<Queued> {
        match self.spec {
            QueueSpec::CoDel {
                target, interval, ..
            } => self.codel_dequeue(now, target, interval, on_drop),
            _ => self.pop(),
        }
    }

    fn push(&mut self, item: Queued) {
        self.bytes += item.size as u64;
        self.items.push_back(item);
    }

    fn pop(&mut self) -> Option<Queued> {
        let item = self.items.pop_front()?;
        self.bytes -= item.size as u64;
        Some(item)
    }

    /// RFC 8289 §5.2 `dodequeue`: the head packet and whether it may be dropped.
    fn codel_dodequeue(
        &mut self,
        now: Instant,
        target: Duration,
        interval: Duration,
    ) -> (Option<Queued>, bool) {
        let Some(item) = self.pop() else {
            self.codel.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_duration_since(item.arrival);
        let mut ok_to_drop = false;
        if sojourn < target || self.bytes <= MM_PACKET_SIZE as u64 {
            // Below target, or too few bytes left to form a standing queue.
            self.codel.first_above_time = None;
        } else {
            match self.codel.first_above_time {
                None => self.codel.first_above_time = Some(now + interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(item), ok_to_drop)
    }

    /// RFC 8289 §5.2 `control_law`: next drop `interval / sqrt(count)` after `t`.
    fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
        let step = interval.as_nanos() as f64 / f64::from(count.max(1)).sqrt();
        t + Duration::from_nanos(step.round() as u64)
    }

    /// RFC 8289 §5.2 `dequeue`.
    fn codel_dequeue(
        &mut self,
        now: Instant,
        target: Duration,
        interval: Duration,
        on_drop: &mut dyn FnMut(Queued, DropReason),
    ) -> Option<Queued> {
        let (mut item, mut ok_to_drop) = self.codel_dodequeue(now, target, interval);
        if item.is_none() {
            self.codel.dropping = false;
            return None;
        }
        if self.codel.dropping {
            if !ok_to_drop {
                self.codel.dropping = false;
            }
            while self.codel.dropping && now >= self.codel.drop_next {
                if let Some(dropped) = item.take() {
                    on_drop(dropped, DropReason::Aqm);
                }
                self.codel.count = self.codel.count.saturating_add(1);
                (item, ok_to_drop) = self.codel_dodequeue(now, target, interval);
                if ok_to_drop {
                    self.codel.drop_next =
                        Self::control_law(self.codel.drop_next, interval, self.codel.count);
                } else {
                    self.codel.dropping = false;
                }
            }
        } else if ok_to_drop {
            if let Some(dropped) = item.take() {
                on_drop(dropped, DropReason::Aqm);
            }
            (item, _) = self.codel_dodequeue(now, target, interval);
            self.codel.dropping = true;
            // RFC 8289 §5.2: restart near the previous drop rate if we were dropping recently.
            let delta = self.codel.count.wrapping_sub(self.codel.lastcount);
            let since_last = now.as_nanos() as i128 - self.codel.drop_next.as_nanos() as i128;
            self.codel.count = if delta > 1 && since_last < 16 * interval.as_nanos() as i128 {
                delta
            } else {
                1
            };
            self.codel.drop_next = Self::control_law(now, interval, self.codel.count);
            self.codel.lastcount = self.codel.count;
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn pkt(id: u64, payload: usize, at_ms: u64) -> Queued {
        let a: SocketAddr = "10.0.0.1:1".parse().expect("addr");
        let d = Datagram::new(a, a, vec![0; payload]).with_id(id);
        let size = d.wire_len();
        Queued {
            dgram: d,
            arrival: Instant::from_nanos(at_ms * 1_000_000),
            size,
        }
    }

    fn drain(q: &mut Queue, now: Instant) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(p) = q.dequeue(now, &mut |_, _| {}) {
            out.push(p.dgram.id);
        }
        out
    }

    #[test]
    fn parse_queue_specs() {
        assert_eq!(
            "infinite".parse::<QueueSpec>().ok(),
            Some(QueueSpec::Infinite)
        );
        assert_eq!(
            "droptail packets=100".parse::<QueueSpec>().ok(),
            Some(QueueSpec::DropTail(Limits {
                packets: Some(100),
                bytes: None
            }))
        );
        let c: QueueSpec = "codel".parse().expect("codel");
        assert_eq!(
            c,
            QueueSpec::CoDel {
                target: CODEL_TARGET,
                interval: CODEL_INTERVAL,
                limits: Limits::default()
            }
        );
        let c: QueueSpec = "codel target=10ms interval=50ms packets=5"
            .parse()
            .expect("codel");
        assert!(
            matches!(c, QueueSpec::CoDel { target, .. } if target == Duration::from_millis(10))
        );
        for (bad, part) in [
            ("droptail", "droptail"),
            ("droptail packets=0", "packets=0"),
            ("droptail packets", "packets"),
            ("droptail target=5ms", "target=5ms"),
            ("fifo packets=3", "fifo"),
            ("codel target=5", "target=5"),
        ] {
            let e = bad.parse::<QueueSpec>().unwrap_err().to_string();
            assert!(e.contains(&format!("`{part}`")), "{bad}: {e}");
        }
    }

    #[test]
    fn droptail_drops_arrivals_over_packet_or_byte_limit() {
        let mut q = Queue::new("droptail packets=2".parse().expect("spec"));
        let mut dropped = Vec::new();
        for i in 0..4 {
            q.enqueue(pkt(i, 100, 0), &mut |p, r| dropped.push((p.dgram.id, r)));
        }
        assert_eq!(
            dropped,
            vec![(2, DropReason::QueueFull), (3, DropReason::QueueFull)]
        );
        assert_eq!(drain(&mut q, Instant::ZERO), vec![0, 1]);

        // 3 packets of 128 wire bytes fit in 400 bytes, the 4th does not.
        let mut q = Queue::new("droptail bytes=400".parse().expect("spec"));
        let mut n = 0;
        for i in 0..4 {
            q.enqueue(pkt(i, 100, 0), &mut |_, _| n += 1);
        }
        assert_eq!((n, q.len(), q.bytes()), (1, 3, 384));
    }

    #[test]
    fn drophead_drops_oldest() {
        let mut q = Queue::new("drophead packets=2".parse().expect("spec"));
        let mut dropped = Vec::new();
        for i in 0..4 {
            q.enqueue(pkt(i, 100, 0), &mut |p, _| dropped.push(p.dgram.id));
        }
        assert_eq!(dropped, vec![0, 1]);
        assert_eq!(drain(&mut q, Instant::ZERO), vec![2, 3]);
    }

    #[test]
    fn codel_leaves_short_queues_alone_and_drops_standing_ones() {
        let spec: QueueSpec = "codel".parse().expect("spec");
        // Sojourn below target: never drops.
        let mut q = Queue::new(spec);
        let mut drops = 0;
        for ms in 0..1000u64 {
            q.enqueue(pkt(ms, 1400, ms), &mut |_, _| drops += 1);
            q.enqueue(pkt(ms, 1400, ms), &mut |_, _| drops += 1);
            let now = Instant::from_nanos(ms * 1_000_000 + 2_000_000);
            while q.dequeue(now, &mut |_, _| drops += 1).is_some() {}
        }
        assert_eq!(drops, 0);

        // A standing 50 ms queue served one packet per ms: first drop one interval after the
        // sojourn first exceeds target, then faster (interval / sqrt(count)).
        let mut q = Queue::new(spec);
        let mut drop_times = Vec::new();
        for ms in 0..400u64 {
            let now = Instant::from_nanos(ms * 1_000_000);
            q.enqueue(pkt(ms, 1400, ms), &mut |_, _| {});
            // Keep ~50 packets (50 ms at 1 pkt/ms) standing.
            if ms >= 50 {
                let _ = q.dequeue(now, &mut |_, r| {
                    assert_eq!(r, DropReason::Aqm);
                    drop_times.push(ms);
                });
            }
        }
        assert!(
            !drop_times.is_empty(),
            "CoDel never dropped a standing queue"
        );
        // First above target at 50 ms, so no drop before 150 ms.
        assert!(drop_times[0] >= 150, "{drop_times:?}");
        let gaps: Vec<u64> = drop_times.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.first() > gaps.last(),
            "drop rate must increase: {gaps:?}"
        );
    }
}
