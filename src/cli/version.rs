//! `kubectl meta version` arguments, and the build facts it reports (embedded by build.rs).

use clap::{Args, ValueEnum};

/// This version of kubectl-meta (Cargo.toml's `version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit it was built from, or `unknown` (built outside a git checkout).
pub const GIT_COMMIT: &str = env!("KUBECTL_META_GIT_COMMIT");
/// The Rust target triple it was built for.
pub const TARGET: &str = env!("KUBECTL_META_TARGET");
/// What `--version` prints after the program name.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KUBECTL_META_GIT_COMMIT"),
    ", ",
    env!("KUBECTL_META_TARGET"),
    ")"
);

/// Output format of `kubectl meta version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VersionOutput {
    /// A few readable lines.
    Human,
    /// One JSON object: version, gitCommit, target, platform.
    Json,
}

/// Arguments of `kubectl meta version`.
#[derive(Debug, Clone, Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "human")]
    pub output: VersionOutput,
}
