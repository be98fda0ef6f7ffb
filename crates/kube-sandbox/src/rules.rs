//! Validation of built-in types' contents, after kube-apiserver's `pkg/apis/*/validation`: the
//! rules controllers meet in practice (required fields, port ranges, service port names, secret
//! keys by type, selector/template label match, restart policies) and the update rules (fields
//! that are immutable once set: workload selectors, the Job template, completions and
//! completion mode, Service cluster IPs, Secret type, `immutable` ConfigMaps and Secrets, PVC
//! and StatefulSet specs but for their mutable parts, Pod specs but for images, deadlines and
//! added tolerations).
//!
//! Values in messages follow Go's `%#v` where controllers match on them (label selectors,
//! string lists); a whole pod template or spec, which kube-apiserver dumps as a Go struct or a
//! `cmp.Diff`, is abbreviated.
//! Metadata is validated by [`super::validation`]; errors use its [`FieldError`] wording.

use serde_json::Value;

use super::apply::without_nulls as strip_nulls;
use super::validation::{FieldError, FieldErrorKind};

/// Validate an object of resource `gr`; `old` is the stored version on update.
pub fn validate(gr: &str, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match gr {
        "/pods" => pod_spec(&obj["spec"], "spec", &mut errs),
        "/services" => service(&obj["spec"], &mut errs),
        "/secrets" => secret(obj, &mut errs),
        "/configmaps" => config_map(obj, &mut errs),
        "apps/deployments" => workload(obj, &["Always"], &mut errs),
        "apps/replicasets" | "apps/statefulsets" | "apps/daemonsets" => {
            workload(obj, &["Always"], &mut errs)
        }
        "batch/jobs" => workload(obj, &["OnFailure", "Never"], &mut errs),
        "admissionregistration.k8s.io/validatingwebhookconfigurations" => {
            errs.extend(super::webhook::config::validate(obj, false))
        }
        "admissionregistration.k8s.io/mutatingwebhookconfigurations" => {
            errs.extend(super::webhook::config::validate(obj, true))
        }
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
    if let Some(old) = old {
        update(gr, obj, old, &mut errs);
    }
    errs
}

/// The update rules (`Validate*Update`), given the stored version `old`.
fn update(gr: &str, obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    match gr {
        "/pods" => pod_update(obj, old, errs),
        "/services" => service_update(&obj["spec"], &old["spec"], errs),
        "/secrets" => {
            if obj["type"] != old["type"] {
                errs.push(immutable_field("type", go_string(&obj["type"])));
            }
            immutable_data(obj, old, &["data"], errs);
        }
        "/configmaps" => immutable_data(obj, old, &["data", "binaryData"], errs),
        "/persistentvolumeclaims" => pvc_update(obj, old, errs),
        "apps/deployments" | "apps/replicasets" | "apps/daemonsets" => {
            immutable_selector(obj, old, errs)
        }
        "apps/statefulsets" => statefulset_update(obj, old, errs),
        "batch/jobs" => job_update(obj, old, errs),
        _ => {}
    }
}

/// `ValidateImmutableField`'s error, with the new value already rendered as Go prints it.
fn immutable_field(path: &str, go_value: String) -> FieldError {
    FieldError {
        field: path.into(),
        kind: FieldErrorKind::Invalid,
        value: None,
        detail: format!("{go_value}: field is immutable"),
    }
}

/// A JSON string (or null) as Go's `%q`.
fn go_string(v: &Value) -> String {
    format!("{:?}", v.as_str().unwrap_or_default())
}

/// A JSON list of strings as Go's `%#v` of a `[]string`.
fn go_strings(v: &Value) -> String {
    match v.as_array() {
        None => "[]string(nil)".into(),
        Some(a) => {
            let items: Vec<String> = a.iter().map(go_string).collect();
            format!("[]string{{{}}}", items.join(", "))
        }
    }
}

/// A label selector as Go's `%#v` of a `metav1.LabelSelector` (what kube-apiserver prints for
/// an immutable selector).
fn go_selector(sel: &Value) -> String {
    let labels = match sel["matchLabels"].as_object() {
        Some(m) if !m.is_empty() => go_map(m),
        _ => "map[string]string(nil)".into(),
    };
    let exprs = match sel["matchExpressions"].as_array() {
        Some(a) if !a.is_empty() => {
            let items: Vec<String> = a
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_string(&e["key"]),
                        go_string(&e["operator"]),
                        go_strings(&e["values"])
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        _ => "[]v1.LabelSelectorRequirement(nil)".into(),
    };
    if sel.is_null() {
        return "null".into();
    }
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

fn immutable_selector(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let sel = &obj["spec"]["selector"];
    if old["spec"]["selector"] != *sel {
        errs.push(immutable_field("spec.selector", go_selector(sel)));
    }
}

/// `ValidateConfigMapUpdate` / `ValidateSecretUpdate`: once `immutable: true`, it stays, and
/// so does the data.
fn immutable_data(obj: &Value, old: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
    if old["immutable"] != true {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if obj["immutable"] != true {
        errs.push(FieldError::forbidden("immutable", WHY));
    }
    for f in fields {
        if obj[f] != old[f] {
            errs.push(FieldError::forbidden(*f, WHY));
        }
    }
}

/// `ValidateServiceUpdate`: the cluster IPs of a service that has them do not change.
fn service_update(spec: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if spec["type"] == "ExternalName" || old["type"] == "ExternalName" {
        return;
    }
    let headless = |s: &Value| s["clusterIP"] == "None";
    if headless(spec) && headless(old) {
        return;
    }
    let new_ips = spec["clusterIPs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let old_ips = old["clusterIPs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let shown = go_strings(&spec["clusterIPs"]);
    let at = |i: usize, why: &str| FieldError {
        field: format!("spec.clusterIPs[{i}]"),
        kind: FieldErrorKind::Invalid,
        value: None,
        detail: format!("{shown}: {why}"),
    };
    if new_ips.len() == old_ips.len() {
        for (i, (n, o)) in new_ips.iter().zip(old_ips).enumerate() {
            if n != o {
                errs.push(at(i, "may not change once set"));
            }
        }
    } else if new_ips.is_empty() {
        errs.push(at(0, "primary clusterIP can not be unset"));
    } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
        errs.push(at(0, "may not change once set"));
    }
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec is fixed after creation but for the
/// storage request of a bound claim (which may only grow), a first `volumeName`, and the
/// volume attributes class.
fn pvc_update(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let mut new_spec = obj["spec"].clone();
    let old_spec = &old["spec"];
    if old_spec["volumeName"].as_str().is_none_or(str::is_empty) {
        new_spec["volumeName"] = old_spec["volumeName"].clone();
    }
    new_spec["volumeAttributesClassName"] = old_spec["volumeAttributesClassName"].clone();
    let bound = obj["status"]["phase"] == "Bound";
    if bound && new_spec["resources"]["requests"].is_object() {
        new_spec["resources"]["requests"]["storage"] =
            old_spec["resources"]["requests"]["storage"].clone();
    }
    if strip_nulls(&new_spec) != strip_nulls(old_spec) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let size = |v: &Value| {
        kube_apimachinery::quantity::parse_value(&v["spec"]["resources"]["requests"]["storage"])
    };
    if let (Some(n), Some(o)) = (size(obj), size(old))
        && n < o
    {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
}

/// `ValidateStatefulSetUpdate`: only some spec fields may change.
fn statefulset_update(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    const MUTABLE: &[&str] = &[
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
    ];
    let mut new_spec = obj["spec"].clone();
    for f in MUTABLE {
        new_spec[*f] = old["spec"][*f].clone();
    }
    if strip_nulls(&new_spec) != strip_nulls(&old["spec"]) {
        errs.push(FieldError::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
}

/// `ValidateJobSpecUpdate`: completions (but in tandem with parallelism for Indexed Jobs),
/// selector, template (but scheduling directives, labels and annotations of a suspended Job
/// that never started) and completion mode are immutable.
fn job_update(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let (spec, old_spec) = (&obj["spec"], &old["spec"]);
    if spec["completions"] != old_spec["completions"] {
        let indexed = spec["completionMode"] == "Indexed";
        let c = &spec["completions"];
        if !indexed {
            errs.push(immutable_field("spec.completions", go_number(c)));
        } else if !c.is_null() && *c != spec["parallelism"] {
            errs.push(FieldError::invalid(
                "spec.completions",
                c.clone(),
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    if spec["selector"] != old_spec["selector"] {
        errs.push(immutable_field(
            "spec.selector",
            go_selector(&spec["selector"]),
        ));
    }
    let mut old_template = old_spec["template"].clone();
    let never_started = old_spec["suspend"] == true && old["status"]["startTime"].is_null();
    if never_started {
        let t = &spec["template"];
        for f in ["labels", "annotations"] {
            old_template["metadata"][f] = t["metadata"][f].clone();
        }
        for f in ["nodeSelector", "tolerations", "schedulingGates"] {
            old_template["spec"][f] = t["spec"][f].clone();
        }
        old_template["spec"]["affinity"]["nodeAffinity"] =
            t["spec"]["affinity"]["nodeAffinity"].clone();
    }
    if strip_nulls(&spec["template"]) != strip_nulls(&old_template)
        && !(never_started && same_but_empty_affinity(&spec["template"], &old_template))
    {
        errs.push(immutable_field(
            "spec.template",
            "core.PodTemplateSpec{...}".into(),
        ));
    }
    if spec["completionMode"] != old_spec["completionMode"] {
        errs.push(immutable_field(
            "spec.completionMode",
            go_string(&spec["completionMode"]),
        ));
    }
}

/// The munged old template may carry `affinity: {}` where the new one has none.
fn same_but_empty_affinity(new: &Value, old: &Value) -> bool {
    let clean = |v: &Value| {
        let mut v = strip_nulls(v);
        if v["spec"]["affinity"]
            .as_object()
            .is_some_and(|m| m.is_empty())
            && let Some(s) = v["spec"].as_object_mut()
        {
            s.remove("affinity");
        }
        v
    };
    clean(new) == clean(old)
}

/// A JSON number (or null) as Go prints a dereferenced `*int32`.
fn go_number(v: &Value) -> String {
    if v.is_null() {
        "null".into()
    } else {
        v.to_string()
    }
}

/// `ValidatePodUpdate`: only images, a shorter `activeDeadlineSeconds`, added tolerations and a
/// negative `terminationGracePeriodSeconds` set to 1 may change.
fn pod_update(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let (spec, old_spec) = (&obj["spec"], &old["spec"]);
    for list in ["containers", "initContainers"] {
        let n = spec[list].as_array().map_or(0, Vec::len);
        let o = old_spec[list].as_array().map_or(0, Vec::len);
        if n != o {
            errs.push(FieldError::forbidden(
                format!("spec.{list}"),
                "pod updates may not add or remove containers",
            ));
            return;
        }
    }
    match (
        spec["activeDeadlineSeconds"].as_i64(),
        old_spec["activeDeadlineSeconds"].as_i64(),
    ) {
        (Some(n), Some(o)) if n > o => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            n,
            "must be less than or equal to previous value",
        )),
        (None, Some(_)) => errs.push(FieldError {
            field: "spec.activeDeadlineSeconds".into(),
            kind: FieldErrorKind::Invalid,
            value: None,
            detail: "null: must not update from a positive integer to nil value".into(),
        }),
        _ => {}
    }
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_tols: Vec<Value> = spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(without_seconds)
        .collect();
    for (i, t) in old_spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if !new_tols.contains(&without_seconds(t)) {
            errs.push(FieldError::forbidden(
                format!("spec.tolerations[{i}]"),
                "existing toleration can not be modified except its tolerationSeconds",
            ));
        }
    }
    let mut munged = spec.clone();
    for list in ["containers", "initContainers"] {
        if let Some(cs) = munged[list].as_array_mut() {
            for (c, o) in cs
                .iter_mut()
                .zip(old_spec[list].as_array().into_iter().flatten())
            {
                c["image"] = o["image"].clone();
            }
        }
    }
    for f in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        munged[f] = old_spec[f].clone();
    }
    if old_spec["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
        && munged["terminationGracePeriodSeconds"] == 1
    {
        munged["terminationGracePeriodSeconds"] = old_spec["terminationGracePeriodSeconds"].clone();
    }
    if strip_nulls(&munged) != strip_nulls(old_spec) {
        errs.push(FieldError::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
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

/// Go's `%#v` of a `map[string]string` (keys sorted, as `fmt` prints maps).
fn go_map(m: &serde_json::Map<String, Value>) -> String {
    let mut parts: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{:?}:{:?}", k, v.as_str().unwrap_or_default()))
        .collect();
    parts.sort();
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

/// Workloads: a selector that selects the template's labels, a valid template.
fn workload(obj: &Value, restart: &[&str], errs: &mut Vec<FieldError>) {
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
        assert_eq!(
            msgs("apps/deployments", moved.clone(), Some(&ok)),
            [
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"b\", \"c\":\"d\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
            ]
        );
        for gr in ["apps/replicasets", "apps/daemonsets"] {
            assert_eq!(msgs(gr, moved.clone(), Some(&ok)).len(), 1, "{gr}");
        }
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

    fn job(template_image: &str, completions: i64) -> Value {
        json!({"spec": {"completions": completions, "parallelism": 1, "completionMode": "NonIndexed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": template_image}]}}}})
    }

    #[test]
    fn job_template_completions_selector_and_mode_are_immutable() {
        let old = job("a", 1);
        assert!(msgs("batch/jobs", old.clone(), Some(&old)).is_empty());
        assert_eq!(
            msgs("batch/jobs", job("b", 1), Some(&old)),
            ["spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"]
        );
        assert_eq!(
            msgs("batch/jobs", job("a", 3), Some(&old)),
            ["spec.completions: Invalid value: 3: field is immutable"]
        );
        let mut sel = old.clone();
        sel["spec"]["selector"]["matchLabels"]["x"] = json!("y");
        sel["spec"]["template"]["metadata"]["labels"]["x"] = json!("y");
        let m = msgs("batch/jobs", sel, Some(&old));
        assert!(m[0].starts_with("spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"batch.kubernetes.io/controller-uid\":\"u\", \"x\":\"y\"}"), "{m:?}");
        let mut mode = old.clone();
        mode["spec"]["completionMode"] = json!("Indexed");
        assert_eq!(
            msgs("batch/jobs", mode, Some(&old)),
            ["spec.completionMode: Invalid value: \"Indexed\": field is immutable"]
        );
        // Indexed Jobs may change completions together with parallelism.
        let mut idx = old.clone();
        idx["spec"]["completionMode"] = json!("Indexed");
        let mut scaled = idx.clone();
        scaled["spec"]["completions"] = json!(4);
        scaled["spec"]["parallelism"] = json!(4);
        assert!(msgs("batch/jobs", scaled.clone(), Some(&idx)).is_empty());
        scaled["spec"]["parallelism"] = json!(2);
        assert_eq!(
            msgs("batch/jobs", scaled, Some(&idx)),
            [
                "spec.completions: Invalid value: 4: can only be modified in tandem with spec.parallelism"
            ]
        );
        // A suspended Job that never started may change its template's labels and scheduling.
        let mut suspended = old.clone();
        suspended["spec"]["suspend"] = json!(true);
        let mut moved = suspended.clone();
        moved["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        moved["spec"]["template"]["metadata"]["annotations"] = json!({"k": "v"});
        assert!(msgs("batch/jobs", moved.clone(), Some(&suspended)).is_empty());
        suspended["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(msgs("batch/jobs", moved, Some(&suspended)).len(), 1);
    }

    #[test]
    fn service_cluster_ips_may_not_change_once_set() {
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.5",
            "clusterIPs": ["10.96.0.5"], "ports": [{"port": 80}]}});
        assert!(msgs("/services", old.clone(), Some(&old)).is_empty());
        let mut moved = old.clone();
        moved["spec"]["clusterIP"] = json!("10.96.0.6");
        moved["spec"]["clusterIPs"] = json!(["10.96.0.6"]);
        assert_eq!(
            msgs("/services", moved, Some(&old)),
            ["spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.6\"}: may not change once set"]
        );
        let mut unset = old.clone();
        unset["spec"]["clusterIPs"] = json!(null);
        assert_eq!(
            msgs("/services", unset, Some(&old)),
            [
                "spec.clusterIPs[0]: Invalid value: []string(nil): primary clusterIP can not be unset"
            ]
        );
        // To and from ExternalName, the IPs go and come.
        let ext = json!({"spec": {"type": "ExternalName", "externalName": "x.example.com"}});
        assert!(msgs("/services", ext, Some(&old)).is_empty());
    }

    #[test]
    fn secret_type_and_immutable_data() {
        let old = json!({"type": "Opaque", "data": {"a": "eA=="}, "immutable": true});
        assert!(msgs("/secrets", old.clone(), Some(&old)).is_empty());
        let new = json!({"type": "kubernetes.io/basic-auth", "data": {"a": "eQ=="}});
        assert_eq!(
            msgs("/secrets", new, Some(&old)),
            [
                "type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable",
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set"
            ]
        );
        // Without `immutable`, data changes freely.
        let mutable = json!({"type": "Opaque", "data": {"a": "eA=="}});
        let changed = json!({"type": "Opaque", "data": {"a": "eQ=="}});
        assert!(msgs("/secrets", changed, Some(&mutable)).is_empty());
    }

    #[test]
    fn immutable_config_maps_keep_their_data() {
        let old = json!({"data": {"a": "1"}, "immutable": true});
        let new = json!({"data": {"a": "2"}, "binaryData": {"b": "eA=="}, "immutable": true});
        assert_eq!(
            msgs("/configmaps", new, Some(&old)),
            [
                "data: Forbidden: field is immutable when `immutable` is set",
                "binaryData: Forbidden: field is immutable when `immutable` is set"
            ]
        );
        let mut meta_only = old.clone();
        meta_only["metadata"] = json!({"labels": {"a": "b"}});
        assert!(msgs("/configmaps", meta_only, Some(&old)).is_empty());
    }

    #[test]
    fn claims_change_only_their_storage_request_when_bound() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}});
        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(msgs("/persistentvolumeclaims", grown.clone(), Some(&old)).is_empty());
        let mut pending = grown.clone();
        pending["status"]["phase"] = json!("Pending");
        assert_eq!(
            msgs("/persistentvolumeclaims", pending, Some(&old)),
            [
                "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
            ]
        );
        let mut shrunk = old.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = json!("512Mi");
        assert_eq!(
            msgs("/persistentvolumeclaims", shrunk, Some(&old)),
            [
                "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
            ]
        );
        let mut modes = old.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(msgs("/persistentvolumeclaims", modes, Some(&old)).len(), 1);
        let mut named = old.clone();
        named["spec"]["volumeName"] = json!("pv-1");
        assert!(msgs("/persistentvolumeclaims", named, Some(&old)).is_empty());
    }

    #[test]
    fn statefulsets_change_only_the_allowed_spec_fields() {
        let old = json!({"spec": {"serviceName": "s", "replicas": 1,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}});
        let mut ok = old.clone();
        ok["spec"]["replicas"] = json!(3);
        ok["spec"]["template"]["spec"]["containers"][0]["image"] = json!("y");
        ok["spec"]["minReadySeconds"] = json!(5);
        assert!(msgs("apps/statefulsets", ok, Some(&old)).is_empty());
        let mut bad = old.clone();
        bad["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
            json!("2Gi");
        assert_eq!(
            msgs("apps/statefulsets", bad, Some(&old)),
            [
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            ]
        );
    }

    fn pod(image: &str) -> Value {
        json!({"spec": {"containers": [{"name": "c", "image": image, "ports": [{"containerPort": 80}]}],
            "activeDeadlineSeconds": 100, "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]}})
    }

    #[test]
    fn pods_change_only_images_deadlines_and_added_tolerations() {
        let old = pod("a");
        let mut ok = pod("b");
        ok["spec"]["activeDeadlineSeconds"] = json!(50);
        ok["spec"]["tolerations"][0]["tolerationSeconds"] = json!(30);
        ok["spec"]["tolerations"]
            .as_array_mut()
            .expect("list")
            .push(json!({"key": "other", "operator": "Exists"}));
        assert!(msgs("/pods", ok, Some(&old)).is_empty());
        const FORBIDDEN: &str = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";
        let mut port = old.clone();
        port["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(81);
        assert_eq!(msgs("/pods", port, Some(&old)), [FORBIDDEN]);
        let mut grace = old.clone();
        grace["spec"]["terminationGracePeriodSeconds"] = json!(10);
        assert_eq!(msgs("/pods", grace, Some(&old)), [FORBIDDEN]);
        let mut longer = old.clone();
        longer["spec"]["activeDeadlineSeconds"] = json!(200);
        assert_eq!(
            msgs("/pods", longer, Some(&old)),
            [
                "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
            ]
        );
        let mut dropped = old.clone();
        dropped["spec"]["tolerations"] = json!([]);
        assert_eq!(
            msgs("/pods", dropped, Some(&old)),
            [
                "spec.tolerations[0]: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            ]
        );
        let mut more = old.clone();
        more["spec"]["containers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "d", "image": "x"}));
        assert_eq!(
            msgs("/pods", more, Some(&old)),
            ["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
        let mut negative = old.clone();
        negative["spec"]["terminationGracePeriodSeconds"] = json!(-1);
        let mut one = negative.clone();
        one["spec"]["terminationGracePeriodSeconds"] = json!(1);
        assert!(msgs("/pods", one, Some(&negative)).is_empty());
    }
}
