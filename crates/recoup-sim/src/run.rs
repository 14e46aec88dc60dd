//! Runs scenarios: the QUIC transport with a policy and an application on both ends of a
//! simulated path, measured with the metrics of DESIGN.md. One run is a pure function of
//! (scenario, policy, seed).

use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use recoup_apps::conn::{AppConn, Written};
use recoup_apps::StreamApp;
use recoup_elements::{element_rng, ElementSpec, LossForecast, LossSpec};
use recoup_recovery::PolicySpec;
use recoup_time::Instant;
use recoup_transport::qlog::{QlogWriter, VantagePoint};
use recoup_transport::{
    simulation_tls, ClientConfig, ConnectionHandle, Endpoint, PolicyFactory, Protection, Recovered,
    ServerConfig, Side, TransportConfig,
};

use crate::app::{AppEndpoint, AppOutcome};
use crate::metrics::{
    goodput_window, run_row, write_csv, CwndHolds, LossRecord, RunCounters, RunRow,
};
use crate::oracle::Oracle;
use crate::quic::{NodeApp, QuicNode};
use crate::scenario::{PolicyEntry, Scenario};
use crate::sim::{NodeId, Simulator};
use crate::Error;

const CLIENT: &str = "10.0.0.1:50000";
const SERVER: &str = "10.0.0.2:443";
/// How long after the scenario's duration the run goes on so data in flight can arrive.
const DRAIN: Duration = Duration::from_secs(5);

/// Drives an [`AppEndpoint`] on one QUIC connection of an endpoint.
struct AppDriver {
    side: Side,
    app: AppEndpoint,
    conn: Option<ConnectionHandle>,
    io: AppConn,
    /// In-order application bytes delivered to this side, and when the last of them arrived.
    delivered: u64,
    last_delivery: Instant,
    recovered: Vec<Recovered>,
    error: Option<String>,
    /// A qlog trace to attach to the connection as soon as it exists.
    qlog: Option<QlogWriter>,
}

impl AppDriver {
    /// `bidi`: the application answers on the streams its peer opens (rpc); see [`AppConn`].
    fn new(side: Side, app: AppEndpoint, bidi: bool) -> Self {
        Self {
            side,
            app,
            conn: None,
            io: AppConn::new(side, bidi),
            delivered: 0,
            last_delivery: Instant::ZERO,
            recovered: Vec::new(),
            error: None,
            qlog: None,
        }
    }
}

impl NodeApp for AppDriver {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> Option<Instant> {
        if self.conn.is_none() {
            self.conn = match self.side {
                Side::Server => ep.accept(),
                Side::Client => ep.handles().next(),
            };
        }
        let Some(conn) = self.conn.and_then(|h| ep.connection_mut(h)) else {
            // Nothing to do before a connection exists, and its first datagram polls us. A
            // wake-up already past (the server's first frame is due at the start) would wake
            // this node every microsecond until then: a one-way delay's worth of calls per
            // flow, most of a short run's events.
            return self.app.next_wakeup().filter(|&t| t > now);
        };
        if let Some(q) = self.qlog.take() {
            conn.set_qlog(q);
        }
        self.recovered.extend(conn.drain_recovered());
        if !conn.is_established() {
            return None;
        }
        // Packet feedback for an application that adapts its rate (cloud gaming); empty unless
        // the transport records it.
        self.io.feedback(now, conn, &mut self.app);
        // Reads first: what arrived may be what the application waits for.
        while conn.accept_stream(true).is_some() || conn.accept_stream(false).is_some() {}
        for id in conn.readable_streams() {
            let (n, error) = self.io.read(now, conn, &mut self.app, id);
            self.delivered += n;
            if n > 0 {
                self.last_delivery = now;
            }
            if let Some(e) = error {
                self.error.get_or_insert_with(|| e.to_string());
            }
        }
        // Streams the application gives up on go before anything more is written or sent, so
        // that nothing of them leaves after the instant it decided (a MoQ group's deadline).
        if let Err(e) = self
            .io
            .resets(conn, now, &mut self.app, recoup_apps::moq::DELIVERY_TIMEOUT)
        {
            self.error.get_or_insert(e);
        }
        match self.io.write(conn, now, &mut self.app) {
            Ok(Written::Idle) => {}
            // Blocked: the application's clock cannot advance until the transport takes more,
            // which only an arriving datagram can allow, and that polls us anyway. Its capture
            // time is already past, so asking to be woken for it would wake this node every
            // microsecond for as long as the block lasts.
            Ok(Written::Blocked) => return self.app.next_wakeup().filter(|&t| t > now),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self.app.next_wakeup()
    }
}

/// The qlog file of one side of a run: `<scenario>-<policy>-<seed>-{server,client}.sqlog`, with
/// characters other than letters, digits, `.`, `_`, `-` and `=` replaced by `_` (sweep point
/// names carry spaces and `%`).
#[must_use]
pub fn qlog_file_name(scenario: &str, policy: &str, seed: u64, vantage: VantagePoint) -> String {
    let side = match vantage {
        VantagePoint::Server => "server",
        VantagePoint::Client => "client",
    };
    file_name(&format!("{scenario}-{policy}-{seed}-{side}.sqlog"))
}

/// The loss records of a run ([`RunOutputs::losses_dir`]): `<scenario>-<policy>-<seed>.csv`,
/// made file-safe as [`qlog_file_name`] does.
#[must_use]
pub fn losses_file_name(scenario: &str, policy: &str, seed: u64) -> String {
    file_name(&format!("{scenario}-{policy}-{seed}.csv"))
}

fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// What a run writes besides its result row. Neither changes the run's results.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOutputs<'a> {
    /// A qlog trace per side, named by [`qlog_file_name`], with simulated times.
    pub qlog_dir: Option<&'a Path>,
    /// The sender's lost data ranges, one CSV row each ([`crate::metrics::LossRecord`]), in a
    /// file named by [`losses_file_name`].
    pub losses_dir: Option<&'a Path>,
}

/// qlog's `reference_time` of simulated runs: simulated time 0 is the Unix epoch, so that a
/// run's traces are a pure function of (scenario, seed).
pub const SIM_REFERENCE_TIME_MS: f64 = 0.0;

fn qlog_writer(
    dir: &Path,
    name: String,
    vantage: VantagePoint,
    start: Instant,
) -> Result<QlogWriter, Error> {
    let path = dir.join(name);
    let file = std::fs::create_dir_all(dir)
        .and_then(|()| File::create(&path))
        .map_err(|source| Error::Qlog {
            path: path.clone(),
            source,
        })?;
    Ok(QlogWriter::new(
        Box::new(BufWriter::new(file)),
        vantage,
        start,
        SIM_REFERENCE_TIME_MS,
    ))
}

/// One run: `policy` of `scenario` with `seed`. The server is the sender (a CDN edge), the
/// client the viewer.
pub fn run_one(scenario: &Scenario, policy: &PolicyEntry, seed: u64) -> Result<RunRow, Error> {
    run_one_with_outputs(scenario, policy, seed, RunOutputs::default())
}

/// [`run_one`], writing what `outputs` asks for.
pub fn run_one_with_outputs(
    scenario: &Scenario,
    policy: &PolicyEntry,
    seed: u64,
    outputs: RunOutputs<'_>,
) -> Result<RunRow, Error> {
    let mut rows = run_flows_with_outputs(scenario, policy, seed, 1, outputs, None)?;
    Ok(rows.remove(0))
}

/// [`run_one`] with the sender's policy made by `factory` (for example `art-dqn` with the
/// trainer's exploring learner); `policy` still labels the row.
pub fn run_one_with_policy(
    scenario: &Scenario,
    policy: &PolicyEntry,
    seed: u64,
    factory: PolicyFactory,
) -> Result<RunRow, Error> {
    let mut rows = run_flows_with_outputs(
        scenario,
        policy,
        seed,
        1,
        RunOutputs::default(),
        Some(factory),
    )?;
    Ok(rows.remove(0))
}

/// Most flows [`run_flows`] runs on one path (client ports 50000 and up).
pub const MAX_FLOWS: usize = 10_000;

/// `flows` connections, each a client and a server running `scenario`'s application with
/// `policy`, that share the scenario's path: one loss, queue and link per direction carries all
/// of them. Flow 0 is exactly [`run_one`]'s run when alone; flow `i` draws its TLS, transport
/// and application randomness from `seed + i·2^32`. One row per flow, in flow order.
pub fn run_flows(
    scenario: &Scenario,
    policy: &PolicyEntry,
    seed: u64,
    flows: usize,
) -> Result<Vec<RunRow>, Error> {
    run_flows_with_outputs(scenario, policy, seed, flows, RunOutputs::default(), None)
}

/// The seed of flow `i` of a run with `seed`.
fn flow_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_add((i as u64) << 32)
}

/// One flow's endpoints in the simulation.
struct Flow {
    client: NodeId,
    server: NodeId,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
}

/// Adds flow `i`'s client and server nodes (qlog traces only for flow 0), protecting packets
/// with `protection`.
fn add_flow(
    sim: &mut Simulator,
    (scenario, protection): (&Scenario, Protection),
    policy: &PolicyEntry,
    (seed, i): (u64, usize),
    qlog_dir: Option<&Path>,
    custom: Option<&PolicyFactory>,
) -> Result<Flow, Error> {
    let seed = flow_seed(seed, i);
    let (client_tls, server_tls) = simulation_tls(seed, "localhost", &[b"hq-interop"], protection)?;
    let defaults = TransportConfig::default();
    let transport = TransportConfig {
        policy: policy.spec.clone(),
        cc: scenario.transport.cc,
        initial_window: scenario.transport.initial_window,
        hystart: scenario.transport.hystart.unwrap_or(defaults.hystart),
        loss_detection: scenario.transport.loss_detection,
        threshold_rtt: scenario.transport.threshold_rtt,
        tail_ping: scenario.transport.tail_ping,
        // One buffer for the connection and its streams: a single-stream transfer is held by
        // the smaller of the two windows.
        receive_window: scenario
            .transport
            .receive_window
            .unwrap_or(defaults.receive_window),
        stream_receive_window: scenario
            .transport
            .receive_window
            .unwrap_or(defaults.stream_receive_window),
        send_buffer: scenario
            .transport
            .send_buffer
            .map_or(defaults.send_buffer, |b| {
                usize::try_from(b).unwrap_or(usize::MAX)
            }),
        copies_beyond_cwnd: scenario.transport.copies_beyond_cwnd,
        pacing_burst: scenario
            .transport
            .pacing_burst
            .unwrap_or(defaults.pacing_burst),
        max_pacing_rate: scenario.transport.max_pacing_rate.map(|bps| bps / 8),
        fec: scenario.transport.fec,
        // Both ends run the same config; only the server has data to protect.
        fec_receive: scenario.transport.fec.is_some(),
        record_recovery: true,
        // The cloud-gaming sender's bitrate controller and frame metrics read packet feedback.
        record_packets: matches!(scenario.app, crate::app::AppSpec::Gaming(_)),
        seed,
        custom_policy: if policy.oracle {
            Some(oracle_factory(scenario, seed)?)
        } else {
            custom.cloned()
        },
        ..defaults
    };
    let mut client_addr: SocketAddr = CLIENT.parse().expect("constant address");
    let mut server_addr: SocketAddr = SERVER.parse().expect("constant address");
    // `i < MAX_FLOWS`: both ports stay below 65536.
    client_addr.set_port(client_addr.port() + i as u16);
    if i > 0 {
        server_addr.set_port(10_000 + i as u16);
    }
    let server_ep = Endpoint::new(
        Some(ServerConfig {
            transport: transport.clone(),
            tls: server_tls,
        }),
        transport.local_cid_len,
    );
    let mut client_ep = Endpoint::new(None, transport.local_cid_len);
    client_ep.connect(
        Instant::ZERO,
        &ClientConfig {
            transport: TransportConfig {
                seed: seed ^ 0x5eed,
                // The viewer is a standard receiver: it sends little and never copies.
                policy: PolicySpec::Arq,
                custom_policy: None,
                record_packets: false,
                ..transport.clone()
            },
            tls: client_tls,
            server_name: "localhost".into(),
        },
        server_addr,
    )?;
    let pair = scenario.app.build(Instant::ZERO, scenario.duration, seed);
    let bidi = matches!(
        scenario.app,
        crate::app::AppSpec::Rpc(_) | crate::app::AppSpec::Vod(_)
    );
    let mut client_driver = AppDriver::new(Side::Client, pair.client, bidi);
    let mut server_driver = AppDriver::new(Side::Server, pair.server, bidi);
    if let Some(dir) = qlog_dir.filter(|_| i == 0) {
        for (driver, vantage) in [
            (&mut client_driver, VantagePoint::Client),
            (&mut server_driver, VantagePoint::Server),
        ] {
            let name = qlog_file_name(&scenario.name, &policy.label, seed, vantage);
            driver.qlog = Some(qlog_writer(dir, name, vantage, Instant::ZERO)?);
        }
    }
    let suffix = if i == 0 {
        String::new()
    } else {
        format!("-{i}")
    };
    let client = sim.add_node(
        format!("client{suffix}"),
        Box::new(QuicNode::new(client_addr, client_ep, client_driver)),
    );
    let server = sim.add_node(
        format!("server{suffix}"),
        Box::new(QuicNode::new(server_addr, server_ep, server_driver)),
    );
    Ok(Flow {
        client,
        server,
        client_addr,
        server_addr,
    })
}

/// [`run_flows`] with `outputs` (of flow 0) and an optional policy factory.
fn run_flows_with_outputs(
    scenario: &Scenario,
    policy: &PolicyEntry,
    seed: u64,
    flows: usize,
    outputs: RunOutputs<'_>,
    custom: Option<PolicyFactory>,
) -> Result<Vec<RunRow>, Error> {
    if !(1..=MAX_FLOWS).contains(&flows) {
        return Err(Error::Flows(flows));
    }
    if policy.oracle && flows > 1 {
        return Err(Error::OracleOneFlow);
    }
    let start = Instant::ZERO;
    let (down, up) = (scenario.down.path_spec(), scenario.up.path_spec());
    // A payload's checksum can reject a packet only where a path alters bytes.
    let protection = match scenario.transport.protection {
        Protection::Null if !down.alters_bytes() && !up.alters_bytes() => Protection::NullHeader,
        chosen => chosen,
    };
    let mut sim = Simulator::new();
    let all = (0..flows)
        .map(|i| {
            add_flow(
                &mut sim,
                (scenario, protection),
                policy,
                (seed, i),
                outputs.qlog_dir,
                custom.as_ref(),
            )
        })
        .collect::<Result<Vec<Flow>, Error>>()?;
    let down = down.build(seed, "down", None, 0)?;
    let up = up.build(seed, "up", None, 0)?;
    let first = &all[0];
    let down = sim.add_path(first.server, first.client_addr, down, first.client);
    let up = sim.add_path(first.client, first.server_addr, up, first.server);
    if flows > 1 {
        // The other flows enter the same chains, and each chain's last node delivers by
        // destination address.
        for f in &all {
            share_path(&mut sim, &down, (f.server, f.client_addr, f.client));
            share_path(&mut sim, &up, (f.client, f.server_addr, f.server));
        }
    }
    let end = start + scenario.duration + DRAIN;
    sim.run_until(end);
    let rows: Vec<RunRow> = all
        .iter()
        .map(|f| flow_row(&mut sim, f, scenario, policy, (seed, end)))
        .collect();
    if let Some(dir) = outputs.losses_dir {
        let driver = sim
            .downcast_mut::<QuicNode<AppDriver>>(all[0].server)
            .expect("server node is a QuicNode<AppDriver>")
            .app();
        let path = dir.join(losses_file_name(&scenario.name, &policy.label, seed));
        write_losses(&path, &driver.recovered)?;
    }
    Ok(rows)
}

fn write_losses(path: &Path, recovered: &[Recovered]) -> Result<(), Error> {
    let records: Vec<LossRecord> = recovered.iter().map(LossRecord::from).collect();
    let err = |detail: String| Error::Losses {
        path: path.to_owned(),
        detail,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    }
    let file = File::create(path).map_err(|e| err(e.to_string()))?;
    write_csv(&records, BufWriter::new(file)).map_err(|e| err(e.to_string()))
}

/// Routes `from`'s datagrams to `dst` through the chain `path` (as [`Simulator::add_path`]
/// built it) and the chain's output for `dst` to `to`.
fn share_path(sim: &mut Simulator, path: &[NodeId], (from, dst, to): (NodeId, SocketAddr, NodeId)) {
    match (path.first(), path.last()) {
        (Some(&first), Some(&last)) => {
            sim.route(from, dst, first);
            sim.route(last, dst, to);
        }
        _ => sim.route(from, dst, to),
    }
}

/// The result row of one flow after the run.
fn flow_row(
    sim: &mut Simulator,
    flow: &Flow,
    scenario: &Scenario,
    policy: &PolicyEntry,
    (seed, end): (u64, Instant),
) -> RunRow {
    let start = Instant::ZERO;
    let client = sim
        .downcast_mut::<QuicNode<AppDriver>>(flow.client)
        .expect("client node is a QuicNode<AppDriver>");
    client.app_mut().app.finish(end);
    let outcome: Option<AppOutcome> = client.app().app.outcome();
    let goodput_bytes = client.app().delivered;
    let measured = goodput_window(
        scenario.duration,
        client.app().last_delivery.saturating_duration_since(start),
        outcome.as_ref(),
    );
    let client_error = client.app().error.clone();
    let fec_recovered = client
        .app()
        .conn
        .and_then(|h| client.endpoint_mut().connection_mut(h))
        .map(|c| c.stats())
        .filter(|_| scenario.transport.fec.is_some())
        .map(|st| (st.fec_recovered_packets, st.fec_recovered_bytes));
    let server = sim
        .downcast_mut::<QuicNode<AppDriver>>(flow.server)
        .expect("server node is a QuicNode<AppDriver>");
    server.app_mut().app.finish(end);
    let sender_outcome = server.app().app.outcome();
    let handle = server.app().conn;
    let stats = handle
        .and_then(|h| server.endpoint_mut().connection_mut(h))
        .map(|conn| {
            let st = conn.stats();
            let more: Vec<Recovered> = conn.drain_recovered().collect();
            (st, more)
        });
    let (stats, more) = stats.unwrap_or_default();
    let driver = server.app_mut();
    driver.recovered.extend(more);
    let counters = RunCounters {
        duration: measured,
        packets_new: stats.new_packets,
        packets_retransmitted: stats.retransmission_packets,
        packets_copies: stats.copy_packets,
        bytes_new: stats.stream_bytes_new,
        bytes_retransmitted: stats.stream_bytes_retransmitted,
        bytes_copies: stats.stream_bytes_copied,
        packets_lost: stats.packets_lost,
        goodput_bytes,
        cwnd_holds: Some(CwndHolds {
            sent: stats.copies_held_by_cwnd,
            wait: stats.copy_cwnd_wait,
            dropped: stats.held_copies_dropped,
        }),
        packets_repair: stats.repair_packets_sent,
        bytes_repair: stats.repair_bytes_sent,
        packets_rate_limited: Some((stats.rate_limited_packets, stats.rate_limit_binding_packets)),
        fec_recovered,
    };
    let mut row = run_row(
        &policy.label,
        seed,
        &driver.recovered,
        &counters,
        outcome.as_ref(),
    );
    if let Some(AppOutcome::Gaming(g)) = &sender_outcome {
        let viewer = match &outcome {
            Some(AppOutcome::GamingViewer(v)) => Some(v),
            _ => None,
        };
        crate::metrics::gaming_columns(&mut row, g, viewer);
    }
    if let Some(e) = client_error.or_else(|| driver.error.clone()) {
        row.app_error.get_or_insert(e);
    }
    if stats.send_stalls > 0 {
        // A transport bug, not a result: the run's numbers include a silence nothing caused.
        row.app_error.get_or_insert(format!(
            "the server's sender stalled {} times: data waited with nothing in flight and no \
             timer armed",
            stats.send_stalls
        ));
    }
    row
}

/// The oracle for one run: the fate function of the down path's loss element, built from the
/// same spec and random stream as the element itself, so it answers what the element will do.
fn oracle_factory(scenario: &Scenario, seed: u64) -> Result<PolicyFactory, Error> {
    let down = scenario.down.path_spec();
    let Some((i, spec)) = down.elements.iter().enumerate().find_map(|(i, e)| match e {
        ElementSpec::Loss(spec @ LossSpec::Crn { .. }) => Some((i, spec)),
        _ => None,
    }) else {
        return Err(Error::OracleNeedsCrn);
    };
    let name = format!("down/{i}-{}", down.elements[i].kind());
    let forecast = LossForecast::new(spec, element_rng(seed, &name))?;
    Ok(PolicyFactory::new(move |_seed| {
        Box::new(Oracle::new(forecast.clone()))
    }))
}

/// Every (policy, seed) of a scenario, in a stable order: policies as listed, seeds ascending.
#[must_use]
pub fn jobs(scenario: &Scenario) -> Vec<(usize, u64)> {
    (0..scenario.policies.len())
        .flat_map(|p| scenario.seeds().map(move |s| (p, s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Before its client's first datagram the server has nothing to do, and that datagram polls
    /// it anyway. Asking for a wake-up already due (its first frame's) made the node run every
    /// microsecond for a one-way delay: most of the events of a short run, and the cost per
    /// packet grew with the number of flows.
    #[test]
    fn a_server_without_a_connection_asks_for_no_wakeup_already_due() {
        let scenario = Scenario::builtin_default();
        let (_, server_tls) = simulation_tls(1, "localhost", &[b"hq-interop"], Default::default())
            .expect("simulation TLS");
        let transport = TransportConfig::default();
        let mut ep = Endpoint::new(
            Some(ServerConfig {
                transport: transport.clone(),
                tls: server_tls,
            }),
            transport.local_cid_len,
        );
        let pair = scenario.app.build(Instant::ZERO, scenario.duration, 1);
        let mut driver = AppDriver::new(Side::Server, pair.server, false);
        for now in [Instant::ZERO, Instant::ZERO + Duration::from_millis(10)] {
            let wakeup = driver.poll(now, &mut ep);
            assert!(
                wakeup.is_none_or(|t| t > now),
                "wake-up {wakeup:?} at {now:?} with no connection"
            );
        }
    }
}
