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
    if args.h3 {
        eprintln!("quinn-server: HTTP/3 is not supported");
        return ExitCode::from(127);
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quinn-server: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
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
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quinn-server: {e}");
            ExitCode::FAILURE
        }
    }
}
