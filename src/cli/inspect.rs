//! `kubectl meta inspect` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::ClusterArgs;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InspectOutput {
    /// The tree table (default).
    Tree,
    /// The tree table with RELATION and MAP-KEY columns.
    Wide,
    /// The graph (`nodes`, `edges`) as JSON (NDJSON with --watch).
    Json,
    /// The graph as YAML (documents separated by `---` with --watch).
    Yaml,
}

use super::ColorArg;

/// Arguments of `kubectl meta inspect`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta inspect pod/hello-abc12                 (owners up to the root, then the whole tree)\n  \
    kubectl meta inspect greetings.accept.example.com/hello -o wide\n  \
    kubectl meta inspect deploy web --up                 (only the owner chain)\n  \
    kubectl meta inspect cm/out -f controller.yaml -o json\n  \
    kubectl meta inspect mygroup/hello -w                (redraw on every change)")]
pub struct InspectArgs {
    /// TYPE/NAME (or TYPE NAME) in kubectl's resource syntax: pod/x, deploy/x, plurals, short
    /// names, kinds, TYPE.GROUP/x.
    #[arg(value_name = "TYPE/NAME", required = true, num_args = 1..=2)]
    pub object: Vec<String>,
    /// Which cluster to read.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Controller definitions (files or directories, as `dev -f`) instead of those in the cluster.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Output format: tree (default), wide, json, yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value = "tree")]
    pub output: InspectOutput,
    /// At most N owner levels up and N levels below the object.
    #[arg(long, value_name = "N")]
    pub depth: Option<usize>,
    /// Only the owner chain(s) up to the root(s).
    #[arg(long, conflicts_with = "down")]
    pub up: bool,
    /// Only the object's own subtree.
    #[arg(long)]
    pub down: bool,
    /// Keep watching and redraw on every change.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Colors: auto (terminal, honours NO_COLOR), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorArg,
    /// List every listable type, even when a governing controller says which ones matter.
    #[arg(long)]
    pub all_types: bool,
    /// Print requests made and bytes read to stderr.
    #[arg(long)]
    pub stats: bool,
}
