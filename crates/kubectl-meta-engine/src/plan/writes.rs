//! The pure reconcile plan: observed state + desired state -> a list of actions.
//!
//! [`plan_children`] decides, for one parent, which children to create, update (with the
//! three-way merge diff), delete, adopt and release, and which differences it leaves alone
//! (OnDelete, objects being deleted); [`status_change`], [`finalizer_change`] and
//! [`metadata_change`] (a decorator's labels/annotations) decide the parent's own writes. Nothing here performs I/O: the executor
//! (`engine::execute`) carries a [`Writes`] out, `dryrun` and the TUI print it, and the unit tests
//! below pin every rule.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::k8s::object;
use crate::plan::apply::{self, FieldChange};
pub use crate::plan::child::{ChildId, ChildType, ObjectKeyView};
use crate::plan::ownership::{CONTROLLER_UID_LABEL, controller_ref_for};
use crate::plan::rollout::RevisionWrite;
use crate::spec::UpdateMethod;
use kube_apimachinery::selector::LabelSelector;

/// Why an existing child is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DeleteReason {
    /// The hook no longer lists it.
    NotDesired,
    /// It differs from the desired state and the strategy is (Rolling)Recreate.
    Recreate,
}

/// Why a difference between observed and desired is left alone this sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SkipReason {
    /// Update strategy OnDelete: existing children are never updated.
    OnDelete,
    /// The child is being deleted; it will be recreated once it is gone.
    Deleting,
}

/// Create a child.
#[derive(Debug, Clone, Serialize)]
pub struct Create {
    /// Which child.
    pub id: ChildId,
    /// The object to POST.
    pub object: Value,
}

/// Update a child in place.
#[derive(Debug, Clone, Serialize)]
pub struct Update {
    /// Which child.
    pub id: ChildId,
    /// The merged object to PUT (carries the observed resourceVersion).
    pub object: Value,
    /// The desired object as the hook gave it (server-side apply sends this).
    pub desired: Value,
    /// What changes.
    pub changes: Vec<FieldChange>,
}

/// Delete a child.
#[derive(Debug, Clone, Serialize)]
pub struct Delete {
    /// Which child.
    pub id: ChildId,
    /// Its uid (delete precondition).
    pub uid: String,
    /// Why.
    pub reason: DeleteReason,
    /// The differences, for Recreate.
    pub changes: Vec<FieldChange>,
}

/// Adopt or release one object (ownerReferences edit).
#[derive(Debug, Clone, Serialize)]
pub struct OwnerEdit {
    /// Which object.
    pub id: ChildId,
    /// Its uid and resourceVersion at planning time (preconditions).
    pub uid: String,
    /// resourceVersion at planning time.
    pub resource_version: String,
    /// The new ownerReferences list.
    pub owner_references: Vec<Value>,
}

/// A child field left at the server's value because the hot-loop guard holds it.
#[derive(Debug, Clone, Serialize)]
pub struct HeldChange {
    /// Which child.
    pub id: ChildId,
    /// The difference not written.
    pub change: FieldChange,
}

/// A difference left alone.
#[derive(Debug, Clone, Serialize)]
pub struct Skip {
    /// Which child.
    pub id: ChildId,
    /// Why.
    pub reason: SkipReason,
    /// The differences not applied.
    pub changes: Vec<FieldChange>,
}

/// Add or remove the parent's finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FinalizerChange {
    /// Add it (a finalize hook exists).
    Add,
    /// Remove it (finalized, or the finalize hook was removed).
    Remove,
}

/// Labels and annotations to merge into the parent's metadata (a DecoratorController's
/// `labels` and `annotations` answer for its target).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetadataPatch {
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
    /// Annotations to set (`Some`) or remove (`None`).
    pub annotations: BTreeMap<String, Option<String>>,
}

impl MetadataPatch {
    /// The JSON merge patch that makes the change (`null` removes a key), with the parent's
    /// `resourceVersion` (when given) as a precondition.
    pub fn merge_patch(&self, resource_version: Option<&str>) -> Value {
        let entries = |m: &BTreeMap<String, Option<String>>| -> Map<String, Value> {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_ref().map_or(Value::Null, |v| json!(v))))
                .collect()
        };
        let mut meta = Map::new();
        if !self.labels.is_empty() {
            meta.insert("labels".into(), Value::Object(entries(&self.labels)));
        }
        if !self.annotations.is_empty() {
            meta.insert(
                "annotations".into(),
                Value::Object(entries(&self.annotations)),
            );
        }
        if let Some(rv) = resource_version {
            meta.insert("resourceVersion".into(), json!(rv));
        }
        json!({ "metadata": meta })
    }

    /// `labels a=1 b-; annotations n=v` (kubectl label's notation: `key-` removes).
    pub fn summary(&self) -> String {
        let part = |what: &str, m: &BTreeMap<String, Option<String>>| -> Option<String> {
            (!m.is_empty()).then(|| {
                let items: Vec<String> = m
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => format!("{k}={v}"),
                        None => format!("{k}-"),
                    })
                    .collect();
                format!("{what} {}", items.join(" "))
            })
        };
        [
            part("labels", &self.labels),
            part("annotations", &self.annotations),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
    }
}

/// The metadata change that gives `parent` the wanted labels and annotations (a `None` value
/// removes the key), or `None` when it has them already. Only keys that differ are kept.
pub fn metadata_change(
    parent: &Value,
    labels: &BTreeMap<String, Option<String>>,
    annotations: &BTreeMap<String, Option<String>>,
) -> Option<MetadataPatch> {
    let diff = |current: BTreeMap<String, String>,
                wanted: &BTreeMap<String, Option<String>>|
     -> BTreeMap<String, Option<String>> {
        wanted
            .iter()
            .filter(|(k, v)| current.get(*k) != v.as_ref())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let patch = MetadataPatch {
        labels: diff(object::labels(parent), labels),
        annotations: diff(object::annotations(parent), annotations),
    };
    (!patch.labels.is_empty() || !patch.annotations.is_empty()).then_some(patch)
}

/// Everything one sync of one parent will write.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Writes {
    /// Orphans to adopt.
    pub adopt: Vec<OwnerEdit>,
    /// Owned objects to release.
    pub release: Vec<OwnerEdit>,
    /// Children to delete (executed before creates and updates).
    pub delete: Vec<Delete>,
    /// Children to create.
    pub create: Vec<Create>,
    /// Children to update.
    pub update: Vec<Update>,
    /// Differences deliberately left alone.
    pub skip: Vec<Skip>,
    /// Child fields the hot-loop guard holds at the server's value (not written).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldChange>,
    /// Number of children already as desired.
    pub unchanged: usize,
    /// ControllerRevision writes (rolling updates).
    pub revisions: Vec<crate::plan::rollout::RevisionWrite>,
    /// The parent's new status, when it changes.
    pub status: Option<Value>,
    /// Finalizer change on the parent.
    pub finalizer: Option<FinalizerChange>,
    /// Rollout state, when a child type uses a rolling strategy.
    pub rollout: Option<crate::plan::rollout::RolloutState>,
    /// Labels/annotations to merge into the parent (written first).
    pub metadata: Option<MetadataPatch>,
}

impl Writes {
    /// Number of API writes executing this plan makes.
    pub fn writes(&self) -> usize {
        self.adopt.len()
            + self.release.len()
            + self.delete.len()
            + self.create.len()
            + self.update.len()
            + self.revisions.len()
            + usize::from(self.status.is_some())
            + usize::from(self.finalizer.is_some())
            + usize::from(self.metadata.is_some())
    }

    /// True when nothing would be written.
    pub fn is_empty(&self) -> bool {
        self.writes() == 0
    }

    /// The writes of this plan in the order the executor makes them, named as the `action`
    /// events of those writes name them; the parent's own writes name `parent_type` and
    /// `parent` (what a paused sync shows instead of writing).
    pub fn actions(&self, parent_type: &str, parent: &str) -> Vec<HeldAction> {
        let act = |verb, resource: &str, object: String, detail: Option<String>| HeldAction {
            verb,
            resource: resource.to_string(),
            object,
            detail,
        };
        let child = |verb, i: &ChildId, detail| act(verb, &i.type_key, i.object(), detail);
        let on_parent = |verb, detail| act(verb, parent_type, parent.to_string(), detail);
        let mut out = Vec::new();
        if let Some(m) = &self.metadata {
            out.push(on_parent(
                ActionVerb::Update,
                Some(format!("labels/annotations: {}", m.summary())),
            ));
        }
        if self.finalizer == Some(FinalizerChange::Add) {
            out.push(on_parent(ActionVerb::AddFinalizer, None));
        }
        out.extend(
            self.adopt
                .iter()
                .map(|e| child(ActionVerb::Adopt, &e.id, None)),
        );
        out.extend(
            self.release
                .iter()
                .map(|e| child(ActionVerb::Release, &e.id, None)),
        );
        out.extend(self.delete.iter().map(|d| {
            let why = match d.reason {
                DeleteReason::NotDesired => "not desired",
                DeleteReason::Recreate => "recreate",
            };
            child(ActionVerb::Delete, &d.id, Some(why.to_string()))
        }));
        out.extend(self.revisions.iter().map(|r| {
            let (what, name) = match r {
                RevisionWrite::Create { object } => (
                    "create",
                    object::name(object).unwrap_or_default().to_string(),
                ),
                RevisionWrite::Update { object, .. } => (
                    "update",
                    object::name(object).unwrap_or_default().to_string(),
                ),
                RevisionWrite::Delete { name, .. } => ("delete", name.clone()),
            };
            act(
                ActionVerb::Revision,
                "ControllerRevision",
                name,
                Some(what.to_string()),
            )
        }));
        out.extend(
            self.create
                .iter()
                .map(|c| child(ActionVerb::Create, &c.id, None)),
        );
        out.extend(self.update.iter().map(|u| {
            let paths: Vec<&str> = u.changes.iter().map(|c| c.path.as_str()).collect();
            child(
                ActionVerb::Update,
                &u.id,
                (!paths.is_empty()).then(|| paths.join(", ")),
            )
        }));
        if self.status.is_some() {
            out.push(on_parent(ActionVerb::Status, None));
        }
        if self.finalizer == Some(FinalizerChange::Remove) {
            out.push(on_parent(ActionVerb::RemoveFinalizer, None));
        }
        out
    }
}

/// A desired state the engine refuses before writing anything.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The hook returned a child of a type the controller does not declare.
    #[error(
        "the hook returned {kind}.{api_version} {name}, but the controller does not declare that child resource; {hint}"
    )]
    UndeclaredType {
        /// apiVersion of the child.
        api_version: String,
        /// kind of the child.
        kind: String,
        /// Name of the child.
        name: String,
        /// The declared `Kind.apiVersion` keys.
        declared: String,
        /// What to do: the declared type of the same kind when there is one (a wrong
        /// apiVersion, e.g. `v1` for a Deployment: its key would be `Deployment.v1`, not the
        /// declared `Deployment.apps/v1`), else how to declare it.
        hint: String,
    },
    /// A desired child does not match the parent's selector (it would be orphaned at once).
    #[error(
        "desired child {id} has labels {labels} that do not match the parent's selector {selector}; give it labels the selector matches (or use generateSelector)"
    )]
    SelectorMismatch {
        /// Which child.
        id: ChildId,
        /// Its labels.
        labels: String,
        /// The selector.
        selector: String,
    },
    /// Two desired children with the same type, namespace and name.
    #[error("the hook returned {id} twice; child names must be unique per type")]
    Duplicate {
        /// Which child.
        id: ChildId,
    },
    /// A namespaced child of a cluster-scoped parent without a namespace.
    #[error(
        "desired child {type_key} {name} is namespaced but has no metadata.namespace; the parent is cluster-scoped, so the hook must set it"
    )]
    MissingNamespace {
        /// `Kind.apiVersion`.
        type_key: String,
        /// Name.
        name: String,
    },
    /// A child in another namespace than its namespaced parent.
    #[error(
        "desired child {id} is not in the parent's namespace {parent_namespace}; owner references cannot cross namespaces"
    )]
    CrossNamespace {
        /// Which child.
        id: ChildId,
        /// The parent's namespace.
        parent_namespace: String,
    },
}

/// Inputs of [`plan_children`].
#[derive(Debug)]
pub struct ChildrenInput<'a> {
    /// The parent object.
    pub parent: &'a Value,
    /// Declared child types.
    pub types: &'a [ChildType],
    /// Claimed (owned, matching) children per type key, including those being adopted.
    pub observed: &'a BTreeMap<String, Vec<Arc<Value>>>,
    /// The desired children, in the order the hook listed them (already normalized by
    /// [`normalize_desired`]).
    pub desired: &'a [(ChildId, Value)],
    /// Fields the hot-loop guard holds, by child (see `engine::hotloop`).
    pub held: &'a BTreeMap<ChildId, Vec<apply::HeldField>>,
}

/// Check and complete the hook's desired children: declared type, namespace defaulting and
/// scope rules, generated selector label, selector match, uniqueness. Returns them in hook order.
pub fn normalize_desired(
    parent: &Value,
    types: &[ChildType],
    selector: &LabelSelector,
    generate_selector: bool,
    children: Vec<Value>,
) -> Result<Vec<(ChildId, Value)>, PlanError> {
    let parent_ns = object::namespace(parent).map(str::to_string);
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(children.len());
    for mut child in children {
        let api_version = object::api_version(&child).unwrap_or_default().to_string();
        let kind = object::kind(&child).unwrap_or_default().to_string();
        let name = object::name(&child).unwrap_or_default().to_string();
        let Some(t) = types
            .iter()
            .find(|t| t.api_version == api_version && t.kind == kind)
        else {
            let declared = types
                .iter()
                .map(|t| t.key.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            let hint = match types.iter().find(|t| t.kind.eq_ignore_ascii_case(&kind)) {
                Some(t) => format!(
                    "it declares {} as {}: did you mean apiVersion: {} (type key {}, not {kind}.{api_version})?",
                    t.kind, t.api_version, t.api_version, t.key
                ),
                None => format!(
                    "add {{apiVersion: {api_version}, resource: <plural>}} to childResources (declared: {declared})"
                ),
            };
            return Err(PlanError::UndeclaredType {
                api_version,
                kind,
                name,
                declared,
                hint,
            });
        };
        let Some(meta) = metadata_mut(&mut child) else {
            continue;
        };
        if t.namespaced {
            let ns = meta
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            match (&parent_ns, ns) {
                (Some(pns), None) => {
                    meta.insert("namespace".into(), Value::String(pns.clone()));
                }
                (Some(pns), Some(ns)) if &ns != pns => {
                    return Err(PlanError::CrossNamespace {
                        id: ChildId {
                            type_key: t.key.clone(),
                            key: ObjectKeyView {
                                namespace: Some(ns),
                                name,
                            },
                        },
                        parent_namespace: pns.clone(),
                    });
                }
                (None, None) => {
                    return Err(PlanError::MissingNamespace {
                        type_key: t.key.clone(),
                        name,
                    });
                }
                _ => {}
            }
        } else {
            meta.remove("namespace");
        }
        meta.remove("ownerReferences");
        if generate_selector {
            let labels = meta
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if !labels.is_object() {
                *labels = Value::Object(Map::new());
            }
            if let Some(l) = labels.as_object_mut() {
                l.insert(
                    CONTROLLER_UID_LABEL.into(),
                    Value::String(object::uid(parent).unwrap_or_default().to_string()),
                );
            }
        }
        let id = ChildId::of(&t.key, &child);
        let labels = object::labels(&child);
        if !selector.matches(&labels) {
            return Err(PlanError::SelectorMismatch {
                id,
                labels: serde_json::to_string(&labels).unwrap_or_default(),
                selector: selector.to_string(),
            });
        }
        if !seen.insert(id.clone()) {
            return Err(PlanError::Duplicate { id });
        }
        out.push((id, child));
    }
    Ok(out)
}

/// `metadata` of an object as a mutable map, created when missing (None for non-objects).
fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let m = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut()
}

/// Plan the child writes for one parent (creates, updates, deletes, skips).
pub fn plan_children(input: &ChildrenInput<'_>, plan: &mut Writes) {
    let parent = input.parent;
    let mut desired_ids = BTreeSet::new();
    // Objects adopted in this plan are planned as they will be after the adoption (with our
    // ControllerRef), so an update of an adopted child keeps the reference; the executor sends
    // the update with the resourceVersion the adoption returned.
    let adopted: BTreeMap<ChildId, Vec<Value>> = plan
        .adopt
        .iter()
        .map(|e| (e.id.clone(), e.owner_references.clone()))
        .collect();
    let adopted = &adopted;
    let observed_by_id: BTreeMap<ChildId, Arc<Value>> = input
        .observed
        .iter()
        .flat_map(|(k, objs)| {
            objs.iter().map(move |o| {
                let id = ChildId::of(k, o);
                let o = match adopted.get(&id) {
                    Some(refs) => {
                        let mut o = (**o).clone();
                        o["metadata"]["ownerReferences"] = Value::Array(refs.clone());
                        Arc::new(o)
                    }
                    None => Arc::clone(o),
                };
                (id, o)
            })
        })
        .collect();
    for (id, desired) in input.desired {
        desired_ids.insert(id.clone());
        let Some(t) = input.types.iter().find(|t| t.key == id.type_key) else {
            continue;
        };
        match observed_by_id.get(id) {
            None => {
                let mut obj = apply::for_create(desired);
                obj["metadata"]["ownerReferences"] = json!([controller_ref_for(parent)]);
                plan.create.push(Create {
                    id: id.clone(),
                    object: obj,
                });
            }
            Some(observed) => {
                let held = input.held.get(id).map_or(&[][..], Vec::as_slice);
                let applied = match apply::apply_holding(observed, desired, held) {
                    Ok(a) => a,
                    Err(_) => continue,
                };
                plan.held.extend(applied.held.iter().map(|c| HeldChange {
                    id: id.clone(),
                    change: c.clone(),
                }));
                if !applied.changed {
                    plan.unchanged += 1;
                    continue;
                }
                // Only the last-applied annotation differs (the live object already has the
                // desired values): record it in place whatever the strategy, never recreate.
                let annotation_only = applied
                    .changes
                    .iter()
                    .all(|c| c.path.contains(apply::LAST_APPLIED));
                if annotation_only && !object::is_deleting(observed) {
                    if t.method == UpdateMethod::OnDelete {
                        plan.unchanged += 1;
                    } else {
                        plan.update.push(Update {
                            id: id.clone(),
                            object: applied.object,
                            desired: desired.clone(),
                            changes: applied.changes,
                        });
                    }
                    continue;
                }
                if object::is_deleting(observed) {
                    plan.skip.push(Skip {
                        id: id.clone(),
                        reason: SkipReason::Deleting,
                        changes: applied.changes,
                    });
                    continue;
                }
                match t.method {
                    UpdateMethod::OnDelete => plan.skip.push(Skip {
                        id: id.clone(),
                        reason: SkipReason::OnDelete,
                        changes: applied.changes,
                    }),
                    UpdateMethod::Recreate | UpdateMethod::RollingRecreate => {
                        plan.delete.push(Delete {
                            id: id.clone(),
                            uid: object::uid(observed).unwrap_or_default().to_string(),
                            reason: DeleteReason::Recreate,
                            changes: applied.changes,
                        })
                    }
                    UpdateMethod::InPlace | UpdateMethod::RollingInPlace => {
                        plan.update.push(Update {
                            id: id.clone(),
                            object: applied.object,
                            desired: desired.clone(),
                            changes: applied.changes,
                        })
                    }
                }
            }
        }
    }
    for (id, observed) in &observed_by_id {
        if desired_ids.contains(id) || object::is_deleting(observed) {
            continue;
        }
        plan.delete.push(Delete {
            id: id.clone(),
            uid: object::uid(observed).unwrap_or_default().to_string(),
            reason: DeleteReason::NotDesired,
            changes: Vec::new(),
        });
    }
}

/// A one-line summary of changed field paths (at most five, then "+N more").
pub fn summarize_changes(changes: &[FieldChange]) -> String {
    let mut paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    let more = paths.len().saturating_sub(5);
    paths.truncate(5);
    let mut s = paths.join(", ");
    if more > 0 {
        s.push_str(&format!(" +{more} more"));
    }
    s
}

/// Plan adoptions and releases from claim results.
pub fn plan_ownership(
    parent: &Value,
    type_key: &str,
    adopt: &[Arc<Value>],
    release: &[Arc<Value>],
    plan: &mut Writes,
) {
    let parent_uid = object::uid(parent).unwrap_or_default();
    for o in adopt {
        plan.adopt.push(OwnerEdit {
            id: ChildId::of(type_key, o),
            uid: object::uid(o).unwrap_or_default().to_string(),
            resource_version: object::resource_version(o).unwrap_or_default().to_string(),
            owner_references: crate::plan::ownership::with_controller_ref(o, parent),
        });
    }
    for o in release {
        plan.release.push(OwnerEdit {
            id: ChildId::of(type_key, o),
            uid: object::uid(o).unwrap_or_default().to_string(),
            resource_version: object::resource_version(o).unwrap_or_default().to_string(),
            owner_references: crate::plan::ownership::without_owner(o, parent_uid),
        });
    }
}

/// The parent's new status (hook status + observedGeneration + extra conditions), or `None`
/// when it equals the current one.
pub fn status_change(
    parent: &Value,
    hook_status: Option<&Value>,
    extra_conditions: &[Value],
) -> Option<Value> {
    let mut status = match hook_status {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    status.insert(
        "observedGeneration".into(),
        Value::from(object::generation(parent)),
    );
    if !extra_conditions.is_empty() {
        let mut conditions: Vec<Value> = status
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in extra_conditions {
            let t = c.get("type");
            conditions.retain(|x| x.get("type") != t);
            conditions.push(carry_transition_time(parent, c));
        }
        status.insert("conditions".into(), Value::Array(conditions));
    }
    let new = Value::Object(status);
    let current = parent.get("status").cloned().unwrap_or(Value::Null);
    if apply::values_equal(&current, &new) {
        None
    } else {
        Some(new)
    }
}

/// Keep `lastTransitionTime` of a condition whose status did not change (so a resync does not
/// rewrite the status with a new timestamp).
fn carry_transition_time(parent: &Value, cond: &Value) -> Value {
    let mut c = cond.clone();
    let old = parent
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|x| x.get("type") == cond.get("type")));
    if let Some(old) = old
        && old.get("status") == cond.get("status")
        && let Some(t) = old.get("lastTransitionTime")
    {
        c["lastTransitionTime"] = t.clone();
    }
    c
}

/// The finalizer change for a parent.
///
/// `finalized` is the finalize hook's answer when it was called this sync.
pub fn finalizer_change(
    parent: &Value,
    finalizer: &str,
    has_finalize_hook: bool,
    finalizing: bool,
    finalized: bool,
) -> Option<FinalizerChange> {
    let present = object::finalizers(parent).contains(&finalizer);
    match (present, has_finalize_hook, finalizing) {
        (false, true, false) => Some(FinalizerChange::Add),
        (true, false, _) => Some(FinalizerChange::Remove),
        (true, true, true) if finalized => Some(FinalizerChange::Remove),
        _ => None,
    }
}

/// What an action did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ActionVerb {
    /// Created a child.
    Create,
    /// Updated a child (three-way merge or server-side apply).
    Update,
    /// Deleted a child.
    Delete,
    /// Added our ControllerRef to an orphan.
    Adopt,
    /// Removed our ControllerRef from an object that no longer matches.
    Release,
    /// Wrote the parent's status.
    Status,
    /// Added the finalizer to the parent.
    AddFinalizer,
    /// Removed the finalizer from the parent.
    RemoveFinalizer,
    /// Wrote a ControllerRevision (rolling updates).
    Revision,
    /// Applied a non-controller document from a controller file (`--apply`).
    ApplyDocument,
    /// A write the server answered with the resourceVersion the object already had: it
    /// changed nothing (the server normalizes or rewrites what was sent). Not a write.
    NoOp,
}

/// One write a paused sync held back, named as `action` events name the writes they report:
/// what is done (`verb`) to which object (`resource` as `Kind.version`, `object` as
/// `namespace/name`), and a `detail` (why a child is deleted, which fields an update changes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldAction {
    /// What would be done.
    pub verb: ActionVerb,
    /// The object's resource (`Kind.version`, or `Kind.group/version`).
    pub resource: String,
    /// `namespace/name` (or `name`).
    pub object: String,
    /// Why or what exactly (`not desired`, the changed fields, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl std::fmt::Display for HeldAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.verb, self.resource, self.object)?;
        match &self.detail {
            Some(d) => write!(f, " ({d})"),
            None => Ok(()),
        }
    }
}

impl std::fmt::Display for ActionVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ActionVerb::Create => "create",
            ActionVerb::Update => "update",
            ActionVerb::Delete => "delete",
            ActionVerb::Adopt => "adopt",
            ActionVerb::Release => "release",
            ActionVerb::Status => "status",
            ActionVerb::AddFinalizer => "add-finalizer",
            ActionVerb::RemoveFinalizer => "remove-finalizer",
            ActionVerb::Revision => "revision",
            ActionVerb::ApplyDocument => "apply",
            ActionVerb::NoOp => "no-op",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(method: UpdateMethod) -> Vec<ChildType> {
        vec![
            ChildType {
                key: "Pod.v1".into(),
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespaced: true,
                method,
            },
            ChildType {
                key: "ClusterRole.rbac.authorization.k8s.io/v1".into(),
                api_version: "rbac.authorization.k8s.io/v1".into(),
                kind: "ClusterRole".into(),
                namespaced: false,
                method,
            },
        ]
    }

    fn parent() -> Value {
        json!({"apiVersion": "ex.com/v1", "kind": "Thing",
            "metadata": {"name": "p", "namespace": "ns", "uid": "puid", "generation": 4},
            "spec": {"selector": {"matchLabels": {"app": "a"}}}})
    }

    fn sel() -> LabelSelector {
        LabelSelector::parse("app=a").expect("selector")
    }

    fn pod(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    /// An observed child as the server would return it after creating `desired`.
    fn observed(desired: &Value) -> Arc<Value> {
        let mut o = apply::for_create(desired);
        o["metadata"]["namespace"] = json!("ns");
        o["metadata"]["uid"] = json!(format!("uid-{}", object::name(desired).unwrap_or("")));
        o["metadata"]["resourceVersion"] = json!("7");
        o["metadata"]["ownerReferences"] = json!([controller_ref_for(&parent())]);
        o["status"] = json!({"phase": "Running"});
        Arc::new(o)
    }

    fn run(method: UpdateMethod, observed_pods: Vec<Arc<Value>>, desired: Vec<Value>) -> Writes {
        let p = parent();
        let t = types(method);
        let desired = normalize_desired(&p, &t, &sel(), false, desired).expect("valid");
        let mut obs = BTreeMap::new();
        obs.insert("Pod.v1".to_string(), observed_pods);
        let mut plan = Writes::default();
        plan_children(
            &ChildrenInput {
                parent: &p,
                types: &t,
                observed: &obs,
                desired: &desired,
                held: &BTreeMap::new(),
            },
            &mut plan,
        );
        plan
    }

    #[test]
    fn creates_missing_children_with_owner_ref_and_last_applied() {
        let plan = run(UpdateMethod::OnDelete, vec![], vec![pod("a", "v1")]);
        assert_eq!(plan.create.len(), 1);
        let o = &plan.create[0].object;
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], "puid");
        assert_eq!(o["metadata"]["ownerReferences"][0]["controller"], true);
        assert!(
            o["metadata"]["annotations"][apply::LAST_APPLIED].is_string(),
            "{o}"
        );
        assert_eq!(plan.writes(), 1);
    }

    #[test]
    fn unchanged_children_make_no_writes() {
        for m in [
            UpdateMethod::OnDelete,
            UpdateMethod::Recreate,
            UpdateMethod::InPlace,
            UpdateMethod::RollingInPlace,
            UpdateMethod::RollingRecreate,
        ] {
            let d = pod("a", "v1");
            let mut dn = d.clone();
            dn["metadata"]["namespace"] = json!("ns");
            let plan = run(m, vec![observed(&dn)], vec![d]);
            assert!(plan.is_empty(), "{m:?}: {plan:?}");
            assert_eq!(plan.unchanged, 1);
        }
    }

    fn changed(method: UpdateMethod) -> Writes {
        let mut old = pod("a", "v1");
        old["metadata"]["namespace"] = json!("ns");
        run(method, vec![observed(&old)], vec![pod("a", "v2")])
    }

    #[test]
    fn strategies_decide_what_happens_to_a_changed_child() {
        let p = changed(UpdateMethod::OnDelete);
        assert_eq!((p.skip.len(), p.writes()), (1, 0));
        assert_eq!(p.skip[0].reason, SkipReason::OnDelete);
        assert!(!p.skip[0].changes.is_empty());

        let p = changed(UpdateMethod::Recreate);
        assert_eq!(p.delete.len(), 1);
        assert_eq!(p.delete[0].reason, DeleteReason::Recreate);
        assert_eq!(p.delete[0].uid, "uid-a");
        assert!(p.create.is_empty(), "recreate creates on a later sync");

        let p = changed(UpdateMethod::InPlace);
        assert_eq!(p.update.len(), 1);
        assert_eq!(
            p.update[0].object["spec"]["containers"][0]["image"], "v2",
            "{:?}",
            p.update[0]
        );
        assert_eq!(p.update[0].object["metadata"]["resourceVersion"], "7");
        assert_eq!(p.update[0].object["status"]["phase"], "Running");

        assert_eq!(changed(UpdateMethod::RollingInPlace).update.len(), 1);
        assert_eq!(changed(UpdateMethod::RollingRecreate).delete.len(), 1);
    }

    #[test]
    fn annotation_only_differences_update_in_place_and_never_recreate() {
        let mut d = pod("a", "v1");
        d["metadata"]["namespace"] = json!("ns");
        let mut o = (*observed(&d)).clone();
        // live object already has the desired values but no last-applied annotation
        o["metadata"]
            .as_object_mut()
            .expect("meta")
            .remove("annotations");
        let o = Arc::new(o);
        let p = run(
            UpdateMethod::Recreate,
            vec![Arc::clone(&o)],
            vec![pod("a", "v1")],
        );
        assert!(p.delete.is_empty(), "{p:?}");
        assert_eq!(p.update.len(), 1);
        let p = run(UpdateMethod::OnDelete, vec![o], vec![pod("a", "v1")]);
        assert_eq!(p.writes(), 0);
    }

    #[test]
    fn children_not_desired_are_deleted_unless_already_deleting() {
        let mut a = pod("a", "v1");
        a["metadata"]["namespace"] = json!("ns");
        let mut b = pod("b", "v1");
        b["metadata"]["namespace"] = json!("ns");
        let mut gone = (*observed(&b)).clone();
        gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let plan = run(
            UpdateMethod::InPlace,
            vec![observed(&a), Arc::new(gone)],
            vec![],
        );
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(plan.delete[0].id.key.name, "a");
        assert_eq!(plan.delete[0].reason, DeleteReason::NotDesired);
    }

    #[test]
    fn a_changed_child_being_deleted_is_skipped() {
        let mut old = pod("a", "v1");
        old["metadata"]["namespace"] = json!("ns");
        let mut o = (*observed(&old)).clone();
        o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let plan = run(
            UpdateMethod::Recreate,
            vec![Arc::new(o)],
            vec![pod("a", "v2")],
        );
        assert_eq!(plan.writes(), 0);
        assert_eq!(plan.skip[0].reason, SkipReason::Deleting);
    }

    #[test]
    fn normalize_rejects_bad_desired_children() {
        let p = parent();
        let t = types(UpdateMethod::InPlace);
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
        let e = normalize_desired(&p, &t, &sel(), false, vec![svc]).expect_err("undeclared");
        assert!(matches!(e, PlanError::UndeclaredType { .. }), "{e}");
        assert!(e.to_string().contains("Pod.v1"), "{e}");
        assert!(e.to_string().contains("add {apiVersion: v1"), "{e}");
        // The declared kind under a wrong apiVersion: the message names the declared key.
        let wrong = json!({"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "w"}});
        let e = normalize_desired(&p, &t, &sel(), false, vec![wrong]).expect_err("wrong version");
        assert!(
            e.to_string().contains(
                "it declares Pod as v1: did you mean apiVersion: v1 (type key Pod.v1, not Pod.apps/v1)?"
            ),
            "{e}"
        );

        let mut bad = pod("a", "v1");
        bad["metadata"]["labels"] = json!({"app": "other"});
        let e = normalize_desired(&p, &t, &sel(), false, vec![bad]).expect_err("mismatch");
        assert!(matches!(e, PlanError::SelectorMismatch { .. }), "{e}");

        let e = normalize_desired(&p, &t, &sel(), false, vec![pod("a", "1"), pod("a", "2")])
            .expect_err("dup");
        assert!(matches!(e, PlanError::Duplicate { .. }), "{e}");

        let mut other = pod("a", "v1");
        other["metadata"]["namespace"] = json!("elsewhere");
        let e = normalize_desired(&p, &t, &sel(), false, vec![other]).expect_err("xns");
        assert!(matches!(e, PlanError::CrossNamespace { .. }), "{e}");

        let mut cluster_parent = parent();
        cluster_parent["metadata"]
            .as_object_mut()
            .expect("meta")
            .remove("namespace");
        let e = normalize_desired(&cluster_parent, &t, &sel(), false, vec![pod("a", "1")])
            .expect_err("needs ns");
        assert!(matches!(e, PlanError::MissingNamespace { .. }), "{e}");
    }

    #[test]
    fn normalize_fills_namespace_labels_and_strips_owner_refs() {
        let p = parent();
        let t = types(UpdateMethod::InPlace);
        let mut d = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a",
            "ownerReferences": [{"uid": "x"}]}});
        let gen_sel = LabelSelector::parse("controller-uid=puid").expect("sel");
        let out = normalize_desired(&p, &t, &gen_sel, true, vec![d.clone()]).expect("ok");
        assert_eq!(out[0].1["metadata"]["namespace"], "ns");
        assert_eq!(out[0].1["metadata"]["labels"]["controller-uid"], "puid");
        assert!(out[0].1["metadata"].get("ownerReferences").is_none());
        // cluster-scoped children lose a namespace they should not have
        d = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "namespace": "ns", "labels": {"app": "a"}}});
        let out = normalize_desired(&p, &t, &sel(), false, vec![d]).expect("ok");
        assert!(out[0].1["metadata"].get("namespace").is_none());
        assert_eq!(out[0].0.key.namespace, None);
    }

    #[test]
    fn adopt_and_release_edit_owner_references() {
        let p = parent();
        let orphan = Arc::new(
            json!({"metadata": {"name": "o", "namespace": "ns", "uid": "ou", "resourceVersion": "3"}}),
        );
        let mut owned = (*observed(&pod("r", "v1"))).clone();
        owned["metadata"]["ownerReferences"]
            .as_array_mut()
            .expect("refs")
            .push(json!({"apiVersion": "v1", "kind": "X", "name": "x", "uid": "other"}));
        let mut plan = Writes::default();
        plan_ownership(&p, "Pod.v1", &[orphan], &[Arc::new(owned)], &mut plan);
        assert_eq!(plan.adopt[0].owner_references[0]["uid"], "puid");
        assert_eq!(plan.adopt[0].resource_version, "3");
        assert_eq!(plan.release[0].owner_references.len(), 1);
        assert_eq!(plan.release[0].owner_references[0]["uid"], "other");
        assert_eq!(plan.writes(), 2);
    }

    #[test]
    fn an_adopted_child_is_updated_with_our_controller_ref() {
        let p = parent();
        let t = types(UpdateMethod::InPlace);
        // An orphan (no ownerReferences) whose content differs from the desired state.
        let mut orphan = (*observed(&pod("o", "v1"))).clone();
        orphan["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
        let orphan = Arc::new(orphan);
        let mut plan = Writes::default();
        plan_ownership(&p, "Pod.v1", std::slice::from_ref(&orphan), &[], &mut plan);
        let desired = normalize_desired(&p, &t, &sel(), false, vec![pod("o", "v2")]).expect("ok");
        let mut obs = BTreeMap::new();
        obs.insert("Pod.v1".to_string(), vec![orphan]);
        plan_children(
            &ChildrenInput {
                parent: &p,
                types: &t,
                observed: &obs,
                desired: &desired,
                held: &BTreeMap::new(),
            },
            &mut plan,
        );
        assert_eq!(plan.adopt.len(), 1);
        assert_eq!(plan.update.len(), 1, "{plan:?}");
        let refs = &plan.update[0].object["metadata"]["ownerReferences"];
        assert_eq!(
            refs[0]["uid"], "puid",
            "the update must keep the adoption: {refs}"
        );
        assert_eq!(refs[0]["controller"], true);
    }

    #[test]
    fn status_gets_observed_generation_and_is_written_only_on_change() {
        let mut p = parent();
        let s = status_change(&p, Some(&json!({"replicas": 2})), &[]).expect("changes");
        assert_eq!(s, json!({"replicas": 2, "observedGeneration": 4}));
        p["status"] = s;
        assert_eq!(status_change(&p, Some(&json!({"replicas": 2})), &[]), None);
        // number representation does not matter: 2 vs 2.0
        assert_eq!(
            status_change(&p, Some(&json!({"replicas": 2.0})), &[]),
            None
        );
        // hook status replaces the whole status
        let s = status_change(&p, Some(&json!({"ready": true})), &[]).expect("changes");
        assert_eq!(s, json!({"ready": true, "observedGeneration": 4}));
        // absent status still records observedGeneration
        let s = status_change(&parent(), None, &[]).expect("changes");
        assert_eq!(s, json!({"observedGeneration": 4}));
    }

    #[test]
    fn conditions_keep_transition_time_when_status_is_unchanged() {
        let mut p = parent();
        let cond = json!({"type": "Updated", "status": "True", "reason": "OnLatestRevision",
            "lastTransitionTime": "2026-01-01T00:00:00Z"});
        p["status"] = status_change(&p, None, std::slice::from_ref(&cond)).expect("first");
        let mut later = cond.clone();
        later["lastTransitionTime"] = json!("2026-02-02T00:00:00Z");
        assert_eq!(status_change(&p, None, &[later]), None);
    }

    #[test]
    fn finalizer_rules() {
        let f = "metacontroller.io/compositecontroller-c";
        let mut p = parent();
        assert_eq!(
            finalizer_change(&p, f, true, false, false),
            Some(FinalizerChange::Add)
        );
        assert_eq!(finalizer_change(&p, f, false, false, false), None);
        p["metadata"]["finalizers"] = json!([f]);
        assert_eq!(finalizer_change(&p, f, true, false, false), None);
        assert_eq!(finalizer_change(&p, f, true, true, false), None);
        assert_eq!(
            finalizer_change(&p, f, true, true, true),
            Some(FinalizerChange::Remove)
        );
        assert_eq!(
            finalizer_change(&p, f, false, false, false),
            Some(FinalizerChange::Remove),
            "removing the finalize hook removes the finalizer"
        );
        assert_eq!(
            finalizer_change(&p, f, false, true, false),
            Some(FinalizerChange::Remove),
            "a finalizing parent without a finalize hook is released"
        );
        // Never added to a parent that is already finalizing (deleted or deselected).
        assert_eq!(finalizer_change(&parent(), f, true, true, false), None);
    }

    fn meta_target() -> Value {
        json!({"metadata": {"name": "t", "resourceVersion": "7",
            "labels": {"a": "1", "gone": "x"}, "annotations": {"n": "v"}}})
    }

    fn wanted(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn metadata_change_keeps_only_keys_that_differ() {
        let labels = wanted(&[("a", Some("2")), ("gone", None), ("absent", None)]);
        let annotations = wanted(&[("n", Some("v"))]);
        let m = metadata_change(&meta_target(), &labels, &annotations).expect("a change");
        assert_eq!(m.labels, wanted(&[("a", Some("2")), ("gone", None)]));
        assert!(m.annotations.is_empty());
        assert_eq!(
            m.merge_patch(Some("7")),
            json!({"metadata": {"labels": {"a": "2", "gone": null}, "resourceVersion": "7"}})
        );
        assert_eq!(m.summary(), "labels a=2 gone-");
        let both = MetadataPatch {
            labels: wanted(&[("l", Some("1"))]),
            annotations: wanted(&[("x", None)]),
        };
        assert_eq!(
            both.merge_patch(None),
            json!({"metadata": {"labels": {"l": "1"}, "annotations": {"x": null}}})
        );
        assert_eq!(both.summary(), "labels l=1; annotations x-");
    }

    #[test]
    fn metadata_change_none_when_the_parent_has_it() {
        let labels = wanted(&[("a", Some("1")), ("absent", None)]);
        let annotations = wanted(&[("n", Some("v"))]);
        assert_eq!(metadata_change(&meta_target(), &labels, &annotations), None);
        assert_eq!(
            metadata_change(&meta_target(), &BTreeMap::new(), &BTreeMap::new()),
            None
        );
    }

    #[test]
    fn a_metadata_change_is_a_write_shown_first() {
        let mut plan = Writes::default();
        assert!(plan.is_empty());
        plan.metadata = metadata_change(
            &meta_target(),
            &wanted(&[("a", Some("2"))]),
            &BTreeMap::new(),
        );
        plan.finalizer = Some(FinalizerChange::Add);
        plan.status = Some(json!({"ok": true}));
        assert!(!plan.is_empty());
        assert_eq!(plan.writes(), 3);
        let shown: Vec<String> = plan
            .actions("Thing.v1", "default/p")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            vec![
                "update Thing.v1 default/p (labels/annotations: labels a=2)",
                "add-finalizer Thing.v1 default/p",
                "status Thing.v1 default/p"
            ]
        );
        let only = Writes {
            metadata: plan.metadata.clone(),
            ..Writes::default()
        };
        assert_eq!(only.writes(), 1);
    }
}
