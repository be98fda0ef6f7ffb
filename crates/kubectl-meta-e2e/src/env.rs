//! The environment one e2e test runs in: a fresh in-process sandbox (its kubeconfig written to
//! a file so that `command` and `script` operations, kubectl included, reach it) with the
//! controllers' CRDs applied and the engine running the controllers in this process. What a
//! caller may add (engine options, sandbox faults, restarts) is [`EnvExtras`].
//!
//! Or, with [`Setup::cluster`](crate::Setup::cluster), a named cluster: the same client code
//! on the kubeconfig's context (a copy of the kubeconfig with that context current is what
//! `command` and `script` get), the engine's parents limited to the test's namespace.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Mutex;

use super::{ClusterTarget, E2eError, Setup};
use kubectl_meta_engine::events::EventBus;
use kubectl_meta_engine::k8s::client::{self, Connection};
use kubectl_meta_engine::k8s::discovery::Discovery;
use kubectl_meta_engine::k8s::manifests;
use kubectl_meta_engine::{Engine, EngineContext, EngineOptions, WaitFor};

/// A change to the engine's options ([`EnvExtras::engine_options`]).
pub type EngineOptionsHook = Arc<dyn Fn(&mut EngineOptions) + Send + Sync>;

/// A call with the started sandbox ([`EnvExtras::on_sandbox`]).
pub type SandboxHook = Arc<dyn Fn(&kube_sandbox::Sandbox) + Send + Sync>;

/// What a perturbation (or any caller) may add to an e2e environment.
#[derive(Default, Clone)]
pub struct EnvExtras {
    /// Applied to the engine's options before every engine start (first start and restarts):
    /// the perturb driver sets `options.perturb` here.
    pub engine_options: Option<EngineOptionsHook>,
    /// Called once with the in-process sandbox after it started, before the engine starts
    /// (arm `sandbox.faults()` rules: conflict, throttle). Not called against `--context`.
    pub on_sandbox: Option<SandboxHook>,
    /// When notified, the environment stops the running engine at once (its tasks aborted, as a
    /// kill -9 would: no graceful finish of the sync in flight) and starts a fresh engine on
    /// fresh caches with the same definitions and options (class `restart`).
    pub restart: Option<Arc<tokio::sync::Notify>>,
    /// When notified, the environment restarts the managed hook server (class `hook-restart`).
    /// The e2e runner itself ignores it: the caller that runs a managed hook server restarts it
    /// through [`EnvExtras::hook_gate`] (`kubectl meta test` does, from `--hook-server` or the
    /// project's served hook), so that the call that asked for it goes to the new server.
    pub restart_hook_server: Option<Arc<tokio::sync::Notify>>,
    /// Set on every engine's context (first start and restarts): webhook calls it covers wait
    /// on it first (a managed hook server starting or restarting).
    pub hook_gate: Option<Arc<dyn kubectl_meta_engine::HookGate>>,
}

/// A running environment.
pub struct Env {
    /// The connection to the sandbox.
    pub conn: Connection,
    /// Discovery on it.
    pub discovery: Discovery,
    /// The kubeconfig file `command` and `script` get as `KUBECONFIG`.
    pub kubeconfig: PathBuf,
    /// The engine running the controllers (replaced on restart).
    engine: Arc<Mutex<Option<Engine>>>,
    sandbox: Option<kube_sandbox::Sandbox>,
    /// Against a named cluster: the test's namespace (the engine syncs only parents there).
    cluster_namespace: Option<String>,
    restarter: Option<tokio::task::JoinHandle<()>>,
}

/// One look of [`Env::settle`]: long enough for the engine's quiet period to pass once.
const SETTLE_SLICE: Duration = Duration::from_millis(1000);

/// How long a step's snapshot waits at most for the engine to come to rest ([`Env::settle`]).
pub const SETTLE_MAX: Duration = Duration::from_secs(5);

/// How long a test's engine may take to stop before its environment is torn down anyway.
const ENGINE_STOP_GRACE: Duration = Duration::from_millis(300);

/// How long the sandbox's simulated kubelet takes to start or stop a pod in e2e tests.
pub const POD_DELAY: Duration = Duration::from_millis(100);

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Start the engine on `conn` with the definitions of `setup` (its parents limited to
/// `namespace` when one is given: a named cluster shared by tests).
fn start_engine(
    setup: &Setup,
    conn: &Connection,
    extras: &EnvExtras,
    namespace: Option<&str>,
) -> Result<Engine, E2eError> {
    let mut options = EngineOptions {
        hook_base_url: setup.hook_base_url.clone(),
        namespace: namespace.map(String::from),
        ..EngineOptions::default()
    };
    if let Some(f) = &extras.engine_options {
        f(&mut options);
    }
    let ctx = EngineContext::new(conn.client.clone(), EventBus::new(), options)
        .map_err(|e| E2eError::Environment(format!("cannot set up the hook client: {e}")))?;
    ctx.set_gate(extras.hook_gate.clone());
    let mut engine = Engine::new(Arc::new(ctx));
    // At rest means the engine's work done ([`Env::settle`]); whether children become ready
    // is for the test's assertions to say.
    engine.set_wait_for(WaitFor::None);
    for def in &setup.controllers {
        engine.start(def.clone());
    }
    Ok(engine)
}

impl Env {
    /// A fresh sandbox (or the named cluster of [`Setup::cluster`](crate::Setup::cluster))
    /// with the setup's manifests (CRDs, namespaces) and the engine running; `namespace` is the
    /// test's.
    pub async fn start(
        setup: &Setup,
        extras: &EnvExtras,
        namespace: &str,
    ) -> Result<Env, E2eError> {
        let kubeconfig = std::env::temp_dir().join(format!(
            "kubectl-meta-e2e-{}-{}.kubeconfig",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        if let Some(target) = &setup.cluster {
            return Env::start_on(target, setup, extras, namespace, kubeconfig).await;
        }
        let mut cfg = kube_sandbox::SandboxConfig {
            kubeconfig: Some(kubeconfig.clone()),
            ..kube_sandbox::SandboxConfig::ephemeral()
        };
        // Pods start and stop after POD_DELAY instead of the sandbox's 0.5 s: a rollout test
        // waits on every pod, several times.
        cfg.tunables.kubelet_delay = Some(POD_DELAY);
        let sandbox = kube_sandbox::Sandbox::start(cfg)
            .await
            .map_err(|e| E2eError::Environment(format!("starting the sandbox: {e}")))?;
        if let Some(f) = &extras.on_sandbox {
            f(&sandbox);
        }
        let conn = match client::connect(Some(&kubeconfig), Some("sandbox"), None).await {
            Ok(c) => c,
            Err(e) => {
                sandbox.shutdown().await;
                let _ = std::fs::remove_file(&kubeconfig);
                return Err(E2eError::Environment(format!(
                    "connecting to the sandbox: {e}"
                )));
            }
        };
        Env::assemble(conn, kubeconfig, Some(sandbox), None, setup, extras).await
    }

    /// The environment on `conn`: the manifests applied, the engine started (stopped again,
    /// sandbox and all, if that fails).
    async fn assemble(
        conn: Connection,
        kubeconfig: PathBuf,
        sandbox: Option<kube_sandbox::Sandbox>,
        cluster_namespace: Option<String>,
        setup: &Setup,
        extras: &EnvExtras,
    ) -> Result<Env, E2eError> {
        let discovery = Discovery::new(conn.client.clone());
        let mut env = Env {
            conn,
            discovery,
            kubeconfig,
            engine: Arc::new(Mutex::new(None)),
            sandbox,
            cluster_namespace,
            restarter: None,
        };
        if let Err(e) = env.prepare(setup, extras).await {
            env.stop().await;
            return Err(e);
        }
        Ok(env)
    }

    /// The environment on a named cluster: connect to `target`'s context, write the kubeconfig
    /// copy `command` and `script` use (that context current), apply the manifests, start the
    /// engine on the test's namespace.
    async fn start_on(
        target: &ClusterTarget,
        setup: &Setup,
        extras: &EnvExtras,
        namespace: &str,
        kubeconfig: PathBuf,
    ) -> Result<Env, E2eError> {
        let conn = client::connect(target.kubeconfig.as_deref(), Some(&target.context), None)
            .await
            .map_err(|e| E2eError::Environment(format!("connecting to {}: {e}", target.context)))?;
        write_kubeconfig(target, &kubeconfig)?;
        let ns = Some(namespace.to_string());
        Env::assemble(conn, kubeconfig, None, ns, setup, extras).await
    }

    /// Whether the environment is a named cluster (not a sandbox of its own).
    pub fn is_cluster(&self) -> bool {
        self.sandbox.is_none()
    }

    async fn prepare(&mut self, setup: &Setup, extras: &EnvExtras) -> Result<(), E2eError> {
        if !setup.manifests.is_empty() {
            manifests::apply_documents(
                &self.conn.client,
                &self.discovery,
                "default",
                &setup.manifests,
                Duration::from_secs(30),
                &manifests::ApplyMode {
                    overwrite: true,
                    field_manager: kubectl_meta_engine::k8s::FIELD_MANAGER,
                    dry_run: false,
                },
            )
            .await
            .map_err(|e| {
                E2eError::Environment(format!("applying the definitions' manifests: {e}"))
            })?;
        }
        let ns = self.cluster_namespace.clone();
        let engine = start_engine(setup, &self.conn, extras, ns.as_deref())?;
        *self.engine.lock().await = Some(engine);
        if let Some(notify) = extras.restart.clone() {
            let slot = Arc::clone(&self.engine);
            let (setup, conn, extras) = (setup.clone(), self.conn.clone(), extras.clone());
            self.restarter = Some(tokio::spawn(async move {
                loop {
                    notify.notified().await;
                    let mut guard = slot.lock().await;
                    // As kill -9: its tasks aborted, nothing awaited, so a sync stopped at a
                    // perturbation's write point never writes.
                    if let Some(old) = guard.take() {
                        old.kill();
                    }
                    match start_engine(&setup, &conn, &extras, ns.as_deref()) {
                        Ok(e) => *guard = Some(e),
                        Err(e) => tracing::warn!("e2e: the engine did not restart: {e}"),
                    }
                }
            }));
        }
        Ok(())
    }

    /// Wait until the engine has nothing left to do (no sync queued or running, quiet for
    /// [`kubectl_meta_engine::QUIET`]), at most `timeout`. Snapshots are taken at rest, so a run
    /// that gets there later (a perturbation's retries and back-off) is compared by where it
    /// ends, not by how far it got when the step's assertions passed. The engine is looked at in
    /// short slices, so a restart (which replaces it) is never kept waiting.
    pub async fn settle(&self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            let done = {
                let guard = self.engine.lock().await;
                match guard.as_ref() {
                    Some(e) => {
                        let r = e.wait_converged(SETTLE_SLICE).await;
                        // A failed sync is retried after its back-off: not at rest yet.
                        r.converged && r.failed.is_empty()
                    }
                    None => false,
                }
            };
            if done {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Stop the engine and the sandbox, remove the kubeconfig.
    pub async fn stop(mut self) {
        if let Some(r) = self.restarter.take() {
            r.abort();
        }
        if let Some(e) = self.engine.lock().await.take() {
            // A sandbox of its own is thrown away with the engine: nothing is left to finish
            // (a graceful stop cost every test the whole ENGINE_STOP_GRACE, measured: 0.31 s).
            if self.sandbox.is_some() {
                e.kill();
            } else {
                // On a named cluster the syncs in flight get a moment to end, not the engine's
                // full grace (which can wait ~10 s on a sync that has nothing left to do).
                let ctx = Arc::clone(e.context());
                if tokio::time::timeout(ENGINE_STOP_GRACE, e.shutdown())
                    .await
                    .is_err()
                {
                    ctx.informers.shutdown();
                }
            }
        }
        if let Some(sb) = self.sandbox.take() {
            sb.shutdown().await;
        }
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Write a copy of `target`'s kubeconfig with its context current to `path` (owner-only: it
/// holds the credentials), for `command` and `script` (kubectl reads `KUBECONFIG`).
fn write_kubeconfig(target: &ClusterTarget, path: &std::path::Path) -> Result<(), E2eError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let read = match &target.kubeconfig {
        Some(p) => kube::config::Kubeconfig::read_from(p),
        None => kube::config::Kubeconfig::read(),
    };
    let mut config =
        read.map_err(|e| E2eError::Environment(format!("reading the kubeconfig: {e}")))?;
    config.current_context = Some(target.context.clone());
    let text = serde_json::to_vec_pretty(&config)
        .map_err(|e| E2eError::Environment(format!("writing the kubeconfig: {e}")))?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(&text))
        .map_err(|e| E2eError::Environment(format!("writing {}: {e}", path.display())))
}

/// The documents of the definition files the environment applies before the engine starts:
/// CRDs and Namespaces (sample objects are the tests' to create).
pub fn environment_manifests(docs: &[(String, Value)]) -> Vec<(String, Value)> {
    docs.iter()
        .filter(|(_, d)| {
            matches!(
                d["kind"].as_str(),
                Some("CustomResourceDefinition" | "Namespace")
            )
        })
        .cloned()
        .collect()
}
