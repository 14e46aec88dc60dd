//! Test-only peers for recoup's interop tests and benchmark: an hq-interop client and file
//! server built on the unmodified quinn crate. Nothing here is recoup code; that is the point.

pub mod client;
pub mod error;
pub mod server;
pub mod tls;

pub use error::Error;
