//! Rolling updates (`RollingRecreate`, `RollingInPlace`) for a dry run: the rollout decision
//! the engine's live path takes (`Composite::rollout`), from ControllerRevisions read once.
//!
//! Two pure steps around the hook calls: [`revisions`] says which stored revisions still claim
//! children (the hook is then asked once per old revision, with the parent as it was at that
//! revision), and [`decide`] steps the rollout ([`rollout::step`]) and gives the
//! [`RolloutDecision`] (state, next child, ControllerRevision writes) and the desired children,
//! each as the revision claiming it wants it, for [`crate::engine::planner::plan_composite`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::engine::ownership;
use crate::engine::plan::{ChildId, ChildType, ObjectKeyView};
use crate::engine::planner::RolloutDecision;
use crate::engine::rollout::{self, Revision, RevisionWrite};
use crate::k8s::object;
use crate::k8s::selector::LabelSelector;
use crate::spec::StatusConditionCheck;

/// The rolling state of one parent before the hook calls.
#[derive(Debug, Clone)]
pub struct Revisions {
    /// The latest revision's name (from the parent's `revisionHistory.fieldPaths`).
    pub latest: String,
    /// Its parent patch.
    pub latest_patch: Value,
    /// The stored revisions controlled by the parent.
    pub stored: Vec<Revision>,
    /// Child -> revision claiming it, as stored.
    pub claims: BTreeMap<ChildId, String>,
    /// Old revisions that still claim children, with the parent as it was at each.
    pub old: Vec<(String, Value)>,
}

/// Which revisions claim which children, and the old ones the hook must be asked about.
pub fn revisions(
    parent: &Value,
    field_paths: &[String],
    stored: Vec<Revision>,
    types: &[ChildType],
) -> Revisions {
    let latest_patch = rollout::parent_patch(parent, field_paths);
    let latest = rollout::revision_name(object::name(parent).unwrap_or_default(), &latest_patch);
    let mut claims = BTreeMap::new();
    for rev in &stored {
        for ((group, kind), names) in &rev.children {
            let Some(t) = types
                .iter()
                .find(|t| t.kind == *kind && object::group_of(&t.api_version) == group)
            else {
                continue;
            };
            for n in names {
                let (ns, name) = match n.split_once('/') {
                    Some((ns, name)) => (Some(ns), name),
                    None => (object::namespace(parent), n.as_str()),
                };
                let id = ChildId {
                    type_key: t.key.clone(),
                    key: ObjectKeyView {
                        namespace: t.namespaced.then(|| ns.map(str::to_string)).flatten(),
                        name: name.to_string(),
                    },
                };
                claims.insert(id, rev.name.clone());
            }
        }
    }
    let live_old: BTreeSet<&String> = claims.values().filter(|r| **r != latest).collect();
    let old = stored
        .iter()
        .filter(|r| live_old.contains(&r.name))
        .map(|r| {
            (
                r.name.clone(),
                rollout::patched_parent(parent, &r.parent_patch, field_paths),
            )
        })
        .collect();
    Revisions {
        latest,
        latest_patch,
        stored,
        claims,
        old,
    }
}

/// Inputs of [`decide`].
pub struct DecideInput<'a> {
    /// The parent.
    pub parent: &'a Value,
    /// Whether the parent's resource is namespaced.
    pub parent_namespaced: bool,
    /// The declared child types.
    pub types: &'a [ChildType],
    /// Status checks per child type key.
    pub checks: &'a BTreeMap<String, Vec<StatusConditionCheck>>,
    /// The parent's child selector (labels of a new revision).
    pub selector: &'a LabelSelector,
    /// The claimed children per type key.
    pub observed: &'a BTreeMap<String, Vec<Arc<Value>>>,
    /// The latest answer's desired children.
    pub latest_desired: &'a [(ChildId, Value)],
    /// Each old revision's desired children (the hook's answer for the parent at it).
    pub old_desired: BTreeMap<String, Vec<(ChildId, Value)>>,
}

/// Step the rollout: the decision and the desired children (rolling ones from the revision
/// that claims them).
pub fn decide(r: Revisions, input: DecideInput<'_>) -> (RolloutDecision, Vec<(ChildId, Value)>) {
    let rolling: BTreeSet<&str> = input
        .types
        .iter()
        .filter(|t| t.method.is_rolling())
        .map(|t| t.key.as_str())
        .collect();
    let only_rolling = |d: &[(ChildId, Value)]| -> BTreeMap<ChildId, Value> {
        d.iter()
            .filter(|(id, _)| rolling.contains(id.type_key.as_str()))
            .cloned()
            .collect()
    };
    let mut desired_by_rev: BTreeMap<String, BTreeMap<ChildId, Value>> = BTreeMap::new();
    desired_by_rev.insert(r.latest.clone(), only_rolling(input.latest_desired));
    for (rev, d) in &input.old_desired {
        desired_by_rev.insert(rev.clone(), only_rolling(d));
    }
    let observed_rolling: BTreeMap<ChildId, Arc<Value>> = input
        .observed
        .iter()
        .filter(|(k, _)| rolling.contains(k.as_str()))
        .flat_map(|(k, objs)| objs.iter().map(move |o| (ChildId::of(k, o), Arc::clone(o))))
        .collect();
    let order: Vec<ChildId> = input
        .latest_desired
        .iter()
        .filter(|(id, _)| rolling.contains(id.type_key.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    let outcome = rollout::step(rollout::StepInput {
        latest: &r.latest,
        claims: r.claims.clone(),
        desired: &desired_by_rev,
        latest_order: &order,
        observed: &observed_rolling,
        checks: input.checks,
    });
    let from_rev = |id: &ChildId| {
        outcome
            .claims
            .get(id)
            .and_then(|rev| desired_by_rev.get(rev))
            .and_then(|d| d.get(id))
            .map(|v| (id.clone(), v.clone()))
    };
    let mut desired: Vec<(ChildId, Value)> = input
        .latest_desired
        .iter()
        .filter_map(|(id, v)| {
            if rolling.contains(id.type_key.as_str()) {
                from_rev(id)
            } else {
                Some((id.clone(), v.clone()))
            }
        })
        .collect();
    for (id, rev) in &outcome.claims {
        if *rev != r.latest
            && !desired.iter().any(|(d, _)| d == id)
            && let Some(x) = from_rev(id)
        {
            desired.push(x);
        }
    }
    let writes = writes(&r, &input, &outcome.claims);
    (
        RolloutDecision {
            state: Some(outcome.state),
            writes,
            claims: outcome.claims,
            latest: r.latest,
            order,
        },
        desired,
    )
}

/// The ControllerRevision writes that record the new claims.
fn writes(
    r: &Revisions,
    input: &DecideInput<'_>,
    claims: &BTreeMap<ChildId, String>,
) -> Vec<RevisionWrite> {
    type ByType = BTreeMap<(String, String), BTreeSet<String>>;
    let ns = object::namespace(input.parent)
        .unwrap_or("default")
        .to_string();
    let mut wanted: BTreeMap<&str, ByType> = BTreeMap::new();
    for (id, rev) in claims {
        let Some(t) = input.types.iter().find(|t| t.key == id.type_key) else {
            continue;
        };
        let (gk, name) = rollout::claim_key(id, &t.api_version, &t.kind, input.parent_namespaced);
        wanted
            .entry(rev.as_str())
            .or_default()
            .entry(gk)
            .or_default()
            .insert(name);
    }
    let encode = |c: &ByType| -> Value {
        Value::Array(
            c.iter()
                .map(|((g, k), names)| json!({"apiGroup": g, "kind": k, "names": names}))
                .collect(),
        )
    };
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    if !r.stored.iter().any(|s| s.name == r.latest) {
        let labels: serde_json::Map<String, Value> = input
            .selector
            .exact_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        out.push(RevisionWrite::Create {
            object: json!({
                "apiVersion": rollout::REVISION_API_VERSION,
                "kind": rollout::REVISION_KIND,
                "metadata": {"name": r.latest, "namespace": ns, "labels": labels,
                    "ownerReferences": [ownership::controller_ref_for(input.parent)]},
                "parentPatch": r.latest_patch,
                "children": encode(wanted.get(r.latest.as_str()).unwrap_or(&empty)),
            }),
        });
    }
    for rev in &r.stored {
        let want = wanted.get(rev.name.as_str()).unwrap_or(&empty);
        let Some(obj) = &rev.object else { continue };
        if want.is_empty() && rev.name != r.latest {
            out.push(RevisionWrite::Delete {
                name: rev.name.clone(),
                namespace: object::namespace(obj).unwrap_or(&ns).to_string(),
                uid: object::uid(obj).unwrap_or_default().to_string(),
            });
        } else if *want != rev.children {
            let mut o = (**obj).clone();
            o["children"] = encode(want);
            out.push(RevisionWrite::Update { object: o });
        }
    }
    out
}
