//! DecoratorController: decorates existing objects (targets) of one or more resources with
//! labels, annotations, status and attachments, with Metacontroller's semantics.
//!
//! [`Decorator::start`] resolves the target and attachment resources (waiting for ones that do
//! not exist yet) and starts the shared informers; [`launch`] spawns the event routers and the
//! shared controller loop. One sync of one target: find its attachments (controlled by the
//! target *and* annotated `metacontroller.k8s.io/decorator-controller: <name>`; never adopted)
//! -> customize -> sync or finalize hook -> merge labels/annotations into the target -> pure
//! plan of attachment writes, status (only when the hook gives one) and finalizer -> execute
//! -> wait until the caches show the writes.
//!
//! A target is in scope when one of the definition's `resources` rules for its resource
//! matches both its labels (`labelSelector`) and its annotations (`annotationSelector`), or
//! when it still carries our finalizer (it stopped matching: it is finalized, then released).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::composite::{StartError, resolve_all};
use super::context::{EngineContext, HookSpec, call_hook};
use super::controller::{
    ControllerHandle, Exchange, Reconciler, SyncFailure, SyncOutcome, Tracker, run_workers,
};
use super::events::{ActionVerb, EngineEvent, Trigger};
use super::execute::{Expectation, FIELD_MANAGER, Target, kube_error_message};
use super::hookapi::{self, RelatedRule};
use super::plan::{self, ChildId, ChildType, ChildrenInput, FinalizerChange, Plan};
use super::queue::{Backoff, WorkQueue};
use super::related::{self, ResolvedRule};
use crate::hooks::CallInfo;
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::k8s::selector::LabelSelector;
use crate::spec::{Controller, DecoratorControllerSpec};

/// The annotation that marks an object as an attachment of a DecoratorController (its value
/// is the controller's name).
pub const DECORATOR_ANNOTATION: &str = "metacontroller.k8s.io/decorator-controller";

/// How long to wait for the caches to show our own writes before finishing a sync.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The controller kind, as shown in events and hook call logs.
const KIND: &str = "DecoratorController";

/// One target selector rule: both parts must match (an absent part matches everything).
struct Rule {
    labels: Option<LabelSelector>,
    annotations: Option<LabelSelector>,
}

impl Rule {
    fn matches(&self, obj: &Value) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|s| s.matches(&object::labels(obj)))
            && self
                .annotations
                .as_ref()
                .is_none_or(|s| s.matches(&object::annotations(obj)))
    }
}

/// A target resource (several `resources` rules on one resource share one slot).
struct TargetSlot {
    info: ResourceInfo,
    informer: Arc<Informer>,
    rules: Vec<Rule>,
}

/// A declared attachment resource with its cache.
struct AttachmentSlot {
    informer: Arc<Informer>,
    ty: ChildType,
}

/// The work-queue key: one target object of one target resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetKey {
    /// Index of the target resource in the controller.
    slot: usize,
    /// The resource, `Kind.apiVersion`.
    pub resource: String,
    /// The object.
    pub key: ObjectKey,
    /// Shown with its resource (the controller has several target resources); otherwise
    /// shown as `namespace/name`, like the parents of other controllers.
    qualified: bool,
}

impl fmt::Display for TargetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.qualified {
            write!(f, "{} {}", self.resource, self.key)
        } else {
            write!(f, "{}", self.key)
        }
    }
}

/// Customize results for one target, valid for one generation.
struct CustomizeEntry {
    uid: String,
    generation: i64,
    rules: Vec<ResolvedRule>,
}

#[derive(Default)]
struct State {
    /// Target uid -> key (routing of attachments).
    uid_to_key: HashMap<String, TargetKey>,
    /// Customize results per target.
    customize: HashMap<TargetKey, CustomizeEntry>,
    /// Targets with related rules on a resource (`Kind.apiVersion`).
    related_targets: HashMap<String, HashSet<TargetKey>>,
    /// Related resources whose events we already route.
    related_watched: HashSet<String>,
    /// The status we last wrote per target (to ignore its echo).
    last_status: HashMap<TargetKey, Value>,
    /// The last sync/finalize exchange per target: (hook name, request, response).
    last_exchange: HashMap<TargetKey, (String, Value, Value)>,
}

/// A running DecoratorController.
pub struct Decorator {
    name: String,
    def: Controller<DecoratorControllerSpec>,
    ctx: Arc<EngineContext>,
    targets: Vec<TargetSlot>,
    attachments: Vec<AttachmentSlot>,
    types: BTreeMap<String, ResourceInfo>,
    sync_hook: HookSpec,
    finalize_hook: Option<HookSpec>,
    customize_hook: Option<HookSpec>,
    finalizer: String,
    queue: WorkQueue<TargetKey, Trigger>,
    state: Mutex<State>,
}

impl Decorator {
    /// Resolve resources (retrying until they exist), start informers and build the
    /// controller. Returns when it is ready to run.
    pub async fn start(
        def: Controller<DecoratorControllerSpec>,
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
        if def.spec.resources.is_empty() {
            return Err(cfg(
                "spec.resources needs at least one target resource".into()
            ));
        }
        if let Some(a) = def
            .spec
            .attachments
            .iter()
            .find(|a| a.method().is_rolling())
        {
            return Err(cfg(format!(
                "attachment {}/{}: {:?} is not supported: DecoratorController does not do rolling updates; use InPlace or Recreate",
                a.api_version,
                a.resource,
                a.method()
            )));
        }
        let mut rules = Vec::new();
        for (i, r) in def.spec.resources.iter().enumerate() {
            let labels = r
                .label_selector
                .as_ref()
                .map(LabelSelector::from_label_selector)
                .transpose()
                .map_err(|e| cfg(format!("spec.resources[{i}].labelSelector: {e}")))?;
            let annotations = r
                .annotation_selector
                .as_ref()
                .map(|s| s.selector())
                .transpose()
                .map_err(|e| cfg(format!("spec.resources[{i}].annotationSelector: {e}")))?;
            rules.push(Rule {
                labels,
                annotations,
            });
        }

        let mut wanted: Vec<(String, String)> = def
            .spec
            .resources
            .iter()
            .map(|r| (r.api_version.clone(), r.resource.clone()))
            .collect();
        wanted.extend(
            def.spec
                .attachments
                .iter()
                .map(|c| (c.api_version.clone(), c.resource.clone())),
        );
        let infos = resolve_all(&ctx, &name, &wanted, stop).await?;
        let n_targets = def.spec.resources.len();
        let mut targets: Vec<TargetSlot> = Vec::new();
        for (rule, info) in rules.into_iter().zip(infos[..n_targets].iter()) {
            match targets.iter_mut().find(|t| t.info.key() == info.key()) {
                Some(t) => t.rules.push(rule),
                None => targets.push(TargetSlot {
                    informer: ctx.informers.informer(&info.api_resource, info.namespaced),
                    info: info.clone(),
                    rules: vec![rule],
                }),
            }
        }
        let mut attachments = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, info) in def.spec.attachments.iter().zip(infos[n_targets..].iter()) {
            if let Some(t) = targets
                .iter()
                .find(|t| t.info.namespaced && !info.namespaced)
            {
                return Err(cfg(format!(
                    "attachment resource {} is cluster-scoped but the target resource {} is namespaced; a namespaced object cannot own cluster-scoped attachments",
                    info.key(),
                    t.info.key()
                )));
            }
            let ty = ChildType {
                key: info.key(),
                api_version: info.api_resource.api_version.clone(),
                kind: info.api_resource.kind.clone(),
                namespaced: info.namespaced,
                method: rule.method(),
            };
            types.insert(ty.key.clone(), info.clone());
            attachments.push(AttachmentSlot {
                informer: ctx.informers.informer(&info.api_resource, info.namespaced),
                ty,
            });
        }
        let mut all: Vec<&Arc<Informer>> = targets.iter().map(|t| &t.informer).collect();
        all.extend(attachments.iter().map(|a| &a.informer));
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
        let finalizer = format!("metacontroller.io/decoratorcontroller-{name}");
        Ok(Arc::new(Decorator {
            name,
            def,
            ctx,
            targets,
            attachments,
            types,
            sync_hook,
            finalize_hook,
            customize_hook,
            finalizer,
            queue: WorkQueue::new(Backoff::default()),
            state: Mutex::new(State::default()),
        }))
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The target resources, `Kind.apiVersion`, comma-separated.
    pub fn target_resources(&self) -> String {
        self.targets
            .iter()
            .map(|t| t.info.key())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Is the target selected by one of the rules of its resource?
    fn selected(&self, slot: usize, obj: &Value) -> bool {
        self.targets[slot].rules.iter().any(|r| r.matches(obj))
    }

    /// Is this target ours to sync: in the `-n` namespace (if any), and selected or still
    /// carrying our finalizer.
    fn in_scope(&self, slot: usize, obj: &Value) -> bool {
        let ns_ok = match (
            &self.ctx.options.namespace,
            self.targets[slot].info.namespaced,
        ) {
            (Some(ns), true) => object::namespace(obj) == Some(ns.as_str()),
            _ => true,
        };
        ns_ok
            && (self.selected(slot, obj)
                || object::finalizers(obj).contains(&self.finalizer.as_str()))
    }

    fn key_of(&self, slot: usize, obj: &Value) -> Option<TargetKey> {
        ObjectKey::of(obj).map(|key| TargetKey {
            slot,
            resource: self.targets[slot].info.key(),
            key,
            qualified: self.targets.len() > 1,
        })
    }

    fn targets_in_scope(&self) -> Vec<(usize, Arc<Value>)> {
        let mut out = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            let ns = if t.info.namespaced {
                self.ctx.options.namespace.as_deref()
            } else {
                None
            };
            for o in t.informer.list(ns) {
                if self.in_scope(i, &o) {
                    out.push((i, o));
                }
            }
        }
        out
    }

    /// Number of targets currently in scope.
    pub fn target_count(&self) -> usize {
        self.targets_in_scope().len()
    }

    fn remember_uid(&self, obj: &Value, key: &TargetKey) {
        if let (Some(uid), Ok(mut st)) = (object::uid(obj), self.state.lock()) {
            st.uid_to_key.insert(uid.to_string(), key.clone());
        }
    }

    /// Queue every target in scope.
    pub fn enqueue_all(&self, trigger: Trigger) {
        for (slot, o) in self.targets_in_scope() {
            if let Some(k) = self.key_of(slot, &o) {
                self.remember_uid(&o, &k);
                self.queue.add(k, trigger.clone());
            }
        }
    }

    /// Queue the targets named `namespace/name` (or `name`); returns how many were queued.
    pub fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        let mut n = 0;
        for (slot, o) in self.targets_in_scope() {
            if let Some(k) = self.key_of(slot, &o)
                && (k.key.to_string() == name
                    || k.to_string() == name
                    || object::name(&o) == Some(name))
            {
                self.remember_uid(&o, &k);
                self.queue.add(k, trigger.clone());
                n += 1;
            }
        }
        n
    }

    /// A hook changed (hot reload): forget customize answers, then queue every target.
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

    /// The last sync/finalize exchange of a target: (hook name, request, response).
    pub fn last_exchange(&self, key: &TargetKey) -> Option<(String, Value, Value)> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.last_exchange.get(key).cloned())
    }

    /// Every target's last sync/finalize exchange: (target, (hook, request, response)).
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

    /// Send each exchange's request again (to a reloaded hook) and compare the answers;
    /// publishes one [`EngineEvent::Replay`] per target and returns them.
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
            controller_kind: KIND.into(),
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

    /// Spawn the event routers (targets, attachments, resync timer). They end with `stop`.
    pub fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        for (i, t) in self.targets.iter().enumerate() {
            let me = Arc::clone(self);
            let rx = t.informer.subscribe();
            let s = stop.clone();
            tokio::spawn(async move { me.route_targets(i, rx, s).await });
        }
        for a in &self.attachments {
            let me = Arc::clone(self);
            let rx = a.informer.subscribe();
            let s = stop.clone();
            let resource = a.ty.key.clone();
            tokio::spawn(async move { me.route_attachments(resource, rx, s).await });
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

    async fn route_targets(
        &self,
        slot: usize,
        mut rx: tokio::sync::broadcast::Receiver<InformerEvent>,
        stop: CancellationToken,
    ) {
        loop {
            let ev = tokio::select! {
                e = rx.recv() => e,
                () = stop.cancelled() => return,
            };
            match ev {
                Ok(InformerEvent::Added(o)) => {
                    if self.in_scope(slot, &o)
                        && let Some(k) = self.key_of(slot, &o)
                    {
                        self.remember_uid(&o, &k);
                        self.queue.add(k, Trigger::ParentAdded);
                    }
                }
                Ok(InformerEvent::Updated { old, new }) => {
                    // Labels or annotations moving in or out of the selectors are in
                    // `strip_volatile`'s difference; a target that left the selectors without
                    // our finalizer has nothing left to do.
                    if !self.in_scope(slot, &new) {
                        continue;
                    }
                    let Some(k) = self.key_of(slot, &new) else {
                        continue;
                    };
                    self.remember_uid(&new, &k);
                    if object::is_deleting(&new) && !object::is_deleting(&old) {
                        self.queue.add(k, Trigger::ParentDeleting);
                    } else if self.change_matters(&k, &old, &new) {
                        self.queue.add(k, Trigger::ParentChanged);
                    }
                }
                Ok(InformerEvent::Deleted(o)) => {
                    if let Some(k) = self.key_of(slot, &o) {
                        self.queue.remove(&k);
                        if let Ok(mut st) = self.state.lock() {
                            if let Some(uid) = object::uid(&o) {
                                st.uid_to_key.remove(uid);
                            }
                            st.customize.remove(&k);
                            st.last_status.remove(&k);
                            st.last_exchange.remove(&k);
                            for set in st.related_targets.values_mut() {
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

    /// Should a target update trigger a sync? Not when only its status changed to the one we
    /// just wrote.
    fn change_matters(&self, key: &TargetKey, old: &Value, new: &Value) -> bool {
        if strip_volatile(old, true) != strip_volatile(new, true) {
            return true;
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

    async fn route_attachments(
        &self,
        resource: String,
        mut rx: tokio::sync::broadcast::Receiver<InformerEvent>,
        stop: CancellationToken,
    ) {
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
                Ok(InformerEvent::Added(o)) => {
                    if let Some(r) = object::controller_ref(&o) {
                        self.enqueue_owner(&r.uid, trig(&o, "added"));
                    }
                }
                Ok(InformerEvent::Updated { old, new }) => {
                    let t = trig(&new, "updated");
                    let (or, nr) = (object::controller_ref(&old), object::controller_ref(&new));
                    if let Some(r) = &or
                        && nr.as_ref().is_none_or(|n| n.uid != r.uid)
                    {
                        self.enqueue_owner(&r.uid, t.clone());
                    }
                    if let Some(r) = &nr {
                        self.enqueue_owner(&r.uid, t);
                    }
                }
                Ok(InformerEvent::Deleted(o)) => {
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

    fn is_attachment(&self, obj: &Value) -> bool {
        object::annotation(obj, DECORATOR_ANNOTATION) == Some(self.name.as_str())
    }

    async fn hook(
        &self,
        which: &str,
        spec: &HookSpec,
        key: &TargetKey,
        body: &Value,
    ) -> Result<Value, SyncFailure> {
        let info = CallInfo {
            hook: which.to_string(),
            controller_kind: KIND.into(),
            controller: self.name.clone(),
            parent: key.to_string(),
        };
        let call = call_hook(&self.ctx, spec, info, body).await;
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

    /// The related objects for a target (customize hook), re-asked when its generation
    /// changes. A change to a related object that matches one of the target's rules queues
    /// the target.
    async fn related(
        self: &Arc<Self>,
        slot: usize,
        target: &Value,
        key: &TargetKey,
        stop: &CancellationToken,
    ) -> Result<Vec<(String, Vec<Arc<Value>>)>, SyncFailure> {
        let Some(spec) = &self.customize_hook else {
            return Ok(Vec::new());
        };
        let fail = |message: String| SyncFailure {
            message,
            retry_after: None,
        };
        let uid = object::uid(target).unwrap_or_default().to_string();
        let generation = object::generation(target);
        let cached = self.state.lock().ok().and_then(|s| {
            s.customize
                .get(key)
                .filter(|e| e.uid == uid && e.generation == generation)
                .map(|e| e.rules.clone())
        });
        let rules = match cached {
            Some(r) => r,
            None => {
                let body = hookapi::customize_request(&self.def.raw, target);
                let resp = self.hook("customize", spec, key, &body).await?;
                let rules: Vec<RelatedRule> = hookapi::decode_customize(spec.version, &resp)
                    .map_err(|e| fail(e.to_string()))?;
                let mut resolved = Vec::new();
                for r in &rules {
                    let rr = related::resolve(
                        &self.ctx,
                        r,
                        target,
                        self.targets[slot].info.namespaced,
                        self.sync_hook.version,
                    )
                    .await
                    .map_err(|m| fail(format!("customize hook: {m}")))?;
                    resolved.push(rr);
                }
                for rr in &resolved {
                    self.watch_related(rr, stop);
                }
                if let Ok(mut st) = self.state.lock() {
                    for set in st.related_targets.values_mut() {
                        set.remove(key);
                    }
                    for rr in &resolved {
                        st.related_targets
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
                .map_err(|e| fail(e.to_string()))?;
            let objs = r.select();
            out.push((r.info.key(), objs));
        }
        Ok(out)
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
                    // Both sides: a relation that ends must still reach the target it matched.
                    Ok(InformerEvent::Updated { old, new }) => vec![old, new],
                    Ok(InformerEvent::Relisted) | Err(RecvError::Lagged(_)) => {
                        let targets: Vec<TargetKey> = me
                            .state
                            .lock()
                            .map(|s| {
                                s.related_targets
                                    .get(&key)
                                    .into_iter()
                                    .flatten()
                                    .cloned()
                                    .collect()
                            })
                            .unwrap_or_default();
                        for t in targets {
                            me.queue.add(
                                t,
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
        let Some(targets) = st.related_targets.get(resource) else {
            return;
        };
        for t in targets {
            let Some(entry) = st.customize.get(t) else {
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
                    t.clone(),
                    Trigger::Related {
                        resource: resource.to_string(),
                        object,
                    },
                );
            }
        }
    }

    /// One reconcile of one target (`stop` ends the related-resource routers it starts).
    pub async fn sync_target(
        self: &Arc<Self>,
        key: &TargetKey,
        stop: &CancellationToken,
    ) -> SyncOutcome {
        match self.try_sync(key, stop).await {
            Ok(out) => out,
            Err((failure, target)) => {
                if failure.retry_after.is_none()
                    && let Some(t) = target
                {
                    self.ctx.recorder.sync_error(&t, &failure.message).await;
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
        key: &TargetKey,
        stop: &CancellationToken,
    ) -> Result<SyncOutcome, (SyncFailure, Option<Value>)> {
        let slot = key.slot;
        let Some(tslot) = self.targets.get(slot) else {
            return Ok(SyncOutcome::default());
        };
        let Some(target) = tslot.informer.get(&key.key) else {
            return Ok(SyncOutcome::default());
        };
        let fail = |message: String| {
            (
                SyncFailure {
                    message,
                    retry_after: None,
                },
                Some((*target).clone()),
            )
        };
        let with_target = |f: SyncFailure| (f, Some((*target).clone()));
        let uid = object::uid(&target).unwrap_or_default().to_string();
        self.remember_uid(&target, key);
        let deleting = object::is_deleting(&target);
        let has_finalizer = object::finalizers(&target).contains(&self.finalizer.as_str());
        let selected = self.selected(slot, &target);
        if !selected && !has_finalizer {
            return Ok(SyncOutcome::default());
        }
        if deleting && !has_finalizer {
            // No finalizer of ours: the garbage collector deletes the attachments.
            return Ok(SyncOutcome::default());
        }
        let finalizing = deleting || !selected;
        let related_groups = self
            .related(slot, &target, key, stop)
            .await
            .map_err(with_target)?;

        // Attachments: controlled by the target and carrying our annotation (no adoption).
        let mut observed: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        for a in &self.attachments {
            let owned: Vec<Arc<Value>> = a
                .informer
                .controlled_by(&uid)
                .into_iter()
                .filter(|o| self.is_attachment(o))
                .collect();
            observed.insert(a.ty.key.clone(), owned);
        }

        let hook_spec = if finalizing {
            self.finalize_hook.as_ref()
        } else {
            Some(&self.sync_hook)
        };
        let mut plan = Plan::default();
        let mut outcome = SyncOutcome::default();
        let mut finalized = false;
        let mut meta_patch: Option<Value> = None;
        if let Some(spec) = hook_spec {
            let hook_name = if finalizing { "finalize" } else { "sync" };
            let namespaced = tslot.info.namespaced;
            let groups: Vec<(String, Vec<Arc<Value>>)> = self
                .attachments
                .iter()
                .map(|a| {
                    (
                        a.ty.key.clone(),
                        observed.get(&a.ty.key).cloned().unwrap_or_default(),
                    )
                })
                .collect();
            let request = hookapi::decorator_request(
                &self.def.raw,
                &target,
                hookapi::object_map(spec.version, namespaced, &groups),
                hookapi::object_map(spec.version, namespaced, &related_groups),
                finalizing,
            );
            let body = self
                .hook(hook_name, spec, key, &request)
                .await
                .map_err(with_target)?;
            if let Ok(mut st) = self.state.lock() {
                st.last_exchange
                    .insert(key.clone(), (hook_name.to_string(), request, body.clone()));
            }
            let resp = hookapi::decode_decorator(hook_name, spec.version, &body)
                .map_err(|e| fail(e.to_string()))?;
            let types: Vec<ChildType> = self.attachments.iter().map(|a| a.ty.clone()).collect();
            let mut desired = plan::normalize_desired(
                &target,
                &types,
                &LabelSelector::default(),
                false,
                resp.attachments.clone(),
            )
            .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
            for (_, obj) in &mut desired {
                obj["metadata"]["annotations"][DECORATOR_ANNOTATION] = json!(self.name);
            }
            self.check_foreign(&uid, &desired)
                .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
            plan::plan_children(
                &ChildrenInput {
                    parent: &target,
                    types: &types,
                    observed: &observed,
                    desired: &desired,
                },
                &mut plan,
            );
            meta_patch = metadata_patch(&target, &resp.labels, &resp.annotations);
            // `status: null` (or absent) leaves the status alone; no observedGeneration.
            if let Some(st) = &resp.status {
                let current = target.get("status").cloned().unwrap_or(Value::Null);
                if !super::apply::values_equal(&current, st) {
                    plan.status = Some(st.clone());
                }
            }
            finalized = resp.finalized;
            outcome.resync_after = resp.resync_after_seconds.map(Duration::from_secs_f64);
        }
        plan.finalizer = finalizer_change(
            has_finalizer,
            self.finalize_hook.is_some(),
            finalizing,
            finalized,
        );

        if self.ctx.is_paused() {
            let mut actions = Vec::new();
            if let Some(p) = &meta_patch {
                actions.push(format!(
                    "update {} {} (metadata: {})",
                    key.resource, key.key, p["metadata"]
                ));
            }
            actions.extend(plan.describe());
            self.ctx.bus.publish(EngineEvent::PlanHeld {
                controller: self.name.clone(),
                parent: key.to_string(),
                actions,
            });
            return Ok(outcome);
        }

        // Labels and annotations first: later writes of the target start from the result.
        let mut current: Value = (*target).clone();
        let mut expectations = Vec::new();
        let mut writes = 0;
        if let Some(patch) = meta_patch {
            let previous = object::resource_version(&target).map(str::to_string);
            match self.patch_target(tslot, &key.key, patch).await {
                Ok(obj) => {
                    writes += 1;
                    self.publish_action(key, None);
                    expectations.push(Expectation::Changed {
                        type_key: key.resource.clone(),
                        key: key.key.clone(),
                        previous,
                    });
                    current = obj;
                }
                Err(m) => {
                    self.publish_action(key, Some(m.clone()));
                    return Err(fail(format!(
                        "update labels/annotations of {} {}: {m}",
                        key.resource, key.key
                    )));
                }
            }
        }
        let exec_target = Target {
            controller: &self.name,
            parent: &current,
            parent_info: &tslot.info,
            types: &self.types,
            revisions: None,
            finalizer: &self.finalizer,
        };
        let report = self.ctx.executor.execute(&exec_target, &plan).await;
        if let Some(st) = &report.status_written
            && let Ok(mut s) = self.state.lock()
        {
            s.last_status.insert(key.clone(), st.clone());
        }
        expectations.extend(report.expectations);
        self.await_expectations(&expectations).await;
        outcome.writes = writes + report.writes;
        if !report.errors.is_empty() {
            return Err(fail(report.errors.join("; ")));
        }
        Ok(outcome)
    }

    fn publish_action(&self, key: &TargetKey, error: Option<String>) {
        self.ctx.bus.publish(EngineEvent::Action {
            controller: self.name.clone(),
            parent: key.to_string(),
            verb: ActionVerb::Update,
            resource: key.resource.clone(),
            object: key.key.to_string(),
            detail: Some("labels/annotations".into()),
            error,
        });
    }

    /// Merge-patch the target's metadata (labels/annotations, with a resourceVersion
    /// precondition); returns the object as written.
    async fn patch_target(
        &self,
        slot: &TargetSlot,
        key: &ObjectKey,
        patch: Value,
    ) -> Result<Value, String> {
        let client = self.ctx.executor.client().clone();
        let api: Api<DynamicObject> = match (&key.namespace, slot.info.namespaced) {
            (Some(ns), true) => Api::namespaced_with(client, ns, &slot.info.api_resource),
            _ => Api::all_with(client, &slot.info.api_resource),
        };
        let obj = api
            .patch(
                &key.name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_string()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| kube_error_message(&e))?;
        serde_json::to_value(&obj).map_err(|e| format!("cannot decode the written object: {e}"))
    }

    /// Desired attachments whose names are taken by objects that are not this target's
    /// attachments (controlled by someone else, or not carrying our annotation): the sync
    /// fails before anything is written; such objects are never taken over.
    fn check_foreign(&self, uid: &str, desired: &[(ChildId, Value)]) -> Result<(), String> {
        let clashes: Vec<String> = desired
            .iter()
            .filter_map(|(id, _)| {
                let slot = self.attachments.iter().find(|s| s.ty.key == id.type_key)?;
                let key = ObjectKey::new(id.key.namespace.as_deref(), &id.key.name);
                let obj = slot.informer.get(&key)?;
                let why = match object::controller_ref(&obj) {
                    Some(r) if r.uid != uid => {
                        format!("is controlled by {} {} (uid {})", r.kind, r.name, r.uid)
                    }
                    None => "exists and is not controlled by the target".to_string(),
                    Some(_) if !self.is_attachment(&obj) => format!(
                        "is controlled by the target but lacks the annotation {DECORATOR_ANNOTATION}: {}",
                        self.name
                    ),
                    Some(_) => return None,
                };
                Some(format!("{} {} {why}", id.type_key, id.object()))
            })
            .collect();
        if clashes.is_empty() {
            return Ok(());
        }
        Err(format!(
            "desired attachments clash with existing objects: {}; objects that are not this decorator's attachments are never taken over: give the attachment another name, or delete that object",
            clashes.join("; ")
        ))
    }

    async fn await_expectations(&self, expectations: &[Expectation]) {
        for e in expectations {
            let (type_key, key) = match e {
                Expectation::Changed { type_key, key, .. }
                | Expectation::Gone { type_key, key } => (type_key, key),
            };
            let informer = self
                .targets
                .iter()
                .find(|t| t.info.key() == *type_key)
                .map(|t| &t.informer)
                .or_else(|| {
                    self.attachments
                        .iter()
                        .find(|a| a.ty.key == *type_key)
                        .map(|a| &a.informer)
                });
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

/// The finalizer change for a target: add it to a selected, live target when there is a
/// finalize hook; remove it when there is no finalize hook any more, or when a finalizing
/// target (deleted, or no longer selected) was answered `finalized: true`. A target that
/// stopped matching keeps the finalizer (and stays in scope) until finalize says it is done.
fn finalizer_change(
    present: bool,
    has_finalize_hook: bool,
    finalizing: bool,
    finalized: bool,
) -> Option<FinalizerChange> {
    match (present, has_finalize_hook, finalizing) {
        (true, false, _) => Some(FinalizerChange::Remove),
        (false, true, false) => Some(FinalizerChange::Add),
        (true, true, true) if finalized => Some(FinalizerChange::Remove),
        _ => None,
    }
}

/// The merge patch that applies the hook's labels and annotations to `target` (a `None`
/// value removes the key), or `None` when the target already has them. Carries the target's
/// resourceVersion as a precondition.
fn metadata_patch(
    target: &Value,
    labels: &BTreeMap<String, Option<String>>,
    annotations: &BTreeMap<String, Option<String>>,
) -> Option<Value> {
    let diff = |current: BTreeMap<String, String>,
                wanted: &BTreeMap<String, Option<String>>|
     -> Map<String, Value> {
        let mut m = Map::new();
        for (k, v) in wanted {
            match (current.get(k), v) {
                (Some(c), Some(v)) if c == v => {}
                (None, None) => {}
                (_, Some(v)) => {
                    m.insert(k.clone(), Value::String(v.clone()));
                }
                (Some(_), None) => {
                    m.insert(k.clone(), Value::Null);
                }
            }
        }
        m
    };
    let l = diff(object::labels(target), labels);
    let a = diff(object::annotations(target), annotations);
    if l.is_empty() && a.is_empty() {
        return None;
    }
    let mut meta = Map::new();
    if !l.is_empty() {
        meta.insert("labels".into(), Value::Object(l));
    }
    if !a.is_empty() {
        meta.insert("annotations".into(), Value::Object(a));
    }
    if let Some(rv) = object::resource_version(target) {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    Some(json!({ "metadata": meta }))
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

impl ControllerHandle for Decorator {
    fn name(&self) -> &str {
        &self.name
    }
    fn queue_stats(&self) -> super::queue::QueueStats {
        self.queue.stats()
    }
    fn parent_count(&self) -> usize {
        self.target_count()
    }
    fn enqueue_all(&self, trigger: Trigger) {
        Decorator::enqueue_all(self, trigger);
    }
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        Decorator::enqueue_named(self, name, trigger)
    }
    fn hook_reloaded(&self) {
        Decorator::hook_reloaded(self);
    }
    fn hook_specs(&self) -> Vec<(&'static str, HookSpec)> {
        self.hooks()
            .into_iter()
            .map(|(n, h)| (n, h.clone()))
            .collect()
    }
    fn exchanges(&self) -> Vec<Exchange> {
        Decorator::exchanges(self)
    }
    fn replay(&self, exchanges: Vec<Exchange>) -> futures::future::BoxFuture<'_, Vec<EngineEvent>> {
        Box::pin(Decorator::replay(self, exchanges))
    }
}

/// Start a DecoratorController: resolve, start informers and routers, queue every target,
/// announce it; returns its handle and the worker loop to run until `stop`.
pub async fn launch(
    def: Controller<DecoratorControllerSpec>,
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
    let dec = Decorator::start(def, Arc::clone(&ctx), &stop).await?;
    dec.spawn_routers(&stop);
    Decorator::enqueue_all(&dec, Trigger::ParentAdded);
    ctx.bus.publish(EngineEvent::ControllerStarted {
        controller_kind: KIND.into(),
        controller: dec.name.clone(),
        parent_resource: dec.target_resources(),
        parents: dec.target_count(),
    });
    let lp = Arc::new(DecoratorLoop {
        inner: Arc::clone(&dec),
        stop: stop.clone(),
    });
    let run = Box::pin(async move {
        run_workers(lp, ctx.options.workers, ctx.bus.clone(), tracker, stop).await;
    });
    Ok((dec, run))
}

/// Adapter so the shared loop can drive a decorator controller.
pub struct DecoratorLoop {
    /// The controller.
    pub inner: Arc<Decorator>,
    /// Stops related-resource routers started during syncs.
    pub stop: CancellationToken,
}

impl Reconciler for DecoratorLoop {
    type Key = TargetKey;

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn queue(&self) -> &WorkQueue<TargetKey, Trigger> {
        &self.inner.queue
    }

    async fn sync(&self, key: &TargetKey, _triggers: &[Trigger]) -> SyncOutcome {
        self.inner.sync_target(key, &self.stop).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Value {
        json!({"metadata": {"name": "t", "resourceVersion": "7",
            "labels": {"a": "1", "gone": "x"}, "annotations": {"n": "v"}}})
    }

    #[test]
    fn metadata_patch_sets_and_removes() {
        let labels = BTreeMap::from([
            ("a".to_string(), Some("2".to_string())),
            ("gone".to_string(), None),
            ("absent".to_string(), None),
        ]);
        let annotations = BTreeMap::from([("n".to_string(), Some("v".to_string()))]);
        let p = metadata_patch(&target(), &labels, &annotations);
        assert_eq!(
            p,
            Some(json!({"metadata": {"labels": {"a": "2", "gone": null}, "resourceVersion": "7"}}))
        );
    }

    #[test]
    fn finalizer_kept_until_finalized() {
        assert_eq!(
            finalizer_change(false, true, false, false),
            Some(FinalizerChange::Add)
        );
        assert_eq!(finalizer_change(true, true, false, false), None);
        // Stopped matching or deleted, finalize not done yet: keep it.
        assert_eq!(finalizer_change(true, true, true, false), None);
        assert_eq!(
            finalizer_change(true, true, true, true),
            Some(FinalizerChange::Remove)
        );
        // Finalize hook removed from the definition.
        assert_eq!(
            finalizer_change(true, false, false, false),
            Some(FinalizerChange::Remove)
        );
        // Never added to a target that is already finalizing.
        assert_eq!(finalizer_change(false, true, true, false), None);
    }

    #[test]
    fn metadata_patch_none_when_unchanged() {
        let labels = BTreeMap::from([
            ("a".to_string(), Some("1".to_string())),
            ("absent".to_string(), None),
        ]);
        assert_eq!(metadata_patch(&target(), &labels, &BTreeMap::new()), None);
    }
}
