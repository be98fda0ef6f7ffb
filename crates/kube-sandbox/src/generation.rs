//! `metadata.generation`, kind by kind, as kube-apiserver 1.36's registry strategies keep it:
//! which kinds get `generation: 1` on create (`PrepareForCreate`) and which changes bump it on
//! update (`PrepareForUpdate`). Checked against `pkg/registry/*/*/strategy.go` and
//! apiextensions-apiserver's `customresource` strategy rather than assumed: for example the
//! HorizontalPodAutoscaler strategy sets no generation in 1.36, PodTemplates and
//! PriorityClasses get one, a PriorityClass's never moves, and an EndpointSlice's also moves
//! when its labels change.

use serde_json::Value;

use super::resources::ResourceDef;

/// Does the kind's strategy set `metadata.generation = 1` on create?
pub fn set_on_create(def: &ResourceDef) -> bool {
    if def.is_custom() {
        return true;
    }
    matches!(
        (def.group.as_str(), def.plural.as_str()),
        ("", "pods" | "replicationcontrollers" | "podtemplates")
            | (
                "apps",
                "deployments" | "replicasets" | "statefulsets" | "daemonsets"
            )
            | ("batch", "jobs" | "cronjobs")
            | ("policy", "poddisruptionbudgets")
            | (
                "networking.k8s.io",
                "ingresses" | "ingressclasses" | "networkpolicies"
            )
            | ("discovery.k8s.io", "endpointslices")
            | ("scheduling.k8s.io", "priorityclasses")
            | (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations" | "mutatingwebhookconfigurations"
            )
            | ("apiextensions.k8s.io", "customresourcedefinitions")
    )
}

/// Does an update from `old` to `new` bump the generation (for a kind that has one)?
pub fn bumped(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    match (def.group.as_str(), def.plural.as_str()) {
        // PrepareForUpdate is empty: the generation stays 1.
        ("scheduling.k8s.io", "priorityclasses") => false,
        // Everything but metadata, and the labels.
        ("discovery.k8s.io", "endpointslices") => {
            tracked(old, true) != tracked(new, true)
                || old["metadata"]["labels"] != new["metadata"]["labels"]
        }
        // Everything but metadata; status too unless the status subresource owns it.
        _ if def.is_custom() => {
            tracked(old, def.status_subresource) != tracked(new, def.status_subresource)
        }
        // The spec (the template for PodTemplates, the webhooks for webhook configurations):
        // everything but metadata and status.
        _ => tracked(old, true) != tracked(new, true),
    }
}

/// The object without `metadata`, `apiVersion` and, if `without_status`, `status`.
fn tracked(v: &Value, without_status: bool) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        if without_status {
            m.remove("status");
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    fn def(group: &str, plural: &str) -> std::sync::Arc<ResourceDef> {
        let version = if group == "autoscaling" { "v2" } else { "v1" };
        Registry::builtin()
            .get(group, version, plural)
            .unwrap_or_else(|| panic!("{group}/{plural} served"))
    }

    #[test]
    fn kinds_with_a_generation_are_those_whose_strategy_sets_one() {
        for (g, p) in [
            ("", "pods"),
            ("", "podtemplates"),
            ("apps", "deployments"),
            ("batch", "cronjobs"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("networking.k8s.io", "ingressclasses"),
            ("discovery.k8s.io", "endpointslices"),
        ] {
            assert!(set_on_create(&def(g, p)), "{g}/{p}");
        }
        for (g, p) in [
            ("autoscaling", "horizontalpodautoscalers"),
            ("", "services"),
            ("", "configmaps"),
            ("apps", "controllerrevisions"),
            ("storage.k8s.io", "storageclasses"),
            ("coordination.k8s.io", "leases"),
            ("rbac.authorization.k8s.io", "roles"),
        ] {
            assert!(!set_on_create(&def(g, p)), "{g}/{p}");
        }
    }

    #[test]
    fn what_bumps_it_depends_on_the_kind() {
        let pc = def("scheduling.k8s.io", "priorityclasses");
        let a = json!({"metadata": {}, "value": 1, "description": "a"});
        let b = json!({"metadata": {}, "value": 1, "description": "b"});
        assert!(!bumped(&pc, &a, &b));
        let eps = def("discovery.k8s.io", "endpointslices");
        let a = json!({"metadata": {"labels": {"x": "1"}}, "addressType": "IPv4"});
        let b = json!({"metadata": {"labels": {"x": "2"}}, "addressType": "IPv4"});
        assert!(bumped(&eps, &a, &b));
        let cm = def("", "pods");
        assert!(!bumped(&cm, &a, &b), "labels alone do not bump a pod");
    }
}
