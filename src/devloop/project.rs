//! What a project file (`kubectl-meta.yaml`, [`crate::project`]) adds to the dev loop, kept
//! apart from the loop's own reload logic:
//! - paths whose changes never reload (the test and record directories, `.kubectl-meta/`,
//!   build outputs): dropped from a batch before it is classified;
//! - the hooks' `build` steps, run again before a restart (or, for exec hooks, before the next
//!   call) when a change falls under a build's watched paths. While a build runs, every hook
//!   call waits for it ([`BuildGate`]); while the last build failed, every hook call fails with
//!   the build's output, so nothing is written until a fixed version builds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::engine::HookGate;
use crate::engine::events::{EngineEvent, EventBus};
use crate::hooks::HookTarget;
use crate::project::Build;

use super::watch::ChangeBatch;

/// Where the project's hooks stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildState {
    /// Built: calls go ahead.
    Ready,
    /// A build runs: calls wait for it.
    Building,
    /// The last build failed (its error): calls fail.
    Broken(String),
}

/// The gate every hook call passes when the project has build steps; wraps the managed
/// server's gate (webhook calls to it then also wait for the server).
pub struct BuildGate {
    state: watch::Sender<BuildState>,
    inner: Option<Arc<dyn HookGate>>,
}

impl BuildGate {
    /// A gate in state [`BuildState::Ready`] (the first build ran before the loop started).
    pub fn new(inner: Option<Arc<dyn HookGate>>) -> BuildGate {
        BuildGate {
            state: watch::channel(BuildState::Ready).0,
            inner,
        }
    }

    /// Set the state (waking the calls that wait).
    pub fn set(&self, state: BuildState) {
        self.state.send_replace(state);
    }
}

impl HookGate for BuildGate {
    fn covers(&self, _url: &str) -> bool {
        true
    }

    fn covers_target(&self, _target: &HookTarget) -> bool {
        true
    }

    fn wait_ready(&self, timeout: Duration) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { self.wait_built(timeout).await })
    }

    fn wait_ready_for<'a>(
        &'a self,
        target: &'a HookTarget,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.wait_built(timeout).await?;
            match (&self.inner, target) {
                (Some(g), HookTarget::Webhook { url, .. }) if g.covers(url) => {
                    g.wait_ready(timeout).await
                }
                _ => Ok(()),
            }
        })
    }
}

impl BuildGate {
    async fn wait_built(&self, timeout: Duration) -> Result<(), String> {
        let mut rx = self.state.subscribe();
        let state = match tokio::time::timeout(timeout, rx.wait_for(|s| *s != BuildState::Building))
            .await
        {
            Err(_) => {
                return Err(format!(
                    "the hooks' build did not finish within {}s",
                    timeout.as_secs()
                ));
            }
            Ok(Err(_)) => return Ok(()),
            Ok(Ok(s)) => s.clone(),
        };
        match state {
            BuildState::Broken(why) => Err(format!(
                "the last build failed (fix it and save: it runs again on the next change): {why}"
            )),
            _ => Ok(()),
        }
    }
}

/// `p` with symlinks resolved as far as it exists (batch paths are canonical; a directory
/// that does not exist yet, e.g. the record directory, is resolved through its parent).
pub fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) => canonical(parent).join(name),
        _ => p.to_path_buf(),
    }
}

/// Drop the paths under `excluded` (canonical) from `batch`.
pub fn drop_excluded(batch: &mut ChangeBatch, excluded: &[PathBuf]) {
    batch
        .paths
        .retain(|p| !excluded.iter().any(|e| p.starts_with(e)));
}

/// Run the builds a batch calls for (those whose watched paths hold a changed file), with
/// `gate` held in [`BuildState::Building`] meanwhile. False when one failed (said on the bus;
/// the gate then fails every call until a build succeeds): the caller restarts nothing.
pub async fn rebuild(
    builds: &[Build],
    batch: &ChangeBatch,
    gate: &BuildGate,
    bus: &EventBus,
) -> bool {
    let due: Vec<&Build> = builds
        .iter()
        .filter(|b| {
            batch
                .paths
                .iter()
                .any(|p| b.watch.iter().any(|w| p.starts_with(canonical(w))))
        })
        .collect();
    if due.is_empty() {
        return true;
    }
    let paths: Vec<String> = batch
        .paths
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    gate.set(BuildState::Building);
    for b in due {
        let started = std::time::Instant::now();
        match b.run().await {
            Ok(()) => bus.publish(EngineEvent::Reload {
                what: "build".into(),
                paths: paths.clone(),
                message: format!(
                    "hook {}: built in {:.1}s ({})",
                    b.hook,
                    started.elapsed().as_secs_f64(),
                    b.command
                ),
                error: None,
            }),
            Err(e) => {
                let why = e.to_string();
                gate.set(BuildState::Broken(why.clone()));
                bus.publish(EngineEvent::Reload {
                    what: "build".into(),
                    paths,
                    message: "the build failed: hook calls fail and nothing is written until a fixed version builds".into(),
                    error: Some(why),
                });
                return false;
            }
        }
    }
    gate.set(BuildState::Ready);
    true
}
