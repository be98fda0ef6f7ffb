//! Starting a controller: resolving its resources (waiting for missing ones,
//! [`resolve_all`], [`resolve_all_after`]), waiting for its caches ([`wait_caches`]), why it
//! cannot start ([`StartError`]), and its worker loop once it did ([`launched`]).
//!
//! The kinds call these from their `prepare`/`build` steps; [`crate::runtime::source`]
//! drives them for every kind. Nothing here knows a controller kind.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::events::{EngineEvent, Trigger};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::Informer;
use crate::runtime::context::EngineContext;
use crate::runtime::controller::{ControllerHandle, Reconciler, Tracker, run_workers};

/// Why a controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Configuration that can never work (scope mismatch, bad hook).
    #[error("controller {controller}: {message}")]
    Config {
        /// Controller name.
        controller: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// Stopped before the controller could start.
    #[error("controller {0}: stopped before it started")]
    Stopped(String),
}

impl StartError {
    /// A [`StartError::Config`] for `controller`.
    pub fn config(controller: &str, message: impl Into<String>) -> Self {
        StartError::Config {
            controller: controller.to_string(),
            message: message.into(),
        }
    }
}

/// Resolve `(apiVersion, resource)` pairs, reporting and retrying missing ones until they
/// exist or `stop` fires.
pub async fn resolve_all(
    ctx: &EngineContext,
    controller: &str,
    wanted: &[(String, String)],
    stop: &CancellationToken,
) -> Result<Vec<ResourceInfo>, StartError> {
    resolve_all_after(ctx, controller, wanted, stop, Duration::ZERO).await
}

/// As [`resolve_all`], for resources that are expected to appear (a CRD just created): a
/// missing one is reported only once `grace` has passed, so the normal wait for the API server
/// to serve a new CRD is not shown as an error.
pub async fn resolve_all_after(
    ctx: &EngineContext,
    controller: &str,
    wanted: &[(String, String)],
    stop: &CancellationToken,
    grace: Duration,
) -> Result<Vec<ResourceInfo>, StartError> {
    let started = tokio::time::Instant::now();
    let mut delay = if grace.is_zero() {
        Duration::from_millis(500)
    } else {
        Duration::from_millis(50)
    };
    let mut reported: HashSet<String> = HashSet::new();
    loop {
        let mut out = Vec::new();
        let mut missing = None;
        for (av, res) in wanted {
            match ctx.discovery.resolve(av, res).await {
                Ok(i) => out.push(i),
                Err(e) => {
                    missing = Some(e.to_string());
                    break;
                }
            }
        }
        match missing {
            None => {
                if !reported.is_empty() {
                    ctx.bus.publish(EngineEvent::Info {
                        controller: Some(controller.to_string()),
                        message: "all resources are served now; starting".into(),
                    });
                }
                return Ok(out);
            }
            Some(m) => {
                if started.elapsed() >= grace && reported.insert(m.clone()) {
                    ctx.bus.publish(EngineEvent::Error {
                        controller: Some(controller.to_string()),
                        object: None,
                        message: format!("{m} (waiting for it to appear)"),
                    });
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {},
            () = stop.cancelled() => return Err(StartError::Stopped(controller.to_string())),
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// Wait until every informer has synced, reporting each timeout and waiting on; fails only
/// when `stop` fires first.
pub async fn wait_caches(
    ctx: &EngineContext,
    controller: &str,
    informers: &[&Arc<Informer>],
    stop: &CancellationToken,
) -> Result<(), StartError> {
    for inf in informers {
        loop {
            tokio::select! {
                r = inf.wait_synced(ctx.options.sync_timeout) => match r {
                    Ok(()) => break,
                    Err(e) => ctx.bus.publish(EngineEvent::Error {
                        controller: Some(controller.to_string()),
                        object: None,
                        message: e.to_string(),
                    }),
                },
                () = stop.cancelled() => return Err(StartError::Stopped(controller.to_string())),
            }
        }
    }
    Ok(())
}

/// A started controller: its handle and the worker loop to run until stop.
pub type Launched = (
    Arc<dyn ControllerHandle>,
    futures::future::BoxFuture<'static, ()>,
);

/// Announce a started controller ([`EngineEvent::ControllerStarted`] with `kind`, its parent
/// resource(s) and parent count) and build its worker loop (`--workers` workers driving
/// `reconciler` until `stop`).
pub fn launched<R: Reconciler>(
    ctx: Arc<EngineContext>,
    kind: &str,
    handle: Arc<dyn ControllerHandle>,
    parent_resource: String,
    reconciler: Arc<R>,
    stop: CancellationToken,
    tracker: Arc<Tracker>,
) -> Launched {
    ctx.bus.publish(EngineEvent::ControllerStarted {
        controller_kind: kind.into(),
        controller: handle.name().to_string(),
        parent_resource,
        parents: handle.parent_count(),
    });
    // After writes were held (API server outage), queue every parent: anything may have
    // changed meanwhile, and syncs that failed during the outage are retried at once.
    let mut held = ctx.writes_watch();
    let (h, s) = (Arc::clone(&handle), stop.clone());
    tokio::spawn(async move {
        let mut was_held = held.borrow_and_update().is_some();
        loop {
            tokio::select! {
                r = held.changed() => if r.is_err() { return },
                () = s.cancelled() => return,
            }
            let now_held = held.borrow_and_update().is_some();
            if was_held && !now_held {
                h.enqueue_all(Trigger::Retry);
            }
            was_held = now_held;
        }
    });
    let gate = ctx.writes_watch();
    let shard = ctx.shard();
    let run = Box::pin(async move {
        run_workers(
            reconciler,
            ctx.options.workers,
            ctx.bus.clone(),
            tracker,
            stop,
            gate,
            shard,
        )
        .await;
    });
    (handle, run)
}
