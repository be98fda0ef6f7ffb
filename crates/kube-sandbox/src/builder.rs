//! [`SandboxBuilder`]: a sandbox set up for a test in one expression.
//!
//! CRDs, namespaces and any other seed objects are created in-process before the first request
//! is served (CRDs first, each served and `Established` at once), so a test's first call already
//! sees them; storage, the simulated kubelet and the listen address are chosen here too.
//!
//! ```no_run
//! # async fn f() -> Result<(), kube_sandbox::SandboxError> {
//! let sandbox = kube_sandbox::Sandbox::builder()
//!     .yaml(r#"
//! apiVersion: apiextensions.k8s.io/v1
//! kind: CustomResourceDefinition
//! metadata: {name: widgets.example.com}
//! spec:
//!   group: example.com
//!   scope: Namespaced
//!   names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
//!   versions:
//!   - name: v1
//!     served: true
//!     storage: true
//!     schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
//! "#)
//!     .namespace("team-a")
//!     .kubelet(false)
//!     .start()
//!     .await?;
//! let client = sandbox.client().await?;
//! # drop(client);
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::state::State;
use crate::{Bound, Sandbox, SandboxConfig, SandboxError, Storage, Tunables, controllers, ops};

/// What a builder creates before serving.
#[derive(Debug, Clone)]
enum Seed {
    /// YAML or JSON documents given inline.
    Text(String),
    /// A file of documents, read when the sandbox starts.
    File(PathBuf),
    /// A namespace by name.
    Namespace(String),
}

/// Builds a [`Sandbox`] (example in the crate docs). Every option has the
/// default of [`SandboxConfig::ephemeral`]: in memory, a free loopback port, no kubeconfig
/// file, the simulated kubelet on.
#[derive(Debug, Clone)]
pub struct SandboxBuilder {
    cfg: SandboxConfig,
    seeds: Vec<Seed>,
}

impl Default for SandboxBuilder {
    fn default() -> Self {
        SandboxBuilder {
            cfg: SandboxConfig::ephemeral(),
            seeds: Vec::new(),
        }
    }
}

impl SandboxBuilder {
    /// A builder with the defaults of [`SandboxConfig::ephemeral`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Listen on `addr` (port 0 picks a free port; the default is `127.0.0.1:0`).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.cfg.listen = addr;
        self
    }

    /// Keep the objects in a SQLite database in `dir`, across restarts (default: in memory).
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cfg.storage = Storage::Dir(dir.into());
        self
    }

    /// Write a kubeconfig (context `sandbox`) to `path` once listening.
    pub fn write_kubeconfig(mut self, path: impl Into<PathBuf>) -> Self {
        self.cfg.kubeconfig = Some(path.into());
        self
    }

    /// Run the simulated kubelet (Pods become Running and Ready) or not (Pods stay Pending,
    /// as on a control plane without nodes).
    pub fn kubelet(mut self, on: bool) -> Self {
        self.cfg.tunables.kubelet_delay = on.then(|| {
            Tunables::default()
                .kubelet_delay
                .unwrap_or(Duration::from_millis(500))
        });
        self
    }

    /// How long the simulated kubelet takes to make a new Pod Ready (turns it on).
    pub fn kubelet_delay(mut self, delay: Duration) -> Self {
        self.cfg.tunables.kubelet_delay = Some(delay);
        self
    }

    /// Every tunable at once.
    pub fn tunables(mut self, tunables: Tunables) -> Self {
        self.cfg.tunables = tunables;
        self
    }

    /// kube-apiserver feature gates (default: a 1.36 kube-apiserver's). For KEP-5866 sharded
    /// list and watch: `.feature_gates(FeatureGates { sharded_list_and_watch: true, ..Default::default() })`
    /// or `FeatureGates::parse("ShardedListAndWatch=true")`.
    pub fn feature_gates(mut self, gates: crate::FeatureGates) -> Self {
        self.cfg.feature_gates = gates;
        self
    }

    /// How many changes are kept for watches that resume from a resourceVersion.
    pub fn history(mut self, changes: usize) -> Self {
        self.cfg.history = changes;
        self
    }

    /// Authenticate the bearer tokens of a CSV file as kube-apiserver's `--token-auth-file`
    /// does (`token,user,uid,"group1,group2"` per line); a file that cannot be read or parsed
    /// fails [`start`](Self::start) with [`SandboxError::TokenFile`].
    pub fn token_auth_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.cfg.token_auth_file = Some(path.into());
        self
    }

    /// Serve requests without credentials as `system:anonymous` (the default, as
    /// kube-apiserver's `--anonymous-auth=true`: RBAC decides, most are 403) or refuse them with
    /// 401 (`false`).
    pub fn anonymous_auth(mut self, on: bool) -> Self {
        self.cfg.anonymous_auth = on;
        self
    }

    /// Create namespace `name` (with its default ServiceAccount and `kube-root-ca.crt`).
    pub fn namespace(mut self, name: impl Into<String>) -> Self {
        self.seeds.push(Seed::Namespace(name.into()));
        self
    }

    /// Create the objects of these YAML (or JSON) documents: CRDs first, then namespaces, then
    /// the rest in order. An object that already exists (a restarted state directory) is left
    /// as it is.
    pub fn yaml(mut self, documents: impl Into<String>) -> Self {
        self.seeds.push(Seed::Text(documents.into()));
        self
    }

    /// Like [`SandboxBuilder::yaml`], with the documents of a file (read at start; an error
    /// names the file).
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.seeds.push(Seed::File(path.into()));
        self
    }

    /// The configuration so far.
    pub fn config(&self) -> &SandboxConfig {
        &self.cfg
    }

    /// Bind, bootstrap and seed, without serving yet (see [`Sandbox::bind`]).
    pub async fn bind(self) -> Result<Bound, SandboxError> {
        let docs = read_seeds(&self.seeds)?;
        let bound = Sandbox::bind(self.cfg).await?;
        seed(&bound.state, docs)?;
        Ok(bound)
    }

    /// Bind, bootstrap, seed and serve.
    pub async fn start(self) -> Result<Sandbox, SandboxError> {
        Ok(self.bind().await?.serve())
    }
}

/// One document to create, and where it came from (for errors).
struct Doc {
    origin: String,
    value: Value,
}

/// Every seed as documents, read and parsed before anything starts.
fn read_seeds(seeds: &[Seed]) -> Result<Vec<Doc>, SandboxError> {
    let mut docs = Vec::new();
    for (i, seed) in seeds.iter().enumerate() {
        let (origin, text) = match seed {
            Seed::Namespace(name) => {
                docs.push(Doc {
                    origin: format!("namespace({name})"),
                    value: json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name}}),
                });
                continue;
            }
            Seed::Text(t) => (format!("yaml #{}", i + 1), t.clone()),
            Seed::File(p) => (
                p.display().to_string(),
                std::fs::read_to_string(p).map_err(|cause| SandboxError::File {
                    path: p.clone(),
                    cause,
                })?,
            ),
        };
        let values: Vec<Value> =
            serde_saphyr::from_str_multiple(&text).map_err(|e| SandboxError::Seed {
                origin: origin.clone(),
                message: format!("not YAML or JSON documents: {e}"),
            })?;
        for (n, value) in values.into_iter().enumerate() {
            if value.is_null() {
                continue;
            }
            docs.push(Doc {
                origin: format!("{origin}, document {}", n + 1),
                value,
            });
        }
    }
    Ok(docs)
}

/// Create the documents: CRDs (each served at once), namespaces, then the rest in order.
fn seed(state: &Arc<State>, docs: Vec<Doc>) -> Result<(), SandboxError> {
    let rank = |d: &Doc| match d.value["kind"].as_str() {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    };
    let mut docs = docs;
    docs.sort_by_key(rank);
    for doc in docs {
        create(state, &doc)?;
        if rank(&doc) == 0
            && let Some(name) = doc.value["metadata"]["name"].as_str()
        {
            controllers::crd::sync(state, name);
        }
    }
    Ok(())
}

/// Create one document through the same path as a `POST` (defaulting, validation, admission).
fn create(state: &Arc<State>, doc: &Doc) -> Result<(), SandboxError> {
    let fail = |message: String| SandboxError::Seed {
        origin: doc.origin.clone(),
        message,
    };
    let api_version = doc.value["apiVersion"].as_str().unwrap_or_default();
    let kind = doc.value["kind"].as_str().unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(fail("apiVersion and kind are required".into()));
    }
    let def = state
        .registry()
        .all()
        .find(|d| d.api_version() == api_version && d.kind == kind)
        .cloned()
        .ok_or_else(|| {
            fail(format!(
                "no resource of kind {kind} in {api_version} is served (is its CRD among the documents?)"
            ))
        })?;
    let namespace = def.namespaced.then(|| {
        doc.value["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string()
    });
    let opts = ops::WriteOpts {
        field_manager: "kube-sandbox".into(),
        ..Default::default()
    };
    match ops::create(state, &def, namespace.as_deref(), doc.value.clone(), &opts) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(fail(e.message)),
    }
}
