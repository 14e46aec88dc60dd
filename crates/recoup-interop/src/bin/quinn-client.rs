//! `quinn-client URL -o FILE`: download one file over hq-interop with quinn, print the goodput.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Download a file over hq-interop (HTTP/0.9 over QUIC) with the unmodified quinn client.
/// Certificates are not checked. Honours SSLKEYLOGFILE.
#[derive(Parser, Debug)]
struct Args {
    /// https://HOST:PORT/PATH
    url: String,
    /// Where the body goes.
    #[arg(short, long)]
    output: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let download = recoup_interop::run_main("quinn-client", async {
        let (addr, host, path) = recoup_interop::client::parse_url(&args.url)?;
        recoup_interop::client::get(addr, &host, &path, &args.output).await
    });
    let Some(d) = download else {
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
