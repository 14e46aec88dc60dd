//! Test-only peers for recoup's interop tests and benchmark: hq-interop and HTTP/3 clients and
//! file servers built on the unmodified quinn crate (HTTP/3 with h3 and h3-quinn from
//! crates.io). Nothing here is recoup code; that is the point.

pub mod client;
pub mod error;
pub mod h3_client;
pub mod h3_server;
pub mod server;
pub mod tls;

pub use error::Error;

/// Runs a peer binary's `main` future on a current-thread tokio runtime, with tracing to stderr
/// (RUST_LOG); a failure is printed as `NAME: error` and gives `None`.
pub fn run_main<T>(
    name: &str,
    main: impl std::future::Future<Output = Result<T, Error>>,
) -> Option<T> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))
        .and_then(|rt| rt.block_on(main).map_err(|e| chain(&e)));
    result.map_err(|e| eprintln!("{name}: {e}")).ok()
}

/// An error and its causes, `outer: inner: ...`: quinn's "connection lost" says why only in its
/// source.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let inner = s.to_string();
        if !text.ends_with(&inner) {
            text = format!("{text}: {inner}");
        }
        source = s.source();
    }
    text
}
