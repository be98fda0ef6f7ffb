//! Connecting to a cluster from the user's kubeconfig, and knowing what we connected to.
//!
//! [`connect`] finds the kubeconfig (`--kubeconfig`, else every existing file in `$KUBECONFIG`,
//! merged as kubectl does, else `~/.kube/config`), picks the context (`--context`, else
//! `current-context`) ONCE, and builds a client from exactly that context: later changes to
//! `current-context` never redirect a running session. [`ContextInfo`] says what was chosen, and
//! [`write_guard`] refuses writes to a context that is not evidently local unless the user allowed
//! it by name.
//!
//! Every client also goes through [`Throttle`] ([`super::pace`]): as fast as the API server
//! accepts, an adaptive concurrency window that a 429 TooManyRequests (API priority and
//! fairness) halves, its `Retry-After` honoured, and an explicit `--api-qps`/`--api-burst` cap
//! ([`ClientLimits`]) only when asked for. [`Connection::pace`] shares its figures.

use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub use super::pace::{ApiPace, ClientLimits, Throttle};

/// Context names that local development clusters use.
const LOCAL_CONTEXT_NAMES: &[&str] = &[
    "minikube",
    "docker-desktop",
    "rancher-desktop",
    "orbstack",
    "sandbox",
];

/// Context name prefixes that local development clusters use (kind, k3d).
const LOCAL_CONTEXT_PREFIXES: &[&str] = &["kind-", "k3d-"];

/// The context a session is pinned to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextInfo {
    /// Context name.
    pub name: String,
    /// Cluster name the context refers to.
    pub cluster: String,
    /// The cluster's server URL.
    pub server: String,
    /// User name the context refers to (empty when it names none).
    pub user: String,
    /// Namespace: `-n`, else the context's namespace, else `default`.
    pub namespace: String,
}

impl ContextInfo {
    /// True when the server is on this machine (127.0.0.0/8, `::1`, `localhost`, or the
    /// unspecified address `0.0.0.0`/`::`, which clients reach as this machine) or the context
    /// name is one local clusters use: `kind-*`, `k3d-*`, `minikube`, `docker-desktop`,
    /// `rancher-desktop`, `orbstack`, `sandbox`.
    pub fn is_local(&self) -> bool {
        self.server_is_loopback() || self.has_local_name()
    }

    /// One line for people: `context sandbox (https://127.0.0.1:39123, namespace default)`.
    pub fn describe(&self) -> String {
        format!(
            "context {} ({}, namespace {})",
            self.name, self.server, self.namespace
        )
    }

    fn server_is_loopback(&self) -> bool {
        server_host(&self.server).is_some_and(is_loopback_host)
    }

    fn has_local_name(&self) -> bool {
        LOCAL_CONTEXT_NAMES.contains(&self.name.as_str())
            || LOCAL_CONTEXT_PREFIXES
                .iter()
                .any(|p| self.name.len() > p.len() && self.name.starts_with(p))
    }
}

/// The host part of a server URL (`https://[::1]:6443/prefix` -> `::1`).
fn server_host(server: &str) -> Option<&str> {
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(h, _)| h)?,
        None => host_port.split(':').next().unwrap_or_default(),
    };
    (!host.is_empty()).then_some(host)
}

fn is_loopback_host(host: &str) -> bool {
    if host.trim_end_matches('.').eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback() || v4.is_unspecified(),
        Ok(IpAddr::V6(v6)) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// A client for the pinned context, and what that context is.
#[derive(Clone)]
pub struct Connection {
    /// Client built from exactly [`Connection::context`].
    pub client: kube::Client,
    /// The context the client talks to.
    pub context: ContextInfo,
    /// The pace of the client's requests (rate, 429s, window), shared with its [`Throttle`].
    pub pace: ApiPace,
}

/// Why we could not connect, or may not write.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No kubeconfig file exists in any of the places looked at.
    #[error(
        "no kubeconfig found (looked at: {}); point --kubeconfig at one, or run `kubectl meta dev --sandbox ...` for a local cluster with zero setup",
        looked.join("; ")
    )]
    NoKubeconfig {
        /// The places looked at, each described for people.
        looked: Vec<String>,
    },
    /// A kubeconfig file could not be read or parsed, or is inconsistent.
    #[error(
        "kubeconfig {path} is not usable (fix it, or point --kubeconfig at another file): {message}"
    )]
    InvalidKubeconfig {
        /// The file(s) involved.
        path: String,
        /// What is wrong (the parser's message).
        message: String,
    },
    /// `--context` names a context the kubeconfig does not define.
    #[error(
        "context {context:?} is not defined in kubeconfig {path}; available contexts: {}",
        list_or_none(available)
    )]
    UnknownContext {
        /// The requested context.
        context: String,
        /// The kubeconfig file(s).
        path: String,
        /// Contexts the kubeconfig defines.
        available: Vec<String>,
    },
    /// Neither `--context` nor `current-context` says which context to use.
    #[error(
        "kubeconfig {path} has no current-context; pick one with --context NAME (available: {}) or `kubectl config use-context NAME`",
        list_or_none(available)
    )]
    NoCurrentContext {
        /// The kubeconfig file(s).
        path: String,
        /// Contexts the kubeconfig defines.
        available: Vec<String>,
    },
    /// kube could not build a client for the context (credentials, certificates, URL).
    #[error("cannot build a client for context {context:?} from kubeconfig {path}: {message}")]
    Build {
        /// The context.
        context: String,
        /// The kubeconfig file(s).
        path: String,
        /// kube's message.
        message: String,
    },
    /// The context is not local and the user did not allow writing to it.
    #[error(
        "refusing to write to context {context:?} (server {server}): the server is not on loopback and {context:?} is not a known local context name (kind-*, k3d-*, minikube, docker-desktop, rancher-desktop, orbstack, sandbox). \
         To write to it anyway, pass --allow-context {context}; to develop without touching a cluster, run with --sandbox (an embedded API server on this machine) instead"
    )]
    ContextNotAllowed {
        /// The context name.
        context: String,
        /// Its server URL.
        server: String,
    },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// Ok when writing to `context` is allowed: it is local ([`ContextInfo::is_local`]) or its name
/// is in `allowed` (`--allow-context NAME`). Otherwise [`ClientError::ContextNotAllowed`],
/// which explains why and how to proceed; an interactive caller may ask the user instead.
pub fn write_guard(context: &ContextInfo, allowed: &[String]) -> Result<(), ClientError> {
    if context.is_local() || allowed.contains(&context.name) {
        return Ok(());
    }
    Err(ClientError::ContextNotAllowed {
        context: context.name.clone(),
        server: context.server.clone(),
    })
}

/// Connect to the cluster of one kubeconfig context.
///
/// The kubeconfig is `kubeconfig`, else the existing files of `$KUBECONFIG` (a `:` list,
/// merged: the first file to set a value wins), else `~/.kube/config`. The context is
/// `context`, else the kubeconfig's `current-context`; it is read once here and the client is
/// built from exactly that context. `namespace` (`-n`) overrides the context's namespace.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    namespace: Option<&str>,
) -> Result<Connection, ClientError> {
    connect_limited(kubeconfig, context, namespace, ClientLimits::default()).await
}

/// As [`connect`], with an explicit client-side rate cap (or none: the default).
pub async fn connect_limited(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    namespace: Option<&str>,
    limits: ClientLimits,
) -> Result<Connection, ClientError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let paths = kubeconfig_paths(kubeconfig, std::env::var_os("KUBECONFIG"), home)?;
    let (config, path) = load(&paths)?;
    let info = context_info(&config, &path, context, namespace)?;
    let options = KubeConfigOptions {
        context: Some(info.name.clone()),
        cluster: None,
        user: None,
    };
    let build_err = |message: String| ClientError::Build {
        context: info.name.clone(),
        path: path.clone(),
        message,
    };
    let mut cfg = Config::from_custom_kubeconfig(config, &options)
        .await
        .map_err(|e| build_err(e.to_string()))?;
    cfg.default_namespace = info.namespace.clone();
    // 429/503/504 are retried by the Throttle layer instead: kube's retry sits below it and
    // would hide the 429s that narrow its window.
    cfg.default_retry = false;
    let throttle = Throttle::new(limits);
    let client = kube::client::ClientBuilder::try_from(cfg)
        .map_err(|e| build_err(e.to_string()))?
        .with_layer(&throttle)
        .build();
    Ok(Connection {
        client,
        context: info,
        pace: throttle.pace(),
    })
}

/// The kubeconfig files to read, in merge order, given the flag, `$KUBECONFIG` and `$HOME`.
fn kubeconfig_paths(
    flag: Option<&Path>,
    env: Option<OsString>,
    home: Option<PathBuf>,
) -> Result<Vec<PathBuf>, ClientError> {
    if let Some(p) = flag {
        if p.exists() {
            return Ok(vec![p.to_path_buf()]);
        }
        return Err(ClientError::NoKubeconfig {
            looked: vec![format!("--kubeconfig {} (does not exist)", p.display())],
        });
    }
    let listed: Vec<PathBuf> = env
        .as_deref()
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        let existing: Vec<PathBuf> = listed.iter().filter(|p| p.exists()).cloned().collect();
        if existing.is_empty() {
            return Err(ClientError::NoKubeconfig {
                looked: listed
                    .iter()
                    .map(|p| format!("$KUBECONFIG entry {} (does not exist)", p.display()))
                    .collect(),
            });
        }
        return Ok(existing);
    }
    let Some(home) = home else {
        return Err(ClientError::NoKubeconfig {
            looked: vec![
                "$KUBECONFIG (not set)".to_string(),
                "~/.kube/config ($HOME is not set)".to_string(),
            ],
        });
    };
    let default = home.join(".kube").join("config");
    if default.exists() {
        return Ok(vec![default]);
    }
    Err(ClientError::NoKubeconfig {
        looked: vec![
            "$KUBECONFIG (not set)".to_string(),
            format!("{} (does not exist)", default.display()),
        ],
    })
}

/// Read and merge `paths`; returns the merged kubeconfig and the paths joined for messages.
fn load(paths: &[PathBuf]) -> Result<(Kubeconfig, String), ClientError> {
    let mut merged: Option<Kubeconfig> = None;
    for p in paths {
        let invalid = |e: kube::config::KubeconfigError| ClientError::InvalidKubeconfig {
            path: p.display().to_string(),
            message: e.to_string(),
        };
        let next = Kubeconfig::read_from(p).map_err(invalid)?;
        merged = Some(match merged {
            Some(m) => m.merge(next).map_err(invalid)?,
            None => next,
        });
    }
    let joined = std::env::join_paths(paths)
        .map(|j| j.to_string_lossy().into_owned())
        .unwrap_or_else(|_| {
            let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            shown.join(":")
        });
    Ok((merged.unwrap_or_default(), joined))
}

/// Pick the context (`requested`, else current-context) and describe it.
fn context_info(
    config: &Kubeconfig,
    path: &str,
    requested: Option<&str>,
    namespace: Option<&str>,
) -> Result<ContextInfo, ClientError> {
    let available: Vec<String> = config.contexts.iter().map(|c| c.name.clone()).collect();
    let name = match requested {
        Some(n) => n.to_string(),
        None => match config.current_context.as_deref().filter(|c| !c.is_empty()) {
            Some(n) => n.to_string(),
            None => {
                return Err(ClientError::NoCurrentContext {
                    path: path.to_string(),
                    available,
                });
            }
        },
    };
    let invalid = |message: String| ClientError::InvalidKubeconfig {
        path: path.to_string(),
        message,
    };
    let Some(named) = config.contexts.iter().find(|c| c.name == name) else {
        return Err(ClientError::UnknownContext {
            context: name,
            path: path.to_string(),
            available,
        });
    };
    let Some(ctx) = &named.context else {
        return Err(invalid(format!("context {name:?} has no cluster")));
    };
    let Some(cluster) = config.clusters.iter().find(|c| c.name == ctx.cluster) else {
        return Err(invalid(format!(
            "context {name:?} refers to cluster {:?}, which is not defined",
            ctx.cluster
        )));
    };
    let Some(server) = cluster.cluster.as_ref().and_then(|c| c.server.clone()) else {
        return Err(invalid(format!(
            "cluster {:?} (of context {name:?}) has no server",
            ctx.cluster
        )));
    };
    let namespace = namespace
        .map(str::to_string)
        .or_else(|| ctx.namespace.clone().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "default".to_string());
    Ok(ContextInfo {
        name,
        cluster: ctx.cluster.clone(),
        server,
        user: ctx.user.clone().unwrap_or_default(),
        namespace,
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use kube_sandbox::{Sandbox, SandboxConfig};

    fn info(name: &str, server: &str) -> ContextInfo {
        ContextInfo {
            name: name.to_string(),
            cluster: "c".to_string(),
            server: server.to_string(),
            user: "u".to_string(),
            namespace: "default".to_string(),
        }
    }

    /// The sandbox's kubeconfig plus a second, remote context `prod` (never contacted).
    fn write_kubeconfig(dir: &Path, sandbox: &Sandbox) -> PathBuf {
        let mut yaml = sandbox.kubeconfig_yaml();
        yaml = yaml.replace(
            "contexts:\n",
            "contexts:\n- name: prod\n  context:\n    cluster: prod\n    user: sandbox\n    namespace: team-a\n",
        );
        yaml = yaml.replace(
            "clusters:\n",
            "clusters:\n- name: prod\n  cluster:\n    server: https://prod.example.com:6443\n",
        );
        let path = dir.join("config");
        std::fs::write(&path, yaml).unwrap();
        path
    }

    #[tokio::test]
    async fn connects_with_explicit_kubeconfig_and_context() {
        let sb = Sandbox::start(SandboxConfig::ephemeral()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = write_kubeconfig(dir.path(), &sb);
        let conn = connect(Some(&path), Some("sandbox"), None).await.unwrap();
        assert_eq!(
            conn.context,
            ContextInfo {
                name: "sandbox".into(),
                cluster: "sandbox".into(),
                server: sb.url(),
                user: "sandbox".into(),
                namespace: "default".into(),
            }
        );
        assert_eq!(
            conn.context.describe(),
            format!("context sandbox ({}, namespace default)", sb.url())
        );
        // The client really talks to the sandbox.
        let ns: kube::Api<Namespace> = kube::Api::all(conn.client.clone());
        assert!(ns.get("kube-system").await.is_ok());
        assert_eq!(conn.client.default_namespace(), "default");
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn context_is_pinned_and_namespace_override_applies() {
        let sb = Sandbox::start(SandboxConfig::ephemeral()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = write_kubeconfig(dir.path(), &sb);
        // No --context: current-context (sandbox) is used; -n overrides the namespace.
        let conn = connect(Some(&path), None, Some("team-b")).await.unwrap();
        assert_eq!(conn.context.name, "sandbox");
        assert_eq!(conn.context.namespace, "team-b");
        assert_eq!(conn.client.default_namespace(), "team-b");
        // Switching current-context afterwards does not move the existing connection.
        let edited = std::fs::read_to_string(&path)
            .unwrap()
            .replace("current-context: sandbox", "current-context: prod");
        std::fs::write(&path, edited).unwrap();
        let ns: kube::Api<Namespace> = kube::Api::all(conn.client.clone());
        assert!(ns.get("default").await.is_ok());
        // A new connect does see the new current-context, with its namespace.
        let prod = connect(Some(&path), None, None).await.unwrap();
        assert_eq!(prod.context.name, "prod");
        assert_eq!(prod.context.server, "https://prod.example.com:6443");
        assert_eq!(prod.context.namespace, "team-a");
        assert!(!prod.context.is_local());
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn unknown_context_lists_available_names() {
        let sb = Sandbox::start(SandboxConfig::ephemeral()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = write_kubeconfig(dir.path(), &sb);
        let err = connect(Some(&path), Some("staging"), None)
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&err, ClientError::UnknownContext { context, available, .. }
                if context == "staging" && available == &["prod".to_string(), "sandbox".to_string()]),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("\"staging\""), "{msg}");
        assert!(msg.contains("prod, sandbox"), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn missing_kubeconfig_says_where_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.yaml");
        let err = connect(Some(&missing), None, None).await.err().unwrap();
        let msg = err.to_string();
        assert!(matches!(err, ClientError::NoKubeconfig { .. }), "{msg}");
        assert!(msg.contains(&missing.display().to_string()), "{msg}");
        assert!(msg.contains("--kubeconfig"), "{msg}");
        assert!(msg.contains("kubectl meta dev --sandbox"), "{msg}");

        // $KUBECONFIG unset and no ~/.kube/config.
        let err = kubeconfig_paths(None, None, Some(dir.path().to_path_buf())).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("$KUBECONFIG (not set)"), "{msg}");
        assert!(
            msg.contains(&dir.path().join(".kube/config").display().to_string()),
            "{msg}"
        );
        // $KUBECONFIG lists only missing files: each is named.
        let env = std::env::join_paths([dir.path().join("a"), dir.path().join("b")]).unwrap();
        let err = kubeconfig_paths(None, Some(env), None).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "$KUBECONFIG entry {}",
                dir.path().join("b").display()
            )),
            "{msg}"
        );
    }

    #[test]
    fn kubeconfig_env_list_keeps_existing_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        let env = std::env::join_paths([b.clone(), dir.path().join("gone"), a.clone()]).unwrap();
        let home = Some(dir.path().to_path_buf());
        assert_eq!(
            kubeconfig_paths(None, Some(env), home.clone()).unwrap(),
            [b, a.clone()]
        );
        // The flag wins over everything.
        assert_eq!(
            kubeconfig_paths(Some(&a), Some(OsString::from("/x")), None).unwrap(),
            [a]
        );
        // An empty $KUBECONFIG falls back to ~/.kube/config.
        std::fs::create_dir(dir.path().join(".kube")).unwrap();
        std::fs::write(dir.path().join(".kube/config"), "").unwrap();
        assert_eq!(
            kubeconfig_paths(None, Some(OsString::new()), home).unwrap(),
            [dir.path().join(".kube/config")]
        );
    }

    #[test]
    fn merged_kubeconfigs_first_file_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(
            &a,
            "clusters:\n- name: one\n  cluster: {server: 'https://10.0.0.1'}\ncontexts:\n- name: one\n  context: {cluster: one, user: me}\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "clusters:\n- name: one\n  cluster: {server: 'https://10.9.9.9'}\n- name: two\n  cluster: {server: 'https://127.0.0.1:7'}\ncontexts:\n- name: two\n  context: {cluster: two, namespace: ns2}\ncurrent-context: two\n",
        )
        .unwrap();
        let (config, path) = load(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(path, format!("{}:{}", a.display(), b.display()));
        let two = context_info(&config, &path, None, None).unwrap();
        assert_eq!((two.name.as_str(), two.namespace.as_str()), ("two", "ns2"));
        assert_eq!(two.user, "");
        assert!(two.is_local());
        let one = context_info(&config, &path, Some("one"), None).unwrap();
        assert_eq!(one.server, "https://10.0.0.1");
        assert!(!one.is_local());
    }

    #[test]
    fn broken_kubeconfigs_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "clusters: [unclosed\n").unwrap();
        let err = load(std::slice::from_ref(&bad)).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ClientError::InvalidKubeconfig { .. }),
            "{msg}"
        );
        assert!(msg.contains(&bad.display().to_string()), "{msg}");
        assert!(msg.contains("parse"), "{msg}");

        let cfg = Kubeconfig::from_yaml(
            "contexts:\n- name: x\n  context: {cluster: missing}\n- name: y\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {}\n",
        )
        .unwrap();
        let err = context_info(&cfg, "kc", None, None).unwrap_err();
        assert!(
            matches!(&err, ClientError::NoCurrentContext { available, .. } if available == &["x", "y"]),
            "{err:?}"
        );
        assert!(err.to_string().contains("--context"), "{err}");
        let err = context_info(&cfg, "kc", Some("x"), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("context \"x\" refers to cluster \"missing\", which is not defined"),
            "{err}"
        );
        let err = context_info(&cfg, "kc", Some("y"), None).unwrap_err();
        assert!(err.to_string().contains("has no server"), "{err}");
    }

    #[test]
    fn is_local_by_server_host() {
        for server in [
            "https://127.0.0.1:6443",
            "https://127.3.2.1",
            "https://[::1]:6443",
            "https://localhost:6443/",
            "https://LOCALHOST",
            "http://localhost",
            "https://0.0.0.0:33445",
            "https://user@127.0.0.1:1/path",
            "https://[::ffff:127.0.0.1]:6443",
        ] {
            assert!(info("ctx", server).is_local(), "{server}");
        }
        for server in [
            "https://10.0.0.1:6443",
            "https://prod.example.com",
            "https://localhost.example.com:6443",
            "https://128.0.0.1",
            "https://[2001:db8::1]:6443",
            "https://127.0.0.1.nip.io",
            "",
            "not a url",
        ] {
            assert!(!info("ctx", server).is_local(), "{server}");
        }
    }

    #[test]
    fn is_local_by_context_name() {
        let remote = "https://10.1.2.3:6443";
        for name in [
            "kind-kind",
            "kind-dev",
            "k3d-mycluster",
            "minikube",
            "docker-desktop",
            "rancher-desktop",
            "orbstack",
            "sandbox",
        ] {
            assert!(info(name, remote).is_local(), "{name}");
        }
        for name in [
            "kind-",
            "kind",
            "prod",
            "my-minikube",
            "sandbox-prod",
            "gke_p_z_c",
        ] {
            assert!(!info(name, remote).is_local(), "{name}");
        }
    }

    #[test]
    fn write_guard_refuses_remote_contexts_unless_allowed() {
        assert!(write_guard(&info("x", "https://127.0.0.1:1"), &[]).is_ok());
        assert!(write_guard(&info("kind-a", "https://10.0.0.1"), &[]).is_ok());
        let prod = info("prod", "https://prod.example.com:6443");
        let err = write_guard(&prod, &["staging".to_string()]).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(&err, ClientError::ContextNotAllowed { context, server }
                if context == "prod" && server == "https://prod.example.com:6443"),
            "{err:?}"
        );
        assert!(msg.contains("https://prod.example.com:6443"), "{msg}");
        assert!(msg.contains("not on loopback"), "{msg}");
        assert!(msg.contains("--allow-context prod"), "{msg}");
        assert!(msg.contains("--sandbox"), "{msg}");
        assert!(write_guard(&prod, &["staging".into(), "prod".into()]).is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_waits_out_429s_and_counts_them() {
        use kube_sandbox::faults::Fault;
        let sb = kube_sandbox::Sandbox::start(kube_sandbox::SandboxConfig::ephemeral())
            .await
            .expect("sandbox");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config");
        std::fs::write(&path, sb.kubeconfig_yaml()).expect("kubeconfig");
        let conn = connect(Some(&path), Some("sandbox"), None)
            .await
            .expect("connect");
        let refused = sb.faults().inject(
            Fault::on("GET", "/api/v1/namespaces/kube-system")
                .too_many_requests(1)
                .times(2),
        );
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(conn.client.clone());
        let start = std::time::Instant::now();
        let ns = api.get("kube-system").await;
        assert!(ns.is_ok(), "answered after the 429s: {ns:?}");
        assert!(
            start.elapsed() >= std::time::Duration::from_secs(2),
            "two Retry-After: 1 waits"
        );
        assert_eq!(refused.fired(), 2);
        let s = conn.pace.snapshot();
        assert_eq!((s.throttled, s.answered), (2, 3), "{s:?}");
        // One request in flight: the window went down to 1; the answer widened it by 1/1.
        assert_eq!(s.window, Some(2), "{s:?}");
        sb.shutdown().await;
    }
}
