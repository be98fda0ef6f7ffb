//! The desired object as the API server will store it, so the three-way merge compares like
//! with like and does not rewrite what the server normalizes on every sync.
//!
//! kube-apiserver never stores some things exactly as sent (see `../shared/fidelity/`):
//! - a core/v1 Secret's `stringData` is folded into base64 `data` (a `stringData` key wins over
//!   the same `data` key) and never returned;
//! - resource quantities are stored canonically (`0.5` -> `500m`, `1024Mi` -> `1Gi`);
//! - empty maps and lists (`labels: {}`, `env: []`, `data: {}`) are not stored, and `null`
//!   means absent.
//!
//! [`server_view`] rewrites a desired (or last-applied) object before the merge: `null` members
//! dropped (a key the hook stops wanting is still removed through the last-applied state) and
//! `stringData` folded. Empty maps and lists are handled by the merge itself
//! (`engine::apply`): one the observed object does not have is not added to it, since the server
//! dropped it; a new object or list item is sent with them (an `emptyDir: {}` or a CRD's
//! `subresources: {status: {}}` is meaningful there). Quantities are not rewritten here either:
//! [`is_quantity`] tells the merge which fields to compare as quantities, so the observed
//! spelling is kept when the value is the same (a server that stores `0.5` as sent and one that
//! stores `500m` both converge). Int-or-string fields (`targetPort`, CRD
//! `x-kubernetes-int-or-string`) are never quantities and never rewritten.
//!
//! The last-applied annotation keeps what the hook wrote; only the comparison uses this view.

use base64::Engine as _;
use serde_json::{Map, Value};

/// The API group of an `apiVersion` (`""` for `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// `obj` as the server would store it, for comparison (see the module docs). `observed` is the
/// live object, when there is one: a server that is seen to keep `stringData` (an API server
/// that stores what it is sent) gets no folding.
pub fn server_view(obj: &Value, observed: Option<&Value>) -> Value {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let mut out = obj.clone();
    drop_nulls(&mut out);
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let server_folds = observed.is_none_or(|o| o.get("stringData").is_none());
    if api_version == "v1" && kind == "Secret" && server_folds {
        fold_string_data(&mut out);
    }
    out
}

/// True for `{}` and `[]`.
pub fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Drops `null` members everywhere (list elements are kept: they are positions).
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for child in m.values_mut() {
                drop_nulls(child);
            }
            m.retain(|_, child| !child.is_null());
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Secret `stringData` merged into `data` as base64 (stringData wins), then removed.
fn fold_string_data(secret: &mut Value) {
    let Some(obj) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = obj.shift_remove("stringData") else {
        return;
    };
    let data = obj
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (k, v) in strings {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(k, Value::String(encoded));
        }
    }
}

/// One step of a path inside an object: a key, or any item of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    /// An object member.
    Key(&'a str),
    /// An element of a list.
    Item,
}

/// Where a PodSpec sits in objects of each workload kind (group, kind, path to the PodSpec).
const POD_SPECS: &[(&str, &str, &[&str])] = &[
    ("", "Pod", &["spec"]),
    ("", "PodTemplate", &["template", "spec"]),
    ("", "ReplicationController", &["spec", "template", "spec"]),
    ("apps", "Deployment", &["spec", "template", "spec"]),
    ("apps", "ReplicaSet", &["spec", "template", "spec"]),
    ("apps", "StatefulSet", &["spec", "template", "spec"]),
    ("apps", "DaemonSet", &["spec", "template", "spec"]),
    ("batch", "Job", &["spec", "template", "spec"]),
    (
        "batch",
        "CronJob",
        &["spec", "jobTemplate", "spec", "template", "spec"],
    ),
];

/// True when the field at `path` of a `kind` object of `api_version` holds a resource quantity
/// (`resource.Quantity` in the Go types): containers' (init, ephemeral) and pod-level resources,
/// pod overhead and emptyDir size limits in pods and every pod template, ephemeral volume
/// claims, PVC and StatefulSet claim template requests/limits, ResourceQuota `hard`, LimitRange
/// limits and PersistentVolume capacity.
pub fn is_quantity(api_version: &str, kind: &str, path: &[Seg<'_>]) -> bool {
    let group = group_of(api_version);
    for (g, k, prefix) in POD_SPECS {
        if *g == group
            && *k == kind
            && let Some(rest) = strip(path, prefix)
        {
            return pod_spec_quantity(rest);
        }
    }
    match (group, kind) {
        ("", "PersistentVolumeClaim") => strip(path, &["spec"]).is_some_and(resources_quantity),
        ("apps", "StatefulSet") => strip(path, &["spec", "volumeClaimTemplates"])
            .and_then(|r| r.split_first())
            .is_some_and(|(item, r)| {
                *item == Seg::Item && strip(r, &["spec"]).is_some_and(resources_quantity)
            }),
        ("", "ResourceQuota") => {
            matches!(path, [Seg::Key("spec"), Seg::Key("hard"), Seg::Key(_)])
        }
        ("", "LimitRange") => matches!(
            path,
            [
                Seg::Key("spec"),
                Seg::Key("limits"),
                Seg::Item,
                Seg::Key("max" | "min" | "default" | "defaultRequest" | "maxLimitRequestRatio"),
                Seg::Key(_)
            ]
        ),
        ("", "PersistentVolume") => {
            matches!(path, [Seg::Key("spec"), Seg::Key("capacity"), Seg::Key(_)])
        }
        _ => false,
    }
}

fn strip<'p, 'a>(path: &'p [Seg<'a>], prefix: &[&str]) -> Option<&'p [Seg<'a>]> {
    if path.len() < prefix.len() {
        return None;
    }
    let (head, rest) = path.split_at(prefix.len());
    head.iter()
        .zip(prefix)
        .all(|(s, p)| *s == Seg::Key(p))
        .then_some(rest)
}

/// `resources.{limits,requests}.<name>` (ResourceRequirements, VolumeResourceRequirements).
fn resources_quantity(rest: &[Seg<'_>]) -> bool {
    matches!(
        rest,
        [
            Seg::Key("resources"),
            Seg::Key("limits" | "requests"),
            Seg::Key(_)
        ]
    )
}

/// Quantity fields inside a PodSpec.
fn pod_spec_quantity(rest: &[Seg<'_>]) -> bool {
    match rest {
        [
            Seg::Key("containers" | "initContainers" | "ephemeralContainers"),
            Seg::Item,
            r @ ..,
        ] => resources_quantity(r),
        [Seg::Key("overhead"), Seg::Key(_)] => true,
        [
            Seg::Key("volumes"),
            Seg::Item,
            Seg::Key("emptyDir"),
            Seg::Key("sizeLimit"),
        ] => true,
        [
            Seg::Key("volumes"),
            Seg::Item,
            Seg::Key("ephemeral"),
            Seg::Key("volumeClaimTemplate"),
            Seg::Key("spec"),
            r @ ..,
        ] => resources_quantity(r),
        r => resources_quantity(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(body: Value) -> Value {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        for (k, v) in body.as_object().expect("object") {
            s[k] = v.clone();
        }
        s
    }

    #[test]
    fn string_data_is_folded_into_data() {
        let v = server_view(&secret(json!({"stringData": {"a": "hello"}})), None);
        assert_eq!(v["data"], json!({"a": "aGVsbG8="}));
        assert!(v.get("stringData").is_none());
    }

    #[test]
    fn string_data_wins_over_data_and_other_keys_stay() {
        let v = server_view(
            &secret(json!({"data": {"a": "b2xk", "b": "Yg=="}, "stringData": {"a": "new"}})),
            None,
        );
        // The fidelity capture of kube-apiserver: a = base64("new"), b untouched.
        assert_eq!(v["data"], json!({"a": "bmV3", "b": "Yg=="}));
        assert!(v.get("stringData").is_none());
    }

    #[test]
    fn string_data_is_kept_for_a_server_that_keeps_it() {
        let desired = secret(json!({"stringData": {"a": "hello"}}));
        let observed = secret(json!({"stringData": {"a": "hello"}}));
        assert_eq!(server_view(&desired, Some(&observed)), desired);
        // An observed Secret without stringData: the server folds.
        let observed = secret(json!({"data": {"a": "aGVsbG8="}}));
        let v = server_view(&desired, Some(&observed));
        assert_eq!(v["data"], json!({"a": "aGVsbG8="}));
    }

    #[test]
    fn other_kinds_keep_string_data() {
        let cr =
            json!({"apiVersion": "example.com/v1", "kind": "Secret", "stringData": {"a": "x"}});
        assert_eq!(server_view(&cr, None), cr);
    }

    #[test]
    fn nulls_are_absent_and_empties_stay_for_the_merge_to_judge() {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {}},
            "data": {"a": null}, "binaryData": null, "list": [null, {"x": null}],
        });
        assert_eq!(
            server_view(&cm, None),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {}},
                   "data": {}, "list": [null, {}]})
        );
    }

    fn keys(p: &[&'static str]) -> Vec<Seg<'static>> {
        p.iter()
            .map(|s| if *s == "[]" { Seg::Item } else { Seg::Key(s) })
            .collect()
    }

    #[test]
    fn quantity_fields_in_every_workload_kind() {
        let container = ["containers", "[]", "resources", "limits", "cpu"];
        for (api, kind, prefix) in [
            ("v1", "Pod", vec!["spec"]),
            ("v1", "PodTemplate", vec!["template", "spec"]),
            (
                "v1",
                "ReplicationController",
                vec!["spec", "template", "spec"],
            ),
            ("apps/v1", "Deployment", vec!["spec", "template", "spec"]),
            ("apps/v1", "ReplicaSet", vec!["spec", "template", "spec"]),
            ("apps/v1", "StatefulSet", vec!["spec", "template", "spec"]),
            ("apps/v1", "DaemonSet", vec!["spec", "template", "spec"]),
            ("batch/v1", "Job", vec!["spec", "template", "spec"]),
            (
                "batch/v1",
                "CronJob",
                vec!["spec", "jobTemplate", "spec", "template", "spec"],
            ),
        ] {
            for tail in [
                &container[..],
                &["initContainers", "[]", "resources", "requests", "memory"],
                &["ephemeralContainers", "[]", "resources", "limits", "cpu"],
                &["overhead", "cpu"],
                &["resources", "limits", "memory"],
                &["volumes", "[]", "emptyDir", "sizeLimit"],
                &[
                    "volumes",
                    "[]",
                    "ephemeral",
                    "volumeClaimTemplate",
                    "spec",
                    "resources",
                    "requests",
                    "storage",
                ],
            ] {
                let mut p = prefix.clone();
                p.extend_from_slice(tail);
                assert!(is_quantity(api, kind, &keys(&p)), "{kind} {p:?}");
            }
            // Not quantities: other container fields, ports, names.
            for tail in [
                &["containers", "[]", "ports", "[]", "containerPort"][..],
                &["containers", "[]", "ports", "[]", "targetPort"],
                &["containers", "[]", "name"],
                &["containers", "[]", "resources", "claims", "[]", "name"],
                &["containers", "[]", "resources", "limits"],
            ] {
                let mut p = prefix.clone();
                p.extend_from_slice(tail);
                assert!(!is_quantity(api, kind, &keys(&p)), "{kind} {p:?}");
            }
        }
        // Another group with the same kind name is not a workload.
        assert!(!is_quantity(
            "example.com/v1",
            "Deployment",
            &keys(&[
                "spec",
                "template",
                "spec",
                "containers",
                "[]",
                "resources",
                "limits",
                "cpu"
            ])
        ));
    }

    #[test]
    fn quantity_fields_of_claims_quotas_and_limits() {
        assert!(is_quantity(
            "v1",
            "PersistentVolumeClaim",
            &keys(&["spec", "resources", "requests", "storage"])
        ));
        assert!(is_quantity(
            "apps/v1",
            "StatefulSet",
            &keys(&[
                "spec",
                "volumeClaimTemplates",
                "[]",
                "spec",
                "resources",
                "requests",
                "storage"
            ])
        ));
        assert!(is_quantity(
            "v1",
            "ResourceQuota",
            &keys(&["spec", "hard", "pods"])
        ));
        assert!(is_quantity(
            "v1",
            "LimitRange",
            &keys(&["spec", "limits", "[]", "defaultRequest", "cpu"])
        ));
        assert!(!is_quantity(
            "v1",
            "LimitRange",
            &keys(&["spec", "limits", "[]", "type"])
        ));
        assert!(is_quantity(
            "v1",
            "PersistentVolume",
            &keys(&["spec", "capacity", "storage"])
        ));
        assert!(!is_quantity(
            "v1",
            "Service",
            &keys(&["spec", "ports", "[]", "targetPort"])
        ));
        assert!(!is_quantity("v1", "ConfigMap", &keys(&["data", "cpu"])));
    }
}
