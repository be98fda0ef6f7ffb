//! `kubectl meta dev` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{ClusterArgs, ColorArg, DefinitionArgs, EngineArgs};

/// Output format of the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    /// One readable line per event (colored on a terminal).
    Human,
    /// One JSON object per line (NDJSON), for scripts.
    Json,
}

/// How children are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApplyStrategyArg {
    /// Three-way merge with the last-applied annotation (Metacontroller's default).
    ClientSide,
    /// Server-side apply with field manager kubectl-meta.
    ServerSide,
}

/// What `--once` counts as converged besides syncs that write nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitForArg {
    /// Every child Current by the kstatus rules (Pods Ready, workloads whose
    /// observedGeneration and replicas caught up, custom resources Ready); Failed children
    /// are reported, not waited for.
    Current,
    /// Nothing more: a parent whose last sync wrote nothing (or only its status) is converged.
    None,
}

/// Arguments of `kubectl meta dev`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta dev --sandbox --apply -f examples/hello-world/\n  \
    kubectl meta dev --sandbox --apply -f examples/hello-world/ --once\n  \
    kubectl meta dev -f controller.yaml --hook-base-url http://127.0.0.1:8080\n  \
    kubectl meta dev --from-cluster my-controller --hook-base-url http://127.0.0.1:8080 -o json\n  \
    kubectl meta dev -f examples/hello-world/webhook/ --hook-base-url http://127.0.0.1:8081 \\\n      \
      --hook-server 'python3 examples/hello-world/server.py --port 8081'\n  \
    kubectl meta dev --resync default/hello      (ask the running dev loop to resync a parent)\n\n\
On a terminal the TUI runs (? lists its keys: r resync parent, R resync all, p pause/resume,\n\
ctrl-r replay, y YAML, d diff, / filter, q quit). With --no-tui, keys then Enter: r = resync\n\
all, r NAME = resync one parent, p = pause/resume writes, R = replay the last requests.\n\
Signals: SIGUSR1 resyncs everything, SIGUSR2 pauses/resumes writes.")]
pub struct DevArgs {
    /// Which cluster to run against.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where the controller definitions come from.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Create the documents that are not controllers (CRDs, namespaces, sample parents) first,
    /// those that do not exist yet: objects that exist are left as they are (see --overwrite).
    #[arg(long)]
    pub apply: bool,
    /// With --apply: also re-apply documents whose object exists (server-side apply, forced),
    /// reverting what was changed since.
    #[arg(long, requires = "apply")]
    pub overwrite: bool,
    /// Sync every parent until nothing is left to do, then exit; failed syncs are retried
    /// with backoff until --timeout (exit code 4 naming what never converged).
    #[arg(long)]
    pub once: bool,
    /// With --once: give up after this many seconds [default: 300].
    #[arg(long, value_name = "SECONDS", requires = "once")]
    pub timeout: Option<u64>,
    /// With --once: a parent is converged when its last sync wrote nothing (or only its
    /// status) and every child is Current (`current`: Pods Ready, workloads caught up, custom
    /// resources Ready; Failed children are reported), or as soon as a sync writes nothing
    /// (`none`).
    #[arg(
        long,
        value_enum,
        value_name = "WHAT",
        default_value = "current",
        requires = "once"
    )]
    pub wait_for: WaitForArg,
    /// Print the event log instead of the terminal UI (the log is also what a non-terminal
    /// stdout, -o json and --once get).
    #[arg(long)]
    pub no_tui: bool,
    /// Event log format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "human")]
    pub output: OutputArg,
    /// Write every hook request and answer to files in DIR (DIR/CONTROLLER/PARENT/TIME-HOOK.request.json,
    /// .response.json, .stderr.txt, .error.txt), to replay with curl or use in a hook's tests.
    #[arg(long, value_name = "DIR")]
    pub dump_requests: Option<PathBuf>,
    /// Write every answered hook exchange to DIR as a test case for `kubectl meta test`
    /// (DIR/CONTROLLER/PARENT/HOOK[-KEY]-HASH.yaml; one file per distinct request, the newer
    /// answer replacing the older; format: docs/hook-test-case.md). In a project
    /// (kubectl-meta.yaml), DIR defaults to the project's `record` directory.
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = "")]
    pub record: Option<PathBuf>,
    /// With --record: keep Secret values in the cases (replaced by placeholders by default).
    #[arg(long, requires = "record")]
    pub record_secrets: bool,
    /// Print every event, including no-op syncs in full.
    #[arg(long)]
    pub verbose_events: bool,
    /// Color the human event log: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: ColorArg,
    /// Run against a sandbox API server started in-process (ephemeral unless --state is given).
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    pub sandbox: bool,
    /// With --sandbox: keep the sandbox's objects in DIR across runs.
    #[arg(long, value_name = "DIR", requires = "sandbox")]
    pub state: Option<PathBuf>,
    /// With --sandbox: where to write its kubeconfig (default: a file in the data directory).
    #[arg(long, value_name = "PATH", requires = "sandbox")]
    pub write_kubeconfig: Option<PathBuf>,
    /// Replace scheme, host and port of every webhook URL (keeping the path); also resolves
    /// service webhooks, which cannot be reached from a laptop.
    #[arg(long, value_name = "URL")]
    pub hook_base_url: Option<String>,
    /// Workers, client rate limits, apply strategy.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Allow writing to this non-local context (repeatable).
    #[arg(long, value_name = "NAME")]
    pub allow_context: Vec<String>,
    /// Run even though a Metacontroller in the cluster runs a controller of the same name.
    #[arg(long)]
    pub force: bool,
    /// Namespace of the Lease that keeps two dev loops from driving the same controller.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// Ask the `kubectl meta run` replica holding a controller's Lease to yield it: it finishes
    /// its in-flight sync and stops syncing just the controllers this dev loop runs, and takes
    /// them back when this loop exits or its Lease lapses. Use run's --lease-namespace.
    #[arg(long, conflicts_with = "sandbox")]
    pub takeover: bool,
    /// Start this command as the hook server (`sh -c`, own process group), restart it when its
    /// files change, stop it on exit.
    #[arg(long, value_name = "COMMAND")]
    pub hook_server: Option<String>,
    /// The managed server is ready when a GET of this URL answers 2xx (default: the port of
    /// --hook-base-url accepts connections).
    #[arg(long, value_name = "URL", requires = "hook_server")]
    pub hook_server_ready: Option<String>,
    /// Watch these files or directories for changes (repeatable; default: the hook server's
    /// script directory, every exec hook's directory, and the -f paths). .gitignore-aware.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["no_watch", "once"])]
    pub watch: Vec<PathBuf>,
    /// Quiet time after the last file change before reloading.
    #[arg(long, value_name = "MS", default_value_t = 100,
        conflicts_with_all = ["no_watch", "once"])]
    pub debounce: u64,
    /// Do not watch files (no hot reload).
    #[arg(long)]
    pub no_watch: bool,
    /// Ask the running dev loop(s) to resync PARENT (`namespace/name` or `name`), or every
    /// parent; then exit.
    #[arg(long, value_name = "PARENT", num_args = 0..=1, default_missing_value = "",
        conflicts_with_all = ["pause", "resume"])]
    pub resync: Option<String>,
    /// Ask the running dev loop(s) to stop writing (hooks are still called, plans shown); then exit.
    #[arg(long, conflicts_with = "resume")]
    pub pause: bool,
    /// Ask the running dev loop(s) to write again (and resync every parent); then exit.
    #[arg(long)]
    pub resume: bool,
    /// Ask the running dev loop(s) to write their flight recording (the last engine events,
    /// docs/flight-recorder.md) to FILE; then exit.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["resync", "pause", "resume"])]
    pub dump_flight: Option<PathBuf>,
    /// The project file found (kubectl-meta.yaml), once its values filled the flags not given.
    #[arg(skip)]
    pub project: Option<crate::project::Project>,
    /// Where the managed hook server runs when the project file named it (its directory).
    #[arg(skip)]
    pub hook_server_dir: Option<PathBuf>,
}
