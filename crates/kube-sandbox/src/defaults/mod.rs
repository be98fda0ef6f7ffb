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

use serde_json::Value;

pub(crate) use crate::json_fields::{items, obj_at, set, unset};

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
