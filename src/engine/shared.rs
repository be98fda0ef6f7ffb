//! What every controller kind shares beyond the worker loop of [`super::controller`].
//!
//! - Starting: [`resolve_all`] (resources, waiting for missing ones), [`resolve_hook`] and
//!   [`SyncHooks`], [`child_type`], [`wait_caches`], [`StartError`]; [`launched`] announces a
//!   started controller and builds its worker loop.
//! - Event routing: [`for_each_event`] (informer events until stop), [`parent_event`] and
//!   [`child_event`] (what an event of a parent or of an owned object asks for), and
//!   [`sync_mode`] (is a parent ours to sync, and is it finalizing).
//! - Hook calls made for a sync ([`Caller::call`]: a failed call becomes a [`SyncFailure`], a
//!   429 a retry after Retry-After) and replays of the last exchanges to a reloaded hook
//!   ([`Caller::replay`]).
//! - Per-parent memory between syncs ([`SyncMemory`]: uid routing, the status we wrote, the
//!   last exchange) and the customize hook's cache and related-resource routing
//!   ([`RelatedCache`]).
//! - Carrying a plan out, or holding it while paused ([`carry_out`]), then waiting until the
//!   caches show the writes ([`await_expectations`]); reporting a failed sync ([`finish_sync`]).
//! - The resync-period timer ([`spawn_resync`]) and [`strip_volatile`].
//!
//! Nothing here knows a controller kind: helpers take the engine context, informers (through
//! `informer_for` look-ups by `Kind.apiVersion`), queues and callbacks, so CompositeController,
//! DecoratorController and MapController share them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Display;
use std::hash::Hash;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::apply;
use super::context::{EngineContext, HookSpec, call_hook};
use super::controller::{
    ControllerHandle, Exchange, Reconciler, SyncFailure, SyncOutcome, Tracker, run_workers,
};
use super::events::{EngineEvent, Trigger};
use super::execute::{ExecMode, Expectation, Target};
use super::hookapi::{self, Version};
use super::hotloop;
use super::plan::{ChildId, ChildType};
use super::planner::SyncPlan;
use super::queue::WorkQueue;
use super::related::{self, ResolvedRule};
use crate::hooks::CallInfo;
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::k8s::selector::LabelSelector;
use crate::spec::{Hook, ParentResourceRule, SyncControllerHooks, UpdateMethod};

/// How long to wait for the caches to show our own writes before finishing a sync.
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Turn a definition's hook `hooks.<name>` into something callable (`None` when the definition
/// has none); `base_dir` is where exec hooks run by default.
pub fn resolve_hook(
    ctx: &EngineContext,
    controller: &str,
    base_dir: Option<&Path>,
    name: &str,
    hook: Option<&Hook>,
) -> Result<Option<HookSpec>, StartError> {
    hook.map(|h| {
        HookSpec::from_spec(name, h, ctx.options.hook_base_url.as_deref(), base_dir)
            .map_err(|e| StartError::config(controller, e.to_string()))
    })
    .transpose()
}

/// The sync, finalize and customize hooks of a definition (CompositeController,
/// DecoratorController), resolved.
#[derive(Debug, Clone)]
pub struct SyncHooks {
    /// `hooks.sync` (required).
    pub sync: HookSpec,
    /// `hooks.finalize`.
    pub finalize: Option<HookSpec>,
    /// `hooks.customize`.
    pub customize: Option<HookSpec>,
}

impl SyncHooks {
    /// Resolve the definition's hooks (see [`resolve_hook`]); `sync` is required.
    pub fn resolve(
        ctx: &EngineContext,
        controller: &str,
        base_dir: Option<&Path>,
        hooks: &SyncControllerHooks,
    ) -> Result<Self, StartError> {
        let hook = |name: &str, h: &Option<Hook>| {
            resolve_hook(ctx, controller, base_dir, name, h.as_ref())
        };
        Ok(SyncHooks {
            sync: hook("sync", &hooks.sync)?
                .ok_or_else(|| StartError::config(controller, "hooks.sync is required"))?,
            finalize: hook("finalize", &hooks.finalize)?,
            customize: hook("customize", &hooks.customize)?,
        })
    }

    /// The hooks, by name (for [`ControllerHandle::hook_specs`]).
    pub fn specs(&self) -> Vec<(&'static str, HookSpec)> {
        let mut out = vec![("sync", self.sync.clone())];
        out.extend(self.finalize.clone().map(|h| ("finalize", h)));
        out.extend(self.customize.clone().map(|h| ("customize", h)));
        out
    }

    /// The hook a sync calls, with its name: finalize (when there is one) for a finalizing
    /// parent, sync otherwise.
    pub fn for_sync(&self, finalizing: bool) -> Option<(&'static str, &HookSpec)> {
        if finalizing {
            self.finalize.as_ref().map(|h| ("finalize", h))
        } else {
            Some(("sync", &self.sync))
        }
    }

    /// The hook that answered an exchange recorded under `hook` (`sync` or `finalize`).
    pub fn for_exchange(&self, hook: &str) -> Option<&HookSpec> {
        if hook == "finalize" {
            self.finalize.as_ref()
        } else {
            Some(&self.sync)
        }
    }

    /// What [`RelatedCache::related`] needs to ask this customize hook about a parent.
    pub fn customize<'a>(
        &'a self,
        ctx: &'a EngineContext,
        caller: &'a Caller,
        definition: &'a Value,
        parent_namespaced: bool,
    ) -> Customize<'a> {
        Customize {
            ctx,
            caller,
            hook: self.customize.as_ref(),
            definition,
            sync_version: self.sync.version,
            parent_namespaced,
        }
    }
}

/// A declared child (or attachment, or output) type of a resolved resource.
pub fn child_type(info: &ResourceInfo, method: UpdateMethod) -> ChildType {
    ChildType {
        key: info.key(),
        api_version: info.api_resource.api_version.clone(),
        kind: info.api_resource.kind.clone(),
        namespaced: info.namespaced,
        method,
    }
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
    let run = Box::pin(async move {
        run_workers(
            reconciler,
            ctx.options.workers,
            ctx.bus.clone(),
            tracker,
            stop,
            gate,
        )
        .await;
    });
    (handle, run)
}

/// Receive an informer's events until `stop` fires or the informer ends, calling `f` for each.
/// A receiver that fell behind gets [`InformerEvent::Relisted`]: anything may have changed.
pub async fn for_each_event(
    mut rx: tokio::sync::broadcast::Receiver<InformerEvent>,
    stop: CancellationToken,
    mut f: impl FnMut(InformerEvent),
) {
    loop {
        let ev = tokio::select! {
            e = rx.recv() => e,
            () = stop.cancelled() => return,
        };
        match ev {
            Ok(e) => f(e),
            Err(RecvError::Lagged(_)) => f(InformerEvent::Relisted),
            Err(RecvError::Closed) => return,
        }
    }
}

/// What an event of a parent (or target) informer asks of its controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParentAction<K> {
    /// Queue this key.
    Queue(K, Trigger),
    /// The parent is gone: drop the key from the queue and the caches (its [`SyncMemory`] is
    /// forgotten already).
    Forget(K),
    /// Anything may have changed (relist): queue every parent.
    QueueAll,
    /// Nothing to do.
    Nothing,
}

impl<K: Clone + Eq + Hash + Display + Send + Sync + 'static> ParentAction<K> {
    /// Do it: queue on `queue`, forget in `queue` and `related`, or `enqueue_all` with
    /// [`Trigger::ParentChanged`].
    pub fn apply(
        self,
        queue: &WorkQueue<K, Trigger>,
        related: &RelatedCache<K>,
        enqueue_all: impl FnOnce(Trigger),
    ) {
        match self {
            ParentAction::Queue(k, t) => queue.add(k, t),
            ParentAction::Forget(k) => {
                queue.remove(&k);
                related.forget(&k);
            }
            ParentAction::QueueAll => enqueue_all(Trigger::ParentChanged),
            ParentAction::Nothing => {}
        }
    }
}

/// Queue each `(key, object)` with `trigger`, remembering the objects' uids in `memory`;
/// returns how many were queued.
pub fn enqueue_each<K: Clone + Eq + Hash + Display + Send + Sync + 'static>(
    queue: &WorkQueue<K, Trigger>,
    memory: &SyncMemory<K>,
    objects: impl IntoIterator<Item = (K, Arc<Value>)>,
    trigger: &Trigger,
) -> usize {
    let mut n = 0;
    for (k, o) in objects {
        memory.remember_uid(&o, &k);
        queue.add(k, trigger.clone());
        n += 1;
    }
    n
}

/// Route one parent (target) informer event: queue a parent in scope (`key_in_scope` gives
/// its key, `None` when it is not ours to sync) when it appears, starts being deleted or
/// changes in a way that matters ([`SyncMemory::update_matters`]); forget a deleted one
/// (`key_of` gives the key of any object). Remembers uids in `memory` as it goes.
pub fn parent_event<K: Clone + Eq + Hash + Display>(
    ev: InformerEvent,
    key_in_scope: impl Fn(&Value) -> Option<K>,
    key_of: impl Fn(&Value) -> Option<K>,
    memory: &SyncMemory<K>,
    ignore_status_changes: bool,
) -> ParentAction<K> {
    match ev {
        InformerEvent::Added(p) => match key_in_scope(&p) {
            Some(k) => {
                memory.remember_uid(&p, &k);
                ParentAction::Queue(k, Trigger::ParentAdded)
            }
            None => ParentAction::Nothing,
        },
        InformerEvent::Updated { old, new } => {
            let Some(k) = key_in_scope(&new) else {
                return ParentAction::Nothing;
            };
            memory.remember_uid(&new, &k);
            if object::is_deleting(&new) && !object::is_deleting(&old) {
                ParentAction::Queue(k, Trigger::ParentDeleting)
            } else if memory.update_matters(&k, &old, &new, ignore_status_changes) {
                ParentAction::Queue(k, Trigger::ParentChanged)
            } else {
                ParentAction::Nothing
            }
        }
        InformerEvent::Deleted(p) => match key_of(&p) {
            Some(k) => {
                memory.forget(&k, &p);
                ParentAction::Forget(k)
            }
            None => ParentAction::Nothing,
        },
        InformerEvent::Relisted => ParentAction::QueueAll,
    }
}

/// What an event of an owned object (child, attachment) asks of its controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildAction {
    /// Queue the parent with this uid (its controller).
    Owner(String, Trigger),
    /// An object without a controller appeared or changed: parents whose selector matches it
    /// may adopt it.
    Orphan(Arc<Value>, Trigger),
    /// Anything may have changed (relist): queue every parent.
    All(Trigger),
}

/// Route one event of an owned object of `resource` (`Kind.apiVersion`): its controller, old
/// and new (a controller that lost it must hear of it), or, for an object without one that
/// appeared, lost its controller or changed labels, [`ChildAction::Orphan`]. An orphan that
/// disappears concerns nobody (ControllerRef proposal).
pub fn child_event(resource: &str, ev: InformerEvent) -> Vec<ChildAction> {
    let trig = |o: &Value, event: &str| Trigger::Child {
        resource: resource.to_string(),
        object: ObjectKey::of(o).map(|k| k.to_string()).unwrap_or_default(),
        event: event.to_string(),
    };
    match ev {
        InformerEvent::Added(o) => {
            let t = trig(&o, "added");
            match object::controller_ref(&o) {
                Some(r) => vec![ChildAction::Owner(r.uid, t)],
                None => vec![ChildAction::Orphan(o, t)],
            }
        }
        InformerEvent::Updated { old, new } => {
            let (or, nr) = (object::controller_ref(&old), object::controller_ref(&new));
            let t = trig(&new, "updated");
            let mut out = Vec::new();
            if let Some(r) = &or
                && nr.as_ref().is_none_or(|n| n.uid != r.uid)
            {
                out.push(ChildAction::Owner(r.uid.clone(), t.clone()));
            }
            match nr {
                Some(r) => out.push(ChildAction::Owner(r.uid, t)),
                None if or.is_some() || object::labels(&old) != object::labels(&new) => {
                    out.push(ChildAction::Orphan(new, t));
                }
                None => {}
            }
            out
        }
        InformerEvent::Deleted(o) => object::controller_ref(&o)
            .map(|r| ChildAction::Owner(r.uid, trig(&o, "deleted")))
            .into_iter()
            .collect(),
        InformerEvent::Relisted => vec![ChildAction::All(Trigger::Child {
            resource: resource.to_string(),
            object: "*".into(),
            event: "relisted".into(),
        })],
    }
}

/// Is `parent` ours to sync, and how: `None` when it is not selected and lacks our
/// `finalizer`, or is being deleted without it (the garbage collector takes its children);
/// otherwise `Some(finalizing)`: deleted, or no longer selected (finalized, then released).
pub fn sync_mode(parent: &Value, finalizer: &str, selected: bool) -> Option<bool> {
    let deleting = object::is_deleting(parent);
    let has_finalizer = object::finalizers(parent).contains(&finalizer);
    if (!selected || deleting) && !has_finalizer {
        return None;
    }
    Some(deleting || !selected)
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

/// The definition's `spec.parentResource.labelSelector`, parsed (`None`: every parent).
pub fn parent_selector(
    controller: &str,
    rule: &ParentResourceRule,
) -> Result<Option<LabelSelector>, StartError> {
    rule.label_selector
        .as_ref()
        .map(LabelSelector::from_label_selector)
        .transpose()
        .map_err(|e| {
            StartError::config(
                controller,
                format!("spec.parentResource.labelSelector: {e}"),
            )
        })
}

/// The `-n` namespace to list objects of a resource in (`None`: every namespace; a
/// cluster-scoped resource ignores `-n`).
pub fn scope_namespace(ctx: &EngineContext, namespaced: bool) -> Option<&str> {
    if namespaced {
        ctx.options.namespace.as_deref()
    } else {
        None
    }
}

/// Is `obj` (of a resource that is `namespaced` or not) inside the `-n` namespace, if any?
pub fn in_namespace_scope(ctx: &EngineContext, namespaced: bool, obj: &Value) -> bool {
    scope_namespace(ctx, namespaced).is_none_or(|ns| object::namespace(obj) == Some(ns))
}

/// The object without the fields that change on every write (and, if `drop_status`, status).
pub fn strip_volatile(v: &Value, drop_status: bool) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    if drop_status && let Some(m) = v.as_object_mut() {
        m.remove("status");
    }
    v
}

/// Who calls hooks: the controller kind and name, as hook call logs and events show them.
#[derive(Debug, Clone)]
pub struct Caller {
    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub kind: &'static str,
    /// The definition's name.
    pub controller: String,
    /// Keys are `<parent> <map key>` (MapController): the call record carries the map key.
    pub map_keys: bool,
}

impl Caller {
    /// The caller for controller `controller` of kind `kind`.
    pub fn new(kind: &'static str, controller: &str) -> Self {
        Caller {
            kind,
            controller: controller.to_string(),
            map_keys: false,
        }
    }

    /// A caller whose keys are `<parent> <map key>` (MapController work keys).
    pub fn with_map_keys(mut self) -> Self {
        self.map_keys = true;
        self
    }

    /// The call record of hook `hook` for `key` (a parent, target or map key, as displayed).
    pub fn info(&self, hook: &str, key: &(dyn Display + Sync)) -> CallInfo {
        let parent = key.to_string();
        let map_key = if self.map_keys {
            parent.split_once(' ').map(|(_, k)| k.to_string())
        } else {
            None
        };
        CallInfo {
            hook: hook.to_string(),
            controller_kind: self.kind.to_string(),
            controller: self.controller.clone(),
            parent,
            map_key,
        }
    }

    /// Call hook `hook` for a sync of `key`: the answer, or a [`SyncFailure`] (retried after
    /// Retry-After, or 500ms, when the hook answered 429).
    pub async fn call(
        &self,
        ctx: &EngineContext,
        hook: &str,
        spec: &HookSpec,
        key: &(dyn Display + Sync),
        body: &Value,
    ) -> Result<Value, SyncFailure> {
        let call = call_hook(ctx, spec, self.info(hook, key), body).await;
        call.result.map_err(|e| SyncFailure {
            retry_after: e
                .is_rate_limited()
                .then(|| e.retry_after().unwrap_or(Duration::from_millis(500))),
            message: format!("{hook} hook failed: {e}"),
        })
    }

    /// Send each exchange's request again (to a reloaded hook), `--workers` at a time, and
    /// compare the answers; publishes one [`EngineEvent::Replay`] per exchange whose hook
    /// `spec_for` knows, and returns them.
    pub async fn replay<'h>(
        &self,
        ctx: &EngineContext,
        exchanges: Vec<Exchange>,
        spec_for: impl Fn(&str) -> Option<&'h HookSpec>,
    ) -> Vec<EngineEvent> {
        use futures::StreamExt;
        let spec_for = &spec_for;
        futures::stream::iter(exchanges)
            .map(|(key, (hook, request, before))| async move {
                let spec = spec_for(&hook)?;
                let call = call_hook(ctx, spec, self.info(&hook, &key), &request).await;
                let (changes, error) = match call.result {
                    Ok(after) => (super::replay::response_changes(&before, &after), None),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                };
                let ev = EngineEvent::Replay {
                    controller: self.controller.clone(),
                    parent: key,
                    hook,
                    changes,
                    error,
                };
                ctx.bus.publish(ev.clone());
                Some(ev)
            })
            .buffer_unordered(ctx.options.workers.max(1))
            .filter_map(|e| async move { e })
            .collect()
            .await
    }
}

/// What a controller remembers per key between syncs: which key a uid belongs to (routing
/// events of owned objects), the status it last wrote (to ignore its echo) and the last
/// sync/finalize exchange (replay, TUI).
#[derive(Debug)]
pub struct SyncMemory<K> {
    inner: Mutex<Memory<K>>,
}

#[derive(Debug)]
struct Memory<K> {
    uid_to_key: HashMap<String, K>,
    last_status: HashMap<K, Value>,
    last_exchange: HashMap<K, (String, Value, Value)>,
    hot_loops: HashMap<K, hotloop::Guard>,
}

impl<K> Default for SyncMemory<K> {
    fn default() -> Self {
        SyncMemory {
            inner: Mutex::new(Memory {
                uid_to_key: HashMap::new(),
                last_status: HashMap::new(),
                last_exchange: HashMap::new(),
                hot_loops: HashMap::new(),
            }),
        }
    }
}

impl<K: Clone + Eq + Hash + Display> SyncMemory<K> {
    /// Remember that `obj` (by its uid) is `key`.
    pub fn remember_uid(&self, obj: &Value, key: &K) {
        if let (Some(uid), Ok(mut m)) = (object::uid(obj), self.inner.lock()) {
            m.uid_to_key.insert(uid.to_string(), key.clone());
        }
    }

    /// The key of the object with this uid, when it was remembered.
    pub fn key_of_uid(&self, uid: &str) -> Option<K> {
        self.inner
            .lock()
            .ok()
            .and_then(|m| m.uid_to_key.get(uid).cloned())
    }

    /// Remember the status just written for `key`.
    pub fn record_status(&self, key: &K, status: Value) {
        if let Ok(mut m) = self.inner.lock() {
            m.last_status.insert(key.clone(), status);
        }
    }

    /// Should an update of `key` from `old` to `new` trigger a sync? Yes when anything but
    /// status (and resourceVersion, managedFields) changed; for a status-only change, no when
    /// `ignore_status_changes` or when the new status is the one we last wrote.
    pub fn update_matters(
        &self,
        key: &K,
        old: &Value,
        new: &Value,
        ignore_status_changes: bool,
    ) -> bool {
        if strip_volatile(old, true) != strip_volatile(new, true) {
            return true;
        }
        if ignore_status_changes {
            return false;
        }
        let ours = self
            .inner
            .lock()
            .ok()
            .and_then(|m| m.last_status.get(key).cloned());
        match (ours, new.get("status")) {
            (Some(ours), Some(st)) => !super::apply::values_equal(&ours, st),
            _ => true,
        }
    }

    /// Remember the last sync/finalize exchange of `key`.
    pub fn record_exchange(&self, key: &K, hook: &str, request: Value, response: Value) {
        if let Ok(mut m) = self.inner.lock() {
            m.last_exchange
                .insert(key.clone(), (hook.to_string(), request, response));
        }
    }

    /// The last sync/finalize exchange of `key`: (hook name, request, response).
    pub fn last_exchange(&self, key: &K) -> Option<(String, Value, Value)> {
        self.inner
            .lock()
            .ok()
            .and_then(|m| m.last_exchange.get(key).cloned())
    }

    /// Every key's last exchange, keyed as displayed.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.inner
            .lock()
            .map(|m| {
                m.last_exchange
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forget `key` (its object `obj` was deleted).
    pub fn forget(&self, key: &K, obj: &Value) {
        if let Ok(mut m) = self.inner.lock() {
            if let Some(uid) = object::uid(obj) {
                m.uid_to_key.remove(uid);
            }
            m.last_status.remove(key);
            m.last_exchange.remove(key);
            m.hot_loops.remove(key);
        }
    }

    /// A sync asked for by a hook reload, a user or `resyncPeriodSeconds` (in `triggers`)
    /// clears the hot-loop guard of `key`, so its held fields are written again.
    pub fn clear_hot_loops_on(&self, key: &K, triggers: &[Trigger]) {
        let clears = triggers.iter().any(|t| {
            matches!(
                t,
                Trigger::HookReloaded | Trigger::Manual | Trigger::ResyncPeriod
            )
        });
        if clears && let Ok(mut m) = self.inner.lock() {
            m.hot_loops.remove(key);
        }
    }

    /// The child fields the hot-loop guard holds for `key`, for the next plan.
    pub fn held_fields(&self, key: &K) -> BTreeMap<ChildId, Vec<apply::HeldField>> {
        self.inner
            .lock()
            .ok()
            .and_then(|m| m.hot_loops.get(key).map(hotloop::Guard::held_fields))
            .unwrap_or_default()
    }

    /// Account for an executed plan in the hot-loop guard of `key`: returns the fields held
    /// from now on and every field held (newly or not), as messages.
    fn record_rewrites(
        &self,
        key: &K,
        plan: &super::plan::Plan,
        updated: &[ChildId],
    ) -> (Vec<hotloop::HotLoop>, Vec<String>) {
        let Ok(mut m) = self.inner.lock() else {
            return (Vec::new(), Vec::new());
        };
        let guard = m.hot_loops.entry(key.clone()).or_default();
        let tripped = guard.record(plan, updated);
        let held = guard.held().iter().map(hotloop::HotLoop::message).collect();
        if guard.is_empty() {
            m.hot_loops.remove(key);
        }
        (tripped, held)
    }
}

/// Everything [`RelatedCache::related`] needs to ask the customize hook about one parent.
pub struct Customize<'a> {
    /// The engine.
    pub ctx: &'a EngineContext,
    /// Who calls.
    pub caller: &'a Caller,
    /// The customize hook (`None`: no related objects).
    pub hook: Option<&'a HookSpec>,
    /// The controller definition as written (sent in the request).
    pub definition: &'a Value,
    /// The sync hook's version (v1 hooks of namespaced parents only see their namespace).
    pub sync_version: Version,
    /// Whether the parent's resource is namespaced.
    pub parent_namespaced: bool,
}

/// Customize results for one key, valid for one uid and generation.
struct CustomizeEntry {
    uid: String,
    generation: i64,
    rules: Vec<ResolvedRule>,
}

struct RelatedState<K> {
    /// Customize results per key.
    customize: HashMap<K, CustomizeEntry>,
    /// Keys with related rules on a resource (`Kind.apiVersion`).
    parents: HashMap<String, HashSet<K>>,
    /// Related resources whose events are routed already.
    watched: HashSet<String>,
}

/// Queues a key with a trigger.
type Enqueue<K> = Arc<dyn Fn(&K, Trigger) + Send + Sync>;

/// The customize hook's answers per key (re-asked when the parent's uid or generation
/// changes) and the routing of related objects' events to the keys whose rules match them.
pub struct RelatedCache<K> {
    state: Arc<Mutex<RelatedState<K>>>,
    enqueue: Enqueue<K>,
}

impl<K: Clone + Eq + Hash + Display + Send + Sync + 'static> RelatedCache<K> {
    /// An empty cache; a change to a related object queues the keys it matters to with
    /// `enqueue`.
    pub fn new(enqueue: impl Fn(&K, Trigger) + Send + Sync + 'static) -> Self {
        RelatedCache {
            state: Arc::new(Mutex::new(RelatedState {
                customize: HashMap::new(),
                parents: HashMap::new(),
                watched: HashSet::new(),
            })),
            enqueue: Arc::new(enqueue),
        }
    }

    /// An empty cache that queues keys on `queue`.
    pub fn for_queue(queue: &WorkQueue<K, Trigger>) -> Self {
        let queue = queue.clone();
        Self::new(move |k: &K, t| queue.add(k.clone(), t))
    }

    /// Forget every customize answer (the hook was reloaded).
    pub fn clear(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.customize.clear();
        }
    }

    /// Forget `key` (its parent was deleted).
    pub fn forget(&self, key: &K) {
        if let Ok(mut st) = self.state.lock() {
            st.customize.remove(key);
            for set in st.parents.values_mut() {
                set.remove(key);
            }
        }
    }

    /// The related objects of `parent` (synced as `key`) per rule: from the cached customize
    /// answer, or by asking the hook (and starting to route the events of resources not
    /// watched yet, until `stop`).
    pub async fn related(
        &self,
        c: &Customize<'_>,
        parent: &Value,
        key: &K,
        stop: &CancellationToken,
    ) -> Result<Vec<(ResolvedRule, Vec<Arc<Value>>)>, SyncFailure> {
        let Some(spec) = c.hook else {
            return Ok(Vec::new());
        };
        let fail = |message: String| SyncFailure {
            message,
            retry_after: None,
        };
        let uid = object::uid(parent).unwrap_or_default().to_string();
        let generation = object::generation(parent);
        let cached = self.state.lock().ok().and_then(|s| {
            s.customize
                .get(key)
                .filter(|e| e.uid == uid && e.generation == generation)
                .map(|e| e.rules.clone())
        });
        let rules = match cached {
            Some(r) => r,
            None => {
                let body = hookapi::customize_request(c.definition, parent);
                let resp = c.caller.call(c.ctx, "customize", spec, key, &body).await?;
                let rules = hookapi::decode_customize(spec.version, &resp)
                    .map_err(|e| fail(e.to_string()))?;
                let mut resolved = Vec::new();
                for r in &rules {
                    let rr =
                        related::resolve(c.ctx, r, parent, c.parent_namespaced, c.sync_version)
                            .await
                            .map_err(|m| fail(format!("customize hook: {m}")))?;
                    resolved.push(rr);
                }
                for rr in &resolved {
                    self.watch(rr, stop);
                }
                if let Ok(mut st) = self.state.lock() {
                    for set in st.parents.values_mut() {
                        set.remove(key);
                    }
                    for rr in &resolved {
                        st.parents
                            .entry(rr.info.key())
                            .or_default()
                            .insert(key.clone());
                    }
                    st.customize.insert(
                        key.clone(),
                        CustomizeEntry {
                            uid,
                            generation,
                            rules: resolved.clone(),
                        },
                    );
                }
                resolved
            }
        };
        let mut out = Vec::new();
        for r in rules {
            r.informer
                .wait_synced(c.ctx.options.sync_timeout)
                .await
                .map_err(|e| fail(e.to_string()))?;
            let objs = r.select();
            out.push((r, objs));
        }
        Ok(out)
    }

    /// Start routing events of a related resource (once per resource).
    fn watch(&self, rule: &ResolvedRule, stop: &CancellationToken) {
        let resource = rule.info.key();
        let first = self
            .state
            .lock()
            .map(|mut s| s.watched.insert(resource.clone()))
            .unwrap_or(false);
        if !first {
            return;
        }
        let state = Arc::clone(&self.state);
        let enqueue = Arc::clone(&self.enqueue);
        let rx = rule.informer.subscribe();
        tokio::spawn(for_each_event(rx, stop.clone(), move |ev| {
            let objs: Vec<Arc<Value>> = match ev {
                InformerEvent::Added(o) | InformerEvent::Deleted(o) => vec![o],
                // Both sides: a relation that ends must still reach the parent it matched.
                InformerEvent::Updated { old, new } => vec![old, new],
                InformerEvent::Relisted => {
                    let keys: Vec<K> = state
                        .lock()
                        .map(|s| {
                            s.parents
                                .get(&resource)
                                .into_iter()
                                .flatten()
                                .cloned()
                                .collect()
                        })
                        .unwrap_or_default();
                    for k in &keys {
                        enqueue(
                            k,
                            Trigger::Related {
                                resource: resource.clone(),
                                object: "*".into(),
                            },
                        );
                    }
                    return;
                }
            };
            route_related(&state, &*enqueue, &resource, &objs);
        }));
    }
}

/// Queue the keys with a rule on `resource` that matches one of `objs`.
fn route_related<K: Clone + Eq + Hash>(
    state: &Mutex<RelatedState<K>>,
    enqueue: &(dyn Fn(&K, Trigger) + Send + Sync),
    resource: &str,
    objs: &[Arc<Value>],
) {
    let hits: Vec<K> = {
        let Ok(st) = state.lock() else { return };
        let Some(keys) = st.parents.get(resource) else {
            return;
        };
        keys.iter()
            .filter(|k| {
                st.customize.get(*k).is_some_and(|entry| {
                    entry
                        .rules
                        .iter()
                        .filter(|r| r.info.key() == resource)
                        .any(|r| objs.iter().any(|o| r.matches(o)))
                })
            })
            .cloned()
            .collect()
    };
    let object = objs
        .last()
        .and_then(|o| ObjectKey::of(o))
        .map(|k| k.to_string())
        .unwrap_or_default();
    for k in &hits {
        enqueue(
            k,
            Trigger::Related {
                resource: resource.to_string(),
                object: object.clone(),
            },
        );
    }
}

/// Carry `sync_plan` out for the parent `target` (synced as `key`), remember the status
/// written, and wait until the caches (`informer_for`, by `Kind.apiVersion`) show the writes.
/// While the engine is paused, publish the plan as [`EngineEvent::PlanHeld`] instead and write
/// nothing ([`ExecMode::Paused`]). Returns the number of writes, or every failed write's
/// message joined with `; `.
pub async fn carry_out<'i, K: Clone + Eq + Hash + Display>(
    ctx: &EngineContext,
    memory: &SyncMemory<K>,
    key: &K,
    target: &Target<'_>,
    sync_plan: &SyncPlan,
    informer_for: impl Fn(&str) -> Option<&'i Arc<Informer>>,
) -> Result<Carried, String> {
    let plan = &sync_plan.writes;
    if let Some(why) = ctx.writes_held() {
        // The API server went away mid-sync: write nothing; the sync is retried once it is back.
        return Err(format!("not written: {why}"));
    }
    if ctx.is_paused() {
        // Paused: show what would be written, write nothing, and do not wait for it.
        let report = ctx.executor.execute(target, plan, ExecMode::Paused).await;
        ctx.bus.publish(EngineEvent::PlanHeld {
            controller: target.controller.to_string(),
            parent: key.to_string(),
            actions: report.planned,
        });
        return Ok(Carried::default());
    }
    let report = ctx.executor.execute(target, plan, ExecMode::Apply).await;
    if let Some(st) = report.status_written {
        memory.record_status(key, st);
    }
    let (tripped, hot_loops) = memory.record_rewrites(key, plan, &report.updated);
    for h in &tripped {
        let message = h.message();
        ctx.bus.publish(EngineEvent::HotLoop {
            controller: target.controller.to_string(),
            parent: key.to_string(),
            resource: h.child.type_key.clone(),
            object: h.child.object(),
            path: h.path.clone(),
            desired: h.desired.clone(),
            server: h.server.clone(),
            cause: h.cause.clone(),
            message: message.clone(),
        });
        ctx.recorder.hot_loop(target.parent, &message).await;
    }
    await_expectations(&report.expectations, informer_for).await;
    if report.errors.is_empty() {
        Ok(Carried {
            writes: report.writes,
            noops: report.child_noops,
            hot_loops,
        })
    } else {
        Err(report.errors.join("; "))
    }
}

/// What [`carry_out`] did.
#[derive(Debug, Default)]
pub struct Carried {
    /// Writes made.
    pub writes: usize,
    /// Child updates the server answered as no-ops.
    pub noops: usize,
    /// Fields the hot-loop guard holds, as messages.
    pub hot_loops: Vec<String>,
}

impl Carried {
    /// Copy the counts into a sync's outcome.
    pub fn fill(self, outcome: &mut SyncOutcome) {
        outcome.writes = self.writes;
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
                    move |o| o.is_some_and(|o| object::resource_version(o) != previous.as_deref()),
                    EXPECTATION_TIMEOUT,
                )
                .await
            }
            Expectation::Gone { .. } => {
                inf.wait_until(
                    key,
                    |o| o.is_none_or(object::is_deleting),
                    EXPECTATION_TIMEOUT,
                )
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
    result: Result<SyncOutcome, (SyncFailure, Option<Value>)>,
) -> SyncOutcome {
    match result {
        Ok(out) => out,
        Err((failure, parent)) => {
            if failure.retry_after.is_none()
                && let Some(p) = parent
            {
                ctx.recorder.sync_error(&p, &failure.message).await;
            }
            SyncOutcome {
                error: Some(failure),
                ..SyncOutcome::default()
            }
        }
    }
}

/// Call `tick` every `period_seconds` (`resyncPeriodSeconds`; nothing when absent or not
/// positive), first one period from now, until `stop`.
pub fn spawn_resync(
    period_seconds: Option<i32>,
    stop: &CancellationToken,
    tick: impl Fn() + Send + 'static,
) {
    let Some(secs) = period_seconds.filter(|s| *s > 0) else {
        return;
    };
    let stop = stop.clone();
    tokio::spawn(async move {
        let period = Duration::from_secs(u64::from(secs.unsigned_abs()));
        let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tokio::select! {
                _ = timer.tick() => tick(),
                () = stop.cancelled() => break,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owned(name: &str, owner: Option<&str>, labels: Value) -> Arc<Value> {
        let refs: Vec<Value> = owner
            .map(|u| {
                json!({"apiVersion": "v1", "kind": "P", "name": "p", "uid": u,
                "controller": true})
            })
            .into_iter()
            .collect();
        Arc::new(
            json!({"metadata": {"name": name, "namespace": "ns", "labels": labels,
            "ownerReferences": refs}}),
        )
    }

    fn trig(event: &str) -> Trigger {
        Trigger::Child {
            resource: "Pod.v1".into(),
            object: "ns/c".into(),
            event: event.into(),
        }
    }

    #[test]
    fn child_events_reach_old_and_new_controllers_and_orphan_matchers() {
        let a = owned("c", Some("a"), json!({}));
        let b = owned("c", Some("b"), json!({}));
        let orphan = owned("c", None, json!({"x": "1"}));
        assert_eq!(
            child_event("Pod.v1", InformerEvent::Added(Arc::clone(&a))),
            vec![ChildAction::Owner("a".into(), trig("added"))]
        );
        assert_eq!(
            child_event(
                "Pod.v1",
                InformerEvent::Updated {
                    old: Arc::clone(&a),
                    new: Arc::clone(&b)
                }
            ),
            vec![
                ChildAction::Owner("a".into(), trig("updated")),
                ChildAction::Owner("b".into(), trig("updated"))
            ]
        );
        // Released: the old controller hears of it, and so do parents that may adopt it.
        assert_eq!(
            child_event(
                "Pod.v1",
                InformerEvent::Updated {
                    old: Arc::clone(&a),
                    new: Arc::clone(&orphan)
                }
            ),
            vec![
                ChildAction::Owner("a".into(), trig("updated")),
                ChildAction::Orphan(Arc::clone(&orphan), trig("updated"))
            ]
        );
        // An orphan whose labels did not change concerns nobody new.
        assert_eq!(
            child_event(
                "Pod.v1",
                InformerEvent::Updated {
                    old: Arc::clone(&orphan),
                    new: Arc::clone(&orphan)
                }
            ),
            vec![]
        );
        assert_eq!(
            child_event("Pod.v1", InformerEvent::Deleted(orphan)),
            vec![]
        );
        assert_eq!(
            child_event("Pod.v1", InformerEvent::Deleted(a)),
            vec![ChildAction::Owner("a".into(), trig("deleted"))]
        );
    }

    #[test]
    fn parent_events_queue_what_matters_and_forget_the_deleted() {
        let mem: SyncMemory<String> = SyncMemory::default();
        let key = |o: &Value| object::name(o).map(str::to_string);
        let in_scope = |o: &Value| key(o).filter(|_| object::label(o, "in") == Some("yes"));
        let p = Arc::new(
            json!({"metadata": {"name": "p", "uid": "u", "labels": {"in": "yes"},
            "resourceVersion": "1"}}),
        );
        let out = Arc::new(json!({"metadata": {"name": "o", "uid": "v"}}));
        let ev = |e| parent_event(e, in_scope, key, &mem, false);
        assert_eq!(
            ev(InformerEvent::Added(Arc::clone(&p))),
            ParentAction::Queue("p".into(), Trigger::ParentAdded)
        );
        assert_eq!(mem.key_of_uid("u").as_deref(), Some("p"));
        assert_eq!(
            ev(InformerEvent::Added(Arc::clone(&out))),
            ParentAction::Nothing
        );
        let mut echo = (*p).clone();
        echo["metadata"]["resourceVersion"] = json!("2");
        echo["status"] = json!({"n": 1});
        mem.record_status(&"p".to_string(), json!({"n": 1}));
        assert_eq!(
            ev(InformerEvent::Updated {
                old: Arc::clone(&p),
                new: Arc::new(echo.clone())
            }),
            ParentAction::Nothing,
            "the echo of our own status write"
        );
        let mut deleting = echo;
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            ev(InformerEvent::Updated {
                old: Arc::clone(&p),
                new: Arc::new(deleting)
            }),
            ParentAction::Queue("p".into(), Trigger::ParentDeleting)
        );
        assert_eq!(
            ev(InformerEvent::Deleted(Arc::clone(&p))),
            ParentAction::Forget("p".into())
        );
        assert_eq!(mem.key_of_uid("u"), None);
        assert_eq!(ev(InformerEvent::Relisted), ParentAction::QueueAll);
    }

    #[test]
    fn sync_mode_follows_selection_deletion_and_our_finalizer() {
        let f = "metacontroller.io/compositecontroller-c";
        let plain = json!({"metadata": {"name": "p"}});
        let held = json!({"metadata": {"name": "p", "finalizers": [f]}});
        let mut deleted = plain.clone();
        deleted["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut deleted_held = held.clone();
        deleted_held["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(sync_mode(&plain, f, true), Some(false));
        assert_eq!(sync_mode(&plain, f, false), None);
        assert_eq!(
            sync_mode(&held, f, false),
            Some(true),
            "deselected: finalize"
        );
        assert_eq!(sync_mode(&deleted, f, true), None, "the GC's business");
        assert_eq!(sync_mode(&deleted_held, f, true), Some(true));
        assert_eq!(sync_mode(&deleted_held, f, false), Some(true));
    }

    #[test]
    fn strip_volatile_drops_what_every_write_changes() {
        let v = json!({"metadata": {"name": "a", "resourceVersion": "3", "managedFields": []},
            "spec": {"x": 1}, "status": {"y": 2}});
        assert_eq!(
            strip_volatile(&v, false),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": 2}})
        );
        assert_eq!(
            strip_volatile(&v, true),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}})
        );
    }

    #[test]
    fn status_echo_of_our_own_write_does_not_matter() {
        let mem: SyncMemory<String> = SyncMemory::default();
        let k = "default/p".to_string();
        let old = json!({"metadata": {"name": "p", "resourceVersion": "1"}, "status": {"n": 1}});
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!("2");
        new["status"] = json!({"n": 2});
        // Unknown status: it matters (someone else may have written it).
        assert!(mem.update_matters(&k, &old, &new, false));
        assert!(!mem.update_matters(&k, &old, &new, true));
        mem.record_status(&k, json!({"n": 2.0}));
        assert!(!mem.update_matters(&k, &old, &new, false));
        // A spec change always matters.
        new["spec"] = json!({"x": 1});
        assert!(mem.update_matters(&k, &old, &new, true));
    }

    #[test]
    fn memory_routes_uids_and_forgets_deleted_keys() {
        let mem: SyncMemory<String> = SyncMemory::default();
        let obj = json!({"metadata": {"name": "p", "uid": "u1"}});
        let k = "default/p".to_string();
        mem.remember_uid(&obj, &k);
        mem.record_exchange(&k, "sync", json!({"req": 1}), json!({"resp": 1}));
        assert_eq!(mem.key_of_uid("u1"), Some(k.clone()));
        assert_eq!(mem.exchanges().len(), 1);
        assert_eq!(mem.last_exchange(&k).map(|e| e.0), Some("sync".into()));
        mem.forget(&k, &obj);
        assert_eq!(mem.key_of_uid("u1"), None);
        assert!(mem.exchanges().is_empty());
    }

    #[test]
    fn call_records_carry_the_map_key_of_map_controller_keys() {
        let plain = Caller::new("CompositeController", "c").info("sync", &"ns/p");
        assert_eq!((plain.parent.as_str(), plain.map_key), ("ns/p", None));
        let map = Caller::new("MapController", "m")
            .with_map_keys()
            .info("map", &"ns/p configmap-a-0123");
        assert_eq!(map.parent, "ns/p configmap-a-0123");
        assert_eq!(map.map_key.as_deref(), Some("configmap-a-0123"));
        assert_eq!(map.parent_only(), "ns/p");
        // A parent-level key of a map controller has no map key.
        let whole = Caller::new("MapController", "m")
            .with_map_keys()
            .info("map", &"ns/p");
        assert_eq!(whole.map_key, None);
    }
}
