//! One module per subcommand.

pub mod analyze;
pub mod compare;
pub mod config_file;
pub mod game;
pub mod get;
pub mod link;
pub mod plot;
pub mod population;
pub mod report;
pub mod run;
pub mod serve;
pub mod simulate;
pub mod sweep;
pub mod tables;
pub mod train_dqn;
pub mod transport;
pub mod viewers;
