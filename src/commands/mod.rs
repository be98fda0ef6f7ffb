//! Subcommand implementations: the application edge, where errors become `anyhow` reports.

pub mod dev;
pub mod dev_output;
pub mod exit;
pub mod inspect;
pub mod sandbox;
