//! Checking JSON against the schemas in docs/ (docs/inspect-graph.schema.json,
//! docs/dev-events.schema.json) without a schema library.

use serde_json::Value;

/// A JSON Schema check for the keywords the schemas in docs/ use: `type` (string or
/// list), `enum`, `required`, `properties`, `additionalProperties: false`, `items`, `oneOf` and
/// local `$ref`s (`#/$defs/name`). Returns what does not validate.
pub fn validate(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/$defs/")
            .ok_or(format!("unsupported $ref {r}"))?;
        return validate(root, &root["$defs"][name], v, at);
    }
    if let Some(Value::Array(alts)) = schema.get("oneOf") {
        let ok: Vec<usize> = (0..alts.len())
            .filter(|i| validate(root, &alts[*i], v, at).is_ok())
            .collect();
        if ok.len() != 1 {
            return Err(format!(
                "{at}: matches {} of the oneOf alternatives: {v}",
                ok.len()
            ));
        }
    }
    let type_ok = |t: &str| match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    };
    match schema.get("type") {
        Some(Value::String(t)) if !type_ok(t) => return Err(format!("{at}: expected {t}: {v}")),
        Some(Value::Array(ts)) if !ts.iter().any(|t| type_ok(t.as_str().unwrap_or_default())) => {
            return Err(format!("{at}: expected one of {ts:?}: {v}"));
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(v)
    {
        return Err(format!("{at}: {v} not in {allowed:?}"));
    }
    if let Some(obj) = v.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or_default();
            if !obj.contains_key(r) {
                return Err(format!("{at}: missing required {r:?}"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, sub) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(root, s, sub, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at}: unexpected property {k:?}"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            validate(root, items, item, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}
