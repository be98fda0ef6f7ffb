//! ControllerRef ownership: which objects a parent claims, adopts and releases.
//!
//! Implements the Three Laws of the ControllerRef proposal as pure functions: a parent's
//! children are the objects whose ControllerRef points at it and that still match its selector;
//! orphans that match are adopted; owned objects that stop matching are released; objects
//! controlled by anyone else are never touched (the caller never even passes them in). A
//! parent that is being deleted neither adopts nor releases.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::k8s::object;
use kube_apimachinery::selector::LabelSelector;

/// The label that generated selectors use (`generateSelector: true`).
pub const CONTROLLER_UID_LABEL: &str = "controller-uid";

/// The result of claiming one child type for one parent.
#[derive(Debug, Default, Clone)]
pub struct Claims {
    /// Objects the parent owns after this sync (already owned and matching, plus adoptions).
    pub children: Vec<Arc<Value>>,
    /// Orphans to adopt (also present in `children`).
    pub adopt: Vec<Arc<Value>>,
    /// Owned objects that no longer match and must be released.
    pub release: Vec<Arc<Value>>,
}

/// Sort candidates into children, adoptions and releases.
///
/// `owned` are objects whose ControllerRef uid is the parent's uid; `orphans` are objects
/// without a ControllerRef in the parent's scope (already filtered by the selector or not:
/// they are matched again here).
pub fn claim(
    parent_deleting: bool,
    selector: &LabelSelector,
    owned: Vec<Arc<Value>>,
    orphans: Vec<Arc<Value>>,
) -> Claims {
    let mut claims = Claims::default();
    for obj in owned {
        let labels = object::labels(&obj);
        if selector.matches(&labels) {
            claims.children.push(obj);
        } else if !parent_deleting && !object::is_deleting(&obj) {
            claims.release.push(obj);
        }
    }
    if !parent_deleting {
        for obj in orphans {
            if object::is_deleting(&obj) || object::controller_ref(&obj).is_some() {
                continue;
            }
            if selector.matches(&object::labels(&obj)) {
                claims.adopt.push(Arc::clone(&obj));
                claims.children.push(obj);
            }
        }
    }
    claims
        .children
        .sort_by(|a, b| object::ObjectKey::of(a).cmp(&object::ObjectKey::of(b)));
    claims
}

/// The ownerReference a parent puts on its children (controller, blocking deletion).
pub fn controller_ref_for(parent: &Value) -> Value {
    json!({
        "apiVersion": object::api_version(parent).unwrap_or_default(),
        "kind": object::kind(parent).unwrap_or_default(),
        "name": object::name(parent).unwrap_or_default(),
        "uid": object::uid(parent).unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// `metadata.ownerReferences` of `obj` with the parent's ControllerRef added (adoption).
pub fn with_controller_ref(obj: &Value, parent: &Value) -> Vec<Value> {
    let mut refs = raw_owner_refs(obj);
    refs.retain(|r| r.get("uid").and_then(Value::as_str) != object::uid(parent));
    refs.push(controller_ref_for(parent));
    refs
}

/// `metadata.ownerReferences` of `obj` without any reference to `parent_uid` (release).
pub fn without_owner(obj: &Value, parent_uid: &str) -> Vec<Value> {
    let mut refs = raw_owner_refs(obj);
    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(parent_uid));
    refs
}

fn raw_owner_refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, labels: Value, owner: Option<&str>, deleting: bool) -> Arc<Value> {
        let mut o = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": labels}});
        if let Some(uid) = owner {
            o["metadata"]["ownerReferences"] = json!([{"apiVersion": "x/v1", "kind": "P",
                "name": "p", "uid": uid, "controller": true}]);
        }
        if deleting {
            o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(o)
    }

    fn sel() -> LabelSelector {
        LabelSelector::parse("app=a").expect("selector")
    }

    fn names(v: &[Arc<Value>]) -> Vec<&str> {
        v.iter().filter_map(|o| object::name(o)).collect()
    }

    #[test]
    fn owned_matching_are_children_and_nonmatching_are_released() {
        let c = claim(
            false,
            &sel(),
            vec![
                obj("b", json!({"app": "a"}), Some("u"), false),
                obj("x", json!({"app": "other"}), Some("u"), false),
            ],
            vec![],
        );
        assert_eq!(names(&c.children), vec!["b"]);
        assert_eq!(names(&c.release), vec!["x"]);
        assert!(c.adopt.is_empty());
    }

    #[test]
    fn matching_orphans_are_adopted_others_ignored() {
        let c = claim(
            false,
            &sel(),
            vec![obj("a", json!({"app": "a"}), Some("u"), false)],
            vec![
                obj("o1", json!({"app": "a"}), None, false),
                obj("o2", json!({"app": "b"}), None, false),
                obj("o3", json!({"app": "a"}), None, true),
                obj("theirs", json!({"app": "a"}), Some("someone-else"), false),
            ],
        );
        assert_eq!(names(&c.children), vec!["a", "o1"]);
        assert_eq!(names(&c.adopt), vec!["o1"]);
    }

    #[test]
    fn deleting_parent_neither_adopts_nor_releases() {
        let c = claim(
            true,
            &sel(),
            vec![
                obj("a", json!({"app": "a"}), Some("u"), false),
                obj("x", json!({"app": "no"}), Some("u"), false),
            ],
            vec![obj("o", json!({"app": "a"}), None, false)],
        );
        assert_eq!(names(&c.children), vec!["a"]);
        assert!(c.adopt.is_empty() && c.release.is_empty());
    }

    #[test]
    fn owner_ref_edits_keep_other_owners() {
        let parent =
            json!({"apiVersion": "x/v1", "kind": "P", "metadata": {"name": "p", "uid": "u"}});
        let mut o = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "z"}]}});
        let refs = with_controller_ref(&o, &parent);
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[1]["controller"], true);
        assert_eq!(refs[1]["blockOwnerDeletion"], true);
        o["metadata"]["ownerReferences"] = Value::Array(refs);
        let released = without_owner(&o, "u");
        assert_eq!(released.len(), 1);
        assert_eq!(released[0]["uid"], "z");
    }
}
