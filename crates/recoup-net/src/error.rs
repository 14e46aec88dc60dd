//! The crate's one error type.

/// Errors of the UDP driver and the hq-interop application.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("transport: {0}")]
    Transport(#[from] recoup_transport::Error),
    #[error("configuration: {0}")]
    Config(String),
    #[error("bad URL {url:?}: {why}")]
    Url { url: String, why: &'static str },
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("refused: {0}")]
    Refused(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// An HTTP status other than success: `404 Not Found: /x`.
    #[error("{status}: {path}")]
    Status { status: String, path: String },
    #[error("connection failed: {0}")]
    Connection(String),
    #[error("origin: {0}")]
    Origin(String),
    #[error("client too slow: {0}")]
    TooSlow(String),
    #[error("path: {0}")]
    Path(#[from] recoup_elements::Error),
    /// Some URLs of a download failed (each also reported on its own).
    #[error("{failed} of {total} downloads failed: {urls}")]
    Downloads {
        failed: usize,
        total: usize,
        urls: String,
    },
    #[error("stopped by the user")]
    Interrupted,
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
