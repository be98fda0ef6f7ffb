//! `kubectl meta replay` arguments.

use std::path::PathBuf;

use clap::Args;

use super::dev::OutputArg;

/// Arguments of `kubectl meta replay`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta replay flight.json --no-tui -o json     (the recorded window again, offline)\n  \
    curl -s http://POD:8080/debug/flight | kubectl meta replay -\n  \
    kubectl meta replay flight.json --live-hooks -f controller.yaml   (does the fixed hook still loop?)\n\n\
The recording's first state is loaded into an in-process sandbox (no cluster is used) and the\n\
engine runs again: the recorded hook answers are served in their order (or, with --live-hooks,\n\
the current hooks are called) and the writes other clients made are applied again between the\n\
syncs where the recording saw them. Exit 0: the window replayed with no hot loop and no failed\n\
sync; 1: a hot loop or a failed sync; 2: the file cannot be replayed; 4: --timeout ran out.")]
pub struct ReplayArgs {
    /// The flight recording (GET /debug/flight of `kubectl meta run`, `dev --dump-flight`);
    /// `-` reads it from stdin.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Call the current hooks instead of serving the recorded answers: those of the -f
    /// definitions, else of the project's (kubectl-meta.yaml), else of the recorded ones.
    #[arg(long)]
    pub live_hooks: bool,
    /// Controller definitions to run instead of the recorded ones (files or directories).
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Replaces scheme, host and port of webhook URLs (with --live-hooks).
    #[arg(long, value_name = "URL", requires = "live_hooks")]
    pub hook_base_url: Option<String>,
    /// Print the event log instead of opening the terminal UI (stepping through the recorded
    /// syncs); the log is printed anyway when stdout or stdin is not a terminal.
    #[arg(long)]
    pub no_tui: bool,
    /// Event log format: the events of `kubectl meta dev -o json` (NDJSON) or readable lines.
    #[arg(short = 'o', long = "output", value_enum, default_value = "human")]
    pub output: OutputArg,
    /// Stop after this many seconds even if the replay has not finished.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
}
