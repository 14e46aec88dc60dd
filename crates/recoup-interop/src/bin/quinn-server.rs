//! `quinn-server --listen ADDR --root DIR`: serve files over hq-interop with quinn.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Serve the files of one directory over hq-interop with the unmodified quinn server
/// (self-signed certificate; honours SSLKEYLOGFILE). Prints the address it listens on.
#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    #[arg(long)]
    root: PathBuf,
    /// Send a Retry to every new client (address validation, RFC 9000 §8.1).
    #[arg(long)]
    retry: bool,
    /// Send without GSO (a loopback capture then shows each datagram).
    #[arg(long)]
    no_gso: bool,
    /// HTTP/3: not supported by this peer (exits with 127, the interop runner's "unsupported").
    #[arg(long)]
    h3: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = recoup_interop::run_main("quinn-server", async {
        if args.h3 {
            // h3 on h3-quinn (no Retry, GSO as quinn defaults).
            let server = recoup_interop::h3_server::Server::bind(args.listen, &args.root)?;
            println!("listening on {}", server.local_addr()?);
            tokio::select! {
                () = server.run() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return Ok(());
        }
        let server = recoup_interop::server::Server::bind(
            args.listen,
            &args.root,
            recoup_interop::server::ServerOptions {
                retry: args.retry,
                no_gso: args.no_gso,
            },
        )?;
        println!("listening on {}", server.local_addr()?);
        tokio::select! {
            () = server.run() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok::<(), recoup_interop::Error>(())
    });
    if result.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
