//! `recoup serve --moq URL`: a Media over QUIC relay egress. One upstream session subscribes to
//! the broadcasts of an unmodified MoQ relay (or publisher) at URL; viewers open WebTransport
//! sessions at [`PATH`], or QUIC connections whose ALPN is a MoQ version (raw QUIC, the
//! versions moq-net speaks), on recoup's own transport and subscribe to them there, so the
//! connection's loss-recovery policy (`--policy`) is what carries the media over the last hop.
//!
//! Both sides are moq-dev/moq's `moq-net` (the moq-lite protocol and its relay model: an origin
//! of broadcasts, tracks, groups, frames). Upstream it runs on its own thread over `moq-tokio`'s
//! QUIC client; downstream its sessions are sans-IO drivers polled by the connection's tasks
//! on the mio loop, over `transport::WtSession` or `quic::QuicSession`, which share one stream
//! layer (`transport`): deadlines and wake-ups are the same on both. A broadcast the upstream announces is
//! subscribed to upstream only while a viewer wants one of its tracks (the origin deduplicates
//! subscriptions, as a relay does).
//!
//! Deadlines: moq-lite sends each group on a unidirectional stream of its own. Every byte of a
//! group stream must be acknowledged within the deadline (`--moq-deadline`) of its write, or
//! the stream is reset (RESET_STREAM, RFC 9000 §3.1): a late object is neither retransmitted
//! nor copied by the policy, and the viewer moves on to the next group. moq-lite's SUBSCRIBE
//! carries a priority and a maximum age but no delivery timeout, so the deadline is the
//! server's, the same for every track. The priority (and a group's age) moq-net turns into each
//! group stream's send order, which the transport serves highest first.
//!
//! Bad input is the protocol's to answer: a SETUP that does not parse closes that session with
//! moq-lite's code (moq-net), logged; a control stream that does not parse after it is reset
//! (moq-lite's CANCEL) and logged by moq-net in the session's span, the session going on; a
//! subscription to an unknown broadcast or track is refused on its stream with moq-lite's
//! not-found error; a WebTransport session at another path is refused with 404; a raw-QUIC MoQ
//! connection while `--moq` is off is closed naming its ALPN (`crate::server`). When the
//! upstream session ends, its broadcasts are unannounced and the viewers' subscriptions to them
//! end; the upstream is dialled again with backoff, and the server keeps serving.

pub(crate) mod quic;
pub(crate) mod transport;

use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;
use std::time::Duration;

use h3_webtransport::SessionId;
use tracing::Instrument as _;

use crate::clock::Clock;
use crate::driver::Wakeup;
use crate::error::Error;
use crate::http3::adapter::{Datagrams, QuicConn, StreamTap};
use crate::http3::capsule::{Capsule, ConnectStream};
use crate::http3::tasks::{Spawner, Timers};
use crate::http3::webtransport::{Host, Session};
use quic::QuicSession;
use transport::{EndHandle, GroupDeadline, TransportError, WtParts, WtSession};

/// The WebTransport path of MoQ sessions (`https://HOST:PORT/moq`).
pub const PATH: &str = "/moq";

/// The default deadline of a group's bytes: past it, the group's stream is reset.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(500);

/// The stream error code a group stream is reset with when its deadline passed: moq-lite's
/// DELIVERY_TIMEOUT (moq-net's `StreamError::DeliveryTimeout`), as a relay that gave up on a
/// late group says it.
const DELIVERY_TIMEOUT: u32 = 0x2;

/// How long the egress waits before dialling the upstream again once moq-tokio gave up.
const REDIAL: Duration = Duration::from_secs(2);

/// What `recoup serve --moq` is given.
#[derive(Clone, Debug)]
pub struct MoqOptions {
    /// The upstream relay or publisher: `https://HOST:PORT/PATH` (WebTransport) or a URL
    /// moq-tokio dials otherwise (`moql://` for raw QUIC).
    pub upstream: String,
    /// PEM certificates to trust for the upstream besides the system's (a test relay's
    /// self-signed one).
    pub upstream_roots: Vec<std::path::PathBuf>,
    /// Each group's deadline.
    pub deadline: Duration,
}

/// The upstream session and the origin it fills, shared by every worker.
pub struct Upstream {
    origin: moq_net::origin::Consumer,
    deadline: Duration,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Starts the upstream session on a thread of its own (a tokio runtime: moq-tokio's QUIC
    /// client needs one); it dials `options.upstream` and redials with backoff whenever the
    /// session ends.
    pub fn start(options: &MoqOptions) -> Result<Arc<Self>, Error> {
        let url: url::Url = options
            .upstream
            .parse()
            .map_err(|e| Error::Config(format!("--moq {}: {e}", options.upstream)))?;
        // A viewer wants the live edge: a group older than the deadline would only be reset
        // on its way out, so the origin keeps (and asks the upstream for) no older media.
        let mut config = moq_net::origin::Config::default();
        config.cache_duration = options.deadline;
        config.default_max_age = options.deadline;
        let (producer, driver) = moq_net::origin::Producer::new(config);
        let origin = producer.consume();
        let mut connect = moq_tokio::connect::Config::default();
        connect.url = Some(url.clone());
        connect.tls.root.clone_from(&options.upstream_roots);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("the MoQ upstream's runtime", e))?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("moq-upstream".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::spawn(moq_net::time::run(driver));
                    let client = match connect.init(moq_tokio::quic::Config::default()) {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    // moq-tokio redials with backoff but gives up after a while without the
                    // upstream; the egress keeps serving, so it starts over.
                    loop {
                        let connection = client.clone().with_subscriber(producer.clone()).connect(url.clone());
                        let mut status = connection.clone();
                        loop {
                            match status.status().await {
                                // The viewers' subscriptions to its broadcasts end here.
                                Ok(moq_tokio::Status::Disconnected) => tracing::warn!(
                                    upstream = %url,
                                    "MoQ upstream lost: the session dropped; its broadcasts end, redialling with backoff"
                                ),
                                Ok(s) => tracing::info!(upstream = %url, "MoQ upstream: {s:?}"),
                                Err(e) => {
                                    tracing::warn!(upstream = %url, "MoQ upstream lost: {e}; dialling again in {REDIAL:?}");
                                    break;
                                }
                            }
                        }
                        drop(connection);
                        tokio::time::sleep(REDIAL).await;
                    }
                });
            })
            .map_err(|e| Error::io("the MoQ upstream's thread", e))?;
        ready_rx
            .recv()
            .map_err(|_| Error::Config("the MoQ upstream's thread stopped".into()))?
            .map_err(|e| Error::Config(format!("--moq {}: {e}", options.upstream)))?;
        Ok(Arc::new(Self {
            origin,
            deadline: options.deadline,
        }))
    }
}

/// A worker's view of the upstream: how its MoQ sessions reach its driver and clock.
#[derive(Clone, Debug)]
pub struct Egress {
    upstream: Arc<Upstream>,
    wakeup: Wakeup,
    clock: Clock,
}

impl Egress {
    fn deadline(&self) -> GroupDeadline {
        GroupDeadline {
            budget: self.upstream.deadline,
            expired_code: DELIVERY_TIMEOUT,
        }
    }

    #[must_use]
    pub fn new(upstream: Arc<Upstream>, wakeup: Wakeup, clock: Clock) -> Self {
        Self {
            upstream,
            wakeup,
            clock,
        }
    }
}

/// The connection a MoQ session runs on.
pub(crate) struct Connection {
    pub quic: QuicConn,
    pub connect: StreamTap,
    pub datagrams: Datagrams,
    pub spawner: Spawner,
    pub timers: Arc<Timers>,
    pub remote: std::net::SocketAddr,
}

/// Serves one viewer's MoQ session until it ends: moq-lite's handshake, then the session's
/// driver, with the session's CONNECT stream watched for the client's close.
pub(crate) async fn serve(
    egress: Egress,
    session: Session,
    conn: Connection,
    host: impl Host + 'static,
) {
    let remote = conn.remote;
    let Ok(id) = SessionId::try_from(conn.connect.id()) else {
        return;
    };
    let watch_connect = conn.quic.tap(conn.connect.id());
    let (wt, end) = WtSession::new(WtParts {
        session,
        id,
        quic: conn.quic.clone(),
        connect: conn.connect,
        datagrams: conn.datagrams,
        deadline: egress.deadline(),
        host: Box::new(host),
    });
    conn.spawner
        .spawn(watch(watch_connect, end.clone(), remote));
    tracing::info!(%remote, "MoQ session accepted (WebTransport)");
    let draining = || !end.is_ended() && end.draining();
    if let Err(e) = run(&egress, wt, &conn.timers, remote, draining).await {
        end.end(TransportError::Other(format!("handshake failed: {e}")));
        end.release();
        return;
    }
    end.end(TransportError::Other("the MoQ session ended".into()));
    end.release();
}

/// Serves one viewer's MoQ session over raw QUIC (a connection whose ALPN is `alpn`, one of
/// [`quic::ALPNS`]) until it ends; then the connection is closed.
pub(crate) async fn serve_quic(
    egress: Egress,
    quic: QuicConn,
    alpn: &'static str,
    timers: Arc<Timers>,
    remote: std::net::SocketAddr,
) {
    tracing::info!(%remote, alpn, "MoQ session accepted (raw QUIC)");
    let session = QuicSession::new(quic.clone(), alpn, egress.deadline());
    // The server drains a raw MoQ connection by closing it (`crate::server`).
    let _ = run(&egress, session, &timers, remote, || false).await;
    // No-op when moq-net closed it already with its code, or the peer did.
    quic.close(0, "the MoQ session ended");
}

/// moq-lite's handshake on `transport`, then the session's driver until it ends; `Err` when the
/// handshake failed (moq-net closed the session with the code for what was wrong).
async fn run<S>(
    egress: &Egress,
    transport: S,
    timers: &Arc<Timers>,
    remote: std::net::SocketAddr,
    draining: impl Fn() -> bool,
) -> Result<(), moq_net::Error>
where
    S: moq_net::transport::poll::Boxable,
    S::SendStream: Sync,
    S::RecvStream: Sync,
{
    let closer = transport.clone();
    let server = moq_net::Server::new().with_publisher(egress.upstream.origin.clone());
    let now = egress.clock.std_instant(timers.now());
    // moq-net's own log lines (a control stream that does not parse, a refused subscription)
    // name the session they are about.
    let span = tracing::info_span!("moq", %remote);
    let (session, driver) = match server.accept(now, transport).instrument(span.clone()).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%remote, "MoQ session refused: {e}");
            return Err(e);
        }
    };
    tracing::info!(%remote, version = ?session.version(), "MoQ session established");
    let result = drive(driver, egress, timers, draining, closer)
        .instrument(span)
        .await;
    match result {
        // Closed by either side without an error (moq-lite's session code 0).
        moq_net::Error::Closed | moq_net::Error::Session(moq_net::SessionError::Cancel) => {
            tracing::info!(%remote, "MoQ session ended");
        }
        e => tracing::warn!(%remote, "MoQ session ended: {e}"),
    }
    drop(session);
    Ok(())
}

/// Wakes the task, and the driver too when the wake comes from another thread (the upstream
/// delivered a frame): the driver only runs tasks when it is driven.
struct CrossWake {
    task: Waker,
    wakeup: Wakeup,
    thread: ThreadId,
}

impl Wake for CrossWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.task.wake_by_ref();
        if std::thread::current().id() != self.thread {
            self.wakeup.wake();
        }
    }
}

/// A wait for the driver's clock to reach a deadline ([`Timers::sleep_until`]).
type Sleep = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Polls moq-net's driver on the connection's tasks until it finishes: at every wake, and at
/// each deadline it asks for (on the driver's clock, [`Timers`]).
async fn drive<S: moq_net::transport::poll::Session>(
    mut driver: moq_net::Driver<S>,
    egress: &Egress,
    timers: &Arc<Timers>,
    draining: impl Fn() -> bool,
    mut closer: S,
) -> moq_net::Error {
    // The tasks run on the driver's thread.
    let thread = std::thread::current().id();
    let mut sleep: Option<(recoup_time::Instant, Sleep)> = None;
    std::future::poll_fn(|cx: &mut Context<'_>| loop {
        // On SIGTERM the server ends the session itself, as it ends echo sessions
        // (CLOSE_WEBTRANSPORT_SESSION, code 0, `draining`); moq-net then finishes.
        if draining() {
            web_transport_trait::poll::Session::close(&mut closer, 0, "draining");
        }
        let waker = Waker::from(Arc::new(CrossWake {
            task: cx.waker().clone(),
            wakeup: egress.wakeup.clone(),
            thread,
        }));
        let waiter = kio::Waiter::new(waker);
        let now = timers.now();
        let at = match driver.poll(egress.clock.std_instant(now), &waiter) {
            Err(e) => return Poll::Ready(e),
            Ok(None) => {
                sleep = None;
                return Poll::Pending;
            }
            Ok(Some(at)) => egress.clock.from_std(at),
        };
        if at <= now {
            continue;
        }
        if sleep.as_ref().is_none_or(|(due, _)| *due != at) {
            let t = Arc::clone(timers);
            sleep = Some((at, Box::pin(async move { t.sleep_until(at).await })));
        }
        if let Some((_, s)) = &mut sleep {
            if s.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        sleep = None;
    })
    .await
}

/// Watches a MoQ session's CONNECT stream: the client's CLOSE_WEBTRANSPORT_SESSION, DRAIN or
/// FIN, or a malformed capsule, ends the session (draft-ietf-webtrans-http3, Session
/// Termination).
async fn watch(connect: StreamTap, end: EndHandle, remote: std::net::SocketAddr) {
    let mut parser = ConnectStream::default();
    let why = loop {
        let next = std::future::poll_fn(|cx| {
            if end.is_ended() {
                return Poll::Ready(None);
            }
            connect.poll_data(cx).map(Some)
        })
        .await;
        match next {
            None => return,
            Some(Ok(Some(bytes))) => match parser.feed(&bytes) {
                Ok(capsules) => {
                    if let Some(c) = capsules.into_iter().next() {
                        break match c {
                            Capsule::Close { code, reason } => {
                                TransportError::SessionClosed { code, reason }
                            }
                            Capsule::Drain => TransportError::SessionClosed {
                                code: 0,
                                reason: "drained by the client".into(),
                            },
                        };
                    }
                }
                Err(bad) => {
                    tracing::warn!(%remote, code = bad.code, "WebTransport CONNECT stream malformed: {}", bad.why);
                    connect.abort(bad.code);
                    break TransportError::Other(format!("CONNECT stream malformed: {}", bad.why));
                }
            },
            Some(Ok(None)) => {
                break TransportError::SessionClosed {
                    code: 0,
                    reason: "the client ended its CONNECT stream".into(),
                }
            }
            Some(Err(e)) => break TransportError::Other(format!("CONNECT stream ended: {e}")),
        }
    };
    tracing::info!(%remote, "MoQ session's WebTransport session ended: {why}");
    // The server's side of the CONNECT stream ends too (draft-ietf-webtrans-http3, Session
    // Termination).
    connect.finish_with(Vec::new());
    end.end(why);
}
