//! The pure planning entry point: "given this parent and what the cluster holds, what would a
//! sync do?".
//!
//! Everything here is a function of its inputs: no informers, no lease, no API calls, no
//! events. The live sync path (`composite`, `decorator`, `map`) builds the inputs from its
//! caches and hook answers, calls these functions, then hands [`SyncPlan::writes`] to the
//! executor (`engine::execute`) in the mode the engine runs in; `kubectl meta dryrun` builds the
//! same inputs from plain API reads and prints the [`SyncPlan`]; the TUI shows the per-object
//! view ([`SyncPlan::objects`], published as `EngineEvent::Planned`).
//!
//! A sync is planned in two pure steps around the hook call:
//! 1. [`claim`]: which observed objects are the parent's children (owned ones that still match,
//!    orphans to adopt, owned ones to release). Its [`Claimed::observed`] is what the hook request
//!    shows.
//! 2. [`plan_composite`] / [`plan_decorator`] / [`plan_map_key`] / [`plan_map_status`]: the hook
//!    answer (already decoded, normalized with [`normalize_desired`] and checked with
//!    [`foreign_clashes`]) in, a typed
//!    [`SyncPlan`] out.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::k8s::object;
use crate::plan::apply::{FieldChange, HeldField};
use crate::plan::ownership;
use crate::plan::rollout::{RevisionWrite, RolloutState};
pub use crate::plan::writes::normalize_desired;
use crate::plan::writes::{
    self, ChildId, ChildType, ChildrenInput, DeleteReason, FinalizerChange, MetadataPatch,
    SkipReason, Writes,
};
use crate::spec::UpdateMethod;
use kube_apimachinery::selector::LabelSelector;

/// What a sync does to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ObjectAction {
    /// Create it (the hook wants it, it does not exist).
    Create,
    /// Update it in place (strategy InPlace or RollingInPlace, or only the last-applied
    /// annotation differs).
    Update,
    /// Delete it so that it is created again as desired (strategy Recreate or RollingRecreate).
    Recreate,
    /// Delete it (no longer desired; or, for a MapController, a detached output the tombstone
    /// hook does not keep).
    Delete,
    /// Add our ControllerRef to an orphan that matches the selector.
    Adopt,
    /// Remove our ControllerRef from an owned object that no longer matches.
    Release,
    /// Nothing to write: it is as desired.
    InSync,
    /// A difference left alone (strategy OnDelete, or the object is being deleted).
    Skip,
    /// A rolling update has not reached it yet: it stays as its (older) revision wants it.
    Waiting,
    /// A MapController's detached output the tombstone hook keeps.
    Keep,
}

impl ObjectAction {
    /// The one-character marker the TUI shows (`=` in sync, `~` update, `+` create, `-` delete
    /// or recreate, `a` adopt, `r` release, `w` waiting, `s` skipped, `k` kept).
    pub fn marker(self) -> char {
        match self {
            ObjectAction::Create => '+',
            ObjectAction::Update => '~',
            ObjectAction::Recreate | ObjectAction::Delete => '-',
            ObjectAction::Adopt => 'a',
            ObjectAction::Release => 'r',
            ObjectAction::InSync => '=',
            ObjectAction::Skip => 's',
            ObjectAction::Waiting => 'w',
            ObjectAction::Keep => 'k',
        }
    }
}

/// Where a rolling child stands in its rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPosition {
    /// The revision that claims it after this sync.
    pub revision: String,
    /// True when that is the latest revision.
    pub latest: bool,
    /// Its 1-based position in the latest revision's order (the order children are rolled).
    pub position: usize,
    /// How many rolling children the latest revision has.
    pub total: usize,
}

/// One object's part of a sync.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectPlan {
    /// Which object (`type` = `Kind.apiVersion`, namespace, name).
    #[serde(flatten)]
    pub id: ChildId,
    /// Its kind.
    pub kind: String,
    /// What the sync does to it.
    pub action: ObjectAction,
    /// The update strategy of its type (for updates, recreates and skips).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<UpdateMethod>,
    /// Why, in a few words (`not desired`, `OnDelete`, `being deleted`, `changed: spec.x`,
    /// `selector matches`, `waiting for revision r`).
    pub reason: String,
    /// The fields that differ (updates, recreates, skips).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Changes left out of the published event (its size bound, see
    /// [`published_objects`](crate::events::published_objects)); 0 in the plan itself.
    #[serde(skip_serializing_if = "is_zero")]
    pub changes_omitted: usize,
    /// The object as observed (absent for a create).
    #[serde(skip)]
    pub before: Option<Arc<Value>>,
    /// The object as the write leaves it (the three-way merge result for an update, the object
    /// to create, the observed object with the new ownerReferences for adopt and release);
    /// absent for deletes and for objects left alone.
    #[serde(skip)]
    pub after: Option<Value>,
    /// Rolling children: where the rollout stands for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutPosition>,
}

/// Serde: leave a zero count out.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a MapController decides about one detached output (its map key's input is gone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetachedOutput {
    /// Which output.
    #[serde(flatten)]
    pub id: ChildId,
    /// True when the tombstone hook keeps it (else it is deleted).
    pub kept: bool,
}

/// The rolling-update decision a CompositeController took for this sync (computed by the live
/// path, which calls the hook once per old revision, with `rollout::step`).
#[derive(Debug, Clone, Default)]
pub struct RolloutDecision {
    /// Where the rollout stands.
    pub state: Option<RolloutState>,
    /// ControllerRevision writes.
    pub writes: Vec<RevisionWrite>,
    /// Child -> revision claiming it after this sync.
    pub claims: BTreeMap<ChildId, String>,
    /// The latest revision's name.
    pub latest: String,
    /// The latest revision's rolling children in hook order.
    pub order: Vec<ChildId>,
}

/// Everything one sync of one parent (or one map key) does: the typed plan.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncPlan {
    /// MapController: the map key this plan is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_key: Option<String>,
    /// Per object, in execution order (an adopted object that also changes appears twice:
    /// `adopt`, then `update`).
    pub objects: Vec<ObjectPlan>,
    /// MapController: the detached outputs of this key and the tombstone decision for each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detached: Vec<DetachedOutput>,
    /// The parent's status before (`null` when it has none) and after, when it changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusChange>,
    /// The parent's finalizer change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<FinalizerChange>,
    /// Labels/annotations merged into the parent (DecoratorController).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataPatch>,
    /// Where a rolling update stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutState>,
    /// The hook's `resyncAfterSeconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_after_seconds: Option<f64>,
    /// The writes, in the form the executor carries out.
    #[serde(skip)]
    pub writes: Writes,
}

/// A change of the parent's status.
#[derive(Debug, Clone, Serialize)]
pub struct StatusChange {
    /// The status as observed (`null` when none).
    pub before: Value,
    /// The status written.
    pub after: Value,
}

impl SyncPlan {
    /// The observed objects of the plan that have not reached what their spec asks
    /// ([`kstatus`](crate::plan::kstatus)): (still moving, failed), one
    /// `Kind namespace/name: why` each.
    pub fn children_not_current(&self) -> (Vec<String>, Vec<String>) {
        use crate::plan::kstatus::{self, Status};
        let (mut moving, mut failed) = (Vec::new(), Vec::new());
        for o in &self.objects {
            let Some(obj) = o.before.as_deref() else {
                continue;
            };
            match kstatus::compute(obj) {
                Status::Current => {}
                Status::InProgress(why) => {
                    moving.push(format!("{} {}: {why}", o.kind, o.id.object()))
                }
                Status::Failed(why) => failed.push(format!("{} {}: {why}", o.kind, o.id.object())),
            }
        }
        (moving, failed)
    }

    /// Number of API writes the plan makes.
    pub fn write_count(&self) -> usize {
        self.writes.writes()
    }

    /// The objects that change (everything but in-sync, waiting and kept objects).
    pub fn changing(&self) -> impl Iterator<Item = &ObjectPlan> {
        self.objects.iter().filter(|o| {
            !matches!(
                o.action,
                ObjectAction::InSync | ObjectAction::Waiting | ObjectAction::Keep
            )
        })
    }
}

/// The result of [`claim`]: the children the hook sees and the ownership edits.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    /// Claimed children per type key (`Kind.apiVersion`), adopted orphans shown as they will
    /// be once adopted (with our ControllerRef), as Metacontroller shows them to the hook.
    pub observed: BTreeMap<String, Vec<Arc<Value>>>,
    /// Orphans to adopt and owned objects to release, as executable edits.
    pub ownership: Writes,
    /// The orphans to adopt as observed (before our ControllerRef).
    pub orphans: BTreeMap<ChildId, Arc<Value>>,
}

/// One child type's candidates for [`claim`].
#[derive(Debug, Clone)]
pub struct Candidates<'a> {
    /// The type key (`Kind.apiVersion`).
    pub type_key: &'a str,
    /// Objects whose ControllerRef is the parent (any labels).
    pub owned: Vec<Arc<Value>>,
    /// Objects without a ControllerRef in the parent's scope (any labels; the selector is
    /// applied here).
    pub orphans: Vec<Arc<Value>>,
}

/// A CompositeController parent's child selector: `controller-uid: <uid>` with
/// `generateSelector`, else the parent's non-empty `spec.selector`. The error says how to fix
/// the parent or the controller.
pub fn composite_selector(parent: &Value, generate: bool) -> Result<LabelSelector, String> {
    if generate {
        let uid = object::uid(parent).unwrap_or_default();
        return LabelSelector::parse(&format!("{}={uid}", ownership::CONTROLLER_UID_LABEL))
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

/// A MapController parent's input selector: `spec.selector`; absent or null selects all.
pub fn map_input_selector(parent: &Value) -> Result<LabelSelector, String> {
    match parent.pointer("/spec/selector") {
        None | Some(Value::Null) => Ok(LabelSelector::default()),
        Some(s) => LabelSelector::from_label_selector(s).map_err(|e| {
            format!("the parent's spec.selector is invalid: {e}; use matchLabels/matchExpressions")
        }),
    }
}

/// The outputs of map key `mk` the tombstone hook keeps (`listed`, its answer); each must be a
/// detached output of this key (in `observed`) of one of the output `types`.
pub fn tombstone_kept(
    parent: &Value,
    mk: &str,
    types: &[ChildType],
    observed: &BTreeMap<String, Vec<Arc<Value>>>,
    listed: &[Value],
) -> Result<BTreeSet<ChildId>, String> {
    let have: BTreeSet<ChildId> = observed
        .iter()
        .flat_map(|(t, objs)| objs.iter().map(move |o| ChildId::of(t, o)))
        .collect();
    let mut keep = BTreeSet::new();
    for (i, o) in listed.iter().enumerate() {
        let (av, kind) = (
            object::api_version(o).unwrap_or_default(),
            object::kind(o).unwrap_or_default(),
        );
        let Some(t) = types.iter().find(|t| t.api_version == av && t.kind == kind) else {
            return Err(format!(
                "tombstone hook: outputs[{i}] is a {kind}.{av}, which is not an output resource of this controller"
            ));
        };
        let mut v = o.clone();
        if t.namespaced && object::namespace(o).is_none_or(str::is_empty) {
            v["metadata"]["namespace"] = Value::from(object::namespace(parent).unwrap_or_default());
        }
        let id = ChildId::of(&t.key, &v);
        if !have.contains(&id) {
            return Err(format!(
                "tombstone hook: outputs[{i}] ({id}) is not a detached output of map key {mk}; the tombstone hook can only keep existing outputs, not create or rename them"
            ));
        }
        keep.insert(id);
    }
    Ok(keep)
}

/// Claim children for `parent` (ControllerRef rules, see `engine::ownership`): keep owned
/// objects that match `selector`, adopt matching orphans (unless the parent is being deleted),
/// release owned ones that stopped matching.
pub fn claim<'a>(
    parent: &Value,
    selector: &LabelSelector,
    candidates: impl IntoIterator<Item = Candidates<'a>>,
) -> Claimed {
    let deleting = object::is_deleting(parent);
    let mut out = Claimed::default();
    for c in candidates {
        let claims = ownership::claim(deleting, selector, c.owned, c.orphans);
        writes::plan_ownership(
            parent,
            c.type_key,
            &claims.adopt,
            &claims.release,
            &mut out.ownership,
        );
        let adopted: HashSet<&str> = claims.adopt.iter().filter_map(|o| object::uid(o)).collect();
        out.orphans.extend(
            claims
                .adopt
                .iter()
                .map(|o| (ChildId::of(c.type_key, o), Arc::clone(o))),
        );
        let children = claims
            .children
            .iter()
            .map(|c| match object::uid(c) {
                Some(u) if adopted.contains(u) => Arc::new(as_adopted(c, parent)),
                _ => Arc::clone(c),
            })
            .collect();
        out.observed.insert(c.type_key.to_string(), children);
    }
    out
}

/// `obj` as it is once `parent` adopted it (our ControllerRef added).
pub fn as_adopted(obj: &Value, parent: &Value) -> Value {
    let mut v = obj.clone();
    v["metadata"]["ownerReferences"] = Value::Array(ownership::with_controller_ref(obj, parent));
    v
}

/// The desired children whose names are taken by objects that are not ours, as
/// `Kind.apiVersion ns/name why` (empty when none). `existing` finds the live object of an id
/// (a cache look-up or a GET); `clash` says why it is not ours (see [`controlled_by_other`]).
/// Such objects are never taken over, and a create would only fail with AlreadyExists on every
/// sync, so a non-empty answer fails the sync before anything is written.
pub fn foreign_clashes(
    desired: &[(ChildId, Value)],
    existing: impl Fn(&ChildId) -> Option<Arc<Value>>,
    clash: impl Fn(&Value) -> Option<String>,
) -> Vec<String> {
    desired
        .iter()
        .filter_map(|(id, _)| {
            let obj = existing(id)?;
            let why = clash(&obj)?;
            Some(format!("{} {} {why}", id.type_key, id.object()))
        })
        .collect()
}

/// `is controlled by Kind name (uid u)` when `obj`'s controller is not the object with `uid`.
pub fn controlled_by_other(obj: &Value, uid: &str) -> Option<String> {
    let r = object::controller_ref(obj).filter(|r| r.uid != uid)?;
    Some(format!(
        "is controlled by {} {} (uid {})",
        r.kind, r.name, r.uid
    ))
}

/// The sync (or finalize) hook's answer, decoded and normalized.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// The desired children, normalized ([`normalize_desired`]); for a rolling update, each
    /// rolling child as the revision claiming it wants it.
    pub desired: &'a [(ChildId, Value)],
    /// The `status` answered (`None`: absent or null).
    pub status: Option<&'a Value>,
    /// `finalized` (finalize hook).
    pub finalized: bool,
    /// `resyncAfterSeconds`.
    pub resync_after_seconds: Option<f64>,
}

/// The parent's finalizer: its name, and what decides whether it is wanted.
#[derive(Debug, Clone, Copy)]
pub struct FinalizerInput<'a> {
    /// The finalizer (`metacontroller.io/compositecontroller-NAME`).
    pub name: &'a str,
    /// The controller has a finalize hook.
    pub has_finalize_hook: bool,
    /// The parent is being deleted, or stopped matching the definition's selector.
    pub finalizing: bool,
}

/// Inputs of [`plan_composite`].
#[derive(Debug)]
pub struct CompositeInput<'a> {
    /// The parent as observed.
    pub parent: &'a Value,
    /// The declared child types.
    pub types: &'a [ChildType],
    /// The result of [`claim`].
    pub claimed: &'a Claimed,
    /// The hook's answer; `None` when no hook runs (finalizing without a finalize hook).
    pub answer: Option<Answer<'a>>,
    /// The rolling-update decision, when a child type rolls.
    pub rollout: Option<&'a RolloutDecision>,
    /// The parent's finalizer.
    pub finalizer: FinalizerInput<'a>,
    /// Fields the hot-loop guard holds, by child (empty for a fresh plan).
    pub held: &'a BTreeMap<ChildId, Vec<HeldField>>,
    /// The time a rollout condition changing now is stamped with (RFC 3339).
    pub now: &'a str,
}

/// Plan one sync of a CompositeController parent.
pub fn plan_composite(input: &CompositeInput<'_>) -> SyncPlan {
    let mut writes = input.claimed.ownership.clone();
    let mut rollout_state = None;
    let mut status = None;
    let mut finalized = false;
    let mut resync_after = None;
    let mut desired: &[(ChildId, Value)] = &[];
    if let Some(answer) = input.answer {
        desired = answer.desired;
        let mut conditions = Vec::new();
        if let Some(r) = input.rollout {
            writes.revisions = r.writes.clone();
            if let Some(state) = &r.state {
                conditions.push(state.condition(input.now));
            }
            writes.rollout = r.state.clone();
            rollout_state = r.state.clone();
        }
        writes::plan_children(
            &ChildrenInput {
                parent: input.parent,
                types: input.types,
                observed: &input.claimed.observed,
                desired,
                held: input.held,
            },
            &mut writes,
        );
        writes.status = writes::status_change(input.parent, answer.status, &conditions);
        status = writes.status.clone();
        finalized = answer.finalized;
        resync_after = answer.resync_after_seconds;
    }
    // Finalizing covers a parent that stopped matching the definition's labelSelector: it
    // keeps our finalizer until its finalize hook answers `finalized: true` (or has no
    // finalize hook), like a deleted one.
    writes.finalizer = writes::finalizer_change(
        input.parent,
        input.finalizer.name,
        input.finalizer.has_finalize_hook,
        input.finalizer.finalizing,
        finalized,
    );
    let mut out = SyncPlan {
        objects: objects(
            input.types,
            &input.claimed.observed,
            &input.claimed.orphans,
            desired,
            &writes,
            input.rollout,
        ),
        status: status.map(|after| StatusChange {
            before: input.parent.get("status").cloned().unwrap_or(Value::Null),
            after,
        }),
        finalizer: writes.finalizer,
        rollout: rollout_state,
        resync_after_seconds: resync_after,
        ..SyncPlan::default()
    };
    out.writes = writes;
    out
}

/// A DecoratorController's answer for one target, decoded and normalized.
#[derive(Debug, Clone, Copy)]
pub struct DecoratorAnswer<'a> {
    /// Children/attachments and the rest of the answer.
    pub answer: Answer<'a>,
    /// Labels to set (`Some`) or remove (`None`) on the target.
    pub labels: &'a BTreeMap<String, Option<String>>,
    /// Annotations to set or remove on the target.
    pub annotations: &'a BTreeMap<String, Option<String>>,
}

/// Inputs of [`plan_decorator`].
#[derive(Debug)]
pub struct DecoratorInput<'a> {
    /// The target as observed.
    pub target: &'a Value,
    /// The attachment types.
    pub types: &'a [ChildType],
    /// The target's attachments per type key (controlled by it, carrying the decorator's
    /// annotation).
    pub observed: &'a BTreeMap<String, Vec<Arc<Value>>>,
    /// The hook's answer; `None` when no hook runs.
    pub answer: Option<DecoratorAnswer<'a>>,
    /// The target's finalizer.
    pub finalizer: FinalizerInput<'a>,
    /// Fields the hot-loop guard holds.
    pub held: &'a BTreeMap<ChildId, Vec<HeldField>>,
}

/// Plan one sync of a DecoratorController target: attachments, labels/annotations, status
/// (`status: null` or absent leaves it alone; no observedGeneration), finalizer.
pub fn plan_decorator(input: &DecoratorInput<'_>) -> SyncPlan {
    let mut writes = Writes::default();
    let mut finalized = false;
    let mut resync_after = None;
    let mut desired: &[(ChildId, Value)] = &[];
    if let Some(d) = input.answer {
        desired = d.answer.desired;
        writes::plan_children(
            &ChildrenInput {
                parent: input.target,
                types: input.types,
                observed: input.observed,
                desired,
                held: input.held,
            },
            &mut writes,
        );
        writes.metadata = writes::metadata_change(input.target, d.labels, d.annotations);
        if let Some(st) = d.answer.status {
            let current = input.target.get("status").cloned().unwrap_or(Value::Null);
            if !crate::plan::apply::values_equal(&current, st) {
                writes.status = Some(st.clone());
            }
        }
        finalized = d.answer.finalized;
        resync_after = d.answer.resync_after_seconds;
    }
    writes.finalizer = writes::finalizer_change(
        input.target,
        input.finalizer.name,
        input.finalizer.has_finalize_hook,
        input.finalizer.finalizing,
        finalized,
    );
    let mut out = SyncPlan {
        objects: objects(
            input.types,
            input.observed,
            &BTreeMap::new(),
            desired,
            &writes,
            None,
        ),
        status: writes.status.clone().map(|after| StatusChange {
            before: input.target.get("status").cloned().unwrap_or(Value::Null),
            after,
        }),
        finalizer: writes.finalizer,
        metadata: writes.metadata.clone(),
        resync_after_seconds: resync_after,
        ..SyncPlan::default()
    };
    out.writes = writes;
    out
}

/// What a MapController's hooks answered for one map key.
#[derive(Debug, Clone, Copy)]
pub enum MapAnswer<'a> {
    /// The input exists: the map hook's outputs (normalized, tagged with the key).
    Map {
        /// The desired outputs.
        desired: &'a [(ChildId, Value)],
        /// `resyncAfterSeconds`.
        resync_after_seconds: Option<f64>,
    },
    /// The input is gone: the outputs the tombstone hook keeps (empty without a tombstone
    /// hook).
    Tombstone {
        /// The detached outputs kept.
        keep: &'a BTreeSet<ChildId>,
        /// `resyncAfterSeconds` of the tombstone hook.
        resync_after_seconds: Option<f64>,
    },
}

/// Inputs of [`plan_map_key`].
#[derive(Debug)]
pub struct MapKeyInput<'a> {
    /// The parent (MapController object of the parent resource).
    pub parent: &'a Value,
    /// The map key.
    pub map_key: &'a str,
    /// The output types.
    pub types: &'a [ChildType],
    /// This key's outputs per type key, adopted orphans included as [`as_adopted`] shows them.
    pub observed: &'a BTreeMap<String, Vec<Arc<Value>>>,
    /// Orphans carrying this key, to adopt: (type key, object as observed).
    pub orphans: &'a [(String, Arc<Value>)],
    /// What the hooks answered.
    pub answer: MapAnswer<'a>,
    /// Fields the hot-loop guard holds.
    pub held: &'a BTreeMap<ChildId, Vec<HeldField>>,
}

/// Plan one map key of a MapController: adopt orphans carrying the key, then create, update
/// and delete outputs as the map hook answers; or, when its input is gone, delete the detached
/// outputs the tombstone hook does not keep.
pub fn plan_map_key(input: &MapKeyInput<'_>) -> SyncPlan {
    let mut writes = Writes::default();
    let mut out = SyncPlan {
        map_key: Some(input.map_key.to_string()),
        ..SyncPlan::default()
    };
    match input.answer {
        MapAnswer::Map {
            desired,
            resync_after_seconds,
        } => {
            for (t, o) in input.orphans {
                writes::plan_ownership(input.parent, t, std::slice::from_ref(o), &[], &mut writes);
            }
            writes::plan_children(
                &ChildrenInput {
                    parent: input.parent,
                    types: input.types,
                    observed: input.observed,
                    desired,
                    held: input.held,
                },
                &mut writes,
            );
            let orphans = input
                .orphans
                .iter()
                .map(|(t, o)| (ChildId::of(t, o), Arc::clone(o)))
                .collect();
            out.objects = objects(
                input.types,
                input.observed,
                &orphans,
                desired,
                &writes,
                None,
            );
            out.resync_after_seconds = resync_after_seconds;
        }
        MapAnswer::Tombstone {
            keep,
            resync_after_seconds,
        } => {
            crate::plan::map_plan::plan_detached(input.observed, keep, &mut writes);
            out.detached = input
                .observed
                .iter()
                .flat_map(|(t, objs)| objs.iter().map(move |o| ChildId::of(t, o)))
                .map(|id| DetachedOutput {
                    kept: keep.contains(&id),
                    id,
                })
                .collect();
            let kept: Vec<(ChildId, Value)> = input
                .observed
                .iter()
                .flat_map(|(t, objs)| objs.iter().map(move |o| (ChildId::of(t, o), o)))
                .filter(|(id, _)| keep.contains(id))
                .map(|(id, o)| (id, (**o).clone()))
                .collect();
            out.objects = objects(
                input.types,
                input.observed,
                &BTreeMap::new(),
                &kept,
                &writes,
                None,
            );
            for o in &mut out.objects {
                if o.action == ObjectAction::InSync {
                    o.action = ObjectAction::Keep;
                    o.reason = "detached; kept by the tombstone hook".into();
                } else if o.action == ObjectAction::Delete {
                    o.reason = "detached; not kept by the tombstone hook".into();
                }
            }
            out.resync_after_seconds = resync_after_seconds;
        }
    }
    out.writes = writes;
    out
}

/// Plan the engine-owned status write of a MapController parent (`status` and the `Synced`
/// condition from `map_plan::aggregate_status`).
pub fn plan_map_status(parent: &Value, status: &Value, synced: Value) -> SyncPlan {
    let writes = Writes {
        status: writes::status_change(parent, Some(status), &[synced]),
        ..Writes::default()
    };
    SyncPlan {
        status: writes.status.clone().map(|after| StatusChange {
            before: parent.get("status").cloned().unwrap_or(Value::Null),
            after,
        }),
        writes,
        ..SyncPlan::default()
    }
}

/// The per-object view of `writes`: every write on a child, and every desired child that is
/// already as desired (in sync, or waiting for a rollout), in execution order. `orphans` are
/// the objects adopted, as observed (`observed` shows them adopted).
fn objects(
    types: &[ChildType],
    observed: &BTreeMap<String, Vec<Arc<Value>>>,
    orphans: &BTreeMap<ChildId, Arc<Value>>,
    desired: &[(ChildId, Value)],
    writes: &Writes,
    rollout: Option<&RolloutDecision>,
) -> Vec<ObjectPlan> {
    let live: BTreeMap<ChildId, &Arc<Value>> = observed
        .iter()
        .flat_map(|(t, objs)| objs.iter().map(move |o| (ChildId::of(t, o), o)))
        .collect();
    let ty = |id: &ChildId| types.iter().find(|t| t.key == id.type_key);
    let entry = |id: &ChildId, action: ObjectAction, reason: String| {
        let t = ty(id);
        ObjectPlan {
            id: id.clone(),
            kind: t.map_or_else(
                || {
                    id.type_key
                        .split('.')
                        .next()
                        .unwrap_or_default()
                        .to_string()
                },
                |t| t.kind.clone(),
            ),
            action,
            strategy: None,
            reason,
            changes: Vec::new(),
            changes_omitted: 0,
            before: live.get(id).map(|o| Arc::clone(o)),
            after: None,
            rollout: rollout.and_then(|r| position(r, id)),
        }
    };
    let strategy = |id: &ChildId| ty(id).map(|t| t.method);
    let mut out = Vec::new();
    for e in &writes.adopt {
        let mut o = entry(&e.id, ObjectAction::Adopt, "selector matches".into());
        if let Some(raw) = orphans.get(&e.id) {
            o.before = Some(Arc::clone(raw));
        }
        o.after = o.before.as_ref().map(|b| {
            let mut v = (**b).clone();
            v["metadata"]["ownerReferences"] = Value::Array(e.owner_references.clone());
            v
        });
        out.push(o);
    }
    for e in &writes.release {
        let mut o = entry(
            &e.id,
            ObjectAction::Release,
            "selector no longer matches".into(),
        );
        o.after = o.before.as_ref().map(|b| {
            let mut v = (**b).clone();
            v["metadata"]["ownerReferences"] = Value::Array(e.owner_references.clone());
            v
        });
        out.push(o);
    }
    for d in &writes.delete {
        let (action, reason) = match d.reason {
            DeleteReason::NotDesired => (ObjectAction::Delete, "not desired".to_string()),
            DeleteReason::Recreate => (
                ObjectAction::Recreate,
                format!("changed: {}", writes::summarize_changes(&d.changes)),
            ),
        };
        let mut o = entry(&d.id, action, reason);
        o.changes = d.changes.clone();
        if action == ObjectAction::Recreate {
            o.strategy = strategy(&d.id);
        }
        out.push(o);
    }
    for c in &writes.create {
        let mut o = entry(&c.id, ObjectAction::Create, "desired, absent".into());
        o.after = Some(c.object.clone());
        out.push(o);
    }
    for u in &writes.update {
        let mut o = entry(
            &u.id,
            ObjectAction::Update,
            format!("changed: {}", writes::summarize_changes(&u.changes)),
        );
        o.strategy = strategy(&u.id);
        o.changes = u.changes.clone();
        o.after = Some(u.object.clone());
        out.push(o);
    }
    for s in &writes.skip {
        let reason = match s.reason {
            SkipReason::OnDelete => "OnDelete: existing children are not updated",
            SkipReason::Deleting => "being deleted; recreated once gone",
        };
        let mut o = entry(&s.id, ObjectAction::Skip, reason.into());
        o.strategy = strategy(&s.id);
        o.changes = s.changes.clone();
        out.push(o);
    }
    let touched: BTreeSet<&ChildId> = writes
        .delete
        .iter()
        .map(|d| &d.id)
        .chain(writes.create.iter().map(|c| &c.id))
        .chain(writes.update.iter().map(|u| &u.id))
        .chain(writes.skip.iter().map(|s| &s.id))
        .collect();
    for (id, _) in desired {
        if touched.contains(id) || !live.contains_key(id) {
            continue;
        }
        let mut o = entry(id, ObjectAction::InSync, "as desired".into());
        if let Some(pos) = &o.rollout
            && !pos.latest
        {
            o.action = ObjectAction::Waiting;
            o.reason = format!("waiting in the rollout (on revision {})", pos.revision);
        }
        out.push(o);
    }
    out
}

/// Where `id` stands in a rollout.
fn position(r: &RolloutDecision, id: &ChildId) -> Option<RolloutPosition> {
    let revision = r.claims.get(id)?;
    Some(RolloutPosition {
        revision: revision.clone(),
        latest: *revision == r.latest,
        position: r.order.iter().position(|x| x == id).map_or(0, |i| i + 1),
        total: r.order.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn types() -> Vec<ChildType> {
        vec![ChildType {
            key: "ConfigMap.v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespaced: true,
            method: UpdateMethod::InPlace,
        }]
    }

    fn parent() -> Value {
        json!({"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "p", "namespace": "ns",
            "uid": "pu", "generation": 1}, "spec": {"selector": {"matchLabels": {"a": "b"}}}})
    }

    #[test]
    fn plans_create_adopt_delete_and_status_without_io() {
        let p = parent();
        let sel = LabelSelector::parse("a=b").expect("selector");
        let orphan = Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "o", "namespace": "ns", "uid": "ou", "resourceVersion": "3",
            "labels": {"a": "b"}}}));
        let owned = Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gone", "namespace": "ns", "uid": "gu", "resourceVersion": "4",
            "labels": {"a": "b"}, "ownerReferences": [ownership::controller_ref_for(&p)]}}));
        let claimed = claim(
            &p,
            &sel,
            [Candidates {
                type_key: "ConfigMap.v1",
                owned: vec![owned],
                orphans: vec![orphan],
            }],
        );
        assert_eq!(claimed.observed["ConfigMap.v1"].len(), 2);
        let t = types();
        let desired = normalize_desired(
            &p,
            &t,
            &sel,
            false,
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "o", "labels": {"a": "b"}}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "new", "labels": {"a": "b"}}, "data": {"k": "v"}}),
            ],
        )
        .expect("valid");
        let status = json!({"ready": true});
        let plan = plan_composite(&CompositeInput {
            parent: &p,
            types: &t,
            claimed: &claimed,
            answer: Some(Answer {
                desired: &desired,
                status: Some(&status),
                finalized: false,
                resync_after_seconds: Some(5.0),
            }),
            rollout: None,
            finalizer: FinalizerInput {
                name: "f",
                has_finalize_hook: false,
                finalizing: false,
            },
            held: &BTreeMap::new(),
            now: "2026-01-01T00:00:00Z",
        });
        let actions: Vec<(ObjectAction, &str)> = plan
            .objects
            .iter()
            .map(|o| (o.action, o.id.key.name.as_str()))
            .collect();
        assert!(actions.contains(&(ObjectAction::Adopt, "o")), "{actions:?}");
        assert!(
            actions.contains(&(ObjectAction::Delete, "gone")),
            "{actions:?}"
        );
        assert!(
            actions.contains(&(ObjectAction::Create, "new")),
            "{actions:?}"
        );
        assert_eq!(plan.resync_after_seconds, Some(5.0));
        let st = plan.status.as_ref().expect("status changes");
        assert_eq!(st.after["ready"], true);
        assert_eq!(st.after["observedGeneration"], 1);
        assert_eq!(plan.finalizer, None);
        assert_eq!(plan.write_count(), plan.writes.writes());
        let create = plan
            .objects
            .iter()
            .find(|o| o.action == ObjectAction::Create)
            .expect("create");
        assert_eq!(
            create.after.as_ref().expect("after")["metadata"]["ownerReferences"][0]["uid"],
            "pu"
        );
    }

    #[test]
    fn tombstone_decisions_are_listed_per_output() {
        let p = parent();
        let out = |n: &str| {
            Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": n, "namespace": "ns", "uid": n}}))
        };
        let observed = BTreeMap::from([("ConfigMap.v1".to_string(), vec![out("a"), out("b")])]);
        let keep = BTreeSet::from([ChildId::of("ConfigMap.v1", &out("a"))]);
        let plan = plan_map_key(&MapKeyInput {
            parent: &p,
            map_key: "ns/in",
            types: &types(),
            observed: &observed,
            orphans: &[],
            answer: MapAnswer::Tombstone {
                keep: &keep,
                resync_after_seconds: None,
            },
            held: &BTreeMap::new(),
        });
        assert_eq!(plan.map_key.as_deref(), Some("ns/in"));
        let kept: Vec<(&str, bool)> = plan
            .detached
            .iter()
            .map(|d| (d.id.key.name.as_str(), d.kept))
            .collect();
        assert_eq!(kept, vec![("a", true), ("b", false)]);
        let actions: Vec<(ObjectAction, &str)> = plan
            .objects
            .iter()
            .map(|o| (o.action, o.id.key.name.as_str()))
            .collect();
        assert!(actions.contains(&(ObjectAction::Keep, "a")), "{actions:?}");
        assert!(
            actions.contains(&(ObjectAction::Delete, "b")),
            "{actions:?}"
        );
        assert_eq!(plan.writes.delete.len(), 1);
    }

    #[test]
    fn controlled_by_other_names_the_owner() {
        let obj = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "X",
            "name": "x", "uid": "other", "controller": true}]}});
        assert_eq!(controlled_by_other(&obj, "other"), None, "controlled by us");
        assert_eq!(
            controlled_by_other(&obj, "me").as_deref(),
            Some("is controlled by X x (uid other)")
        );
        assert_eq!(controlled_by_other(&json!({"metadata": {}}), "me"), None);
    }
}
