//! Rolling updates: parent revisions, ControllerRevision claims and the one-at-a-time step.
//!
//! Follows Metacontroller's design. The parent fields named by `revisionHistory.fieldPaths`
//! (default `spec`) form a *parent patch*; each distinct patch is a revision, stored as a
//! `ControllerRevision` (`controllerrevisions.metacontroller.k8s.io`) owned by the parent and
//! named `<parent>-<hash>`. Each revision *claims* children (by kind and name). The sync hook is
//! called once per revision that still claims children (with the parent as it was at that
//! revision), and each child takes its desired state from the revision that claims it, so
//! children not yet rolled keep their old template while other changes apply at once.
//!
//! [`step`] moves children from old revisions to the latest one: children the latest revision
//! does not change (or no longer wants) move freely; otherwise one child at a time, in the order
//! the hook listed them, and only when every child already on the latest revision exists, is up
//! to date and passes the `statusChecks`. The claims are written back to the ControllerRevision
//! objects, so a rollout survives a restart of the dev loop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube_apimachinery::hash::hash_value;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::k8s::object;
use crate::plan::apply;
use crate::plan::child::ChildId;
use crate::spec::StatusConditionCheck;

/// apiVersion of Metacontroller's ControllerRevision.
pub const REVISION_API_VERSION: &str = "metacontroller.k8s.io/v1alpha1";
/// Plural resource name of ControllerRevision.
pub const REVISION_RESOURCE: &str = "controllerrevisions";
/// Kind of ControllerRevision.
pub const REVISION_KIND: &str = "ControllerRevision";

/// The CustomResourceDefinition for ControllerRevision, as Metacontroller installs it. Its group
/// is one kube-apiserver protects (`*.k8s.io`), so it carries the API approval annotation with
/// the value of Metacontroller's own manifest; without it a real API server answers 422.
pub fn revision_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "controllerrevisions.metacontroller.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved, request not yet submitted"},
        },
        "spec": {
            "group": "metacontroller.k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "controllerrevisions", "singular": "controllerrevision",
                      "kind": "ControllerRevision", "listKind": "ControllerRevisionList"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

/// One revision as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// ControllerRevision name.
    pub name: String,
    /// The parent fields at this revision.
    pub parent_patch: Value,
    /// Children claimed, as `(apiGroup, kind)` -> names (`namespace/name` for children of
    /// cluster-scoped parents).
    pub children: BTreeMap<(String, String), BTreeSet<String>>,
    /// The stored object, when it exists.
    pub object: Option<Arc<Value>>,
}

/// A write to a ControllerRevision.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum RevisionWrite {
    /// Create a revision object.
    Create {
        /// The object to POST.
        object: Value,
    },
    /// Replace a revision's children claims.
    Update {
        /// The object to PUT (with resourceVersion).
        object: Value,
        /// The revision as stored (what the update changes; `dryrun` diffs against it).
        #[serde(skip)]
        live: Arc<Value>,
    },
    /// Delete a revision that claims nothing any more.
    Delete {
        /// Name.
        name: String,
        /// Namespace.
        namespace: String,
        /// uid precondition.
        uid: String,
        /// The revision as stored (`dryrun` shows what goes).
        #[serde(skip)]
        live: Arc<Value>,
    },
}

/// Where a rollout stands after this sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutState {
    /// `RolloutWaiting`, `RolloutProgressing` or `OnLatestRevision`.
    pub reason: String,
    /// Human explanation.
    pub message: String,
    /// True while children remain on older revisions.
    pub in_progress: bool,
}

impl RolloutState {
    /// The parent status condition `Updated` for this state.
    pub fn condition(&self, now: &str) -> Value {
        json!({
            "type": "Updated",
            "status": if self.in_progress { "False" } else { "True" },
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": now,
        })
    }
}

/// The field paths of a revision: `field_paths`, or `["spec"]` when none are given, each split
/// on `.` (empty paths dropped).
fn effective_paths(field_paths: &[String]) -> Vec<Vec<&str>> {
    if field_paths.is_empty() {
        return vec![vec!["spec"]];
    }
    field_paths
        .iter()
        .map(|p| {
            p.split('.')
                .filter(|s| !s.is_empty())
                .collect::<Vec<&str>>()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// The value at `parts` inside `v`, if every step exists.
fn lookup<'v>(v: &'v Value, parts: &[&str]) -> Option<&'v Value> {
    parts.iter().try_fold(v, |cur, p| cur.get(*p))
}

/// The parent fields named by `field_paths` (default `["spec"]`).
pub fn parent_patch(parent: &Value, field_paths: &[String]) -> Value {
    let mut out = Value::Object(Map::new());
    for parts in effective_paths(field_paths) {
        if let Some(value) = lookup(parent, &parts) {
            set_path(&mut out, &parts, value.clone());
        }
    }
    out
}

/// Set the value at `parts` inside `v`, making the objects on the way.
fn set_path(v: &mut Value, parts: &[&str], value: Value) {
    let Some((last, init)) = parts.split_last() else {
        return;
    };
    let mut slot = v;
    for step in init {
        if !slot.get(*step).is_some_and(Value::is_object) {
            slot[*step] = Value::Object(Map::new());
        }
        slot = &mut slot[*step];
    }
    slot[*last] = value;
}

/// The parent as it was at a revision: a copy of `parent` where every field path takes its
/// value from `patch`, and is removed when `patch` has none (the field did not exist at that
/// revision). Fields outside the paths keep their current value.
///
/// This is a replacement per path, not a merge: merging the old patch into the current parent
/// would keep a field that was added since (e.g. template annotations set for the first
/// time), making the old revision look identical to the new one.
pub fn patched_parent(parent: &Value, patch: &Value, field_paths: &[String]) -> Value {
    let mut p = parent.clone();
    for parts in effective_paths(field_paths) {
        let Some((last, init)) = parts.split_last() else {
            continue;
        };
        match lookup(patch, &parts) {
            Some(value) => set_path(&mut p, &parts, value.clone()),
            None => {
                if let Some(Value::Object(m)) = p.pointer_mut(&pointer(init)) {
                    m.remove(*last);
                }
            }
        }
    }
    p
}

/// A JSON pointer for `parts` (`~` and `/` escaped).
fn pointer(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The revision name for a parent patch: `<parent>-<10 hex digits>` (parent name shortened to
/// keep the result a valid object name).
pub fn revision_name(parent_name: &str, patch: &Value) -> String {
    let hash = hash_value(patch);
    let max = 253 - 11;
    let base: String = parent_name.chars().take(max).collect();
    format!("{base}-{}", &hash[..10])
}

/// Read a ControllerRevision object.
pub fn revision_from_object(obj: Arc<Value>) -> Revision {
    let mut children: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for c in obj
        .get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let group = c
            .get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = c.get("kind").and_then(Value::as_str).unwrap_or_default();
        let names = c
            .get("names")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string);
        children
            .entry((group.to_string(), kind.to_string()))
            .or_default()
            .extend(names);
    }
    Revision {
        name: object::name(&obj).unwrap_or_default().to_string(),
        parent_patch: obj.get("parentPatch").cloned().unwrap_or(json!({})),
        children,
        object: Some(obj),
    }
}

/// A child's claim key inside a revision: `(apiGroup, kind)` and name.
pub fn claim_key(
    id: &ChildId,
    api_version: &str,
    kind: &str,
    parent_namespaced: bool,
) -> ((String, String), String) {
    let name = if parent_namespaced {
        id.key.name.clone()
    } else {
        id.object()
    };
    (
        (object::group_of(api_version).to_string(), kind.to_string()),
        name,
    )
}

/// Inputs of [`step`].
#[derive(Debug)]
pub struct StepInput<'a> {
    /// Name of the latest revision.
    pub latest: &'a str,
    /// Current claims: child -> revision name (from the stored revisions).
    pub claims: BTreeMap<ChildId, String>,
    /// Desired state per revision, for rolling children only.
    pub desired: &'a BTreeMap<String, BTreeMap<ChildId, Value>>,
    /// The latest revision's rolling children in hook order.
    pub latest_order: &'a [ChildId],
    /// Observed rolling children.
    pub observed: &'a BTreeMap<ChildId, Arc<Value>>,
    /// Status checks per child type key.
    pub checks: &'a BTreeMap<String, Vec<StatusConditionCheck>>,
}

/// The outcome of [`step`].
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// New claims: child -> revision name.
    pub claims: BTreeMap<ChildId, String>,
    /// Where the rollout stands.
    pub state: RolloutState,
}

/// Does `observed` already match `desired` (nothing to apply)?
pub fn up_to_date(observed: &Value, desired: &Value) -> bool {
    apply::apply(observed, desired).is_ok_and(|a| !a.changed)
}

/// Does `obj` pass every status condition check?
pub fn passes_checks(obj: &Value, checks: &[StatusConditionCheck]) -> bool {
    let conditions = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    checks.iter().all(|check| {
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(check.type_.as_str())
                && check
                    .status
                    .as_deref()
                    .is_none_or(|s| c.get("status").and_then(Value::as_str) == Some(s))
                && check
                    .reason
                    .as_deref()
                    .is_none_or(|r| c.get("reason").and_then(Value::as_str) == Some(r))
        })
    })
}

/// Decide the claims for this sync and at most one rollout step.
pub fn step(input: StepInput<'_>) -> StepOutcome {
    let latest = input.latest.to_string();
    let latest_desired = input.desired.get(&latest);
    let wanted_by_latest = |id: &ChildId| latest_desired.is_some_and(|d| d.contains_key(id));
    let mut claims: BTreeMap<ChildId, String> = BTreeMap::new();
    // Keep claims of existing children; claims of vanished children, and claims by a revision
    // whose desired state is unknown, lapse (the child then goes to the latest revision).
    for (id, rev) in input.claims {
        if input.observed.contains_key(&id) && input.desired.contains_key(&rev) {
            claims.insert(id, rev);
        }
    }
    // Children of old revisions that need no rollout move freely.
    for (id, rev) in claims.iter_mut() {
        if *rev == latest {
            continue;
        }
        let old = input.desired.get(rev.as_str()).and_then(|d| d.get(id));
        let new = latest_desired.and_then(|d| d.get(id));
        let free = match (old, new) {
            (_, None) => true, // the latest revision no longer wants it: let it go
            (None, Some(_)) => true,
            (Some(o), Some(n)) => {
                apply::values_equal(o, n)
                    || input.observed.get(id).is_some_and(|obs| up_to_date(obs, n))
            }
        };
        if free {
            *rev = latest.clone();
        }
    }
    // Everything the latest revision wants that nobody claims goes to it.
    for id in input.latest_order {
        claims.entry(id.clone()).or_insert_with(|| latest.clone());
    }
    claims.retain(|id, rev| *rev != latest || wanted_by_latest(id));

    let pending: Vec<&ChildId> = input
        .latest_order
        .iter()
        .filter(|id| claims.get(*id).is_some_and(|r| *r != latest))
        .collect();
    let total = input.latest_order.len();
    if pending.is_empty() {
        return StepOutcome {
            claims,
            state: RolloutState {
                reason: "OnLatestRevision".into(),
                message: format!("all {total} children are on revision {latest}"),
                in_progress: false,
            },
        };
    }
    // Wait until every child on the latest revision exists, is up to date and healthy.
    for id in input.latest_order {
        if claims.get(id) != Some(&latest) {
            continue;
        }
        let Some(obs) = input.observed.get(id) else {
            return waiting(claims, &latest, format!("waiting for {id} to be created"));
        };
        let desired = latest_desired.and_then(|d| d.get(id));
        if desired.is_some_and(|d| !up_to_date(obs, d)) || object::is_deleting(obs) {
            return waiting(claims, &latest, format!("waiting for {id} to be updated"));
        }
        let checks = input
            .checks
            .get(&id.type_key)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if !passes_checks(obs, checks) {
            let want: Vec<String> = checks
                .iter()
                .map(|c| format!("{}={}", c.type_, c.status.as_deref().unwrap_or("*")))
                .collect();
            return waiting(
                claims,
                &latest,
                format!(
                    "waiting for {id} to pass status checks ({})",
                    want.join(", ")
                ),
            );
        }
    }
    let next = pending[0].clone();
    claims.insert(next.clone(), latest.clone());
    let done = total - pending.len() + 1;
    StepOutcome {
        claims,
        state: RolloutState {
            reason: "RolloutProgressing".into(),
            message: format!("updating {next} ({done}/{total} on revision {latest})"),
            in_progress: true,
        },
    }
}

fn waiting(claims: BTreeMap<ChildId, String>, latest: &str, message: String) -> StepOutcome {
    StepOutcome {
        claims,
        state: RolloutState {
            reason: "RolloutWaiting".into(),
            message: format!("{message} before rolling further towards {latest}"),
            in_progress: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::child::ObjectKeyView;

    fn id(name: &str) -> ChildId {
        ChildId {
            type_key: "Pod.v1".into(),
            key: ObjectKeyView {
                namespace: Some("ns".into()),
                name: name.into(),
            },
        }
    }

    fn pod(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"image": image}})
    }

    fn live(name: &str, image: &str, ready: bool) -> Arc<Value> {
        let mut o = apply::for_create(&pod(name, image));
        o["status"] =
            json!({"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]});
        Arc::new(o)
    }

    fn checks() -> BTreeMap<String, Vec<StatusConditionCheck>> {
        let mut m = BTreeMap::new();
        m.insert(
            "Pod.v1".to_string(),
            vec![StatusConditionCheck {
                type_: "Ready".into(),
                status: Some("True".into()),
                reason: None,
            }],
        );
        m
    }

    fn desired(image: &str, names: &[&str]) -> BTreeMap<ChildId, Value> {
        names.iter().map(|n| (id(n), pod(n, image))).collect()
    }

    struct World {
        desired: BTreeMap<String, BTreeMap<ChildId, Value>>,
        order: Vec<ChildId>,
        observed: BTreeMap<ChildId, Arc<Value>>,
        checks: BTreeMap<String, Vec<StatusConditionCheck>>,
    }

    impl World {
        fn new(observed: &[(&str, &str, bool)]) -> Self {
            let mut d = BTreeMap::new();
            d.insert("old".to_string(), desired("v1", &["a", "b", "c"]));
            d.insert("new".to_string(), desired("v2", &["a", "b", "c"]));
            World {
                desired: d,
                order: vec![id("a"), id("b"), id("c")],
                observed: observed
                    .iter()
                    .map(|(n, img, r)| (id(n), live(n, img, *r)))
                    .collect(),
                checks: checks(),
            }
        }

        fn step(&self, claims: &[(&str, &str)]) -> StepOutcome {
            step(StepInput {
                latest: "new",
                claims: claims.iter().map(|(n, r)| (id(n), r.to_string())).collect(),
                desired: &self.desired,
                latest_order: &self.order,
                observed: &self.observed,
                checks: &self.checks,
            })
        }
    }

    fn on_latest(o: &StepOutcome) -> Vec<String> {
        o.claims
            .iter()
            .filter(|(_, r)| r.as_str() == "new")
            .map(|(i, _)| i.key.name.clone())
            .collect()
    }

    #[test]
    fn first_step_moves_the_first_child_in_hook_order() {
        let w = World::new(&[("a", "v1", true), ("b", "v1", true), ("c", "v1", true)]);
        let o = w.step(&[("a", "old"), ("b", "old"), ("c", "old")]);
        assert_eq!(on_latest(&o), vec!["a"]);
        assert_eq!(o.state.reason, "RolloutProgressing");
        assert!(o.state.in_progress);
    }

    #[test]
    fn waits_while_an_updated_child_is_missing_stale_or_not_ready() {
        // a moved but deleted (Recreate): wait for it to be created
        let w = World::new(&[("b", "v1", true), ("c", "v1", true)]);
        let o = w.step(&[("a", "new"), ("b", "old"), ("c", "old")]);
        assert_eq!(o.state.reason, "RolloutWaiting");
        assert!(o.state.message.contains("created"), "{}", o.state.message);
        assert_eq!(on_latest(&o), vec!["a"]);
        // a recreated but not ready
        let w = World::new(&[("a", "v2", false), ("b", "v1", true), ("c", "v1", true)]);
        let o = w.step(&[("a", "new"), ("b", "old"), ("c", "old")]);
        assert_eq!(o.state.reason, "RolloutWaiting");
        assert!(
            o.state.message.contains("Ready=True"),
            "{}",
            o.state.message
        );
        // a ready: b moves
        let w = World::new(&[("a", "v2", true), ("b", "v1", true), ("c", "v1", true)]);
        let o = w.step(&[("a", "new"), ("b", "old"), ("c", "old")]);
        assert_eq!(on_latest(&o), vec!["a", "b"]);
    }

    #[test]
    fn unchanged_or_unwanted_children_move_freely_and_finish() {
        let mut w = World::new(&[("a", "v2", true), ("b", "v2", true), ("c", "v1", true)]);
        // b is already up to date with the latest desired state
        let o = w.step(&[("a", "new"), ("b", "old"), ("c", "old")]);
        assert_eq!(on_latest(&o), vec!["a", "b", "c"]);
        assert_eq!(o.state.reason, "RolloutProgressing");
        // latest no longer wants c (scale down during a rollout): released from old
        w.desired.insert("new".into(), desired("v2", &["a", "b"]));
        w.order = vec![id("a"), id("b")];
        let o = w.step(&[("a", "new"), ("b", "new"), ("c", "old")]);
        assert!(!o.claims.contains_key(&id("c")), "{:?}", o.claims);
        assert_eq!(o.state.reason, "OnLatestRevision");
        assert!(!o.state.in_progress);
    }

    #[test]
    fn unclaimed_children_go_to_latest_and_vanished_claims_lapse() {
        let w = World::new(&[("a", "v1", true)]);
        let o = w.step(&[("a", "old"), ("zz", "old")]);
        assert!(!o.claims.contains_key(&id("zz")));
        // b and c do not exist: claimed by latest (to be created), a is the pending one
        assert_eq!(on_latest(&o), vec!["b", "c"]);
        assert_eq!(o.state.reason, "RolloutWaiting");
    }

    #[test]
    fn status_checks_match_type_status_and_reason() {
        let obj = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ok"}]}});
        let c = |s: Option<&str>, r: Option<&str>| StatusConditionCheck {
            type_: "Ready".into(),
            status: s.map(Into::into),
            reason: r.map(Into::into),
        };
        assert!(passes_checks(&obj, &[c(Some("True"), None)]));
        assert!(passes_checks(&obj, &[c(None, Some("Ok"))]));
        assert!(!passes_checks(&obj, &[c(Some("False"), None)]));
        assert!(!passes_checks(&obj, &[c(Some("True"), Some("Bad"))]));
        assert!(passes_checks(&obj, &[]));
        assert!(!passes_checks(&json!({}), &[c(None, None)]));
    }

    #[test]
    fn patches_names_and_hashes_are_stable() {
        let parent =
            json!({"metadata": {"name": "p"}, "spec": {"replicas": 3, "template": {"x": 1}}});
        let patch = parent_patch(&parent, &["spec.template".into()]);
        assert_eq!(patch, json!({"spec": {"template": {"x": 1}}}));
        assert_eq!(parent_patch(&parent, &[])["spec"]["replicas"], 3);
        let a = json!({"b": 1, "a": [1, {"y": 2, "x": 1}]});
        let b = json!({"a": [1, {"x": 1, "y": 2}], "b": 1});
        assert_eq!(hash_value(&a), hash_value(&b));
        assert_ne!(hash_value(&a), hash_value(&json!({"b": 2})));
        let n = revision_name("p", &patch);
        assert!(n.starts_with("p-") && n.len() == 12, "{n}");
        let paths = ["spec.template".to_string()];
        let old = patched_parent(&parent, &json!({"spec": {"template": {"x": 0}}}), &paths);
        assert_eq!(old["spec"]["template"]["x"], 0);
        assert_eq!(old["spec"]["replicas"], 3);
    }

    #[test]
    fn the_parent_at_a_revision_drops_fields_added_since() {
        // Template annotations added after the revision: the old parent has none (a merge of
        // the old patch would keep them and make both revisions look the same).
        let now = json!({"metadata": {"name": "p"}, "spec": {"replicas": 3,
            "template": {"metadata": {"labels": {"a": "b"}, "annotations": {"rev": "2"}}}}});
        let then = json!({"spec": {"replicas": 3,
            "template": {"metadata": {"labels": {"a": "b"}}}}});
        let old = patched_parent(&now, &then, &[]);
        assert_eq!(old["spec"], then["spec"]);
        assert_eq!(old["metadata"]["name"], "p");
        // A whole field path absent at the revision is removed; other paths stay as they are.
        let paths = ["spec.template".to_string(), "spec.extra".to_string()];
        let now = json!({"spec": {"replicas": 5, "extra": 1, "template": {"x": 2}}});
        let old = patched_parent(&now, &json!({"spec": {"template": {"x": 1}}}), &paths);
        assert_eq!(old, json!({"spec": {"replicas": 5, "template": {"x": 1}}}));
        // Round trip: the parent at its own patch is the parent.
        assert_eq!(
            patched_parent(&now, &parent_patch(&now, &paths), &paths),
            now
        );
    }

    #[test]
    fn revision_objects_round_trip_claims() {
        let obj = Arc::new(
            json!({"metadata": {"name": "p-1"}, "parentPatch": {"spec": {}},
            "children": [{"apiGroup": "", "kind": "Pod", "names": ["a", "b"]}]}),
        );
        let r = revision_from_object(obj);
        assert_eq!(r.name, "p-1");
        assert_eq!(r.children[&(String::new(), "Pod".into())].len(), 2);
        let (k, n) = claim_key(&id("a"), "v1", "Pod", true);
        assert_eq!((k.0.as_str(), k.1.as_str(), n.as_str()), ("", "Pod", "a"));
        let (_, n) = claim_key(&id("a"), "v1", "Pod", false);
        assert_eq!(n, "ns/a");
    }
}
