//! Read-only accessors for Kubernetes objects held as JSON (`serde_json::Value`).
//!
//! The engine keeps every observed object as JSON: it is what hooks receive, what the apply merge
//! works on and what selectors match. These helpers read the metadata fields the engine needs
//! without converting to typed structs, and never panic on malformed input (a missing or
//! mistyped field reads as absent).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

/// Metadata the API server sets, stripped from an object before it is created again on another
/// server (`dryrun --simulate`'s copies, `replay`'s first state).
pub const SERVER_SET: [&str; 6] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
];

/// Ready `metadata` of an object to be created again on another server where its owners were
/// created first, as copies whose uids `uids` maps (original uid -> copy's uid): the
/// [`SERVER_SET`] fields dropped, labels holding an owner's uid (generateSelector's
/// `controller-uid`) and `ownerReferences` moved to the copies' uids (references to owners
/// that were not copied dropped).
pub fn retarget_copy(metadata: &mut Map<String, Value>, uids: &HashMap<String, String>) {
    for f in SERVER_SET {
        metadata.shift_remove(f);
    }
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        for l in labels.values_mut() {
            if let Some(copy) = l.as_str().and_then(|u| uids.get(u)) {
                *l = Value::String(copy.clone());
            }
        }
    }
    if let Some(refs) = metadata
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        refs.retain_mut(|r| match r["uid"].as_str().and_then(|u| uids.get(u)) {
            Some(copy) => {
                r["uid"] = Value::String(copy.clone());
                true
            }
            None => false,
        });
    }
}

/// Identity of an object inside one resource: namespace (None for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectKey {
    /// A key from parts.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The key of `obj` (`None` when it has no name).
    pub fn of(obj: &Value) -> Option<Self> {
        Some(ObjectKey::new(namespace(obj), name(obj)?))
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// `kind` of the owner.
    pub kind: String,
    /// `name` of the owner.
    pub name: String,
    /// `uid` of the owner.
    pub uid: String,
    /// `controller: true`.
    pub controller: bool,
}

fn meta(obj: &Value) -> Option<&serde_json::Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)?.get(field)?.as_str()
}

/// `metadata.name`.
pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name")
}

/// `metadata.namespace` (None when absent or empty).
pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace").filter(|s| !s.is_empty())
}

/// `metadata.uid`.
pub fn uid(obj: &Value) -> Option<&str> {
    meta_str(obj, "uid")
}

/// `metadata.resourceVersion`.
pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion")
}

/// `metadata.generation` (0 when absent).
pub fn generation(obj: &Value) -> i64 {
    meta(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// True when `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    meta(obj)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// `apiVersion`.
pub fn api_version(obj: &Value) -> Option<&str> {
    obj.get("apiVersion")?.as_str()
}

/// `kind`.
pub fn kind(obj: &Value) -> Option<&str> {
    obj.get("kind")?.as_str()
}

/// `metadata.labels` as a map (non-string values are skipped).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(meta(obj).and_then(|m| m.get("labels")))
}

/// `metadata.annotations` as a map (non-string values are skipped).
pub fn annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(meta(obj).and_then(|m| m.get("annotations")))
}

/// One annotation.
pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj)?.get("annotations")?.get(key)?.as_str()
}

/// One label.
pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj)?.get("labels")?.get(key)?.as_str()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<&str> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// All `metadata.ownerReferences` (malformed entries are skipped).
pub fn owner_refs(obj: &Value) -> Vec<OwnerRef> {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| {
                    Some(OwnerRef {
                        api_version: r.get("apiVersion")?.as_str()?.to_string(),
                        kind: r.get("kind")?.as_str()?.to_string(),
                        name: r.get("name")?.as_str()?.to_string(),
                        uid: r.get("uid")?.as_str()?.to_string(),
                        controller: r.get("controller").and_then(Value::as_bool) == Some(true),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The ControllerRef: the owner reference with `controller: true`, if any.
pub fn controller_ref(obj: &Value) -> Option<OwnerRef> {
    owner_refs(obj).into_iter().find(|r| r.controller)
}

/// The `<group>` part of an apiVersion (`""` for core `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Call `f` on every `kind: Secret` object inside `v`, at any depth (to mask or redact its
/// values before a body is shown or written down).
pub fn visit_secrets(v: &mut Value, f: &mut impl FnMut(&mut serde_json::Map<String, Value>)) {
    match v {
        Value::Object(map) => {
            if map.get("kind").and_then(Value::as_str) == Some("Secret") {
                f(map);
            }
            for child in map.values_mut() {
                visit_secrets(child, f);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| visit_secrets(i, f)),
        _ => {}
    }
}

/// The object without the fields that change on every write (and, if `drop_status`, status).
pub fn strip_volatile(v: &Value, drop_status: bool) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    if drop_status && let Some(m) = v.as_object_mut() {
        m.remove("status");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strip_volatile_drops_what_every_write_changes() {
        let v = json!({"metadata": {"name": "a", "resourceVersion": "3", "managedFields": []},
            "spec": {"x": 1}, "status": {"y": 2}});
        assert_eq!(
            strip_volatile(&v, false),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": 2}})
        );
        assert_eq!(
            strip_volatile(&v, true),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}})
        );
    }

    #[test]
    fn reads_metadata_and_tolerates_garbage() {
        let o = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "a", "namespace": "ns", "uid": "u1", "generation": 3,
            "labels": {"x": "1", "bad": 5}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "p", "uid": "pu", "controller": true},
                                {"apiVersion": "v1"}]}});
        assert_eq!(
            ObjectKey::of(&o).map(|k| k.to_string()).as_deref(),
            Some("ns/a")
        );
        assert_eq!(generation(&o), 3);
        assert_eq!(labels(&o).len(), 1);
        assert_eq!(finalizers(&o), vec!["f"]);
        assert_eq!(owner_refs(&o).len(), 1);
        assert_eq!(controller_ref(&o).map(|r| r.uid), Some("pu".to_string()));
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
        let garbage = json!([1, 2]);
        assert_eq!(name(&garbage), None);
        assert!(labels(&garbage).is_empty());
        assert!(!is_deleting(&garbage));
        assert_eq!(ObjectKey::new(Some(""), "x").namespace, None);
    }
}
