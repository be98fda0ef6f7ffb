//! Validation of built-in types' contents, after kube-apiserver's `pkg/apis/*/validation`: the
//! rules controllers meet in practice (required fields, port ranges, service port names, secret
//! keys by type, selector/template label match, restart policies, immutable selectors).
//! Metadata is validated by [`super::validation`]; errors use its [`FieldError`] wording.

use serde_json::Value;

use super::validation::{FieldError, FieldErrorKind};

/// Validate an object of resource `gr`; `old` is the stored version on update.
pub fn validate(gr: &str, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match gr {
        "/pods" => pod_spec(&obj["spec"], "spec", &mut errs),
        "/services" => service(&obj["spec"], &mut errs),
        "/secrets" => secret(obj, &mut errs),
        "/configmaps" => config_map(obj, &mut errs),
        "apps/deployments" => workload(obj, old, &["Always"], &mut errs),
        "apps/replicasets" | "apps/statefulsets" | "apps/daemonsets" => {
            workload(obj, old, &["Always"], &mut errs)
        }
        "batch/jobs" => workload(obj, old, &["OnFailure", "Never"], &mut errs),
        "batch/cronjobs" => {
            let t = &obj["spec"]["jobTemplate"]["spec"]["template"];
            template(
                t,
                "spec.jobTemplate.spec.template",
                &["OnFailure", "Never"],
                &mut errs,
            );
        }
        _ => {}
    }
    errs
}

fn port_range(v: &Value, path: String, errs: &mut Vec<FieldError>) {
    match v.as_i64() {
        None | Some(0) => errs.push(FieldError::required(path, "")),
        Some(p) if !(1..=65535).contains(&p) => errs.push(FieldError::invalid(
            path,
            p,
            "must be between 1 and 65535, inclusive",
        )),
        _ => {}
    }
}

fn empty(v: &Value) -> bool {
    v.as_str().is_none_or(str::is_empty)
}

/// `ValidatePodSpec` (the parts controllers hit).
fn pod_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let containers = spec["containers"].as_array().map(Vec::as_slice);
    if containers.is_none_or(<[Value]>::is_empty) {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let p = format!("{path}.{list}[{i}]");
            match c["name"].as_str().filter(|n| !n.is_empty()) {
                None => errs.push(FieldError::required(format!("{p}.name"), "")),
                Some(n) if names.contains(&n) => {
                    errs.push(FieldError::duplicate(format!("{p}.name"), n))
                }
                Some(n) => names.push(n),
            }
            if empty(&c["image"]) {
                errs.push(FieldError::required(format!("{p}.image"), ""));
            }
            for (j, port) in c["ports"].as_array().into_iter().flatten().enumerate() {
                port_range(
                    &port["containerPort"],
                    format!("{p}.ports[{j}].containerPort"),
                    errs,
                );
            }
        }
    }
}

fn template(t: &Value, path: &str, restart: &[&str], errs: &mut Vec<FieldError>) {
    if !t.is_object() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let spec = &t["spec"];
    pod_spec(spec, &format!("{path}.spec"), errs);
    if let Some(rp) = spec["restartPolicy"].as_str()
        && !restart.contains(&rp)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.spec.restartPolicy"),
            rp,
            restart,
        ));
    }
}

/// Go's `%#v` of a `map[string]string`.
fn go_map(m: &serde_json::Map<String, Value>) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{:?}:{:?}", k, v.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", parts.join(", "))
}

/// Does a label selector select `labels`?
fn selects(sel: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let ml_ok = sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let me_ok = sel["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let have = labels.get(key).and_then(Value::as_str);
            match e["operator"].as_str() {
                Some("In") => have.is_some_and(|h| values.contains(&h)),
                Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
                Some("Exists") => have.is_some(),
                Some("DoesNotExist") => have.is_none(),
                _ => false,
            }
        });
    ml_ok && me_ok
}

/// Workloads: a selector that selects the template's labels, a valid template, an immutable
/// selector.
fn workload(obj: &Value, old: Option<&Value>, restart: &[&str], errs: &mut Vec<FieldError>) {
    let spec = &obj["spec"];
    let sel = &spec["selector"];
    let empty_sel = sel["matchLabels"].as_object().is_none_or(|m| m.is_empty())
        && sel["matchExpressions"].as_array().is_none_or(Vec::is_empty);
    if empty_sel {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        let labels = spec["template"]["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if !selects(sel, &labels) {
            errs.push(FieldError {
                field: "spec.template.metadata.labels".into(),
                kind: FieldErrorKind::Invalid,
                value: None,
                detail: format!(
                    "{}: `selector` does not match template `labels`",
                    go_map(&labels)
                ),
            });
        }
    }
    if let Some(r) = spec["replicas"].as_i64()
        && r < 0
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            r,
            "must be greater than or equal to 0",
        ));
    }
    template(&spec["template"], "spec.template", restart, errs);
    if let Some(old) = old
        && old["spec"]["selector"] != *sel
    {
        errs.push(FieldError {
            field: "spec.selector".into(),
            kind: FieldErrorKind::Invalid,
            value: None,
            detail: format!("{sel}: field is immutable"),
        });
    }
}

/// `ValidateService` (the parts controllers hit).
fn service(spec: &Value, errs: &mut Vec<FieldError>) {
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&ty) {
        errs.push(FieldError::not_supported("spec.type", ty, TYPES));
    }
    if ty == "ExternalName" && empty(&spec["externalName"]) {
        errs.push(FieldError::required("spec.externalName", ""));
    }
    let ports = spec["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let headless = spec["clusterIP"] == "None";
    if ports.is_empty() && ty != "ExternalName" && !headless {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        match p["name"].as_str().filter(|n| !n.is_empty()) {
            None if ports.len() > 1 => errs.push(FieldError::required(format!("{path}.name"), "")),
            None => {}
            Some(n) if names.contains(&n) => {
                errs.push(FieldError::duplicate(format!("{path}.name"), n))
            }
            Some(n) => names.push(n),
        }
        port_range(&p["port"], format!("{path}.port"), errs);
        const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
        if let Some(proto) = p["protocol"].as_str()
            && !PROTOCOLS.contains(&proto)
        {
            errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                proto,
                PROTOCOLS,
            ));
        }
    }
}

/// A valid `data` key (`IsConfigMapKey`).
fn key_errors(obj: &Value, field: &str, errs: &mut Vec<FieldError>) {
    for k in obj[field].as_object().into_iter().flatten().map(|(k, _)| k) {
        let ok = !k.is_empty()
            && k.len() <= 253
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
            && k != "."
            && k != ".."
            && !k.starts_with("..");
        if !ok {
            errs.push(FieldError::invalid(
                format!("{field}[{k}]"),
                k.as_str(),
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            ));
        }
    }
}

/// `ValidateSecret`: valid keys, and the keys its type requires.
fn secret(obj: &Value, errs: &mut Vec<FieldError>) {
    key_errors(obj, "data", errs);
    let has = |k: &str| obj["data"].get(k).is_some();
    let required: &[&str] = match obj["type"].as_str() {
        Some("kubernetes.io/tls") => &["tls.crt", "tls.key"],
        Some("kubernetes.io/dockerconfigjson") => &[".dockerconfigjson"],
        Some("kubernetes.io/dockercfg") => &[".dockercfg"],
        Some("kubernetes.io/ssh-auth") => &["ssh-privatekey"],
        _ => &[],
    };
    for k in required {
        if !has(k) {
            errs.push(FieldError::required(format!("data[{k}]"), ""));
        }
    }
}

/// `ValidateConfigMap`: valid keys, none in both `data` and `binaryData`.
fn config_map(obj: &Value, errs: &mut Vec<FieldError>) {
    key_errors(obj, "data", errs);
    key_errors(obj, "binaryData", errs);
    for k in obj["binaryData"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if obj["data"].get(k).is_some() {
            errs.push(FieldError::invalid(
                "data",
                k.as_str(),
                "duplicate of key present in binaryData",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(gr: &str, obj: Value, old: Option<&Value>) -> Vec<String> {
        validate(gr, &obj, old)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn service_ports_need_names_when_several_and_valid_numbers() {
        let s = json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80}, {"name": "b", "port": 81}]}});
        assert_eq!(
            msgs("/services", s, None),
            ["spec.ports[0].name: Required value"]
        );
        let s =
            json!({"spec": {"ports": [{"name": "a", "port": 0}, {"name": "a", "port": 70000}]}});
        assert_eq!(
            msgs("/services", s, None),
            [
                "spec.ports[0].port: Required value",
                "spec.ports[1].name: Duplicate value: \"a\"",
                "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
            ]
        );
        assert!(
            msgs(
                "/services",
                json!({"spec": {"ports": [{"port": 80}]}}),
                None
            )
            .is_empty()
        );
        assert_eq!(
            msgs("/services", json!({"spec": {"type": "ClusterIP"}}), None),
            ["spec.ports: Required value"]
        );
        assert_eq!(
            msgs("/services", json!({"spec": {"type": "ExternalName"}}), None),
            ["spec.externalName: Required value"]
        );
    }

    #[test]
    fn secrets_need_the_keys_of_their_type() {
        let s = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(msgs("/secrets", s, None), ["data[tls.key]: Required value"]);
        let s = json!({"type": "Opaque", "data": {"a b": "eA=="}});
        assert!(msgs("/secrets", s, None)[0].starts_with("data[a b]: Invalid value: \"a b\""));
    }

    #[test]
    fn config_map_keys() {
        let c = json!({"data": {"x": "1"}, "binaryData": {"x": "eA=="}});
        assert_eq!(
            msgs("/configmaps", c, None),
            ["data: Invalid value: \"x\": duplicate of key present in binaryData"]
        );
    }

    #[test]
    fn pods_need_containers_with_names_images_and_valid_ports() {
        assert_eq!(
            msgs("/pods", json!({"spec": {}}), None),
            ["spec.containers: Required value"]
        );
        let p = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 70000}]}, {"name": "c", "image": "x"}]}});
        assert_eq!(
            msgs("/pods", p, None),
            [
                "spec.containers[0].image: Required value",
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[1].name: Duplicate value: \"c\""
            ]
        );
    }

    fn deploy(sel: Value, labels: Value, restart: &str) -> Value {
        json!({"spec": {"selector": sel, "template": {"metadata": {"labels": labels},
            "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "x"}]}}}})
    }

    #[test]
    fn workloads_selector_must_match_template_and_stay() {
        let ok = deploy(
            json!({"matchLabels": {"a": "b"}}),
            json!({"a": "b", "c": "d"}),
            "Always",
        );
        assert!(msgs("apps/deployments", ok.clone(), None).is_empty());
        let bad = deploy(
            json!({"matchLabels": {"a": "x"}}),
            json!({"a": "b"}),
            "Never",
        );
        assert_eq!(
            msgs("apps/deployments", bad, None),
            [
                "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
            ]
        );
        let none = deploy(json!(null), json!({"a": "b"}), "Always");
        assert_eq!(
            msgs("apps/deployments", none, None),
            ["spec.selector: Required value"]
        );
        let moved = deploy(
            json!({"matchLabels": {"a": "b", "c": "d"}}),
            json!({"a": "b", "c": "d"}),
            "Always",
        );
        assert!(msgs("apps/deployments", moved, Some(&ok))[0].ends_with("field is immutable"));
        let job = deploy(
            json!({"matchLabels": {"a": "b"}}),
            json!({"a": "b"}),
            "Always",
        );
        assert_eq!(
            msgs("batch/jobs", job, None),
            [
                "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
            ]
        );
    }
}
