//! Links: a queue in front of a server that is either a constant bit rate or an `mm-link` trace.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use recoup_time::Instant;

use crate::datagram::Datagram;
use crate::log::{DropReason, EventLog, LogEvent};
use crate::node::{ElementStats, Node, Output};
use crate::queue::{Queue, QueueSpec, Queued};
use crate::trace::{Trace, MM_PACKET_SIZE};

const NANOS_PER_MS: u64 = 1_000_000;

/// How the link serves bytes.
#[derive(Clone, Debug)]
pub enum Service {
    /// A constant rate in bit/s: a packet leaves when its last bit has been serialised.
    Rate(u64),
    /// An `mm-link` schedule, starting at the simulation epoch.
    Trace(Arc<Trace>),
}

/// Position in an `mm-link` schedule: the next opportunity is at
/// `base_ms + schedule[index]` milliseconds.
#[derive(Debug)]
struct TraceCursor {
    trace: Arc<Trace>,
    base_ms: u64,
    index: usize,
}

impl TraceCursor {
    fn next_ms(&self) -> u64 {
        self.base_ms + self.trace.opportunities_ms()[self.index]
    }

    fn next_time(&self) -> Instant {
        Instant::from_nanos(self.next_ms().saturating_mul(NANOS_PER_MS))
    }

    /// Use one opportunity; at the end of the schedule it repeats shifted by its last timestamp
    /// (`use_a_delivery_opportunity` in mahimahi).
    fn advance(&mut self) {
        self.index += 1;
        if self.index == self.trace.opportunities_ms().len() {
            self.index = 0;
            self.base_ms += self.trace.period_ms();
        }
    }

    /// Move to the first opportunity strictly after `now`, wasting all before it. O(log n), so an
    /// idle link costs nothing however long it idles.
    fn skip_past(&mut self, now: Instant) {
        let now_ms = now.as_nanos() / NANOS_PER_MS;
        if self.next_ms() > now_ms {
            return;
        }
        let period = self.trace.period_ms();
        let cycles = (now_ms - self.base_ms) / period;
        self.base_ms += cycles * period;
        let rel = now_ms - self.base_ms;
        let schedule = self.trace.opportunities_ms();
        self.index = schedule.partition_point(|&s| s <= rel);
        if self.index == schedule.len() {
            self.index = 0;
            self.base_ms += period;
        }
    }
}

#[derive(Debug)]
enum Server {
    Rate {
        bps: u64,
        /// The packet being serialised and when its last bit leaves.
        busy: Option<(Queued, Instant)>,
    },
    Trace {
        cursor: TraceCursor,
        /// A packet partly delivered: mm-link's `packet_in_transit_` and its bytes still to send.
        in_transit: Option<(Queued, usize)>,
    },
}

/// A queue plus a server: the bottleneck element.
///
/// Trace semantics follow mahimahi's `LinkQueue::rationalize` exactly: each opportunity carries
/// up to 1504 bytes; packets are dequeued in order and may span opportunities (the remainder of a
/// large packet is carried over; several small packets can share one); a packet leaves at the
/// time of the opportunity that carries its last byte; bytes of an opportunity nobody uses are
/// wasted; a packet arriving at time `t` can only use opportunities after `t` (mm-link runs the
/// schedule up to `now` before enqueueing).
#[derive(Debug)]
pub struct Link {
    queue: Queue,
    server: Server,
    ready: VecDeque<Datagram>,
    stats: ElementStats,
    log: Option<EventLog>,
}

impl Link {
    /// A link with the given service and queue discipline.
    #[must_use]
    pub fn new(service: Service, queue: QueueSpec) -> Self {
        let server = match service {
            Service::Rate(bps) => Server::Rate {
                bps: bps.max(1),
                busy: None,
            },
            Service::Trace(trace) => Server::Trace {
                cursor: TraceCursor {
                    trace,
                    base_ms: 0,
                    index: 0,
                },
                in_transit: None,
            },
        };
        Self {
            queue: Queue::new(queue),
            server,
            ready: VecDeque::new(),
            stats: ElementStats::default(),
            log: None,
        }
    }

    /// Keep an event log of drops and queue lengths (at most `capacity` events).
    #[must_use]
    pub fn with_log(mut self, capacity: usize) -> Self {
        self.log = Some(EventLog::new(capacity));
        self
    }

    /// Packets waiting in the queue (not counting one in transmission).
    #[must_use]
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    fn serialisation_time(bytes: usize, bps: u64) -> Duration {
        let nanos = (bytes as u128 * 8 * 1_000_000_000).div_ceil(u128::from(bps));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Run the server up to and including `now`.
    fn advance(&mut self, now: Instant) {
        let Self {
            queue,
            server,
            ready,
            stats,
            log,
        } = self;
        let mut on_drop = |q: Queued, reason: DropReason| {
            stats.dropped += 1;
            if let Some(log) = log.as_mut() {
                log.push(LogEvent::Drop {
                    time: now,
                    id: q.dgram.id,
                    bytes: q.size,
                    reason,
                });
            }
        };
        match server {
            Server::Rate { bps, busy } => loop {
                match busy.take() {
                    Some((q, done)) if done <= now => {
                        ready.push_back(q.dgram);
                        // The next packet starts when this one finished, not at `now`.
                        if let Some(next) = queue.dequeue(done, &mut on_drop) {
                            let t = done + Self::serialisation_time(next.size, *bps);
                            *busy = Some((next, t));
                        }
                    }
                    other => {
                        *busy = other;
                        break;
                    }
                }
            },
            Server::Trace { cursor, in_transit } => loop {
                if in_transit.is_none() && queue.is_empty() {
                    cursor.skip_past(now);
                    break;
                }
                let t = cursor.next_time();
                if t > now {
                    break;
                }
                cursor.advance();
                let mut budget = MM_PACKET_SIZE;
                while budget > 0 {
                    if in_transit.is_none() {
                        // Only packets that arrived before this opportunity may use it.
                        if queue.head_arrival().is_none_or(|a| a >= t) {
                            break;
                        }
                        *in_transit = queue.dequeue(t, &mut on_drop).map(|q| {
                            let left = q.size.max(1);
                            (q, left)
                        });
                    }
                    let Some((_, left)) = in_transit.as_mut() else {
                        break;
                    };
                    let used = budget.min(*left);
                    *left -= used;
                    budget -= used;
                    if *left == 0 {
                        if let Some((q, _)) = in_transit.take() {
                            ready.push_back(q.dgram);
                        }
                    }
                }
            },
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        match &self.server {
            Server::Rate { busy, .. } => busy.as_ref().map(|(_, t)| *t),
            Server::Trace { cursor, in_transit } => {
                (in_transit.is_some() || !self.queue.is_empty()).then(|| cursor.next_time())
            }
        }
    }

    fn log_queue(&mut self, now: Instant) {
        if let Some(log) = self.log.as_mut() {
            log.push(LogEvent::Queue {
                time: now,
                packets: self.queue.len(),
                bytes: self.queue.bytes(),
            });
        }
    }
}

impl Node for Link {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        self.advance(now);
        if let Some(d) = input {
            self.stats.on_receive(&d);
            let size = d.wire_len();
            let item = Queued {
                dgram: d,
                arrival: now,
                size,
            };
            let Self {
                queue, stats, log, ..
            } = self;
            queue.enqueue(item, &mut |q, reason| {
                stats.dropped += 1;
                if let Some(log) = log.as_mut() {
                    log.push(LogEvent::Drop {
                        time: now,
                        id: q.dgram.id,
                        bytes: q.size,
                        reason,
                    });
                }
            });
            if let Server::Rate { bps, busy } = &mut self.server {
                if busy.is_none() {
                    let Self { queue, stats, .. } = self;
                    if let Some(next) = queue.dequeue(now, &mut |_, _| stats.dropped += 1) {
                        let t = now + Self::serialisation_time(next.size, *bps);
                        *busy = Some((next, t));
                    }
                }
            }
            self.log_queue(now);
        }
        if let Some(d) = self.ready.pop_front() {
            self.stats.on_forward(&d);
            return Output::Datagram(d);
        }
        match self.next_wake() {
            Some(t) => Output::Callback(t),
            None => Output::None,
        }
    }

    fn stats(&self) -> ElementStats {
        self.stats
    }

    fn event_log(&self) -> Option<&EventLog> {
        self.log.as_ref()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    const MS: u64 = 1_000_000;

    fn addr() -> SocketAddr {
        "10.0.0.2:443".parse().expect("addr")
    }

    /// A datagram whose IPv4 packet is exactly `wire` bytes.
    fn dgram(id: u64, wire: usize) -> Datagram {
        Datagram::new(addr(), addr(), vec![0; wire - 28]).with_id(id)
    }

    /// Feed `arrivals` (time ns, id, wire bytes) and run until `end`; return (id, delivery ns).
    fn run(link: &mut Link, arrivals: &[(u64, u64, usize)], end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut wake: Option<u64> = None;
        let mut i = 0;
        loop {
            let next_arrival = arrivals.get(i).map(|a| a.0);
            let now = match (next_arrival, wake) {
                (Some(a), Some(w)) => a.min(w),
                (Some(a), None) => a,
                (None, Some(w)) => w,
                (None, None) => break,
            };
            if now > end {
                break;
            }
            let input = if next_arrival == Some(now) {
                let (_, id, size) = arrivals[i];
                i += 1;
                Some(dgram(id, size))
            } else {
                None
            };
            let mut o = link.process(input, Instant::from_nanos(now));
            wake = None;
            loop {
                match o {
                    Output::Datagram(d) => out.push((d.id, now)),
                    Output::Callback(t) => {
                        assert!(t.as_nanos() > now, "callback must be in the future");
                        wake = Some(t.as_nanos());
                        break;
                    }
                    Output::None => break,
                }
                o = link.process(None, Instant::from_nanos(now));
            }
        }
        out
    }

    fn trace_link(ms: &[u64]) -> Link {
        let t = Trace::from_millis(ms.to_vec()).expect("trace");
        Link::new(Service::Trace(Arc::new(t)), QueueSpec::Infinite)
    }

    #[test]
    fn single_line_trace_delivers_1504_bytes_per_ms() {
        let mut link = trace_link(&[1]);
        let arrivals: Vec<_> = (0..100).map(|i| (0, i, 1504)).collect();
        let out = run(&mut link, &arrivals, 1000 * MS);
        let times: Vec<u64> = out.iter().map(|o| o.1).collect();
        let expect: Vec<u64> = (1..=100).map(|k| k * MS).collect();
        assert_eq!(times, expect);
    }

    #[test]
    fn small_packets_share_an_opportunity_and_the_rest_is_wasted() {
        let mut link = trace_link(&[1]);
        // Two 700-byte packets fit in one opportunity (1400 <= 1504); a third does not, and
        // carries over 104 bytes into the next opportunity, then arrives at 2 ms.
        let out = run(&mut link, &[(0, 1, 700), (0, 2, 700), (0, 3, 700)], 10 * MS);
        assert_eq!(out, vec![(1, MS), (2, MS), (3, 2 * MS)]);

        // Bytes left in an opportunity are not saved for a packet that comes later.
        let mut link = trace_link(&[1]);
        let out = run(&mut link, &[(0, 1, 100), (MS + 500_000, 2, 1504)], 10 * MS);
        assert_eq!(out, vec![(1, MS), (2, 2 * MS)]);
    }

    #[test]
    fn large_packet_consumes_opportunities_until_delivered() {
        // A 3000-byte packet needs two opportunities (1504 + 1496); the next packet starts in
        // the 8 bytes left of the second opportunity and finishes in the third.
        let mut link = trace_link(&[1]);
        let out = run(&mut link, &[(0, 1, 3000), (0, 2, 1000)], 10 * MS);
        assert_eq!(out, vec![(1, 2 * MS), (2, 3 * MS)]);
    }

    #[test]
    fn arrival_at_opportunity_time_waits_for_the_next_one() {
        let mut link = trace_link(&[5, 10]);
        let out = run(&mut link, &[(5 * MS, 1, 1504), (7 * MS, 2, 1504)], 100 * MS);
        // 5 ms is taken by nothing (arrival at 5 ms cannot use it), 10 ms carries packet 1,
        // the next period's 15 ms (10 + 5) carries packet 2.
        assert_eq!(out, vec![(1, 10 * MS), (2, 15 * MS)]);
    }

    #[test]
    fn repeated_timestamps_are_several_opportunities_in_one_ms() {
        let mut link = trace_link(&[2, 2, 2, 4]);
        let arrivals: Vec<_> = (0..5).map(|i| (0, i, 1504)).collect();
        let out = run(&mut link, &arrivals, 100 * MS);
        let times: Vec<u64> = out.iter().map(|o| o.1 / MS).collect();
        // Period 4: opportunities at 2,2,2,4, then 6,6,6,8 ...
        assert_eq!(times, vec![2, 2, 2, 4, 6]);
    }

    #[test]
    fn trace_wraps_shifted_by_last_timestamp_and_idle_time_is_wasted() {
        let mut link = trace_link(&[0, 3]);
        // Period 3: opportunities at 0,3 | 3,6 | 6,9 | ... (0 + 3 coincides with 3).
        let arrivals: Vec<_> = (0..4).map(|i| (MS / 2, i, 1504)).collect();
        let out = run(&mut link, &arrivals, 100 * MS);
        let times: Vec<u64> = out.iter().map(|o| o.1 / MS).collect();
        assert_eq!(times, vec![3, 3, 6, 6]);

        // After 1000 idle ms nothing is banked: one packet per opportunity again.
        let mut link = trace_link(&[1]);
        let out = run(
            &mut link,
            &[(1_000_300_000, 1, 1504), (1_000_300_000, 2, 1504)],
            2_000 * MS,
        );
        assert_eq!(out, vec![(1, 1001 * MS), (2, 1002 * MS)]);
    }

    #[test]
    fn constant_rate_serialises_back_to_back() {
        // 12 Mbit/s: 1500 bytes take exactly 1 ms.
        let mut link = Link::new(Service::Rate(12_000_000), QueueSpec::Infinite);
        let out = run(
            &mut link,
            &[(0, 1, 1500), (0, 2, 1500), (5 * MS, 3, 750)],
            100 * MS,
        );
        assert_eq!(out, vec![(1, MS), (2, 2 * MS), (3, 5 * MS + MS / 2)]);
    }

    #[test]
    fn droptail_in_front_of_a_link_counts_waiting_packets_only() {
        let spec: QueueSpec = "droptail packets=2".parse().expect("spec");
        let mut link = Link::new(Service::Rate(12_000_000), spec).with_log(100);
        // One in service + two waiting; the fourth is dropped.
        let arrivals: Vec<_> = (0..4).map(|i| (0, i, 1500)).collect();
        let out = run(&mut link, &arrivals, 100 * MS);
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(link.stats().dropped, 1);
        let log = link.event_log().expect("log");
        assert!(log.events().iter().any(|e| matches!(
            e,
            LogEvent::Drop {
                id: 3,
                reason: DropReason::QueueFull,
                ..
            }
        )));
    }
}
