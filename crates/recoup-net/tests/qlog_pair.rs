//! qlog of a real connection over 127.0.0.1: `recoup serve` and `recoup get` each write a trace,
//! and the two pair by the connection's original destination connection ID (file name and
//! header), carry the wall clock as `reference_time`, log the connection's life (started,
//! parameters both ways, the server's first Initial, recovery metrics, closed), read back into
//! the transport's event types, and pass the JSON Schema of the events we emit
//! (`tests/qlog/qlog-0.3-recoup.schema.json`, checked with Python's jsonschema).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use recoup_net::qlog_dir::QlogDir;
use recoup_net::tls::{client_tls, Identity};
use recoup_net::url::Url;
use recoup_net::{Client, GetOptions, LiveParams, Protocol, ServeOptions, Server};
use recoup_transport::qlog::{Event, Header, Owner, Record};
use recoup_transport::TransportConfig;

const BODY: usize = 300_000;

fn records(path: &Path) -> (Header, Vec<Record>) {
    let text = std::fs::read(path).expect("read trace");
    let mut parts = text
        .split(|&b| b == 0x1e)
        .filter(|r| !r.iter().all(u8::is_ascii_whitespace));
    let header: Header =
        serde_json::from_slice(parts.next().expect("header")).expect("header parses");
    let events = parts
        .map(|r| {
            serde_json::from_slice(r).unwrap_or_else(|e| {
                panic!(
                    "{}: record does not read back ({e}): {}",
                    path.display(),
                    String::from_utf8_lossy(r)
                )
            })
        })
        .collect();
    (header, events)
}

fn one_trace(dir: &Path, side: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("qlog dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(&format!("_{side}.sqlog")))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{side} traces in {}: {found:?}",
        dir.display()
    );
    found[0].clone()
}

fn odcid_of(path: &Path) -> String {
    let name = path.file_name().expect("name").to_string_lossy();
    name.split('_').next().expect("odcid").to_owned()
}

#[test]
fn client_and_server_traces_pair_by_odcid_and_pass_the_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("www");
    std::fs::create_dir_all(&root).expect("root");
    std::fs::write(root.join("blob"), vec![7u8; BODY]).expect("body");
    let server_qlog = dir.path().join("server-qlog");
    let client_qlog = dir.path().join("client-qlog");

    let server = Server::bind(ServeOptions {
        listen: "127.0.0.1:0".parse().expect("addr"),
        root: Some(root),
        live: LiveParams::default(),
        identity: Identity::self_signed(&["localhost"]).expect("identity"),
        transport: TransportConfig::default(),
        qlog: QlogDir::from_option_or_env(Some(server_qlog.clone())),
        gso: false,
        origin: None,
        retry: recoup_net::server::RetryMode::Off,
        max_connections: None,
        metrics: None,
        workers: 1,
        moq: None,
        live_policy: Default::default(),
        origin_kind: recoup_net::content::ContentKind::File,
    })
    .expect("bind server");
    let addr = server.local_addr().expect("addr");
    let stopper = server.stopper();
    let thread = std::thread::spawn(move || server.run());

    let client = Client::connect(GetOptions {
        urls: vec![Url::parse(&format!("https://127.0.0.1:{}/blob", addr.port())).expect("url")],
        tls: client_tls(None, true, Protocol::offer(None)).expect("tls"),
        protocol: None,
        range: None,
        transport: TransportConfig::default(),
        qlog: QlogDir::from_option_or_env(Some(client_qlog.clone())),
        gso: false,
        timeout: Duration::from_secs(10),
        migrate_after: None,
    })
    .expect("connect");
    let mut body = Vec::new();
    let download = client.run(&mut body, &mut |_| {}).expect("download");
    assert_eq!(download.bytes as usize, BODY);
    // The server closes its side once the client's CONNECTION_CLOSE arrived.
    std::thread::sleep(Duration::from_millis(300));
    stopper.stop();
    thread.join().expect("server thread").expect("server run");

    let server_trace = one_trace(&server_qlog, "server");
    let client_trace = one_trace(&client_qlog, "client");
    let odcid = odcid_of(&client_trace);
    assert_eq!(odcid_of(&server_trace), odcid, "file names pair");
    let (sh, server_events) = records(&server_trace);
    let (ch, client_events) = records(&client_trace);
    assert_eq!(sh.trace.common_fields.odcid, odcid);
    assert_eq!(ch.trace.common_fields.odcid, odcid);
    for h in [&sh, &ch] {
        // Wall-clock milliseconds since the Unix epoch (after 2020-01-01).
        assert!(h.trace.common_fields.reference_time > 1.577e12, "{h:?}");
    }

    for (side, events) in [("server", &server_events), ("client", &client_events)] {
        let has = |f: &dyn Fn(&Event) -> bool| events.iter().any(|r| f(&r.event));
        assert!(has(&|e| matches!(e, Event::ConnectionStarted(_))), "{side}");
        assert!(
            has(&|e| matches!(e, Event::ParametersSet(p) if p.owner == Owner::Local)),
            "{side}"
        );
        assert!(
            has(&|e| matches!(e, Event::ParametersSet(p) if p.owner == Owner::Remote)),
            "{side}"
        );
        assert!(has(&|e| matches!(e, Event::MetricsUpdated(_))), "{side}");
        assert!(
            has(&|e| matches!(e, Event::CongestionStateUpdated(_))),
            "{side}"
        );
        assert!(has(&|e| matches!(e, Event::ConnectionClosed(_))), "{side}");
        // Received packets keep their frames: some ACK carries ranges.
        assert!(
            has(&|e| matches!(e, Event::PacketReceived(p) if !p.frames.is_empty())),
            "{side}"
        );
    }
    // The first Initial each side saw or sent is in its trace.
    let first_packet = |events: &[Record]| {
        events
            .iter()
            .find_map(|r| match &r.event {
                Event::PacketSent(p) | Event::PacketReceived(p) => {
                    Some((matches!(r.event, Event::PacketSent(_)), p.header.clone()))
                }
                _ => None,
            })
            .expect("a packet")
    };
    let (sent, header) = first_packet(&server_events);
    assert!(!sent && header.packet_type == "initial" && header.packet_number == 0);
    let (sent, header) = first_packet(&client_events);
    assert!(sent && header.packet_type == "initial" && header.packet_number == 0);

    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/qlog");
    let out = Command::new("python3")
        .arg(schema.join("validate.py"))
        .arg(&server_trace)
        .arg(&client_trace)
        .output()
        .expect("run python3 tests/qlog/validate.py");
    assert!(
        out.status.success(),
        "schema check failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
