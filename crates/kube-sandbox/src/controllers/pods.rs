//! What the simulated workload controllers (ReplicaSet, Deployment, DaemonSet, Job) share:
//! Pods from a template with a controller reference, the Pods an owner controls (through the
//! store's owner-uid index), readiness as kube-controller-manager judges it, conditions set the
//! way its helpers set them, and writes that log instead of failing the controller loop.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::ops::{self, DeleteOpts, WriteOpts};
use crate::state::State;
use crate::store::Stored;

/// Storage key of Pods.
pub const PODS: &str = "/pods";

/// The field manager kube-controller-manager's controllers write with.
pub const MANAGER: &str = "kube-controller-manager";

/// Objects of storage key `gr` whose controller reference names `owner_uid`.
pub fn controlled(state: &State, owner_uid: &str, gr: &str) -> Vec<Arc<Stored>> {
    let mut v: Vec<Arc<Stored>> = state
        .store
        .dependents(owner_uid)
        .into_iter()
        .filter(|p| &*p.key.gr == gr && p.owners.iter().any(|o| o.controller && o.uid == owner_uid))
        .collect();
    v.sort_by(|a, b| a.key.name.cmp(&b.key.name));
    v
}

/// Pods `owner_uid` controls, each with its parsed value.
pub fn controlled_pods(state: &State, owner_uid: &str) -> Vec<(Arc<Stored>, Value)> {
    controlled(state, owner_uid, PODS)
        .into_iter()
        .filter_map(|p| {
            let v = p.value().ok()?;
            Some((p, v))
        })
        .collect()
}

/// The stored version of `obj` (an event's copy may be stale), unless it is gone or being
/// deleted (the garbage collector then deletes what it controls).
pub fn current(state: &State, obj: &Stored) -> Option<Arc<Stored>> {
    state
        .store
        .get(&obj.key.gr, &obj.key.ns, &obj.key.name)
        .filter(|o| !o.deleting)
}

/// The controller owner of `obj` if it is stored under `gr`.
pub fn controller_of(state: &State, obj: &Stored, gr: &str) -> Option<Arc<Stored>> {
    let o = obj.owners.iter().find(|o| o.controller)?;
    state
        .store
        .get_by_uid(&o.uid)
        .filter(|owner| &*owner.key.gr == gr)
}

/// A Pod (to be created with `generateName: <prefix>`) from a workload's `spec.template`,
/// controlled by the owner.
pub fn from_template(
    template: &Value,
    owner: &Value,
    owner_uid: &str,
    api_version: &str,
    kind: &str,
    prefix: &str,
) -> Value {
    let mut meta = Map::new();
    meta.insert("generateName".into(), json!(prefix));
    for f in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template["metadata"].get(f).filter(|v| !v.is_null()) {
            meta.insert(f.into(), v.clone());
        }
    }
    meta.insert(
        "ownerReferences".into(),
        json!([{"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
            "uid": owner_uid, "controller": true, "blockOwnerDeletion": true}]),
    );
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"].clone()})
}

/// Create `pod` in `ns`; errors are logged (the next event retries).
pub fn create(state: &State, ns: &str, pod: Value, who: &str) -> Option<Value> {
    create_in(state, PODS, ns, pod, who)
}

/// Create `obj` of storage key `gr` in `ns`; errors are logged.
pub fn create_in(state: &State, gr: &str, ns: &str, obj: Value, who: &str) -> Option<Value> {
    let def = state.def_for_gr(gr).ok()?;
    let opts = WriteOpts {
        field_manager: MANAGER.into(),
        ..Default::default()
    };
    match ops::create(state, &def, Some(ns), obj, &opts) {
        Ok(w) => Some(w.obj),
        Err(e) => {
            if e.code != 409 {
                tracing::warn!(namespace = ns, error = %e, "simulated {who} controller could not create a {gr} object");
            }
            None
        }
    }
}

/// Delete one object (uid precondition); errors other than gone/conflict are logged.
pub fn delete(state: &State, obj: &Stored, who: &str) {
    let Ok(def) = state.def_for_gr(&obj.key.gr) else {
        return;
    };
    let opts = DeleteOpts {
        uid: Some(obj.uid.clone()),
        ..Default::default()
    };
    if let Err(e) = ops::delete(state, &def, &obj.key, &opts)
        && e.code != 404
        && e.code != 409
    {
        tracing::warn!(object = %obj.key.name, error = %e, "simulated {who} controller could not delete");
    }
}

/// Replace `status` of the object (if it is still the same one and the status changed).
pub fn write_status(state: &State, obj: &Stored, who: &str, f: impl Fn(&Value) -> Value) {
    let uid = obj.uid.clone();
    let r = ops::mutate(state, &obj.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(uid.as_str()) {
            return false;
        }
        let status = f(v);
        if v["status"] == status {
            return false;
        }
        v["status"] = status;
        true
    });
    if let Err(e) = r {
        tracing::warn!(object = %obj.key.name, error = %e, "simulated {who} controller could not write status");
    }
}

/// The pod's condition `t`, if set.
pub fn condition<'a>(obj: &'a Value, t: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

/// Is the pod Running with its Ready condition True (`podutil.IsPodReady`)?
pub fn ready(pod: &Value) -> bool {
    condition(pod, "Ready").is_some_and(|c| c["status"] == "True")
}

/// Ready for at least `min_ready` seconds (`podutil.IsPodAvailable`).
pub fn available(pod: &Value, min_ready: i64, now: i64) -> bool {
    if !ready(pod) {
        return false;
    }
    if min_ready <= 0 {
        return true;
    }
    condition(pod, "Ready")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| t.as_second() + min_ready <= now)
}

/// Is the pod active (not terminal, not being deleted: `controller.IsPodActive`)?
pub fn active(pod: &Stored, v: &Value) -> bool {
    !pod.deleting && !matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// Set a workload condition as kube-controller-manager's helpers do: nothing changes when
/// status and reason are the same; otherwise the condition moves to the end of the list,
/// keeping its `lastTransitionTime` when only the reason or message changed. `with_update`
/// adds `lastUpdateTime` (Deployment conditions).
pub fn set_condition(
    status: &mut Map<String, Value>,
    t: &str,
    st: &str,
    reason: &str,
    message: &str,
    now: &str,
    with_update: bool,
) {
    let mut conds: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old = conds.iter().find(|c| c["type"] == t).cloned();
    if let Some(o) = &old
        && o["status"] == st
        && o["reason"] == reason
    {
        return;
    }
    let mut c = Map::new();
    c.insert("type".into(), json!(t));
    c.insert("status".into(), json!(st));
    if with_update {
        c.insert("lastUpdateTime".into(), json!(now));
    }
    let transition = match &old {
        Some(o) if o["status"] == st => o["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    c.insert("lastTransitionTime".into(), transition);
    c.insert("reason".into(), json!(reason));
    c.insert("message".into(), json!(message));
    conds.retain(|c| c["type"] != t);
    conds.push(Value::Object(c));
    status.insert("conditions".into(), Value::Array(conds));
}

/// Insert `n` under `k` unless it is zero (Go's `omitempty` on the status counters).
pub fn put_nonzero(status: &mut Map<String, Value>, k: &str, n: i64) {
    if n == 0 {
        status.remove(k);
    } else {
        status.insert(k.into(), json!(n));
    }
}

/// An intOrString (`maxSurge: 25%`) resolved against `total`, rounding up or down.
pub fn int_or_percent(v: &Value, total: i64, round_up: bool, default_pct: i64) -> i64 {
    let pct = |p: i64| {
        if round_up {
            (p * total + 99) / 100
        } else {
            p * total / 100
        }
    };
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) => pct(p),
            None => s.parse().unwrap_or(0),
        },
        _ => pct(default_pct),
    }
}

/// A 32-bit hash of `v` (and the collision count) in kube's `rand.SafeEncodeString` form, as
/// the pod-template-hash is: decimal digits mapped onto the consonant-and-digit alphabet.
pub fn template_hash(v: &Value, collision_count: Option<i64>) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // FNV-1a over the key-sorted JSON (the engine's), folded to 32 bits as upstream's is.
    let hex = kube_apimachinery::hash::hash_value(&json!([v, collision_count]));
    let h = u64::from_str_radix(&hex, 16).unwrap_or_default();
    let h = (h ^ (h >> 32)) as u32;
    h.to_string()
        .bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_move_to_the_end_and_keep_their_transition_time() {
        let mut s = Map::new();
        set_condition(&mut s, "Progressing", "True", "A", "m", "t1", true);
        set_condition(&mut s, "Available", "False", "B", "m", "t1", true);
        set_condition(&mut s, "Progressing", "True", "A", "m", "t2", true);
        assert_eq!(
            s["conditions"][0]["type"], "Progressing",
            "same reason: untouched"
        );
        set_condition(&mut s, "Progressing", "True", "C", "m2", "t3", true);
        assert_eq!(s["conditions"][1]["type"], "Progressing");
        assert_eq!(s["conditions"][1]["lastTransitionTime"], "t1");
        assert_eq!(s["conditions"][1]["lastUpdateTime"], "t3");
    }

    #[test]
    fn percentages_round_as_upstream() {
        assert_eq!(int_or_percent(&json!("25%"), 3, true, 25), 1);
        assert_eq!(int_or_percent(&json!("25%"), 3, false, 25), 0);
        assert_eq!(int_or_percent(&json!(2), 3, false, 25), 2);
        assert_eq!(int_or_percent(&Value::Null, 4, false, 25), 1);
    }

    #[test]
    fn template_hash_is_stable_and_safe() {
        let a = template_hash(&json!({"x": 1}), None);
        assert_eq!(a, template_hash(&json!({"x": 1}), None));
        let ab: Value = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        let ba: Value = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(template_hash(&ab, None), template_hash(&ba, None));
        assert_ne!(a, template_hash(&json!({"x": 1}), Some(1)));
        assert!(
            a.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        );
    }
}
