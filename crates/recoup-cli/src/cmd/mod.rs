//! One module per subcommand.

pub mod get;
pub mod serve;
pub mod transport;
