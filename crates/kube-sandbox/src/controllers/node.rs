//! The simulated Node and scheduler. With the simulated kubelet on, the sandbox has one Ready
//! Node, `sandbox-node` (created at start if missing; delete it and Pods stay Pending, as on a
//! cluster without nodes). A Pending Pod without `spec.nodeName` is bound to a Ready Node its
//! `nodeSelector` and required node affinity (`matchFields metadata.name`, as DaemonSets use)
//! allow, the way kube-scheduler's binding does: `spec.nodeName` and the `PodScheduled`
//! condition.

use std::sync::Arc;

use serde_json::{Value, json};

use super::pods::MANAGER;
use crate::ops::{self, WriteOpts};
use crate::state::{State, now_rfc3339};
use crate::store::Stored;

/// Storage key of Nodes.
pub const GR: &str = "/nodes";
/// The Node every sandbox with a kubelet has.
pub const DEFAULT_NODE: &str = "sandbox-node";

/// Create `sandbox-node` unless it exists.
pub fn ensure_default(state: &Arc<State>) {
    if state.tunables.kubelet_delay.is_none() || state.store.get(GR, "", DEFAULT_NODE).is_some() {
        return;
    }
    let Ok(def) = state.def_for_gr(GR) else {
        return;
    };
    let now = now_rfc3339();
    let cond = |t: &str, st: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": st, "reason": reason, "message": msg,
            "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": DEFAULT_NODE, "labels": {
            "kubernetes.io/hostname": DEFAULT_NODE, "kubernetes.io/os": std::env::consts::OS,
            "kubernetes.io/arch": if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" },
            "beta.kubernetes.io/os": std::env::consts::OS,
            "beta.kubernetes.io/arch": if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" }}},
        "spec": {},
        "status": {
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": DEFAULT_NODE}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" },
                "operatingSystem": std::env::consts::OS, "osImage": "kubectl-meta sandbox (simulated)",
                "kernelVersion": "", "containerRuntimeVersion": "sandbox://simulated",
                "kubeletVersion": crate::version::GIT_VERSION, "kubeProxyVersion": "", "machineID": "",
                "systemUUID": "", "bootID": ""},
        },
    });
    let opts = WriteOpts {
        field_manager: MANAGER.into(),
        ..Default::default()
    };
    // Created without status (the API drops it), then given it as a kubelet posts it.
    let status = node["status"].clone();
    if let Err(e) = ops::create(state, &def, None, node, &opts)
        && e.code != 409
    {
        tracing::warn!(error = %e, "could not create the sandbox Node");
    }
    let key = ops::key(&def, None, DEFAULT_NODE);
    let r = ops::mutate(state, &key, |v: &mut Value| {
        if v["status"]["conditions"].is_array() {
            return false;
        }
        v["status"] = status.clone();
        true
    });
    if let Err(e) = r {
        tracing::warn!(error = %e, "could not post the sandbox Node's status");
    }
}

/// Is the Node's Ready condition True and the Node schedulable?
pub fn ready(node: &Value) -> bool {
    node["spec"]["unschedulable"] != true
        && node["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// Does a `nodeSelector` (a map of labels) select this Node?
pub fn selects(selector: &Value, node: &Value) -> bool {
    selector
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| node["metadata"]["labels"][k] == *v))
}

/// The Node a Pod's required node affinity pins it to (`matchFields metadata.name In [x]`).
pub fn affinity_node(pod: &Value) -> Option<String> {
    let terms = pod["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()?;
    terms.iter().find_map(|t| {
        t["matchFields"].as_array()?.iter().find_map(|f| {
            (f["key"] == "metadata.name" && f["operator"] == "In")
                .then(|| f["values"][0].as_str().map(String::from))
                .flatten()
        })
    })
}

/// Bind a Pending Pod without a node to a Node that fits, as the scheduler's binding does.
/// Returns true if it was bound (or already had a node).
pub fn schedule(state: &State, pod: &Stored, v: &Value) -> bool {
    if v["spec"]["nodeName"].is_string() {
        return true;
    }
    let pinned = affinity_node(v);
    let fits = |n: &Value| ready(n) && selects(&v["spec"]["nodeSelector"], n);
    let node = match &pinned {
        Some(name) => state
            .store
            .get(GR, "", name)
            .and_then(|n| n.value().ok())
            .filter(fits),
        None => state
            .store
            .in_namespace(GR, "")
            .iter()
            .filter_map(|n| n.value().ok())
            .find(fits),
    };
    let Some(node) = node else { return false };
    let Some(name) = node["metadata"]["name"].as_str() else {
        return false;
    };
    let mut bound = v.clone();
    bound["spec"]["nodeName"] = json!(name);
    let now = now_rfc3339();
    let mut conds: Vec<Value> = bound["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conds.retain(|c| c["type"] != "PodScheduled");
    conds.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
    bound["status"]["conditions"] = Value::Array(conds);
    if bound["status"]["phase"].is_null() {
        bound["status"]["phase"] = json!("Pending");
    }
    // The binding subresource: the one write that may set nodeName.
    match state.store.update(pod.key.clone(), Some(pod.rv), bound) {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(pod = %pod.key.name, error = %e, "simulated scheduler could not bind (retried on the next event)");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_and_selectors() {
        let pod = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}});
        assert_eq!(affinity_node(&pod).as_deref(), Some("n1"));
        let node = json!({"metadata": {"labels": {"a": "1"}}, "spec": {},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(ready(&node));
        assert!(selects(&json!({"a": "1"}), &node));
        assert!(!selects(&json!({"a": "2"}), &node));
        assert!(selects(&Value::Null, &node));
    }
}
