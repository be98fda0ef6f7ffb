//! Defaulting of built-in types, written after kube-apiserver's `SetDefaults_*` functions
//! (`pkg/apis/<group>/<version>/defaults.go` upstream) and the generated defaulters that apply
//! them to every nested struct (so a pod template inside a CronJob gets the pod defaults).
//!
//! Defaults run on every create and update, after the object went through its typed struct
//! ([`super::typed`]), as kube-apiserver defaults on decode. One file per API group.

pub mod apps;
pub mod batch;
pub mod core;
pub mod other;

use serde_json::{Map, Value, json};

/// Apply the defaults of resource `gr` (`apps/deployments`, `/pods`) to `obj`.
pub fn apply(gr: &str, obj: &mut Value) {
    match gr {
        "/pods" => core::pod(obj),
        "/services" => core::service(obj),
        "/secrets" => core::secret(obj),
        "/persistentvolumeclaims" => core::pvc(obj),
        "/persistentvolumes" => core::pv(obj),
        "/endpoints" => core::endpoints(obj),
        "/limitranges" => core::limit_range(obj),
        "/replicationcontrollers" => core::replication_controller(obj),
        "/podtemplates" => core::pod_template(&mut obj["template"]),
        "apps/deployments" => apps::deployment(obj),
        "apps/replicasets" => apps::replica_set(obj),
        "apps/statefulsets" => apps::stateful_set(obj),
        "apps/daemonsets" => apps::daemon_set(obj),
        "batch/jobs" => batch::job(obj),
        "batch/cronjobs" => batch::cron_job(obj),
        "rbac.authorization.k8s.io/rolebindings"
        | "rbac.authorization.k8s.io/clusterrolebindings" => other::role_binding(obj),
        "networking.k8s.io/networkpolicies" => other::network_policy(obj),
        "networking.k8s.io/ingressclasses" => other::ingress_class(obj),
        "autoscaling/horizontalpodautoscalers" => other::hpa(obj),
        "discovery.k8s.io/endpointslices" => other::endpoint_slice(obj),
        "scheduling.k8s.io/priorityclasses" => other::priority_class(obj),
        "storage.k8s.io/storageclasses" => other::storage_class(obj),
        "admissionregistration.k8s.io/validatingwebhookconfigurations" => {
            crate::webhook::config::defaults(obj, false)
        }
        "admissionregistration.k8s.io/mutatingwebhookconfigurations" => {
            crate::webhook::config::defaults(obj, true)
        }
        _ => {}
    }
}

/// Set `parent[key] = v` when `parent` is an object and `key` is absent or null.
pub fn set(parent: &mut Value, key: &str, v: Value) {
    if let Some(m) = parent.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_string(), v);
    }
}

/// `parent[key]` as an object, created empty when absent or null (nothing when `parent` is
/// not an object, or `parent[key]` is something else).
pub fn obj_at<'a>(parent: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let m = parent.as_object_mut()?;
    let slot = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = json!({});
    }
    slot.is_object().then_some(slot)
}

/// The elements of the list `parent[key]` (none when absent).
pub fn items<'a>(parent: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    parent
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// Is `parent[key]` absent, null or an empty string?
pub fn unset(parent: &Value, key: &str) -> bool {
    match parent.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}
