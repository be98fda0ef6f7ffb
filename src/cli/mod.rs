//! Command-line definitions (clap). Plain data only: behaviour lives in [`crate::commands`].

pub mod completion;
pub mod deploy;
pub mod dev;
pub mod dryrun;
pub mod flight;
pub mod init;
pub mod inspect;
pub mod replay;
pub mod run;
pub mod sandbox;
pub mod test;
pub mod version;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The local dev loop for Metacontroller-style controllers.
#[derive(Debug, Parser)]
#[command(name = "kubectl-meta", bin_name = "kubectl meta", version = version::VERSION_LINE, about, long_about = None)]
pub struct Cli {
    /// Flags every subcommand shares.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// Cluster flags given before the subcommand (`kubectl meta --kubeconfig K dev ...`), for
    /// the subcommands that talk to a cluster; see [`ClusterArgs::or`].
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Which cluster to talk to (kubectl's names), for the subcommands that talk to one. Not
/// global: `sandbox` is the cluster and takes none of them.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace scope for this request.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

impl ClusterArgs {
    /// Each flag from `self`, else from `outer` (the same flags given before the subcommand).
    pub fn or(self, outer: ClusterArgs) -> ClusterArgs {
        ClusterArgs {
            kubeconfig: self.kubeconfig.or(outer.kubeconfig),
            context: self.context.or(outer.context),
            namespace: self.namespace.or(outer.namespace),
        }
    }

    /// The flags that are set, as typed (`--kubeconfig`, ...).
    pub fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.kubeconfig.is_some() {
            v.push("--kubeconfig");
        }
        if self.context.is_some() {
            v.push("--context");
        }
        if self.namespace.is_some() {
            v.push("--namespace");
        }
        v
    }
}

/// Where controller definitions come from: the same flags for every command that runs, plans
/// or tests controllers (`dev`, `dryrun`, `test`).
#[derive(Debug, Clone, Default, Args)]
pub struct DefinitionArgs {
    /// Controller definitions: YAML/JSON files (several documents each) or directories of them.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Process the directories given with -f recursively (as kubectl's -R).
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Read the CompositeController, DecoratorController or MapController NAME (or KIND/NAME, e.g.
    /// decoratorcontroller/NAME) from the cluster instead of a file (repeatable).
    #[arg(long, value_name = "[KIND/]NAME")]
    pub from_cluster: Vec<String>,
    /// Only the controller definitions whose labels match this selector (kubectl's -l syntax,
    /// as Metacontroller's --target-label-selector: key=value, key!=value, key in (a,b),
    /// key notin (a), key, !key; comma-separated, all must hold).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
}

impl DefinitionArgs {
    /// Neither `-f` nor `--from-cluster` was given.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.from_cluster.is_empty()
    }
}

/// How the engine runs: the same flags for every command that runs it (`dev`, `run`).
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Concurrent syncs per controller.
    #[arg(long, value_name = "N", default_value_t = crate::engine::DEFAULT_WORKERS)]
    pub workers: usize,
    /// Explicit client-side cap: API requests per second (default 0: no fixed limit; requests
    /// go as fast as the API server accepts them, and a 429 answer slows them down and is
    /// retried after its Retry-After).
    #[arg(long, value_name = "QPS", default_value_t = 0.0)]
    pub api_qps: f64,
    /// With --api-qps: requests that may go at once after a quiet time.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub api_burst: u32,
    /// How children are created and updated.
    #[arg(long, value_enum, default_value = "client-side")]
    pub apply_strategy: dev::ApplyStrategyArg,
    /// After a sync that wrote only the parent's status: `sync` it once more on that write's
    /// echo, as Metacontroller does (a hook sees the status it wrote committed, e.g. a phase it
    /// acts on next), or `skip` that sync (one hook call fewer per parent, for hooks whose
    /// answer does not depend on their own last status).
    #[arg(long, value_enum, default_value = "sync")]
    pub status_echo: StatusEchoArg,
}

/// `--status-echo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusEchoArg {
    /// Sync again on the echo of a status write (Metacontroller's behaviour).
    Sync,
    /// Do not: a sync that wrote only the status ends the parent's round.
    Skip,
}

/// When to color output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always (e.g. piping into `less -R`).
    Always,
    /// Never.
    Never,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a controller project: CRD, controller, sample, a hook with a typed kit in Python,
    /// JavaScript, Go or Rust, a first hook test, a project file, README, Dockerfile and CI.
    Init(Box<init::InitArgs>),
    /// Run controller definitions locally: the engine on your machine, hooks served or run locally.
    Dev(Box<dev::DevArgs>),
    /// Run controller definitions in a cluster: the engine of `dev`, headless, highly available
    /// (a Lease per controller), with /healthz, /readyz and /metrics.
    Run(Box<run::RunArgs>),
    /// Render (or apply) what running controller definitions in a cluster takes: namespace,
    /// least-privilege RBAC, a Deployment of `kubectl meta run`, PDB, metrics Service.
    Deploy(Box<deploy::DeployArgs>),
    /// Show what a sync would do, as a diff, writing nothing (exit 1 when there are changes).
    Dryrun(Box<dryrun::DryrunArgs>),
    /// Run an embedded Kubernetes-compatible API server (kubectl works against it).
    Sandbox(sandbox::SandboxArgs),
    /// Replay recorded hook exchanges against the current hooks and compare the answers.
    Test(Box<test::TestArgs>),
    /// Trace an object's ownership up to its root(s) and down its tree, controller-aware.
    Inspect(Box<inspect::InspectArgs>),
    /// Run a flight recording's window again in an in-process sandbox, with the recorded hook
    /// answers or the current hooks (a hot loop recorded in a cluster, offline).
    Replay(Box<replay::ReplayArgs>),
    /// The flight recorder of `kubectl meta run`: `flight dump POD` fetches a pod's recording.
    Flight(flight::FlightArgs),
    /// Print the version, git commit and target of this build.
    Version(version::VersionArgs),
    /// Write a shell completion script for kubectl-meta (bash, zsh, fish, ...).
    Completion(completion::CompletionArgs),
    /// Complete the words after `kubectl meta` (what the kubectl_complete-meta helper calls).
    #[command(name = "__complete", hide = true)]
    Complete(completion::CompleteArgs),
}
