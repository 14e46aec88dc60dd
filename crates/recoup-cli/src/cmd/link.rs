//! `recoup link`: relay UDP between clients and a server through the simulator's path elements,
//! in real time.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use recoup_elements::{
    BlackholeSpec, CorruptSpec, DuplicateSpec, ElementSpec, LossSpec, MtuSpec, PathSpec, Prob,
    QueueSpec, ReorderSpec, ServiceSpec, Trace,
};
use recoup_net::rebind::RebindSpec;
use recoup_net::{Error, LinkOptions, Relay};
use recoup_sim::scenario::DirectionSpec;

use super::simulate::parse_duration;

/// Relay UDP datagrams between clients and a server through emulated paths: the simulator's
/// loss models, queues, rate limits or Mahimahi traces, and delays, applied in real time.
///
/// Each direction is `loss | queue + rate (or trace) | delay`, as in a scenario file: --rtt is
/// split in half per direction; --down-* (server to client) and --up-* (client to server)
/// override the shared flags. Without --rate or --trace a direction has no rate limit. Each
/// client (source address) gets its own socket towards the server and its own elements, seeded
/// with --seed plus the client's index. Prints `listening on ADDR`, relays until Ctrl-C or
/// --duration, then prints a summary: per direction the datagrams in, lost, dropped by the
/// queue, corrupted, duplicated, reordered, delivered, and the timing error (time sent minus
/// time scheduled).
///
/// --corrupt, --blackhole and --rebind-* are the QUIC interop runner's corruption, blackhole
/// and NAT-rebinding scenarios; --duplicate and --reorder are netem's.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup link --listen 127.0.0.1:4434 --upstream 127.0.0.1:4433 --rtt 60ms --rate 12Mbps \\
      --loss \"bernoulli 5%\" --queue \"droptail packets=100\"
  recoup link --upstream 127.0.0.1:4433 --rtt 40ms --trace traces/TMobile-LTE-short.down \\
      --up-trace traces/TMobile-LTE-short.up --loss \"gemodel 1% 10% 70% 0.1%\"
  recoup link --upstream 127.0.0.1:4433 --delay 20ms --jitter 5ms --down-loss \"state 1% 10%\" \\
      --duration 60s
  recoup link --upstream 127.0.0.1:4433 --rtt 40ms --duplicate \"1%\" --reorder \"25% 50% gap 5\"
Then point the client at the link: recoup get --insecure https://127.0.0.1:4434/file")]
pub struct Args {
    /// UDP address clients send to (port 0 picks a free port; the real one is printed).
    #[arg(long, default_value = "127.0.0.1:4434")]
    pub listen: SocketAddr,
    /// The server's UDP address.
    #[arg(long, default_value = "127.0.0.1:4433")]
    pub upstream: SocketAddr,
    /// Round-trip propagation delay; each direction gets half.
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "delay")]
    pub rtt: Option<Duration>,
    /// One-way delay of each direction.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub delay: Option<Duration>,
    /// Uniform jitter (+/-) on the delay; never reorders.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub jitter: Option<Duration>,
    /// Link rate, e.g. 12Mbps.
    #[arg(long, value_parser = parse_rate, conflicts_with = "trace")]
    pub rate: Option<u64>,
    /// Mahimahi (mm-link) trace file instead of a constant rate.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Loss model: "bernoulli 5%", "gemodel 1% 10% 70% 0.1%", "state 1% 10%", "onoff 1s 100ms",
    /// "slotted-gemodel 30ms 1% 10%", "bursts 4% 1:37.2% 13:90% 183:100%", "replay FILE",
    /// "none".
    #[arg(long, value_parser = parse_loss)]
    pub loss: Option<LossSpec>,
    /// Queue in front of the link: "infinite", "droptail packets=100", "drophead bytes=150000",
    /// "codel target=5ms interval=100ms".
    #[arg(long, value_parser = parse_queue)]
    pub queue: Option<QueueSpec>,

    /// Server-to-client round-trip share: this direction's delay is half of it.
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "down_delay")]
    pub down_rtt: Option<Duration>,
    /// Server-to-client one-way delay.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub down_delay: Option<Duration>,
    /// Server-to-client jitter.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub down_jitter: Option<Duration>,
    /// Server-to-client rate.
    #[arg(long, value_name = "RATE", value_parser = parse_rate, conflicts_with = "down_trace")]
    pub down_rate: Option<u64>,
    /// Server-to-client trace file.
    #[arg(long, value_name = "FILE")]
    pub down_trace: Option<PathBuf>,
    /// Server-to-client loss model.
    #[arg(long, value_name = "LOSS", value_parser = parse_loss)]
    pub down_loss: Option<LossSpec>,
    /// Server-to-client queue.
    #[arg(long, value_name = "QUEUE", value_parser = parse_queue)]
    pub down_queue: Option<QueueSpec>,

    /// Client-to-server round-trip share: this direction's delay is half of it.
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "up_delay")]
    pub up_rtt: Option<Duration>,
    /// Client-to-server one-way delay.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub up_delay: Option<Duration>,
    /// Client-to-server jitter.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub up_jitter: Option<Duration>,
    /// Client-to-server rate.
    #[arg(long, value_name = "RATE", value_parser = parse_rate, conflicts_with = "up_trace")]
    pub up_rate: Option<u64>,
    /// Client-to-server trace file.
    #[arg(long, value_name = "FILE")]
    pub up_trace: Option<PathBuf>,
    /// Client-to-server loss model.
    #[arg(long, value_name = "LOSS", value_parser = parse_loss)]
    pub up_loss: Option<LossSpec>,
    /// Client-to-server queue.
    #[arg(long, value_name = "QUEUE", value_parser = parse_queue)]
    pub up_queue: Option<QueueSpec>,

    /// Corrupt datagrams in both directions, netem syntax plus the interop runner's limits:
    /// "2%", "30% burst=3 within=50" (one bit flipped per corrupted datagram; at most `burst` in
    /// a row; within the first `within` bytes).
    #[arg(long, value_name = "CORRUPT", value_parser = parse_corrupt)]
    pub corrupt: Option<CorruptSpec>,
    /// Duplicate datagrams in both directions, netem syntax: "1%", "5% 25%" (percentage, then
    /// optionally correlation). The copy leaves right behind the original and meets the loss, corruption
    /// and delay after it on its own.
    #[arg(long, value_name = "DUPLICATE", value_parser = parse_duplicate)]
    pub duplicate: Option<DuplicateSpec>,
    /// Reorder in both directions, netem syntax: "25%", "25% 50% gap 5" (percentage, then
    /// optionally correlation and gap N). As in netem it needs a delay (--delay or --rtt): a chosen
    /// datagram skips it and overtakes the ones waiting; after one, gap - 1 are delayed.
    #[arg(long, value_name = "REORDER", value_parser = parse_reorder)]
    pub reorder: Option<ReorderSpec>,
    /// Outages in both directions: "on=5s off=2s [repeat=N]" (traffic flows for `on`, is
    /// dropped for `off`, N times, counted from each client's first datagram).
    #[arg(long, value_name = "BLACKHOLE", value_parser = parse_blackhole)]
    pub blackhole: Option<BlackholeSpec>,
    /// The path's MTU in both directions, as UDP payload bytes: larger datagrams are dropped
    /// (a hop with a smaller MTU; QUIC never fragments). "1400", or "1452 then=1350 after=2s"
    /// to shrink it 2 s after each client's first datagram (a path MTU black hole).
    #[arg(long, value_name = "MTU", value_parser = parse_mtu)]
    pub mtu: Option<MtuSpec>,
    /// NAT rebinding: each client's datagrams leave from a new source port this long after
    /// its first one (then every --rebind-every).
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub rebind_first: Option<Duration>,
    /// Rebind again every TIME after the first.
    #[arg(long, value_name = "TIME", value_parser = parse_duration, requires = "rebind_first")]
    pub rebind_every: Option<Duration>,
    /// Rebinding changes the source address too (127.0.0.2, .3, ...; needs a 127.x upstream).
    #[arg(long, requires = "rebind_first")]
    pub rebind_addr: bool,

    /// Client k's elements draw from seed SEED + k.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Forget a client silent this long in both directions.
    #[arg(long, value_name = "TIME", value_parser = parse_duration, default_value = "30s")]
    pub idle_timeout: Duration,
    /// Exit after this long (default: until Ctrl-C).
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Log the downlink (server → client) per packet into FILE, in the format of mm-link's
    /// --downlink-log: `T + BYTES` arrivals, `T - BYTES DELAY` departures, times in ms.
    #[arg(long, value_name = "FILE")]
    pub log: Option<std::path::PathBuf>,
}

fn parse_rate(s: &str) -> Result<u64, String> {
    recoup_elements::parse_rate(s)
}

fn parse_loss(s: &str) -> Result<LossSpec, String> {
    s.parse::<LossSpec>().map_err(|e| e.to_string())
}

fn parse_queue(s: &str) -> Result<QueueSpec, String> {
    s.parse::<QueueSpec>().map_err(|e| e.to_string())
}

fn parse_corrupt(s: &str) -> Result<CorruptSpec, String> {
    format!("corrupt {s}")
        .parse::<CorruptSpec>()
        .map_err(|e| e.to_string())
}

fn parse_duplicate(s: &str) -> Result<DuplicateSpec, String> {
    format!("duplicate {s}")
        .parse::<DuplicateSpec>()
        .map_err(|e| e.to_string())
}

fn parse_reorder(s: &str) -> Result<ReorderSpec, String> {
    format!("reorder {s}")
        .parse::<ReorderSpec>()
        .map_err(|e| e.to_string())
}

fn parse_mtu(s: &str) -> Result<MtuSpec, String> {
    format!("mtu {s}")
        .parse::<MtuSpec>()
        .map_err(|e| e.to_string())
}

fn parse_blackhole(s: &str) -> Result<BlackholeSpec, String> {
    format!("blackhole {s}")
        .parse::<BlackholeSpec>()
        .map_err(|e| e.to_string())
}

/// One direction's flags, with the shared ones as fallback.
struct Flags<'a> {
    name: &'a str,
    rtt: Option<Duration>,
    delay: Option<Duration>,
    jitter: Option<Duration>,
    rate: Option<u64>,
    trace: Option<&'a PathBuf>,
    loss: Option<&'a LossSpec>,
    queue: Option<QueueSpec>,
}

impl Args {
    fn direction(&self, name: &str) -> Flags<'_> {
        if name == "down" {
            Flags {
                name: "--down",
                rtt: self.down_rtt,
                delay: self.down_delay,
                jitter: self.down_jitter,
                rate: self.down_rate,
                trace: self.down_trace.as_ref(),
                loss: self.down_loss.as_ref(),
                queue: self.down_queue,
            }
        } else {
            Flags {
                name: "--up",
                rtt: self.up_rtt,
                delay: self.up_delay,
                jitter: self.up_jitter,
                rate: self.up_rate,
                trace: self.up_trace.as_ref(),
                loss: self.up_loss.as_ref(),
                queue: self.up_queue,
            }
        }
    }

    /// The element chain of one direction: the outage, duplication and corruption elements,
    /// then what a scenario file would build, its delay reordering if asked.
    ///
    /// Duplication comes before corruption and loss because netem clones a packet before
    /// corrupting it and passes the clone through its loss and corruption again
    /// (sch_netem.c `netem_enqueue`).
    fn path(&self, name: &str) -> Result<PathSpec, Error> {
        let mut path = self.scenario_path(name)?;
        if let Some(reorder) = self.reorder {
            // Both ways of building a direction end with its delay; q_netem.c refuses a
            // reorder without one, as netem reorders by letting some datagrams skip it.
            let (delay, jitter) = match path.elements.last() {
                Some(&ElementSpec::Delay { delay, jitter }) if !delay.is_zero() => (delay, jitter),
                _ => {
                    return Err(Error::Config(format!(
                        "--reorder needs a delay, and the {name} direction has none: set \
                         --delay or --rtt (or --{name}-delay / --{name}-rtt)"
                    )))
                }
            };
            path.elements.pop();
            path.elements.push(ElementSpec::Reorder {
                delay,
                jitter,
                reorder,
            });
        }
        let front = [
            self.blackhole.map(ElementSpec::Blackhole),
            self.mtu.map(ElementSpec::Mtu),
            self.duplicate.map(ElementSpec::Duplicate),
            self.corrupt.map(ElementSpec::Corrupt),
        ];
        path.elements.splice(0..0, front.into_iter().flatten());
        Ok(path)
    }

    /// The element chain of one direction, as a scenario file would build it.
    fn scenario_path(&self, name: &str) -> Result<PathSpec, Error> {
        let o = self.direction(name);
        let own_service = o.rate.is_some() || o.trace.is_some();
        let (rate, trace, trace_flag) = if own_service {
            (o.rate, o.trace, format!("{}-trace", o.name))
        } else {
            (self.rate, self.trace.as_ref(), "--trace".to_owned())
        };
        let service = match (rate, trace) {
            (Some(bps), _) => Some(ServiceSpec::Rate(bps)),
            (None, Some(path)) => {
                // Load once here so a bad file is reported against its flag.
                Trace::load(path).map_err(|e| Error::Config(format!("{trace_flag}: {e}")))?;
                Some(ServiceSpec::Trace(path.clone()))
            }
            (None, None) => None,
        };
        let queue = o.queue.or(self.queue);
        let half = |rtt: Duration| rtt / 2;
        let delay = o
            .delay
            .or(o.rtt.map(half))
            .or(self.delay)
            .or(self.rtt.map(half))
            .unwrap_or(Duration::ZERO);
        let jitter = o.jitter.or(self.jitter).unwrap_or(Duration::ZERO);
        let loss = o
            .loss
            .or(self.loss.as_ref())
            .cloned()
            .unwrap_or(LossSpec::Bernoulli(Prob::ZERO));
        let Some(service) = service else {
            if queue.is_some() {
                return Err(Error::Config(format!(
                    "{}-queue / --queue needs a link to feed: set --rate or --trace \
                     (or {0}-rate / {0}-trace)",
                    o.name
                )));
            }
            return Ok(PathSpec {
                elements: vec![
                    ElementSpec::Loss(loss),
                    ElementSpec::Delay { delay, jitter },
                ],
            });
        };
        Ok(DirectionSpec {
            loss,
            queue: queue.unwrap_or(QueueSpec::Infinite),
            service,
            delay,
            jitter,
        }
        .path_spec())
    }

    fn options(&self) -> Result<LinkOptions, Error> {
        Ok(LinkOptions {
            listen: self.listen,
            upstream: self.upstream,
            down: self.path("down")?,
            up: self.path("up")?,
            seed: self.seed,
            idle_timeout: self.idle_timeout,
            duration: self.duration,
            rebind: self.rebind_first.map(|first| RebindSpec {
                first,
                every: self.rebind_every,
                addr: self.rebind_addr,
            }),
        })
    }
}

/// A direction's elements in the order a datagram crosses them, in the words of the flags
/// (`bernoulli 5% | droptail | rate 12 Mbit/s | delay 30 ms`), for the log.
fn describe(path: &PathSpec) -> String {
    let pct = |p: Prob| format!("{:.3}%", p.fraction() * 100.0);
    let ms = |d: Duration| format!("{} ms", d.as_secs_f64() * 1e3);
    let parts: Vec<String> = path
        .elements
        .iter()
        .map(|e| match e {
            ElementSpec::Loss(LossSpec::Bernoulli(p)) => format!("bernoulli {}", pct(*p)),
            ElementSpec::Loss(LossSpec::SlottedGe { slot, .. }) => {
                format!("slotted-gemodel per {}", ms(*slot))
            }
            ElementSpec::Loss(LossSpec::GilbertElliott(_)) => "gemodel".into(),
            ElementSpec::Loss(LossSpec::FourState(_)) => "state".into(),
            ElementSpec::Loss(LossSpec::Bursts { rate, sizes, .. }) => format!(
                "bursts {:.3}% (mean burst {:.2} packets)",
                rate * 100.0,
                sizes.mean()
            ),
            ElementSpec::Loss(LossSpec::Replay(file)) => format!("replay {}", file.display()),
            ElementSpec::Loss(LossSpec::OnOff { mean_on, mean_off }) => {
                format!("onoff {} on, {} off", ms(*mean_on), ms(*mean_off))
            }
            // Real datagrams carry no key: each is drawn by its (encrypted) payload's hash.
            ElementSpec::Loss(LossSpec::Crn { slot, .. }) => {
                format!("crn per-packet draws, {} slots", ms(*slot))
            }
            ElementSpec::Corrupt(c) => format!("corrupt {}", pct(c.prob)),
            ElementSpec::Duplicate(d) if d.correlation == Prob::ZERO => {
                format!("duplicate {}", pct(d.prob))
            }
            ElementSpec::Duplicate(d) => format!(
                "duplicate {} (correlation {})",
                pct(d.prob),
                pct(d.correlation)
            ),
            ElementSpec::Blackhole(b) => format!(
                "blackhole {} on, {} off, {} times",
                ms(b.on),
                ms(b.off),
                b.repeat
            ),
            ElementSpec::Mtu(m) => match m.shrink {
                None => format!("mtu {} B", m.max),
                Some((then, after)) => format!("mtu {} B, {} B after {}", m.max, then, ms(after)),
            },
            ElementSpec::Link { service, queue } => {
                let queue = match queue {
                    QueueSpec::Infinite => "infinite queue",
                    QueueSpec::DropTail(_) => "droptail",
                    QueueSpec::DropHead(_) => "drophead",
                    QueueSpec::CoDel { .. } => "codel",
                };
                match service {
                    ServiceSpec::Rate(bps) => {
                        format!("{queue} | rate {} Mbit/s", *bps as f64 / 1e6)
                    }
                    ServiceSpec::Trace(file) => format!("{queue} | trace {}", file.display()),
                }
            }
            ElementSpec::Delay { delay, jitter } if jitter.is_zero() => {
                format!("delay {}", ms(*delay))
            }
            ElementSpec::Delay { delay, jitter } => {
                format!("delay {} ± {}", ms(*delay), ms(*jitter))
            }
            ElementSpec::Reorder {
                delay,
                jitter,
                reorder,
            } => format!(
                "delay {}{}, reorder {} (correlation {}, gap {})",
                ms(*delay),
                if jitter.is_zero() {
                    String::new()
                } else {
                    format!(" ± {}", ms(*jitter))
                },
                pct(reorder.prob),
                pct(reorder.correlation),
                reorder.gap
            ),
        })
        .collect();
    parts.join(" | ")
}

pub fn run(args: Args) -> Result<(), Error> {
    let options = args.options()?;
    tracing::info!("down (server -> client): {}", describe(&options.down));
    tracing::info!("up (client -> server): {}", describe(&options.up));
    let mut relay = Relay::bind(options)?;
    if let Some(path) = &args.log {
        relay.log_downlink(path)?;
    }
    let stopper = relay.stopper();
    ctrlc::set_handler(move || stopper.stop())
        .map_err(|e| Error::Config(format!("Ctrl-C handler: {e}")))?;
    // Tests and scripts read this line to learn the port.
    println!("listening on {}", relay.local_addr()?);
    let report = relay.run()?;
    print!("{report}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, String> {
        let argv = std::iter::once("link").chain(flags.iter().copied());
        Cli::try_parse_from(argv)
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn paths_are_logged_in_words_not_debug_text() {
        let args = parse(&[
            "--rtt",
            "60ms",
            "--rate",
            "12Mbps",
            "--loss",
            "bernoulli 5%",
            "--queue",
            "droptail packets=100",
            "--down-jitter",
            "2ms",
        ])
        .expect("valid");
        assert_eq!(
            describe(&args.path("down").expect("down")),
            "bernoulli 5.000% | droptail | rate 12 Mbit/s | delay 30 ms ± 2 ms"
        );
        assert_eq!(
            describe(&args.path("up").expect("up")),
            "bernoulli 5.000% | droptail | rate 12 Mbit/s | delay 30 ms"
        );
    }

    #[test]
    fn shared_flags_apply_to_both_directions_and_overrides_win() {
        let args = parse(&[
            "--rtt",
            "60ms",
            "--rate",
            "12Mbps",
            "--loss",
            "bernoulli 5%",
            "--queue",
            "droptail packets=100",
            "--up-rate",
            "1Mbps",
            "--down-delay",
            "5ms",
            "--up-loss",
            "none",
        ])
        .expect("valid");
        let down = args.path("down").expect("down");
        let up = args.path("up").expect("up");
        let delay = |p: &PathSpec| match p.elements.last() {
            Some(ElementSpec::Delay { delay, .. }) => *delay,
            other => panic!("last element {other:?}"),
        };
        assert_eq!(delay(&down), Duration::from_millis(5));
        assert_eq!(delay(&up), Duration::from_millis(30));
        assert_eq!(
            down.elements[1],
            ElementSpec::Link {
                service: ServiceSpec::Rate(12_000_000),
                queue: "droptail packets=100".parse().expect("queue"),
            }
        );
        assert!(matches!(
            up.elements[1],
            ElementSpec::Link {
                service: ServiceSpec::Rate(1_000_000),
                ..
            }
        ));
        assert_eq!(
            up.elements[0],
            ElementSpec::Loss(LossSpec::Bernoulli(Prob::ZERO))
        );
        assert_eq!(
            down.elements[0],
            ElementSpec::Loss(LossSpec::Bernoulli(Prob::from_fraction(0.05)))
        );
    }

    #[test]
    fn no_rate_means_no_link_and_a_queue_then_is_an_error() {
        let args = parse(&["--delay", "10ms"]).expect("valid");
        assert_eq!(args.path("up").expect("up").elements.len(), 2);
        let args = parse(&["--queue", "droptail packets=5"]).expect("parses");
        let e = args
            .path("down")
            .expect_err("queue without link")
            .to_string();
        assert!(e.contains("--rate"), "{e}");
    }

    #[test]
    fn bad_flags_are_named() {
        for (flags, name) in [
            (vec!["--loss", "bernouli 5%"], "--loss"),
            (vec!["--down-loss", "gemodel 1% zz"], "--down-loss"),
            (vec!["--rate", "12"], "--rate"),
            (vec!["--up-queue", "droptail"], "--up-queue"),
            (vec!["--rtt", "60"], "--rtt"),
            (vec!["--rate", "1Mbps", "--trace", "x"], "--rate"),
            (vec!["--rtt", "1ms", "--delay", "1ms"], "--rtt"),
        ] {
            let e = parse(&flags).expect_err(name);
            assert!(e.contains(name), "{flags:?}: {e}");
        }
        let args = parse(&["--down-trace", "/nonexistent/trace"]).expect("parses");
        let e = args.path("down").expect_err("missing file").to_string();
        assert!(
            e.contains("--down-trace") && e.contains("/nonexistent/trace"),
            "{e}"
        );
    }

    #[test]
    fn netem_duplicate_leads_and_reorder_rides_on_each_direction_delay() {
        let args = parse(&[
            "--rtt",
            "20ms",
            "--duplicate",
            "1%",
            "--reorder",
            "25% 50% gap 5",
            "--corrupt",
            "2%",
        ])
        .expect("valid");
        let options = args.options().expect("options");
        for path in [&options.down, &options.up] {
            let kinds: Vec<&str> = path.elements.iter().map(ElementSpec::kind).collect();
            assert_eq!(kinds, ["duplicate", "corrupt", "loss", "reorder"]);
        }
        assert_eq!(
            describe(&options.down),
            "duplicate 1.000% | corrupt 2.000% | bernoulli 0.000% | delay 10 ms, reorder \
             25.000% (correlation 50.000%, gap 5)"
        );
        for (flags, words) in [
            (vec!["--duplicate", "150%"], ["--duplicate", "`150%`"]),
            (vec!["--reorder", "25% gap 0"], ["--reorder", "`0`"]),
            (vec!["--reorder", "0% gap 2"], ["--reorder", "gap without"]),
        ] {
            let e = parse(&flags).expect_err(words[1]);
            assert!(words.iter().all(|w| e.contains(w)), "{flags:?}: {e}");
        }
        for (flags, direction) in [
            (vec!["--reorder", "25%"], "down"),
            (vec!["--down-delay", "5ms", "--reorder", "25%"], "up"),
        ] {
            let e = parse(&flags)
                .expect("parses")
                .options()
                .expect_err("no delay")
                .to_string();
            assert!(
                e.contains("--reorder needs a delay")
                    && e.contains(&format!("the {direction} direction")),
                "{flags:?}: {e}"
            );
        }
    }

    #[test]
    fn interop_runner_faults_lead_both_chains_and_rebinding_reaches_the_relay() {
        let args = parse(&[
            "--corrupt",
            "30% burst=3 within=50",
            "--blackhole",
            "on=5s off=2s",
            "--loss",
            "bernoulli 1%",
            "--rebind-first",
            "1s",
            "--rebind-every",
            "5s",
            "--rebind-addr",
        ])
        .expect("valid");
        let options = args.options().expect("options");
        for path in [&options.down, &options.up] {
            let kinds: Vec<&str> = path.elements.iter().map(ElementSpec::kind).collect();
            assert_eq!(kinds, ["blackhole", "corrupt", "loss", "delay"]);
        }
        assert_eq!(
            options.rebind,
            Some(RebindSpec {
                first: Duration::from_secs(1),
                every: Some(Duration::from_secs(5)),
                addr: true,
            })
        );
        let e = parse(&["--corrupt", "30% burst=0"]).expect_err("burst 0");
        assert!(e.contains("burst=0"), "{e}");
        assert!(parse(&["--rebind-addr"]).is_err(), "needs --rebind-first");
    }
}
