//! CompositeController: one parent resource, its children, Metacontroller's semantics.
//!
//! [`Composite::start`] resolves the definition's resources (waiting for ones that do not exist
//! yet), starts the shared informers, routes their events to parent keys through indexes, and
//! runs the shared controller loop. [`Composite::sync`] is one reconcile of one parent:
//! claim children -> customize -> sync/finalize hook (once per live revision during a rolling
//! update) -> pure plan -> execute -> wait until the caches show the writes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::context::{EngineContext, HookSpec, call_hook};
use super::controller::{
    ControllerHandle, Exchange, Reconciler, SyncFailure, SyncOutcome, Tracker, run_workers,
};
use super::events::{EngineEvent, Trigger};
use super::execute::{Expectation, Target};
use super::hookapi::{self, RelatedRule, Version};
use super::ownership::{self, CONTROLLER_UID_LABEL};
use super::plan::{self, ChildId, ChildType, ChildrenInput, Plan};
use super::queue::{Backoff, WorkQueue};
use super::related::{self, ResolvedRule};
use super::rollout::{self, Revision, RevisionWrite};
use crate::hooks::CallInfo;
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::k8s::selector::LabelSelector;
use crate::spec::{CompositeControllerSpec, Controller, StatusConditionCheck};

/// How long to wait for the caches to show our own writes before finishing a sync.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(10);

/// A declared child resource with its cache.
struct ChildSlot {
    informer: Arc<Informer>,
    ty: ChildType,
    checks: Vec<StatusConditionCheck>,
}

/// Customize results for one parent, valid for one generation.
struct CustomizeEntry {
    uid: String,
    generation: i64,
    rules: Vec<ResolvedRule>,
}

#[derive(Default)]
struct State {
    /// Parent uid -> key (routing of owned children).
    uid_to_key: HashMap<String, ObjectKey>,
    /// Customize results per parent.
    customize: HashMap<ObjectKey, CustomizeEntry>,
    /// Parents with related rules on a resource (`Kind.apiVersion`).
    related_parents: HashMap<String, HashSet<ObjectKey>>,
    /// Related resources whose events we already route.
    related_watched: HashSet<String>,
    /// The status we last wrote per parent (to ignore its echo).
    last_status: HashMap<ObjectKey, Value>,
    /// Last hook request/response per parent (replay, TUI).
    /// The last sync/finalize exchange per parent: (hook name, request, response).
    last_exchange: HashMap<ObjectKey, (String, Value, Value)>,
}

/// A running CompositeController.
pub struct Composite {
    name: String,
    def: Controller<CompositeControllerSpec>,
    ctx: Arc<EngineContext>,
    parent: ResourceInfo,
    parent_informer: Arc<Informer>,
    parent_selector: Option<LabelSelector>,
    children: Vec<ChildSlot>,
    types: BTreeMap<String, ResourceInfo>,
    revisions: Option<(ResourceInfo, Arc<Informer>)>,
    sync_hook: HookSpec,
    finalize_hook: Option<HookSpec>,
    customize_hook: Option<HookSpec>,
    finalizer: String,
    queue: WorkQueue<ObjectKey, Trigger>,
    state: Mutex<State>,
}

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

fn type_key(info: &ResourceInfo) -> String {
    info.key()
}

impl Composite {
    /// Resolve resources (retrying until they exist), start informers and build the
    /// controller. Returns when it is ready to run.
    pub async fn start(
        def: Controller<CompositeControllerSpec>,
        ctx: Arc<EngineContext>,
        stop: &CancellationToken,
    ) -> Result<Arc<Self>, StartError> {
        let name = def.name.clone();
        let cfg = |message: String| StartError::Config {
            controller: name.clone(),
            message,
        };
        let base_url = ctx.options.hook_base_url.clone();
        let base_dir = def.base_dir().map(std::path::Path::to_path_buf);
        let hook =
            |n: &str, h: &Option<crate::spec::Hook>| -> Result<Option<HookSpec>, StartError> {
                h.as_ref()
                    .map(|h| HookSpec::from_spec(n, h, base_url.as_deref(), base_dir.as_deref()))
                    .transpose()
                    .map_err(|e| cfg(e.to_string()))
            };
        let sync_hook = hook("sync", &def.spec.hooks.sync)?
            .ok_or_else(|| cfg("hooks.sync is required".into()))?;
        let finalize_hook = hook("finalize", &def.spec.hooks.finalize)?;
        let customize_hook = hook("customize", &def.spec.hooks.customize)?;
        let parent_selector = def
            .spec
            .parent_resource
            .label_selector
            .as_ref()
            .map(LabelSelector::from_label_selector)
            .transpose()
            .map_err(|e| cfg(format!("spec.parentResource.labelSelector: {e}")))?;

        // Resolve every resource; a missing one is reported and retried until it appears.
        let mut wanted = vec![(
            def.spec.parent_resource.api_version.clone(),
            def.spec.parent_resource.resource.clone(),
        )];
        wanted.extend(
            def.spec
                .child_resources
                .iter()
                .map(|c| (c.api_version.clone(), c.resource.clone())),
        );
        let rolling = def
            .spec
            .child_resources
            .iter()
            .any(|c| c.method().is_rolling());
        let infos = resolve_all(&ctx, &name, &wanted, stop).await?;
        let parent = infos[0].clone();
        let mut children = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, info) in def.spec.child_resources.iter().zip(infos[1..].iter()) {
            if parent.namespaced && !info.namespaced {
                return Err(cfg(format!(
                    "child resource {} is cluster-scoped but the parent {} is namespaced; a namespaced parent cannot own cluster-scoped children",
                    type_key(info),
                    type_key(&parent)
                )));
            }
            let informer = ctx.informers.informer(&info.api_resource, info.namespaced);
            let ty = ChildType {
                key: type_key(info),
                api_version: info.api_resource.api_version.clone(),
                kind: info.api_resource.kind.clone(),
                namespaced: info.namespaced,
                method: rule.method(),
            };
            types.insert(ty.key.clone(), info.clone());
            children.push(ChildSlot {
                informer,
                ty,
                checks: rule
                    .update_strategy
                    .as_ref()
                    .and_then(|s| s.status_checks.as_ref())
                    .map(|c| c.conditions.clone())
                    .unwrap_or_default(),
            });
        }
        let revisions = if rolling {
            let info = ensure_revision_resource(&ctx, &name, stop).await?;
            let inf = ctx.informers.informer(&info.api_resource, info.namespaced);
            Some((info, inf))
        } else {
            None
        };
        let parent_informer = ctx
            .informers
            .informer(&parent.api_resource, parent.namespaced);
        // Wait for every cache.
        let mut all: Vec<&Arc<Informer>> = vec![&parent_informer];
        all.extend(children.iter().map(|c| &c.informer));
        if let Some((_, i)) = &revisions {
            all.push(i);
        }
        for inf in all {
            loop {
                tokio::select! {
                    r = inf.wait_synced(ctx.options.sync_timeout) => match r {
                        Ok(()) => break,
                        Err(e) => ctx.bus.publish(EngineEvent::Error {
                            controller: Some(name.clone()),
                            object: None,
                            message: e.to_string(),
                        }),
                    },
                    () = stop.cancelled() => return Err(StartError::Stopped(name.clone())),
                }
            }
        }
        let finalizer = format!("metacontroller.io/compositecontroller-{name}");
        Ok(Arc::new(Composite {
            name,
            def,
            queue: WorkQueue::new(Backoff::default()),
            ctx,
            parent,
            parent_informer,
            parent_selector,
            children,
            types,
            revisions,
            sync_hook,
            finalize_hook,
            customize_hook,
            finalizer,
            state: Mutex::new(State::default()),
        }))
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Work-queue figures.
    pub fn queue_stats(&self) -> super::queue::QueueStats {
        self.queue.stats()
    }

    /// The parent resource.
    pub fn parent_resource(&self) -> &ResourceInfo {
        &self.parent
    }

    /// Number of parents currently in scope.
    pub fn parent_count(&self) -> usize {
        self.parents_in_scope().len()
    }

    fn parents_in_scope(&self) -> Vec<Arc<Value>> {
        let ns = if self.parent.namespaced {
            self.ctx.options.namespace.as_deref()
        } else {
            None
        };
        let mut parents = self.parent_informer.list(ns);
        parents.retain(|p| self.in_scope(p));
        parents
    }

    /// Is this parent ours to sync: in the `-n` namespace (if any), and selected by the
    /// definition's `parentResource.labelSelector` or still carrying our finalizer (a parent
    /// that stopped matching is finalized, not forgotten).
    fn in_scope(&self, parent: &Value) -> bool {
        let ns_ok = match (&self.ctx.options.namespace, self.parent.namespaced) {
            (Some(ns), true) => object::namespace(parent) == Some(ns.as_str()),
            _ => true,
        };
        ns_ok
            && (self
                .parent_selector
                .as_ref()
                .is_none_or(|s| s.matches(&object::labels(parent)))
                || object::finalizers(parent).contains(&self.finalizer.as_str()))
    }

    /// Queue every parent (start-up, resync period, manual resync, hook reload).
    pub fn enqueue_all(&self, trigger: Trigger) {
        for p in self.parents_in_scope() {
            if let Some(k) = ObjectKey::of(&p) {
                self.remember_uid(&p, &k);
                self.queue.add(k, trigger.clone());
            }
        }
    }

    fn remember_uid(&self, parent: &Value, key: &ObjectKey) {
        if let (Some(uid), Ok(mut st)) = (object::uid(parent), self.state.lock()) {
            st.uid_to_key.insert(uid.to_string(), key.clone());
        }
    }

    /// The last sync/finalize exchange of a parent: (hook name, request, response).
    pub fn last_exchange(&self, key: &ObjectKey) -> Option<(String, Value, Value)> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.last_exchange.get(key).cloned())
    }

    /// Queue the parents named `namespace/name` (or `name`); returns how many were queued.
    pub fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        let mut n = 0;
        for p in self.parents_in_scope() {
            if let Some(k) = ObjectKey::of(&p)
                && (k.to_string() == name || object::name(&p) == Some(name))
            {
                self.remember_uid(&p, &k);
                self.queue.add(k, trigger.clone());
                n += 1;
            }
        }
        n
    }

    /// A hook changed (hot reload): forget customize answers, then queue every parent.
    pub fn hook_reloaded(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.customize.clear();
        }
        self.enqueue_all(Trigger::HookReloaded);
    }

    /// The hooks this controller calls, by name.
    pub fn hooks(&self) -> Vec<(&'static str, &HookSpec)> {
        let mut out = vec![("sync", &self.sync_hook)];
        if let Some(h) = &self.finalize_hook {
            out.push(("finalize", h));
        }
        if let Some(h) = &self.customize_hook {
            out.push(("customize", h));
        }
        out
    }

    /// Every parent's last sync/finalize exchange: (parent, (hook, request, response)).
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state
            .lock()
            .map(|s| {
                s.last_exchange
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Desired children whose names are taken by objects another controller controls: the sync
    /// fails before anything is written (objects of others are never taken over, and a create
    /// would only fail with AlreadyExists on every sync).
    fn check_foreign(&self, uid: &str, desired: &[(ChildId, Value)]) -> Result<(), String> {
        let clashes: Vec<String> = desired
            .iter()
            .filter_map(|(id, _)| {
                let slot = self.children.iter().find(|s| s.ty.key == id.type_key)?;
                let key = ObjectKey::new(id.key.namespace.as_deref(), &id.key.name);
                let obj = slot.informer.get(&key)?;
                let owner = object::controller_ref(&obj).filter(|r| r.uid != uid)?;
                Some(format!(
                    "{} {} is controlled by {} {} (uid {})",
                    id.type_key,
                    id.object(),
                    owner.kind,
                    owner.name,
                    owner.uid
                ))
            })
            .collect();
        if clashes.is_empty() {
            return Ok(());
        }
        Err(format!(
            "desired children belong to another controller: {}; objects of other controllers are never taken over: give the child another name, or delete that object",
            clashes.join("; ")
        ))
    }

    /// Send each exchange's request again (to a reloaded hook), `--workers` at a time, and
    /// compare the answers; publishes one [`EngineEvent::Replay`] per parent and returns them.
    pub async fn replay(&self, exchanges: Vec<Exchange>) -> Vec<EngineEvent> {
        use futures::StreamExt;
        futures::stream::iter(exchanges)
            .map(|ex| self.replay_one(ex))
            .buffer_unordered(self.ctx.options.workers.max(1))
            .filter_map(|e| async move { e })
            .collect()
            .await
    }

    async fn replay_one(&self, (key, (hook, request, before)): Exchange) -> Option<EngineEvent> {
        let spec = if hook == "finalize" {
            self.finalize_hook.as_ref()?
        } else {
            &self.sync_hook
        };
        let info = CallInfo {
            hook: hook.clone(),
            controller_kind: "CompositeController".into(),
            controller: self.name.clone(),
            parent: key.clone(),
        };
        let call = call_hook(&self.ctx, spec, info, &request).await;
        let (changes, error) = match call.result {
            Ok(after) => (super::replay::response_changes(&before, &after), None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let ev = EngineEvent::Replay {
            controller: self.name.clone(),
            parent: key,
            hook,
            changes,
            error,
        };
        self.ctx.bus.publish(ev.clone());
        Some(ev)
    }

    /// Spawn the event routers (parent, children, resync timer). They end with `stop`.
    pub fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        let me = Arc::clone(self);
        let rx = self.parent_informer.subscribe();
        let s = stop.clone();
        tokio::spawn(async move { me.route_parents(rx, s).await });
        for (i, slot) in self.children.iter().enumerate() {
            let me = Arc::clone(self);
            let rx = slot.informer.subscribe();
            let s = stop.clone();
            tokio::spawn(async move { me.route_children(i, rx, s).await });
        }
        if let Some(secs) = self.def.spec.resync_period_seconds.filter(|s| *s > 0) {
            let me = Arc::clone(self);
            let s = stop.clone();
            tokio::spawn(async move {
                let period = Duration::from_secs(u64::from(secs.unsigned_abs()));
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                loop {
                    tokio::select! {
                        _ = tick.tick() => me.enqueue_all(Trigger::ResyncPeriod),
                        () = s.cancelled() => break,
                    }
                }
            });
        }
    }

    async fn route_parents(
        &self,
        mut rx: tokio::sync::broadcast::Receiver<InformerEvent>,
        stop: CancellationToken,
    ) {
        loop {
            let ev = tokio::select! {
                e = rx.recv() => e,
                () = stop.cancelled() => return,
            };
            match ev {
                Ok(InformerEvent::Added(p)) => {
                    if self.in_scope(&p)
                        && let Some(k) = ObjectKey::of(&p)
                    {
                        self.remember_uid(&p, &k);
                        self.queue.add(k, Trigger::ParentAdded);
                    }
                }
                Ok(InformerEvent::Updated { old, new }) => {
                    if !self.in_scope(&new) {
                        continue;
                    }
                    let Some(k) = ObjectKey::of(&new) else {
                        continue;
                    };
                    self.remember_uid(&new, &k);
                    if object::is_deleting(&new) && !object::is_deleting(&old) {
                        self.queue.add(k, Trigger::ParentDeleting);
                    } else if self.parent_change_matters(&k, &old, &new) {
                        self.queue.add(k, Trigger::ParentChanged);
                    }
                }
                Ok(InformerEvent::Deleted(p)) => {
                    if let Some(k) = ObjectKey::of(&p) {
                        self.queue.remove(&k);
                        if let Ok(mut st) = self.state.lock() {
                            if let Some(uid) = object::uid(&p) {
                                st.uid_to_key.remove(uid);
                            }
                            st.customize.remove(&k);
                            st.last_status.remove(&k);
                            st.last_exchange.remove(&k);
                            for set in st.related_parents.values_mut() {
                                set.remove(&k);
                            }
                        }
                    }
                }
                Ok(InformerEvent::Relisted) | Err(RecvError::Lagged(_)) => {
                    self.enqueue_all(Trigger::ParentChanged)
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// Should a parent update trigger a sync? Not when only status changed and either the
    /// definition says `ignoreStatusChanges` or the new status is the one we just wrote.
    fn parent_change_matters(&self, key: &ObjectKey, old: &Value, new: &Value) -> bool {
        if strip_volatile(old, true) != strip_volatile(new, true) {
            return true;
        }
        if self.def.spec.parent_resource.ignore_status_changes == Some(true) {
            return false;
        }
        let ours = self
            .state
            .lock()
            .ok()
            .and_then(|s| s.last_status.get(key).cloned());
        match (ours, new.get("status")) {
            (Some(ours), Some(st)) => !super::apply::values_equal(&ours, st),
            _ => true,
        }
    }

    async fn route_children(
        &self,
        slot: usize,
        mut rx: tokio::sync::broadcast::Receiver<InformerEvent>,
        stop: CancellationToken,
    ) {
        let resource = self.children[slot].ty.key.clone();
        loop {
            let ev = tokio::select! {
                e = rx.recv() => e,
                () = stop.cancelled() => return,
            };
            let trig = |o: &Value, event: &str| Trigger::Child {
                resource: resource.clone(),
                object: ObjectKey::of(o).map(|k| k.to_string()).unwrap_or_default(),
                event: event.to_string(),
            };
            match ev {
                Ok(InformerEvent::Added(o)) => match object::controller_ref(&o) {
                    Some(r) => self.enqueue_owner(&r.uid, trig(&o, "added")),
                    None => self.enqueue_matching(&o, trig(&o, "added")),
                },
                Ok(InformerEvent::Updated { old, new }) => {
                    let (or, nr) = (object::controller_ref(&old), object::controller_ref(&new));
                    let t = trig(&new, "updated");
                    if let Some(r) = &or
                        && nr.as_ref().is_none_or(|n| n.uid != r.uid)
                    {
                        self.enqueue_owner(&r.uid, t.clone());
                    }
                    match &nr {
                        Some(r) => self.enqueue_owner(&r.uid, t),
                        None => {
                            if or.is_some() || object::labels(&old) != object::labels(&new) {
                                self.enqueue_matching(&new, t);
                            }
                        }
                    }
                }
                Ok(InformerEvent::Deleted(o)) => {
                    // Orphans disappearing concern nobody (ControllerRef proposal).
                    if let Some(r) = object::controller_ref(&o) {
                        self.enqueue_owner(&r.uid, trig(&o, "deleted"));
                    }
                }
                Ok(InformerEvent::Relisted) | Err(RecvError::Lagged(_)) => {
                    self.enqueue_all(Trigger::Child {
                        resource: resource.clone(),
                        object: "*".into(),
                        event: "relisted".into(),
                    })
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    fn enqueue_owner(&self, uid: &str, trigger: Trigger) {
        let key = self
            .state
            .lock()
            .ok()
            .and_then(|s| s.uid_to_key.get(uid).cloned());
        if let Some(k) = key {
            self.queue.add(k, trigger);
        }
    }

    /// Parents whose selector matches an orphan (to give them a chance to adopt it).
    fn enqueue_matching(&self, orphan: &Value, trigger: Trigger) {
        if self.def.spec.generate_selector == Some(true) {
            if let Some(uid) = object::label(orphan, CONTROLLER_UID_LABEL) {
                self.enqueue_owner(uid, trigger);
            }
            return;
        }
        let ns = if self.parent.namespaced {
            match object::namespace(orphan) {
                Some(ns) => Some(ns),
                None => return,
            }
        } else {
            None
        };
        let labels = object::labels(orphan);
        for p in self.parent_informer.list(ns) {
            if !self.in_scope(&p) {
                continue;
            }
            if let Ok(sel) = self.selector_for(&p)
                && sel.matches(&labels)
                && let Some(k) = ObjectKey::of(&p)
            {
                self.queue.add(k, trigger.clone());
            }
        }
    }

    fn selector_for(&self, parent: &Value) -> Result<LabelSelector, String> {
        if self.def.spec.generate_selector == Some(true) {
            let uid = object::uid(parent).unwrap_or_default();
            return LabelSelector::parse(&format!("{CONTROLLER_UID_LABEL}={uid}"))
                .map_err(|e| e.to_string());
        }
        let Some(sel) = parent.pointer("/spec/selector").filter(|s| !s.is_null()) else {
            return Err("the parent has no spec.selector; add one (matchLabels/matchExpressions) or set generateSelector: true in the controller".into());
        };
        let parsed = LabelSelector::from_label_selector(sel)
            .map_err(|e| format!("the parent's spec.selector is invalid: {e}"))?;
        if parsed.is_empty() {
            return Err("the parent's spec.selector is empty, which would match (and adopt) every object; give it matchLabels".into());
        }
        Ok(parsed)
    }

    /// Start routing events of a related resource (once per resource).
    fn watch_related(self: &Arc<Self>, rule: &ResolvedRule, stop: &CancellationToken) {
        let key = rule.info.key();
        let first = self
            .state
            .lock()
            .map(|mut s| s.related_watched.insert(key.clone()))
            .unwrap_or(false);
        if !first {
            return;
        }
        let me = Arc::clone(self);
        let mut rx = rule.informer.subscribe();
        let stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    e = rx.recv() => e,
                    () = stop.cancelled() => return,
                };
                let objs: Vec<Arc<Value>> = match ev {
                    Ok(InformerEvent::Added(o)) | Ok(InformerEvent::Deleted(o)) => vec![o],
                    // Both sides: a relation that ends must still reach the parent it matched.
                    Ok(InformerEvent::Updated { old, new }) => vec![old, new],
                    Ok(InformerEvent::Relisted) | Err(RecvError::Lagged(_)) => {
                        let parents: Vec<ObjectKey> = me
                            .state
                            .lock()
                            .map(|s| {
                                s.related_parents
                                    .get(&key)
                                    .into_iter()
                                    .flatten()
                                    .cloned()
                                    .collect()
                            })
                            .unwrap_or_default();
                        for p in parents {
                            me.queue.add(
                                p,
                                Trigger::Related {
                                    resource: key.clone(),
                                    object: "*".into(),
                                },
                            );
                        }
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                me.route_related(&key, &objs);
            }
        });
    }

    fn route_related(&self, resource: &str, objs: &[Arc<Value>]) {
        let Ok(st) = self.state.lock() else { return };
        let Some(parents) = st.related_parents.get(resource) else {
            return;
        };
        for p in parents {
            let Some(entry) = st.customize.get(p) else {
                continue;
            };
            let hit = entry
                .rules
                .iter()
                .filter(|r| r.info.key() == resource)
                .any(|r| objs.iter().any(|o| r.matches(o)));
            if hit {
                let object = objs
                    .last()
                    .and_then(|o| ObjectKey::of(o))
                    .map(|k| k.to_string())
                    .unwrap_or_default();
                self.queue.add(
                    p.clone(),
                    Trigger::Related {
                        resource: resource.to_string(),
                        object,
                    },
                );
            }
        }
    }

    fn call_info(&self, hook: &str, key: &ObjectKey) -> CallInfo {
        CallInfo {
            hook: hook.to_string(),
            controller_kind: "CompositeController".into(),
            controller: self.name.clone(),
            parent: key.to_string(),
        }
    }

    async fn hook(
        &self,
        which: &str,
        spec: &HookSpec,
        key: &ObjectKey,
        body: &Value,
    ) -> Result<Value, SyncFailure> {
        let call = call_hook(&self.ctx, spec, self.call_info(which, key), body).await;
        match call.result {
            Ok(v) => Ok(v),
            Err(e) => Err(SyncFailure {
                retry_after: e
                    .is_rate_limited()
                    .then(|| e.retry_after().unwrap_or(Duration::from_millis(500))),
                message: format!("{which} hook failed: {e}"),
            }),
        }
    }

    /// The related objects for a parent (customize hook), re-asked when the generation changes.
    async fn related(
        self: &Arc<Self>,
        parent: &Value,
        key: &ObjectKey,
        stop: &CancellationToken,
    ) -> Result<Vec<(ResolvedRule, Vec<Arc<Value>>)>, SyncFailure> {
        let Some(spec) = &self.customize_hook else {
            return Ok(Vec::new());
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
                let body = hookapi::customize_request(&self.def.raw, parent);
                let resp = self.hook("customize", spec, key, &body).await?;
                let rules: Vec<RelatedRule> = hookapi::decode_customize(spec.version, &resp)
                    .map_err(|e| SyncFailure {
                        message: e.to_string(),
                        retry_after: None,
                    })?;
                let mut resolved = Vec::new();
                for r in &rules {
                    let rr = related::resolve(
                        &self.ctx,
                        r,
                        parent,
                        self.parent.namespaced,
                        self.sync_hook.version,
                    )
                    .await
                    .map_err(|m| SyncFailure {
                        message: format!("customize hook: {m}"),
                        retry_after: None,
                    })?;
                    resolved.push(rr);
                }
                for rr in &resolved {
                    self.watch_related(rr, stop);
                }
                if let Ok(mut st) = self.state.lock() {
                    for set in st.related_parents.values_mut() {
                        set.remove(key);
                    }
                    for rr in &resolved {
                        st.related_parents
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
                .wait_synced(self.ctx.options.sync_timeout)
                .await
                .map_err(|e| SyncFailure {
                    message: e.to_string(),
                    retry_after: None,
                })?;
            let objs = r.select();
            out.push((r, objs));
        }
        Ok(out)
    }

    /// One reconcile of one parent.
    pub async fn sync_parent(
        self: &Arc<Self>,
        key: &ObjectKey,
        stop: &CancellationToken,
    ) -> SyncOutcome {
        match self.try_sync(key, stop).await {
            Ok(out) => out,
            Err((failure, parent)) => {
                if failure.retry_after.is_none()
                    && let Some(p) = parent
                {
                    self.ctx.recorder.sync_error(&p, &failure.message).await;
                }
                SyncOutcome {
                    error: Some(failure),
                    ..SyncOutcome::default()
                }
            }
        }
    }

    async fn try_sync(
        self: &Arc<Self>,
        key: &ObjectKey,
        stop: &CancellationToken,
    ) -> Result<SyncOutcome, (SyncFailure, Option<Value>)> {
        let Some(parent) = self.parent_informer.get(key) else {
            return Ok(SyncOutcome::default());
        };
        let fail = |message: String| {
            (
                SyncFailure {
                    message,
                    retry_after: None,
                },
                Some((*parent).clone()),
            )
        };
        let with_parent = |f: SyncFailure| (f, Some((*parent).clone()));
        let uid = object::uid(&parent).unwrap_or_default().to_string();
        let deleting = object::is_deleting(&parent);
        let has_finalizer = object::finalizers(&parent).contains(&self.finalizer.as_str());
        let selected = self
            .parent_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object::labels(&parent)));
        if !selected && !has_finalizer {
            return Ok(SyncOutcome::default());
        }
        if deleting && !has_finalizer {
            // No finalizer of ours: the garbage collector deletes the children; nothing to do.
            return Ok(SyncOutcome::default());
        }
        let finalizing = deleting || !selected;
        let selector = self.selector_for(&parent).map_err(fail)?;

        // Related objects (customize hook).
        let related = self
            .related(&parent, key, stop)
            .await
            .map_err(with_parent)?;
        let related_groups: Vec<(String, Vec<Arc<Value>>)> = related
            .iter()
            .map(|(r, objs)| (r.info.key(), objs.clone()))
            .collect();

        // Claim children.
        let mut plan = Plan::default();
        let mut observed: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        let scope_ns = if self.parent.namespaced {
            object::namespace(&parent)
        } else {
            None
        };
        for slot in &self.children {
            let owned = slot.informer.controlled_by(&uid);
            let orphans = slot.informer.orphans(scope_ns, &selector);
            let claims = ownership::claim(deleting, &selector, owned, orphans);
            plan::plan_ownership(
                &parent,
                &slot.ty.key,
                &claims.adopt,
                &claims.release,
                &mut plan,
            );
            // The hook sees adopted orphans as they are once adopted (our ControllerRef on
            // them), as Metacontroller shows them.
            let adopted: std::collections::HashSet<&str> =
                claims.adopt.iter().filter_map(|o| object::uid(o)).collect();
            let children = claims
                .children
                .iter()
                .map(|c| match object::uid(c) {
                    Some(u) if adopted.contains(u) => {
                        let mut v = (**c).clone();
                        v["metadata"]["ownerReferences"] =
                            Value::Array(ownership::with_controller_ref(c, &parent));
                        Arc::new(v)
                    }
                    _ => Arc::clone(c),
                })
                .collect();
            observed.insert(slot.ty.key.clone(), children);
        }

        let hook_spec = if finalizing {
            self.finalize_hook.as_ref()
        } else {
            Some(&self.sync_hook)
        };
        let mut outcome = SyncOutcome::default();
        let mut finalized = false;
        let mut status_conditions = Vec::new();
        let mut hook_status = None;
        if let Some(spec) = hook_spec {
            let hook_name = if finalizing { "finalize" } else { "sync" };
            let request = self.request(
                spec.version,
                &parent,
                &observed,
                &related_groups,
                finalizing,
            );
            let body = self
                .hook(hook_name, spec, key, &request)
                .await
                .map_err(with_parent)?;
            if let Ok(mut st) = self.state.lock() {
                st.last_exchange
                    .insert(key.clone(), (hook_name.to_string(), request, body.clone()));
            }
            let resp = hookapi::decode_sync(hook_name, spec.version, &body)
                .map_err(|e| fail(e.to_string()))?;
            let types: Vec<ChildType> = self.children.iter().map(|s| s.ty.clone()).collect();
            let mut desired = plan::normalize_desired(
                &parent,
                &types,
                &selector,
                self.def.spec.generate_selector == Some(true),
                resp.children.clone(),
            )
            .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
            self.check_foreign(&uid, &desired)
                .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
            if let Some((rev_info, _)) = &self.revisions
                && !finalizing
            {
                let (d, state, writes) = self
                    .rollout(
                        spec,
                        key,
                        &parent,
                        &observed,
                        &related_groups,
                        &selector,
                        desired,
                        rev_info,
                    )
                    .await
                    .map_err(with_parent)?;
                desired = d;
                plan.revisions = writes;
                outcome.rollout_pending = state.in_progress;
                status_conditions.push(state.condition(&jiff::Timestamp::now().to_string()));
                if state.in_progress {
                    self.ctx.bus.publish(EngineEvent::Rollout {
                        controller: self.name.clone(),
                        parent: key.to_string(),
                        reason: state.reason.clone(),
                        message: state.message.clone(),
                    });
                }
                plan.rollout = Some(state);
            }
            plan::plan_children(
                &ChildrenInput {
                    parent: &parent,
                    types: &types,
                    observed: &observed,
                    desired: &desired,
                },
                &mut plan,
            );
            finalized = resp.finalized;
            hook_status = resp.status;
            outcome.resync_after = resp.resync_after_seconds.map(Duration::from_secs_f64);
        }
        if hook_spec.is_some() {
            plan.status = plan::status_change(&parent, hook_status.as_ref(), &status_conditions);
        }
        plan.finalizer = plan::finalizer_change(
            &parent,
            &self.finalizer,
            self.finalize_hook.is_some() && selected,
            finalizing,
            finalized,
        );
        // A deselected parent whose finalize hook finished (or that has no finalize hook) drops
        // our finalizer.
        if !selected && has_finalizer && (finalized || self.finalize_hook.is_none()) {
            plan.finalizer = Some(plan::FinalizerChange::Remove);
        }

        let target = Target {
            controller: &self.name,
            parent: &parent,
            parent_info: &self.parent,
            types: &self.types,
            revisions: self.revisions.as_ref().map(|(i, _)| i),
            finalizer: &self.finalizer,
        };
        if self.ctx.is_paused() {
            // Paused: show what would be written, write nothing, and do not wait for it.
            self.ctx.bus.publish(EngineEvent::PlanHeld {
                controller: self.name.clone(),
                parent: key.to_string(),
                actions: plan.describe(),
            });
            return Ok(outcome);
        }
        let report = self.ctx.executor.execute(&target, &plan).await;
        if let Some(st) = &report.status_written
            && let Ok(mut s) = self.state.lock()
        {
            s.last_status.insert(key.clone(), st.clone());
        }
        self.await_expectations(&report.expectations).await;
        outcome.writes = report.writes;
        if !report.errors.is_empty() {
            return Err(fail(report.errors.join("; ")));
        }
        Ok(outcome)
    }

    fn request(
        &self,
        version: Version,
        parent: &Value,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        related: &[(String, Vec<Arc<Value>>)],
        finalizing: bool,
    ) -> Value {
        let groups: Vec<(String, Vec<Arc<Value>>)> = self
            .children
            .iter()
            .map(|s| {
                (
                    s.ty.key.clone(),
                    observed.get(&s.ty.key).cloned().unwrap_or_default(),
                )
            })
            .collect();
        let children = hookapi::object_map(version, self.parent.namespaced, &groups);
        let related = hookapi::object_map(version, self.parent.namespaced, related);
        hookapi::composite_request(&self.def.raw, parent, children, related, finalizing)
    }

    /// Rolling updates: call the hook for every live old revision, step the rollout, and
    /// return the desired children (each from the revision that claims it), the state and the
    /// revision writes.
    #[allow(clippy::too_many_arguments)]
    async fn rollout(
        &self,
        spec: &HookSpec,
        key: &ObjectKey,
        parent: &Value,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        related: &[(String, Vec<Arc<Value>>)],
        selector: &LabelSelector,
        latest_desired: Vec<(ChildId, Value)>,
        rev_info: &ResourceInfo,
    ) -> Result<
        (
            Vec<(ChildId, Value)>,
            rollout::RolloutState,
            Vec<RevisionWrite>,
        ),
        SyncFailure,
    > {
        let Some((_, rev_informer)) = &self.revisions else {
            return Err(SyncFailure {
                message: "internal: no revision cache".into(),
                retry_after: None,
            });
        };
        let fail = |message: String| SyncFailure {
            message,
            retry_after: None,
        };
        let uid = object::uid(parent).unwrap_or_default();
        let field_paths = self
            .def
            .spec
            .parent_resource
            .revision_history
            .as_ref()
            .map(|r| r.field_paths.clone())
            .unwrap_or_default();
        let latest_patch = rollout::parent_patch(parent, &field_paths);
        let latest_name =
            rollout::revision_name(object::name(parent).unwrap_or_default(), &latest_patch);
        let stored: Vec<Revision> = rev_informer
            .controlled_by(uid)
            .into_iter()
            .map(rollout::revision_from_object)
            .collect();
        let rolling: BTreeSet<&str> = self
            .children
            .iter()
            .filter(|s| s.ty.method.is_rolling())
            .map(|s| s.ty.key.as_str())
            .collect();
        // Current claims, from the stored revisions.
        let mut claims: BTreeMap<ChildId, String> = BTreeMap::new();
        for rev in &stored {
            for ((group, kind), names) in &rev.children {
                let Some(slot) = self
                    .children
                    .iter()
                    .find(|s| s.ty.kind == *kind && object::group_of(&s.ty.api_version) == group)
                else {
                    continue;
                };
                for n in names {
                    let (ns, name) = match n.split_once('/') {
                        Some((ns, name)) => (Some(ns), name),
                        None => (object::namespace(parent), n.as_str()),
                    };
                    let id = ChildId {
                        type_key: slot.ty.key.clone(),
                        key: plan::ObjectKeyView {
                            namespace: if slot.ty.namespaced {
                                ns.map(str::to_string)
                            } else {
                                None
                            },
                            name: name.to_string(),
                        },
                    };
                    claims.insert(id, rev.name.clone());
                }
            }
        }
        // Desired state per revision (the hook is called once per old revision that claims
        // children, with the parent as it was at that revision).
        let types: Vec<ChildType> = self.children.iter().map(|s| s.ty.clone()).collect();
        let only_rolling = |d: &[(ChildId, Value)]| -> BTreeMap<ChildId, Value> {
            d.iter()
                .filter(|(id, _)| rolling.contains(id.type_key.as_str()))
                .cloned()
                .collect()
        };
        let mut desired_by_rev: BTreeMap<String, BTreeMap<ChildId, Value>> = BTreeMap::new();
        desired_by_rev.insert(latest_name.clone(), only_rolling(&latest_desired));
        let live_old: BTreeSet<String> = claims
            .values()
            .filter(|r| **r != latest_name)
            .cloned()
            .collect();
        for rev in stored.iter().filter(|r| live_old.contains(&r.name)) {
            let old_parent = rollout::patched_parent(parent, &rev.parent_patch);
            let request = self.request(spec.version, &old_parent, observed, related, false);
            let body = self.hook("sync", spec, key, &request).await?;
            let resp = hookapi::decode_sync("sync", spec.version, &body)
                .map_err(|e| fail(e.to_string()))?;
            let d = plan::normalize_desired(
                &old_parent,
                &types,
                selector,
                self.def.spec.generate_selector == Some(true),
                resp.children,
            )
            .map_err(|e| fail(format!("sync hook (revision {}): {e}", rev.name)))?;
            desired_by_rev.insert(rev.name.clone(), only_rolling(&d));
        }
        let observed_rolling: BTreeMap<ChildId, Arc<Value>> = observed
            .iter()
            .filter(|(k, _)| rolling.contains(k.as_str()))
            .flat_map(|(k, objs)| objs.iter().map(move |o| (ChildId::of(k, o), Arc::clone(o))))
            .collect();
        let latest_order: Vec<ChildId> = latest_desired
            .iter()
            .filter(|(id, _)| rolling.contains(id.type_key.as_str()))
            .map(|(id, _)| id.clone())
            .collect();
        let checks: BTreeMap<String, Vec<StatusConditionCheck>> = self
            .children
            .iter()
            .map(|s| (s.ty.key.clone(), s.checks.clone()))
            .collect();
        let outcome = rollout::step(rollout::StepInput {
            latest: &latest_name,
            claims,
            desired: &desired_by_rev,
            latest_order: &latest_order,
            observed: &observed_rolling,
            checks: &checks,
        });
        // Desired children: non-rolling from the latest answer, rolling from their revision.
        let mut desired: Vec<(ChildId, Value)> = Vec::new();
        for (id, v) in &latest_desired {
            if !rolling.contains(id.type_key.as_str()) {
                desired.push((id.clone(), v.clone()));
            } else if let Some(rev) = outcome.claims.get(id)
                && let Some(v) = desired_by_rev.get(rev).and_then(|d| d.get(id))
            {
                desired.push((id.clone(), v.clone()));
            }
        }
        for (id, rev) in &outcome.claims {
            if *rev != latest_name
                && !desired.iter().any(|(d, _)| d == id)
                && let Some(v) = desired_by_rev.get(rev).and_then(|d| d.get(id))
            {
                desired.push((id.clone(), v.clone()));
            }
        }
        let writes = self.revision_writes(
            parent,
            &stored,
            &latest_name,
            &latest_patch,
            &outcome.claims,
            selector,
            rev_info,
        );
        Ok((desired, outcome.state, writes))
    }

    #[allow(clippy::too_many_arguments)]
    fn revision_writes(
        &self,
        parent: &Value,
        stored: &[Revision],
        latest: &str,
        latest_patch: &Value,
        claims: &BTreeMap<ChildId, String>,
        selector: &LabelSelector,
        rev_info: &ResourceInfo,
    ) -> Vec<RevisionWrite> {
        let ns = object::namespace(parent).unwrap_or("default").to_string();
        let _ = rev_info;
        // Claims per revision in the stored format.
        let mut wanted: BTreeMap<&str, BTreeMap<(String, String), BTreeSet<String>>> =
            BTreeMap::new();
        for (id, rev) in claims {
            let Some(slot) = self.children.iter().find(|s| s.ty.key == id.type_key) else {
                continue;
            };
            let (gk, name) = rollout::claim_key(
                id,
                &slot.ty.api_version,
                &slot.ty.kind,
                self.parent.namespaced,
            );
            wanted
                .entry(rev.as_str())
                .or_default()
                .entry(gk)
                .or_default()
                .insert(name);
        }
        let encode = |c: &BTreeMap<(String, String), BTreeSet<String>>| -> Value {
            Value::Array(
                c.iter()
                    .map(|((g, k), names)| json!({"apiGroup": g, "kind": k, "names": names}))
                    .collect(),
            )
        };
        let mut writes = Vec::new();
        let empty = BTreeMap::new();
        if !stored.iter().any(|r| r.name == latest) {
            let mut labels = serde_json::Map::new();
            for (k, v) in selector.exact_pairs() {
                labels.insert(k.to_string(), json!(v));
            }
            writes.push(RevisionWrite::Create {
                object: json!({
                    "apiVersion": rollout::REVISION_API_VERSION,
                    "kind": rollout::REVISION_KIND,
                    "metadata": {
                        "name": latest,
                        "namespace": ns,
                        "labels": labels,
                        "ownerReferences": [ownership::controller_ref_for(parent)],
                    },
                    "parentPatch": latest_patch,
                    "children": encode(wanted.get(latest).unwrap_or(&empty)),
                }),
            });
        }
        for rev in stored {
            let want = wanted.get(rev.name.as_str()).unwrap_or(&empty);
            let Some(obj) = &rev.object else { continue };
            if want.is_empty() && rev.name != latest {
                writes.push(RevisionWrite::Delete {
                    name: rev.name.clone(),
                    namespace: object::namespace(obj).unwrap_or(&ns).to_string(),
                    uid: object::uid(obj).unwrap_or_default().to_string(),
                });
            } else if *want != rev.children {
                let mut o = (**obj).clone();
                o["children"] = encode(want);
                writes.push(RevisionWrite::Update { object: o });
            }
        }
        writes
    }

    async fn await_expectations(&self, expectations: &[Expectation]) {
        for e in expectations {
            let (type_key, key) = match e {
                Expectation::Changed { type_key, key, .. }
                | Expectation::Gone { type_key, key } => (type_key, key),
            };
            let informer = if *type_key == self.parent.key() {
                Some(&self.parent_informer)
            } else if let Some(s) = self.children.iter().find(|s| s.ty.key == *type_key) {
                Some(&s.informer)
            } else {
                self.revisions
                    .as_ref()
                    .filter(|(i, _)| i.key() == *type_key)
                    .map(|(_, inf)| inf)
            };
            let Some(inf) = informer else { continue };
            let ok = match e {
                Expectation::Changed { previous, .. } => {
                    let previous = previous.clone();
                    inf.wait_until(
                        key,
                        move |o| {
                            o.is_some_and(|o| object::resource_version(o) != previous.as_deref())
                        },
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
}

/// The object without the fields that change on every write (and, if `drop_status`, status).
fn strip_volatile(v: &Value, drop_status: bool) -> Value {
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

/// Resolve `(apiVersion, resource)` pairs, reporting and retrying missing ones until they
/// exist or `stop` fires.
pub async fn resolve_all(
    ctx: &EngineContext,
    controller: &str,
    wanted: &[(String, String)],
    stop: &CancellationToken,
) -> Result<Vec<ResourceInfo>, StartError> {
    let mut delay = Duration::from_millis(500);
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
                if reported.insert(m.clone()) {
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

/// Make sure `controllerrevisions.metacontroller.k8s.io` is served, installing its CRD when
/// it is missing (rolling updates need it).
async fn ensure_revision_resource(
    ctx: &EngineContext,
    controller: &str,
    stop: &CancellationToken,
) -> Result<ResourceInfo, StartError> {
    if let Ok(i) = ctx
        .discovery
        .resolve(rollout::REVISION_API_VERSION, rollout::REVISION_RESOURCE)
        .await
    {
        return Ok(i);
    }
    let api: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(ctx.client.clone());
    match serde_json::from_value(rollout::revision_crd()) {
        Ok(crd) => match api
            .create(
                &kube::api::PostParams {
                    dry_run: false,
                    field_manager: Some(super::execute::FIELD_MANAGER.into()),
                },
                &crd,
            )
            .await
        {
            Ok(_) => ctx.bus.publish(EngineEvent::Info {
                controller: Some(controller.to_string()),
                message: "installed CRD controllerrevisions.metacontroller.k8s.io (rolling updates keep their progress there)".into(),
            }),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => ctx.bus.publish(EngineEvent::Error {
                controller: Some(controller.to_string()),
                object: None,
                message: format!(
                    "rolling updates need CRD controllerrevisions.metacontroller.k8s.io and installing it failed: {}",
                    super::execute::kube_error_message(&e)
                ),
            }),
        },
        Err(e) => {
            return Err(StartError::Config {
                controller: controller.to_string(),
                message: format!("internal: revision CRD does not encode: {e}"),
            });
        }
    }
    let v = resolve_all(
        ctx,
        controller,
        &[(
            rollout::REVISION_API_VERSION.to_string(),
            rollout::REVISION_RESOURCE.to_string(),
        )],
        stop,
    )
    .await?;
    v.into_iter()
        .next()
        .ok_or_else(|| StartError::Stopped(controller.to_string()))
}

impl ControllerHandle for Composite {
    fn name(&self) -> &str {
        &self.name
    }
    fn queue_stats(&self) -> super::queue::QueueStats {
        Composite::queue_stats(self)
    }
    fn parent_count(&self) -> usize {
        Composite::parent_count(self)
    }
    fn enqueue_all(&self, trigger: Trigger) {
        Composite::enqueue_all(self, trigger);
    }
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        Composite::enqueue_named(self, name, trigger)
    }
    fn hook_reloaded(&self) {
        Composite::hook_reloaded(self);
    }
    fn hook_specs(&self) -> Vec<(&'static str, HookSpec)> {
        self.hooks()
            .into_iter()
            .map(|(n, h)| (n, h.clone()))
            .collect()
    }
    fn exchanges(&self) -> Vec<Exchange> {
        Composite::exchanges(self)
    }
    fn replay(&self, exchanges: Vec<Exchange>) -> futures::future::BoxFuture<'_, Vec<EngineEvent>> {
        Box::pin(Composite::replay(self, exchanges))
    }
}

/// Start a CompositeController: resolve, start informers and routers, queue every parent,
/// announce it; returns its handle and the worker loop to run until `stop`.
pub async fn launch(
    def: Controller<CompositeControllerSpec>,
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    tracker: Arc<Tracker>,
) -> Result<
    (
        Arc<dyn ControllerHandle>,
        futures::future::BoxFuture<'static, ()>,
    ),
    StartError,
> {
    let comp = Composite::start(def, Arc::clone(&ctx), &stop).await?;
    comp.spawn_routers(&stop);
    Composite::enqueue_all(&comp, Trigger::ParentAdded);
    ctx.bus.publish(EngineEvent::ControllerStarted {
        controller_kind: "CompositeController".into(),
        controller: comp.name.clone(),
        parent_resource: comp.parent_resource().key(),
        parents: Composite::parent_count(&comp),
    });
    let lp = Arc::new(CompositeLoop {
        inner: Arc::clone(&comp),
        stop: stop.clone(),
    });
    let run = Box::pin(async move {
        run_workers(lp, ctx.options.workers, ctx.bus.clone(), tracker, stop).await;
    });
    Ok((comp, run))
}

/// Adapter so the shared loop can drive a composite controller.
pub struct CompositeLoop {
    /// The controller.
    pub inner: Arc<Composite>,
    /// Stops related-resource routers started during syncs.
    pub stop: CancellationToken,
}

impl Reconciler for CompositeLoop {
    type Key = ObjectKey;

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn queue(&self) -> &WorkQueue<ObjectKey, Trigger> {
        &self.inner.queue
    }

    async fn sync(&self, key: &ObjectKey, _triggers: &[Trigger]) -> SyncOutcome {
        self.inner.sync_parent(key, &self.stop).await
    }
}
