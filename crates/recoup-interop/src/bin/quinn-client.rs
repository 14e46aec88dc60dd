//! `quinn-client URL... (-o FILE | -d DIR)`: download files over hq-interop with quinn, print
//! the goodput. `--h3` fetches them over HTTP/3 with h3 on h3-quinn, all on one connection.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use recoup_interop::client::{get_all, parse_url, Download, Options};

/// Download files over hq-interop (HTTP/0.9 over QUIC) with the unmodified quinn client, all on
/// one connection (each on its own stream) unless --multiconnect. Certificates are not
/// checked. Honours SSLKEYLOGFILE.
#[derive(Parser, Debug)]
struct Args {
    /// https://HOST:PORT/PATH, all on the same server.
    #[arg(required = true)]
    urls: Vec<String>,
    /// Where the body of the one URL goes.
    #[arg(short, long, conflicts_with = "dir")]
    output: Option<PathBuf>,
    /// Each body goes to `DIR/<last path segment>`.
    #[arg(short, long)]
    dir: Option<PathBuf>,
    /// One connection per URL, one after the other.
    #[arg(long)]
    multiconnect: bool,
    /// Update the 1-RTT keys once data flows.
    #[arg(long)]
    keyupdate: bool,
    /// Move to a new local port once data flows (active migration).
    #[arg(long)]
    migrate: bool,
    /// Send without GSO (a loopback capture then shows each datagram).
    #[arg(long)]
    no_gso: bool,
    /// HTTP/3 (h3 on h3-quinn) instead of hq-interop, every URL on one connection.
    #[arg(long)]
    h3: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = Options {
        key_update: args.keyupdate,
        migrate: args.migrate,
        no_gso: args.no_gso,
    };
    let result = recoup_interop::run_main("quinn-client", async {
        let mut requests = Vec::new();
        for url in &args.urls {
            let (addr, host, path) = parse_url(url)?;
            let out = match (&args.output, &args.dir) {
                (Some(o), None) if args.urls.len() == 1 => o.clone(),
                (None, Some(d)) => d.join(path.rsplit('/').next().unwrap_or_default()),
                _ => {
                    return Err(recoup_interop::Error::Usage(
                        "give -o FILE with one URL, or -d DIR".into(),
                    ))
                }
            };
            requests.push((addr, host, (path, out)));
        }
        let (addr, host) = (requests[0].0, requests[0].1.clone());
        let requests: Vec<(String, PathBuf)> = requests.into_iter().map(|r| r.2).collect();
        if args.h3 {
            // h3 on h3-quinn, every request on one connection, as the runner's http3 case asks.
            recoup_interop::h3_client::get_all(addr, &host, &requests).await
        } else if args.multiconnect {
            let mut total = Download {
                bytes: 0,
                elapsed: std::time::Duration::ZERO,
            };
            for r in requests {
                let d = get_all(addr, &host, std::slice::from_ref(&r), options).await?;
                total.bytes += d.bytes;
                total.elapsed += d.elapsed;
            }
            Ok(total)
        } else {
            get_all(addr, &host, &requests, options).await
        }
    });
    let Some(d) = result else {
        return ExitCode::FAILURE;
    };
    println!(
        "quinn-client: {} bytes in {:.3} s, {:.1} Mbit/s",
        d.bytes,
        d.elapsed.as_secs_f64(),
        d.goodput_mbps()
    );
    ExitCode::SUCCESS
}
