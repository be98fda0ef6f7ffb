//! `kubectl meta deploy` arguments.

use clap::{Args, ValueEnum};

use super::{ClusterArgs, DefinitionArgs};

/// The image `deploy` renders by default: this release's.
pub const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/kubectl-meta/kubectl-meta:v",
    env!("CARGO_PKG_VERSION")
);

/// Output format of the rendered objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeployOutput {
    /// YAML documents separated by `---`.
    Yaml,
    /// A `v1` `List`.
    Json,
}

/// `--dry-run`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Send every object to the API server with `dryRun=All`: validated and admitted, not stored.
    Server,
}

/// Arguments of `kubectl meta deploy`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta deploy -f examples/catset/ > deploy.yaml\n  \
    kubectl meta deploy -f controllers/ --image registry.example.com/kubectl-meta:1 --apply\n  \
    kubectl meta deploy --from-cluster catset-controller --dry-run=server\n\n\
Renders the Namespace (-n, default kubectl-meta), a ServiceAccount, one least-privilege\n\
ClusterRole per controller (each rule's reason in the annotation kubectl-meta.dev/rules), the\n\
Lease Role, the Deployment running `kubectl meta run`, a PodDisruptionBudget and a metrics\n\
Service; with -f, the definitions as a ConfigMap; with --grafana-dashboard and\n\
--prometheus-rule, a dashboard ConfigMap and alerts. A customize hook's related resources are\n\
chosen at run time: name them with --related CONTROLLER=RESOURCE[.GROUP].")]
pub struct DeployArgs {
    /// The cluster (for --from-cluster, --apply and --dry-run); -n is the namespace to deploy to.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The controller definitions to deploy.
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Output format (without --apply).
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: DeployOutput,
    /// Apply the objects (server-side apply, field manager kubectl-meta-deploy) instead of
    /// printing them.
    #[arg(long)]
    pub apply: bool,
    /// Send the objects to the API server without storing them (server-side dry run).
    #[arg(long, value_enum, value_name = "server")]
    pub dry_run: Option<DryRun>,
    /// The container image running `kubectl meta run`.
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Replicas of the Deployment (one holds each controller's Lease, the others stand by).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub replicas: i32,
    /// The replicas share each controller's parents (`run --sharded`, a consistent hash ring
    /// over their member Leases) instead of one active replica per controller; the
    /// PodDisruptionBudget keeps a majority of them (docs/guide/sharding.md).
    #[arg(long)]
    pub sharded: bool,
    /// A resource a controller's customize hook asks for as related objects (get, list, watch
    /// in that controller's ClusterRole); repeat for each, e.g. `--related
    /// my-controller=configmaps --related my-controller=widgets.example.com`.
    #[arg(long = "related", value_name = "CONTROLLER=RESOURCE[.GROUP]")]
    pub related: Vec<String>,
    /// Also render a Grafana dashboard of the controllers' metrics: a ConfigMap labelled
    /// grafana_dashboard: "1", as Grafana's dashboard sidecar discovers them.
    #[arg(long)]
    pub grafana_dashboard: bool,
    /// Also render a PrometheusRule (Prometheus Operator) alerting on sync errors, p99 queue
    /// wait, hot loops, stuck syncs and controllers no replica holds.
    #[arg(long)]
    pub prometheus_rule: bool,
}
