//! The event loop over virtual time.

use std::collections::VecDeque;
use std::net::SocketAddr;

use foldhash::{HashMap, HashMapExt};
use recoup_elements::{Datagram, ElementStats, NamedNode, Node, Output};
use recoup_time::{IndexedHeap, Instant};

/// Handle of a node in a [`Simulator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// Where a node's outputs go.
#[derive(Debug, Clone, Default)]
enum Route {
    /// Dropped and counted as unroutable.
    #[default]
    Nowhere,
    /// Every output enters this node.
    To(usize),
    /// Outputs enter the node registered for their destination address.
    Table(HashMap<SocketAddr, usize>),
}

struct Slot {
    name: String,
    node: Box<dyn Node>,
    route: Route,
}

/// When a node wakes: ordered by time, then by the order it was scheduled in, which makes ties
/// deterministic.
type Key = (Instant, u64);

/// What the loop did, recorded when [`Simulator::record`] is on (for determinism checks and
/// debugging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimEvent {
    /// Virtual time.
    pub time: Instant,
    /// The node called.
    pub node: NodeId,
    /// Tag of the datagram handed in, if any.
    pub input: Option<u64>,
    /// Tag of the datagram that came out, if any.
    pub output: Option<u64>,
}

/// Drives any number of [`Node`]s on virtual time.
///
/// Datagrams a node emits are delivered to the next node at the same instant (a FIFO of
/// same-time deliveries, drained before time advances); wake-ups sit in a heap with one entry
/// per node ordered by (time, scheduling order), so a run is deterministic and each event costs
/// O(log nodes).
pub struct Simulator {
    slots: Vec<Slot>,
    /// The pending wake-ups, one per node at most.
    heap: IndexedHeap<Key>,
    pending: VecDeque<(usize, Datagram)>,
    /// The node [`Simulator::step`] woke, whose served entry is still in the heap until its
    /// answer replaces or removes it.
    woken: Option<usize>,
    now: Instant,
    seq: u64,
    calls: u64,
    unroutable: u64,
    record: Option<Vec<SimEvent>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field(
                "nodes",
                &self.slots.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("now", &self.now)
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

impl Default for Simulator {
    fn default() -> Self {
        Self::new()
    }
}

impl Simulator {
    /// An empty simulation at [`Instant::ZERO`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            heap: IndexedHeap::default(),
            pending: VecDeque::new(),
            woken: None,
            now: Instant::ZERO,
            seq: 0,
            calls: 0,
            unroutable: 0,
            record: None,
        }
    }

    /// Record every node call as a [`SimEvent`] from now on.
    pub fn record(&mut self) {
        self.record.get_or_insert_with(Vec::new);
    }

    /// The recorded events (empty unless [`Simulator::record`] was called).
    #[must_use]
    pub fn events(&self) -> &[SimEvent] {
        self.record.as_deref().unwrap_or(&[])
    }

    /// Add a node; it is called once with `None` at the current time. Its outputs go nowhere
    /// until [`Simulator::connect`] or [`Simulator::route`] says where.
    pub fn add_node(&mut self, name: impl Into<String>, node: Box<dyn Node>) -> NodeId {
        let id = self.slots.len();
        self.slots.push(Slot {
            name: name.into(),
            node,
            route: Route::Nowhere,
        });
        self.schedule(id, self.now);
        NodeId(id)
    }

    /// Send every output of `from` to `to`.
    pub fn connect(&mut self, from: NodeId, to: NodeId) {
        self.slots[from.0].route = Route::To(to.0);
    }

    /// Send outputs of `from` addressed to `dst` to `to` (for endpoints with several peers, or
    /// a shared link feeding several endpoints). Replaces a [`Simulator::connect`].
    pub fn route(&mut self, from: NodeId, dst: SocketAddr, to: NodeId) {
        let slot = &mut self.slots[from.0];
        if !matches!(slot.route, Route::Table(_)) {
            slot.route = Route::Table(HashMap::new());
        }
        if let Route::Table(t) = &mut slot.route {
            t.insert(dst, to.0);
        }
    }

    /// Add `elements` as a chain `from → e0 → e1 → … → to` for datagrams `from` sends to
    /// `dst`; returns the element ids in order. With no elements, `from` reaches `to` directly.
    pub fn add_path(
        &mut self,
        from: NodeId,
        dst: SocketAddr,
        elements: Vec<NamedNode>,
        to: NodeId,
    ) -> Vec<NodeId> {
        let ids: Vec<NodeId> = elements
            .into_iter()
            .map(|(name, node)| self.add_node(name, node))
            .collect();
        let mut prev = None;
        for &id in &ids {
            match prev {
                None => self.route(from, dst, id),
                Some(p) => self.connect(p, id),
            }
            prev = Some(id);
        }
        match prev {
            None => self.route(from, dst, to),
            Some(p) => self.connect(p, to),
        }
        ids
    }

    /// Current virtual time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Number of node calls so far (the event count used in benchmarks).
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Datagrams that had no route and were discarded.
    #[must_use]
    pub fn unroutable(&self) -> u64 {
        self.unroutable
    }

    /// A node, for its stats and event log.
    #[must_use]
    pub fn node(&self, id: NodeId) -> &dyn Node {
        self.slots[id.0].node.as_ref()
    }

    /// A node, mutably (e.g. to reach an endpoint's application between steps).
    pub fn node_mut(&mut self, id: NodeId) -> &mut dyn Node {
        self.slots[id.0].node.as_mut()
    }

    /// The node as its concrete type, if it is a `T` and implements [`Node::as_any`].
    #[must_use]
    pub fn downcast<T: 'static>(&self, id: NodeId) -> Option<&T> {
        self.slots[id.0].node.as_any()?.downcast_ref()
    }

    /// Mutable counterpart of [`Simulator::downcast`].
    pub fn downcast_mut<T: 'static>(&mut self, id: NodeId) -> Option<&mut T> {
        self.slots[id.0].node.as_any_mut()?.downcast_mut()
    }

    /// The name a node was added with.
    #[must_use]
    pub fn name(&self, id: NodeId) -> &str {
        &self.slots[id.0].name
    }

    /// Stats of every node, by name, in the order they were added.
    #[must_use]
    pub fn stats(&self) -> Vec<(&str, ElementStats)> {
        self.slots
            .iter()
            .map(|s| (s.name.as_str(), s.node.stats()))
            .collect()
    }

    /// Time of the next wake-up, if any.
    #[must_use]
    pub fn next_time(&mut self) -> Option<Instant> {
        self.heap.peek().map(|((time, _), _)| time)
    }

    /// Process the next wake-up and everything it causes at that instant. Returns `false` when
    /// nothing is left to do.
    pub fn step(&mut self) -> bool {
        let Some(((time, _), node)) = self.heap.peek() else {
            return false;
        };
        self.now = time;
        // The node's entry stays on top while it runs, and its answer moves it once (`call`):
        // one sift where a removal now and an insertion then took two.
        self.woken = Some(node);
        self.call(node, None);
        self.drain();
        true
    }

    /// Run every event up to and including `end`, then set the clock to `end`.
    pub fn run_until(&mut self, end: Instant) {
        while self.next_time().is_some_and(|t| t <= end) {
            self.step();
        }
        self.now = self.now.max(end);
    }

    fn schedule(&mut self, node: usize, time: Instant) {
        // The woken node's entry is the wake-up just served: whatever it asks is a new one,
        // queued after equal times.
        let woken = self.woken.take_if(|&mut w| w == node).is_some();
        let same = !woken && self.heap.get(node).is_some_and(|(t, _)| t == time);
        if same {
            // Asking again for the time already asked keeps its place among equal times.
            return;
        }
        self.seq += 1;
        self.heap.set(node, (time, self.seq));
    }

    fn drain(&mut self) {
        while let Some((node, d)) = self.pending.pop_front() {
            self.call(node, Some(d));
        }
    }

    /// Call `node` with `input`, then with `None` while it keeps emitting datagrams.
    fn call(&mut self, node: usize, mut input: Option<Datagram>) {
        let now = self.now;
        loop {
            let input_id = input.as_ref().map(|d| d.id);
            let slot = &mut self.slots[node];
            let out = slot.node.process(input.take(), now);
            self.calls += 1;
            if let Some(rec) = self.record.as_mut() {
                rec.push(SimEvent {
                    time: now,
                    node: NodeId(node),
                    input: input_id,
                    output: match &out {
                        Output::Datagram(d) => Some(d.id),
                        _ => None,
                    },
                });
            }
            match out {
                Output::Datagram(d) => {
                    let next = match &slot.route {
                        Route::To(n) => Some(*n),
                        Route::Table(t) => t.get(&d.dst).copied(),
                        Route::Nowhere => None,
                    };
                    match next {
                        Some(n) => self.pending.push_back((n, d)),
                        None => self.unroutable += 1,
                    }
                }
                Output::Callback(t) => {
                    self.schedule(node, t.max(now));
                    return;
                }
                Output::None => {
                    self.woken.take_if(|&mut w| w == node);
                    self.heap.remove(node);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Emits one datagram per wake-up at the given times, each to `dst`.
    struct Script {
        times: Vec<u64>,
        next: usize,
        src: SocketAddr,
        dst: SocketAddr,
        got: Vec<(u64, u64)>,
    }

    impl Node for Script {
        fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
            if let Some(d) = input {
                self.got.push((d.id, now.as_nanos()));
            }
            match self.times.get(self.next) {
                Some(&t) if t <= now.as_nanos() => {
                    self.next += 1;
                    Output::Datagram(Datagram::new(self.src, self.dst, vec![]).with_id(t))
                }
                Some(&t) => Output::Callback(Instant::from_nanos(t)),
                None => Output::None,
            }
        }
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[test]
    fn routes_by_destination_and_orders_ties_stably() {
        let mut sim = Simulator::new();
        sim.record();
        let a = sim.add_node(
            "a",
            Box::new(Script {
                times: vec![5, 5, 9],
                next: 0,
                src: addr(1),
                dst: addr(2),
                got: vec![],
            }),
        );
        let b = sim.add_node(
            "b",
            Box::new(Script {
                times: vec![5],
                next: 0,
                src: addr(2),
                dst: addr(3),
                got: vec![],
            }),
        );
        sim.add_path(a, addr(2), vec![], b);
        // b sends to an address nobody serves.
        sim.run_until(Instant::from_nanos(100));
        assert_eq!(sim.unroutable(), 1);
        assert_eq!(sim.now(), Instant::from_nanos(100));
        let ev: Vec<(u64, usize, Option<u64>, Option<u64>)> = sim
            .events()
            .iter()
            .map(|e| (e.time.as_nanos(), e.node.0, e.input, e.output))
            .collect();
        assert_eq!(
            ev,
            vec![
                (0, 0, None, None),
                (0, 1, None, None),
                // a was scheduled first at 5, so it runs first.
                (5, 0, None, Some(5)),
                (5, 0, None, Some(5)),
                (5, 0, None, None),
                // Both datagrams reach b at 5; b's own wake-up at 5 is superseded by the
                // answers it gives on delivery.
                (5, 1, Some(5), Some(5)),
                (5, 1, None, None),
                (5, 1, Some(5), None),
                (9, 0, None, Some(9)),
                (9, 0, None, None),
                (9, 1, Some(9), None),
            ]
        );
    }
}
