//! The checks kube-apiserver's RBAC registry makes on writing roles and bindings
//! (`pkg/registry/rbac/*/policybased`): nobody grants what they do not hold.
//!
//! - A Role or ClusterRole may be created or updated by `system:masters`, by whoever may
//!   `escalate` it, or by a user who already holds every rule it grants; a ClusterRole with an
//!   `aggregationRule` needs full authority (`*` on everything).
//! - A RoleBinding or ClusterRoleBinding may be written by `system:masters`, by whoever may
//!   `bind` the role it refers to, or by a user who holds every rule of that role.

use serde_json::Value;

use super::rules::{Attributes, PolicyRule, escalation_message, uncovered};
use super::{GROUP, forbidden_for, role_ref_rules};
use crate::auth::user::{MASTERS, UserInfo};
use crate::state::State;
use crate::status::{ApiError, ApiResult, Target};

fn allowed(
    state: &State,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    name: &str,
    ns: &str,
) -> bool {
    let a = Attributes {
        verb: verb.into(),
        namespace: ns.into(),
        api_group: GROUP.into(),
        resource: resource.into(),
        name: name.into(),
        resource_request: true,
        ..Default::default()
    };
    state.rbac.authorize(&state.store, user, &a).allowed
}

/// `ConfirmNoEscalation`: does `user` hold all of `wanted` in `ns`? The message when not.
///
/// The registry resolves roles through its own storage, whose NotFound errors are named after
/// the resource of the request being served: a binding to a missing ClusterRole shows up as
/// `roles.rbac.authorization.k8s.io "x" not found` while a Role is written, as kube-apiserver
/// words it.
fn confirm_no_escalation(
    state: &State,
    user: &UserInfo,
    resource: &str,
    ns: &str,
    wanted: &[PolicyRule],
) -> Result<(), String> {
    let held = state.rbac.resolve(&state.store, user, ns);
    let missing = uncovered(held.rules.iter().map(|r| &r.rule), wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let errors: Vec<String> = held
        .errors
        .iter()
        .map(|e| {
            ["clusterrole.", "role."]
                .iter()
                .find_map(|p| e.strip_prefix(p))
                .map(|rest| format!("{resource}.{rest}"))
                .unwrap_or_else(|| e.clone())
        })
        .collect();
    Err(escalation_message(user, missing, &errors))
}

fn full_authority() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            ..Default::default()
        },
        PolicyRule {
            verbs: vec!["*".into()],
            non_resource_urls: vec!["*".into()],
            ..Default::default()
        },
    ]
}

/// Check a write of `obj` (the object as it will be stored) to RBAC resource `resource`
/// (`roles`, `clusterroles`, `rolebindings`, `clusterrolebindings`) in `ns` by `user`.
pub fn check(
    state: &State,
    user: &UserInfo,
    resource: &str,
    ns: &str,
    obj: &Value,
) -> ApiResult<()> {
    if user.groups.iter().any(|g| g == MASTERS) {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let deny = |msg: &str| forbidden_for(GROUP, resource, name, msg);
    match resource {
        "roles" | "clusterroles" => {
            if allowed(state, user, "escalate", resource, name, ns) {
                return Ok(());
            }
            let rules: Vec<PolicyRule> =
                serde_json::from_value(obj["rules"].clone()).unwrap_or_default();
            confirm_no_escalation(state, user, resource, ns, &rules).map_err(|m| deny(&m))?;
            let aggregates = obj.get("aggregationRule").is_some_and(|r| !r.is_null());
            if resource == "clusterroles" && aggregates {
                confirm_no_escalation(state, user, resource, ns, &full_authority()).map_err(
                    |_| deny("must have cluster-admin privileges to use the aggregationRule"),
                )?;
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = obj["roleRef"]["kind"].as_str().unwrap_or_default();
            let role = obj["roleRef"]["name"].as_str().unwrap_or_default();
            let role_resource = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            if allowed(state, user, "bind", role_resource, role, ns) {
                return Ok(());
            }
            // Named after the request's resource, as the registry's NotFound is (see above).
            let rules = role_ref_rules(&state.store, kind, role, ns).map_err(|_| {
                ApiError::not_found(Target {
                    group: GROUP,
                    resource,
                    name: role,
                })
            })?;
            confirm_no_escalation(state, user, resource, ns, &rules).map_err(|m| deny(&m))
        }
        _ => Ok(()),
    }
}
