//! `--from-example`: a CRD's `openAPIV3Schema` inferred from one example object.
//!
//! Every field of the example gets its type (`string`, `boolean`, `integer` for whole numbers
//! written without a fraction, `number` otherwise, `object` with its `properties`, `array` with
//! the merged schema of its items). The result is structural, with no
//! `x-kubernetes-preserve-unknown-fields` on `spec`, so the API server prunes fields the example
//! did not have and rejects wrong types with a 422 naming the field. Only an empty object or an
//! empty list in the example (nothing to infer from) keeps whatever it is given.

use serde_json::{Map, Value, json};

/// Top-level fields of an object that are not the schema's to describe.
const NOT_SCHEMA: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// The schema of the example's content (every top-level field except `apiVersion`, `kind`,
/// `metadata`, `status`), plus `status` as given. Errors name the field path.
pub fn infer_root(example: &Map<String, Value>, status: Value) -> Result<Value, String> {
    let mut props = Map::new();
    for (k, v) in example {
        if NOT_SCHEMA.contains(&k.as_str()) {
            continue;
        }
        props.insert(k.clone(), infer(v, k)?);
    }
    props.insert("status".into(), status);
    Ok(json!({"type": "object", "properties": props}))
}

/// The schema of one value; `at` is its field path for messages.
pub fn infer(v: &Value, at: &str) -> Result<Value, String> {
    Ok(match v {
        Value::Null => {
            return Err(format!(
                "{at} is null: nothing to infer a type from; give an example value"
            ));
        }
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(n) if n.is_f64() => json!({"type": "number"}),
        Value::Number(_) => json!({"type": "integer"}),
        Value::String(_) => json!({"type": "string"}),
        Value::Object(m) if m.is_empty() => {
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        }
        Value::Object(m) => {
            let mut props = Map::new();
            for (k, v) in m {
                props.insert(k.clone(), infer(v, &format!("{at}.{k}"))?);
            }
            json!({"type": "object", "properties": props})
        }
        Value::Array(items) => {
            let mut merged: Option<Value> = None;
            for (i, item) in items.iter().enumerate() {
                let s = infer(item, &format!("{at}[{i}]"))?;
                merged = Some(match merged {
                    None => s,
                    Some(m) => merge(m, s, &format!("{at}[{i}]"))?,
                });
            }
            let items = merged.unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
            json!({"type": "array", "items": items})
        }
    })
}

/// One schema for two list items: objects take the union of their fields, an integer and a
/// number make a number; anything else that differs is an error.
fn merge(a: Value, b: Value, at: &str) -> Result<Value, String> {
    if a == b {
        return Ok(a);
    }
    let ty = |s: &Value| s["type"].as_str().unwrap_or_default().to_string();
    match (ty(&a).as_str(), ty(&b).as_str()) {
        ("integer", "number") | ("number", "integer") => Ok(json!({"type": "number"})),
        ("object", "object") => {
            let (Value::Object(mut a), Value::Object(b)) = (a, b) else {
                return Err(format!("{at}: internal: object schema is not a map"));
            };
            let preserve = a.contains_key("x-kubernetes-preserve-unknown-fields")
                || b.contains_key("x-kubernetes-preserve-unknown-fields");
            let mut props = match a.remove("properties") {
                Some(Value::Object(p)) => p,
                _ => Map::new(),
            };
            if let Some(Value::Object(bp)) = b.get("properties") {
                for (k, v) in bp {
                    let merged = match props.remove(k) {
                        Some(old) => merge(old, v.clone(), &format!("{at}.{k}"))?,
                        None => v.clone(),
                    };
                    props.insert(k.clone(), merged);
                }
            }
            let mut out = json!({"type": "object"});
            if !props.is_empty() {
                out["properties"] = Value::Object(props);
            }
            if preserve && out.get("properties").is_none() {
                out["x-kubernetes-preserve-unknown-fields"] = json!(true);
            }
            Ok(out)
        }
        ("array", "array") => Ok(json!({"type": "array", "items": merge(
            a["items"].clone(), b["items"].clone(), &format!("{at}[]"))?})),
        (x, y) => Err(format!(
            "{at} is {y} where an earlier item of the list is {x}: a CRD list holds one type; make the items alike"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_nested_objects_lists_and_numbers() {
        let ex = json!({
            "spec": {
                "replicas": 3, "ratio": 0.5, "name": "x", "on": true,
                "ports": [{"port": 80}, {"port": 443, "name": "https"}],
                "weights": [1, 2.5],
                "extra": {}
            }
        });
        let s = infer_root(ex.as_object().unwrap(), json!({"type": "object"})).unwrap();
        let spec = &s["properties"]["spec"];
        assert_eq!(spec["type"], "object");
        assert!(spec.get("x-kubernetes-preserve-unknown-fields").is_none());
        let p = &spec["properties"];
        assert_eq!(p["replicas"]["type"], "integer");
        assert_eq!(p["ratio"]["type"], "number");
        assert_eq!(p["on"]["type"], "boolean");
        assert_eq!(p["ports"]["items"]["properties"]["name"]["type"], "string");
        assert_eq!(p["ports"]["items"]["properties"]["port"]["type"], "integer");
        assert_eq!(p["weights"]["items"]["type"], "number");
        assert_eq!(p["extra"]["x-kubernetes-preserve-unknown-fields"], true);
    }

    #[test]
    fn nulls_and_mixed_lists_name_the_field() {
        let e = infer(&json!({"a": null}), "spec").unwrap_err();
        assert!(e.starts_with("spec.a is null"), "{e}");
        let e = infer(&json!({"l": [1, "x"]}), "spec").unwrap_err();
        assert!(e.starts_with("spec.l[1] is string"), "{e}");
    }
}
