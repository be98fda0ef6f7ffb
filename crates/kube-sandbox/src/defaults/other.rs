//! Defaults of the smaller groups: `rbac.authorization.k8s.io/v1`, `networking.k8s.io/v1`,
//! `autoscaling/v2`, `discovery.k8s.io/v1`, `scheduling.k8s.io/v1`, `storage.k8s.io/v1`.

use serde_json::{Value, json};

use super::{items, obj_at, set, unset};

const RBAC: &str = "rbac.authorization.k8s.io";

/// `SetDefaults_RoleBinding`/`ClusterRoleBinding` and `SetDefaults_Subject`.
pub fn role_binding(obj: &mut Value) {
    if let Some(r) = obj.get_mut("roleRef").filter(|r| r.is_object())
        && unset(r, "apiGroup")
    {
        r["apiGroup"] = json!(RBAC);
    }
    for s in items(obj, "subjects") {
        if unset(s, "apiGroup") && matches!(s["kind"].as_str(), Some("User" | "Group")) {
            s["apiGroup"] = json!(RBAC);
        }
    }
}

/// `SetDefaults_NetworkPolicy` and `SetDefaults_NetworkPolicyPort`.
pub fn network_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    for dir in ["ingress", "egress"] {
        for rule in items(spec, dir) {
            for p in items(rule, "ports") {
                if unset(p, "protocol") {
                    p["protocol"] = json!("TCP");
                }
            }
        }
    }
    obj_at(spec, "podSelector");
    if spec["policyTypes"].as_array().is_none_or(Vec::is_empty) {
        let mut types = vec![json!("Ingress")];
        if spec["egress"].as_array().is_some_and(|a| !a.is_empty()) {
            types.push(json!("Egress"));
        }
        spec["policyTypes"] = json!(types);
    }
}

/// `SetDefaults_IngressClass`: parameters are cluster-scoped unless said otherwise.
pub fn ingress_class(obj: &mut Value) {
    if let Some(p) = obj["spec"].get_mut("parameters").filter(|p| p.is_object())
        && unset(p, "scope")
    {
        p["scope"] = json!("Cluster");
    }
}

/// `SetDefaults_HorizontalPodAutoscaler` (autoscaling/v2) and its behavior defaults.
pub fn hpa(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set(spec, "minReplicas", json!(1));
    if spec["metrics"].as_array().is_none_or(Vec::is_empty) {
        spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    }
    if let Some(b) = spec.get_mut("behavior").filter(|b| b.is_object()) {
        let up = obj_at(b, "scaleUp");
        if let Some(up) = up {
            set(up, "stabilizationWindowSeconds", json!(0));
            set(up, "selectPolicy", json!("Max"));
            set(
                up,
                "policies",
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                       {"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
        if let Some(down) = obj_at(b, "scaleDown") {
            set(down, "stabilizationWindowSeconds", json!(300));
            set(down, "selectPolicy", json!("Max"));
            set(
                down,
                "policies",
                json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
    }
}

/// `SetDefaults_EndpointPort` (discovery.k8s.io/v1): name "" and protocol TCP.
pub fn endpoint_slice(obj: &mut Value) {
    for p in items(obj, "ports") {
        set(p, "name", json!(""));
        if unset(p, "protocol") {
            p["protocol"] = json!("TCP");
        }
    }
}

/// `SetDefaults_PriorityClass`.
pub fn priority_class(obj: &mut Value) {
    if unset(obj, "preemptionPolicy") {
        obj["preemptionPolicy"] = json!("PreemptLowerPriority");
    }
}

/// `SetDefaults_StorageClass`.
pub fn storage_class(obj: &mut Value) {
    if unset(obj, "reclaimPolicy") {
        obj["reclaimPolicy"] = json!("Delete");
    }
    if unset(obj, "volumeBindingMode") {
        obj["volumeBindingMode"] = json!("Immediate");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_binding_api_groups() {
        let mut rb = json!({"roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]});
        role_binding(&mut rb);
        assert_eq!(rb["roleRef"]["apiGroup"], RBAC);
        assert_eq!(rb["subjects"][0]["apiGroup"], RBAC);
        assert!(rb["subjects"][1].get("apiGroup").is_none());
    }

    #[test]
    fn network_policy_types_follow_rules() {
        let mut np = json!({"spec": {"podSelector": {}}});
        network_policy(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
        let mut np = json!({"spec": {"egress": [{"ports": [{"port": 53}]}]}});
        network_policy(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(np["spec"]["podSelector"], json!({}));
    }

    #[test]
    fn hpa_defaults() {
        let mut h =
            json!({"spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"selectPolicy": "Min"}}}});
        hpa(&mut h);
        let s = &h["spec"];
        assert_eq!(s["minReplicas"], 1);
        assert_eq!(
            s["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(s["behavior"]["scaleDown"]["selectPolicy"], "Min");
        assert_eq!(
            s["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            300
        );
        assert_eq!(s["behavior"]["scaleUp"]["policies"][0]["value"], 4);
        let mut h = json!({"spec": {"maxReplicas": 3}});
        hpa(&mut h);
        assert!(h["spec"].get("behavior").is_none());
    }

    #[test]
    fn small_group_defaults() {
        let mut ic = json!({"spec": {"controller": "x", "parameters": {"kind": "K", "name": "n"}}});
        ingress_class(&mut ic);
        assert_eq!(ic["spec"]["parameters"]["scope"], "Cluster");
        let mut es = json!({"ports": [{"port": 80}]});
        endpoint_slice(&mut es);
        assert_eq!(
            es["ports"][0],
            json!({"port": 80, "name": "", "protocol": "TCP"})
        );
        let mut pc = json!({"value": 5});
        priority_class(&mut pc);
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        let mut sc = json!({"provisioner": "x"});
        storage_class(&mut sc);
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
    }
}
