//! Per-type defaulting on create and update, the part of each built-in type's registry
//! strategy that controllers observe (service cluster IPs, pod phase, workload replicas,
//! namespace finalizers, CRD defaults).

use serde_json::{Value, json};

use super::state::random_u64;

/// Defaults applied when an object of resource `gr` is created.
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
        "/pods" => default_pod(obj),
        "/services" => default_service(obj, None),
        "/secrets" if obj["type"].is_null() => obj["type"] = json!("Opaque"),
        "apps/deployments" => {
            default_replicas(obj);
            set_default(&mut obj["spec"], "revisionHistoryLimit", json!(10));
            set_default(&mut obj["spec"], "progressDeadlineSeconds", json!(600));
            set_default(
                &mut obj["spec"],
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
            );
        }
        "apps/statefulsets" => {
            default_replicas(obj);
            set_default(
                &mut obj["spec"],
                "podManagementPolicy",
                json!("OrderedReady"),
            );
            set_default(&mut obj["spec"], "revisionHistoryLimit", json!(10));
            set_default(
                &mut obj["spec"],
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
        }
        "apps/replicasets" => default_replicas(obj),
        _ => {}
    }
}

/// Defaults applied when an object of resource `gr` is updated (`old` is the stored version).
pub fn on_update(gr: &str, old: &Value, obj: &mut Value) {
    match gr {
        "/namespaces" => {
            let name = obj["metadata"]["name"].clone();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            if obj["spec"]["finalizers"].is_null() {
                obj["spec"]["finalizers"] = old["spec"]["finalizers"].clone();
            }
        }
        "/services" => default_service(obj, Some(old)),
        "/pods" => default_pod(obj),
        _ => {}
    }
}

fn set_default(parent: &mut Value, key: &str, v: Value) {
    if let Some(m) = parent.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_string(), v);
    }
}

fn default_replicas(obj: &mut Value) {
    if obj["spec"].is_object() {
        set_default(&mut obj["spec"], "replicas", json!(1));
    }
}

fn default_pod(obj: &mut Value) {
    if !obj["spec"].is_object() {
        return;
    }
    let spec = &mut obj["spec"];
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "serviceAccountName", json!("default"));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec[list].as_array_mut() {
            for c in cs {
                let image = c["image"].as_str().unwrap_or_default().to_string();
                let tag = image.rsplit('/').next().unwrap_or_default();
                let latest = !tag.contains(':') || tag.ends_with(":latest");
                set_default(
                    c,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
            }
        }
    }
    if obj["status"]["phase"].is_null() {
        obj["status"]["phase"] = json!("Pending");
    }
}

fn default_service(obj: &mut Value, old: Option<&Value>) {
    if !obj["spec"].is_object() {
        return;
    }
    let spec = &mut obj["spec"];
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    if spec["clusterIP"].is_null() {
        let ip = old
            .and_then(|o| o["spec"]["clusterIP"].as_str().map(String::from))
            .unwrap_or_else(|| {
                let r = random_u64();
                format!("10.96.{}.{}", (r >> 8) % 256, (r % 254) + 1)
            });
        spec["clusterIP"] = json!(ip);
    }
    if spec["clusterIPs"].is_null() {
        spec["clusterIPs"] = json!([spec["clusterIP"].clone()]);
    }
    set_default(spec, "ipFamilies", json!(["IPv4"]));
    set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    if let Some(ports) = spec["ports"].as_array_mut() {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
            if p["targetPort"].is_null() {
                p["targetPort"] = p["port"].clone();
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
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(s["spec"]["ports"][0]["protocol"], "TCP");
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
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
    }
}
