//! Carrying a plan out ([`carry_out`]: execute, or hold it while paused), waiting until the
//! caches show the writes ([`await_expectations`]), and reporting a failed sync ([`finish_sync`]).

use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::SyncError;
use crate::events::EngineEvent;
use crate::k8s::informer::Informer;
use crate::plan::planner::SyncPlan;
use crate::runtime::context::EngineContext;
use crate::runtime::controller::SyncOutcome;
use crate::runtime::execute::{ExecMode, Expectation, Target};

use crate::runtime::memory::SyncMemory;

/// How long to wait for the caches to show our own writes before finishing a sync.
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(10);

/// Carry `sync_plan` out for the parent `target` (synced as `key`), remember the status
/// written, and wait until the caches (`informer_for`, by `Kind.apiVersion`) show the writes.
/// While the engine is paused, publish the plan as [`EngineEvent::PlanHeld`] instead and write
/// nothing ([`ExecMode::Paused`]). Returns the number of writes, or [`SyncError::Held`] when
/// writes are held, [`SyncError::Write`] with every failed write's message.
pub async fn carry_out<'i, K: Clone + Eq + Hash + Display>(
    ctx: &EngineContext,
    memory: &SyncMemory<K>,
    key: &K,
    target: &Target<'_>,
    sync_plan: &SyncPlan,
    informer_for: impl Fn(&str) -> Option<&'i Arc<Informer>>,
) -> Result<Carried, SyncError> {
    let plan = &sync_plan.writes;
    if let Some(why) = ctx.writes_held() {
        // The API server went away mid-sync: write nothing; the sync is retried once it is back.
        return Err(SyncError::Held(why));
    }
    if ctx.is_paused() {
        // Paused: show what would be written, write nothing, and do not wait for it.
        let report = ctx.executor.execute(target, plan, ExecMode::Paused).await;
        ctx.bus.publish(EngineEvent::PlanHeld {
            controller: target.controller.to_string(),
            subject: target.subject.clone(),
            actions: report.planned,
        });
        return Ok(Carried::default());
    }
    let report = ctx.executor.execute(target, plan, ExecMode::Apply).await;
    if let Some(st) = report.status_written {
        memory.record_status(key, st);
    }
    let (mut tripped, mut hot_loops) = memory.record_rewrites(key, plan, &report.updated);
    for h in &mut tripped {
        if crate::plan::hotloop::may_be_another_writer(
            &h.path,
            h.desired.as_ref(),
            h.server.as_ref(),
        ) && let Some(w) = ctx.executor.field_writer(target, &h.child, &h.path).await
        {
            let before = h.message();
            h.fought_by(w);
            memory.update_hot_loop(key, h);
            let after = h.message();
            hot_loops
                .iter_mut()
                .filter(|m| **m == before)
                .for_each(|m| *m = after.clone());
        }
        let message = h.message();
        ctx.bus.publish(EngineEvent::HotLoop {
            controller: target.controller.to_string(),
            subject: (&target.subject).into(),
            resource: h.child.type_key.clone(),
            object: h.child.object(),
            path: h.path.clone(),
            desired: h.desired.clone(),
            server: h.server.clone(),
            cause: h.cause.clone(),
            writer: h.writer.clone(),
            message: message.clone(),
        });
        ctx.recorder.hot_loop(target.parent, &message).await;
    }
    await_expectations(&report.expectations, informer_for).await;
    if report.errors.is_empty() {
        Ok(Carried {
            writes: report.writes,
            status_writes: report.status_writes,
            own_writes: report.own_writes,
            parent_rv: report.parent_rv,
            noops: report.child_noops,
            hot_loops,
        })
    } else {
        Err(SyncError::Write(report.errors))
    }
}

/// Publish a map key's detached outputs and the tombstone decision about them
/// ([`EngineEvent::Detached`], [`EngineEvent::Tombstone`]) as the sync carries its plan out:
/// nothing while paused or while writes are held (the `Planned` event shows them then).
pub fn publish_detached(ctx: &EngineContext, controller: &str, parent: &str, plan: &SyncPlan) {
    let Some(map_key) = &plan.map_key else {
        return;
    };
    if ctx.is_paused() || ctx.writes_held().is_some() {
        return;
    }
    for e in crate::events::detached_events(controller, parent, map_key, &plan.detached) {
        ctx.bus.publish(e);
    }
}

/// What [`carry_out`] did.
#[derive(Debug, Default)]
pub struct Carried {
    /// Writes made.
    pub writes: usize,
    /// Status writes among `writes`.
    pub status_writes: usize,
    /// The children written and the resourceVersions the writes returned.
    pub own_writes: Vec<crate::runtime::execute::OwnWrite>,
    /// The parent's resourceVersion after its writes, when it was written.
    pub parent_rv: Option<String>,
    /// Child updates the server answered as no-ops.
    pub noops: usize,
    /// Fields the hot-loop guard holds, as messages.
    pub hot_loops: Vec<String>,
}

impl Carried {
    /// Copy the counts into a sync's outcome.
    pub fn fill(self, outcome: &mut SyncOutcome) {
        outcome.writes = self.writes;
        outcome.status_writes = self.status_writes;
        outcome.noops = self.noops;
        outcome.hot_loops = self.hot_loops;
    }
}

/// Wait (up to [`EXPECTATION_TIMEOUT`] each) until the caches show our writes: changed
/// objects with a new resourceVersion, deleted ones gone or being deleted. `informer_for`
/// finds the cache of a `Kind.apiVersion`; writes to other resources are not waited for.
pub async fn await_expectations<'i>(
    expectations: &[Expectation],
    informer_for: impl Fn(&str) -> Option<&'i Arc<Informer>>,
) {
    for e in expectations {
        let (type_key, key) = match e {
            Expectation::Changed { type_key, key, .. } | Expectation::Gone { type_key, key } => {
                (type_key, key)
            }
        };
        let Some(inf) = informer_for(type_key) else {
            continue;
        };
        let ok = match e {
            Expectation::Changed { previous, .. } => {
                let previous = previous.clone();
                inf.wait_until(
                    key,
                    move |o| o.is_some_and(|o| o.resource_version != previous),
                    EXPECTATION_TIMEOUT,
                )
                .await
            }
            Expectation::Gone { .. } => {
                inf.wait_until(key, |o| o.is_none_or(|o| o.deleting), EXPECTATION_TIMEOUT)
                    .await
            }
        };
        if !ok {
            tracing::debug!("cache did not show our write to {type_key} {key} in time");
        }
    }
}

/// A sync's result as the worker loop wants it: a failure that is not a 429 is also recorded
/// as a `SyncError` Event on the parent (when the sync got that far).
pub async fn finish_sync(
    ctx: &EngineContext,
    result: Result<SyncOutcome, (SyncError, Option<Value>)>,
) -> SyncOutcome {
    match result {
        Ok(out) => out,
        Err((failure, parent)) => {
            if failure.is_failure()
                && let Some(p) = parent
            {
                ctx.recorder.sync_error(&p, &failure.to_string()).await;
            }
            SyncOutcome {
                error: Some(failure),
                ..SyncOutcome::default()
            }
        }
    }
}
