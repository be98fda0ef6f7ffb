//! Naming a controller's children: [`ChildType`] (a declared child resource) and [`ChildId`]
//! (one child: type key plus namespace/name). The lowest layer of the plan: `plan`, `rollout`
//! and `planner` all use it, and it uses none of them.

use serde::Serialize;
use serde_json::Value;

use crate::k8s::object::ObjectKey;
use crate::spec::UpdateMethod;

/// A declared child type of a controller.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildType {
    /// `Kind.apiVersion`, the hook's map key.
    pub key: String,
    /// apiVersion.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Update strategy for existing children.
    pub method: UpdateMethod,
}

/// Identifies one child: its type key plus namespace/name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ChildId {
    /// `Kind.apiVersion`.
    #[serde(rename = "type")]
    pub type_key: String,
    /// Namespace and name.
    #[serde(flatten)]
    pub key: ObjectKeyView,
}

/// Serializable view of an [`ObjectKey`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectKeyView {
    /// Namespace (absent for cluster-scoped objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ChildId {
    /// Build from a type key and an object.
    pub fn of(type_key: &str, obj: &Value) -> Self {
        let k = ObjectKey::of(obj).unwrap_or_else(|| ObjectKey::new(None, ""));
        ChildId {
            type_key: type_key.to_string(),
            key: ObjectKeyView {
                namespace: k.namespace,
                name: k.name,
            },
        }
    }

    /// The [`ObjectKey`] of the child.
    pub fn object_key(&self) -> ObjectKey {
        ObjectKey::new(self.key.namespace.as_deref(), &self.key.name)
    }

    /// `namespace/name` (or `name`).
    pub fn object(&self) -> String {
        match &self.key.namespace {
            Some(ns) => format!("{ns}/{}", self.key.name),
            None => self.key.name.clone(),
        }
    }
}

impl std::fmt::Display for ChildId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.type_key, self.object())
    }
}
