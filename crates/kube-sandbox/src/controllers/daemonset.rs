//! A simulated DaemonSet controller, as kube-controller-manager runs one: one Pod per Ready
//! Node that the template's `nodeSelector` selects (the sandbox has one, `sandbox-node`), pinned
//! to it by node affinity as upstream does (the simulated scheduler then binds it), with the
//! DaemonSet tolerations, `controller-revision-hash` and `pod-template-generation` labels; Pods
//! on Nodes that no longer qualify are deleted. `status` as `updateDaemonSetStatus` writes it.
//! Pod events sync their DaemonSet (owner-uid index); Node events sync every DaemonSet.
//! Each template is a ControllerRevision ([`super::revisions`]), so `kubectl rollout history`
//! and `rollout undo` work. Simplified: a changed template only reaches Pods created later.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::node;
use super::pods;
use super::revisions;
use crate::state::{State, now_unix};
use crate::store::Stored;

/// Storage key of DaemonSets.
pub const GR: &str = "apps/daemonsets";
const WHO: &str = "DaemonSet";

/// A Pod changed: sync the DaemonSet that controls it.
pub fn pod_changed(state: &Arc<State>, pod: &Stored) {
    if let Some(ds) = pods::controller_of(state, pod, GR) {
        sync(state, &ds);
    }
}

/// A Node changed: every DaemonSet may want a Pod there, or one fewer.
pub fn node_changed(state: &Arc<State>) {
    for ds in state.store.list(GR, None, None, None, |_| true).items {
        sync(state, &ds);
    }
}

/// The node a DaemonSet Pod is for: its `nodeName`, else its node affinity.
fn node_of(pod: &Value) -> Option<String> {
    if let Some(n) = pod["spec"]["nodeName"].as_str() {
        return Some(n.to_string());
    }
    node::affinity_node(pod)
}

/// Bring one DaemonSet's Pods and status in line with the Nodes.
pub fn sync(state: &Arc<State>, ds: &Stored) {
    let Some(ds) = pods::current(state, ds) else {
        return;
    };
    let ds = &*ds;
    let Ok(v) = ds.value() else { return };
    let selector = &v["spec"]["template"]["spec"]["nodeSelector"];
    let nodes: Vec<String> = state
        .store
        .in_namespace(node::GR, "")
        .iter()
        .filter_map(|n| n.value().ok())
        .filter(|n| node::ready(n) && node::selects(selector, n))
        .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
        .collect();
    let owned: Vec<(Arc<Stored>, Value)> = pods::controlled_pods(state, &ds.uid);
    let live: Vec<String> = owned
        .iter()
        .filter_map(|(p, _)| p.label(revisions::POD_LABEL).map(String::from))
        .collect();
    let hash = match revisions::sync(state, ds, &v, WHO, &live) {
        Some(current) => current.pod_label,
        None => return,
    };
    let generation = v["metadata"]["generation"].as_i64().unwrap_or(1);
    for n in &nodes {
        if !owned
            .iter()
            .any(|(p, pv)| pods::active(p, pv) && node_of(pv).as_deref() == Some(n))
        {
            let mut pod = pods::from_template(
                &v["spec"]["template"],
                &v,
                &ds.uid,
                "apps/v1",
                "DaemonSet",
                &format!("{}-", ds.key.name),
            );
            pod["metadata"]["labels"][revisions::POD_LABEL] = json!(hash);
            pod["metadata"]["labels"]["pod-template-generation"] = json!(generation.to_string());
            pin(&mut pod, n);
            pods::create(state, &ds.key.ns, pod, WHO);
        }
    }
    for (p, pv) in &owned {
        if pods::active(p, pv) && node_of(pv).is_none_or(|n| !nodes.contains(&n)) {
            pods::delete(state, p, WHO);
        }
    }
    let Some(fresh) = state.store.get(GR, &ds.key.ns, &ds.key.name) else {
        return;
    };
    let owned: Vec<(Arc<Stored>, Value)> = pods::controlled_pods(state, &ds.uid);
    pods::write_status(state, &fresh, WHO, |cur| status(cur, &nodes, &owned, &hash));
}

/// Node affinity to exactly `node` plus the tolerations upstream adds to daemon Pods.
fn pin(pod: &mut Value, node: &str) {
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!(
        {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    );
    let mut tol: Vec<Value> = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        if !tol.iter().any(|t| t["key"] == key && t["effect"] == effect) {
            tol.push(json!({"key": key, "operator": "Exists", "effect": effect}));
        }
    }
    pod["spec"]["tolerations"] = Value::Array(tol);
}

fn status(ds: &Value, nodes: &[String], owned: &[(Arc<Stored>, Value)], hash: &str) -> Value {
    let min_ready = ds["spec"]["minReadySeconds"].as_i64().unwrap_or(0);
    let now = now_unix();
    let (mut current, mut mis, mut ready, mut avail, mut updated) = (0, 0, 0, 0, 0);
    let mut seen: Vec<String> = Vec::new();
    for (p, pv) in owned {
        if !pods::active(p, pv) {
            continue;
        }
        let Some(n) = node_of(pv) else { continue };
        if !nodes.contains(&n) {
            mis += 1;
            continue;
        }
        if seen.contains(&n) {
            continue;
        }
        seen.push(n);
        current += 1;
        if pods::ready(pv) {
            ready += 1;
            if pods::available(pv, min_ready, now) {
                avail += 1;
            }
        }
        if p.label(revisions::POD_LABEL) == Some(hash) {
            updated += 1;
        }
    }
    let desired = nodes.len() as i64;
    let mut s: Map<String, Value> = ds["status"].as_object().cloned().unwrap_or_default();
    s.insert("currentNumberScheduled".into(), json!(current));
    s.insert("desiredNumberScheduled".into(), json!(desired));
    s.insert("numberMisscheduled".into(), json!(mis));
    s.insert("numberReady".into(), json!(ready));
    pods::put_nonzero(&mut s, "numberAvailable", avail);
    pods::put_nonzero(&mut s, "numberUnavailable", (desired - avail).max(0));
    pods::put_nonzero(&mut s, "updatedNumberScheduled", updated);
    if let Some(g) = ds["metadata"]["generation"].as_i64() {
        s.insert("observedGeneration".into(), json!(g));
    }
    Value::Object(s)
}
