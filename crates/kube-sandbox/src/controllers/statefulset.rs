//! A simulated StatefulSet controller, as kube-controller-manager runs one: every StatefulSet
//! gets the Pods `<name>-0` … `<name>-<replicas-1>` from its template (labels
//! `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`, controlled by the
//! StatefulSet), Pods of higher ordinals are deleted, and `status` counts them. Simplified: all
//! ordinals at once (`podManagementPolicy: Parallel`), no volume claim templates, and a changed
//! template only applies to Pods created later (`updateStrategy: OnDelete`). Each template is a
//! ControllerRevision ([`super::revisions`]; `currentRevision` and `updateRevision` name the
//! newest, Pods carry it in `controller-revision-hash`). With the simulated
//! kubelet the Pods become Running and Ready, so examples decorating StatefulSets
//! (service-per-pod) work on the sandbox.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::revisions;
use crate::ops::{self, DeleteOpts, WriteOpts};
use crate::state::State;
use crate::store::Stored;

/// Storage key of StatefulSets.
pub const GR: &str = "apps/statefulsets";
const PODS: &str = "/pods";
const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// A Pod changed: sync the StatefulSet that controls it, if any.
pub fn pod_changed(state: &Arc<State>, pod: &Stored) {
    for o in pod.owners.iter().filter(|o| o.controller) {
        if let Some(owner) = state.store.get_by_uid(&o.uid)
            && &*owner.key.gr == GR
        {
            sync(state, &owner);
        }
    }
}

/// Bring one StatefulSet's Pods and status in line with its spec.
pub fn sync(state: &Arc<State>, sts: &Stored) {
    if sts.deleting {
        return; // the garbage collector deletes its Pods
    }
    let Ok(v) = sts.value() else { return };
    let name = sts.key.name.as_str();
    let ns = sts.key.ns.as_str();
    let replicas = v["spec"]["replicas"].as_u64().unwrap_or(1);
    let pods: Vec<Arc<Stored>> = state
        .store
        .dependents(&sts.uid)
        .into_iter()
        .filter(|p| &*p.key.gr == PODS && p.owners.iter().any(|o| o.controller && o.uid == sts.uid))
        .collect();
    let Ok(pod_def) = state.def_for_gr(PODS) else {
        return;
    };
    let live: Vec<String> = pods
        .iter()
        .filter_map(|p| p.label(revisions::POD_LABEL).map(String::from))
        .collect();
    let Some(revision) = revisions::sync(state, sts, &v, "StatefulSet", &live) else {
        return;
    };
    for i in 0..replicas {
        let pod_name = format!("{name}-{i}");
        if pods.iter().any(|p| p.key.name == pod_name)
            || state.store.get(PODS, ns, &pod_name).is_some()
        {
            continue; // ours, or someone else's Pod of that name (left alone, as upstream)
        }
        let mut pod = pod_for(&v, &sts.uid, &pod_name, i);
        pod["metadata"]["labels"][revisions::POD_LABEL] = json!(revision.pod_label);
        let opts = WriteOpts {
            field_manager: "kubectl-meta-sandbox".into(),
            ..Default::default()
        };
        if let Err(e) = ops::create(state, &pod_def, Some(ns), pod, &opts)
            && e.code != 409
        {
            tracing::warn!(pod = %pod_name, error = %e, "simulated StatefulSet controller could not create a pod");
        }
    }
    for p in &pods {
        let ordinal = p
            .key
            .name
            .strip_prefix(&format!("{name}-"))
            .and_then(|o| o.parse::<u64>().ok());
        if !p.deleting && ordinal.is_none_or(|o| o >= replicas) {
            let opts = DeleteOpts {
                uid: Some(p.uid.clone()),
                ..Default::default()
            };
            if let Err(e) = ops::delete(state, &pod_def, &p.key, &opts)
                && e.code != 404
                && e.code != 409
            {
                tracing::warn!(pod = %p.key.name, error = %e, "simulated StatefulSet controller could not delete a pod");
            }
        }
    }
    update_status(state, sts, &pods, &revision.name);
}

/// A Pod for ordinal `i` from the StatefulSet's template.
fn pod_for(sts: &Value, uid: &str, pod_name: &str, i: u64) -> Value {
    let template = &sts["spec"]["template"];
    let mut labels: Map<String, Value> = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), json!(pod_name));
    labels.insert(POD_INDEX_LABEL.into(), json!(i.to_string()));
    let mut meta = json!({
        "name": pod_name,
        "labels": labels,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
            "name": sts["metadata"]["name"], "uid": uid,
            "controller": true, "blockOwnerDeletion": true}],
    });
    if let Some(a) = template["metadata"]["annotations"].as_object() {
        meta["annotations"] = Value::Object(a.clone());
    }
    let mut spec = template["spec"].clone();
    if spec.is_object() {
        spec["hostname"] = json!(pod_name);
        if let Some(svc) = sts["spec"]["serviceName"].as_str() {
            spec["subdomain"] = json!(svc);
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

/// `status` from the Pods it controls (written only when it changed).
fn update_status(state: &Arc<State>, sts: &Stored, pods: &[Arc<Stored>], revision: &str) {
    let live: Vec<Value> = pods
        .iter()
        .filter(|p| !p.deleting)
        .filter_map(|p| p.value().ok())
        .collect();
    let ready = live
        .iter()
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .count();
    let uid = sts.uid.clone();
    let r = ops::mutate(state, &sts.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(uid.as_str()) {
            return false;
        }
        let mut status = v["status"].as_object().cloned().unwrap_or_default();
        for (k, n) in [
            ("replicas", live.len()),
            ("currentReplicas", live.len()),
            ("updatedReplicas", live.len()),
            ("readyReplicas", ready),
            ("availableReplicas", ready),
        ] {
            status.insert(k.into(), json!(n));
        }
        status.insert(
            "observedGeneration".into(),
            v["metadata"]["generation"].clone(),
        );
        for k in ["currentRevision", "updateRevision"] {
            status.insert(k.into(), json!(revision));
        }
        status.insert("collisionCount".into(), json!(0));
        let status = Value::Object(status);
        if v["status"] == status {
            return false;
        }
        v["status"] = status;
        true
    });
    if let Err(e) = r {
        tracing::warn!(statefulset = %sts.key.name, error = %e, "simulated StatefulSet controller could not write status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_come_from_the_template_with_ordinal_labels_and_the_controller_ref() {
        let sts = json!({"metadata": {"name": "web"}, "spec": {"serviceName": "web",
            "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "1"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let p = pod_for(&sts, "u1", "web-2", 2);
        assert_eq!(p["metadata"]["name"], "web-2");
        assert_eq!(
            p["metadata"]["labels"],
            json!({"app": "web", POD_NAME_LABEL: "web-2", POD_INDEX_LABEL: "2"})
        );
        assert_eq!(p["metadata"]["annotations"], json!({"a": "1"}));
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(p["spec"]["hostname"], "web-2");
        assert_eq!(p["spec"]["subdomain"], "web");
        assert_eq!(p["spec"]["containers"][0]["image"], "nginx");
    }
}
