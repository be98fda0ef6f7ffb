//! The ClusterRole aggregation controller, as kube-controller-manager's
//! `clusterrole-aggregation` runs it: a ClusterRole with an `aggregationRule` gets, as its
//! rules, the rules of every other ClusterRole its `clusterRoleSelectors` select (each
//! selector in turn, roles sorted by name, duplicates once).

use kube_apimachinery::selector::LabelSelector;
use serde_json::{Value, json};

use super::CLUSTER_ROLES;
use super::rules::PolicyRule;
use crate::ops;
use crate::state::State;
use crate::store::ObjKey;

/// Bring every aggregated ClusterRole up to date (after any ClusterRole changed).
pub fn sync_all(state: &State) {
    for s in state.store.in_namespace(CLUSTER_ROLES, "") {
        let Ok(v) = s.value() else { continue };
        if v.get("aggregationRule").is_some_and(|r| !r.is_null()) {
            sync(state, &s.key.name);
        }
    }
}

/// The rules an aggregated ClusterRole should have, or None if it aggregates nothing.
fn aggregated_rules(state: &State, name: &str, rule: &Value) -> Option<Vec<Value>> {
    let selectors = rule["clusterRoleSelectors"].as_array()?;
    let mut roles: Vec<(String, Value)> = state
        .store
        .in_namespace(CLUSTER_ROLES, "")
        .iter()
        .filter(|s| s.key.name != name)
        .filter_map(|s| Some((s.key.name.clone(), s.value().ok()?)))
        .collect();
    roles.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Value> = Vec::new();
    let mut seen: Vec<PolicyRule> = Vec::new();
    for sel in selectors {
        let Ok(selector) = LabelSelector::from_label_selector(sel) else {
            continue;
        };
        for (_, role) in &roles {
            if !selector.matches_json(role["metadata"].get("labels")) {
                continue;
            }
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

/// Bring one aggregated ClusterRole up to date.
pub fn sync(state: &State, name: &str) {
    let key = ObjKey {
        gr: CLUSTER_ROLES.into(),
        ns: String::new(),
        name: name.to_string(),
    };
    let Some(current) = state.store.get(CLUSTER_ROLES, "", name) else {
        return;
    };
    let Ok(v) = current.value() else { return };
    let Some(rules) = aggregated_rules(state, name, &v["aggregationRule"]) else {
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
