//! The QUIC transport as a simulator [`Node`]: an [`Endpoint`] with an application on top.
//!
//! The very same transport code that serves real clients runs here (DESIGN.md principle 2); only
//! the clock is virtual.

use std::any::Any;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

use recoup_elements::{Datagram, Node, Output};
use recoup_time::{earliest, Instant};
use recoup_transport::Endpoint;

/// The application half of a [`QuicNode`]: what runs on top of its endpoint (opens streams,
/// writes and reads, closes). [`crate::run`]'s driver puts a `recoup_apps::StreamApp` here.
pub trait NodeApp {
    /// Called after every datagram and timer the endpoint handled, before it sends. Use the
    /// endpoint's connections freely; return when to be called again even if nothing arrives.
    fn poll(&mut self, now: Instant, endpoint: &mut Endpoint) -> Option<Instant>;
}

/// A QUIC endpoint and its application, addressable at `addr`.
#[derive(Debug)]
pub struct QuicNode<A> {
    addr: SocketAddr,
    endpoint: Endpoint,
    app: A,
    app_wakeup: Option<Instant>,
    /// (send time, FNV-1a hash of the payload) of every datagram sent, when recording.
    sent_log: Option<Vec<(Instant, u64)>>,
    /// The buffer the next datagram is written into: made with room for a whole datagram (or
    /// a received one's, recycled), and kept while there is nothing to send, so a datagram
    /// costs at most one allocation, not the reallocations of a buffer growing frame by frame.
    spare: Vec<u8>,
}

thread_local! {
    /// Buffers of datagrams their receivers have read, for the next datagrams sent. Per thread:
    /// the nodes of one run share a thread, so the receiver's buffers serve the sender and most
    /// datagrams cost no allocation. Contents are cleared, so reuse never shows in a result.
    static RECYCLED: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Buffers kept for reuse per thread, at most: a window's worth of datagrams.
const RECYCLED_MAX: usize = 256;

/// A buffer for the next datagram: a recycled one, or a new one with room for a datagram.
fn datagram_buffer() -> Vec<u8> {
    RECYCLED
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| Vec::with_capacity(DATAGRAM_CAPACITY))
}

/// Keeps a read datagram's buffer for [`datagram_buffer`].
fn recycle(mut buf: Vec<u8>) {
    if buf.capacity() < DATAGRAM_CAPACITY {
        return;
    }
    buf.clear();
    RECYCLED.with_borrow_mut(|pool| {
        if pool.len() < RECYCLED_MAX {
            pool.push(buf);
        }
    });
}

/// Room for the transport's default largest datagram (1350 bytes) and more; a larger
/// configured size costs one reallocation.
const DATAGRAM_CAPACITY: usize = 1500;

/// Smallest step a wake-up moves forward when a timer is already due, so the loop advances.
const MIN_STEP: Duration = Duration::from_micros(1);

impl<A: NodeApp> QuicNode<A> {
    pub fn new(addr: SocketAddr, endpoint: Endpoint, app: A) -> Self {
        Self {
            addr,
            endpoint,
            app,
            app_wakeup: None,
            sent_log: None,
            spare: datagram_buffer(),
        }
    }

    /// Keep a log of every datagram sent (time and content hash), for determinism checks.
    pub fn record_sends(&mut self) {
        self.sent_log.get_or_insert_with(Vec::new);
    }

    /// The log kept since [`QuicNode::record_sends`].
    #[must_use]
    pub fn sent_log(&self) -> &[(Instant, u64)] {
        self.sent_log.as_deref().unwrap_or(&[])
    }

    fn emit(&mut self, now: Instant, t: recoup_transport::Transmit) -> Output {
        if let Some(log) = self.sent_log.as_mut() {
            log.push((now, fnv1a(&t.contents)));
        }
        Output::Datagram(Datagram::new(self.addr, t.destination, t.contents).with_key(t.key))
    }

    #[must_use]
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    #[must_use]
    pub fn app(&self) -> &A {
        &self.app
    }

    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl<A: NodeApp + 'static> Node for QuicNode<A> {
    fn process(&mut self, input: Option<Datagram>, now: Instant) -> Output {
        match input {
            Some(mut d) => {
                let _ = self
                    .endpoint
                    .handle_datagram_in_place(now, d.src, &mut d.payload);
                recycle(d.payload);
            }
            None => {
                if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                    self.endpoint.handle_timeout(now);
                }
            }
        }
        // The application reacts to what arrived (and to its own timers) before anything is sent.
        self.app_wakeup = self.app.poll(now, &mut self.endpoint);
        if let Some(t) = self.endpoint.poll_transmit_into(now, &mut self.spare) {
            let contents = std::mem::replace(&mut self.spare, datagram_buffer());
            return self.emit(now, t.with_contents(contents));
        }
        match earliest(self.endpoint.poll_timeout(), self.app_wakeup) {
            Some(t) => Output::Callback(t.max(now + MIN_STEP)),
            None => Output::None,
        }
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
