//! `kubectl meta sandbox` arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

/// Arguments of `kubectl meta sandbox`.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Examples:\n  kubectl meta sandbox --ephemeral --write-kubeconfig /tmp/sandbox.kubeconfig\n  KUBECONFIG=/tmp/sandbox.kubeconfig kubectl get namespaces"
)]
pub struct SandboxArgs {
    /// Address to listen on; port 0 picks a free port. Loopback unless you say otherwise.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Keep objects in a SQLite database in DIR, across restarts (default: a per-user data directory).
    #[arg(long, value_name = "DIR", conflicts_with = "ephemeral")]
    pub state: Option<PathBuf>,
    /// Keep objects in memory only.
    #[arg(long)]
    pub ephemeral: bool,
    /// Where to write the kubeconfig (default: DIR/kubeconfig, or the data directory for --ephemeral).
    #[arg(long, value_name = "PATH")]
    pub write_kubeconfig: Option<PathBuf>,
    /// Do not simulate a kubelet (pods stay Pending).
    #[arg(long)]
    pub no_kubelet: bool,
    /// How long the simulated kubelet waits before a new pod is Running and Ready, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub kubelet_delay_ms: u64,
    /// How long run-to-completion pods (restartPolicy Never/OnFailure, e.g. a Job's) run before
    /// the simulated kubelet marks them Succeeded, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub pod_run_ms: u64,
    /// Also accept the bearer tokens of this CSV file, as kube-apiserver's --token-auth-file:
    /// one `token,user,uid,"group1,group2"` per line (groups optional).
    #[arg(long, value_name = "PATH")]
    pub token_auth_file: Option<PathBuf>,
    /// kube-apiserver feature gates, `NAME=true|false,...`; the sandbox models
    /// ShardedListAndWatch (KEP-5866 shardSelector on list and watch; off by default, as in 1.36).
    #[arg(long, value_name = "NAME=BOOL,...", value_parser = parse_feature_gates)]
    pub feature_gates: Option<kube_sandbox::FeatureGates>,
}

fn parse_feature_gates(s: &str) -> Result<kube_sandbox::FeatureGates, String> {
    kube_sandbox::FeatureGates::parse(s).map_err(|e| e.to_string())
}
