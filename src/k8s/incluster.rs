//! Connecting from inside a Pod, as client-go's `rest.InClusterConfig` does: the API server at
//! `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the ServiceAccount's token
//! (re-read as the kubelet rotates it), CA and namespace from the mounted directory
//! (`/var/run/secrets/kubernetes.io/serviceaccount`).
//!
//! The configuration is built as an in-memory kubeconfig (cluster with the CA file, user with
//! the token file), so kube parses and refreshes it exactly as for a kubeconfig.

use std::path::{Path, PathBuf};

use kube::config::{
    AuthInfo, Cluster, Config, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};

use super::client::{ClientError, ClientLimits, Connection, ContextInfo, Throttle};

/// Where the kubelet mounts the ServiceAccount's token, CA and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The name the in-cluster "context" is shown with.
pub const CONTEXT_NAME: &str = "in-cluster";

/// Whether we run in a Pod (`KUBERNETES_SERVICE_HOST` is set).
pub fn in_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|h| !h.is_empty())
}

/// The Pod's namespace, from the mounted ServiceAccount (`dir/namespace`), when readable.
pub fn pod_namespace(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("namespace"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Why the in-cluster configuration cannot be built.
fn incomplete(message: String) -> ClientError {
    ClientError::Build {
        context: CONTEXT_NAME.into(),
        path: SERVICE_ACCOUNT_DIR.into(),
        message,
    }
}

/// Connect with the Pod's ServiceAccount mounted at `dir`; `namespace` (`-n`) overrides the
/// Pod's namespace.
pub async fn connect(
    dir: &Path,
    namespace: Option<&str>,
    limits: ClientLimits,
) -> Result<Connection, ClientError> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").unwrap_or_default();
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_default();
    if host.is_empty() || port.is_empty() {
        return Err(incomplete(
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set (the kubelet sets them in every Pod); outside a Pod pass --kubeconfig".into(),
        ));
    }
    // An IPv6 address needs brackets in a URL.
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let server = format!("https://{host}:{port}");
    let (token, ca) = (dir.join("token"), dir.join("ca.crt"));
    for (what, p) in [("token", &token), ("CA certificate", &ca)] {
        if !p.is_file() {
            return Err(incomplete(format!(
                "no ServiceAccount {what} at {} (is automountServiceAccountToken off?)",
                p.display()
            )));
        }
    }
    let ns = namespace
        .map(str::to_string)
        .or_else(|| pod_namespace(dir))
        .unwrap_or_else(|| "default".into());
    let kubeconfig = in_memory_kubeconfig(&server, &token, &ca, &ns);
    let options = KubeConfigOptions {
        context: Some(CONTEXT_NAME.into()),
        cluster: None,
        user: None,
    };
    let mut cfg = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| incomplete(e.to_string()))?;
    cfg.default_namespace = ns.clone();
    // 429/503/504 are retried by the Throttle layer (see `client::connect_limited`).
    cfg.default_retry = false;
    let throttle = Throttle::new(limits);
    let client = kube::client::ClientBuilder::try_from(cfg)
        .map_err(|e| incomplete(e.to_string()))?
        .with_layer(&throttle)
        .build();
    Ok(Connection {
        client,
        pace: throttle.pace(),
        context: ContextInfo {
            name: CONTEXT_NAME.into(),
            cluster: CONTEXT_NAME.into(),
            server,
            user: "serviceaccount".into(),
            namespace: ns,
        },
    })
}

/// A kubeconfig with one context: `server` with the CA file `ca`, the token file `token`.
fn in_memory_kubeconfig(server: &str, token: &Path, ca: &Path, namespace: &str) -> Kubeconfig {
    let path = |p: &Path| Some(PathBuf::from(p).display().to_string());
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: CONTEXT_NAME.into(),
            cluster: Some(Cluster {
                server: Some(server.into()),
                certificate_authority: path(ca),
                ..Cluster::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: CONTEXT_NAME.into(),
            auth_info: Some(AuthInfo {
                token_file: path(token),
                ..AuthInfo::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: CONTEXT_NAME.into(),
            context: Some(Context {
                cluster: CONTEXT_NAME.into(),
                user: Some(CONTEXT_NAME.into()),
                namespace: Some(namespace.into()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(CONTEXT_NAME.into()),
        ..Kubeconfig::default()
    }
}
