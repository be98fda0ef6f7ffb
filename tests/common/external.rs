//! Where a proof test runs: the in-process sandbox (always, in CI), or an external cluster
//! when `KUBECTL_META_TEST_KUBECONFIG` names a kubeconfig (and `KUBECTL_META_TEST_CONTEXT`,
//! optionally, its context; else its current one): a development aid to run the sharding
//! and replay proofs on a real kube-apiserver (`../shared/real-apiserver/start.sh` prints one).
//!
//! On an external cluster the test gets a namespace of its own (`meta-<test>-<pid>`), made the
//! namespace of a private copy of the kubeconfig (so `kubectl`, `run` and the clients default to
//! it), deleted after the test with the CRDs the test created; tests that share a CRD must run
//! one at a time there (`--test-threads 1`).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{TIMEOUT, TestSandbox, kubectl, wait_for};

/// The environment variable naming an external cluster's kubeconfig.
pub const KUBECONFIG_VAR: &str = "KUBECTL_META_TEST_KUBECONFIG";
/// The environment variable naming its context (default: the kubeconfig's current one).
pub const CONTEXT_VAR: &str = "KUBECTL_META_TEST_CONTEXT";

/// What a test needs of the cluster it runs on.
pub trait Target {
    /// A kubeconfig file whose current context is the cluster, in [`Target::ns`].
    fn kubeconfig(&self) -> PathBuf;
    /// A client of it (default namespace [`Target::ns`]).
    fn client(&self) -> kube::Client;
    /// The test's namespace.
    fn ns(&self) -> &str;
    /// Run the real kubectl against it.
    fn kubectl(&self, args: &[&str]) -> Output {
        kubectl(&self.kubeconfig(), args, None)
    }
    /// The test is about to create the cluster-scoped `kind/name` (e.g. a CRD): delete it after
    /// the test if it does not exist yet (a sandbox is thrown away whole: nothing to do).
    fn owns(&self, _kind: &str, _name: &str) {}
    /// Whether this is an external cluster (no simulated kubelet: Pods stay Pending).
    fn external(&self) -> bool {
        false
    }
}

impl Target for TestSandbox {
    fn kubeconfig(&self) -> PathBuf {
        TestSandbox::kubeconfig(self)
    }
    fn client(&self) -> kube::Client {
        self.client.clone()
    }
    fn ns(&self) -> &str {
        "default"
    }
}

/// The sandbox, or the external cluster of [`KUBECONFIG_VAR`].
pub enum Cluster {
    /// The in-process sandbox.
    Sandbox(TestSandbox),
    /// An external cluster.
    External(External),
}

/// Start the test's cluster: a sandbox, or a namespace `meta-<test>-<pid>` on the external
/// cluster of [`KUBECONFIG_VAR`].
pub async fn cluster(test: &str) -> Cluster {
    match std::env::var_os(KUBECONFIG_VAR) {
        None => Cluster::Sandbox(super::start().await),
        Some(kc) => Cluster::External(
            External::start(
                Path::new(&kc),
                std::env::var(CONTEXT_VAR).ok().as_deref(),
                test,
            )
            .await,
        ),
    }
}

impl Target for Cluster {
    fn kubeconfig(&self) -> PathBuf {
        match self {
            Cluster::Sandbox(s) => Target::kubeconfig(s),
            Cluster::External(e) => e.kubeconfig.clone(),
        }
    }
    fn client(&self) -> kube::Client {
        match self {
            Cluster::Sandbox(s) => s.client.clone(),
            Cluster::External(e) => e.client.clone(),
        }
    }
    fn ns(&self) -> &str {
        match self {
            Cluster::Sandbox(_) => "default",
            Cluster::External(e) => &e.ns,
        }
    }
    fn owns(&self, kind: &str, name: &str) {
        if let Cluster::External(e) = self {
            e.owns(kind, name);
        }
    }
    fn external(&self) -> bool {
        matches!(self, Cluster::External(_))
    }
}

/// A namespace of an external cluster, and a kubeconfig copy pointing at it.
pub struct External {
    client: kube::Client,
    kubeconfig: PathBuf,
    ns: String,
    created: Mutex<Vec<(String, String)>>,
    _dir: tempfile::TempDir,
}

impl External {
    async fn start(source: &Path, context: Option<&str>, test: &str) -> External {
        let mut kc = Kubeconfig::read_from(source)
            .unwrap_or_else(|e| panic!("{KUBECONFIG_VAR}={}: {e}", source.display()));
        let context = context
            .map(str::to_string)
            .or_else(|| kc.current_context.clone())
            .unwrap_or_else(|| {
                panic!(
                    "{}: no current context; set {CONTEXT_VAR}",
                    source.display()
                )
            });
        let ns = format!("meta-{test}-{}", std::process::id());
        let named = kc
            .contexts
            .iter_mut()
            .find(|c| c.name == context)
            .unwrap_or_else(|| panic!("{}: no context {context:?}", source.display()));
        named
            .context
            .as_mut()
            .unwrap_or_else(|| panic!("context {context:?} is empty"))
            .namespace = Some(ns.clone());
        kc.current_context = Some(context.clone());
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&kubeconfig)
                .expect("write the kubeconfig copy");
            f.write_all(serde_json::to_string(&kc).expect("kubeconfig").as_bytes())
                .expect("write the kubeconfig copy");
        }
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("the external cluster's kube config");
        let client = kube::Client::try_from(cfg).expect("kube client");
        let out = kubectl(&kubeconfig, &["create", "namespace", &ns], None);
        assert!(
            out.status.success(),
            "create namespace {ns} on the external cluster: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A real server's admission refuses Pods until the namespace's `default`
        // ServiceAccount exists (its controller creates it shortly after the namespace).
        wait_for(
            "the namespace's default ServiceAccount",
            TIMEOUT,
            || async {
                kubectl(&kubeconfig, &["get", "serviceaccount", "default"], None)
                    .status
                    .success()
                    .then_some(())
            },
        )
        .await;
        eprintln!("external cluster: context {context}, namespace {ns}");
        External {
            client,
            kubeconfig,
            ns,
            created: Mutex::new(Vec::new()),
            _dir: dir,
        }
    }

    fn owns(&self, kind: &str, name: &str) {
        let exists = kubectl(&self.kubeconfig, &["get", kind, name], None)
            .status
            .success();
        let mut created = self.created.lock().expect("created");
        let key = (kind.to_string(), name.to_string());
        if !exists && !created.contains(&key) {
            created.push(key);
        }
    }
}

impl Drop for External {
    fn drop(&mut self) {
        let ns = format!("namespace/{}", self.ns);
        let mut what = vec![ns];
        for (kind, name) in self.created.lock().expect("created").iter().rev() {
            what.push(format!("{kind}/{name}"));
        }
        for w in what {
            let out = kubectl(
                &self.kubeconfig,
                &["delete", &w, "--ignore-not-found", "--timeout=60s"],
                None,
            );
            if !out.status.success() {
                eprintln!(
                    "cleanup: kubectl delete {w}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}
