//! `kubectl meta test` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{ClusterArgs, ColorArg, DefinitionArgs};

/// Output format of the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestOutput {
    /// A line per case (`ok`, `FAIL`, `ERROR`), the differences of failed cases, a closing line.
    Human,
    /// One JSON object per case, then a summary object (NDJSON).
    Json,
}

/// Arguments of `kubectl meta test`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta dev --sandbox --apply -f examples/hello-world/ --once --record hook-tests/\n  \
    kubectl meta test hook-tests/ -f examples/hello-world/\n  \
    kubectl meta test hook-tests/ -f controller.yaml --hook-base-url http://127.0.0.1:8081 \\\n      \
      --hook-server 'python3 server.py --port 8081'\n  \
    kubectl meta test -f examples/hello-world/ -k world --update     (accept the current answers)\n\n\
Each case (format: docs/hook-test-case.md) sends its recorded request to the current hook, the\n\
way `dev` calls it, and compares the answer with the recorded one as the engine sees it.\n\
Exit codes: 0 all passed, 1 some failed, 2 bad input or no cases found, 3 cluster,\n\
4 a hook could not be called (server down, program missing).")]
pub struct TestArgs {
    /// Directories of test cases (searched recursively for *.yaml, *.yml and *.json) or case
    /// files [default: the project's `tests`, else hook-tests].
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Which cluster to read with --from-cluster (otherwise an in-process sandbox serves
    /// discovery, the secured webhooks' references and --validate); `--context` also runs the
    /// e2e tests on that cluster, a namespace per test.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where the controller definitions come from.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Replace scheme, host and port of every webhook URL (keeping the path); also resolves
    /// service webhooks.
    #[arg(long, value_name = "URL")]
    pub hook_base_url: Option<String>,
    /// Start this command as the hook server (`sh -c`, own process group) before the first
    /// case, stop it at the end (as `dev --hook-server`).
    #[arg(long, value_name = "COMMAND")]
    pub hook_server: Option<String>,
    /// The managed server is ready when a GET of this URL answers 2xx (default: the port of
    /// --hook-base-url accepts connections).
    #[arg(long, value_name = "URL", requires = "hook_server")]
    pub hook_server_ready: Option<String>,
    /// Do not compare this answer field in any case (a field path as failures print it,
    /// e.g. `status.lastSeen` or `children[*].metadata.annotations`; repeatable).
    #[arg(long, value_name = "PATH")]
    pub ignore: Vec<String>,
    /// Only the cases whose name (CONTROLLER/PARENT/FILE) contains FILTER.
    #[arg(short = 'k', long = "filter", value_name = "FILTER")]
    pub filter: Option<String>,
    /// Cases run at once.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    /// Rewrite the expected answer of each failing case with the current hook's answer
    /// (showing what changed); the run then passes.
    #[arg(long)]
    pub update: bool,
    /// Also check each child and status in the answers against the schemas the API server
    /// applies (built-in kinds, CRDs given with -f or read from the cluster): a server-side dry
    /// run on an in-process sandbox.
    #[arg(long)]
    pub validate: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "human")]
    pub output: TestOutput,
    /// Also write the results as JUnit XML to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Run each e2e test plain twice, then under each perturbation CLASS (comma-separated;
    /// every class when bare: stale-read, missed-state, restart, conflict, throttle,
    /// hook-timeout, hook-restart, reorder) and report what differs from the plain run.
    #[arg(long, value_name = "CLASS,...", num_args = 0..=1, require_equals = true,
        default_missing_value = "all")]
    pub perturb: Option<Vec<String>>,
    /// Seed of the --perturb schedules (the same seed, the same schedule).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "perturb")]
    pub seed: u64,
    /// Colors: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: ColorArg,
    /// The project file found (kubectl-meta.yaml), once its values filled the flags not given.
    #[arg(skip)]
    pub project: Option<crate::project::Project>,
    /// Where the managed hook server runs when the project file named it (its directory).
    #[arg(skip)]
    pub hook_server_dir: Option<PathBuf>,
}
