//! `tracing` output on stderr, filtered by `RUST_LOG` (default: info for recoup, warnings else).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,recoup_net=info,recoup=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person reading a terminal, not in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
