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
//!
//! [`crate::runtime::source::snapshot`] builds the same controller on lists read once: the dry run
//! plans each key with it ([`crate::runtime::reconcile::plan_only`]) and the status with [`MapCtl::status_plan`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::{EventSubject, Trigger};
use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{FilterBy, Informer, InformerEvent};
use crate::k8s::object::strip_volatile;
use crate::k8s::object::{self, ObjectKey};
use crate::kinds::shared;
use crate::plan::hookapi;
use crate::plan::map_plan::{self, MAP_KEY_LABEL, StatusInput};
use crate::plan::planner;
use crate::plan::writes::{ChildId, ChildType};
use crate::runtime::carry;
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::controller::{LastExchange, SyncError, SyncOutcome};
use crate::runtime::core::{Core, KindHooks};
use crate::runtime::execute::Target;
use crate::runtime::memory::StoredExchange;
use crate::runtime::reconcile::{self, HookCall, KindController, SyncCx, SyncKind};
use crate::runtime::routing;
use crate::runtime::snapshot::LiveReader;
use crate::runtime::source::{self, Building, Built, Prepare, SnapshotError, Source};
use crate::runtime::start::StartError;
use crate::spec::{Controller, MapControllerSpec};
use kube_apimachinery::selector::LabelSelector;

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

/// Events name the parent, and the map key as a field of its own.
impl crate::events::EventKey for MapWork {
    fn subject(&self) -> crate::events::EventSubject {
        match self {
            MapWork::Parent(p) => EventSubject::parent(p.to_string()),
            MapWork::Status(p) => EventSubject {
                status_only: true,
                ..EventSubject::parent(p.to_string())
            },
            MapWork::Key(p, k) => EventSubject::map_key(p.to_string(), k.as_ref()),
        }
    }
}

/// Observed outputs of one key, by output type (`Kind.apiVersion`).
type Observed = BTreeMap<String, Vec<Arc<Value>>>;
/// Orphans carrying a key's label, with their output type: to adopt.
type Orphans = Vec<(String, Arc<Value>)>;

/// A declared input resource with its source.
struct InputSlot {
    info: ResourceInfo,
    source: Source,
}

/// A declared output resource with its source.
struct OutputSlot {
    info: ResourceInfo,
    source: Source,
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
    exchanges: HashMap<String, StoredExchange>,
}

#[derive(Default)]
struct State {
    /// Map key -> (input slot, object key): every input object in the caches.
    inputs: HashMap<String, (usize, ObjectKey)>,
    /// Per parent.
    parents: HashMap<ObjectKey, ParentState>,
}

/// A running MapController (or one on lists read once, for a dry run).
pub struct MapCtl {
    /// Name, engine services, queue, hook caller, hooks; per-key memory: parent uid ->
    /// `Parent` work (routing of outputs), the status last written under the parent's `Status`
    /// work.
    core: Core<MapWork, MapHooks>,
    def: Controller<MapControllerSpec>,
    parent: ResourceInfo,
    parent_source: Source,
    parent_selector: Option<LabelSelector>,
    inputs: Vec<InputSlot>,
    outputs: Vec<OutputSlot>,
    types: BTreeMap<String, ResourceInfo>,
    state: Mutex<State>,
}

/// A MapController's hooks, resolved.
pub struct MapHooks {
    /// `hooks.map` (required).
    map: HookSpec,
    /// `hooks.tombstone`.
    tombstone: Option<HookSpec>,
}

impl KindHooks for MapHooks {
    fn required(&self) -> (&'static str, &HookSpec) {
        ("map", &self.map)
    }
    fn optional(&self) -> Vec<(&'static str, Option<&HookSpec>)> {
        vec![("tombstone", self.tombstone.as_ref())]
    }
}

/// What a definition gives before its resources are read: its hooks and its parent selector.
pub struct Prepared {
    hooks: MapHooks,
    parent_selector: Option<LabelSelector>,
    /// How many input resources follow the parent.
    inputs: usize,
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

impl Built for MapCtl {
    type Spec = MapControllerSpec;
    type Prepared = Prepared;

    /// Sharded: the parent (first) by uid, the outputs (after the inputs) by their parent's
    /// bucket label; the inputs are not narrowed (any parent may select any input).
    fn cache_filter(prepared: &Prepared, controller: &str, index: usize) -> Option<FilterBy> {
        match index {
            0 => Some(shared::shard_filter(controller, true)),
            i if i <= prepared.inputs => None,
            _ => Some(shared::shard_filter(controller, false)),
        }
    }

    fn prepare(def: &Controller<Self::Spec>, ctx: &EngineContext) -> Prepare<Self> {
        let name = &def.name;
        let hook = |n: &str, h: &Option<crate::spec::Hook>| {
            shared::resolve_hook(ctx, name, def.base_dir(), n, h.as_ref())
        };
        let map_hook = hook("map", &def.spec.hooks.map)?
            .ok_or_else(|| StartError::config(name, "hooks.map is required"))?;
        let tombstone_hook = hook("tombstone", &def.spec.hooks.tombstone)?;
        let parent_selector = shared::parent_selector(name, &def.spec.parent_resource)?;
        let inputs = def.spec.input_resources.iter();
        let inputs = inputs.map(|r| (&r.api_version, &r.resource));
        let outputs = def.spec.output_resources.iter();
        let outputs = outputs.map(|r| (&r.api_version, &r.resource));
        let wanted = source::parent_first(&def.spec.parent_resource, inputs.chain(outputs));
        let prepared = Prepared {
            hooks: MapHooks {
                map: map_hook,
                tombstone: tombstone_hook,
            },
            parent_selector,
            inputs: def.spec.input_resources.len(),
        };
        Ok((prepared, wanted))
    }

    /// The controller on its resolved resources (parent, inputs, outputs, as
    /// `prepare` names them).
    fn build(b: Building<Self>) -> Result<Self, StartError> {
        let name = &b.def.name;
        let ((parent, parent_source), mut resolved) = source::split_parent(name, b.resolved)?;
        let mut inputs = Vec::new();
        for (info, source) in resolved.by_ref().take(b.def.spec.input_resources.len()) {
            let why = ": a namespaced parent only selects inputs in its own namespace; use a cluster-scoped parent";
            shared::check_namespaced(name, &parent, &info, "input", why)?;
            inputs.push(InputSlot { source, info });
        }
        let mut outputs = Vec::new();
        let mut types = BTreeMap::new();
        for (rule, (info, source)) in b.def.spec.output_resources.iter().zip(resolved) {
            let why = "; a namespaced parent cannot own cluster-scoped outputs";
            shared::check_namespaced(name, &parent, &info, "output", why)?;
            let ty = shared::child_type(&info, rule.method());
            types.insert(ty.key.clone(), info.clone());
            outputs.push(OutputSlot { source, info, ty });
        }
        Ok(MapCtl {
            core: Core::new(KIND, name.clone(), b.ctx, &b.reader, b.prepared.hooks),
            def: b.def,
            parent,
            parent_source,
            parent_selector: b.prepared.parent_selector,
            inputs,
            outputs,
            types,
            state: Mutex::new(State::default()),
        })
    }

    fn sources(&self) -> Vec<&Source> {
        let mut all = vec![&self.parent_source];
        all.extend(self.inputs.iter().map(|s| &s.source));
        all.extend(self.outputs.iter().map(|s| &s.source));
        all
    }

    /// Index the inputs by map key from the lists (dev indexes them as its routers start).
    async fn snapshotted(&mut self, _live: &Arc<LiveReader>) -> Result<(), SnapshotError> {
        for i in 0..self.inputs.len() {
            self.reindex_inputs(i);
        }
        Ok(())
    }
}

impl MapCtl {
    /// The parents in scope (`-n`, `parentResource.labelSelector`).
    pub fn parents_in_scope(&self) -> Vec<Arc<Value>> {
        let namespaced = self.parent.namespaced;
        shared::list_in_scope(&self.core.ctx, namespaced, &self.parent_source, |p| {
            self.in_scope(p)
        })
    }

    /// In the `-n` namespace (if any) and selected by `parentResource.labelSelector`.
    fn in_scope(&self, parent: &Value) -> bool {
        shared::in_namespace_scope(&self.core.ctx, self.parent.namespaced, parent)
            && shared::selected(self.parent_selector.as_ref(), parent)
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
            for o in slot.source.select(ns, selector) {
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
        self.core
            .memory
            .remember_uid(parent, &MapWork::Parent(key.clone()));
    }

    /// Index every cached input by map key (start-up, relist).
    fn reindex_inputs(&self, slot: usize) {
        let objs = self.inputs[slot].source.list(None);
        if let Ok(mut st) = self.state.lock() {
            st.inputs.retain(|_, (s, _)| *s != slot);
            for o in objs {
                if let Some(k) = ObjectKey::of(&o) {
                    st.inputs.insert(map_plan::map_key(&o), (slot, k));
                }
            }
        }
    }

    /// Spawn the event routers (parents, inputs, outputs) and index the inputs. They end with
    /// `stop`.
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        routing::spawn_router(&self.parent_source, stop, self, Self::on_parent_event);
        for (i, input) in self.inputs.iter().enumerate() {
            if input.source.informer().is_some() {
                routing::spawn_router(&input.source, stop, self, move |me, ev| {
                    me.on_input_event(i, ev)
                });
                self.reindex_inputs(i);
            }
        }
        for (i, output) in self.outputs.iter().enumerate() {
            routing::spawn_router(&output.source, stop, self, move |me, ev| {
                me.on_output_event(i, ev)
            });
        }
    }

    fn on_parent_event(&self, ev: InformerEvent) {
        match ev {
            InformerEvent::Added(p) => {
                if self.in_scope(&p)
                    && let Some(k) = ObjectKey::of(&p)
                {
                    self.remember_uid(&p, &k);
                    self.core
                        .queue
                        .add(MapWork::Parent(k), Trigger::ParentAdded);
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
                    self.core
                        .queue
                        .add(MapWork::Parent(k), Trigger::ParentChanged);
                } else if self.core.memory.update_matters(
                    &MapWork::Status(k.clone()),
                    &old,
                    &new,
                    false,
                ) {
                    // A status other than the one we wrote: put ours back.
                    self.core
                        .queue
                        .add(MapWork::Status(k), Trigger::ParentChanged);
                }
            }
            InformerEvent::Deleted(p) => {
                if let Some(k) = ObjectKey::of(&p) {
                    self.core.queue.remove(&MapWork::Parent(k.clone()));
                    self.core.queue.remove(&MapWork::Status(k.clone()));
                    self.core.memory.forget(&MapWork::Status(k.clone()), &p);
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
                Some(ns) => self.parent_source.list(Some(ns)),
                None => return,
            }
        } else {
            self.parent_source.list(None)
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
                self.core
                    .queue
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
                let Some(MapWork::Parent(pk)) = self.core.memory.key_of_uid(&r.uid) else {
                    return;
                };
                match mk {
                    Some(k) => self.core.queue.add(MapWork::Key(pk, Arc::from(k)), trigger),
                    None => self
                        .core
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
                    && let Some(obj) = self.inputs[slot].source.get(&key)
                {
                    self.enqueue_input(None, Some(&obj), &trigger);
                }
            }
        }
    }

    /// One unit of work; failures are recorded as `SyncError` events on the parent.
    pub async fn sync_work(&self, work: &MapWork, cx: SyncCx<'_>) -> SyncOutcome {
        let result = match work {
            MapWork::Parent(pk) => self.sync_parent(pk, cx.triggers).await,
            MapWork::Status(pk) => self.sync_status(pk).await,
            // A key sync runs the shared skeleton (this kind's steps: `impl SyncKind`).
            MapWork::Key(..) => return reconcile::sync(self, work, cx).await,
        };
        let with_parent = |f| {
            (
                f,
                self.parent_source.get(work.parent()).map(|p| (*p).clone()),
            )
        };
        carry::finish_sync(&self.core.ctx, result.map_err(with_parent)).await
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
        let parent = self.parent_source.get(pk)?;
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
                self.core
                    .queue
                    .add(MapWork::Status(pk.clone()), Trigger::ParentChanged);
                return Err(SyncError::Parent(e));
            }
        };
        let keys = self.keys(&parent, &selector);
        self.with_parent_state(pk, |ps| {
            ps.fingerprints.retain(|k, _| keys.contains(k));
            ps.failures.retain(|k, _| keys.contains(k));
            ps.exchanges.retain(|k, _| keys.contains(k));
        });
        for k in keys {
            let work = MapWork::Key(pk.clone(), Arc::from(k));
            for t in triggers {
                self.core.queue.add(work.clone(), t.clone());
            }
        }
        self.core
            .queue
            .add(MapWork::Status(pk.clone()), Trigger::ParentChanged);
        Ok(SyncOutcome::default())
    }

    /// Every key of a parent: the inputs it selects and the keys of its outputs (detached ones
    /// included).
    pub fn keys(&self, parent: &Value, selector: &LabelSelector) -> HashSet<String> {
        let (mut keys, _) = self.live_keys(parent, selector);
        let uid = object::uid(parent).unwrap_or_default();
        for slot in &self.outputs {
            for o in slot.source.controlled_by(uid) {
                if let Some(k) = object::label(&o, MAP_KEY_LABEL) {
                    keys.insert(k.to_string());
                }
            }
        }
        keys
    }

    /// The outputs of one key: those this parent controls and carry the key's label, plus
    /// orphans carrying it (to adopt, when `adopt` is set), by output type.
    fn outputs_of(
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
            for o in slot.source.select(ns, &sel) {
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

    /// A key's sync ended well: forget its failure and remember its fingerprint (`Some`;
    /// not while paused) or, for a key that is gone for good (`None`: detached and no output
    /// left), forget it; then queue the parent's status: counts (outputs, conditions,
    /// detached) may have changed with anything this key saw or wrote (coalesced, and
    /// written only when it differs).
    fn key_settled(&self, pk: &ObjectKey, mk: &str, fingerprint: Option<u64>) {
        self.with_parent_state(pk, |ps| {
            ps.failures.remove(mk);
            match fingerprint {
                None => {
                    ps.fingerprints.remove(mk);
                    ps.exchanges.remove(mk);
                }
                Some(f) => {
                    if !self.core.ctx.is_paused() {
                        ps.fingerprints.insert(mk.to_string(), f);
                    }
                }
            }
        });
        self.core
            .queue
            .add_after(MapWork::Status(pk.clone()), Trigger::Converge, STATUS_DELAY);
    }

    /// A key's sync failed (not a 429): remember the failure for the status.
    fn key_failed(&self, pk: &ObjectKey, mk: &str, f: &SyncError) {
        if f.is_failure() {
            let message = f.to_string();
            self.with_parent_state(pk, |ps| {
                ps.fingerprints.remove(mk);
                ps.failures.insert(mk.to_string(), message);
            });
            self.core
                .queue
                .add_after(MapWork::Status(pk.clone()), Trigger::Retry, STATUS_DELAY);
        }
    }

    /// Observed outputs in the hooks' map format, one entry per output resource.
    fn output_map(
        &self,
        version: hookapi::Version,
        observed: &BTreeMap<String, Vec<Arc<Value>>>,
    ) -> Value {
        let declared = self.outputs.iter().map(|s| s.ty.key.as_str());
        hookapi::declared_object_map(version, self.parent.namespaced, declared, observed)
    }

    /// Recompute and write the engine-owned status of a parent.
    async fn sync_status(&self, pk: &ObjectKey) -> Result<SyncOutcome, SyncError> {
        let Some(parent) = self.live_parent(pk) else {
            return Ok(SyncOutcome::default());
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
        let plan = self.status_plan(&parent, &failures, parent_error.as_deref());
        if plan.writes.status.is_none() {
            return Ok(SyncOutcome::default());
        }
        let mut outcome = SyncOutcome::default();
        reconcile::carry_out(self, &MapWork::Status(pk.clone()), &parent, &plan)
            .await?
            .fill(&mut outcome);
        Ok(outcome)
    }

    /// The plan of a parent's engine-owned status (counts and `Synced`), from its inputs and
    /// outputs, its failing keys (`failures`, by key) and an error of its own.
    pub fn status_plan(
        &self,
        parent: &Value,
        failures: &BTreeMap<String, String>,
        parent_error: Option<&str>,
    ) -> planner::SyncPlan {
        let uid = object::uid(parent).unwrap_or_default();
        let selector = planner::map_input_selector(parent);
        let (live, counts) = match &selector {
            Ok(s) => self.live_keys(parent, s),
            Err(_) => (HashSet::new(), vec![0; self.inputs.len()]),
        };
        let parent_error = selector.err().or(parent_error.map(str::to_string));
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
                        s.source.controlled_by(uid),
                    )
                })
                .collect(),
            live_keys: &live,
            failures,
            parent_error: parent_error.as_deref(),
        };
        let now = jiff::Timestamp::now().to_string();
        let (status, synced) = map_plan::aggregate_status(&input, &now);
        planner::plan_map_status(parent, &status, synced)
    }

    /// The key sync's head: parent (without status) and input.
    fn head(parent: &Value, input: Option<&Value>) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        serde_json::to_string(&strip_volatile(parent, true))
            .unwrap_or_default()
            .hash(&mut h);
        input
            .map(|i| (object::uid(i), object::resource_version(i)))
            .hash(&mut h);
        h.finish()
    }

    /// The declared output types, in declaration order.
    fn output_types(&self) -> Vec<ChildType> {
        self.outputs.iter().map(|s| s.ty.clone()).collect()
    }
}

/// What a key sync observed: the input (when the parent selects it), the key's outputs and the
/// orphans carrying its label, and the fingerprint of all that.
pub struct KeySeen {
    mk: Arc<str>,
    uid: String,
    input: Option<Arc<Value>>,
    outputs: Observed,
    orphans: Orphans,
    /// The outputs as the map hook sees them: orphans shown adopted (map keys only).
    shown: Observed,
    /// Hash of the parent (without status) and the input.
    head: u64,
}

impl KeySeen {
    /// The key's input, when the parent selects it (`None`: detached).
    pub fn input(&self) -> Option<&Arc<Value>> {
        self.input.as_ref()
    }
}

/// The map or tombstone hook's answer.
pub enum Decided {
    /// Map hook: the key's desired outputs (tagged with the key).
    Map {
        /// Desired outputs.
        desired: Vec<(ChildId, Value)>,
        /// `resyncAfterSeconds`.
        resync: Option<f64>,
    },
    /// Tombstone hook: the detached outputs to keep.
    Tombstone {
        /// Outputs kept.
        keep: BTreeSet<ChildId>,
        /// `resyncAfterSeconds`.
        resync: Option<f64>,
    },
}

impl SyncKind for MapCtl {
    type Key = MapWork;
    type Seen = KeySeen;
    type Answer = Decided;
    const CARRY_OUT_EMPTY: bool = false;
    const DROP_OWN_ECHOES: bool = false;

    type Hooks = MapHooks;

    fn core(&self) -> &Core<MapWork, MapHooks> {
        &self.core
    }

    /// Only map keys go through the skeleton; their parent must be live and in scope.
    fn parent(&self, work: &MapWork) -> Option<Arc<Value>> {
        match work {
            MapWork::Key(pk, _) => self.live_parent(pk),
            MapWork::Parent(_) | MapWork::Status(_) => None,
        }
    }

    /// Every work item (a parent's fan-out and status too, which [`SyncKind::parent`] does
    /// not give) is synced by the replica owning its parent.
    fn shard_parent(&self, work: &MapWork) -> Option<Arc<Value>> {
        self.parent_source.get(work.parent())
    }

    /// The key's input and outputs; nothing to do when they are as the last successful sync
    /// left them (unless forced), or when the input is gone and no output is left.
    async fn observe(
        &self,
        work: &MapWork,
        parent: &Value,
        cx: SyncCx<'_>,
    ) -> Result<Option<KeySeen>, SyncError> {
        let MapWork::Key(pk, mk) = work else {
            return Ok(None);
        };
        let Ok(selector) = planner::map_input_selector(parent) else {
            // The parent's own sync reports it.
            return Ok(None);
        };
        let input = self
            .state
            .lock()
            .ok()
            .and_then(|s| s.inputs.get(&**mk).cloned())
            .and_then(|(slot, key)| self.inputs[slot].source.get(&key))
            .filter(|o| map_plan::map_key(o) == **mk && self.selects(parent, &selector, o));
        let (outputs, orphans) = self.outputs_of(parent, mk, input.is_some())?;
        let head = Self::head(parent, input.as_deref());
        let before = Self::fingerprint(head, &outputs, &orphans);
        let remembered = self.with_parent_state(pk, |ps| ps.fingerprints.get(&**mk).copied());
        if !forced(cx.triggers) && remembered.flatten() == Some(before) {
            return Ok(None);
        }
        if input.is_none() && outputs.values().all(Vec::is_empty) {
            self.key_settled(pk, mk, None);
            return Ok(None);
        }
        // Orphans carrying this key are adopted; the map hook sees them as ours.
        let mut shown = outputs.clone();
        if input.is_some() {
            for (t, o) in &orphans {
                shown
                    .entry(t.clone())
                    .or_default()
                    .push(Arc::new(planner::as_adopted(o, parent)));
            }
        }
        Ok(Some(KeySeen {
            mk: Arc::clone(mk),
            uid: object::uid(parent).unwrap_or_default().to_string(),
            input,
            outputs,
            orphans,
            shown,
            head,
        }))
    }

    /// The map hook for a selected input, the tombstone hook (if any) for one that is gone.
    fn hook(&self, parent: &Value, seen: &KeySeen) -> Option<HookCall<'_>> {
        Some(match &seen.input {
            Some(input) => {
                let spec = &self.core.hooks.map;
                let outputs = self.output_map(spec.version, &seen.shown);
                let request = hookapi::map_request(&self.def.raw, parent, &seen.mk, input, outputs);
                HookCall {
                    name: "map",
                    spec,
                    request,
                }
            }
            None => {
                let spec = self.core.hooks.tombstone.as_ref()?;
                let outputs = self.output_map(spec.version, &seen.outputs);
                let request = hookapi::tombstone_request(&self.def.raw, parent, &seen.mk, outputs);
                HookCall {
                    name: "tombstone",
                    spec,
                    request,
                }
            }
        })
    }

    /// The last exchange per map key, in the parent's state.
    fn record(&self, work: &MapWork, hook: &str, request: &Value, response: &Value) {
        if let MapWork::Key(pk, mk) = work {
            let x = StoredExchange::sharing(hook, request, response, |obj| {
                crate::runtime::memory::cached_text(obj, |t| self.informer_for(t))
            });
            self.with_parent_state(pk, |ps| ps.exchanges.insert(mk.to_string(), x));
        }
    }

    /// Map: decode, normalize, tag with the key, refuse clashes. Tombstone: the outputs kept.
    async fn desired(
        &self,
        _work: &MapWork,
        parent: &Value,
        seen: &KeySeen,
        (hook_name, spec): (&'static str, &HookSpec),
        body: &Value,
    ) -> Result<Decided, SyncError> {
        let fail = |message: String| SyncError::answer(hook_name, message);
        let resp =
            hookapi::decode_map(hook_name, spec.version, body).map_err(|e| fail(e.to_string()))?;
        let types = self.output_types();
        let resync = resp.resync_after_seconds;
        let Some(input) = &seen.input else {
            let keep =
                planner::tombstone_kept(parent, &seen.mk, &types, &seen.outputs, &resp.outputs)
                    .map_err(fail)?;
            return Ok(Decided::Tombstone { keep, resync });
        };
        let mut desired = planner::normalize_desired(
            parent,
            &types,
            &LabelSelector::default(),
            false,
            resp.outputs,
        )
        .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
        map_plan::tag_outputs(&mut desired, &seen.mk, &map_plan::input_ref(input));
        shared::label_shard(&self.core.ctx, &self.core.name, parent, &mut desired);
        map_plan::check_clashes(&desired, &seen.uid, &seen.mk, |id| {
            let slot = self.outputs.iter().find(|s| s.ty.key == id.type_key)?;
            slot.source.get(&id.object_key())
        })
        .map_err(|e| fail(format!("{hook_name} hook: {e}")))?;
        Ok(Decided::Map { desired, resync })
    }

    fn plan(
        &self,
        work: &MapWork,
        parent: &Value,
        seen: &KeySeen,
        answer: Option<&Decided>,
    ) -> planner::SyncPlan {
        let no_keep = BTreeSet::new();
        let (observed, orphans, answer): (_, &[_], _) = match answer {
            Some(Decided::Map { desired, resync }) => (
                &seen.shown,
                &seen.orphans,
                planner::MapAnswer::Map {
                    desired,
                    resync_after_seconds: *resync,
                },
            ),
            Some(Decided::Tombstone { keep, resync }) => (
                &seen.outputs,
                &[],
                planner::MapAnswer::Tombstone {
                    keep,
                    resync_after_seconds: *resync,
                },
            ),
            None => (
                &seen.outputs,
                &[],
                planner::MapAnswer::Tombstone {
                    keep: &no_keep,
                    resync_after_seconds: None,
                },
            ),
        };
        planner::plan_map_key(&planner::MapKeyInput {
            parent,
            map_key: &seen.mk,
            types: &self.output_types(),
            observed,
            orphans,
            answer,
            held: &self.core.memory.held_fields(work),
        })
    }

    /// The parent alone: the map key is a field of its own.
    fn event_parent(&self, work: &MapWork) -> String {
        work.parent().to_string()
    }

    fn target<'a>(&'a self, work: &MapWork, parent: &'a Value) -> Target<'a> {
        Target {
            controller: &self.core.name,
            parent,
            parent_info: &self.parent,
            types: &self.types,
            revisions: None,
            finalizer: "",
            subject: crate::events::EventKey::subject(work),
        }
    }

    fn informer_for(&self, type_key: &str) -> Option<&Arc<Informer>> {
        if type_key == self.parent.key() {
            return self.parent_source.informer();
        }
        self.outputs
            .iter()
            .find(|s| s.ty.key == type_key)
            .and_then(|s| s.source.informer())
    }

    /// Remember the key's fingerprint (outputs read again after writes) or its failure.
    fn settle(
        &self,
        work: &MapWork,
        parent: &Value,
        seen: &KeySeen,
        result: Result<SyncOutcome, SyncError>,
    ) -> Result<SyncOutcome, SyncError> {
        let MapWork::Key(pk, mk) = work else {
            return result;
        };
        match result {
            Ok(outcome) => {
                let after = if outcome.writes > 0 {
                    let (o, orph) = self.outputs_of(parent, mk, seen.input.is_some())?;
                    Self::fingerprint(seen.head, &o, &orph)
                } else {
                    Self::fingerprint(seen.head, &seen.outputs, &seen.orphans)
                };
                self.key_settled(pk, mk, Some(after));
                Ok(outcome)
            }
            Err(f) => {
                self.key_failed(pk, mk, &f);
                Err(f)
            }
        }
    }
}

impl KindController for MapCtl {
    const KIND: &'static str = KIND;
    /// A key sync recognises its own writes' echo by fingerprint (no second hook call).
    const CONFIRM_WRITES: bool = false;

    fn parent_resources(&self) -> String {
        self.parent.key()
    }
    /// Every parent in scope under its `Parent` work (which fans out to its keys).
    fn keyed_parents(&self) -> Vec<(MapWork, Arc<Value>)> {
        shared::keyed(self.parents_in_scope(), MapWork::Parent)
    }
    fn exchanges(&self) -> Vec<LastExchange> {
        self.state
            .lock()
            .map(|s| {
                s.parents
                    .iter()
                    .flat_map(|(p, ps)| {
                        ps.exchanges
                            .iter()
                            .map(move |(k, x)| x.to_last(EventSubject::map_key(p.to_string(), k)))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    fn resync_period_seconds(&self) -> Option<i32> {
        self.def.spec.resync_period_seconds
    }
    fn spawn_routers(self: &Arc<Self>, stop: &CancellationToken) {
        MapCtl::spawn_routers(self, stop);
    }
    async fn work(&self, work: &MapWork, cx: SyncCx<'_>) -> SyncOutcome {
        self.sync_work(work, cx).await
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

    #[test]
    fn call_records_carry_the_map_key_of_map_controller_keys() {
        use crate::runtime::caller::Caller;
        let p = crate::k8s::object::ObjectKey::new(Some("ns"), "p");
        let plain = Caller::new("CompositeController", "c").info("sync", &p);
        assert_eq!((plain.parent.as_str(), plain.map_key), ("ns/p", None));
        let map = Caller::new("MapController", "m")
            .info("map", &MapWork::Key(p.clone(), "configmap-a-0123".into()));
        assert_eq!(map.parent, "ns/p");
        assert_eq!(map.map_key.as_deref(), Some("configmap-a-0123"));
        assert_eq!(map.label(), "ns/p configmap-a-0123");
        // A parent-level key of a map controller has no map key.
        let whole = Caller::new("MapController", "m").info("map", &MapWork::Parent(p));
        assert_eq!(whole.map_key, None);
    }
}
