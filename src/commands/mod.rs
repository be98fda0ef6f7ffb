//! Subcommand implementations: the application edge, where errors become `anyhow` reports.

pub mod sandbox;
