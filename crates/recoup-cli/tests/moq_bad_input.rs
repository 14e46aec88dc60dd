//! Bad input at the MoQ relay egress (`recoup serve --moq`), with the real upstream: moq-relay
//! and moq-cli (unmodified, crates.io; scripts/moq-deps.sh installs them into
//! ~/.cache/recoup/moq-peers) carry a small ffmpeg test broadcast to the egress, and an
//! unmodified `moq export` (moq-cli) watches it through the egress while the bad input arrives.
//! The bad input comes from moq-tokio's own WebTransport client running moq-net (both
//! unmodified), with raw bytes written on a stream of its established session:
//!
//! - a malformed control stream after SETUP (a stream type no moq-lite version defines, a
//!   SUBSCRIBE cut short, a SUBSCRIBE whose fields run past its size) is reset with moq-lite's
//!   CANCEL, as moq-net answers it, the session going on; the egress logs what was wrong in
//!   the session's span, and the other viewer keeps receiving;
//! - a subscription to a track the broadcast does not have is answered with moq-lite's
//!   not-found error, logged;
//! - the upstream relay killed mid-broadcast: the viewer's subscription ends, the egress logs
//!   it, and once the relay is back and the publisher has published again, a new viewer
//!   receives the broadcast.
//!
//! A WebTransport session at another path than /moq is answered 404 (moq_live.rs).

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{certificate, now, recoup, Proc};

/// The broadcast the publisher puts on the relay.
const BROADCAST: &str = "test";
/// How long a step may take before the test fails (the longest, the egress redialling the relay
/// with moq-tokio's backoff, takes a few seconds; the margin is for a loaded 2-core machine).
const STEP: Duration = Duration::from_secs(20);
/// Three groups' time (a group a second): a viewer that received nothing new for this long is
/// not watching.
const QUIET: Duration = Duration::from_secs(3);

/// A binary of moq-dev/moq installed by scripts/moq-deps.sh (its `$MOQ_ROOT`).
fn moq_peer(name: &str) -> PathBuf {
    let root = std::env::var_os("MOQ_ROOT").map_or_else(
        || {
            let cache = std::env::var_os("XDG_CACHE_HOME").map_or_else(
                || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"),
                PathBuf::from,
            );
            cache.join("recoup/moq-peers")
        },
        PathBuf::from,
    );
    let bin = root.join("bin").join(name);
    assert!(
        bin.is_file(),
        "{} not found: scripts/moq-deps.sh installs it (scripts/test.sh runs it first)",
        bin.display()
    );
    bin
}

/// A peer process, killed when dropped, its stderr (and stdout unless taken) in a log file.
struct Peer {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Peer {
    fn start(name: &str, mut cmd: Command, dir: &Path, stdin: Stdio, stdout: Stdio) -> Self {
        let log = dir.join(format!("{name}.log"));
        let err = std::fs::File::create(&log).expect("log file");
        let child = cmd
            .stdin(stdin)
            .stdout(stdout)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        Self {
            name: name.to_owned(),
            child,
            log,
        }
    }

    fn log(&self) -> String {
        format!("--- {} log:\n{}", self.name, common::read_log(&self.log))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// A UDP port free on loopback now (moq-relay prints no address of its own).
fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
        .port()
}

/// Waits until `done` holds, polling; panics with `what` and `logs` past [`STEP`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool, mut logs: impl FnMut() -> String) {
    let deadline = now() + STEP;
    while !done() {
        assert!(now() < deadline, "{what}: not within {STEP:?}\n{}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// moq-relay on `port`, anonymous access under /anon, with `cert`.
fn relay(port: u16, cert: &Path, key: &Path, dir: &Path) -> Peer {
    let mut cmd = Command::new(moq_peer("moq-relay"));
    cmd.args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--listen-tls-cert")
        .arg(cert)
        .arg("--listen-tls-key")
        .arg(key)
        .args(["--auth-public", "anon/**"])
        .env("RUST_LOG", "info");
    Peer::start("moq-relay", cmd, dir, Stdio::null(), Stdio::null())
}

/// ffmpeg (a live 10 fps test pattern, H.264, a group a second, fragmented MP4) piped into
/// `moq import fmp4`, publishing the broadcast on the relay at `url`.
fn publisher(url: &str, cert: &Path, dir: &Path) -> (Peer, Peer) {
    let mut ffmpeg = Command::new("ffmpeg");
    ffmpeg.args(["-hide_banner", "-loglevel", "warning", "-re", "-f", "lavfi"]);
    ffmpeg.args(["-i", "testsrc2=size=160x90:rate=10", "-c:v", "libx264"]);
    ffmpeg.args([
        "-preset",
        "ultrafast",
        "-tune",
        "zerolatency",
        "-profile:v",
        "baseline",
    ]);
    ffmpeg.args([
        "-pix_fmt", "yuv420p", "-bf", "0", "-g", "10", "-b:v", "100k", "-f", "mp4",
    ]);
    ffmpeg.args([
        "-movflags",
        "cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame",
        "-",
    ]);
    let mut encoder = Peer::start("ffmpeg", ffmpeg, dir, Stdio::null(), Stdio::piped());
    let pipe = encoder.child.stdout.take().expect("ffmpeg's stdout");
    let mut moq = Command::new(moq_peer("moq"));
    moq.args(["--connect", url, "--connect-tls-root"])
        .arg(cert)
        .args(["import", "--broadcast", BROADCAST, "fmp4"]);
    let publisher = Peer::start("moq import", moq, dir, Stdio::from(pipe), Stdio::null());
    (encoder, publisher)
}

/// `recoup serve --moq` of the relay at `upstream`, logging at info level.
fn edge(upstream: &str, cert: &Path, key: &Path) -> (Proc, SocketAddr) {
    let mut cmd = Command::new(recoup());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--cert"])
        .arg(cert)
        .arg("--key")
        .arg(key)
        .args(["--moq", upstream, "--moq-root"])
        .arg(cert)
        .env("RUST_LOG", "info");
    Proc::server("recoup serve --moq", cmd)
}

/// An unmodified viewer, `moq export fmp4` of the broadcast through the egress at `edge`: the
/// media it receives is written to a file whose growth shows it watching.
struct Viewer {
    peer: Peer,
    out: PathBuf,
}

impl Viewer {
    fn start(name: &str, edge: SocketAddr, cert: &Path, dir: &Path) -> Self {
        let out = dir.join(format!("{name}.mp4"));
        let file = std::fs::File::create(&out).expect("viewer output");
        let mut cmd = Command::new(moq_peer("moq"));
        cmd.args([
            "--connect",
            &format!("https://127.0.0.1:{}/moq", edge.port()),
        ])
        .arg("--connect-tls-root")
        .arg(cert)
        .args(["export", "--broadcast", BROADCAST, "fmp4"]);
        Self {
            peer: Peer::start(name, cmd, dir, Stdio::null(), Stdio::from(file)),
            out,
        }
    }

    fn received(&self) -> u64 {
        std::fs::metadata(&self.out).map_or(0, |m| m.len())
    }

    /// Waits until it has received media beyond what it had.
    fn wait_for_more(&self, edge: &mut Proc) {
        let before = self.received();
        wait_until(
            &format!("{} receiving media (had {before} bytes)", self.peer.name),
            || self.received() > before,
            || format!("{}\n{}", self.peer.log(), edge.output()),
        );
    }

    /// Whether it is still receiving: more media within [`QUIET`].
    fn still_receiving(&self) -> bool {
        let before = self.received();
        let deadline = now() + QUIET;
        while now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            if self.received() > before {
                return true;
            }
        }
        false
    }
}

/// The relay, the publisher and the egress, and one viewer watching through it.
struct LivePath {
    dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    relay_port: u16,
    relay: Option<Peer>,
    publisher: Option<(Peer, Peer)>,
    edge: Proc,
    addr: SocketAddr,
    viewer: Viewer,
}

impl LivePath {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        // The certificate in a folder of its own: moq-tokio reloads its certificates whenever
        // a file beside them changes, and the logs change all the time.
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).expect("certificate folder");
        let (cert, key) = certificate(&certs);
        let relay_port = free_udp_port();
        let relay = relay(relay_port, &cert, &key, dir.path());
        let url = format!("https://127.0.0.1:{relay_port}/anon");
        // moq-relay has no ready line; the publisher dials it again if it is not up yet.
        std::thread::sleep(Duration::from_millis(500));
        let publisher = publisher(&url, &cert, dir.path());
        let (mut edge, addr) = edge(&url, &cert, &key);
        let viewer = Viewer::start("viewer", addr, &cert, dir.path());
        viewer.wait_for_more(&mut edge);
        Self {
            dir,
            cert,
            key,
            relay_port,
            relay: Some(relay),
            publisher: Some(publisher),
            edge,
            addr,
            viewer,
        }
    }

    fn logs(&mut self) -> String {
        let mut s = String::new();
        for p in self
            .relay
            .iter()
            .chain(self.publisher.iter().map(|(_, p)| p))
        {
            s += &p.log();
            s += "\n";
        }
        s + &self.viewer.peer.log() + "\n" + &self.edge.output()
    }
}

/// What the egress answered on a stream of raw bytes written on an established session.
#[derive(Debug)]
#[expect(
    dead_code,
    reason = "the failure messages show the fields, through Debug"
)]
enum Answer {
    /// The stream was reset with this code (RESET_STREAM; WebTransport's code space).
    Reset(u32),
    /// The session was closed with this code (CLOSE_WEBTRANSPORT_SESSION).
    SessionClosed(u32, String),
    /// The stream ended normally after these bytes.
    Finished(Vec<u8>),
    /// Something else, described.
    Other(String),
}

/// A WebTransport session at the egress's /moq, by moq-tokio's client (the test's certificate
/// is not checked: the egress is on loopback).
async fn webtransport(edge: SocketAddr) -> web_transport_moq::Session {
    let client = web_transport_moq::ClientBuilder::new()
        .dangerous()
        .with_no_certificate_verification()
        .expect("WebTransport client");
    let url: url::Url = format!("https://127.0.0.1:{}/moq", edge.port())
        .parse()
        .expect("URL");
    client.connect(url).await.expect("WebTransport session")
}

/// Opens a moq-lite session at the egress with moq-tokio's WebTransport client and moq-net,
/// then writes `bytes` on a new bidirectional stream of that session: the answer, and whether
/// the session was still open after it.
async fn raw_stream_after_setup(edge: SocketAddr, bytes: &[u8]) -> (Answer, bool) {
    let wt = webtransport(edge).await;
    let raw = wt.clone();
    let (session, driver) = moq_net::Client::new()
        .connect(now(), moq_tokio::transport::Session::new(wt))
        .await
        .expect("moq-lite SETUP");
    tokio::spawn(moq_net::time::run(driver));
    let (mut send, mut recv) = raw.open_bi().await.expect("a bidirectional stream");
    send.write_all(bytes).await.expect("write");
    send.finish().expect("FIN");
    let answer = tokio::select! {
        read = recv.read_to_end(64 * 1024) => match read {
            Ok(data) => Answer::Finished(data),
            Err(web_transport_moq::ReadToEndError::ReadError(web_transport_moq::ReadError::Reset(code))) => Answer::Reset(code),
            Err(e) => match raw.close_reason() {
                Some(web_transport_moq::SessionError::WebTransportError(
                    web_transport_moq::WebTransportError::Closed(code, why),
                )) => Answer::SessionClosed(code, why),
                _ => Answer::Other(format!("read: {e}")),
            },
        },
        closed = raw.closed() => match closed {
            web_transport_moq::SessionError::WebTransportError(
                web_transport_moq::WebTransportError::Closed(code, why),
            ) => Answer::SessionClosed(code, why),
            e => Answer::Other(format!("session: {e}")),
        },
        () = tokio::time::sleep(STEP) => Answer::Other("no answer".into()),
    };
    // A close would have been sent with the reset: give it a round trip or two to arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let open = raw.close_reason().is_none();
    drop(session);
    (answer, open)
}

/// moq-lite's CANCEL stream error code (moq-net's `StreamError::Cancel`).
const CANCEL: u32 = 0x1;

/// A varint of moq-lite (QUIC's, RFC 9000 §16).
fn varint(v: u64) -> Vec<u8> {
    match v {
        0..=0x3f => vec![v as u8],
        0x40..=0x3fff => ((v as u16) | 0x4000).to_be_bytes().to_vec(),
        _ => ((v as u32) | 0x8000_0000).to_be_bytes().to_vec(),
    }
}

#[test]
fn a_malformed_control_stream_after_setup_is_refused_and_another_viewer_watches_on() {
    let mut path = LivePath::start();
    // moq-lite's control stream types are 0 to 6 (Session, Announce, Subscribe, ...).
    let subscribe = varint(2);
    // A SUBSCRIBE body (request id 1, then the broadcast path) whose path says 60 bytes and
    // has 1, inside a message whose size is right.
    let body = [varint(1), varint(60), vec![b'x']].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("an unknown stream type", varint(0x3fff)),
        // SUBSCRIBE: its size says 40 bytes, 3 follow, then FIN.
        (
            "a SUBSCRIBE cut short",
            [subscribe.clone(), varint(40), vec![1, 2, 3]].concat(),
        ),
        // SUBSCRIBE whose body is no message: a broadcast path whose length runs past the body.
        (
            "a SUBSCRIBE that does not parse",
            [subscribe, varint(body.len() as u64), body].concat(),
        ),
    ];
    for (what, bytes) in cases {
        let warnings_before = path.edge.stderr_lines("control stream error").len();
        let (answer, open) = common::run_client(raw_stream_after_setup(path.addr, &bytes))
            .unwrap_or_else(|| panic!("{what}: the client did not finish\n{}", path.logs()));
        eprintln!("{what}: {answer:?}, session open after it: {open}");
        let logs = path.logs();
        // moq-net (the egress's moq-lite) ends a control stream that does not parse, which
        // resets it with moq-lite's CANCEL; the session itself goes on.
        assert!(
            matches!(answer, Answer::Reset(CANCEL)) && open,
            "{what}: answered {answer:?} (session open: {open}), not by a reset\n{logs}"
        );
        // moq-net's line, in the session's span: `WARN moq{remote=…}: … control stream
        // error err=invalid value`.
        let warnings = path.edge.stderr_lines("control stream error");
        assert!(
            warnings.len() > warnings_before
                && warnings[warnings_before..]
                    .iter()
                    .all(|l| l.contains("moq{remote=127.0.0.1:") && l.contains("err=")),
            "{what}: the egress logged no warning naming the session and the error\n{logs}"
        );
        eprintln!("{what}: logged {:?}", &warnings[warnings_before..]);
        assert!(
            path.viewer.still_receiving(),
            "{what}: the other viewer stopped receiving\n{logs}"
        );
    }
    assert!(
        path.edge.child.try_wait().expect("status").is_none(),
        "the egress exited"
    );
}

/// Subscribes, through the egress, to a track the broadcast does not have: what the subscription
/// ended with.
async fn subscribe_to_unknown_track(edge: SocketAddr, track: &str) -> Result<(), moq_net::Error> {
    let wt = webtransport(edge).await;
    let (origin, origin_driver) =
        moq_net::origin::Producer::new(moq_net::origin::Config::default());
    tokio::spawn(moq_net::time::run(origin_driver));
    let (session, driver) = moq_net::Client::new()
        .with_subscriber(origin.clone())
        .connect(now(), moq_tokio::transport::Session::new(wt))
        .await
        .expect("moq-lite SETUP");
    tokio::spawn(moq_net::time::run(driver));
    let broadcast = origin.consume().routed_broadcast(BROADCAST).await?;
    // SUBSCRIBE_OK or the refusal: a refused subscription fails here, an accepted one with
    // its first group.
    let result = match broadcast.track(track)?.subscribe(None).await {
        Ok(mut subscriber) => subscriber.recv_group().await.map(|_| ()),
        Err(e) => Err(e),
    };
    drop(session);
    result
}

#[test]
fn a_subscription_to_an_unknown_track_is_refused_as_not_found() {
    let mut path = LivePath::start();
    let result = common::run_client(subscribe_to_unknown_track(path.addr, "nope.m4s"))
        .unwrap_or_else(|| panic!("the subscription did not end\n{}", path.logs()));
    let logs = path.logs();
    assert!(
        matches!(
            result,
            Err(moq_net::Error::Stream(moq_net::StreamError::NotFound))
        ),
        "the unknown track: {result:?}\n{logs}"
    );
    assert!(
        !path.edge.stderr_lines("nope.m4s").is_empty(),
        "the egress did not log the unknown track\n{logs}"
    );
    assert!(
        path.viewer.still_receiving(),
        "the other viewer stopped\n{logs}"
    );
}

#[test]
fn the_upstream_relay_going_away_ends_the_subscriptions_and_its_return_is_picked_up() {
    let mut path = LivePath::start();
    drop(path.relay.take());
    let lost = "MoQ upstream lost";
    assert!(
        path.edge.wait_for_log(lost, STEP),
        "the egress did not log the lost upstream\n{}",
        path.logs()
    );
    // The viewer's subscriptions end: the egress resets their streams (moq-net's answer for a
    // track whose upstream is gone), which the viewer's moq-net logs, and nothing more arrives.
    let ended = path.viewer.peer.log.clone();
    wait_until(
        "the viewer's subscriptions ended",
        || common::read_log(&ended).contains("subscribe error"),
        || path.logs(),
    );
    assert!(
        !path.viewer.still_receiving(),
        "the viewer still receives\n{}",
        path.logs()
    );
    // The relay comes back on its port and the publisher publishes again.
    drop(path.publisher.take());
    let dir = path.dir.path().to_owned();
    path.relay = Some(relay(path.relay_port, &path.cert, &path.key, &dir));
    std::thread::sleep(Duration::from_millis(500));
    let url = format!("https://127.0.0.1:{}/anon", path.relay_port);
    path.publisher = Some(publisher(&url, &path.cert, &dir));
    let again = Viewer::start("viewer-after", path.addr, &path.cert, &dir);
    again.wait_for_more(&mut path.edge);
    assert!(
        again.still_receiving(),
        "the new viewer stopped\n{}",
        path.logs()
    );
}
