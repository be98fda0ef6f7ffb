//! `kubectl meta run` arguments.

use std::path::PathBuf;

use clap::Args;

use super::dev::OutputArg;
use super::{ClusterArgs, DefinitionArgs, EngineArgs};

/// Arguments of `kubectl meta run`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    kubectl meta run                               (in a Pod: every controller definition it may read)\n  \
    kubectl meta run -l team=payments              (only the definitions with these labels)\n  \
    kubectl meta run -f /etc/controllers/          (definitions from files, e.g. a mounted ConfigMap)\n  \
    kubectl meta run --kubeconfig ~/.kube/config --lease-namespace ops\n\n\
Without -f and --from-cluster, every CompositeController, DecoratorController and MapController\n\
of the cluster runs (as the API allows reading them), and created, changed or deleted\n\
definitions start, restart or stop their controller. Run 2 or more replicas: each controller\n\
has a Lease; only its holder syncs it.")]
pub struct RunArgs {
    /// Which cluster to run against (default: the Pod's ServiceAccount when
    /// KUBERNETES_SERVICE_HOST is set, else the kubeconfig).
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where the controller definitions come from (default: every definition on the cluster).
    #[command(flatten)]
    pub defs: DefinitionArgs,
    /// Namespace of the controllers' Leases (default: the Pod's namespace, else the context's).
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long the other replicas wait after the holder's last renewal before taking a
    /// controller over (client-go's LeaseDuration).
    #[arg(long, value_name = "SECONDS", default_value_t = 15.0)]
    pub lease_duration: f64,
    /// How long the holder keeps trying to renew before it stops syncing (client-go's
    /// RenewDeadline).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub renew_deadline: f64,
    /// Between two attempts to take or renew a Lease (client-go's RetryPeriod).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub retry_period: f64,
    /// This replica's name in the Leases (default: $HOSTNAME, the Pod's name, and a random
    /// suffix).
    #[arg(long, value_name = "NAME")]
    pub identity: Option<String>,
    /// Share each controller's parents among the replicas started with --sharded (a
    /// consistent hash ring over their member Leases, one per controller and replica) instead
    /// of one active replica per controller (docs/guide/sharding.md).
    #[arg(long)]
    pub sharded: bool,
    /// Serve /healthz, /readyz, /metrics and /debug/flight on this address.
    #[arg(long, value_name = "HOST:PORT", default_value = "0.0.0.0:9090")]
    pub http_addr: String,
    /// Bound, in bytes, of the flight recorder (the last engine events: triggers, hook
    /// requests and answers, writes, hot loops; Secret values masked) that GET /debug/flight
    /// on --http-addr returns; 0 turns it off.
    #[arg(long, value_name = "BYTES", default_value_t = crate::engine::flight::DEFAULT_SIZE)]
    pub flight_recorder_size: usize,
    /// Log format on stdout: one JSON object per event (the events of `dev -o json`), or lines
    /// for people.
    #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
    pub output: OutputArg,
    /// Run exec hooks in DIR (their relative commands and workingDirs resolve there) instead
    /// of their definition file's directory: for an image that carries the hooks while the
    /// definitions come from the ConfigMap `deploy` mounts (the Dockerfile `kubectl meta init`
    /// generates for exec hooks sets it).
    #[arg(long, value_name = "DIR", env = "KUBECTL_META_HOOK_DIR")]
    pub hook_dir: Option<PathBuf>,
    /// Workers, client rate limits, apply strategy.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Where the Pod's ServiceAccount token, ca.crt and namespace are mounted.
    #[arg(
        long,
        value_name = "DIR",
        default_value = crate::k8s::incluster::SERVICE_ACCOUNT_DIR
    )]
    pub service_account_dir: PathBuf,
}
