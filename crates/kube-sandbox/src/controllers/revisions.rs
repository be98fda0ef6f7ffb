//! ControllerRevisions of DaemonSets and StatefulSets, as their controllers keep them
//! (`constructHistory` / `snapshot` in the DaemonSet controller, `getStatefulSetRevisions` /
//! `truncateHistory` in the StatefulSet controller): one revision per distinct pod template,
//! `data` a strategic merge patch that replaces `spec.template`, numbered from 1; a template
//! that comes back (`kubectl rollout undo`) gets its old revision renumbered to the newest; old
//! revisions no live Pod uses are trimmed to `revisionHistoryLimit` (10 by default), oldest
//! first. `kubectl rollout history` and `rollout undo` read and apply them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::pods;
use crate::ops;
use crate::state::State;
use crate::store::Stored;

/// Storage key of ControllerRevisions.
pub const GR: &str = "apps/controllerrevisions";
/// The Pod (and DaemonSet revision) label naming the revision a Pod was made from.
pub const POD_LABEL: &str = "controller-revision-hash";
/// The StatefulSet revision label carrying its hash (`history.ControllerRevisionHashLabel`).
const STS_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The revision an owner's current template is: its name, and the value its Pods carry in
/// [`POD_LABEL`] (the hash for a DaemonSet, the revision name for a StatefulSet).
pub struct Current {
    /// The ControllerRevision's name.
    pub name: String,
    /// What the owner's Pods carry in [`POD_LABEL`].
    pub pod_label: String,
}

/// The ControllerRevision `data` of an owner: a patch that puts its template back.
fn data(owner: &Value) -> Value {
    let mut template = owner["spec"]["template"].clone();
    if template.is_object() {
        template["$patch"] = json!("replace");
    }
    json!({"spec": {"template": template}})
}

/// Make sure the owner (`kind` DaemonSet or StatefulSet) has a revision for its current
/// template, and trim its history. `live` are the [`POD_LABEL`] values of its live Pods.
pub fn sync(
    state: &State,
    owner: &Stored,
    v: &Value,
    kind: &str,
    live: &[String],
) -> Option<Current> {
    let is_ds = kind == "DaemonSet";
    let data = data(v);
    let hash = if is_ds {
        pods::template_hash(
            &v["spec"]["template"],
            v["status"]["collisionCount"].as_i64(),
        )
    } else {
        // The StatefulSet controller always hashes with its collision count (0 at first).
        let collisions = v["status"]["collisionCount"].as_i64().unwrap_or(0);
        pods::template_hash(&data, Some(collisions))
    };
    let name = format!("{}-{hash}", owner.key.name);
    let pod_label = if is_ds { hash.clone() } else { name.clone() };
    let revs: Vec<(Arc<Stored>, Value)> = pods::controlled(state, &owner.uid, GR)
        .into_iter()
        .filter(|r| !r.deleting)
        .filter_map(|r| r.value().ok().map(|rv| (r, rv)))
        .collect();
    let revision = |rv: &Value| rv["revision"].as_i64().unwrap_or(0);
    let max = revs.iter().map(|(_, rv)| revision(rv)).max().unwrap_or(0);
    let existing = revs.iter().find(|(_, rv)| rv["data"] == data);
    // An existing revision keeps its name (and hash), whatever the count of collisions now.
    let (name, pod_label) = match existing {
        Some((r, rv)) if is_ds => (
            r.key.name.clone(),
            rv["metadata"]["labels"][POD_LABEL]
                .as_str()
                .unwrap_or(&hash)
                .to_string(),
        ),
        Some((r, _)) => (r.key.name.clone(), r.key.name.clone()),
        None => (name, pod_label),
    };
    match existing {
        Some((r, rv)) if revision(rv) < max => renumber(state, r, max + 1),
        Some(_) => {}
        None => {
            let mut labels = v["spec"]["template"]["metadata"]["labels"].clone();
            if !labels.is_object() {
                labels = json!({});
            }
            labels[if is_ds { POD_LABEL } else { STS_HASH_LABEL }] = json!(hash);
            let cr = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": name, "labels": labels,
                    "annotations": v["metadata"]["annotations"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind,
                        "name": owner.key.name, "uid": owner.uid,
                        "controller": true, "blockOwnerDeletion": true}]},
                "data": data, "revision": max + 1});
            // A conflict means it exists already (a sync that raced this one).
            let _ = pods::create_in(state, GR, &owner.key.ns, cr, kind);
        }
    }
    trim(state, v, &revs, &name, live, is_ds, kind);
    Some(Current { name, pod_label })
}

/// Give a revision that is current again the next number.
fn renumber(state: &State, r: &Stored, to: i64) {
    let uid = r.uid.clone();
    let res = ops::mutate(state, &r.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(uid.as_str()) {
            return false;
        }
        v["revision"] = json!(to);
        true
    });
    if let Err(e) = res {
        tracing::warn!(revision = %r.key.name, error = %e, "could not renumber a ControllerRevision");
    }
}

/// Delete the oldest revisions beyond `revisionHistoryLimit` that are neither current nor used
/// by a live Pod.
fn trim(
    state: &State,
    v: &Value,
    revs: &[(Arc<Stored>, Value)],
    current: &str,
    live: &[String],
    is_ds: bool,
    kind: &str,
) {
    let limit = v["spec"]["revisionHistoryLimit"].as_i64().unwrap_or(10);
    let used = |r: &Stored, rv: &Value| {
        let label = if is_ds {
            rv["metadata"]["labels"][POD_LABEL]
                .as_str()
                .unwrap_or_default()
        } else {
            r.key.name.as_str()
        };
        live.iter().any(|l| l == label)
    };
    let mut old: Vec<&(Arc<Stored>, Value)> = revs
        .iter()
        .filter(|(r, rv)| r.key.name != current && !used(r, rv))
        .collect();
    let surplus = old.len() as i64 - limit;
    if limit < 0 || surplus <= 0 {
        return;
    }
    old.sort_by_key(|(_, rv)| rv["revision"].as_i64().unwrap_or(0));
    for (r, _) in old.into_iter().take(surplus.unsigned_abs() as usize) {
        pods::delete(state, r, kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_replaces_the_template() {
        let ds = json!({"spec": {"template": {"metadata": {"labels": {"a": "b"}}}}});
        assert_eq!(
            data(&ds),
            json!({"spec": {"template": {"$patch": "replace", "metadata": {"labels": {"a": "b"}}}}})
        );
    }
}
