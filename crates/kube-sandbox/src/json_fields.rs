//! Small helpers over JSON objects that defaulting and validation share: set a field when it is
//! unset, reach or create a nested object, iterate a list field. kube-apiserver's defaulters
//! work on typed structs; the sandbox keeps objects as JSON, so these stand in for the struct
//! field accesses.

use serde_json::{Map, Value, json};

/// Set `parent[key] = v` when `parent` is an object and `key` is absent or null.
pub fn set(parent: &mut Value, key: &str, v: Value) {
    if let Some(m) = parent.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_string(), v);
    }
}

/// `parent[key]` as an object, created empty when absent or null (nothing when `parent` is
/// not an object, or `parent[key]` is something else).
pub fn obj_at<'a>(parent: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let m = parent.as_object_mut()?;
    let slot = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = json!({});
    }
    slot.is_object().then_some(slot)
}

/// The elements of the list `parent[key]` (none when absent).
pub fn items<'a>(parent: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    parent
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// Is `parent[key]` absent, null or an empty string?
pub fn unset(parent: &Value, key: &str) -> bool {
    match parent.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}
