//! Defaults of `apps/v1` (`pkg/apis/apps/v1/defaults.go`): Deployment, ReplicaSet,
//! StatefulSet, DaemonSet, each with the pod-template defaults.

use serde_json::{Value, json};

use super::core::{pod_template, pvc};
use super::{items, obj_at, set, unset};

fn spec_of(obj: &mut Value) -> Option<&mut Value> {
    let spec = obj.get_mut("spec").filter(|s| s.is_object())?;
    if let Some(t) = spec.get_mut("template") {
        pod_template(t);
    }
    Some(spec)
}

/// `SetDefaults_Deployment`.
pub fn deployment(obj: &mut Value) {
    let Some(spec) = spec_of(obj) else { return };
    set(spec, "replicas", json!(1));
    if let Some(st) = obj_at(spec, "strategy") {
        if unset(st, "type") {
            st["type"] = json!("RollingUpdate");
        }
        if st["type"] == "RollingUpdate"
            && let Some(ru) = obj_at(st, "rollingUpdate")
        {
            set(ru, "maxUnavailable", json!("25%"));
            set(ru, "maxSurge", json!("25%"));
        }
    }
    set(spec, "revisionHistoryLimit", json!(10));
    set(spec, "progressDeadlineSeconds", json!(600));
}

/// `SetDefaults_ReplicaSet`.
pub fn replica_set(obj: &mut Value) {
    let Some(spec) = spec_of(obj) else { return };
    set(spec, "replicas", json!(1));
}

/// `SetDefaults_StatefulSet`, and the claim defaults of its volume claim templates.
pub fn stateful_set(obj: &mut Value) {
    let Some(spec) = spec_of(obj) else { return };
    if unset(spec, "podManagementPolicy") {
        spec["podManagementPolicy"] = json!("OrderedReady");
    }
    if let Some(st) = obj_at(spec, "updateStrategy") {
        if unset(st, "type") {
            st["type"] = json!("RollingUpdate");
            set(st, "rollingUpdate", json!({}));
        }
        if st["type"] == "RollingUpdate"
            && let Some(ru) = st.get_mut("rollingUpdate").filter(|r| r.is_object())
        {
            set(ru, "partition", json!(0));
        }
    }
    if let Some(p) = obj_at(spec, "persistentVolumeClaimRetentionPolicy") {
        for k in ["whenDeleted", "whenScaled"] {
            if unset(p, k) {
                p[k] = json!("Retain");
            }
        }
    }
    set(spec, "replicas", json!(1));
    set(spec, "revisionHistoryLimit", json!(10));
    for t in items(spec, "volumeClaimTemplates") {
        if t.is_object() {
            set(t, "apiVersion", json!("v1"));
            set(t, "kind", json!("PersistentVolumeClaim"));
            obj_at(t, "metadata");
            pvc(t);
        }
    }
}

/// `SetDefaults_DaemonSet`.
pub fn daemon_set(obj: &mut Value) {
    let Some(spec) = spec_of(obj) else { return };
    if let Some(st) = obj_at(spec, "updateStrategy") {
        if unset(st, "type") {
            st["type"] = json!("RollingUpdate");
        }
        if st["type"] == "RollingUpdate"
            && let Some(ru) = obj_at(st, "rollingUpdate")
        {
            set(ru, "maxUnavailable", json!(1));
            set(ru, "maxSurge", json!(0));
        }
    }
    set(spec, "revisionHistoryLimit", json!(10));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_template(spec: Value) -> Value {
        let mut o = json!({"metadata": {"name": "x"}, "spec": spec});
        o["spec"]["template"] = json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        o
    }

    #[test]
    fn deployment_defaults_and_template() {
        let mut d = with_template(json!({}));
        deployment(&mut d);
        let s = &d["spec"];
        assert_eq!(s["replicas"], 1);
        assert_eq!(s["revisionHistoryLimit"], 10);
        assert_eq!(s["progressDeadlineSeconds"], 600);
        assert_eq!(
            s["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(
            s["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        assert_eq!(s["template"]["metadata"], json!({}));
        let mut d = with_template(json!({"strategy": {"type": "Recreate"}}));
        deployment(&mut d);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn stateful_set_defaults() {
        let mut s = with_template(
            json!({"volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}),
        );
        stateful_set(&mut s);
        let s = &s["spec"];
        assert_eq!(s["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            s["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            s["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(
            s["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(s["volumeClaimTemplates"][0]["status"]["phase"], "Pending");
        let mut o = with_template(json!({"updateStrategy": {"type": "OnDelete"}}));
        stateful_set(&mut o);
        assert_eq!(o["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    }

    #[test]
    fn daemon_set_and_replica_set_defaults() {
        let mut d = with_template(json!({}));
        daemon_set(&mut d);
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        let mut r = with_template(json!({}));
        replica_set(&mut r);
        assert_eq!(r["spec"]["replicas"], 1);
        assert_eq!(r["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    }
}
