//! HTTP/3 (RFC 9114, QPACK RFC 9204) for `recoup serve` and `recoup get`, with the `h3` crate
//! over recoup's transport.
//!
//! # Why futures on the mio loop
//!
//! h3 is written as futures over its `h3::quic` traits. The transport is sans-IO and its
//! connections are lent to the application only inside [`crate::driver::ConnectionHandler::drive`],
//! so the smallest design that keeps it so is to run h3's futures right there: each connection has
//! a few tasks (`tasks::Tasks`: its h3 connection, one per request) whose wakers only set a flag,
//! and a mailbox (`adapter::Mailbox`) that implements h3's traits and is synchronized with the
//! transport before and after the tasks run (`session::Session::drive`). No runtime, no threads, no
//! second event loop: the mio driver still owns the socket, the clock (tasks sleep on the driver's
//! time through `tasks::Timers`) and the pacing of every send, and qlog, GSO and the loss-recovery
//! policies work as they do for hq-interop.
//!
//! HTTP framing, QPACK and their error codes are h3's; this module only maps requests to
//! content ([`crate::content`]) and responses to bytes.

pub(crate) mod adapter;
pub(crate) mod capsule;
pub(crate) mod get;
pub(crate) mod serve;
pub(crate) mod session;
pub(crate) mod tasks;
pub(crate) mod webtransport;

/// The ALPN token of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

/// H3_NO_ERROR (RFC 9114 §8.1): the close code of a connection that ends normally.
pub const NO_ERROR: u64 = 0x100;
