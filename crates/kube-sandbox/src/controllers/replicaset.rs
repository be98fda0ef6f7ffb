//! A simulated ReplicaSet controller, as kube-controller-manager runs one: a ReplicaSet gets
//! `spec.replicas` Pods from its template (`generateName: <name>-`, controlled by it), surplus
//! Pods are deleted (not-ready and youngest first), and `status` counts them the way
//! `calculateStatus` does: `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
//! `availableReplicas` (ready for `minReadySeconds`), `observedGeneration`, zero counters
//! omitted. Pods are found through the owner-uid index; a Pod event syncs only its controller.
//! Simplified: orphaned Pods matching the selector are not adopted.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::pods;
use crate::state::{State, now_unix};
use crate::store::Stored;
use kube_apimachinery::selector::LabelSelector;

/// Storage key of ReplicaSets.
pub const GR: &str = "apps/replicasets";
const WHO: &str = "ReplicaSet";

/// A Pod changed: sync the ReplicaSet that controls it.
pub fn pod_changed(state: &Arc<State>, pod: &Stored) {
    if let Some(rs) = pods::controller_of(state, pod, GR) {
        sync(state, &rs);
    }
}

/// Bring one ReplicaSet's Pods and status in line with its spec.
pub fn sync(state: &Arc<State>, rs: &Stored) {
    let Some(rs) = pods::current(state, rs) else {
        return;
    };
    let rs = &*rs;
    let Ok(v) = rs.value() else { return };
    let want = v["spec"]["replicas"].as_i64().unwrap_or(1).max(0);
    let mut live: Vec<(Arc<Stored>, Value)> = pods::controlled_pods(state, &rs.uid)
        .into_iter()
        .filter(|(p, pv)| pods::active(p, pv))
        .collect();
    let have = live.len() as i64;
    if have < want {
        for _ in have..want {
            let pod = pods::from_template(
                &v["spec"]["template"],
                &v,
                &rs.uid,
                "apps/v1",
                "ReplicaSet",
                &format!("{}-", rs.key.name),
            );
            pods::create(state, &rs.key.ns, pod, WHO);
        }
    } else if have > want {
        // getPodsToDelete: unscheduled and not-ready pods first, then the youngest.
        live.sort_by_key(|(_, pv)| {
            (
                pv["spec"]["nodeName"].is_string(),
                pods::ready(pv),
                std::cmp::Reverse(
                    pv["metadata"]["creationTimestamp"]
                        .as_str()
                        .map(String::from),
                ),
            )
        });
        for (p, _) in live.iter().take((have - want) as usize) {
            pods::delete(state, p, WHO);
        }
    }
    let Some(fresh) = state.store.get(GR, &rs.key.ns, &rs.key.name) else {
        return;
    };
    let now_pods: Vec<(Arc<Stored>, Value)> = pods::controlled_pods(state, &rs.uid);
    pods::write_status(state, &fresh, WHO, |cur| status(cur, &now_pods));
    recount_when_available(state, &fresh, &v, &now_pods);
}

/// Pods that are Ready but not yet for `minReadySeconds` become available later without any
/// event: recount then (upstream requeues the ReplicaSet after `minReadySeconds`).
fn recount_when_available(
    state: &Arc<State>,
    rs: &Stored,
    v: &Value,
    owned: &[(Arc<Stored>, Value)],
) {
    let min_ready = v["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
    let now = now_unix();
    if min_ready <= 0
        || !owned
            .iter()
            .any(|(_, pv)| pods::ready(pv) && !pods::available(pv, min_ready, now))
    {
        return;
    }
    let state = state.clone();
    let key = rs.key.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = state.shutdown.cancelled() => {}
            _ = tokio::time::sleep(std::time::Duration::from_secs(min_ready as u64 + 1)) => {
                // Only the status is recomputed here; Pods are created by the controller loop.
                if let Some(rs) = state.store.get(&key.gr, &key.ns, &key.name) {
                    let pods = pods::controlled_pods(&state, &rs.uid);
                    pods::write_status(&state, &rs, WHO, |cur| status(cur, &pods));
                }
            }
        }
    });
}

/// The status `calculateStatus` computes from the Pods.
fn status(rs: &Value, owned: &[(Arc<Stored>, Value)]) -> Value {
    let template_labels = LabelSelector::from_label_selector(
        &json!({"matchLabels": rs["spec"]["template"]["metadata"]["labels"]}),
    )
    .ok();
    let min_ready = rs["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
    let now = now_unix();
    let (mut replicas, mut labeled, mut ready, mut avail, mut terminating) = (0, 0, 0, 0, 0);
    for (p, pv) in owned {
        if p.deleting {
            if !matches!(pv["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
                terminating += 1;
            }
            continue;
        }
        if !pods::active(p, pv) {
            continue;
        }
        replicas += 1;
        if template_labels
            .as_ref()
            .is_some_and(|l| l.matches_with(|k| p.label(k)))
        {
            labeled += 1;
        }
        if pods::ready(pv) {
            ready += 1;
            if pods::available(pv, min_ready, now) {
                avail += 1;
            }
        }
    }
    let mut s: Map<String, Value> = rs["status"].as_object().cloned().unwrap_or_default();
    s.insert("replicas".into(), json!(replicas));
    pods::put_nonzero(&mut s, "fullyLabeledReplicas", labeled);
    pods::put_nonzero(&mut s, "readyReplicas", ready);
    pods::put_nonzero(&mut s, "availableReplicas", avail);
    // DeploymentReplicaSetTerminatingReplicas (on by default since 1.35) writes it, 0 included.
    s.insert("terminatingReplicas".into(), json!(terminating));
    if let Some(g) = rs["metadata"]["generation"].as_i64() {
        s.insert("observedGeneration".into(), json!(g));
    }
    Value::Object(s)
}
