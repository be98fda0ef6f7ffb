//! Replay: comparing a hook's answer to the same request before and after a reload, so a
//! developer sees the effect of an edit (which children, which fields), not only that it
//! happened.
//!
//! Answers are compared after keying `children` (and map `outputs`) by identity
//! (`Kind.apiVersion namespace/name`), so a reordered list is no change and a changed child is
//! reported field by field.

use serde_json::{Map, Value};

use crate::plan::apply::{FieldChange, value_changes};

/// The differences between two hook answers (empty when they mean the same).
pub fn response_changes(before: &Value, after: &Value) -> Vec<FieldChange> {
    value_changes(&keyed(before), &keyed(after))
}

/// `children` / `outputs` / `attachments` lists turned into maps keyed by object identity.
fn keyed(answer: &Value) -> Value {
    let Some(obj) = answer.as_object() else {
        return answer.clone();
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let v = match (k.as_str(), v) {
            ("children" | "outputs" | "attachments", Value::Array(items)) => {
                Value::Object(by_identity(items))
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

fn by_identity(items: &[Value]) -> Map<String, Value> {
    let mut map = Map::new();
    for (i, item) in items.iter().enumerate() {
        let s = |p: &str| item.pointer(p).and_then(Value::as_str).unwrap_or("");
        let mut id = format!("{}.{}", s("/kind"), s("/apiVersion"));
        id.push(' ');
        if !s("/metadata/namespace").is_empty() {
            id.push_str(s("/metadata/namespace"));
            id.push('/');
        }
        id.push_str(s("/metadata/name"));
        if map.contains_key(&id) || s("/metadata/name").is_empty() {
            id.push_str(&format!(" #{i}"));
        }
        map.insert(id, item.clone());
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    #[test]
    fn same_answer_in_another_order_is_no_change() {
        let a = json!({"status": {"n": 2}, "children": [pod("a", "x"), pod("b", "x")]});
        let b = json!({"status": {"n": 2.0}, "children": [pod("b", "x"), pod("a", "x")]});
        assert_eq!(response_changes(&a, &b), vec![]);
    }

    #[test]
    fn changed_added_and_removed_children_are_named() {
        let a = json!({"children": [pod("a", "x"), pod("b", "x")]});
        let b = json!({"children": [pod("a", "y"), pod("c", "x")], "resyncAfterSeconds": 5});
        let got: Vec<(String, bool, bool)> = response_changes(&a, &b)
            .into_iter()
            .map(|c| (c.path, c.old.is_some(), c.new.is_some()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "children[\"Pod.v1 a\"].spec.containers[name=c].image".to_string(),
                    true,
                    true
                ),
                ("children[\"Pod.v1 b\"]".to_string(), true, false),
                ("children[\"Pod.v1 c\"]".to_string(), false, true),
                ("resyncAfterSeconds".to_string(), false, true),
            ]
        );
    }

    #[test]
    fn nameless_or_duplicate_children_do_not_collide() {
        let nameless = json!({"apiVersion": "v1", "kind": "Pod"});
        let a = json!({"children": [nameless.clone(), pod("a", "x"), pod("a", "x")]});
        assert_eq!(response_changes(&a, &a), vec![]);
        let b = json!({"children": [nameless, pod("a", "x")]});
        assert_eq!(response_changes(&a, &b).len(), 1);
    }
}
