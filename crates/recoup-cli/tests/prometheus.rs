//! `recoup serve --metrics`: Debian's Prometheus server, started here on loopback, scrapes the
//! metrics after downloads through `recoup link` at 5 % loss (three files and a live stream),
//! and every number that the server's qlog also records agrees with it: packets and bytes sent,
//! packets lost, copies, connections; the recovery latency histogram counts the lost ranges that
//! `recoup analyze` finds in the same traces. A `--metrics` address in use is an error naming it.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{fixture, link_command, recoup, run_get, serve_files, Proc};

const FILES: usize = 3;

/// What the server's qlog traces say: packets sent, their bytes, copies, packets lost.
#[derive(Debug, Default, PartialEq)]
struct Traced {
    traces: u64,
    packets_sent: u64,
    bytes_sent: u64,
    copies: u64,
    packets_lost: u64,
}

fn read_traces(dir: &Path) -> Traced {
    let mut t = Traced::default();
    for entry in std::fs::read_dir(dir).expect("qlog dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "sqlog") {
            continue;
        }
        t.traces += 1;
        let bytes = std::fs::read(&path).expect("read qlog");
        for record in bytes.split(|&b| b == 0x1e).filter(|r| !r.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(record).expect("qlog record");
            match v["name"].as_str() {
                Some("transport:packet_sent") => {
                    t.packets_sent += 1;
                    t.bytes_sent += v["data"]["raw"]["length"].as_u64().unwrap_or(0);
                    t.copies += u64::from(v["data"]["recoup"]["kind"] == "copy");
                }
                Some("recovery:packet_lost") => t.packets_lost += 1,
                _ => {}
            }
        }
    }
    t
}

/// A free loopback port (bound, then released for the process that will take it).
fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// Prometheus on loopback scraping `target` every second, its data in `dir`.
struct Prometheus {
    child: Child,
    api: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

impl Prometheus {
    fn start(target: SocketAddr, dir: &Path) -> Self {
        let which = Command::new("prometheus").arg("--version").output();
        assert!(
            which.is_ok_and(|o| o.status.success()),
            "Debian's prometheus is not installed: scripts/test.sh installs it (apt-get install \
             prometheus)"
        );
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  \
                 - job_name: recoup\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write config");
        let api = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={api}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Self { child, api }
    }

    /// The value of the instant query `q`, once Prometheus has scraped it; `None` if it holds
    /// no sample within 30 s.
    fn query(&self, q: &str) -> Option<f64> {
        let url = format!("http://{}/api/v1/query", self.api);
        let deadline = common::now() + Duration::from_secs(30);
        while common::now() < deadline {
            let answer = ureq::get(&url)
                .query("query", q)
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok());
            let value = answer
                .and_then(|a| serde_json::from_str::<serde_json::Value>(&a).ok())
                .and_then(|v| {
                    v["data"]["result"][0]["value"][1]
                        .as_str()
                        .map(str::to_owned)
                })
                .and_then(|s| s.parse::<f64>().ok());
            if value.is_some() {
                return value;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        None
    }
}

fn get(server: &mut Proc, url: String, out: &Path) {
    let (status, log) = run_get(&common::get_args(url, out), server);
    assert!(status.success(), "{log}\n{}", server.output());
}

#[test]
fn prometheus_scrapes_what_the_qlog_records() {
    let (root, data) = fixture("file.bin", 1 << 20);
    let work = tempfile::tempdir().expect("tempdir");
    let qlog = work.path().join("qlog");
    let (mut server, addr) = serve_files(
        root.path(),
        &[
            "--metrics",
            "127.0.0.1:0",
            "--idle-timeout",
            "3s",
            "--qlog-dir",
            qlog.to_str().expect("utf-8"),
        ],
    );
    // Printed right after the line `Proc::server` waits for.
    let deadline = common::now() + Duration::from_secs(5);
    let metrics: SocketAddr = loop {
        let found = server.stdout().lines().find_map(|l| {
            l.strip_prefix("metrics on http://")?
                .strip_suffix("/metrics")?
                .parse()
                .ok()
        });
        match found {
            Some(addr) => break addr,
            None if common::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => panic!("no metrics address:\n{}", server.output()),
        }
    };
    let link_flags = ["--rtt", "40ms", "--loss", "bernoulli 5%", "--seed", "3"];
    let (_link, link_addr) = Proc::server("recoup link", link_command(addr, &link_flags));
    for i in 0..FILES {
        let out = work.path().join(format!("file{i}.bin"));
        get(&mut server, format!("https://{link_addr}/file.bin"), &out);
        common::check_download(&out, &data, "");
    }
    let live = format!("https://{link_addr}/live/cam?bitrate=2Mbps&duration=4s");
    get(&mut server, live, &work.path().join("live.bin"));
    common::wait_for_released(&mut server, FILES + 1);

    let health = ureq::get(&format!("http://{metrics}/healthz"))
        .call()
        .expect("healthz")
        .body_mut()
        .read_to_string()
        .expect("body");
    assert_eq!(health, "ok\n");

    let traced = read_traces(&qlog);
    assert_eq!(traced.traces, FILES as u64 + 1, "{traced:?}");
    assert!(traced.packets_lost > 0 && traced.copies > 0, "{traced:?}");
    let prom = Prometheus::start(metrics, work.path());
    let q = |name: &str| {
        prom.query(name)
            .unwrap_or_else(|| panic!("Prometheus has no {name}:\n{}", read(work.path())))
    };
    let scraped = Traced {
        traces: q("recoup_connections_accepted_total") as u64,
        packets_sent: q("recoup_sent_packets_total") as u64,
        bytes_sent: q("recoup_sent_bytes_total") as u64,
        copies: q("recoup_copies_sent_total") as u64,
        packets_lost: q("recoup_lost_packets_total") as u64,
    };
    eprintln!("qlog: {traced:?}\nPrometheus: {scraped:?}");
    assert_eq!(scraped, traced);
    for (name, want) in [
        ("recoup_connections_open", 0.0),
        ("recoup_handshakes_in_flight", 0.0),
        ("recoup_connections_refused_total", 0.0),
        ("recoup_retries_sent_total", 0.0),
        ("recoup_live_streams_total", 1.0),
        ("recoup_live_streams_open", 0.0),
    ] {
        assert_eq!(q(name), want, "{name}");
    }
    // Present, whatever their value: PTOs and stalls depend on the loss draws.
    q("recoup_pto_expirations_total");
    q("recoup_live_stalls_total");

    // The histogram counts every lost range whose recovery completed; `recoup analyze` rebuilds
    // the same lineages from the traces.
    let ranges = q("sum(recoup_recovery_latency_seconds_count)");
    let analyzed = analyze_lost_ranges(&qlog, &work.path().join("analyze"));
    assert_eq!(ranges, analyzed, "histogram count against recoup analyze");
    assert!(
        prom.query("recoup_recovery_latency_seconds_count{policy=\"crest\"}")
            .is_some(),
        "the default policy, crest, labels the histogram"
    );
}

/// Lost ranges over every trace in `qlog`, by `recoup analyze`.
fn analyze_lost_ranges(qlog: &Path, out: &Path) -> f64 {
    let traces: Vec<_> = std::fs::read_dir(qlog)
        .expect("qlog dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sqlog"))
        .collect();
    let output = Command::new(recoup())
        .arg("analyze")
        .args(&traces)
        .arg("--out")
        .arg(out)
        .output()
        .expect("recoup analyze");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("analyze.json")).expect("analyze.json"))
            .expect("rows");
    rows.iter()
        .map(|r| r["lost_ranges"].as_f64().expect("lost_ranges"))
        .sum()
}

fn read(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
}

#[test]
fn a_metrics_address_in_use_is_an_error_naming_it() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let output = Command::new(recoup())
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics"])
        .arg(addr.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("recoup serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics {addr}")),
        "the address is not named: {stderr}"
    );
}
