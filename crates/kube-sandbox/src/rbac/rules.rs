//! RBAC policy rules and how they match a request, as kube-apiserver's RBAC authorizer
//! (`plugin/pkg/auth/authorizer/rbac`) and its helpers (`pkg/apis/rbac/v1/evaluation_helpers.go`,
//! `component-helpers/auth/rbac/validation`) evaluate them: verbs with `*`, API groups, resources
//! with subresources and `*/subresource`, resource names, non-resource URLs with a trailing `*`;
//! and whether one set of rules covers another (the escalation check).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::auth::user::UserInfo;

/// One `PolicyRule` of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyRule {
    /// Verbs (`get`, `*`).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`""` for core, `*`).
    #[serde(default, rename = "apiGroups", skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `pods/log`, `*/status`, `*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names the rule is limited to (none: every name).
    #[serde(
        default,
        rename = "resourceNames",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_names: Vec<String>,
    /// Non-resource URLs (`/healthz`, `/api/*`).
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// What a request asks for, as kube-apiserver's `authorizer.Attributes`.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    /// The verb (`get`, `list`, `watch`, `create`, ..., or an HTTP verb for a path).
    pub verb: String,
    /// Namespace ("" for cluster scope).
    pub namespace: String,
    /// API group ("" for core).
    pub api_group: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource ("" for none).
    pub subresource: String,
    /// Object name ("" for none).
    pub name: String,
    /// Non-resource path.
    pub path: String,
    /// A resource request (false: a non-resource path).
    pub resource_request: bool,
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], want: &[String]) -> bool {
    want.iter().all(|w| has(set, w))
}

fn url_matches(rule_url: &str, path: &str) -> bool {
    rule_url == "*"
        || rule_url == path
        || rule_url
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

impl PolicyRule {
    /// Does this rule allow the request (`RuleAllows`)?
    pub fn allows(&self, a: &Attributes) -> bool {
        let verb = self.verbs.iter().any(|v| v == "*" || *v == a.verb);
        if !verb {
            return false;
        }
        if !a.resource_request {
            return self
                .non_resource_urls
                .iter()
                .any(|u| url_matches(u, &a.path));
        }
        let group = self
            .api_groups
            .iter()
            .any(|g| g == "*" || *g == a.api_group);
        group && self.resource_matches(a) && self.name_matches(&a.name)
    }

    fn resource_matches(&self, a: &Attributes) -> bool {
        self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            if a.subresource.is_empty() {
                return *r == a.resource;
            }
            r.split_once('/')
                .is_some_and(|(res, sub)| sub == a.subresource && (res == a.resource || res == "*"))
        })
    }

    fn name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || has(&self.resource_names, name)
    }

    /// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`, as `CompactString` prints
    /// a rule in escalation errors.
    pub fn compact_string(&self) -> String {
        let q = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
            format!("[{}]", items.join(" "))
        };
        let mut parts = Vec::new();
        if !self.api_groups.is_empty() {
            parts.push(format!("APIGroups:{}", q(&self.api_groups)));
        }
        if !self.resources.is_empty() {
            parts.push(format!("Resources:{}", q(&self.resources)));
        }
        if !self.non_resource_urls.is_empty() {
            parts.push(format!("NonResourceURLs:{}", q(&self.non_resource_urls)));
        }
        if !self.resource_names.is_empty() {
            parts.push(format!("ResourceNames:{}", q(&self.resource_names)));
        }
        if !self.verbs.is_empty() {
            parts.push(format!("Verbs:{}", q(&self.verbs)));
        }
        format!("{{{}}}", parts.join(", "))
    }
}

/// A string as Go's `%q` prints it (the names here are plain, so escaping `"` and `\` suffices).
pub fn go_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `["a" "b"]`, as Go's `%q` prints a string slice.
pub fn go_quote_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", items.join(" "))
}

/// Split a rule into rules of one group, one resource, one verb and at most one name
/// (`BreakdownRule`).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for g in &rule.api_groups {
        for r in &rule.resources {
            for v in &rule.verbs {
                let one = |names: Vec<String>| PolicyRule {
                    verbs: vec![v.clone()],
                    api_groups: vec![g.clone()],
                    resources: vec![r.clone()],
                    resource_names: names,
                    non_resource_urls: vec![],
                };
                if rule.resource_names.is_empty() {
                    out.push(one(vec![]));
                } else {
                    for n in &rule.resource_names {
                        out.push(one(vec![n.clone()]));
                    }
                }
            }
        }
    }
    for u in &rule.non_resource_urls {
        for v in &rule.verbs {
            out.push(PolicyRule {
                verbs: vec![v.clone()],
                non_resource_urls: vec![u.clone()],
                ..Default::default()
            });
        }
    }
    out
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, "*") || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|p| {
        owner.iter().any(|o| {
            o == p
                || o.strip_suffix('*')
                    .is_some_and(|prefix| p.starts_with(prefix.trim_end_matches('*')))
        })
    })
}

fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover(&owner.resources, &sub.resources);
    let urls = urls_cover(&owner.non_resource_urls, &sub.non_resource_urls);
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && names && urls
}

/// The parts of `wanted` that `owner` does not cover (`Covers`); empty when covered.
pub fn uncovered<'a>(
    owner: impl Iterator<Item = &'a PolicyRule> + Clone,
    wanted: &[PolicyRule],
) -> Vec<PolicyRule> {
    wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.clone().any(|o| rule_covers(o, sub)))
        .collect()
}

/// Merge rules of one group, one resource and at most one name into one rule per
/// group/resource/name (`CompactRules`), for a shorter escalation message.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let is_simple = r.resource_names.len() <= 1
            && r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1;
        if !is_simple {
            out.push(r);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == r.api_groups
                && s.resources == r.resources
                && s.resource_names == r.resource_names
        }) {
            Some(s) => s.verbs.extend(r.verbs),
            None => simple.push(r),
        }
    }
    out.extend(simple);
    out
}

/// kube-apiserver's escalation message (`ConfirmNoEscalation`): `user "bob" (groups=[...]) is
/// attempting to grant RBAC permissions not currently held:` and one compact rule per line,
/// sorted; with `; resolution errors: [...]` when some of the user's bindings did not resolve.
pub fn escalation_message(user: &UserInfo, missing: Vec<PolicyRule>, errors: &[String]) -> String {
    let lines: BTreeSet<String> = compact(missing)
        .iter()
        .map(PolicyRule::compact_string)
        .collect();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_quote_list(&user.groups),
        lines.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            super::aggregate_errors(errors)
        ));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        PolicyRule {
            verbs: v(verbs),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: vec![],
        }
    }

    fn attrs(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            namespace: "ns".into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            path: String::new(),
            resource_request: true,
        }
    }

    #[test]
    fn verbs_groups_resources_subresources_and_names_match_like_rbac() {
        let r = rule(&["get", "list"], &[""], &["pods", "pods/log"], &[]);
        assert!(r.allows(&attrs("get", "", "pods", "", "p")));
        assert!(r.allows(&attrs("get", "", "pods", "log", "p")));
        assert!(!r.allows(&attrs("get", "", "pods", "exec", "p")));
        assert!(!r.allows(&attrs("get", "apps", "pods", "", "p")));
        assert!(!r.allows(&attrs("delete", "", "pods", "", "p")));
        let star = rule(&["*"], &["*"], &["*/status"], &[]);
        assert!(star.allows(&attrs("update", "apps", "deployments", "status", "d")));
        assert!(!star.allows(&attrs("update", "apps", "deployments", "", "d")));
        let named = rule(&["get"], &[""], &["configmaps"], &["a"]);
        assert!(named.allows(&attrs("get", "", "configmaps", "", "a")));
        assert!(!named.allows(&attrs("get", "", "configmaps", "", "b")));
        assert!(!named.allows(&attrs("list", "", "configmaps", "", "")));
        let urls = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: vec!["/healthz".into(), "/api/*".into()],
            ..Default::default()
        };
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Default::default()
        };
        assert!(urls.allows(&path("/healthz")));
        assert!(urls.allows(&path("/api/v1")));
        assert!(!urls.allows(&path("/apis")));
    }

    #[test]
    fn covers_breaks_rules_down_and_reports_what_is_missing() {
        let owner = [rule(&["get", "list"], &[""], &["pods", "*/status"], &[])];
        let wanted = [rule(&["get"], &[""], &["pods", "services/status"], &[])];
        assert!(uncovered(owner.iter(), &wanted).is_empty());
        let wanted = [rule(&["get", "delete"], &[""], &["pods"], &[])];
        let missing = uncovered(owner.iter(), &wanted);
        assert_eq!(missing, vec![rule(&["delete"], &[""], &["pods"], &[])]);
        let named_owner = [rule(&["get"], &[""], &["configmaps"], &["a"])];
        assert!(
            uncovered(
                named_owner.iter(),
                &[rule(&["get"], &[""], &["configmaps"], &["a"])]
            )
            .is_empty()
        );
        assert_eq!(
            uncovered(
                named_owner.iter(),
                &[rule(&["get"], &[""], &["configmaps"], &[])]
            )
            .len(),
            1
        );
    }

    #[test]
    fn escalation_message_is_worded_like_kube_apiserver() {
        let user = UserInfo {
            name: "bob".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        };
        let missing = vec![
            rule(&["get"], &[""], &["secrets"], &[]),
            rule(&["list"], &[""], &["secrets"], &[]),
        ];
        assert_eq!(
            escalation_message(&user, missing, &[]),
            "user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
        );
    }
}
