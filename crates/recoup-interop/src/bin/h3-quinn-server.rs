//! `h3-quinn-server --listen ADDR --root DIR`: serve files over HTTP/3 with h3 on quinn.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Serve the files of one directory over HTTP/3 with the unmodified h3 server on h3-quinn
/// (self-signed certificate; honours SSLKEYLOGFILE). Prints the address it listens on.
#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    #[arg(long)]
    root: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let served = recoup_interop::run_main("h3-quinn-server", async {
        let server = recoup_interop::h3_server::Server::bind(args.listen, &args.root)?;
        println!("listening on {}", server.local_addr()?);
        tokio::select! {
            () = server.run() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    });
    if served.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
