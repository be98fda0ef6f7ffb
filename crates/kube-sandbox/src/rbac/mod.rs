//! Authorization: RBAC as kube-apiserver evaluates it.
//!
//! The `system:masters` group is allowed everything (kube-apiserver's privileged-group
//! authorizer, ahead of RBAC); everyone else gets what their ClusterRoleBindings and, in the
//! request's namespace, RoleBindings grant ([`resolve`](Authorizer::resolve), which follows
//! `DefaultRuleResolver.VisitRulesFor`). The rules a user has in a namespace are cached per
//! user, groups and namespace and dropped as soon as any Role, ClusterRole or binding changes:
//! the authorizer reads the store's change feed before each decision, so a binding created by
//! one request applies to the next.
//!
//! [`rules`] matches rules to requests, [`bootstrap`] creates the default roles and bindings,
//! [`aggregate`] is the ClusterRole aggregation controller, [`escalation`] the checks on writing
//! roles and bindings, and [`attributes`] turns a request into what is authorized.

pub(crate) mod aggregate;
pub(crate) mod attributes;
pub(crate) mod bootstrap;
pub(crate) mod escalation;
pub(crate) mod rules;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;

use crate::auth::user::{MASTERS, UserInfo};
use crate::status::ApiError;
use crate::store::{Event, Store};
use rules::{Attributes, PolicyRule, go_quote};

/// The API group of RBAC objects.
pub const GROUP: &str = "rbac.authorization.k8s.io";
/// Storage key of Roles.
pub const ROLES: &str = "rbac.authorization.k8s.io/roles";
/// Storage key of ClusterRoles.
pub const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
/// Storage key of RoleBindings.
pub const ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/rolebindings";
/// Storage key of ClusterRoleBindings.
pub const CLUSTER_ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/clusterrolebindings";

/// Largest number of (user, namespace) rule sets kept; the cache starts over beyond it.
const CACHE_MAX: usize = 4096;

/// A rule and the binding that grants it (`RoleBinding "rb/ns" of Role "r" to User "u"`).
#[derive(Debug, Clone)]
pub struct SourcedRule {
    /// Who grants it, as the "allowed by" reason prints it.
    pub source: Arc<str>,
    /// The rule.
    pub rule: PolicyRule,
}

/// What one user holds in one namespace (plus cluster-wide).
#[derive(Debug, Default)]
pub struct Resolved {
    generation: u64,
    /// The rules, cluster-wide bindings first.
    pub rules: Vec<SourcedRule>,
    /// Bindings that did not resolve (`clusterrole.rbac.authorization.k8s.io "x" not found`).
    pub errors: Vec<String>,
}

/// A decision and its reason, as an authorizer returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed.
    pub allowed: bool,
    /// Why (`RBAC: allowed by ...`), or the resolution errors of a denial; may be empty.
    pub reason: String,
}

#[derive(Hash, PartialEq, Eq)]
struct CacheKey {
    name: String,
    groups: Vec<String>,
    namespace: String,
}

/// The RBAC authorizer of one sandbox.
#[derive(Debug)]
pub struct Authorizer {
    generation: AtomicU64,
    feed: Mutex<broadcast::Receiver<Arc<Event>>>,
    cache: Mutex<HashMap<CacheKey, Arc<Resolved>>>,
}

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.namespace)
    }
}

#[derive(Deserialize)]
struct RoleRef {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Subject {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Deserialize)]
struct Binding {
    #[serde(rename = "roleRef")]
    role_ref: RoleRef,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

#[derive(Deserialize)]
struct Role {
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
}

/// Does the binding subject name this user (`appliesToUser`)?
fn applies_to(user: &UserInfo, s: &Subject, binding_ns: &str) -> bool {
    match s.kind.as_str() {
        "User" => user.name == s.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = if s.namespace.is_empty() {
                binding_ns
            } else {
                &s.namespace
            };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    }
}

fn describe_subject(s: &Subject, binding_ns: &str) -> String {
    if s.kind == "ServiceAccount" {
        let ns = if s.namespace.is_empty() {
            binding_ns
        } else {
            &s.namespace
        };
        format!("{} {}", s.kind, go_quote(&format!("{}/{ns}", s.name)))
    } else {
        format!("{} {}", s.kind, go_quote(&s.name))
    }
}

/// The rules of the role a binding refers to, or the error a lister gives for it.
pub fn role_ref_rules(
    store: &Store,
    kind: &str,
    name: &str,
    ns: &str,
) -> Result<Vec<PolicyRule>, String> {
    let (gr, singular, ns) = match kind {
        "Role" => (ROLES, "role", ns),
        "ClusterRole" => (CLUSTER_ROLES, "clusterrole", ""),
        other => {
            return Err(format!(
                "unsupported role reference kind: {}",
                go_quote(other)
            ));
        }
    };
    let not_found = || format!("{singular}.{GROUP} {} not found", go_quote(name));
    let s = store.get(gr, ns, name).ok_or_else(not_found)?;
    let role: Role = serde_json::from_slice(&s.bytes).map_err(|e| e.to_string())?;
    Ok(role.rules.unwrap_or_default())
}

fn parse_binding(bytes: &[u8]) -> Option<Binding> {
    serde_json::from_slice(bytes).ok()
}

impl Authorizer {
    /// An authorizer following `store`'s changes.
    pub fn new(store: &Store) -> Self {
        Authorizer {
            generation: AtomicU64::new(0),
            feed: Mutex::new(store.subscribe()),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Read the change feed up to now; any RBAC change starts a new cache generation. Called
    /// before each decision and by the controller loop (so the feed never backs up).
    pub fn drain(&self) {
        let mut rx = self.feed.lock().unwrap_or_else(|p| p.into_inner());
        let mut changed = false;
        loop {
            match rx.try_recv() {
                Ok(ev) => changed |= ev.obj.key.gr.starts_with("rbac.authorization.k8s.io/"),
                Err(TryRecvError::Lagged(_)) => changed = true,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        if changed {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The rules `user` holds in `namespace` (cluster-wide ones only for "").
    pub fn resolve(&self, store: &Store, user: &UserInfo, namespace: &str) -> Arc<Resolved> {
        self.drain();
        let generation = self.generation.load(Ordering::SeqCst);
        let key = CacheKey {
            name: user.name.clone(),
            groups: user.groups.clone(),
            namespace: namespace.to_string(),
        };
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = cache.get(&key)
                && r.generation == generation
            {
                return r.clone();
            }
        }
        let resolved = Arc::new(compute(store, user, namespace, generation));
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(key, resolved.clone());
        resolved
    }

    /// Decide one request: `system:masters` may do anything; otherwise the first rule that
    /// allows it (`RBAC: allowed by ...`), or a denial carrying the resolution errors.
    pub fn authorize(&self, store: &Store, user: &UserInfo, a: &Attributes) -> Decision {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        let resolved = self.resolve(store, user, &a.namespace);
        if let Some(r) = resolved.rules.iter().find(|r| r.rule.allows(a)) {
            return Decision {
                allowed: true,
                reason: format!("RBAC: allowed by {}", r.source),
            };
        }
        Decision {
            allowed: false,
            reason: if resolved.errors.is_empty() {
                String::new()
            } else {
                format!("RBAC: {}", aggregate_errors(&resolved.errors))
            },
        }
    }

    /// Authorize or fail with kube-apiserver's 403.
    pub fn check(&self, store: &Store, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
        let d = self.authorize(store, user, a);
        if d.allowed {
            Ok(())
        } else {
            Err(forbidden(user, a, &d.reason))
        }
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several in brackets, duplicates once.
pub fn aggregate_errors(errors: &[String]) -> String {
    let mut seen = Vec::new();
    for e in errors {
        if !seen.contains(e) {
            seen.push(e.clone());
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

fn compute(store: &Store, user: &UserInfo, namespace: &str, generation: u64) -> Resolved {
    let mut out = Resolved {
        generation,
        ..Default::default()
    };
    visit_bindings(store, user, "", &mut out);
    if !namespace.is_empty() {
        visit_bindings(store, user, namespace, &mut out);
    }
    out
}

/// Add the rules of the bindings that name `user`: ClusterRoleBindings for `namespace` "",
/// otherwise that namespace's RoleBindings (`VisitRulesFor`, one half at a time).
fn visit_bindings(store: &Store, user: &UserInfo, namespace: &str, out: &mut Resolved) {
    let gr = if namespace.is_empty() {
        CLUSTER_ROLE_BINDINGS
    } else {
        ROLE_BINDINGS
    };
    for s in store.in_namespace(gr, namespace) {
        let Some(b) = parse_binding(&s.bytes) else {
            continue;
        };
        let Some(subject) = b
            .subjects
            .iter()
            .flatten()
            .find(|sub| applies_to(user, sub, namespace))
        else {
            continue;
        };
        match role_ref_rules(store, &b.role_ref.kind, &b.role_ref.name, namespace) {
            Ok(rules) => {
                let binding = if namespace.is_empty() {
                    format!("ClusterRoleBinding {}", go_quote(&s.key.name))
                } else {
                    format!(
                        "RoleBinding {}",
                        go_quote(&format!("{}/{namespace}", s.key.name))
                    )
                };
                let source: Arc<str> = format!(
                    "{binding} of {} {} to {}",
                    b.role_ref.kind,
                    go_quote(&b.role_ref.name),
                    describe_subject(subject, namespace)
                )
                .into();
                out.rules.extend(rules.into_iter().map(|rule| SourcedRule {
                    source: source.clone(),
                    rule,
                }));
            }
            Err(e) => out.errors.push(e),
        }
    }
}

/// kube-apiserver's 403 (`responsewriters.ForbiddenStatusError`): `configmaps is forbidden: User
/// "u" cannot list resource "configmaps" in API group "" in the namespace "ns"`, `... at the
/// cluster scope`, or `forbidden: User "u" cannot get path "/apis"`; `: <reason>` appended.
pub fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let name = go_quote(&user.name);
    let mut msg = if !a.resource_request {
        format!("User {name} cannot {} path {}", a.verb, go_quote(&a.path))
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {}", go_quote(&a.namespace))
        };
        format!(
            "User {name} cannot {} resource {} in API group {} {scope}",
            a.verb,
            go_quote(&resource),
            go_quote(&a.api_group)
        )
    };
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    forbidden_for(&a.api_group, &a.resource, &a.name, &msg)
}

/// `apierrors.NewForbidden(groupResource, name, err)`: the message prefixed with what is
/// forbidden, and `details` with the empty fields left out, as Go's `omitempty` does.
pub fn forbidden_for(group: &str, resource: &str, name: &str, err: &str) -> ApiError {
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let message = if resource.is_empty() && group.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {} is forbidden: {err}", go_quote(name))
    };
    let mut details = serde_json::Map::new();
    for (k, v) in [("name", name), ("group", group), ("kind", resource)] {
        if !v.is_empty() {
            details.insert(k.into(), json!(v));
        }
    }
    let mut e = ApiError::forbidden(message);
    e.details = Some(Box::new(Value::Object(details)));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_follow_kube_apiserver() {
        let user = UserInfo {
            name: "system:serviceaccount:ns:sa".into(),
            ..Default::default()
        };
        let a = Attributes {
            verb: "list".into(),
            namespace: "ns".into(),
            resource: "configmaps".into(),
            resource_request: true,
            ..Default::default()
        };
        assert_eq!(
            forbidden(&user, &a, "").message,
            "configmaps is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\""
        );
        let a = Attributes {
            verb: "get".into(),
            api_group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            name: "web".into(),
            resource_request: true,
            ..Default::default()
        };
        assert_eq!(
            forbidden(
                &user,
                &a,
                "RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"
            )
            .message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"deployments/scale\" in API group \"apps\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"
        );
        let a = Attributes {
            verb: "get".into(),
            path: "/metrics".into(),
            ..Default::default()
        };
        assert_eq!(
            forbidden(&user, &a, "").message,
            "forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/metrics\""
        );
    }
}
