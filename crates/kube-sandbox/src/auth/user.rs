//! Who a request is: `user.Info` (name, uid, groups, extra) and the well-known users and groups.
//! Authentication ([`super`]) produces it; RBAC ([`crate::rbac`]) decides on it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The group whose members may do anything.
pub const MASTERS: &str = "system:masters";
/// Every authenticated user is in this group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Anonymous requests are in this group.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// Every ServiceAccount is in this group.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// The user name of the sandbox's admin token.
pub const ADMIN_USER: &str = "kubectl-meta-sandbox-admin";

/// A user, as `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:ns:sa` for ServiceAccounts).
    pub name: String,
    /// UID, if known.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The sandbox admin (its own bearer token): in `system:masters`.
    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN_USER.into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// `system:anonymous`, in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// A ServiceAccount's user.
    pub fn service_account(ns: &str, name: &str, uid: &str) -> Self {
        UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            uid: uid.into(),
            groups: service_account_groups(ns),
            extra: BTreeMap::new(),
        }
    }

    /// As `authentication.k8s.io/v1 UserInfo` (empty fields left out).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.groups.is_empty() {
            v["groups"] = json!(self.groups);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }

    /// From `authentication.k8s.io/v1 UserInfo`-like fields (SubjectAccessReview's spec).
    pub fn from_spec(spec: &Value) -> Self {
        let strings = |v: &Value| -> Vec<String> {
            // An ExtraValue decoded from protobuf arrives as `{"items": [...]}`.
            let v = v.get("items").unwrap_or(v);
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        };
        let extra = spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default();
        UserInfo {
            name: spec["user"].as_str().unwrap_or_default().into(),
            uid: spec["uid"].as_str().unwrap_or_default().into(),
            groups: strings(&spec["groups"]),
            extra,
        }
    }
}

/// The groups of ServiceAccounts in `ns`, `system:authenticated` last.
pub fn service_account_groups(ns: &str) -> Vec<String> {
    vec![
        SERVICE_ACCOUNTS.into(),
        format!("{SERVICE_ACCOUNTS}:{ns}"),
        AUTHENTICATED.into(),
    ]
}

/// `system:serviceaccount:NS:NAME` split into namespace and name.
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}
