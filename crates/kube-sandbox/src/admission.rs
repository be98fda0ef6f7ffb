//! What kube-apiserver's registry strategies and default admission plugins add on create and
//! update, beyond the API defaults of [`super::defaults`]: service cluster IPs and node ports,
//! pod phase, service account and priority, namespace finalizers, the Job selector, the
//! DaemonSet template generation, the PVC protection finalizer.

use serde_json::{Value, json};

use super::defaults::{self, batch::generate_job_selector};
use super::state::random_u64;

/// Finalizer the storage-object-in-use-protection admission plugin puts on claims.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";

/// Added when an object of resource `gr` is created (after decoding and defaulting).
pub fn on_create(gr: &str, obj: &mut Value) {
    match gr {
        "/namespaces" => {
            let name = obj["metadata"]["name"].clone();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            if obj["spec"]["finalizers"].is_null() {
                obj["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            obj["status"] = json!({"phase": "Active"});
        }
        "/pods" => pod(obj),
        "/services" => service(obj, None),
        "/persistentvolumeclaims" => {
            let fs = &mut obj["metadata"]["finalizers"];
            if !fs.is_array() {
                *fs = json!([]);
            }
            if let Some(a) = fs.as_array_mut()
                && !a.iter().any(|f| f == PVC_PROTECTION)
            {
                a.push(json!(PVC_PROTECTION));
            }
        }
        "apps/daemonsets" => {
            obj["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = json!("1");
        }
        "batch/jobs" => generate_job_selector(obj),
        _ => {}
    }
}

/// Added when an object of resource `gr` is updated (`old` is the stored version).
pub fn on_update(gr: &str, old: &Value, obj: &mut Value) {
    match gr {
        "/namespaces" => {
            let name = obj["metadata"]["name"].clone();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            // Only the `finalize` subresource changes them (the caller sets them after this).
            match old["spec"].get("finalizers") {
                Some(f) => obj["spec"]["finalizers"] = f.clone(),
                None => {
                    if let Some(spec) = obj["spec"].as_object_mut() {
                        spec.remove("finalizers");
                    }
                }
            }
        }
        "/services" => service(obj, Some(old)),
        "/pods" => pod(obj),
        "apps/daemonsets" => {
            let key = "deprecated.daemonset.template.generation";
            let g = old["metadata"]["annotations"][key]
                .as_str()
                .and_then(|g| g.parse::<i64>().ok());
            if let Some(g) = g {
                let g = if old["spec"]["template"] != obj["spec"]["template"] {
                    g + 1
                } else {
                    g
                };
                obj["metadata"]["annotations"][key] = json!(g.to_string());
            }
        }
        _ => {}
    }
}

/// The service account and priority admission plugins, and the pod's initial phase.
fn pod(obj: &mut Value) {
    if !obj["spec"].is_object() {
        return;
    }
    let spec = &mut obj["spec"];
    if defaults::unset(spec, "serviceAccountName") {
        let sa = spec
            .get("serviceAccount")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string();
        spec["serviceAccountName"] = json!(sa);
    }
    // The deprecated field mirrors the name on output.
    spec["serviceAccount"] = spec["serviceAccountName"].clone();
    if spec.get("priority").is_none_or(Value::is_null) {
        let p = match spec["priorityClassName"].as_str() {
            Some("system-node-critical") => 2_000_001_000,
            Some("system-cluster-critical") => 2_000_000_000,
            _ => 0,
        };
        spec["priority"] = json!(p);
    }
    defaults::set(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    if obj["status"]["phase"].is_null() {
        obj["status"]["phase"] = json!("Pending");
    }
}

fn random_cluster_ip() -> String {
    let r = random_u64();
    format!("10.96.{}.{}", (r >> 8) % 256, (r % 254) + 1)
}

/// Cluster IPs, IP families and node ports, as the service registry allocates them.
fn service(obj: &mut Value, old: Option<&Value>) {
    if !obj["spec"].is_object() {
        return;
    }
    let spec = &mut obj["spec"];
    if spec["type"] == "ExternalName" {
        return;
    }
    if defaults::unset(spec, "clusterIP") {
        let ip = old
            .and_then(|o| o["spec"]["clusterIP"].as_str().map(String::from))
            .unwrap_or_else(random_cluster_ip);
        spec["clusterIP"] = json!(ip);
    }
    let ips_kept = old.is_some_and(|o| o["spec"]["clusterIPs"] == spec["clusterIPs"]);
    let ip_changed = old.is_some_and(|o| o["spec"]["clusterIP"] != spec["clusterIP"]);
    if spec["clusterIPs"].as_array().is_none_or(Vec::is_empty) || (ips_kept && ip_changed) {
        // As the registry's normalizeClusterIPs: a changed `clusterIP` alone changes the list
        // (and update validation then refuses the change).
        spec["clusterIPs"] = json!([spec["clusterIP"].clone()]);
    }
    defaults::set(spec, "ipFamilies", json!(["IPv4"]));
    defaults::set(spec, "ipFamilyPolicy", json!("SingleStack"));
    if matches!(spec["type"].as_str(), Some("NodePort" | "LoadBalancer")) {
        let old_ports = old.map(|o| o["spec"]["ports"].clone()).unwrap_or_default();
        for (i, p) in defaults::items(spec, "ports").enumerate() {
            if p.get("nodePort")
                .is_none_or(|n| n.is_null() || *n == json!(0))
            {
                let port = old_ports[i]["nodePort"]
                    .as_u64()
                    .unwrap_or_else(|| 30000 + random_u64() % 2768);
                p["nodePort"] = json!(port);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_gets_cluster_ip_kept_across_updates() {
        let mut s = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        on_create("/services", &mut s);
        let ip = s["spec"]["clusterIP"].as_str().expect("ip").to_string();
        assert!(ip.starts_with("10.96."));
        assert_eq!(s["spec"]["clusterIPs"], json!([ip]));
        assert_eq!(s["spec"]["ipFamilyPolicy"], "SingleStack");
        let mut upd = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 81}]}});
        on_update("/services", &s, &mut upd);
        assert_eq!(upd["spec"]["clusterIP"], json!(ip));
    }

    #[test]
    fn namespace_and_pod_defaults() {
        let mut ns = json!({"metadata": {"name": "x"}});
        on_create("/namespaces", &mut ns);
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "x");
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}});
        on_create("/pods", &mut pod);
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        assert_eq!(pod["spec"]["serviceAccount"], "default");
        assert_eq!(pod["spec"]["priority"], 0);
        assert_eq!(pod["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    }

    #[test]
    fn external_name_services_get_no_ips_node_ports_are_allocated_and_kept() {
        let mut s = json!({"spec": {"type": "ExternalName", "externalName": "x.example.com"}});
        on_create("/services", &mut s);
        assert!(s["spec"].get("clusterIP").is_none());
        let mut s = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        on_create("/services", &mut s);
        let np = s["spec"]["ports"][0]["nodePort"]
            .as_u64()
            .expect("node port");
        assert!((30000..32768).contains(&np));
        let mut upd = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        on_update("/services", &s, &mut upd);
        assert_eq!(upd["spec"]["ports"][0]["nodePort"], np);
    }

    #[test]
    fn claims_get_the_protection_finalizer_daemon_sets_a_template_generation() {
        let mut c = json!({"metadata": {"name": "c"}, "spec": {}});
        on_create("/persistentvolumeclaims", &mut c);
        assert_eq!(c["metadata"]["finalizers"], json!([PVC_PROTECTION]));
        let mut d = json!({"metadata": {"name": "d"}, "spec": {"template": {"a": 1}}});
        on_create("apps/daemonsets", &mut d);
        let mut upd = json!({"metadata": {"name": "d"}, "spec": {"template": {"a": 2}}});
        on_update("apps/daemonsets", &d, &mut upd);
        assert_eq!(
            upd["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
            "2"
        );
    }
}
