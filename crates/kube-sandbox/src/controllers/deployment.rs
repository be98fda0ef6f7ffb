//! A simulated Deployment controller, as kube-controller-manager runs one. Each pod template
//! gets a ReplicaSet `<name>-<pod-template-hash>` (the hash label on its selector, template and
//! itself; the `deployment.kubernetes.io/revision`, `desired-replicas` and `max-replicas`
//! annotations), rolled out with `RollingUpdate` (`maxSurge` rounded up, `maxUnavailable`
//! rounded down, 25% each by default) or `Recreate` (old Pods gone before new ones start).
//! `status` sums the ReplicaSets' and carries the `Available` and `Progressing` conditions
//! with upstream's reasons and messages. A ReplicaSet event syncs only its Deployment (owner-uid
//! index). A rollout that makes no progress for `progressDeadlineSeconds` gets `Progressing`
//! False `ProgressDeadlineExceeded` (re-examined when the deadline passes); old ReplicaSets
//! beyond `revisionHistoryLimit` are deleted once a rollout is complete, oldest revision first.
//! `kubectl rollout undo` works as on a cluster: it copies an old ReplicaSet's template back,
//! and that ReplicaSet becomes the new one with the next revision. Paused Deployments only get
//! their status (and clean-up).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::pods;
use super::replicaset;
use crate::ops;
use crate::state::{State, now_rfc3339, now_unix};
use crate::store::Stored;

/// Storage key of Deployments.
pub const GR: &str = "apps/deployments";
const WHO: &str = "Deployment";
const HASH: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
const MAX: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations not copied onto its ReplicaSets (`skipCopyAnnotation`).
const SKIP_COPY: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    "deployment.kubernetes.io/revision-history",
    DESIRED,
    MAX,
    "deprecated.deployment.rollback.to",
];

/// A ReplicaSet changed: sync the Deployment that controls it.
pub fn rs_changed(state: &Arc<State>, rs: &Stored) {
    if let Some(d) = pods::controller_of(state, rs, GR) {
        sync(state, &d);
    }
}

struct Rs {
    stored: Arc<Stored>,
    v: Value,
}

impl Rs {
    fn spec_replicas(&self) -> i64 {
        self.v["spec"]["replicas"].as_i64().unwrap_or(1)
    }
    fn status(&self, k: &str) -> i64 {
        self.v["status"][k].as_i64().unwrap_or(0)
    }
    fn revision(&self) -> i64 {
        self.v["metadata"]["annotations"][REVISION]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    }
}

/// The template without the hash label (`EqualIgnoreHash`).
fn without_hash(t: &Value) -> Value {
    let mut t = t.clone();
    if let Some(l) = t["metadata"]["labels"].as_object_mut() {
        l.remove(HASH);
        if l.is_empty()
            && let Some(m) = t["metadata"].as_object_mut()
        {
            m.remove("labels");
        }
    }
    t
}

fn load(state: &State, d: &Stored) -> Vec<Rs> {
    pods::controlled(state, &d.uid, replicaset::GR)
        .into_iter()
        .filter(|s| !s.deleting)
        .filter_map(|s| {
            let v = s.value().ok()?;
            Some(Rs { stored: s, v })
        })
        .collect()
}

/// Bring one Deployment's ReplicaSets and status in line with its spec.
pub fn sync(state: &Arc<State>, d: &Stored) {
    let Some(d) = pods::current(state, d) else {
        return;
    };
    let d = &*d;
    let Ok(dv) = d.value() else { return };
    let replicas = dv["spec"]["replicas"].as_i64().unwrap_or(1).max(0);
    let recreate = dv["spec"]["strategy"]["type"] == "Recreate";
    let (surge, unavailable) = limits(&dv, replicas, recreate);
    let template = &dv["spec"]["template"];
    let rss = load(state, d);
    let max_rev = rss.iter().map(Rs::revision).max().unwrap_or(0);
    let new_idx = rss
        .iter()
        .position(|r| without_hash(&r.v["spec"]["template"]) == without_hash(template));
    let mut created = None;
    if dv["spec"]["paused"] != true {
        let old: Vec<&Rs> = rss
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != new_idx)
            .map(|(_, r)| r)
            .collect();
        let old_pods: i64 = old.iter().map(|r| r.status("replicas")).sum();
        match new_idx.map(|i| &rss[i]) {
            None if recreate && old_pods > 0 => {
                for r in &old {
                    scale(state, r, 0, replicas, 0);
                }
            }
            None => {
                let current: i64 = old.iter().map(|r| r.spec_replicas()).sum();
                let n = if recreate {
                    replicas
                } else {
                    (replicas + surge - current).clamp(0, replicas)
                };
                created = create_rs(state, d, &dv, n, max_rev + 1, replicas + surge);
            }
            Some(new) => {
                if new.revision() < max_rev || new.revision() == 0 {
                    annotate(
                        state,
                        new,
                        &dv,
                        max_rev.max(1) + i64::from(new.revision() != 0),
                    );
                }
                if recreate {
                    for r in old.iter().filter(|r| r.spec_replicas() > 0) {
                        scale(state, r, 0, replicas, 0);
                    }
                    if old_pods == 0 && new.spec_replicas() != replicas {
                        scale(state, new, replicas, replicas, 0);
                    }
                } else {
                    roll(state, new, &old, replicas, surge, unavailable);
                }
            }
        }
    }
    let rss = load(state, d);
    let new = rss
        .iter()
        .find(|r| without_hash(&r.v["spec"]["template"]) == without_hash(template));
    let new_name = new.map(|r| r.stored.key.name.clone()).or(created.clone());
    if let Some(rev) = new.map(Rs::revision).filter(|r| *r > 0) {
        set_revision(state, d, rev);
    }
    let Some(fresh) = state.store.get(GR, &d.key.ns, &d.key.name) else {
        return;
    };
    pods::write_status(state, &fresh, WHO, |cur| {
        status(
            cur,
            &rss,
            new,
            new_name.as_deref(),
            created.is_some(),
            replicas,
            unavailable,
        )
    });
    // `requeueStuckDeployment`: look again when the progress deadline passes.
    if let Some(v) = state
        .store
        .get(GR, &d.key.ns, &d.key.name)
        .and_then(|f| f.value().ok())
        && let Some(left) = progress_left(&v)
    {
        let wait = std::time::Duration::from_secs(left.max(0).unsigned_abs() + 1);
        state.requeue.after(&d.key, wait);
    }
    let complete = new.is_some_and(|n| {
        n.spec_replicas() == replicas
            && n.status("availableReplicas") == replicas
            && rss.iter().map(|r| r.status("replicas")).sum::<i64>() == replicas
    });
    if complete || dv["spec"]["paused"] == true {
        clean_up(state, &dv, &rss, new);
    }
}

/// `cleanupDeployment`: keep at most `revisionHistoryLimit` (10 by default) old ReplicaSets,
/// deleting the oldest revisions first, and only those scaled to zero and observed so.
fn clean_up(state: &State, dv: &Value, rss: &[Rs], new: Option<&Rs>) {
    let Some(limit) = dv["spec"]["revisionHistoryLimit"].as_i64() else {
        return;
    };
    let new_uid = new.map(|n| n.stored.uid.as_str());
    let mut old: Vec<&Rs> = rss
        .iter()
        .filter(|r| Some(r.stored.uid.as_str()) != new_uid && !r.stored.deleting)
        .collect();
    let surplus = old.len() as i64 - limit;
    if surplus <= 0 {
        return;
    }
    old.sort_by_key(|r| {
        (
            r.revision(),
            r.v["metadata"]["creationTimestamp"].to_string(),
        )
    });
    for r in old.into_iter().take(surplus.unsigned_abs() as usize) {
        let observed = r.v["status"]["observedGeneration"].as_i64().unwrap_or(0);
        let generation = r.v["metadata"]["generation"].as_i64().unwrap_or(0);
        if r.status("replicas") != 0 || r.spec_replicas() != 0 || generation > observed {
            continue;
        }
        pods::delete(state, &r.stored, WHO);
    }
}

/// (maxSurge, maxUnavailable) as `ResolveFenceposts` computes them.
fn limits(dv: &Value, replicas: i64, recreate: bool) -> (i64, i64) {
    if recreate {
        return (0, 0);
    }
    let ru = &dv["spec"]["strategy"]["rollingUpdate"];
    let surge = pods::int_or_percent(&ru["maxSurge"], replicas, true, 25);
    let mut unavailable = pods::int_or_percent(&ru["maxUnavailable"], replicas, false, 25);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable.min(replicas))
}

/// One step of a rolling update: scale the new ReplicaSet up within maxSurge, the old ones down
/// within maxUnavailable (`reconcileNewReplicaSet`, `reconcileOldReplicaSets`).
fn roll(state: &State, new: &Rs, old: &[&Rs], replicas: i64, surge: i64, unavailable: i64) {
    let max_total = replicas + surge;
    let new_spec = new.spec_replicas();
    let old_spec: i64 = old.iter().map(|r| r.spec_replicas()).sum();
    if new_spec > replicas {
        scale(state, new, replicas, replicas, surge);
    } else if new_spec < replicas {
        let current = new_spec + old_spec;
        if current < max_total {
            let up = (max_total - current).min(replicas - new_spec);
            scale(state, new, new_spec + up, replicas, surge);
        }
    }
    if old_spec == 0 {
        return;
    }
    let all_pods = new_spec + old_spec;
    let min_available = replicas - unavailable;
    let new_unavailable = new_spec - new.status("availableReplicas");
    let mut budget = all_pods - min_available - new_unavailable;
    // Old Pods that are not available can go first without reducing availability.
    let mut olds: Vec<&&Rs> = old.iter().filter(|r| r.spec_replicas() > 0).collect();
    olds.sort_by_key(|r| r.revision());
    for r in &olds {
        let unhealthy = r.spec_replicas() - r.status("availableReplicas");
        if unhealthy > 0 && budget > 0 {
            let d = unhealthy.min(budget).min(r.spec_replicas());
            scale(state, r, r.spec_replicas() - d, replicas, surge);
            budget -= d;
        }
    }
    let mut budget = all_pods - min_available - new_unavailable;
    for r in &olds {
        if budget <= 0 {
            break;
        }
        let d = r.spec_replicas().min(budget);
        scale(state, r, r.spec_replicas() - d, replicas, surge);
        budget -= d;
    }
}

/// Set a ReplicaSet's `spec.replicas` with the desired/max annotations.
fn scale(state: &State, rs: &Rs, to: i64, desired: i64, surge: i64) {
    let uid = rs.stored.uid.clone();
    let r = ops::mutate(state, &rs.stored.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(uid.as_str()) {
            return false;
        }
        let before = v.clone();
        v["spec"]["replicas"] = json!(to);
        v["metadata"]["annotations"][DESIRED] = json!(desired.to_string());
        v["metadata"]["annotations"][MAX] = json!((desired + surge).to_string());
        *v != before
    });
    if let Err(e) = r {
        tracing::warn!(replicaset = %rs.stored.key.name, error = %e, "simulated Deployment controller could not scale");
    }
}

/// Give an existing ReplicaSet that becomes the new one again the next revision.
fn annotate(state: &State, rs: &Rs, dv: &Value, rev: i64) {
    let uid = rs.stored.uid.clone();
    let r = ops::mutate(state, &rs.stored.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(uid.as_str()) {
            return false;
        }
        copy_annotations(dv, v);
        v["metadata"]["annotations"][REVISION] = json!(rev.to_string());
        true
    });
    if let Err(e) = r {
        tracing::warn!(replicaset = %rs.stored.key.name, error = %e, "simulated Deployment controller could not annotate");
    }
}

fn copy_annotations(dv: &Value, rs: &mut Value) {
    if let Some(a) = dv["metadata"]["annotations"].as_object() {
        for (k, val) in a {
            if !SKIP_COPY.contains(&k.as_str()) {
                rs["metadata"]["annotations"][k] = val.clone();
            }
        }
    }
}

/// The Deployment's own revision annotation.
fn set_revision(state: &State, d: &Stored, rev: i64) {
    let uid = d.uid.clone();
    let r = ops::mutate(state, &d.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(uid.as_str())
            || v["metadata"]["annotations"][REVISION] == json!(rev.to_string())
        {
            return false;
        }
        v["metadata"]["annotations"][REVISION] = json!(rev.to_string());
        true
    });
    if let Err(e) = r {
        tracing::warn!(deployment = %d.key.name, error = %e, "simulated Deployment controller could not annotate");
    }
}

/// Create the ReplicaSet for the current template; returns its name.
fn create_rs(
    state: &State,
    d: &Stored,
    dv: &Value,
    replicas: i64,
    rev: i64,
    max: i64,
) -> Option<String> {
    let collision = dv["status"]["collisionCount"].as_i64();
    let hash = pods::template_hash(&dv["spec"]["template"], collision);
    let name = format!("{}-{hash}", d.key.name);
    let mut template = dv["spec"]["template"].clone();
    template["metadata"]["labels"][HASH] = json!(hash);
    let mut selector = dv["spec"]["selector"].clone();
    selector["matchLabels"][HASH] = json!(hash);
    let mut rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "labels": template["metadata"]["labels"],
            "annotations": {REVISION: rev.to_string(),
                DESIRED: dv["spec"]["replicas"].as_i64().unwrap_or(1).to_string(),
                MAX: max.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                "name": d.key.name, "uid": d.uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    });
    if let Some(m) = dv["spec"]["minReadySeconds"].as_i64() {
        rs["spec"]["minReadySeconds"] = json!(m);
    }
    copy_annotations(dv, &mut rs);
    pods::create_in(state, replicaset::GR, &d.key.ns, rs, WHO).map(|_| name)
}

/// `calculateStatus` and `syncRolloutStatus`.
fn status(
    dv: &Value,
    rss: &[Rs],
    new: Option<&Rs>,
    new_name: Option<&str>,
    created: bool,
    replicas: i64,
    max_unavailable: i64,
) -> Value {
    let old = &dv["status"];
    let mut s: Map<String, Value> = old.as_object().cloned().unwrap_or_default();
    let sum = |k: &str| rss.iter().map(|r| r.status(k)).sum::<i64>();
    let total_spec: i64 = rss.iter().map(Rs::spec_replicas).sum();
    let (st_replicas, ready, avail) = (
        sum("replicas"),
        sum("readyReplicas"),
        sum("availableReplicas"),
    );
    let updated = new.map_or(0, |r| r.status("replicas"));
    if let Some(g) = dv["metadata"]["generation"].as_i64() {
        s.insert("observedGeneration".into(), json!(g));
    }
    pods::put_nonzero(&mut s, "replicas", st_replicas);
    pods::put_nonzero(&mut s, "updatedReplicas", updated);
    pods::put_nonzero(&mut s, "readyReplicas", ready);
    pods::put_nonzero(&mut s, "availableReplicas", avail);
    pods::put_nonzero(&mut s, "unavailableReplicas", (total_spec - avail).max(0));
    s.insert(
        "terminatingReplicas".into(),
        json!(sum("terminatingReplicas")),
    );
    let now = now_rfc3339();
    if avail >= replicas - max_unavailable {
        pods::set_condition(
            &mut s,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            &now,
            true,
        );
    } else {
        pods::set_condition(
            &mut s,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            &now,
            true,
        );
    }
    let Some(name) = new_name else {
        return Value::Object(s);
    };
    let complete = updated == replicas && avail == replicas && st_replicas == replicas;
    let progressing = updated > old["updatedReplicas"].as_i64().unwrap_or(0)
        || (st_replicas - updated)
            < old["replicas"].as_i64().unwrap_or(0) - old["updatedReplicas"].as_i64().unwrap_or(0)
        || ready > old["readyReplicas"].as_i64().unwrap_or(0)
        || avail > old["availableReplicas"].as_i64().unwrap_or(0);
    let has_progressing = pods::condition(dv, "Progressing").is_some();
    if complete && !created {
        pods::set_condition(
            &mut s,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &format!("ReplicaSet \"{name}\" has successfully progressed."),
            &now,
            true,
        );
    } else if created {
        pods::set_condition(
            &mut s,
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            &format!("Created new replica set \"{name}\""),
            &now,
            true,
        );
    } else if progressing || !has_progressing {
        // Removed and set again, so lastUpdateTime moves (as upstream).
        let transition = pods::condition(dv, "Progressing")
            .filter(|c| c["status"] == "True")
            .map(|c| c["lastTransitionTime"].clone());
        if let Some(cs) = s.get_mut("conditions").and_then(Value::as_array_mut) {
            cs.retain(|c| c["type"] != "Progressing");
        }
        pods::set_condition(
            &mut s,
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            &format!("ReplicaSet \"{name}\" is progressing."),
            &now,
            true,
        );
        if let (Some(t), Some(cs)) = (
            transition,
            s.get_mut("conditions").and_then(Value::as_array_mut),
        ) && let Some(c) = cs.last_mut()
        {
            c["lastTransitionTime"] = t;
        }
    } else if progress_left(dv).is_some_and(|left| left <= 0) {
        pods::set_condition(
            &mut s,
            "Progressing",
            "False",
            TIMED_OUT,
            &format!("ReplicaSet \"{name}\" has timed out progressing."),
            &now,
            true,
        );
    }
    Value::Object(s)
}

/// The `Progressing` reason of a rollout past its `progressDeadlineSeconds`.
const TIMED_OUT: &str = "ProgressDeadlineExceeded";

/// Seconds left before a rollout in progress exceeds its `progressDeadlineSeconds`, counted
/// from the `Progressing` condition's `lastUpdateTime` (`DeploymentTimedOut`); None when there
/// is no deadline to watch (none set, no condition, rollout complete or already timed out).
fn progress_left(dv: &Value) -> Option<i64> {
    let deadline = dv["spec"]["progressDeadlineSeconds"]
        .as_i64()
        .filter(|d| *d != i64::from(i32::MAX))?;
    let c = pods::condition(dv, "Progressing")?;
    if c["reason"] == "NewReplicaSetAvailable" || c["reason"] == TIMED_OUT {
        return None;
    }
    let from = c["lastUpdateTime"]
        .as_str()?
        .parse::<jiff::Timestamp>()
        .ok()?;
    Some(from.as_second() + deadline - now_unix())
}
