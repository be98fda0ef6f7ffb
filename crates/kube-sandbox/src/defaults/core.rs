//! Defaults of the core group (`pkg/apis/core/v1/defaults.go`): pods and everything that
//! embeds a pod template, services, secrets, volumes claims, endpoints, limit ranges.

use serde_json::{Value, json};

use super::{items, obj_at, set, unset};

/// `SetDefaults_Pod` + `SetDefaults_PodSpec` and the nested defaults of a Pod.
pub fn pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set(spec, "enableServiceLinks", json!(true));
    // Requests default to limits, for pods only (not templates).
    for list in ["containers", "initContainers"] {
        for c in items(spec, list) {
            let Some(limits) = c["resources"]["limits"].as_object().cloned() else {
                continue;
            };
            if let Some(res) = obj_at(c, "resources")
                && let Some(req) = obj_at(res, "requests")
            {
                for (k, v) in limits {
                    set(req, &k, v);
                }
            }
        }
    }
    pod_spec(spec);
}

/// `PodTemplateSpec`: `metadata` is always written (a Go struct), the spec gets pod-spec defaults.
pub fn pod_template(t: &mut Value) {
    if !t.is_object() {
        return;
    }
    obj_at(t, "metadata");
    if let Some(spec) = t.get_mut("spec").filter(|s| s.is_object()) {
        pod_spec(spec);
    }
}

/// `SetDefaults_PodSpec` and the defaults of its containers, volumes and probes.
pub fn pod_spec(spec: &mut Value) {
    if unset(spec, "dnsPolicy") {
        spec["dnsPolicy"] = json!("ClusterFirst");
    }
    if unset(spec, "restartPolicy") {
        spec["restartPolicy"] = json!("Always");
    }
    set(spec, "securityContext", json!({}));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    if unset(spec, "schedulerName") {
        spec["schedulerName"] = json!("default-scheduler");
    }
    let host_network = spec["hostNetwork"] == json!(true);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in items(spec, list) {
            container(c, host_network);
        }
    }
    for v in items(spec, "volumes") {
        volume(v);
    }
}

/// Does an image reference name the `latest` tag (explicitly or by having no tag or digest)?
fn latest_tag(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// `SetDefaults_Container`, `SetDefaults_ContainerPort`, probes, lifecycle handlers, env.
fn container(c: &mut Value, host_network: bool) {
    if !c.is_object() {
        return;
    }
    if unset(c, "imagePullPolicy") {
        let image = c["image"].as_str().unwrap_or_default();
        c["imagePullPolicy"] = json!(if latest_tag(image) {
            "Always"
        } else {
            "IfNotPresent"
        });
    }
    if unset(c, "terminationMessagePath") {
        c["terminationMessagePath"] = json!("/dev/termination-log");
    }
    if unset(c, "terminationMessagePolicy") {
        c["terminationMessagePolicy"] = json!("File");
    }
    obj_at(c, "resources");
    for p in items(c, "ports") {
        if unset(p, "protocol") {
            p["protocol"] = json!("TCP");
        }
        if host_network && p.get("hostPort").is_none() {
            let cp = p["containerPort"].clone();
            p["hostPort"] = cp;
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            set(p, "timeoutSeconds", json!(1));
            set(p, "periodSeconds", json!(10));
            set(p, "successThreshold", json!(1));
            set(p, "failureThreshold", json!(3));
            handler(p);
        }
    }
    if let Some(l) = c.get_mut("lifecycle").filter(|l| l.is_object()) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = l.get_mut(hook).filter(|h| h.is_object()) {
                handler(h);
            }
        }
    }
    for e in items(c, "env") {
        if let Some(vf) = e.get_mut("valueFrom") {
            field_ref(vf);
        }
    }
}

/// `SetDefaults_HTTPGetAction` and `SetDefaults_GRPCAction` inside a probe or lifecycle handler.
fn handler(h: &mut Value) {
    if let Some(g) = h.get_mut("httpGet").filter(|g| g.is_object()) {
        if unset(g, "path") {
            g["path"] = json!("/");
        }
        if unset(g, "scheme") {
            g["scheme"] = json!("HTTP");
        }
    }
    if let Some(g) = h.get_mut("grpc").filter(|g| g.is_object()) {
        set(g, "service", json!(""));
    }
}

/// `SetDefaults_ObjectFieldSelector`: `fieldRef.apiVersion` is `v1`.
fn field_ref(parent: &mut Value) {
    if let Some(f) = parent.get_mut("fieldRef").filter(|f| f.is_object())
        && unset(f, "apiVersion")
    {
        f["apiVersion"] = json!("v1");
    }
}

const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// `SetDefaults_Volume` and the defaults of the volume sources (file modes 0644).
fn volume(v: &mut Value) {
    if !v.is_object() {
        return;
    }
    if !VOLUME_SOURCES.iter().any(|s| v.get(*s).is_some()) {
        v["emptyDir"] = json!({});
    }
    for src in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(src).filter(|s| s.is_object()) {
            set(s, "defaultMode", json!(420));
        }
    }
    if let Some(d) = v.get_mut("downwardAPI") {
        for i in items(d, "items") {
            field_ref(i);
        }
    }
    if let Some(p) = v.get_mut("projected") {
        for s in items(p, "sources") {
            if let Some(d) = s.get_mut("downwardAPI") {
                for i in items(d, "items") {
                    field_ref(i);
                }
            }
            if let Some(t) = s.get_mut("serviceAccountToken").filter(|t| t.is_object()) {
                set(t, "expirationSeconds", json!(3600));
            }
        }
    }
    if let Some(h) = v.get_mut("hostPath").filter(|h| h.is_object()) {
        set(h, "type", json!(""));
    }
}

/// `SetDefaults_Service` (cluster IPs are the strategy's, in admission).
pub fn service(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if unset(spec, "sessionAffinity") {
        spec["sessionAffinity"] = json!("None");
    }
    if spec["sessionAffinity"] == "ClientIP"
        && let Some(cfg) = obj_at(spec, "sessionAffinityConfig")
        && let Some(ip) = obj_at(cfg, "clientIP")
    {
        set(ip, "timeoutSeconds", json!(10800));
    }
    if unset(spec, "type") {
        spec["type"] = json!("ClusterIP");
    }
    for p in items(spec, "ports") {
        if unset(p, "protocol") {
            p["protocol"] = json!("TCP");
        }
        if matches!(p.get("targetPort"), None | Some(Value::Null))
            || p["targetPort"] == json!(0)
            || p["targetPort"] == json!("")
        {
            p["targetPort"] = p["port"].clone();
        }
    }
    let ty = spec["type"].as_str().unwrap_or_default().to_string();
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") && unset(spec, "externalTrafficPolicy") {
        spec["externalTrafficPolicy"] = json!("Cluster");
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// `SetDefaults_Secret` and the write-only `stringData`, folded into `data` (it wins).
pub fn secret(obj: &mut Value) {
    if unset(obj, "type") {
        obj["type"] = json!("Opaque");
    }
    let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    if sd.is_empty() {
        return;
    }
    if let Some(data) = obj_at(obj, "data") {
        for (k, v) in sd {
            let s = v.as_str().unwrap_or_default();
            data[k] = json!(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                s.as_bytes()
            ));
        }
    }
}

/// A claim's or volume's phase starts as `Pending`.
fn pending_phase(obj: &mut Value) {
    if obj.is_object()
        && unset(&obj["status"], "phase")
        && let Some(st) = obj_at(obj, "status")
    {
        st["phase"] = json!("Pending");
    }
}

/// `SetDefaults_PersistentVolumeClaim` and `..ClaimSpec`.
pub fn pvc(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
        set(spec, "volumeMode", json!("Filesystem"));
    }
    pending_phase(obj);
}

/// `SetDefaults_PersistentVolume`.
pub fn pv(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
        if unset(spec, "persistentVolumeReclaimPolicy") {
            spec["persistentVolumeReclaimPolicy"] = json!("Retain");
        }
        set(spec, "volumeMode", json!("Filesystem"));
    }
    pending_phase(obj);
}

/// `SetDefaults_EndpointPort`: protocol TCP.
pub fn endpoints(obj: &mut Value) {
    for s in items(obj, "subsets") {
        for p in items(s, "ports") {
            if unset(p, "protocol") {
                p["protocol"] = json!("TCP");
            }
        }
    }
}

/// `SetDefaults_LimitRangeItem`: for containers, default = max and defaultRequest = default or min.
pub fn limit_range(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    for item in items(spec, "limits") {
        if item["type"] != "Container" {
            continue;
        }
        let max = item["max"].as_object().cloned().unwrap_or_default();
        let min = item["min"].as_object().cloned().unwrap_or_default();
        if !max.is_empty()
            && let Some(d) = obj_at(item, "default")
        {
            for (k, v) in max {
                set(d, &k, v);
            }
        }
        let default = item["default"].as_object().cloned().unwrap_or_default();
        if (!default.is_empty() || !min.is_empty())
            && let Some(dr) = obj_at(item, "defaultRequest")
        {
            for (k, v) in default.into_iter().chain(min) {
                set(dr, &k, v);
            }
        }
    }
}

/// `SetDefaults_ReplicationController`: selector and labels from the template, one replica.
pub fn replication_controller(obj: &mut Value) {
    let labels = obj["spec"]["template"]["metadata"]["labels"].clone();
    if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
        if labels.is_object() && spec["selector"].as_object().is_none_or(|m| m.is_empty()) {
            spec["selector"] = labels.clone();
        }
        set(spec, "replicas", json!(1));
        if let Some(t) = spec.get_mut("template") {
            pod_template(t);
        }
    }
    if labels.is_object()
        && obj["metadata"]["labels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
    {
        obj["metadata"]["labels"] = labels;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_of(c: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [c]}})
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("registry:5000/nginx", "Always"),
            ("registry:5000/nginx:1", "IfNotPresent"),
            ("nginx@sha256:abc", "IfNotPresent"),
        ] {
            let mut p = pod_of(json!({"name": "c", "image": image}));
            pod(&mut p);
            assert_eq!(
                p["spec"]["containers"][0]["imagePullPolicy"], want,
                "{image}"
            );
        }
    }

    #[test]
    fn pod_spec_and_container_defaults() {
        let mut p = pod_of(json!({"name": "c", "image": "x:1", "ports": [{"containerPort": 80}]}));
        pod(&mut p);
        let s = &p["spec"];
        assert_eq!(s["dnsPolicy"], "ClusterFirst");
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["schedulerName"], "default-scheduler");
        assert_eq!(s["securityContext"], json!({}));
        assert_eq!(s["terminationGracePeriodSeconds"], 30);
        assert_eq!(s["enableServiceLinks"], true);
        let c = &s["containers"][0];
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["resources"], json!({}));
        assert_eq!(c["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn pod_requests_default_to_limits_but_templates_do_not() {
        let c = json!({"name": "c", "image": "x", "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}});
        let mut p = pod_of(c.clone());
        pod(&mut p);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"],
            json!({"memory": "1Gi", "cpu": "1"})
        );
        let mut t = json!({"spec": {"containers": [c]}});
        pod_template(&mut t);
        assert_eq!(t["metadata"], json!({}));
        assert_eq!(
            t["spec"]["containers"][0]["resources"]["requests"],
            json!({"memory": "1Gi"})
        );
        assert!(t["spec"].get("enableServiceLinks").is_none());
    }

    #[test]
    fn probes_handlers_and_field_refs() {
        let mut p = pod_of(json!({"name": "c", "image": "x",
            "livenessProbe": {"httpGet": {"port": 80}},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}));
        pod(&mut p);
        let c = &p["spec"]["containers"][0];
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                   "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    }

    #[test]
    fn host_network_ports_get_host_ports() {
        let mut p = json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}]}});
        pod(&mut p);
        assert_eq!(p["spec"]["containers"][0]["ports"][0]["hostPort"], 8080);
    }

    #[test]
    fn volumes_default_to_empty_dir_and_mode_0644() {
        let mut p = json!({"spec": {"containers": [], "volumes": [{"name": "a"}, {"name": "b", "secret": {"secretName": "s"}},
            {"name": "c", "configMap": {"name": "c", "defaultMode": 256}}, {"name": "d", "hostPath": {"path": "/x"}}]}});
        pod(&mut p);
        let v = &p["spec"]["volumes"];
        assert_eq!(v[0]["emptyDir"], json!({}));
        assert_eq!(v[1]["secret"]["defaultMode"], 420);
        assert_eq!(v[2]["configMap"]["defaultMode"], 256);
        assert_eq!(v[3]["hostPath"]["type"], "");
    }

    #[test]
    fn service_defaults_by_type() {
        let mut s = json!({"spec": {"ports": [{"port": 80}]}});
        service(&mut s);
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(s["spec"]["sessionAffinity"], "None");
        assert_eq!(s["spec"]["internalTrafficPolicy"], "Cluster");
        assert_eq!(
            s["spec"]["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert!(s["spec"].get("externalTrafficPolicy").is_none());
        let mut s = json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP"}});
        service(&mut s);
        assert_eq!(s["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(s["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(
            s["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10800
        );
        let mut s = json!({"spec": {"type": "ExternalName", "externalName": "x.example.com"}});
        service(&mut s);
        assert!(s["spec"].get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn secret_string_data_wins_over_data() {
        let mut s = json!({"data": {"a": "b2xk", "b": "Yg=="}, "stringData": {"a": "new"}});
        secret(&mut s);
        assert_eq!(
            s,
            json!({"data": {"a": "bmV3", "b": "Yg=="}, "type": "Opaque"})
        );
    }

    #[test]
    fn pvc_pv_endpoints_defaults() {
        let mut c = json!({"spec": {"accessModes": ["ReadWriteOnce"]}});
        pvc(&mut c);
        assert_eq!(c["spec"]["volumeMode"], "Filesystem");
        assert_eq!(c["status"]["phase"], "Pending");
        let mut v = json!({"spec": {}});
        pv(&mut v);
        assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        let mut e = json!({"subsets": [{"ports": [{"port": 80}]}]});
        endpoints(&mut e);
        assert_eq!(e["subsets"][0]["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn limit_range_defaults_from_max_and_min() {
        let mut l = json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}}]}});
        limit_range(&mut l);
        let i = &l["spec"]["limits"][0];
        assert_eq!(i["default"], json!({"cpu": "2"}));
        assert_eq!(i["defaultRequest"], json!({"cpu": "2", "memory": "1Mi"}));
    }

    #[test]
    fn replication_controller_selector_and_labels_from_template() {
        let mut rc = json!({"metadata": {"name": "r"}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}});
        replication_controller(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"a": "b"}));
        assert_eq!(rc["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(rc["spec"]["replicas"], 1);
    }
}
