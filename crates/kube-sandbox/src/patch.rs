//! The PATCH verb's three body flavours applied to `serde_json::Value` objects: RFC 7386 JSON merge
//! patch, RFC 6902 JSON patch and Kubernetes strategic merge patch (with its `$patch`,
//! `$setElementOrder/`, `$deleteFromPrimitiveList/` and `$retainKeys` directives). Also owns the
//! table of list merge keys of built-in types ([`list_merge_key`]), which server-side apply shares.

use serde_json::{Map, Value};

/// Why a PATCH body could not be applied to an object.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not a valid document of its patch type (kube-apiserver answers 400).
    #[error("{0}")]
    InvalidDocument(String),
    /// A well-formed JSON patch operation failed, e.g. a `test` that did not match or a path that
    /// does not exist (kube-apiserver answers 422).
    #[error("{0}")]
    JsonPatchFailed(String),
    /// A strategic merge patch directive or list item could not be honoured.
    #[error("{0}")]
    StrategicMerge(String),
}

/// How the items of a list field are merged, as declared by the Kubernetes types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKey {
    /// A list of objects merged item by item, matched on this field.
    Field(&'static str),
    /// A list of scalars merged as a set (e.g. `metadata.finalizers`).
    PrimitiveSet,
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// The merge key of a list field, by field name and (for `ports`) by the shape of its items:
/// container ports merge by `containerPort`, service ports by `port`. `None` means the list is
/// atomic and a patch replaces it whole (tolerations, args, command, every unknown field).
pub fn list_merge_key(field: &str, items: &[Value]) -> Option<ListKey> {
    let key = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates"
        | "webhooks" => "name",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "finalizers" => return Some(ListKey::PrimitiveSet),
        "ports" => {
            let has = |name: &str| items.iter().any(|item| item.get(name).is_some());
            if has("containerPort") {
                "containerPort"
            } else if has("port") {
                "port"
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some(ListKey::Field(key))
}

/// RFC 7386 JSON merge patch (`application/merge-patch+json`): `null` deletes a key, objects merge
/// recursively, every other value (lists included) replaces the target's.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902 JSON patch (`application/json-patch+json`). `patch` is the raw body, which must be an
/// array of operations. The target is left untouched when any operation fails.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_array() {
        return Err(PatchError::InvalidDocument(
            "a JSON patch must be an array of operations".to_string(),
        ));
    }
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::InvalidDocument(format!("invalid JSON patch: {e}")))?;
    json_patch::patch(target, &operations).map_err(|e| PatchError::JsonPatchFailed(e.to_string()))
}

/// Kubernetes strategic merge patch (`application/strategic-merge-patch+json`) for built-in types.
/// Maps merge with `null` deleting; lists merge by their [`list_merge_key`] (unknown lists are
/// replaced); the directives are honoured and never appear in the result. The target is left
/// untouched when the patch is rejected.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::InvalidDocument(
            "a strategic merge patch must be a JSON object".to_string(),
        ));
    };
    let mut result = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    merge_map(&mut result, patch)?;
    *target = Value::Object(result);
    Ok(())
}

fn merge_map(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        match directive.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.shift_remove(DIRECTIVE);
                let mut replaced = Map::new();
                merge_map(&mut replaced, &rest)?;
                *original = replaced;
                return Ok(());
            }
            Some("delete") => {
                original.clear();
                return Ok(());
            }
            Some("merge") => {}
            _ => return Err(bad_patch_type(directive, &Value::Object(patch.clone()))),
        }
    }

    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let keys: Vec<&str> = retain
            .as_array()
            .and_then(|keys| keys.iter().map(Value::as_str).collect())
            .ok_or_else(|| invalid("invalid patch format of retainKeys"))?;
        original.retain(|key, _| keys.contains(&key.as_str()));
    }

    // `$setElementOrder/<field>` goes with its list: merge the list (if patched) and order it.
    let mut ordered: Vec<&str> = Vec::new();
    for (key, order) in patch {
        let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
            continue;
        };
        let order = order
            .as_array()
            .ok_or_else(|| invalid("invalid patch format of setElementOrder list"))?;
        match patch.get(field) {
            Some(Value::Array(items)) => {
                let mut list = match original.get(field) {
                    Some(Value::Array(list)) => list.clone(),
                    _ => Vec::new(),
                };
                merge_list(field, &mut list, items, Some(order))?;
                original.insert(field.to_string(), Value::Array(list));
                ordered.push(field);
            }
            None => {
                if let Some(Value::Array(list)) = original.get_mut(field)
                    && list_merge_key(field, list).is_some()
                {
                    merge_list(field, list, &[], Some(order))?;
                }
            }
            // null or a non-list value: the plain merge below deletes or replaces the field.
            Some(_) => {}
        }
    }

    for (key, value) in patch {
        if key == DIRECTIVE
            || key == RETAIN_KEYS
            || key.starts_with(SET_ELEMENT_ORDER)
            || ordered.contains(&key.as_str())
        {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let remove = value
                .as_array()
                .ok_or_else(|| invalid("invalid patch format of primitive list"))?;
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if value.is_null() {
            original.shift_remove(key);
            continue;
        }
        match (original.get_mut(key), value) {
            (Some(Value::Object(existing)), Value::Object(patch)) => merge_map(existing, patch)?,
            (Some(Value::Array(existing)), Value::Array(items)) => {
                merge_list(key, existing, items, None)?
            }
            _ => {
                let fresh = fresh(key, value)?;
                original.insert(key.clone(), fresh);
            }
        }
    }
    Ok(())
}

/// Merges the patch items of list `field` into `original`, then orders the result like
/// kube-apiserver: patched items in `order` (the `$setElementOrder` list, else the patch's own
/// order), server-only items keeping their place relative to the original list.
fn merge_list(
    field: &str,
    original: &mut Vec<Value>,
    patch: &[Value],
    order: Option<&[Value]>,
) -> Result<(), PatchError> {
    let Some(key) = list_merge_key(field, patch).or_else(|| list_merge_key(field, original)) else {
        let mut replaced = Vec::with_capacity(patch.len());
        for item in patch {
            if directive_of(item).is_none() {
                replaced.push(fresh("", item)?);
            }
        }
        *original = replaced;
        return Ok(());
    };

    let server_order = original.clone();
    let items = list_directives(field, key, original, patch)?;
    merge_list_items(key, original, &items)?;
    let order: Vec<Option<Value>> = match order {
        Some(order) => checked_order(field, key, order, patch, &items)?,
        None => items.iter().map(|item| identity(key, item)).collect(),
    };
    let server_order: Vec<Option<Value>> = server_order.iter().map(|v| identity(key, v)).collect();
    sort_like_server(key, original, &order, &server_order);
    Ok(())
}

/// What identifies an item of a list merged by `key`: its merge key's value, or the value
/// itself in a set.
fn identity(key: ListKey, value: &Value) -> Option<Value> {
    match key {
        ListKey::Field(name) => value.get(name).cloned(),
        ListKey::PrimitiveSet => Some(value.clone()),
    }
}

/// Applies the `$patch` directives of the patch items of list `field` to `original` (delete
/// an item, replace the whole list); the items to merge.
fn list_directives<'a>(
    field: &str,
    key: ListKey,
    original: &mut Vec<Value>,
    patch: &'a [Value],
) -> Result<Vec<&'a Value>, PatchError> {
    let mut items: Vec<&Value> = Vec::new();
    let mut replace = false;
    for item in patch {
        match directive_of(item) {
            None | Some(Some("merge")) => items.push(item),
            Some(Some("replace")) => replace = true,
            Some(Some("delete")) => match key {
                ListKey::Field(name) => {
                    let value = merge_key_value(item, name)?;
                    original.retain(|existing| existing.get(name) != Some(value));
                }
                ListKey::PrimitiveSet => {
                    return Err(PatchError::StrategicMerge(format!(
                        "$patch: delete is not supported in the primitive list {field}; use $deleteFromPrimitiveList/{field}"
                    )));
                }
            },
            Some(_) => {
                return Err(bad_patch_type(
                    item.get(DIRECTIVE).unwrap_or(&Value::Null),
                    item,
                ));
            }
        }
    }
    if replace {
        original.clear();
    }
    Ok(items)
}

/// Merges `items` into `original`: a set gains the new values once; an item of a keyed list
/// is merged into the item with its key, or appended.
fn merge_list_items(
    key: ListKey,
    original: &mut Vec<Value>,
    items: &[&Value],
) -> Result<(), PatchError> {
    match key {
        ListKey::PrimitiveSet => {
            for item in items {
                original.push(fresh("", item)?);
            }
            let mut unique: Vec<Value> = Vec::with_capacity(original.len());
            for item in original.drain(..) {
                if !unique.contains(&item) {
                    unique.push(item);
                }
            }
            *original = unique;
        }
        ListKey::Field(name) => {
            for item in items {
                let value = merge_key_value(item, name)?;
                let existing = original
                    .iter_mut()
                    .find(|existing| existing.get(name) == Some(value));
                match (existing, item) {
                    (Some(Value::Object(existing)), Value::Object(patch)) => {
                        merge_map(existing, patch)?
                    }
                    _ => original.push(fresh("", item)?),
                }
            }
        }
    }
    Ok(())
}

/// The identities of `$setElementOrder/field`, which must list the patch items in their
/// order (kube-apiserver's error otherwise).
fn checked_order(
    field: &str,
    key: ListKey,
    order: &[Value],
    patch: &[Value],
    items: &[&Value],
) -> Result<Vec<Option<Value>>, PatchError> {
    let order: Vec<Option<Value>> = order.iter().map(|v| identity(key, v)).collect();
    let mut remaining = order.iter();
    for item in items {
        let id = identity(key, item);
        if !remaining.any(|o| *o == id) {
            return Err(PatchError::StrategicMerge(format!(
                "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER}{field} list:\n{}\n",
                Value::Array(patch.to_vec()),
                Value::Array(
                    order
                        .iter()
                        .map(|o| o.clone().unwrap_or(Value::Null))
                        .collect()
                ),
            )));
        }
    }
    Ok(order)
}

/// Orders the merged list like kube-apiserver: the patched items (those in `order`) in that
/// order, merged with the server-only items by their place in `server_order` (the original
/// list).
fn sort_like_server(
    key: ListKey,
    original: &mut Vec<Value>,
    order: &[Option<Value>],
    server_order: &[Option<Value>],
) {
    let position = |list: &[Option<Value>], id: &Option<Value>| list.iter().position(|o| o == id);

    let (mut patched, server_only): (Vec<Value>, Vec<Value>) = std::mem::take(original)
        .into_iter()
        .partition(|item| position(order, &identity(key, item)).is_some());
    patched.sort_by_key(|item| position(order, &identity(key, item)));

    // kube-apiserver's mergeSortedSlice: a server-only item goes first only when both items were
    // in the original list and it came first there; otherwise the patched item does.
    let mut server_only = server_only.into_iter().peekable();
    let mut patched = patched.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), patched.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(s), Some(p)) => {
                match (
                    position(server_order, &identity(key, s)),
                    position(server_order, &identity(key, p)),
                ) {
                    (Some(si), Some(pi)) => si < pi,
                    _ => false,
                }
            }
        };
        let next = if take_server {
            server_only.next()
        } else {
            patched.next()
        };
        original.extend(next);
    }
}

/// A patch value for a field the target lacks: merged into an empty value, so that nulls and
/// directives inside it are honoured rather than stored.
fn fresh(field: &str, value: &Value) -> Result<Value, PatchError> {
    Ok(match value {
        Value::Object(patch) => {
            let mut map = Map::new();
            merge_map(&mut map, patch)?;
            Value::Object(map)
        }
        Value::Array(items) => {
            let mut list = Vec::new();
            merge_list(field, &mut list, items, None)?;
            Value::Array(list)
        }
        other => other.clone(),
    })
}

/// `Some(directive)` when the list item is an object carrying a `$patch` directive.
fn directive_of(item: &Value) -> Option<Option<&str>> {
    item.as_object()?.get(DIRECTIVE).map(Value::as_str)
}

fn merge_key_value<'a>(item: &'a Value, key: &str) -> Result<&'a Value, PatchError> {
    match item.get(key) {
        Some(value) if !value.is_null() => Ok(value),
        _ => Err(PatchError::StrategicMerge(format!(
            "map: {item} does not contain declared merge key: {key}"
        ))),
    }
}

fn bad_patch_type(directive: &Value, map: &Value) -> PatchError {
    let shown = directive
        .as_str()
        .map_or_else(|| directive.to_string(), str::to_string);
    PatchError::StrategicMerge(format!("unknown patch type: {shown} in map: {map}"))
}

fn invalid(message: &str) -> PatchError {
    PatchError::InvalidDocument(message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(mut target: Value, patch: Value) -> Value {
        strategic_merge_patch(&mut target, &patch).unwrap();
        target
    }

    fn smp_err(target: Value, patch: Value) -> String {
        let mut target = target;
        strategic_merge_patch(&mut target, &patch)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn merge_patch_deletes_merges_and_replaces() {
        let mut doc = json!({"a": 1, "b": {"c": 1, "d": 2}, "l": [1, 2]});
        merge_patch(
            &mut doc,
            &json!({"a": null, "b": {"c": null, "e": {"x": null, "y": 1}}, "l": [3]}),
        );
        assert_eq!(doc, json!({"b": {"d": 2, "e": {"y": 1}}, "l": [3]}));
        merge_patch(&mut doc, &json!("scalar"));
        assert_eq!(doc, json!("scalar"));
    }

    #[test]
    fn json_patch_applies_operations() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}});
        json_patch(
            &mut doc,
            &json!([
                {"op": "test", "path": "/spec/replicas", "value": 1},
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "add", "path": "/metadata/labels/b", "value": "2"},
                {"op": "remove", "path": "/metadata/labels/a"}
            ]),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"b": "2"}}, "spec": {"replicas": 3}})
        );
    }

    #[test]
    fn json_patch_failure_leaves_target_untouched() {
        let mut doc = json!({"spec": {"replicas": 1}});
        let err = json_patch(
            &mut doc,
            &json!([
                {"op": "replace", "path": "/spec/replicas", "value": 5},
                {"op": "test", "path": "/spec/replicas", "value": 1}
            ]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::JsonPatchFailed(_)), "{err:?}");
        assert_eq!(doc, json!({"spec": {"replicas": 1}}));
        let err = json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert!(matches!(err, PatchError::JsonPatchFailed(_)), "{err:?}");
    }

    #[test]
    fn json_patch_rejects_malformed_documents() {
        let mut doc = json!({});
        for bad in [
            json!({"op": "add"}),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!([{"op": "add", "path": "/a"}]),
        ] {
            let err = json_patch(&mut doc, &bad).unwrap_err();
            assert!(
                matches!(err, PatchError::InvalidDocument(_)),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn list_merge_keys_of_builtin_fields() {
        assert_eq!(
            list_merge_key("containers", &[]),
            Some(ListKey::Field("name"))
        );
        assert_eq!(list_merge_key("env", &[]), Some(ListKey::Field("name")));
        assert_eq!(
            list_merge_key("conditions", &[]),
            Some(ListKey::Field("type"))
        );
        assert_eq!(
            list_merge_key("ownerReferences", &[]),
            Some(ListKey::Field("uid"))
        );
        assert_eq!(
            list_merge_key("volumeMounts", &[]),
            Some(ListKey::Field("mountPath"))
        );
        assert_eq!(
            list_merge_key("volumeDevices", &[]),
            Some(ListKey::Field("devicePath"))
        );
        assert_eq!(
            list_merge_key("hostAliases", &[]),
            Some(ListKey::Field("ip"))
        );
        assert_eq!(
            list_merge_key("finalizers", &[]),
            Some(ListKey::PrimitiveSet)
        );
        assert_eq!(
            list_merge_key("ports", &[json!({"containerPort": 80})]),
            Some(ListKey::Field("containerPort"))
        );
        assert_eq!(
            list_merge_key("ports", &[json!({"port": 80, "targetPort": 8080})]),
            Some(ListKey::Field("port"))
        );
        assert_eq!(list_merge_key("ports", &[]), None);
        for atomic in ["tolerations", "args", "command", "items", "rules"] {
            assert_eq!(list_merge_key(atomic, &[json!("x")]), None, "{atomic}");
        }
    }

    #[test]
    fn smp_maps_merge_and_null_deletes() {
        let out = smp(
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1, "paused": true}}),
            json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"replicas": 2}}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"replicas": 2, "paused": true}})
        );
    }

    #[test]
    fn smp_containers_merge_by_name_new_items_first() {
        // Like kube-apiserver (and the kubectl patch docs), an added item goes before the
        // server's items when the patch does not say where it belongs.
        let out = smp(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx", "args": ["a"]}]}}),
            json!({"spec": {"containers": [{"name": "sidecar", "image": "redis"}, {"name": "app", "image": "nginx:2"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [
                {"name": "sidecar", "image": "redis"},
                {"name": "app", "image": "nginx:2", "args": ["a"]}
            ]}})
        );
        let out = smp(
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {"containers": [{"name": "c"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])
        );
    }

    #[test]
    fn smp_preserves_patch_order_among_server_items() {
        // Cases from apimachinery's strategicpatch tests.
        let out = smp(
            json!({"containers": [{"name": "1"}, {"name": "2", "v": "b"}, {"name": "3"}]}),
            json!({"containers": [{"name": "3", "v": "c"}, {"name": "1", "v": "a"}]}),
        );
        assert_eq!(
            out["containers"],
            json!([{"name": "2", "v": "b"}, {"name": "3", "v": "c"}, {"name": "1", "v": "a"}])
        );
        let out = smp(
            json!({"finalizers": ["1", "2", "3"]}),
            json!({"finalizers": ["3", "1"]}),
        );
        assert_eq!(out["finalizers"], json!(["2", "3", "1"]));
    }

    #[test]
    fn smp_nested_lists_merge_by_their_own_keys() {
        let out = smp(
            json!({"containers": [{"name": "app", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                   "volumeMounts": [{"mountPath": "/data", "name": "d"}], "args": ["x", "y"]}]}),
            json!({"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}],
                   "volumeMounts": [{"mountPath": "/data", "readOnly": true}], "args": ["z"]}]}),
        );
        assert_eq!(
            out,
            json!({"containers": [{"name": "app", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}],
                   "volumeMounts": [{"mountPath": "/data", "name": "d", "readOnly": true}], "args": ["z"]}]})
        );
    }

    #[test]
    fn smp_ports_merge_by_container_port_or_service_port() {
        let out = smp(
            json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "name": "http"}]}]}),
            json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}),
        );
        assert_eq!(
            out["containers"][0]["ports"],
            json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}])
        );
        let out = smp(
            json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}}),
            json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}]}}),
        );
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}])
        );
    }

    #[test]
    fn smp_atomic_and_unknown_lists_are_replaced() {
        let out = smp(
            json!({"spec": {"tolerations": [{"key": "a"}], "command": ["sh"], "custom": [{"name": "x"}]}}),
            json!({"spec": {"tolerations": [{"key": "b", "value": null}], "command": ["bash", "-c"], "custom": [{"name": "y"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"tolerations": [{"key": "b"}], "command": ["bash", "-c"], "custom": [{"name": "y"}]}})
        );
    }

    #[test]
    fn smp_finalizers_are_a_set_and_delete_from_primitive_list() {
        let out = smp(
            json!({"metadata": {"finalizers": ["a", "b"]}}),
            json!({"metadata": {"finalizers": ["b", "c"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let out = smp(
            json!({"metadata": {"finalizers": ["a", "b", "c"]}, "spec": {"args": ["1", "2", "3"]}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zz"]},
                   "spec": {"$deleteFromPrimitiveList/args": ["2"], "$deleteFromPrimitiveList/missing": ["x"]}}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"finalizers": ["a", "c"]}, "spec": {"args": ["1", "3"]}})
        );
    }

    #[test]
    fn smp_patch_delete_on_list_items_and_maps() {
        let out = smp(
            json!({"containers": [{"name": "1"}, {"name": "1"}, {"name": "2", "v": "a"}, {"name": "3"}]}),
            json!({"containers": [{"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}]}),
        );
        assert_eq!(out, json!({"containers": [{"name": "2", "v": "a"}]}));
        // Like kube-apiserver: `$patch: delete` on a map leaves it empty.
        let out = smp(
            json!({"simpleMap": {"a": 1}, "other": 1}),
            json!({"simpleMap": {"$patch": "delete"}}),
        );
        assert_eq!(out, json!({"simpleMap": {}, "other": 1}));
        assert!(
            smp_err(
                json!({"containers": []}),
                json!({"containers": [{"$patch": "delete"}]})
            )
            .contains("does not contain declared merge key: name")
        );
    }

    #[test]
    fn smp_patch_replace_on_maps_and_lists() {
        let out = smp(
            json!({"spec": {"selector": {"a": "1", "b": "2"}}}),
            json!({"spec": {"selector": {"$patch": "replace", "c": "3", "d": null}}}),
        );
        assert_eq!(out, json!({"spec": {"selector": {"c": "3"}}}));
        let out = smp(
            json!({"name": 1, "value": 1}),
            json!({"$patch": "replace", "other": "a"}),
        );
        assert_eq!(out, json!({"other": "a"}));
        let out = smp(
            json!({"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}),
            json!({"containers": [{"name": "a", "tty": true}, {"$patch": "replace"}]}),
        );
        assert_eq!(out, json!({"containers": [{"name": "a", "tty": true}]}));
        let out = smp(
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": [{"$patch": "replace"}]}),
        );
        assert_eq!(out, json!({"containers": []}));
        let out = smp(
            json!({"finalizers": ["a", "b"]}),
            json!({"finalizers": ["c", {"$patch": "replace"}]}),
        );
        assert_eq!(out, json!({"finalizers": ["c"]}));
    }

    #[test]
    fn smp_patch_merge_is_the_default() {
        let out = smp(
            json!({"spec": {"a": 1, "containers": [{"name": "c", "image": "x"}]}}),
            json!({"spec": {"$patch": "merge", "b": 2, "containers": [{"name": "c", "$patch": "merge", "tty": true}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"a": 1, "containers": [{"name": "c", "image": "x", "tty": true}], "b": 2}})
        );
    }

    #[test]
    fn smp_unknown_directive_is_rejected() {
        let err = smp_err(json!({"spec": {}}), json!({"spec": {"$patch": "frob"}}));
        assert!(err.starts_with("unknown patch type: frob in map:"), "{err}");
        let err = smp_err(
            json!({"containers": []}),
            json!({"containers": [{"name": "a", "$patch": 7}]}),
        );
        assert!(err.starts_with("unknown patch type: 7"), "{err}");
    }

    #[test]
    fn smp_set_element_order_orders_and_is_dropped() {
        // What `kubectl apply` (client side) sends when it appends a container.
        let out = smp(
            json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                "containers": [{"name": "c", "image": "2"}]
            }}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [
                {"name": "a", "image": "1"}, {"name": "b", "image": "1"}, {"name": "c", "image": "2"}
            ]}})
        );
        // The order list alone reorders; items it does not name are dropped from the order only.
        let out = smp(
            json!({"containers": [{"name": "1"}, {"name": "3"}]}),
            json!({"$setElementOrder/containers": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
                   "containers": [{"name": "3", "v": 3}, {"name": "1", "v": 1}]}),
        );
        assert_eq!(
            out,
            json!({"containers": [{"name": "3", "v": 3}, {"name": "1", "v": 1}]})
        );
        let out = smp(
            json!({"finalizers": ["1", "3"]}),
            json!({"$setElementOrder/finalizers": ["3", "2", "1"]}),
        );
        assert_eq!(out, json!({"finalizers": ["3", "1"]}));
        // A list the target lacks is created in the requested order.
        let out = smp(
            json!({}),
            json!({"$setElementOrder/env": [{"name": "A"}, {"name": "C"}, {"name": "B"}],
                   "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}),
        );
        assert_eq!(
            out,
            json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]})
        );
    }

    #[test]
    fn smp_set_element_order_must_agree_with_the_patch_list() {
        let err = smp_err(
            json!({"containers": [{"name": "1"}, {"name": "3"}, {"name": "2"}]}),
            json!({"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
                   "containers": [{"name": "3", "v": 3}, {"name": "1", "v": 1}]}),
        );
        assert!(
            err.contains("doesn't match $setElementOrder/containers list"),
            "{err}"
        );
    }

    #[test]
    fn smp_retain_keys_drops_unlisted_keys() {
        // What kubectl sends to switch a volume from emptyDir to hostPath.
        let out = smp(
            json!({"volumes": [{"name": "v", "emptyDir": {}}]}),
            json!({"volumes": [{"name": "v", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/x"}}]}),
        );
        assert_eq!(
            out,
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]})
        );
        let err = smp_err(json!({}), json!({"$retainKeys": "nope"}));
        assert_eq!(err, "invalid patch format of retainKeys");
    }

    #[test]
    fn smp_directives_never_leak_into_new_values() {
        let out = smp(
            json!({}),
            json!({"spec": {"template": {"$patch": "merge", "spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "$deleteFromPrimitiveList/finalizers": ["x"],
                "$retainKeys": ["containers"],
                "containers": [{"name": "a", "env": [{"name": "E", "$patch": "merge", "value": null}]}, {"$patch": "replace"}],
                "gone": null
            }}}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "E"}]}]}}}})
        );
    }

    #[test]
    fn smp_missing_merge_key_and_bad_bodies_are_errors() {
        let err = smp_err(
            json!({"containers": [{"name": "1"}]}),
            json!({"containers": [{"image": "b"}]}),
        );
        assert!(
            err.contains("does not contain declared merge key: name"),
            "{err}"
        );
        let mut target = json!({"a": 1});
        let err = strategic_merge_patch(&mut target, &json!([1])).unwrap_err();
        assert!(matches!(err, PatchError::InvalidDocument(_)));
        let err = smp_err(json!({}), json!({"$setElementOrder/containers": {}}));
        assert_eq!(err, "invalid patch format of setElementOrder list");
        let err = smp_err(
            json!({}),
            json!({"$deleteFromPrimitiveList/finalizers": "x"}),
        );
        assert_eq!(err, "invalid patch format of primitive list");
        // A rejected patch leaves the target as it was.
        let mut target = json!({"a": 1, "containers": [{"name": "1"}]});
        strategic_merge_patch(
            &mut target,
            &json!({"a": 2, "containers": [{"image": "x"}]}),
        )
        .unwrap_err();
        assert_eq!(target, json!({"a": 1, "containers": [{"name": "1"}]}));
    }

    #[test]
    fn smp_type_changes_replace() {
        let out = smp(
            json!({"a": {"b": 1}, "c": [1], "d": "x", "e": [{"name": "q"}]}),
            json!({"a": [1], "c": {"k": null, "v": 1}, "d": {"x": 1}, "e": "s"}),
        );
        assert_eq!(
            out,
            json!({"a": [1], "c": {"v": 1}, "d": {"x": 1}, "e": "s"})
        );
        let out = smp(json!("not an object"), json!({"a": 1}));
        assert_eq!(out, json!({"a": 1}));
    }

    #[test]
    fn smp_conditions_owner_references_and_host_aliases() {
        let out = smp(
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Synced", "status": "True"}]},
                   "metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]},
                   "spec": {"hostAliases": [{"ip": "1.1.1.1", "hostnames": ["a"]}]}}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]},
                   "metadata": {"ownerReferences": [{"uid": "1", "controller": true}]},
                   "spec": {"hostAliases": [{"ip": "1.1.1.1", "hostnames": ["b"]}]}}),
        );
        assert_eq!(
            out,
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "True"}]},
                   "metadata": {"ownerReferences": [{"uid": "1", "name": "a", "controller": true}]},
                   "spec": {"hostAliases": [{"ip": "1.1.1.1", "hostnames": ["b"]}]}})
        );
    }
}
