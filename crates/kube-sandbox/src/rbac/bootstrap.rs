//! The default roles and bindings kube-apiserver's `rbac/bootstrap-roles` post-start hook
//! creates (`cluster-admin`, `admin`, `edit`, `view`, `system:discovery`, `system:basic-user`,
//! `system:public-info-viewer`, the controllers' roles, ...), from upstream's generated
//! bootstrap policy (see `bootstrap/README.md`). Missing ones are created at start-up; existing
//! ones (a persisted sandbox, or edited by a user) are left as they are.

use std::sync::Arc;

use serde_json::Value;

use crate::ops::{self, WriteOpts};
use crate::state::State;

const FILES: &[(&str, &str)] = &[
    (
        "cluster-roles.yaml",
        include_str!("bootstrap/cluster-roles.yaml"),
    ),
    (
        "cluster-role-bindings.yaml",
        include_str!("bootstrap/cluster-role-bindings.yaml"),
    ),
    (
        "controller-roles.yaml",
        include_str!("bootstrap/controller-roles.yaml"),
    ),
    (
        "controller-role-bindings.yaml",
        include_str!("bootstrap/controller-role-bindings.yaml"),
    ),
    (
        "namespace-roles.yaml",
        include_str!("bootstrap/namespace-roles.yaml"),
    ),
    (
        "namespace-role-bindings.yaml",
        include_str!("bootstrap/namespace-role-bindings.yaml"),
    ),
];

/// Every bootstrap object, in file order (roles before their bindings).
pub fn objects() -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (file, text) in FILES {
        let list: Value =
            serde_saphyr::from_str(text).map_err(|e| format!("bootstrap policy {file}: {e}"))?;
        let Some(items) = list["items"].as_array() else {
            return Err(format!("bootstrap policy {file}: no items"));
        };
        out.extend(items.iter().cloned());
    }
    Ok(out)
}

/// Create the bootstrap roles and bindings that do not exist yet.
pub fn ensure(state: &Arc<State>) -> Result<(), String> {
    let opts = WriteOpts {
        field_manager: "kube-apiserver".into(),
        ..Default::default()
    };
    for obj in objects()? {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let plural = match kind {
            "ClusterRole" => super::CLUSTER_ROLES,
            "ClusterRoleBinding" => super::CLUSTER_ROLE_BINDINGS,
            "Role" => super::ROLES,
            "RoleBinding" => super::ROLE_BINDINGS,
            other => return Err(format!("bootstrap policy: unexpected kind {other:?}")),
        };
        let ns = obj["metadata"]["namespace"].as_str().map(String::from);
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if state
            .store
            .get(plural, ns.as_deref().unwrap_or_default(), name)
            .is_some()
        {
            continue;
        }
        let def = state.def_for_gr(plural).map_err(|e| e.message)?;
        ops::create(state, &def, ns.as_deref(), obj.clone(), &opts)
            .map_err(|e| format!("creating {kind} {name}: {}", e.message))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_parses_and_holds_the_roles_controllers_expect() {
        let objs = objects().expect("bootstrap policy parses");
        let names: Vec<&str> = objs
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        for want in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:discovery",
            "system:basic-user",
            "system:public-info-viewer",
            "system:controller:generic-garbage-collector",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
    }
}
