//! The ClusterRole aggregation controller, as kube-controller-manager's
//! `clusterrole-aggregation` runs it: a ClusterRole with an `aggregationRule` gets, as its
//! rules, the rules of every other ClusterRole its `clusterRoleSelectors` select (each
//! selector in turn, roles sorted by name, duplicates once).

use std::sync::Arc;

use kube_apimachinery::selector::LabelSelector;
use serde_json::{Value, json};

use super::CLUSTER_ROLES;
use super::rules::PolicyRule;
use crate::ops;
use crate::state::State;
use crate::store::{ObjKey, Stored};

/// Bring every aggregated ClusterRole up to date (after any ClusterRole changed). Selectors
/// are matched against the stored labels, so only the selected roles are parsed.
pub fn sync_all(state: &State) {
    let roles = state.store.in_namespace(CLUSTER_ROLES, "");
    for s in &roles {
        // Cheap pre-check on the raw bytes before parsing.
        if !contains(&s.bytes, b"\"aggregationRule\"") {
            continue;
        }
        let Ok(v) = s.value() else { continue };
        if v.get("aggregationRule").is_some_and(|r| !r.is_null()) {
            sync(state, &s.key.name, &v["aggregationRule"], &roles);
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The rules an aggregated ClusterRole should have, or None if it aggregates nothing.
fn aggregated_rules(name: &str, rule: &Value, roles: &[Arc<Stored>]) -> Option<Vec<Value>> {
    let selectors = rule["clusterRoleSelectors"].as_array()?;
    let mut out: Vec<Value> = Vec::new();
    let mut seen: Vec<PolicyRule> = Vec::new();
    for sel in selectors {
        let Ok(selector) = LabelSelector::from_label_selector(sel) else {
            continue;
        };
        // `in_namespace` lists by name, the order upstream sorts the selected roles in.
        for s in roles {
            if s.key.name == name || !selector.matches_with(|k| s.label(k)) {
                continue;
            }
            let Ok(role) = s.value() else { continue };
            for r in role["rules"].as_array().into_iter().flatten() {
                let Ok(parsed) = serde_json::from_value::<PolicyRule>(r.clone()) else {
                    continue;
                };
                if !seen.contains(&parsed) {
                    seen.push(parsed);
                    out.push(r.clone());
                }
            }
        }
    }
    Some(out)
}

/// Bring one aggregated ClusterRole (with `aggregation_rule`) up to date.
fn sync(state: &State, name: &str, aggregation_rule: &Value, roles: &[Arc<Stored>]) {
    let key = ObjKey {
        gr: CLUSTER_ROLES.into(),
        ns: String::new(),
        name: name.to_string(),
    };
    let Some(rules) = aggregated_rules(name, aggregation_rule, roles) else {
        return;
    };
    let result = ops::mutate(state, &key, |obj| {
        let want = Value::Array(rules.clone());
        if obj.get("rules").unwrap_or(&json!([])) == &want {
            return false;
        }
        obj["rules"] = want;
        true
    });
    if let Err(e) = result {
        tracing::warn!(role = name, error = %e, "could not aggregate ClusterRole");
    }
}
