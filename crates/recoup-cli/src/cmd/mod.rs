//! One module per subcommand.

pub mod analyze;
pub mod compare;
pub mod get;
pub mod run;
pub mod serve;
pub mod simulate;
pub mod transport;
