//! The hook wire format: building requests and decoding responses.
//!
//! Owns the JSON shapes of the spec's "Hooks" section: the observed-object maps keyed
//! `<Kind>.<apiVersion>` and then by name (v1) or namespace/name (v2), and the decoding of
//! sync/finalize/customize responses with v1 (lenient: unknown fields ignored) or v2 (strict:
//! unknown fields rejected) semantics. Pure functions; no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::k8s::object;

/// Which hook version's keying and decoding rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Version {
    /// Metacontroller's original format (default).
    #[default]
    V1,
    /// Namespace-qualified keys and strict response decoding.
    V2,
}

/// A response that could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the {hook} hook's response is invalid: {message}")]
pub struct DecodeError {
    /// The hook (`sync`, `finalize`, `customize`, ...).
    pub hook: String,
    /// What is wrong, with the field path.
    pub message: String,
}

/// The inner key of an observed object in a children/related map.
///
/// v1: `name`, or `namespace/name` when the parent is cluster-scoped and the object namespaced.
/// v2: `namespace/name` for every namespaced object, `name` for cluster-scoped ones.
pub fn object_key(version: Version, parent_namespaced: bool, obj: &Value) -> String {
    let name = object::name(obj).unwrap_or_default();
    match (object::namespace(obj), version) {
        (Some(ns), Version::V2) => format!("{ns}/{name}"),
        (Some(ns), Version::V1) if !parent_namespaced => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// [`object_map`] of the objects observed per type key, one entry per declared type (in
/// `declared` order, empty when nothing of that type was observed).
pub fn declared_object_map<'t>(
    version: Version,
    parent_namespaced: bool,
    declared: impl IntoIterator<Item = &'t str>,
    observed: &BTreeMap<String, Vec<Arc<Value>>>,
) -> Value {
    let groups: Vec<(String, Vec<Arc<Value>>)> = declared
        .into_iter()
        .map(|t| (t.to_string(), observed.get(t).cloned().unwrap_or_default()))
        .collect();
    object_map(version, parent_namespaced, &groups)
}

/// Build an observed-object map: one entry per declared type (`Kind.apiVersion`), always
/// present, each mapping object keys to objects. Groups of the same type (several customize
/// rules on one resource) merge into one entry.
pub fn object_map(
    version: Version,
    parent_namespaced: bool,
    groups: &[(String, Vec<Arc<Value>>)],
) -> Value {
    let mut out = Map::new();
    for (type_key, objects) in groups {
        let entry = out
            .entry(type_key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(inner) = entry {
            for obj in objects {
                inner.insert(
                    object_key(version, parent_namespaced, obj),
                    Value::clone(obj),
                );
            }
        }
    }
    Value::Object(out)
}

/// A decoded sync or finalize response (CompositeController).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncResponse {
    /// `status`; `None` when absent or null.
    #[serde(default, deserialize_with = "nullable")]
    pub status: Option<Value>,
    /// `children`: desired objects (absent or null means none).
    #[serde(default, deserialize_with = "nullable")]
    pub children: Vec<Value>,
    /// `resyncAfterSeconds`, when > 0.
    #[serde(default, deserialize_with = "nullable")]
    pub resync_after_seconds: Option<f64>,
    /// `finalized` (finalize hook only).
    #[serde(default, deserialize_with = "nullable")]
    pub finalized: bool,
}

fn decode<T: serde::de::DeserializeOwned>(hook: &str, body: &Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        DecodeError {
            hook: hook.to_string(),
            message: if path == "." {
                inner.to_string()
            } else {
                format!("{path}: {inner}")
            },
        }
    })
}

/// Absent and `null` both mean the default (none, empty, false), as hooks write either.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Check the common parts of a decoded response: each desired object in `objects` (named
/// `field` in errors), `status` an object, and `resyncAfterSeconds` non-negative (0 = none).
fn check_response(
    hook: &str,
    field: &str,
    objects: &[Value],
    status: Option<&Value>,
    resync: &mut Option<f64>,
) -> Result<(), DecodeError> {
    for (i, o) in objects.iter().enumerate() {
        check_object(hook, &format!("{field}[{i}]"), o)?;
    }
    if status.is_some_and(|s| !s.is_object()) {
        return Err(DecodeError {
            hook: hook.to_string(),
            message: "status: must be an object or null".into(),
        });
    }
    *resync = positive(hook, *resync)?;
    Ok(())
}

/// v2 decoding is strict: reject a key of `body` (when it is an object) that is not one of
/// `allowed` (serde's message, so v2 errors read the same everywhere).
fn strict_fields(hook: &str, at: &str, body: &Value, allowed: &[&str]) -> Result<(), DecodeError> {
    let Some(m) = body.as_object() else {
        return Ok(());
    };
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(DecodeError {
            hook: hook.to_string(),
            message: format!(
                "{at}unknown field `{k}`, expected one of {}",
                allowed
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// Decode a sync/finalize response.
pub fn decode_sync(
    hook: &str,
    version: Version,
    body: &Value,
) -> Result<SyncResponse, DecodeError> {
    if version == Version::V2 {
        strict_fields(
            hook,
            "",
            body,
            &["status", "children", "resyncAfterSeconds", "finalized"],
        )?;
    }
    let mut r: SyncResponse = decode(hook, body)?;
    check_response(
        hook,
        "children",
        &r.children,
        r.status.as_ref(),
        &mut r.resync_after_seconds,
    )?;
    Ok(r)
}

fn positive(hook: &str, v: Option<f64>) -> Result<Option<f64>, DecodeError> {
    match v {
        Some(s) if !s.is_finite() || s < 0.0 => Err(DecodeError {
            hook: hook.to_string(),
            message: format!("resyncAfterSeconds: must be a non-negative number, got {s}"),
        }),
        Some(s) if s > 0.0 => Ok(Some(s)),
        _ => Ok(None),
    }
}

/// Check that a desired object has apiVersion, kind and metadata.name.
pub fn check_object(hook: &str, at: &str, obj: &Value) -> Result<(), DecodeError> {
    let err = |m: &str| DecodeError {
        hook: hook.to_string(),
        message: format!("{at}: {m}"),
    };
    if !obj.is_object() {
        return Err(err("must be an object"));
    }
    if object::api_version(obj).is_none_or(str::is_empty) {
        return Err(err("apiVersion is required"));
    }
    if object::kind(obj).is_none_or(str::is_empty) {
        return Err(err("kind is required"));
    }
    if object::name(obj).is_none_or(str::is_empty) {
        return Err(err(
            "metadata.name is required (generateName is not supported: children need stable names)",
        ));
    }
    Ok(())
}

/// One `relatedResources` rule from a customize response.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedRule {
    /// `apiVersion` of the related resource.
    pub api_version: String,
    /// Plural resource name.
    pub resource: String,
    /// Optional label selector (metav1.LabelSelector).
    #[serde(default)]
    pub label_selector: Option<Value>,
    /// Optional namespace selector (metav1.LabelSelector over namespaces' labels).
    #[serde(default)]
    pub namespace_selector: Option<Value>,
    /// Optional namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Optional object names.
    #[serde(default)]
    pub names: Option<Vec<String>>,
}

/// Decode a customize response and check each rule's combination of fields.
pub fn decode_customize(version: Version, body: &Value) -> Result<Vec<RelatedRule>, DecodeError> {
    if version == Version::V2 {
        strict_fields("customize", "", body, &["relatedResources"])?;
        for (i, r) in body
            .get("relatedResources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            strict_fields(
                "customize",
                &format!("relatedResources[{i}]: "),
                r,
                &[
                    "apiVersion",
                    "resource",
                    "labelSelector",
                    "namespaceSelector",
                    "namespace",
                    "names",
                ],
            )?;
        }
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Customize {
        #[serde(default, deserialize_with = "nullable")]
        related_resources: Vec<RelatedRule>,
    }
    let rules = decode::<Customize>("customize", body)?.related_resources;
    for (i, r) in rules.iter().enumerate() {
        let err = |m: &str| DecodeError {
            hook: "customize".into(),
            message: format!("relatedResources[{i}]: {m}"),
        };
        if r.api_version.is_empty() || r.resource.is_empty() {
            return Err(err("apiVersion and resource are required"));
        }
        if r.names.as_ref().is_some_and(|n| !n.is_empty())
            && (r.label_selector.is_some() || r.namespace_selector.is_some())
        {
            return Err(err(
                "names cannot be combined with labelSelector or namespaceSelector",
            ));
        }
        if r.namespace.is_some() && r.namespace_selector.is_some() {
            return Err(err("namespace cannot be combined with namespaceSelector"));
        }
    }
    Ok(rules)
}

/// Build the CompositeController sync/finalize request body.
pub fn composite_request(
    controller: &Value,
    parent: &Value,
    children: Value,
    related: Value,
    finalizing: bool,
) -> Value {
    json!({"controller": controller, "parent": parent, "children": children,
        "related": related, "finalizing": finalizing})
}

/// Build the DecoratorController sync/finalize request body:
/// `{controller, object, attachments, related, finalizing}`.
pub fn decorator_request(
    controller: &Value,
    object: &Value,
    attachments: Value,
    related: Value,
    finalizing: bool,
) -> Value {
    json!({"controller": controller, "object": object, "attachments": attachments,
        "related": related, "finalizing": finalizing})
}

/// A decoded DecoratorController sync/finalize response.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecoratorResponse {
    /// `labels` to merge into the target: `Some(value)` sets, `None` removes the key.
    #[serde(default, deserialize_with = "nullable")]
    pub labels: BTreeMap<String, Option<String>>,
    /// `annotations` to merge into the target, as for labels.
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: BTreeMap<String, Option<String>>,
    /// `status`; `None` when absent or null (the target's status is left alone).
    #[serde(default, deserialize_with = "nullable")]
    pub status: Option<Value>,
    /// `attachments`: desired objects (absent or null means none).
    #[serde(default, deserialize_with = "nullable")]
    pub attachments: Vec<Value>,
    /// `resyncAfterSeconds`, when > 0.
    #[serde(default, deserialize_with = "nullable")]
    pub resync_after_seconds: Option<f64>,
    /// `finalized` (finalize hook only).
    #[serde(default, deserialize_with = "nullable")]
    pub finalized: bool,
}

/// Decode a DecoratorController sync/finalize response.
pub fn decode_decorator(
    hook: &str,
    version: Version,
    body: &Value,
) -> Result<DecoratorResponse, DecodeError> {
    if version == Version::V2 {
        strict_fields(
            hook,
            "",
            body,
            &[
                "labels",
                "annotations",
                "status",
                "attachments",
                "resyncAfterSeconds",
                "finalized",
            ],
        )?;
    }
    let mut r: DecoratorResponse = decode(hook, body)?;
    check_response(
        hook,
        "attachments",
        &r.attachments,
        r.status.as_ref(),
        &mut r.resync_after_seconds,
    )?;
    Ok(r)
}

/// Build a MapController map request body: `{controller, parent, mapKey, input, outputs}`.
pub fn map_request(
    controller: &Value,
    parent: &Value,
    map_key: &str,
    input: &Value,
    outputs: Value,
) -> Value {
    json!({"controller": controller, "parent": parent, "mapKey": map_key,
        "input": input, "outputs": outputs})
}

/// Build a MapController tombstone request body: `{controller, parent, mapKey, outputs}`.
pub fn tombstone_request(
    controller: &Value,
    parent: &Value,
    map_key: &str,
    outputs: Value,
) -> Value {
    json!({"controller": controller, "parent": parent, "mapKey": map_key,
        "outputs": outputs})
}

/// A decoded MapController map or tombstone response.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MapResponse {
    /// `outputs`: the desired outputs of the key (map), or the outputs to keep (tombstone);
    /// absent or null means none.
    #[serde(default, deserialize_with = "nullable")]
    pub outputs: Vec<Value>,
    /// `resyncAfterSeconds`, when > 0.
    #[serde(default, deserialize_with = "nullable")]
    pub resync_after_seconds: Option<f64>,
}

/// Decode a MapController map or tombstone response (`hook` names it in errors).
pub fn decode_map(hook: &str, version: Version, body: &Value) -> Result<MapResponse, DecodeError> {
    if version == Version::V2 {
        strict_fields(hook, "", body, &["outputs", "resyncAfterSeconds"])?;
    }
    let mut r: MapResponse = decode(hook, body)?;
    check_response(
        hook,
        "outputs",
        &r.outputs,
        None,
        &mut r.resync_after_seconds,
    )?;
    Ok(r)
}

/// Build a customize request body.
pub fn customize_request(controller: &Value, parent: &Value) -> Value {
    json!({"controller": controller, "parent": parent})
}

/// Group desired objects by `Kind.apiVersion` (in the order the hook listed them).
pub fn group_by_type(objects: &[Value]) -> BTreeMap<String, Vec<&Value>> {
    let mut out: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for o in objects {
        let key = format!(
            "{}.{}",
            object::kind(o).unwrap_or_default(),
            object::api_version(o).unwrap_or_default()
        );
        out.entry(key).or_default().push(o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: Option<&str>, name: &str) -> Arc<Value> {
        let mut meta = json!({"name": name});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        Arc::new(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta}))
    }

    #[test]
    fn keys_follow_version_and_scope() {
        let p = pod(Some("ns"), "a");
        assert_eq!(object_key(Version::V1, true, &p), "a");
        assert_eq!(object_key(Version::V1, false, &p), "ns/a");
        assert_eq!(object_key(Version::V2, true, &p), "ns/a");
        let c = pod(None, "c");
        assert_eq!(object_key(Version::V2, true, &c), "c");
        assert_eq!(object_key(Version::V1, false, &c), "c");
    }

    #[test]
    fn object_map_always_has_every_type() {
        let m = object_map(
            Version::V1,
            true,
            &[
                ("Pod.v1".into(), vec![pod(Some("ns"), "a")]),
                ("Service.v1".into(), vec![]),
            ],
        );
        assert_eq!(m["Pod.v1"]["a"]["metadata"]["name"], "a");
        assert_eq!(m["Service.v1"], json!({}));
    }

    #[test]
    fn object_map_merges_groups_of_one_type() {
        // Two customize rules on the same resource: both rules' objects are related.
        let m = object_map(
            Version::V1,
            true,
            &[
                (
                    "Pod.v1".into(),
                    vec![pod(Some("ns"), "a"), pod(Some("ns"), "b")],
                ),
                (
                    "Pod.v1".into(),
                    vec![pod(Some("ns"), "b"), pod(Some("ns"), "c")],
                ),
                ("Pod.v1".into(), vec![]),
            ],
        );
        let keys: Vec<&String> = m["Pod.v1"].as_object().expect("map").keys().collect();
        assert_eq!(keys, vec!["a", "b", "c"]);
    }

    #[test]
    fn v1_tolerates_unknown_fields_v2_rejects_them() {
        let body = json!({"children": [], "extra": 1});
        assert!(decode_sync("sync", Version::V1, &body).is_ok());
        let e = decode_sync("sync", Version::V2, &body).expect_err("strict");
        assert!(e.message.contains("extra"), "{e}");
        // keys are case-sensitive: `Children` is unknown, not children
        let body = json!({"Children": [{"apiVersion": "v1"}]});
        assert_eq!(
            decode_sync("sync", Version::V1, &body)
                .expect("lenient")
                .children
                .len(),
            0
        );
    }

    #[test]
    fn sync_response_fields() {
        let body = json!({"status": {"a": 1}, "children": null, "resyncAfterSeconds": 1.5, "finalized": true});
        let r = decode_sync("finalize", Version::V2, &body).expect("decodes");
        assert_eq!(r.status, Some(json!({"a": 1})));
        assert!(r.children.is_empty());
        assert_eq!(r.resync_after_seconds, Some(1.5));
        assert!(r.finalized);
        let r = decode_sync("sync", Version::V1, &json!({"status": null})).expect("decodes");
        assert_eq!(r.status, None);
        assert_eq!(r.resync_after_seconds, None);
    }

    #[test]
    fn bad_responses_name_the_field() {
        let e = decode_sync("sync", Version::V1, &json!({"children": [{"kind": "Pod"}]}))
            .expect_err("missing apiVersion");
        assert!(e.message.contains("children[0]: apiVersion"), "{e}");
        let e = decode_sync("sync", Version::V1, &json!({"children": {"a": 1}}))
            .expect_err("children must be a list");
        assert!(e.message.contains("children"), "{e}");
        let e = decode_sync("sync", Version::V1, &json!({"status": [1]})).expect_err("status");
        assert!(e.message.contains("status"), "{e}");
        let e = decode_sync("sync", Version::V1, &json!({"resyncAfterSeconds": -1}))
            .expect_err("negative");
        assert!(e.message.contains("resyncAfterSeconds"), "{e}");
        let e = decode_sync(
            "sync",
            Version::V1,
            &json!({"children": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "x-"}}]}),
        )
        .expect_err("needs a name");
        assert!(e.message.contains("metadata.name"), "{e}");
    }

    #[test]
    fn customize_rules_are_checked() {
        let ok = json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": "a", "names": ["x"]}]});
        assert_eq!(decode_customize(Version::V2, &ok).expect("ok").len(), 1);
        let bad = json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "names": ["x"], "labelSelector": {}}]});
        assert!(decode_customize(Version::V1, &bad).is_err());
        let bad = json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": "a", "namespaceSelector": {}}]});
        assert!(decode_customize(Version::V1, &bad).is_err());
        let unknown = json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "nam": ["x"]}]});
        assert!(decode_customize(Version::V1, &unknown).is_ok());
        assert!(decode_customize(Version::V2, &unknown).is_err());
        assert!(
            decode_customize(Version::V1, &json!({}))
                .expect("empty")
                .is_empty()
        );
    }

    #[test]
    fn grouping_keeps_hook_order() {
        let objs = vec![
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}}),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}),
        ];
        let g = group_by_type(&objs);
        let pods: Vec<_> = g["Pod.v1"].iter().filter_map(|o| object::name(o)).collect();
        assert_eq!(pods, vec!["b", "a"]);
        assert_eq!(g["StatefulSet.apps/v1"].len(), 1);
    }

    #[test]
    fn decorator_response_null_labels_remove_and_v2_is_strict() {
        let body = serde_json::json!({"labels": {"a": "1", "b": null}, "status": null,
            "attachments": null, "extra": 1});
        let r = decode_decorator("sync", Version::V1, &body).expect("v1 tolerates extra");
        assert_eq!(r.labels.get("a"), Some(&Some("1".to_string())));
        assert_eq!(r.labels.get("b"), Some(&None));
        assert_eq!(r.status, None);
        assert!(r.attachments.is_empty());
        let err = decode_decorator("sync", Version::V2, &body).expect_err("v2 is strict");
        assert!(err.message.contains("extra"), "{err}");
        let bad = serde_json::json!({"attachments": [{"kind": "ConfigMap"}]});
        assert!(decode_decorator("sync", Version::V1, &bad).is_err());
    }

    #[test]
    fn map_response_decoding() {
        let ok = decode_map(
            "map",
            Version::V2,
            &json!({"outputs": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}], "resyncAfterSeconds": 2.5}),
        )
        .unwrap();
        assert_eq!(ok.outputs.len(), 1);
        assert_eq!(ok.resync_after_seconds, Some(2.5));
        assert_eq!(
            decode_map("map", Version::V1, &json!({})).unwrap(),
            MapResponse::default()
        );
        assert_eq!(
            decode_map("map", Version::V1, &json!({"outputs": null, "extra": 1}))
                .unwrap()
                .outputs
                .len(),
            0
        );
        let e =
            decode_map("map", Version::V2, &json!({"outputs": [], "children": []})).unwrap_err();
        assert!(e.message.contains("children"), "{e}");
        let e = decode_map(
            "tombstone",
            Version::V1,
            &json!({"outputs": [{"kind": "ConfigMap"}]}),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("tombstone") && e.message.contains("outputs[0]"),
            "{e}"
        );
        let e = decode_map("map", Version::V1, &json!({"outputs": {}})).unwrap_err();
        assert!(e.message.contains("outputs"), "{e}");
    }

    #[test]
    fn map_and_tombstone_requests_have_the_documented_fields() {
        let r = map_request(
            &json!({"kind": "MapController"}),
            &json!({"kind": "P"}),
            "k1",
            &json!({"kind": "I"}),
            json!({"T.v1": {}}),
        );
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["controller", "input", "mapKey", "outputs", "parent"]);
        let t = tombstone_request(&json!({}), &json!({}), "k1", json!({}));
        let mut keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["controller", "mapKey", "outputs", "parent"]);
        assert_eq!(t["mapKey"], "k1");
    }
}
