//! Pruning unknown fields and filling `default:` values, as kube-apiserver does on every
//! write of a custom resource (prune, then default, then validate).

use serde_json::Value;
use std::collections::HashSet;

use super::*;

/// apiextensions-apiserver's `prune`: `s == None` means "no schema", which drops every object key below.
pub(crate) fn prune_value(
    x: &mut Value,
    s: Option<&Schema>,
    root: bool,
    path: &str,
    out: &mut Vec<String>,
) {
    if let Some(schema) = s
        && schema.preserve_unknown
    {
        skip_prune(x, schema, root, path, out);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(schema) = s else {
                out.extend(map.keys().map(|k| child(path, k)));
                map.clear();
                return;
            };
            let keep_meta = schema.embedded || root;
            let mut dropped = HashSet::new();
            for (key, value) in map.iter_mut() {
                if keep_meta && is_meta(key) {
                    continue;
                }
                if let Some(prop) = schema.property(key) {
                    prune_value(value, Some(prop), false, &child(path, key), out);
                } else if let Some(additional) = schema.additional_for_prune() {
                    prune_value(value, additional, false, &child(path, key), out);
                } else {
                    if !is_meta(key) || !path.is_empty() {
                        out.push(child(path, key));
                    }
                    dropped.insert(key.clone());
                }
            }
            if !dropped.is_empty() {
                map.retain(|k, _| !dropped.contains(k));
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(item, item_schema, false, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// apiextensions-apiserver's `skipPrune`: under `x-kubernetes-preserve-unknown-fields` unknown keys stay,
/// declared ones are still pruned below.
pub(crate) fn skip_prune(x: &mut Value, s: &Schema, root: bool, path: &str, out: &mut Vec<String>) {
    match x {
        Value::Object(map) => {
            let keep_meta = s.embedded || root;
            for (key, value) in map.iter_mut() {
                if keep_meta && is_meta(key) {
                    continue;
                }
                if let Some(prop) = s.property(key) {
                    prune_value(value, Some(prop), false, &child(path, key), out);
                } else if let Some(additional) = s.additional_for_prune() {
                    prune_value(value, additional, false, &child(path, key), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_schema, false, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: removes nulls from fields that are neither nullable nor defaulted.
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Schema>) {
    match x {
        Value::Object(map) => {
            let mut dropped = HashSet::new();
            for (key, value) in map.iter_mut() {
                let field_schema = s.and_then(|s| s.field_schema(key));
                if value.is_null()
                    && field_schema.is_some_and(|f| !f.nullable && f.default.is_none())
                {
                    dropped.insert(key.clone());
                } else {
                    prune_nulls(value, field_schema);
                }
            }
            if !dropped.is_empty() {
                map.retain(|k, _| !dropped.contains(k));
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for item in items {
                prune_nulls(item, item_schema);
            }
        }
        _ => {}
    }
}

/// apiextensions-apiserver's `Default`.
pub(crate) fn apply_defaults_to(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(map) => {
            for (name, prop) in &s.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing = match map.get(name) {
                    None => true,
                    Some(v) => v.is_null() && !prop.nullable,
                };
                if missing {
                    map.insert(name.clone(), default.clone());
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(prop) = s.property(key) {
                    apply_defaults_to(value, prop);
                } else if let Additional::Schema(additional) = &s.additional {
                    default_null(value, additional);
                    apply_defaults_to(value, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for item in items {
                    default_null(item, item_schema);
                    apply_defaults_to(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Replaces a null the schema does not allow with the schema's default, if it has one.
pub(crate) fn default_null(v: &mut Value, s: &Schema) {
    if v.is_null()
        && !s.nullable
        && let Some(default) = &s.default
    {
        *v = default.clone();
    }
}

pub(crate) fn is_meta(key: &str) -> bool {
    META_FIELDS.contains(&key)
}
