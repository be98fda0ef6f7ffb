//! `kubectl meta dryrun` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{ClusterArgs, ColorArg, DefinitionArgs};

/// Output format of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryrunOutput {
    /// Colored headers and unified YAML diffs, then a summary line.
    Human,
    /// The plan as one JSON document (schema: docs/dryrun-plan.md).
    Json,
}

/// Arguments of `kubectl meta dryrun`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta dryrun -f examples/hello-world/                  (every parent the controller selects)\n  \
    kubectl meta dryrun -f controller.yaml default/hello --hook-base-url http://127.0.0.1:8080\n  \
    kubectl meta dryrun -f map.yaml default/fanout --key configmap-a-1a2b3c4d\n  \
    kubectl meta dryrun --from-cluster my-controller -o json --server\n  \
    kubectl meta dryrun -f hook-v2/ --against hook-v1/            (how the answers differ, then the plan)\n  \
    kubectl meta dryrun -f examples/catset/ --simulate            (every sync until convergence, on a private copy)\n\n\
Nothing is ever written (no create, update, patch, delete, status or Lease).\n\
Exit codes as kubectl diff: 0 no changes, 1 changes, 2 and up errors (docs/guide/dryrun.md).")]
pub struct DryrunArgs {
    /// Parents to plan (`namespace/name` or `name`; default: every parent the controller
    /// selects). For a DecoratorController: targets.
    #[arg(value_name = "PARENT")]
    pub parents: Vec<String>,
    /// Which cluster to read.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where the controller definitions come from.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// MapController: only this map key of the PARENT given (`--key` needs exactly one PARENT).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Replace scheme, host and port of every webhook URL (keeping the path); also resolves
    /// service webhooks.
    #[arg(long, value_name = "URL")]
    pub hook_base_url: Option<String>,
    /// Lines of context around each change in the diffs.
    #[arg(
        short = 'C',
        long = "context-lines",
        value_name = "N",
        default_value_t = 3
    )]
    pub context_lines: usize,
    /// Keep metadata.managedFields in the diffs (stripped by default).
    #[arg(long)]
    pub show_managed_fields: bool,
    /// Keep every field in the diffs: managedFields, resourceVersion, uid, generation,
    /// creationTimestamp, the last-applied annotation, the status of children.
    #[arg(long)]
    pub show_all: bool,
    /// Show Secret values (masked per key by default: `data.password: (changed)`).
    #[arg(long)]
    pub show_secrets: bool,
    /// Confirm each create and update with a server-side dry run (dryRun=All): defaulting,
    /// validation and admission errors show before a real sync hits them.
    #[arg(long)]
    pub server: bool,
    /// Also run this other version of the hooks (a controller file or directory, e.g. the
    /// previous version checked out elsewhere) on the same requests, and show how the answers
    /// differ.
    #[arg(long, value_name = "PATH")]
    pub against: Option<PathBuf>,
    /// Write every answered hook exchange to DIR as a test case for `kubectl meta test`
    /// (as `dev --record`; format: docs/hook-test-case.md).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// With --record: keep Secret values in the cases (replaced by placeholders by default).
    #[arg(long, requires = "record")]
    pub record_secrets: bool,
    /// Output format: human (default) or json.
    #[arg(short = 'o', long = "output", value_enum, default_value = "human")]
    pub output: DryrunOutput,
    /// Colors: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: ColorArg,
    /// Run every sync until the controllers converge, on a private copy of the objects they
    /// see (an in-process sandbox; the real engine and hooks; nothing is written to the
    /// cluster): the steps per parent, the end state against live, and why it does not
    /// converge when it does not (exit 4).
    #[arg(long, conflicts_with_all = ["server", "key"])]
    pub simulate: bool,
    /// With --simulate: most syncs of one parent.
    #[arg(long, value_name = "N", default_value_t = 50, requires = "simulate")]
    pub max_steps: usize,
    /// With --simulate: give up after this many seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 120,
        requires = "simulate"
    )]
    pub simulate_timeout: u64,
    /// -v (the global flag): with --simulate, each step's changed fields.
    #[arg(skip)]
    pub verbose: u8,
}
