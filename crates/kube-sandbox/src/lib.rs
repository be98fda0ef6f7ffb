//! An in-process Kubernetes API server for tests: an envtest for Rust.
//!
//! `kube-sandbox` serves discovery, the built-in types controllers use, CustomResourceDefinitions
//! (structural schemas, pruning, defaulting, the status subresource), every verb including watch
//! and server-side apply, and runs what a control plane runs around them: garbage collection,
//! namespace deletion, finalizers, the workload controllers (Deployment, ReplicaSet, StatefulSet,
//! DaemonSet, Job) and a simulated kubelet that makes Pods Running and Ready. kube-rs and kubectl
//! work against it unchanged, over HTTPS with a bearer token; what it stores is checked field by
//! field against a real kube-apiserver. It starts in milliseconds, needs no binaries, and many
//! run in one test process.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let sandbox = kube_sandbox::Sandbox::builder()
//!     .file("deploy/crds.yaml")      // CRDs (and any objects), created before the first request
//!     .namespace("team-a")
//!     .start()
//!     .await?;
//! let client = sandbox.client().await?;   // a kube::Client, as a user's tool builds one
//! let cms: Api<ConfigMap> = Api::namespaced(client, "team-a");
//! cms.create(&PostParams::default(), &ConfigMap::default()).await.ok();
//! // Dropping the sandbox stops it.
//! # Ok(())
//! # }
//! ```
//!
//! [`Sandbox::builder`] sets seeds, storage ([`Storage`]: memory or a SQLite state directory),
//! the kubelet, the listen address and kube-apiserver feature gates ([`FeatureGates`]: with
//! `ShardedListAndWatch` on, list and watch serve KEP-5866's
//! `shardSelector=shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`
//! as kube-apiserver 1.36 does, echoing it in `metadata.shardInfo`; off by default, as in 1.36); [`Sandbox::faults`] injects API failures (429s, 5xx,
//! dropped watches) for tests of retry logic. The crate's README compares it with envtest and
//! lists what it does not do.
//!
//! Inside: `request` parses paths, `server` authenticates and dispatches, `ops` owns the object
//! lifecycle, `store` holds objects (with [`persist`] underneath), `watch` streams changes,
//! `controllers` run inside, `resources` says what is served, `shard` parses and matches
//! shard selectors and `features` holds the gates; `auth` says who a request is
//! (admin token, ServiceAccount tokens, client certificates, impersonation) and `rbac` what they
//! may do. `kubectl meta sandbox` and
//! `kubectl meta dev --sandbox` use [`Sandbox::bind`], so they can print where it listens before
//! it accepts requests.

pub(crate) mod admission;
pub(crate) mod apply;
pub(crate) mod auth;
pub(crate) mod builder;
pub(crate) mod cel_rules;
pub(crate) mod controllers;
pub(crate) mod crd;
pub(crate) mod defaults;
pub mod faults;
pub(crate) mod features;
pub(crate) mod formats;
pub(crate) mod generation;
pub(crate) mod json_fields;
pub(crate) mod keys;
pub(crate) mod kubeconfig;
pub(crate) mod logs;
pub(crate) mod openapi;
pub(crate) mod ops;
pub(crate) mod output;
pub(crate) mod patch;
pub mod persist;
pub(crate) mod protobuf;
pub(crate) mod proxy;
pub(crate) mod rbac;
pub(crate) mod request;
pub(crate) mod resources;
pub(crate) mod rules;
pub(crate) mod scale;
pub(crate) mod server;
pub(crate) mod shard;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod store;
pub(crate) mod table;
pub(crate) mod tls;
pub(crate) mod typed;
pub(crate) mod validation;
pub(crate) mod version;
pub(crate) mod watch;
pub(crate) mod webhook;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use tokio::task::JoinHandle;

pub use auth::certs::ClientCredentials;
pub use auth::token_file::TokenFileError;
pub use builder::SandboxBuilder;
pub use features::{FeatureGateError, FeatureGates};
use persist::{Db, Loaded, PersistError};
use state::State;
pub use state::Tunables;
use store::{Store, StoreError};

/// Where a sandbox keeps its objects.
#[derive(Debug, Clone)]
pub enum Storage {
    /// In memory only; gone when the sandbox stops.
    Ephemeral,
    /// In a SQLite database in this directory, kept across restarts.
    Dir(PathBuf),
}

/// How to start a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Storage.
    pub storage: Storage,
    /// Where to write the kubeconfig (None: don't write one).
    pub kubeconfig: Option<PathBuf>,
    /// Tunables.
    pub tunables: Tunables,
    /// Number of changes kept for watches that resume from a resourceVersion.
    pub history: usize,
    /// Static bearer tokens, a CSV file as kube-apiserver's `--token-auth-file`
    /// (`token,user,uid,"group1,group2"`); read when the sandbox starts.
    pub token_auth_file: Option<PathBuf>,
    /// Requests without credentials are `system:anonymous` (kube-apiserver's default
    /// `--anonymous-auth=true`: RBAC then decides, so most are 403); `false` refuses them with 401.
    pub anonymous_auth: bool,
    /// kube-apiserver feature gates (default: a 1.36 kube-apiserver's, e.g.
    /// `ShardedListAndWatch` off).
    pub feature_gates: FeatureGates,
}

impl SandboxConfig {
    /// An in-memory sandbox on a free loopback port, writing no kubeconfig (for tests and `dev --sandbox`).
    pub fn ephemeral() -> Self {
        SandboxConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            storage: Storage::Ephemeral,
            kubeconfig: None,
            tunables: Tunables::default(),
            history: 50_000,
            token_auth_file: None,
            anonymous_auth: true,
            feature_gates: FeatureGates::default(),
        }
    }
}

/// Errors starting a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The state directory could not be used.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// The stored state could not be loaded.
    #[error("loading stored objects: {0}")]
    Store(StoreError),
    /// Bootstrapping built-in objects failed.
    #[error("creating built-in objects: {0}")]
    Bootstrap(String),
    /// TLS material could not be created.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// A client certificate could not be issued.
    #[error(transparent)]
    ClientCert(#[from] auth::certs::CertError),
    /// The service-account signing key could not be created or loaded.
    #[error(transparent)]
    Key(#[from] auth::jwt::KeyError),
    /// The listen address could not be bound.
    #[error(
        "cannot listen on {addr}: {cause} (pick another address with --listen, or port 0 for a free one)"
    )]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause (part of the message, not a `source`, so error chains don't print it twice).
        cause: std::io::Error,
    },
    /// The `--token-auth-file` could not be used.
    #[error(transparent)]
    TokenFile(#[from] auth::token_file::TokenFileError),
    /// A seed document of [`SandboxBuilder`] could not be created.
    #[error("{origin}: {message}")]
    Seed {
        /// Which document (`FILE, document N`, `yaml #N, document N`, `namespace(NAME)`).
        origin: String,
        /// Why (the API server's message, or a parse error).
        message: String,
    },
    /// A client for the sandbox could not be built.
    #[cfg(feature = "client")]
    #[error("building a kube client for the sandbox: {0}")]
    Client(String),
    /// Token or kubeconfig file problem.
    #[error("{path}: {cause}")]
    File {
        /// File involved.
        path: PathBuf,
        /// Cause (part of the message, not a `source`).
        cause: std::io::Error,
    },
}

impl From<StoreError> for SandboxError {
    fn from(e: StoreError) -> Self {
        SandboxError::Store(e)
    }
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> SandboxError + '_ {
    move |cause| SandboxError::File {
        path: path.to_path_buf(),
        cause,
    }
}

/// A sandbox that is listening but not yet serving.
pub struct Bound {
    state: Arc<State>,
    tls: tls::TlsMaterial,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    kubeconfig: Option<PathBuf>,
}

/// A running sandbox. Dropping it stops it; [`Sandbox::shutdown`] stops it and waits.
pub struct Sandbox {
    state: Arc<State>,
    ca_pem: String,
    addr: SocketAddr,
    kubeconfig: Option<PathBuf>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    controllers: Option<JoinHandle<()>>,
    faults: faults::FaultInjector,
}

fn load_or_create_token(dir: &Path) -> Result<String, SandboxError> {
    let path = dir.join("token");
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        Ok(_) | Err(_) => {
            let t = random_token();
            kubeconfig::write_private(&path, &t).map_err(file_err(&path))?;
            Ok(t)
        }
    }
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn bootstrap(state: &Arc<State>) -> Result<(), SandboxError> {
    for crd in state.store.all() {
        if &*crd.key.gr == "apiextensions.k8s.io/customresourcedefinitions" {
            controllers::crd::sync(state, &crd.key.name);
        }
    }
    let def = state
        .def_for_gr("/namespaces")
        .map_err(|e| SandboxError::Bootstrap(e.message))?;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        if state.store.get("/namespaces", "", ns).is_some() {
            continue;
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let opts = ops::WriteOpts {
            field_manager: "kube-apiserver".into(),
            ..Default::default()
        };
        ops::create(state, &def, None, obj, &opts)
            .map_err(|e| SandboxError::Bootstrap(e.message))?;
    }
    // What kube-apiserver and kube-controller-manager create before anyone looks: done here,
    // not left to the controllers, so a client's first request already sees them.
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        controllers::namespace::populate(state, ns);
    }
    controllers::apiserver::reconcile(state).map_err(|e| SandboxError::Bootstrap(e.message))?;
    rbac::bootstrap::ensure(state).map_err(SandboxError::Bootstrap)?;
    rbac::aggregate::sync_all(state);
    Ok(())
}

impl Sandbox {
    /// A [`SandboxBuilder`]: CRDs, namespaces and objects created before the first request,
    /// storage, kubelet and listen address chosen in one expression.
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder::new()
    }

    /// A `kube::Client` for this sandbox, built from its kubeconfig exactly as a user's tool
    /// would build one (TLS with the sandbox's CA, bearer token).
    #[cfg(feature = "client")]
    pub async fn client(&self) -> Result<kube::Client, SandboxError> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml())
            .map_err(|e| SandboxError::Client(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| SandboxError::Client(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| SandboxError::Client(e.to_string()))
    }

    /// A `kube::Client` that calls this sandbox in process: each request goes straight to the
    /// sandbox's request handler, with no socket, TLS or HTTP framing (watches are in-memory
    /// streams), authenticated as the admin token is. For programs that run a sandbox inside
    /// themselves as a private cluster (`kubectl meta dryrun --simulate`); [`Sandbox::client`]
    /// is the one to test a client's real transport with.
    #[cfg(feature = "client")]
    pub fn in_process_client(&self) -> kube::Client {
        let auth = http::HeaderValue::from_str(&format!("Bearer {}", self.state.token))
            .unwrap_or_else(|_| http::HeaderValue::from_static(""));
        let app = server::router(self.state.clone()).layer(axum::middleware::map_request(
            move |mut req: axum::extract::Request| {
                let auth = auth.clone();
                async move {
                    req.headers_mut().insert(http::header::AUTHORIZATION, auth);
                    req
                }
            },
        ));
        kube::Client::new(app, "default")
    }

    /// Open storage, bootstrap built-in objects, bind the listener and write the kubeconfig.
    pub async fn bind(cfg: SandboxConfig) -> Result<Bound, SandboxError> {
        let static_tokens = match &cfg.token_auth_file {
            Some(path) => auth::token_file::StaticTokens::from_file(path)?,
            None => Default::default(),
        };
        let (db, loaded, token) = match &cfg.storage {
            Storage::Ephemeral => (None, Loaded::default(), random_token()),
            Storage::Dir(dir) => {
                let (db, loaded) = Db::open(dir)?;
                let token = load_or_create_token(dir)?;
                (Some(db), loaded, token)
            }
        };
        let store = Store::new(db, loaded, cfg.history)?;
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|cause| SandboxError::Bind {
                addr: cfg.listen,
                cause,
            })?;
        let addr = listener.local_addr().map_err(|cause| SandboxError::Bind {
            addr: cfg.listen,
            cause,
        })?;
        let tls = match &cfg.storage {
            Storage::Dir(dir) => tls::load_or_generate(dir, addr.ip())?,
            Storage::Ephemeral => tls::generate(addr.ip())?,
        };
        let auth = auth::Auth {
            tokens: auth::tokens::Tokens::new(match &cfg.storage {
                Storage::Dir(dir) => Some(dir.as_path()),
                Storage::Ephemeral => None,
            })?,
            ca: auth::certs::Ca::new(tls.ca_key_pem.clone()),
            static_tokens,
            anonymous: cfg.anonymous_auth,
        };
        let state = State::new(
            store,
            token,
            cfg.tunables.clone(),
            cfg.feature_gates.clone(),
            tls.ca_pem.clone(),
            addr,
            auth,
        );
        bootstrap(&state)?;
        if let Some(path) = &cfg.kubeconfig {
            let yaml = kubeconfig::render(&format!("https://{addr}"), &tls.ca_pem, &state.token);
            kubeconfig::write_private(path, &yaml).map_err(file_err(path))?;
        }
        Ok(Bound {
            state,
            tls,
            listener,
            addr,
            kubeconfig: cfg.kubeconfig,
        })
    }

    /// Bind and serve at once.
    pub async fn start(cfg: SandboxConfig) -> Result<Sandbox, SandboxError> {
        Ok(Self::bind(cfg).await?.serve())
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) clients must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// A client certificate for `user` in `groups` (its CommonName and Organizations), signed
    /// by the sandbox CA: requests made with it are authenticated as that user.
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<ClientCredentials, SandboxError> {
        Ok(self.state.auth.ca.issue(user, groups)?)
    }

    /// A kubeconfig for this sandbox (context `sandbox`).
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.url(), &self.ca_pem, &self.state.token)
    }

    /// Where the kubeconfig was written, if anywhere.
    pub fn kubeconfig_path(&self) -> Option<&Path> {
        self.kubeconfig.as_deref()
    }

    /// The fault switch of this sandbox (tests only; nothing is injected until a rule is armed).
    pub fn faults(&self) -> &faults::FaultInjector {
        &self.faults
    }

    /// Stop serving (ending watches), stop the controllers, and wait for both.
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        if let Some(s) = self.server.take() {
            let _ = s.await;
        }
        if let Some(c) = self.controllers.take() {
            let _ = c.await;
        }
    }

    /// Wait until the server stops by itself (it only does on error) — used by the CLI with a signal race.
    pub async fn wait(&mut self) -> std::io::Result<()> {
        match self.server.as_mut() {
            Some(s) => s.await.unwrap_or_else(|e| Err(std::io::Error::other(e))),
            None => Ok(()),
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}

impl Bound {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the kubeconfig was written, if anywhere.
    pub fn kubeconfig_path(&self) -> Option<&Path> {
        self.kubeconfig.as_deref()
    }

    /// Start accepting requests and running controllers.
    pub fn serve(self) -> Sandbox {
        let state = self.state.clone();
        let controllers = tokio::spawn(controllers::run(controllers::bootstrap(state.clone())));
        let shutdown = state.shutdown.clone();
        let faults = faults::FaultInjector::default();
        let app = server::router(state.clone()).layer(axum::middleware::from_fn_with_state(
            faults.clone(),
            faults::layer,
        ));
        let server = tokio::spawn(tls::serve(self.listener, self.tls.acceptor, app, shutdown));
        Sandbox {
            state,
            ca_pem: self.tls.ca_pem,
            addr: self.addr,
            kubeconfig: self.kubeconfig,
            server: Some(server),
            controllers: Some(controllers),
            faults,
        }
    }
}
