//! MapController: for every input object a parent selects, the outputs its map hook answers.
//!
//! Work is keyed finely so that a change costs what it touches ([`MapWork`]):
//! - `Key(parent, map key)` reconciles the outputs of one input: map hook when the input is
//!   selected, tombstone hook (or deletion) when it is gone. An event on an input or on an output
//!   queues only its key; a sync whose parent, input and outputs are exactly as the last
//!   successful one left them (our own writes echoing back) is skipped without a hook call.
//! - `Parent(parent)` fans out to every key of that parent (parent added or changed, resync
//!   period, manual resync, hook reload).
//! - `Status(parent)` recomputes the engine-owned status (counts and `Synced`), coalesced after
//!   key syncs.
//!
//! Inputs are routed to parents by namespace and the parent's `spec.selector` (bound
//! references: an input that stops matching still reaches the parent it used to match, which
//! then treats its outputs as detached); outputs by owner uid and the map-key label index. There
//! is no finalize hook: deleting a parent deletes its outputs through the garbage collector
//! (they carry the parent's ControllerRef), `kubectl delete --cascade=orphan` keeps them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::context::{EngineContext, HookSpec};
use super::controller::{ControllerHandle, Exchange, Reconciler, SyncError, SyncOutcome, Tracker};
use super::events::{EngineEvent, Trigger};
use super::execute::Target;
use super::hookapi;
use super::map_plan::{self, MAP_KEY_LABEL, StatusInput};
use super::plan::ChildType;
use super::planner;
use super::queue::{Backoff, WorkQueue};
use super::shared::{self, StartError, resolve_all, strip_volatile};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{Informer, InformerEvent};
use crate::k8s::object::{self, ObjectKey};
use crate::k8s::selector::LabelSelector;
use crate::spec::{Controller, MapControllerSpec};

/// Status recomputations are coalesced over this window after key syncs.
const STATUS_DELAY: Duration = Duration::from_millis(100);
/// The controller kind, as hooks and events name it.
const KIND: &str = "MapController";

/// One unit of work of a MapController.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MapWork {
    /// Re-map every key of a parent (and refresh its status).
    Parent(ObjectKey),
    /// Recompute a parent's status.
    Status(ObjectKey),
    /// Reconcile the outputs of one map key of a parent.
    Key(ObjectKey, Arc<str>),
}

impl MapWork {
    fn parent(&self) -> &ObjectKey {
        match self {
            MapWork::Parent(p) | MapWork::Status(p) | MapWork::Key(p, _) => p,
        }
    }
}

impl fmt::Display for MapWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapWork::Parent(p) => write!(f, "{p}"),
            MapWork::Status(p) => write!(f, "{p} (status)"),
            MapWork::Key(p, k) => write!(f, "{p} {k}"),
        }
    }
}

/// Observed outputs of one key, by output type (`Kind.apiVersion`).
type Observed = BTreeMap<String, Vec<Arc<Value>>>;
/// Orphans carrying a key's label, with their output type: to adopt.
type Orphans = Vec<(String, Arc<Value>)>;

/// A declared input resource with its cache.
struct InputSlot {
    info: ResourceInfo,
    informer: Arc<Informer>,
}

/// A declared output resource with its cache.
struct OutputSlot {
    info: ResourceInfo,
    informer: Arc<Informer>,
    ty: ChildType,
}

/// What the controller remembers about one parent.
#[derive(Default)]
struct ParentState {
    /// Per key: what the last successful sync saw (parent, input) and left (outputs).
    fingerprints: HashMap<String, u64>,
    /// Failing keys with their error.
    failures: BTreeMap<String, String>,
    /// An error of the parent itself (invalid `spec.selector`).
    error: Option<String>,
    /// The last map/tombstone exchange per key: (hook, request, response).
    exchanges: HashMap<String, (String, Value, Value)>,
}

#[derive(Default)]
struct State {
    /// Map key -> (input slot, object key): every input object in the caches.
    inputs: HashMap<String, (usize, ObjectKey)>,
    /// Per parent.
    parents: HashMap<ObjectKey, ParentState>,
}

/// A running MapController.
pub struct MapCtl {
    name: String,
    def: Controller<MapControllerSpec>,
    ctx: Arc<EngineContext>,
    parent: ResourceInfo,
    parent_informer: Arc<Informer>,
    parent_selector: Option<LabelSelector>,
    inputs: Vec<InputSlot>,
    outputs: Vec<OutputSlot>,
    types: BTreeMap<String, ResourceInfo>,
    map_hook: HookSpec,
    tombstone_hook: Option<HookSpec>,
    caller: shared::Caller,
    /// Parent uid -> `Parent` work (routing of outputs); the status last written, under the
    /// parent's `Status` work.
    memory: shared::SyncMemory<MapWork>,
    queue: WorkQueue<MapWork, Trigger>,
    state: Mutex<State>,
}

/// Did these triggers ask for the hook to be called again even if nothing changed?
fn forced(triggers: &[Trigger]) -> bool {
    triggers.iter().any(|t| {
        matches!(
            t,
            Trigger::ResyncPeriod | Trigger::ResyncAfter | Trigger::Manual | Trigger::HookReloaded
        )
    })
}

impl MapCtl {
    /// Resolve resources (retrying until they exist), start informers and build the
    /// controller. Returns when it is ready to run.
    pub async fn start(
        def: Controller<MapControllerSpec>,
        ctx: Arc<EngineContext>,
        stop: &CancellationToken,
    ) -> Result<Arc<Self>, StartError> {
        let name = def.name.clone();
        let cfg = |message: String| StartError::Config {
            controller: name.clone(),
            message,
        };
        let base_dir = def.base_dir().map(std::path::Path::to_path_buf);
        let hook = |n: &str, h: &Option<crate::spec::Hook>| {
            shared::resolve_hook(&ctx, &name, base_dir.as_deref(), n, h.as_ref())
        };
        let map_hook =
            hook("map", &def.spec.hooks.map)?.ok_or_else(|| cfg("hooks.map is required".into()))?;
        let tombstone_hook = hook("tombstone", &def.spec.hooks.tombstone)?;
        let parent_selector = shared::parent_selector(&name, &def.spec.parent_resource)?;

        let mut wanted = vec![(
            def.spec.parent_resource.api_version.clone(),
            def.spec.parent_resource.resource.clone(),
        )];
        wanted.extend(
            def.spec
                .input_resources
                .iter()
                .map(|r| (r.api_version.clone(), r.resource.clone())),
        );
        wanted.extend(
            def.spec
                .output_resources
                .iter()
                .map(|r| (r.api_version.clone(), r.resource.clone())),
        );
        let infos = resolve_all(&ctx, &name, &wanted, stop).await?;
        let parent = infos[0].clone();
        let n_in = def.spec.input_resources.len();
        let mut inputs = Vec::new();
        for info in &infos[1..=n_in] {
            if parent.namespaced && !info.namespaced {
                return Err(cfg(format!(
                    "input resource {} is cluster-scoped but the parent {} is namespaced: a namespaced parent only selects inputs in its own namespace; use a cluster-scoped parent",
                    info.key(),
                    parent.key()
                )));
            }
            inputs.push(InputSlot {
                informer: ctx.informers.informer(&info.api_resource, info.namespaced),
                info: info.clone(),
            });
        }
        let mut outputs = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, info) in def.spec.output_resources.iter().zip(&infos[1 + n_in..]) {
            if parent.namespaced && !info.namespaced {
                return Err(cfg(format!(
                    "output resource {} is cluster-scoped but the parent {} is namespaced; a namespaced parent cannot own cluster-scoped outputs",
                    info.key(),
                    parent.key()
                )));
            }
            let ty = shared::child_type(info, rule.method());
            types.insert(ty.key.clone(), info.clone());
            outputs.push(OutputSlot {
                informer: ctx.informers.informer(&info.api_resource, info.namespaced),
                info: info.clone(),
                ty,
            });
        }
        let parent_informer = ctx
            .informers
            .informer(&parent.api_resource, parent.namespaced);
        let mut all: Vec<&Arc<Informer>> = vec![&parent_informer];
        all.extend(inputs.iter().map(|s| &s.informer));
        all.extend(outputs.iter().map(|s| &s.informer));
        shared::wait_caches(&ctx, &name, &all, stop).await?;
        Ok(Arc::new(MapCtl {
            caller: shared::Caller::new(KIND, &name).with_map_keys(),
            memory: shared::SyncMemory::default(),
            name,
            def,
            queue: WorkQueue::new(Backoff::default()),
            ctx,
            parent,
            parent_informer,
            parent_selector,
            inputs,
            outputs,
            types,
            map_hook,
            tombstone_hook,
            state: Mutex::new(State::default()),
        }))
    }

    /// The parent resource.
    pub fn parent_resource(&self) -> &ResourceInfo {
        &self.parent
    }

    fn parents_in_scope(&self) -> Vec<Arc<Value>> {
        let ns = shared::scope_namespace(&self.ctx, self.parent.namespaced);
        let mut parents = self.parent_informer.list(ns);
        parents.retain(|p| self.in_scope(p));
        parents
    }

    /// In the `-n` namespace (if any) and selected by `parentResource.labelSelector`.
    fn in_scope(&self, parent: &Value) -> bool {
        shared::in_namespace_scope(&self.ctx, self.parent.namespaced, parent)
            && self
                .parent_selector
                .as_ref()
                .is_none_or(|s| s.matches(&object::labels(parent)))
    }

    /// The namespace a parent's inputs and outputs live in (`None`: every namespace).
    fn scope_ns<'a>(&self, parent: &'a Value) -> Option<&'a str> {
        if self.parent.namespaced {
            object::namespace(parent)
        } else {
            None
        }
    }

    /// Does this parent (with its parsed selector) select this input?
    fn selects(&self, parent: &Value, selector: &LabelSelector, input: &Value) -> bool {
        if self.parent.namespaced && object::namespace(input) != object::namespace(parent) {
            return false;
        }
        if object::controller_ref(input)
            .is_some_and(|r| Some(r.uid.as_str()) == object::uid(parent))
        {
            // One of this parent's own outputs (a type that is both input and output).
            return false;
        }
        selector.matches(&object::labels(input))
    }

    /// The map keys of the inputs a parent selects now, with their count per input resource.
    fn live_keys(&self, parent: &Value, selector: &LabelSelector) -> (HashSet<String>, Vec<usize>) {
        let ns = self.scope_ns(parent);
        let mut keys = HashSet::new();
        let mut counts = Vec::new();
        for slot in &self.inputs {
            let mut n = 0;
            for o in slot.informer.select(ns, selector) {
                if self.selects(parent, selector, &o) {
                    keys.insert(map_plan::map_key(&o));
                    n += 1;
                }
            }
            counts.push(n);
        }
        (keys, counts)
    }

    fn remember_uid(&self, parent: &Value, key: &ObjectKey) {
        self.memory
            .remember_uid(parent, &MapWork::Parent(key.clone()));
    }

    /// Queue every parent (start-up, resync period, manual resync, hook reload).
    pub fn enqueue_all(&self, trigger: Trigger) {
        for p in self.parents_in_scope() {
            if let Some(k) = ObjectKey::of(&p) {
                self.remember_uid(&p, &k);
                self.queue.add(MapWork::Parent(k), trigger.clone());
            }
        }
    }

    /// Index every cached input by map key (start-up, relist).
    fn reindex_inputs(&self, slot: usize) {
        let objs = self.inputs[slot].informer.list(None);
        if let Ok(mut st) = self.state.lock() {
            st.inputs.retain(|_, (s, _)| *s != slot);
            for o in objs {
                if let Some(k) = ObjectKey::of(&o) {
                    st.inputs.insert(map_plan::map_key(&o), (slot, k));
                }
            }
        }
    }

    /// Spawn the event routers (parents, inputs, outputs, resync timer). They end with `stop`.
    pub fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        let me = Arc::clone(self);
        let rx = self.parent_informer.subscribe();
        tokio::spawn(shared::for_each_event(rx, stop.clone(), move |ev| {
            me.on_parent_event(ev)
        }));
        for i in 0..self.inputs.len() {
            let me = Arc::clone(self);
            let rx = self.inputs[i].informer.subscribe();
            tokio::spawn(shared::for_each_event(rx, stop.clone(), move |ev| {
                me.on_input_event(i, ev)
            }));
            self.reindex_inputs(i);
        }
        for i in 0..self.outputs.len() {
            let me = Arc::clone(self);
            let rx = self.outputs[i].informer.subscribe();
            tokio::spawn(shared::for_each_event(rx, stop.clone(), move |ev| {
                me.on_output_event(i, ev)
            }));
        }
        let me = Arc::clone(self);
        shared::spawn_resync(self.def.spec.resync_period_seconds, stop, move || {
            me.enqueue_all(Trigger::ResyncPeriod)
        });
    }

    fn on_parent_event(&self, ev: InformerEvent) {
        match ev {
            InformerEvent::Added(p) => {
                if self.in_scope(&p)
                    && let Some(k) = ObjectKey::of(&p)
                {
                    self.remember_uid(&p, &k);
                    self.queue.add(MapWork::Parent(k), Trigger::ParentAdded);
                }
            }
            InformerEvent::Updated { old, new } => {
                if !self.in_scope(&new) || object::is_deleting(&new) {
                    return;
                }
                let Some(k) = ObjectKey::of(&new) else {
                    return;
                };
                self.remember_uid(&new, &k);
                if strip_volatile(&old, true) != strip_volatile(&new, true) {
                    self.queue.add(MapWork::Parent(k), Trigger::ParentChanged);
                } else if self
                    .memory
                    .update_matters(&MapWork::Status(k.clone()), &old, &new, false)
                {
                    // A status other than the one we wrote: put ours back.
                    self.queue.add(MapWork::Status(k), Trigger::ParentChanged);
                }
            }
            InformerEvent::Deleted(p) => {
                if let Some(k) = ObjectKey::of(&p) {
                    self.queue.remove(&MapWork::Parent(k.clone()));
                    self.queue.remove(&MapWork::Status(k.clone()));
                    self.memory.forget(&MapWork::Status(k.clone()), &p);
                    if let Ok(mut st) = self.state.lock() {
                        st.parents.remove(&k);
                    }
                }
            }
            InformerEvent::Relisted => self.enqueue_all(Trigger::ParentChanged),
        }
    }

    fn on_input_event(&self, slot: usize, ev: InformerEvent) {
        let trig = |o: &Value, event: &str| Trigger::Child {
            resource: self.inputs[slot].info.key(),
            object: ObjectKey::of(o).map(|k| k.to_string()).unwrap_or_default(),
            event: event.to_string(),
        };
        match ev {
            InformerEvent::Added(o) => {
                self.index_input(slot, &o, true);
                self.enqueue_input(None, Some(&o), &trig(&o, "added"));
            }
            InformerEvent::Updated { old, new } => {
                if object::resource_version(&old) == object::resource_version(&new) {
                    return;
                }
                self.index_input(slot, &new, true);
                self.enqueue_input(Some(&old), Some(&new), &trig(&new, "updated"));
            }
            InformerEvent::Deleted(o) => {
                self.index_input(slot, &o, false);
                self.enqueue_input(Some(&o), None, &trig(&o, "deleted"));
            }
            InformerEvent::Relisted => {
                self.reindex_inputs(slot);
                self.enqueue_all(Trigger::Child {
                    resource: self.inputs[slot].info.key(),
                    object: "*".into(),
                    event: "relisted".into(),
                });
            }
        }
    }

    fn index_input(&self, slot: usize, o: &Value, present: bool) {
        let (Some(k), Ok(mut st)) = (ObjectKey::of(o), self.state.lock()) else {
            return;
        };
        let mk = map_plan::map_key(o);
        if present {
            st.inputs.insert(mk, (slot, k));
        } else {
            st.inputs.remove(&mk);
        }
    }

    /// Queue the key of an input for every parent that selects it now or selected it before
    /// the change (bound reference: a parent must learn that an input left it).
    fn enqueue_input(&self, old: Option<&Value>, new: Option<&Value>, trigger: &Trigger) {
        let Some(obj) = new.or(old) else { return };
        let candidates = if self.parent.namespaced {
            match object::namespace(obj) {
                Some(ns) => self.parent_informer.list(Some(ns)),
                None => return,
            }
        } else {
            self.parent_informer.list(None)
        };
        let mk: Arc<str> = Arc::from(map_plan::map_key(obj));
        for p in candidates {
            if !self.in_scope(&p) || object::is_deleting(&p) {
                continue;
            }
            let Ok(sel) = planner::map_input_selector(&p) else {
                continue;
            };
            let was = old.is_some_and(|o| self.selects(&p, &sel, o));
            let is = new.is_some_and(|o| self.selects(&p, &sel, o));
            if (was || is)
                && let Some(k) = ObjectKey::of(&p)
            {
                self.queue
                    .add(MapWork::Key(k, Arc::clone(&mk)), trigger.clone());
            }
        }
    }

    fn on_output_event(&self, slot: usize, ev: InformerEvent) {
        let trig = |o: &Value, event: &str| Trigger::Child {
            resource: self.outputs[slot].ty.key.clone(),
            object: ObjectKey::of(o).map(|k| k.to_string()).unwrap_or_default(),
            event: event.to_string(),
        };
        match ev {
            InformerEvent::Added(o) => self.route_output(&o, trig(&o, "added")),
            InformerEvent::Updated { old, new } => {
                let t = trig(&new, "updated");
                if object::controller_ref(&old).map(|r| r.uid)
                    != object::controller_ref(&new).map(|r| r.uid)
                    || object::label(&old, MAP_KEY_LABEL) != object::label(&new, MAP_KEY_LABEL)
                {
                    self.route_output(&old, t.clone());
                }
                self.route_output(&new, t);
            }
            InformerEvent::Deleted(o) => self.route_output(&o, trig(&o, "deleted")),
            InformerEvent::Relisted => self.enqueue_all(Trigger::Child {
                resource: self.outputs[slot].ty.key.clone(),
                object: "*".into(),
                event: "relisted".into(),
            }),
        }
    }

    /// An output event goes to its parent's key (by owner uid and map-key label); one without a
    /// key only changes the parent's counts; an orphan carrying a key goes to the parents that
    /// select that key's input (they may adopt it).
    fn route_output(&self, o: &Value, trigger: Trigger) {
        let mk = object::label(o, MAP_KEY_LABEL);
        match object::controller_ref(o) {
            Some(r) => {
                let Some(MapWork::Parent(pk)) = self.memory.key_of_uid(&r.uid) else {
                    return;
                };
                match mk {
                    Some(k) => self.queue.add(MapWork::Key(pk, Arc::from(k)), trigger),
                    None => self
                        .queue
                        .add_after(MapWork::Status(pk), trigger, STATUS_DELAY),
                }
            }
            None => {
                let Some(k) = mk else { return };
                let input = self
                    .state
                    .lock()
                    .ok()
                    .and_then(|s| s.inputs.get(k).cloned());
                if let Some((slot, key)) = input
                    && let Some(obj) = self.inputs[slot].informer.get(&key)
                {
                    self.enqueue_input(None, Some(&obj), &trigger);
                }
            }
        }
    }

    async fn hook(
        &self,
        which: &str,
        spec: &HookSpec,
        work: &MapWork,
        body: &Value,
    ) -> Result<Value, SyncError> {
        self.caller.call(&self.ctx, which, spec, work, body).await
    }

    /// One unit of work; failures are recorded as `SyncError` events on the parent.
    pub async fn sync_work(&self, work: &MapWork, triggers: &[Trigger]) -> SyncOutcome {
        let result = match work {
            MapWork::Parent(pk) => self.sync_parent(pk, triggers).await,
            MapWork::Status(pk) => self.sync_status(pk).await,
            MapWork::Key(pk, mk) => self.sync_key(work, pk, mk, triggers).await,
        };
        let result = result.map_err(|f| {
            let parent = self.parent_informer.get(work.parent());
            (f, parent.map(|p| (*p).clone()))
        });
        shared::finish_sync(&self.ctx, result).await
    }

    fn with_parent_state<R>(
        &self,
        pk: &ObjectKey,
        f: impl FnOnce(&mut ParentState) -> R,
    ) -> Option<R> {
        self.state
            .lock()
            .ok()
            .map(|mut s| f(s.parents.entry(pk.clone()).or_default()))
    }

    /// The parent, when it exists, is not being deleted (the garbage collector deletes its
    /// outputs) and is in scope.
    fn live_parent(&self, pk: &ObjectKey) -> Option<Arc<Value>> {
        let parent = self.parent_informer.get(pk)?;
        if object::is_deleting(&parent) || !self.in_scope(&parent) {
            return None;
        }
        self.remember_uid(&parent, pk);
        Some(parent)
    }

    /// Fan out to every key of the parent: the inputs it selects and the keys of its outputs
    /// (detached ones included), then refresh its status.
    async fn sync_parent(
        &self,
        pk: &ObjectKey,
        triggers: &[Trigger],
    ) -> Result<SyncOutcome, SyncError> {
        let Some(parent) = self.live_parent(pk) else {
            return Ok(SyncOutcome::default());
        };
        let selector = match planner::map_input_selector(&parent) {
            Ok(s) => {
                self.with_parent_state(pk, |ps| ps.error = None);
                s
            }
            Err(e) => {
                self.with_parent_state(pk, |ps| ps.error = Some(e.clone()));
                self.queue
                    .add(MapWork::Status(pk.clone()), Trigger::ParentChanged);
                return Err(SyncError::Parent(e));
            }
        };
        let (mut keys, _) = self.live_keys(&parent, &selector);
        let uid = object::uid(&parent).unwrap_or_default();
        for slot in &self.outputs {
            for o in slot.informer.controlled_by(uid) {
                if let Some(k) = object::label(&o, MAP_KEY_LABEL) {
                    keys.insert(k.to_string());
                }
            }
        }
        self.with_parent_state(pk, |ps| {
            ps.fingerprints.retain(|k, _| keys.contains(k));
            ps.failures.retain(|k, _| keys.contains(k));
            ps.exchanges.retain(|k, _| keys.contains(k));
        });
        for k in keys {
            let work = MapWork::Key(pk.clone(), Arc::from(k));
            for t in triggers {
                self.queue.add(work.clone(), t.clone());
            }
        }
        self.queue
            .add(MapWork::Status(pk.clone()), Trigger::ParentChanged);
        Ok(SyncOutcome::default())
    }

    /// The outputs of one key: those this parent controls and carry the key's label, plus
    /// orphans carrying it (to adopt, when `adopt` is set), by output type.
    fn observe(
        &self,
        parent: &Value,
        mk: &str,
        adopt: bool,
    ) -> Result<(Observed, Orphans), SyncError> {
        let uid = object::uid(parent).unwrap_or_default();
        let sel = LabelSelector::parse(&format!("{MAP_KEY_LABEL}={mk}")).map_err(|e| {
            SyncError::Parent(format!("map key {mk} is not a valid label value: {e}"))
        })?;
        let ns = self.scope_ns(parent);
        let mut observed = BTreeMap::new();
        let mut orphans = Vec::new();
        for slot in &self.outputs {
            let mut mine = Vec::new();
            for o in slot.informer.select(ns, &sel) {
                match object::controller_ref(&o) {
                    Some(r) if r.uid == uid => mine.push(o),
                    None if adopt && !object::is_deleting(&o) => {
                        orphans.push((slot.ty.key.clone(), o))
                    }
                    _ => {}
                }
            }
            observed.insert(slot.ty.key.clone(), mine);
        }
        Ok((observed, orphans))
    }

    /// The fingerprint of what a key sync looks at: parent (without status), input, outputs.
    fn fingerprint(
        head: u64,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        orphans: &[(String, Arc<Value>)],
    ) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        head.hash(&mut h);
        for (t, objs) in observed {
            t.hash(&mut h);
            for o in objs {
                object::uid(o).hash(&mut h);
                object::resource_version(o).hash(&mut h);
            }
        }
        for (t, o) in orphans {
            t.hash(&mut h);
            object::uid(o).hash(&mut h);
            object::resource_version(o).hash(&mut h);
        }
        h.finish()
    }

    /// Reconcile one key: map hook for a selected input, tombstone hook (or deletion) for the
    /// outputs of one that is gone.
    async fn sync_key(
        &self,
        work: &MapWork,
        pk: &ObjectKey,
        mk: &str,
        triggers: &[Trigger],
    ) -> Result<SyncOutcome, SyncError> {
        let Some(parent) = self.live_parent(pk) else {
            return Ok(SyncOutcome::default());
        };
        let Ok(selector) = planner::map_input_selector(&parent) else {
            // The parent's own sync reports it.
            return Ok(SyncOutcome::default());
        };
        let uid = object::uid(&parent).unwrap_or_default().to_string();
        let input = self
            .state
            .lock()
            .ok()
            .and_then(|s| s.inputs.get(mk).cloned())
            .and_then(|(slot, key)| self.inputs[slot].informer.get(&key))
            .filter(|o| map_plan::map_key(o) == mk && self.selects(&parent, &selector, o));
        let (observed, orphans) = self.observe(&parent, mk, input.is_some())?;

        let head = {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&strip_volatile(&parent, true))
                .unwrap_or_default()
                .hash(&mut h);
            input
                .as_ref()
                .map(|i| (object::uid(i), object::resource_version(i)))
                .hash(&mut h);
            h.finish()
        };
        let before = Self::fingerprint(head, &observed, &orphans);
        let remembered = self.with_parent_state(pk, |ps| ps.fingerprints.get(mk).copied());
        if !forced(triggers) && remembered.flatten() == Some(before) {
            return Ok(SyncOutcome::default());
        }

        let result = self
            .reconcile_key(
                work,
                &parent,
                &uid,
                mk,
                input.as_deref(),
                &observed,
                &orphans,
            )
            .await;
        match result {
            Ok((outcome, gone)) => {
                let after = if outcome.writes > 0 {
                    let (o, orph) = self.observe(&parent, mk, input.is_some())?;
                    Self::fingerprint(head, &o, &orph)
                } else {
                    before
                };
                self.with_parent_state(pk, |ps| {
                    ps.failures.remove(mk);
                    if gone {
                        ps.fingerprints.remove(mk);
                        ps.exchanges.remove(mk);
                    } else if !self.ctx.is_paused() {
                        ps.fingerprints.insert(mk.to_string(), after);
                    }
                });
                // Counts (outputs, conditions, detached) may have changed with anything this
                // key saw or wrote; coalesced, and written only when it differs.
                self.queue
                    .add_after(MapWork::Status(pk.clone()), Trigger::Converge, STATUS_DELAY);
                Ok(outcome)
            }
            Err(f) => {
                if f.is_failure() {
                    let message = f.to_string();
                    self.with_parent_state(pk, |ps| {
                        ps.fingerprints.remove(mk);
                        ps.failures.insert(mk.to_string(), message);
                    });
                    self.queue
                        .add_after(MapWork::Status(pk.clone()), Trigger::Retry, STATUS_DELAY);
                }
                Err(f)
            }
        }
    }

    /// Call the hook for a key, plan and execute. Returns the outcome and whether the key is
    /// gone for good (detached and no output left).
    #[allow(clippy::too_many_arguments)]
    async fn reconcile_key(
        &self,
        work: &MapWork,
        parent: &Value,
        uid: &str,
        mk: &str,
        input: Option<&Value>,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
        orphans: &[(String, Arc<Value>)],
    ) -> Result<(SyncOutcome, bool), SyncError> {
        let pk = work.parent();
        let mut outcome = SyncOutcome::default();
        let types: Vec<ChildType> = self.outputs.iter().map(|s| s.ty.clone()).collect();
        let held = self.memory.held_fields(work);
        let sync_plan = match input {
            Some(input) => {
                // Orphans carrying this key are adopted; the hook sees them as ours.
                let mut observed = observed.clone();
                for (t, o) in orphans {
                    observed
                        .entry(t.clone())
                        .or_default()
                        .push(Arc::new(planner::as_adopted(o, parent)));
                }
                let spec = &self.map_hook;
                let request = hookapi::map_request(
                    &self.def.raw,
                    parent,
                    mk,
                    input,
                    self.output_map(spec.version, &observed),
                );
                let body = self.hook("map", spec, work, &request).await?;
                self.with_parent_state(pk, |ps| {
                    ps.exchanges
                        .insert(mk.to_string(), ("map".into(), request, body.clone()))
                });
                let resp = hookapi::decode_map("map", spec.version, &body)
                    .map_err(|e| SyncError::answer("map", e.to_string()))?;
                let mut desired = planner::normalize_desired(
                    parent,
                    &types,
                    &LabelSelector::default(),
                    false,
                    resp.outputs,
                )
                .map_err(|e| SyncError::answer("map", format!("map hook: {e}")))?;
                map_plan::tag_outputs(&mut desired, mk, &map_plan::input_ref(input));
                map_plan::check_clashes(&desired, uid, mk, |id| {
                    let slot = self.outputs.iter().find(|s| s.ty.key == id.type_key)?;
                    slot.informer.get(&id.object_key())
                })
                .map_err(|e| SyncError::answer("map", format!("map hook: {e}")))?;
                outcome.resync_after = resp.resync_after_seconds.map(Duration::from_secs_f64);
                planner::plan_map_key(&planner::MapKeyInput {
                    parent,
                    map_key: mk,
                    types: &types,
                    observed: &observed,
                    orphans,
                    answer: planner::MapAnswer::Map {
                        desired: &desired,
                        resync_after_seconds: resp.resync_after_seconds,
                    },
                    held: &held,
                })
            }
            None => {
                if observed.values().all(Vec::is_empty) {
                    return Ok((outcome, true));
                }
                let mut resync_after_seconds = None;
                let keep = match &self.tombstone_hook {
                    None => BTreeSet::new(),
                    Some(spec) => {
                        let request = hookapi::tombstone_request(
                            &self.def.raw,
                            parent,
                            mk,
                            self.output_map(spec.version, observed),
                        );
                        let body = self.hook("tombstone", spec, work, &request).await?;
                        self.with_parent_state(pk, |ps| {
                            ps.exchanges
                                .insert(mk.to_string(), ("tombstone".into(), request, body.clone()))
                        });
                        let resp = hookapi::decode_map("tombstone", spec.version, &body)
                            .map_err(|e| SyncError::answer("tombstone", e.to_string()))?;
                        outcome.resync_after =
                            resp.resync_after_seconds.map(Duration::from_secs_f64);
                        resync_after_seconds = resp.resync_after_seconds;
                        planner::tombstone_kept(parent, mk, &types, observed, &resp.outputs)
                            .map_err(|e| SyncError::answer("tombstone", e))?
                    }
                };
                planner::plan_map_key(&planner::MapKeyInput {
                    parent,
                    map_key: mk,
                    types: &types,
                    observed,
                    orphans: &[],
                    answer: planner::MapAnswer::Tombstone {
                        keep: &keep,
                        resync_after_seconds,
                    },
                    held: &held,
                })
            }
        };

        self.ctx
            .bus
            .publish(sync_plan.event(&self.name, &pk.to_string()));
        if sync_plan.writes.is_empty() {
            return Ok((outcome, false));
        }
        self.carry_out(work, parent, &sync_plan)
            .await?
            .fill(&mut outcome);
        Ok((outcome, false))
    }

    /// Observed outputs in the hooks' map format, one entry per output resource.
    fn output_map(
        &self,
        version: hookapi::Version,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
    ) -> Value {
        let groups: Vec<(String, Vec<Arc<Value>>)> = self
            .outputs
            .iter()
            .map(|s| {
                (
                    s.ty.key.clone(),
                    observed.get(&s.ty.key).cloned().unwrap_or_default(),
                )
            })
            .collect();
        hookapi::object_map(version, self.parent.namespaced, &groups)
    }

    /// Recompute and write the engine-owned status of a parent.
    async fn sync_status(&self, pk: &ObjectKey) -> Result<SyncOutcome, SyncError> {
        let Some(parent) = self.live_parent(pk) else {
            return Ok(SyncOutcome::default());
        };
        let uid = object::uid(&parent).unwrap_or_default();
        let selector = planner::map_input_selector(&parent);
        let (live, counts) = match &selector {
            Ok(s) => self.live_keys(&parent, s),
            Err(_) => (HashSet::new(), vec![0; self.inputs.len()]),
        };
        let (failures, parent_error) = self
            .state
            .lock()
            .ok()
            .and_then(|s| {
                s.parents
                    .get(pk)
                    .map(|ps| (ps.failures.clone(), ps.error.clone()))
            })
            .unwrap_or_default();
        let parent_error = selector.err().or(parent_error);
        let input = StatusInput {
            inputs: self
                .inputs
                .iter()
                .zip(counts)
                .map(|(s, n)| (s.info.api_resource.plural.clone(), n))
                .collect(),
            outputs: self
                .outputs
                .iter()
                .map(|s| {
                    (
                        s.info.api_resource.plural.clone(),
                        s.informer.controlled_by(uid),
                    )
                })
                .collect(),
            live_keys: &live,
            failures: &failures,
            parent_error: parent_error.as_deref(),
        };
        let now = jiff::Timestamp::now().to_string();
        let (status, synced) = map_plan::aggregate_status(&input, &now);
        let plan = planner::plan_map_status(&parent, &status, synced);
        if plan.writes.status.is_none() {
            return Ok(SyncOutcome::default());
        }
        let mut outcome = SyncOutcome::default();
        self.carry_out(&MapWork::Status(pk.clone()), &parent, &plan)
            .await?
            .fill(&mut outcome);
        Ok(outcome)
    }

    /// Execute a plan for `work` (or hold it while paused) and wait for the caches to show it.
    async fn carry_out(
        &self,
        work: &MapWork,
        parent: &Value,
        plan: &planner::SyncPlan,
    ) -> Result<shared::Carried, SyncError> {
        let target = Target {
            controller: &self.name,
            parent,
            parent_info: &self.parent,
            types: &self.types,
            revisions: None,
            finalizer: "",
        };
        shared::carry_out(&self.ctx, &self.memory, work, &target, plan, |type_key| {
            if type_key == self.parent.key() {
                Some(&self.parent_informer)
            } else {
                self.outputs
                    .iter()
                    .find(|s| s.ty.key == type_key)
                    .map(|s| &s.informer)
            }
        })
        .await
    }
}

impl ControllerHandle for MapCtl {
    fn name(&self) -> &str {
        &self.name
    }
    fn queue_stats(&self) -> super::queue::QueueStats {
        self.queue.stats()
    }
    fn parent_count(&self) -> usize {
        self.parents_in_scope().len()
    }
    fn enqueue_all(&self, trigger: Trigger) {
        MapCtl::enqueue_all(self, trigger);
    }
    fn enqueue_named(&self, name: &str, trigger: Trigger) -> usize {
        let mut n = 0;
        for p in self.parents_in_scope() {
            if let Some(k) = ObjectKey::of(&p)
                && (k.to_string() == name || object::name(&p) == Some(name))
            {
                self.remember_uid(&p, &k);
                self.queue.add(MapWork::Parent(k), trigger.clone());
                n += 1;
            }
        }
        n
    }
    fn hook_reloaded(&self) {
        MapCtl::enqueue_all(self, Trigger::HookReloaded);
    }
    fn hook_specs(&self) -> Vec<(&'static str, HookSpec)> {
        let mut out = vec![("map", self.map_hook.clone())];
        if let Some(h) = &self.tombstone_hook {
            out.push(("tombstone", h.clone()));
        }
        out
    }
    fn exchanges(&self) -> Vec<Exchange> {
        self.state
            .lock()
            .map(|s| {
                s.parents
                    .iter()
                    .flat_map(|(p, ps)| {
                        ps.exchanges
                            .iter()
                            .map(move |(k, v)| (format!("{p} {k}"), v.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    fn replay(&self, exchanges: Vec<Exchange>) -> futures::future::BoxFuture<'_, Vec<EngineEvent>> {
        Box::pin(self.caller.replay(&self.ctx, exchanges, |hook| {
            if hook == "tombstone" {
                self.tombstone_hook.as_ref()
            } else {
                Some(&self.map_hook)
            }
        }))
    }
}

/// Start a MapController: resolve, start informers and routers, index inputs, queue every
/// parent, announce it; returns its handle and the worker loop to run until `stop`.
pub async fn launch(
    def: Controller<MapControllerSpec>,
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    tracker: Arc<Tracker>,
) -> Result<shared::Launched, StartError> {
    let ctl = MapCtl::start(def, Arc::clone(&ctx), &stop).await?;
    ctl.spawn_routers(&stop);
    MapCtl::enqueue_all(&ctl, Trigger::ParentAdded);
    let parent_resource = ctl.parent_resource().key();
    let lp = Arc::new(MapLoop {
        inner: Arc::clone(&ctl),
    });
    Ok(shared::launched(
        ctx,
        KIND,
        ctl,
        parent_resource,
        lp,
        stop,
        tracker,
    ))
}

/// Adapter so the shared loop can drive a map controller.
pub struct MapLoop {
    /// The controller.
    pub inner: Arc<MapCtl>,
}

impl Reconciler for MapLoop {
    type Key = MapWork;

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn queue(&self) -> &WorkQueue<MapWork, Trigger> {
        &self.inner.queue
    }

    async fn sync(&self, key: &MapWork, triggers: &[Trigger]) -> SyncOutcome {
        self.inner.memory.clear_hot_loops_on(key, triggers);
        self.inner.sync_work(key, triggers).await
    }

    fn confirm_writes(&self) -> bool {
        // A key sync recognises its own writes' echo by fingerprint (no second hook call).
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_keys_display_parent_and_key() {
        let p = ObjectKey::new(Some("ns"), "sched");
        assert_eq!(MapWork::Parent(p.clone()).to_string(), "ns/sched");
        assert_eq!(MapWork::Status(p.clone()).to_string(), "ns/sched (status)");
        assert_eq!(
            MapWork::Key(p, Arc::from("persistentvolumeclaim-a-0123")).to_string(),
            "ns/sched persistentvolumeclaim-a-0123"
        );
    }

    #[test]
    fn only_resyncs_reloads_and_manual_requests_force_a_hook_call() {
        assert!(!forced(&[Trigger::Converge, Trigger::ParentChanged]));
        assert!(!forced(&[Trigger::Child {
            resource: "ConfigMap.v1".into(),
            object: "ns/a".into(),
            event: "updated".into()
        }]));
        for t in [
            Trigger::ResyncPeriod,
            Trigger::ResyncAfter,
            Trigger::Manual,
            Trigger::HookReloaded,
        ] {
            assert!(forced(&[Trigger::Converge, t.clone()]), "{t:?}");
        }
    }

    #[test]
    fn absent_or_null_selector_selects_every_input() {
        let everything = LabelSelector::default();
        assert_eq!(
            planner::map_input_selector(&serde_json::json!({"spec": {}})).unwrap(),
            everything
        );
        assert_eq!(
            planner::map_input_selector(&serde_json::json!({"spec": {"selector": null}})).unwrap(),
            everything
        );
        let e = planner::map_input_selector(
            &serde_json::json!({"spec": {"selector": {"matchLabels": 3}}}),
        )
        .unwrap_err();
        assert!(e.contains("spec.selector is invalid"), "{e}");
    }
}
