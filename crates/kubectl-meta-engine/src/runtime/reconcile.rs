//! The one reconcile skeleton every controller kind runs.
//!
//! A sync of one key (a CompositeController parent, a DecoratorController target, a
//! MapController map key) is the same sequence of steps whatever the kind; [`sync`] runs them
//! in this order, and each kind ([`SyncKind`]) supplies only what differs:
//!
//! 1. **parent** ([`SyncKind::parent`]): read the parent (target) from its cache; gone means
//!    nothing to do.
//! 2. **observe** ([`SyncKind::observe`]): decide whether and how it is synced (finalizing or
//!    not), read its related objects (customize hook) and its children keyed as the kind keys
//!    them: claimed by the parent's selector (composite), attachments carrying our annotation
//!    (decorator), outputs and orphans carrying the map key (map). `None`: nothing to do.
//! 3. **hook** ([`SyncKind::hook`]): which hook to call with which request (`None`: no hook, as
//!    when finalizing without a finalize hook); the call goes through the kind's
//!    [`Caller`](crate::runtime::caller::Caller), and the exchange is recorded
//!    ([`SyncKind::record`]) for replays.
//! 4. **desired** ([`SyncKind::desired`]): the answer decoded, normalized, checked against
//!    objects of others (clash rule), plus the kind's extras (the composite rollout step, the
//!    decorator annotation, the map output tags).
//! 5. **plan** ([`SyncKind::plan`]): the pure [`crate::plan::planner`] call.
//! 6. **publish** the plan as [`crate::events::EngineEvent::Planned`].
//! 7. **carry out** ([`carry::carry_out`]) against the kind's [`Target`] and caches.
//! 8. **outcome**: writes, resync interval and rollout progress, read from the plan and the
//!    carried-out report; [`SyncKind::settle`] lets a kind remember what the sync saw
//!    (MapController fingerprints), and [`carry::finish_sync`] reports a failure once, as a
//!    `SyncError` Event on the parent.
//!
//! [`plan_only`] runs steps 1 to 5 alone (no `Planned` event, nothing carried out): the
//! dry run plans through it, on a kind built on live state read once
//! ([`crate::runtime::source::Source`]).
//!
//! [`Running`] is the rest of what the kinds share: one adapter that is both the
//! [`ControllerHandle`] the runtime drives and the [`Reconciler`] the worker loop drives, and
//! [`launch`] starts a kind with it. A kind offers for that only what differs
//! ([`KindController`]: its parents with their keys, its routers); its queue, hooks, memory
//! and caller are read from its [`Core`], and queueing parents (all, or by name) is written
//! here once.

use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::{EngineEvent, EventKey, Trigger};
use crate::k8s::informer::Informer;
use crate::plan::planner::SyncPlan;
use crate::runtime::carry;
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::controller::{
    ControllerHandle, LastExchange, Reconciler, SyncError, SyncOutcome, Tracker,
};
use crate::runtime::core::{Core, KindHooks, Parts};
use crate::runtime::execute::Target;
use crate::runtime::memory::Cached;
use crate::runtime::queue::{QueueStats, WorkQueue};
use crate::runtime::routing;
use crate::runtime::source::{self, Built};
use crate::runtime::start;
use crate::spec::Controller;

/// What a sync is given besides its key.
#[derive(Clone, Copy)]
pub struct SyncCx<'a> {
    /// Why the key was queued.
    pub triggers: &'a [Trigger],
    /// Ends the related-resource routers a sync starts.
    pub stop: &'a CancellationToken,
}

/// One hook call a sync makes: the hook's name (`sync`, `finalize`, `map`, `tombstone`), how
/// to call it and the request.
pub struct HookCall<'a> {
    /// The hook's name, as call logs and exchanges show it.
    pub name: &'static str,
    /// How to call it.
    pub spec: &'a HookSpec,
    /// The request body.
    pub request: Value,
}

/// A failed sync with the parent to record the `SyncError` Event on (when it was read).
pub type Failed = (SyncError, Option<Value>);

/// What one controller kind supplies to the shared reconcile steps (see the module header).
pub trait SyncKind: Send + Sync + Sized + 'static {
    /// The work-queue key.
    type Key: Clone + Eq + Hash + Send + Sync + Display + EventKey + 'static;
    /// What the observe step found (children, related objects, the sync mode).
    type Seen: Send + Sync;
    /// The hook's answer as desired objects (and what else the plan needs from it).
    type Answer: Send + Sync;
    /// Carry out plans that write nothing (composite, decorator: a paused engine shows them, an
    /// outage fails them); MapController skips them.
    const CARRY_OUT_EMPTY: bool = true;
    /// Drop the triggers that are only echoes of the engine's own writes (see
    /// [`Reconciler::drop_own_echoes`]); MapController recognises them by itself.
    const DROP_OWN_ECHOES: bool = true;

    /// The kind's resolved hooks.
    type Hooks: KindHooks;

    /// What every kind holds the same way: name, engine services, queue, hook caller, per-key
    /// memory, hooks.
    fn core(&self) -> &Core<Self::Key, Self::Hooks>;
    /// The controller's name, engine services, hook caller and per-key memory.
    fn parts(&self) -> Parts<'_, Self::Key> {
        self.core().parts()
    }

    /// Step 1: the parent (target) of `key`, if it is there to sync.
    fn parent(&self, key: &Self::Key) -> Option<Arc<Value>>;
    /// The cached parent whose uid's bucket decides which `run --sharded` replica syncs `key`
    /// (by default [`SyncKind::parent`]; a kind whose work items are not all synced through
    /// the skeleton names their parent here).
    fn shard_parent(&self, key: &Self::Key) -> Option<Arc<Value>> {
        self.parent(key)
    }

    /// The resourceVersion of the parent of `key` as cached (`None`: absent, or none), for
    /// telling its own writes' echoes apart; by default read from [`SyncKind::parent`], a kind
    /// whose cache shows it without parsing the object overrides this.
    fn parent_resource_version(&self, key: &Self::Key) -> Option<String> {
        self.parent(key)
            .as_deref()
            .and_then(crate::k8s::object::resource_version)
            .map(str::to_string)
    }

    /// Step 2: the sync mode, related objects and children; `None`: nothing to do.
    fn observe(
        &self,
        key: &Self::Key,
        parent: &Value,
        cx: SyncCx<'_>,
    ) -> impl Future<Output = Result<Option<Self::Seen>, SyncError>> + Send;
    /// Step 3: the hook to call and its request (`None`: no hook call).
    fn hook(&self, parent: &Value, seen: &Self::Seen) -> Option<HookCall<'_>>;
    /// Remember the exchange (for replays); by default in the per-key memory.
    fn record(&self, key: &Self::Key, hook: &str, request: &Value, response: &Value) {
        self.parts()
            .memory
            .record_exchange_sharing(key, hook, request, response, |obj| {
                crate::runtime::memory::cached_text(obj, |t| self.informer_for(t))
            });
    }
    /// Step 4: the hook's answer (`body`) as desired objects.
    fn desired(
        &self,
        key: &Self::Key,
        parent: &Value,
        seen: &Self::Seen,
        hook: (&'static str, &HookSpec),
        body: &Value,
    ) -> impl Future<Output = Result<Self::Answer, SyncError>> + Send;
    /// Step 5: the pure plan (`answer` is `None` when no hook was called).
    fn plan(
        &self,
        key: &Self::Key,
        parent: &Value,
        seen: &Self::Seen,
        answer: Option<&Self::Answer>,
    ) -> SyncPlan;
    /// The parent as the `Planned` event names it.
    fn event_parent(&self, key: &Self::Key) -> String {
        key.to_string()
    }
    /// Step 7: where the plan is carried out.
    fn target<'a>(&'a self, key: &Self::Key, parent: &'a Value) -> Target<'a>;
    /// The cache of a resource this controller reads, by `Kind.apiVersion` (to wait for the
    /// writes to show).
    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>>;
    /// Step 8: what the kind remembers of a finished sync (by default nothing).
    fn settle(
        &self,
        key: &Self::Key,
        parent: &Value,
        seen: &Self::Seen,
        result: Result<SyncOutcome, SyncError>,
    ) -> Result<SyncOutcome, SyncError> {
        let _ = (key, parent, seen);
        result
    }
}

/// One sync of `key`, failures reported ([`carry::finish_sync`]).
pub async fn sync<S: SyncKind>(kind: &S, key: &S::Key, cx: SyncCx<'_>) -> SyncOutcome {
    carry::finish_sync(kind.parts().ctx, run(kind, key, cx).await).await
}

/// One sync of `key`: every step of the module header in order.
pub async fn run<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    cx: SyncCx<'_>,
) -> Result<SyncOutcome, Failed> {
    let Some((parent, seen)) = observed(kind, key, cx).await? else {
        return Ok(SyncOutcome::default());
    };
    let result = steps(kind, key, &parent, &seen).await;
    kind.settle(key, &parent, &seen, result)
        .map_err(|f| (f, Some((*parent).clone())))
}

/// Steps 1 and 2: the parent and what was observed of it (`None`: nothing to do).
async fn observed<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    cx: SyncCx<'_>,
) -> Result<Option<(Arc<Value>, S::Seen)>, Failed> {
    let Some(parent) = kind.parent(key) else {
        return Ok(None);
    };
    match kind.observe(key, &parent, cx).await {
        Ok(Some(seen)) => Ok(Some((parent, seen))),
        Ok(None) => Ok(None),
        Err(f) => Err((f, Some((*parent).clone()))),
    }
}

/// Steps 3 to 8 on an observed parent.
async fn steps<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    parent: &Value,
    seen: &S::Seen,
) -> Result<SyncOutcome, SyncError> {
    let ctx = kind.parts().ctx;
    let plan = decide(kind, key, parent, seen).await?;
    let parent_shown = kind.event_parent(key);
    ctx.bus
        .publish(plan.event(kind.parts().name, &parent_shown));
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("plan.objects", plan.objects.len() as u64);
        span.record("plan.create", plan.writes.create.len() as u64);
        span.record("plan.update", plan.writes.update.len() as u64);
        span.record("plan.delete", plan.writes.delete.len() as u64);
        span.record("plan.writes", plan.write_count() as u64);
    }
    // MapController tombstones: one event per detached output (nothing for other plans).
    carry::publish_detached(ctx, kind.parts().name, &parent_shown, &plan);
    let (children_moving, children_failed) = if plan.writes.is_empty() {
        plan.children_not_current()
    } else {
        (Vec::new(), Vec::new())
    };
    let mut outcome = SyncOutcome {
        resync_after: plan.resync_after_seconds.map(Duration::from_secs_f64),
        rollout_pending: plan.rollout.as_ref().is_some_and(|r| r.in_progress),
        children_moving,
        children_failed,
        ..SyncOutcome::default()
    };
    if plan.writes.is_empty() && !S::CARRY_OUT_EMPTY {
        return Ok(outcome);
    }
    carry_out(kind, key, parent, &plan)
        .await?
        .fill(&mut outcome);
    Ok(outcome)
}

/// Steps 3 to 5 on an observed parent: the hook call (recorded), its answer as desired
/// objects, the pure plan.
async fn decide<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    parent: &Value,
    seen: &S::Seen,
) -> Result<SyncPlan, SyncError> {
    let answer = match kind.hook(parent, seen) {
        Some(HookCall {
            name,
            spec,
            request,
        }) => {
            let parts = kind.parts();
            let body = parts
                .caller
                .call(parts.ctx, name, spec, key, &request)
                .await?;
            kind.record(key, name, &request, &body);
            Some(kind.desired(key, parent, seen, (name, spec), &body).await?)
        }
        None => None,
    };
    Ok(kind.plan(key, parent, seen, answer.as_ref()))
}

/// What [`plan_only`] found for a key: the parent as read, what was observed, the plan.
pub struct Decision<S: SyncKind> {
    /// The parent (target).
    pub parent: Arc<Value>,
    /// What the observe step found.
    pub seen: S::Seen,
    /// The plan a sync would carry out.
    pub plan: SyncPlan,
}

/// Steps 1 to 5 of a sync of `key`, no `Planned` event, nothing carried out (the dry run):
/// the plan, or `None` when a sync would have nothing to do.
pub async fn plan_only<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    cx: SyncCx<'_>,
) -> Result<Option<Decision<S>>, Failed> {
    let Some((parent, seen)) = observed(kind, key, cx).await? else {
        return Ok(None);
    };
    match decide(kind, key, &parent, &seen).await {
        Ok(plan) => Ok(Some(Decision { parent, seen, plan })),
        Err(f) => Err((f, Some((*parent).clone()))),
    }
}

/// Steps 1 and 2 only: the parent and what its sync observes (children, claims, customize),
/// no sync hook call and no plan: what a sync reads (`dryrun --simulate` copies that).
pub async fn observe_only<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    cx: SyncCx<'_>,
) -> Result<(), Failed> {
    observed(kind, key, cx).await.map(|_| ())
}

/// Carry `plan` out for `key` ([`carry::carry_out`] on the kind's target and caches).
pub async fn carry_out<S: SyncKind>(
    kind: &S,
    key: &S::Key,
    parent: &Value,
    plan: &SyncPlan,
) -> Result<carry::Carried, SyncError> {
    let mut carried = carry::carry_out(
        kind.parts().ctx,
        kind.parts().memory,
        key,
        &kind.target(key, parent),
        plan,
        |t| kind.informer_for(t),
    )
    .await?;
    if S::DROP_OWN_ECHOES {
        kind.parts().memory.record_own_writes(
            key,
            carried.parent_rv.take(),
            &std::mem::take(&mut carried.own_writes),
        );
    }
    Ok(carried)
}

/// What a controller kind offers the runtime and the worker loop, beyond its sync steps; the
/// rest (queue, hooks, queueing parents by name, exchanges) is read from its [`Core`].
pub trait KindController: SyncKind {
    /// The kind, as events and hook call logs show it (`CompositeController`, ...).
    const KIND: &'static str;
    /// Sync a key once more after a sync that wrote (see [`Reconciler::confirm_writes`]).
    const CONFIRM_WRITES: bool = true;

    /// The parent (target) resources, `Kind.apiVersion`, as `ControllerStarted` shows them.
    fn parent_resources(&self) -> String;
    /// Every parent (target) in scope, with the key a sync of all of it is queued under.
    fn keyed_parents(&self) -> Vec<(Self::Key, Arc<Value>)>;
    /// Number of parents (targets) in scope.
    fn parent_count(&self) -> usize {
        self.keyed_parents().len()
    }
    /// Does `name` (`namespace/name` or `name`) name the parent `object` queued under `key`?
    fn is_named(key: &Self::Key, object: &Value, name: &str) -> bool {
        key.to_string() == name || crate::k8s::object::name(object) == Some(name)
    }
    /// Queue every parent.
    fn enqueue_all(&self, trigger: Trigger) {
        let core = self.core();
        routing::enqueue_each(&core.queue, &core.memory, self.keyed_parents(), &trigger);
    }
    /// Queue the parents whose uid's bucket is one of `buckets`; returns how many.
    fn enqueue_buckets(&self, buckets: &std::collections::BTreeSet<u8>, trigger: Trigger) -> usize {
        let core = self.core();
        let moved = self.keyed_parents().into_iter().filter(|(_, o)| {
            crate::k8s::object::uid(o).is_some_and(|u| buckets.contains(&crate::shard::bucket(u)))
        });
        routing::enqueue_each(&core.queue, &core.memory, moved, &trigger)
    }
    /// Queue the parents named `namespace/name` or `name`; returns how many.
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        let core = self.core();
        let named = self
            .keyed_parents()
            .into_iter()
            .filter(|(k, o)| Self::is_named(k, o, name));
        routing::enqueue_each(&core.queue, &core.memory, named, &trigger)
    }
    /// Forget cached hook answers (a hook was reloaded).
    fn forget_answers(&self) {}
    /// Every key's last exchange (for replay).
    fn exchanges(&self) -> Vec<LastExchange> {
        self.parts().memory.exchanges()
    }
    /// `resyncPeriodSeconds`: every parent is queued this often (none when unset or 0).
    fn resync_period_seconds(&self) -> Option<i32>;
    /// Spawn the event routers; they end with `stop`.
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken);
    /// One unit of work (by default: [`sync`]).
    fn work(&self, key: &Self::Key, cx: SyncCx<'_>) -> impl Future<Output = SyncOutcome> + Send {
        sync(self, key, cx)
    }
}

/// A started controller of kind `S`: its [`ControllerHandle`] and its [`Reconciler`].
pub struct Running<S> {
    ctl: Arc<S>,
    stop: CancellationToken,
}

/// Start a controller of kind `K` from its definition, once for all kinds: build it on shared
/// informers ([`source::watched`]: resolve its resources, waiting for missing ones, and wait
/// for their first lists), then [`launch`] it.
pub async fn launch_def<K: Built + KindController>(
    def: Controller<K::Spec>,
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    tracker: Arc<Tracker>,
) -> Result<start::Launched, start::StartError> {
    let ctl: Arc<K> = source::watched(def, Arc::clone(&ctx), &stop).await?;
    Ok(launch(ctl, ctx, stop, tracker))
}

/// Start routers (and the resync timer) for a started controller, queue every parent, announce
/// it; returns its handle and the worker loop to run until `stop`.
pub fn launch<S: KindController + source::Built>(
    ctl: Arc<S>,
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    tracker: Arc<Tracker>,
) -> start::Launched {
    ctl.spawn_routers(&stop);
    let resynced = Arc::clone(&ctl);
    routing::spawn_resync(ctl.resync_period_seconds(), &stop, move || {
        resynced.enqueue_all(Trigger::ResyncPeriod)
    });
    ctl.enqueue_all(Trigger::ParentAdded);
    let parent_resources = ctl.parent_resources();
    let running = Arc::new(Running {
        ctl,
        stop: stop.clone(),
    });
    start::launched(
        ctx,
        S::KIND,
        Arc::clone(&running) as Arc<dyn ControllerHandle>,
        parent_resources,
        running,
        stop,
        tracker,
    )
}

impl<S: KindController> Reconciler for Running<S> {
    type Key = S::Key;

    fn name(&self) -> &str {
        self.ctl.parts().name
    }

    fn queue(&self) -> &WorkQueue<S::Key, Trigger> {
        &self.ctl.core().queue
    }

    async fn sync(&self, key: &S::Key, triggers: &[Trigger]) -> SyncOutcome {
        self.ctl.parts().memory.clear_hot_loops_on(key, triggers);
        let cx = SyncCx {
            triggers,
            stop: &self.stop,
        };
        self.ctl.work(key, cx).await
    }

    fn confirm_writes(&self) -> bool {
        S::CONFIRM_WRITES
    }

    fn confirm_status_writes(&self) -> bool {
        self.ctl.parts().ctx.options.confirm_status_writes
    }

    fn shard_bucket(&self, key: &S::Key) -> Option<u8> {
        let parent = self.ctl.shard_parent(key)?;
        crate::k8s::object::uid(&parent).map(crate::shard::bucket)
    }

    fn drop_own_echoes(&self, key: &S::Key, triggers: Vec<Trigger>) -> Vec<Trigger> {
        if !S::DROP_OWN_ECHOES {
            return triggers;
        }
        let parent_rv = self.ctl.parent_resource_version(key);
        self.ctl.parts().memory.drop_own_echoes(
            key,
            triggers,
            parent_rv.as_deref(),
            |type_key, object| match self.ctl.informer_for(type_key) {
                None => Cached::Unknown,
                Some(inf) => match inf.meta(object) {
                    None => Cached::Absent,
                    Some(m) => Cached::At(m.resource_version),
                },
            },
        )
    }
}

impl<S: KindController + source::Built> Running<S> {
    /// `f` of every informer the controller reads, by resource name, sorted.
    fn per_informer<T>(
        &self,
        f: impl Fn(&crate::k8s::informer::Informer) -> T,
    ) -> Vec<(String, T)> {
        let mut by = std::collections::BTreeMap::new();
        for i in self
            .ctl
            .sources()
            .into_iter()
            .filter_map(source::Source::informer)
        {
            by.insert(crate::k8s::informer::resource_name(i.resource()), f(i));
        }
        by.into_iter().collect()
    }
}

impl<S: KindController + source::Built> ControllerHandle for Running<S> {
    fn name(&self) -> &str {
        self.ctl.parts().name
    }
    fn queue_stats(&self) -> QueueStats {
        self.ctl.core().queue.stats()
    }
    fn queue_metrics(&self) -> crate::runtime::queue::QueueMetrics {
        self.ctl.core().queue.metrics()
    }
    fn parent_count(&self) -> usize {
        self.ctl.parent_count()
    }
    fn enqueue_all(&self, trigger: Trigger) {
        self.ctl.enqueue_all(trigger);
    }
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        self.ctl.enqueue_named(name, trigger)
    }
    fn enqueue_buckets(&self, buckets: &std::collections::BTreeSet<u8>, trigger: Trigger) -> usize {
        self.ctl.enqueue_buckets(buckets, trigger)
    }
    fn hook_reloaded(&self) {
        self.ctl.forget_answers();
        self.ctl.enqueue_all(Trigger::HookReloaded);
    }
    fn hook_specs(&self) -> Vec<(&'static str, HookSpec)> {
        self.ctl.core().hooks.specs()
    }
    fn exchanges(&self) -> Vec<LastExchange> {
        self.ctl.exchanges()
    }
    fn cached_objects(&self) -> Vec<(String, usize)> {
        self.per_informer(crate::k8s::informer::Informer::len)
    }
    fn received_objects(&self) -> Vec<(String, u64)> {
        self.per_informer(crate::k8s::informer::Informer::received)
    }
    fn replay(
        &self,
        exchanges: Vec<LastExchange>,
    ) -> futures::future::BoxFuture<'_, Vec<EngineEvent>> {
        let ctl = &*self.ctl;
        let parts = ctl.parts();
        Box::pin(parts.caller.replay(parts.ctx, exchanges, |hook| {
            ctl.core().hooks.for_exchange(hook)
        }))
    }
}
