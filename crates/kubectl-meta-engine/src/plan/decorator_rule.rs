//! Which objects a DecoratorController selects: its target rules, as pure functions.
//!
//! A definition's `spec.resources` lists target rules; each names a resource and optionally a
//! `labelSelector` and an `annotationSelector`. An object of that resource is selected when one
//! of the rules for its resource matches both its labels and its annotations (an absent
//! selector matches everything). The live path ([`crate::kinds::decorator`]) and `dryrun` both select
//! targets with [`TargetRule::matches`] / [`selects`].

use serde_json::Value;

use crate::k8s::object;
use crate::spec::DecoratorResourceRule;
use kube_apimachinery::selector::{LabelSelector, SelectorError};

/// One target rule of a DecoratorController: both parts must match (an absent part matches
/// everything).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetRule {
    /// The rule's `labelSelector`, matched against the object's labels.
    pub labels: Option<LabelSelector>,
    /// The rule's `annotationSelector`, matched against the object's annotations.
    pub annotations: Option<LabelSelector>,
}

/// A target rule whose selector does not parse; names the field (`spec.resources[i]....`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TargetRuleError {
    /// The `labelSelector` is invalid.
    #[error("spec.resources[{index}].labelSelector: {source}")]
    Labels {
        /// Index of the rule in `spec.resources`.
        index: usize,
        /// Why the selector was rejected.
        source: SelectorError,
    },
    /// The `annotationSelector` is invalid.
    #[error("spec.resources[{index}].annotationSelector: {source}")]
    Annotations {
        /// Index of the rule in `spec.resources`.
        index: usize,
        /// Why the selector was rejected.
        source: SelectorError,
    },
}

impl TargetRule {
    /// The rule of `spec.resources[index]`.
    pub fn from_spec(index: usize, rule: &DecoratorResourceRule) -> Result<Self, TargetRuleError> {
        let labels = rule
            .label_selector
            .as_ref()
            .map(LabelSelector::from_label_selector)
            .transpose()
            .map_err(|source| TargetRuleError::Labels { index, source })?;
        let annotations = rule
            .annotation_selector
            .as_ref()
            .map(|s| s.selector())
            .transpose()
            .map_err(|source| TargetRuleError::Annotations { index, source })?;
        Ok(TargetRule {
            labels,
            annotations,
        })
    }

    /// Does this rule select `obj` (labels and annotations both match)?
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|s| s.matches(&object::labels(obj)))
            && self
                .annotations
                .as_ref()
                .is_none_or(|s| s.matches(&object::annotations(obj)))
    }
}

/// Is `obj` selected by one of `rules` (the rules of its resource)?
pub fn selects(rules: &[TargetRule], obj: &Value) -> bool {
    rules.iter().any(|r| r.matches(obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> DecoratorResourceRule {
        serde_json::from_value(v).expect("rule")
    }

    fn obj(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels, "annotations": annotations}})
    }

    #[test]
    fn absent_selectors_match_everything() {
        let r = TargetRule::from_spec(0, &rule(json!({"apiVersion": "v1", "resource": "pods"})))
            .expect("rule");
        assert!(r.matches(&json!({"metadata": {"name": "x"}})));
        assert!(r.matches(&obj(json!({"a": "b"}), json!({"c": "d"}))));
    }

    #[test]
    fn both_labels_and_annotations_must_match() {
        let r = TargetRule::from_spec(
            0,
            &rule(json!({"apiVersion": "v1", "resource": "pods",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "annotationSelector": {"matchExpressions": [
                    {"key": "expose", "operator": "Exists"}]}})),
        )
        .expect("rule");
        assert!(r.matches(&obj(json!({"app": "web"}), json!({"expose": "yes"}))));
        assert!(!r.matches(&obj(json!({"app": "web"}), json!({}))));
        assert!(!r.matches(&obj(json!({"app": "db"}), json!({"expose": "yes"}))));
        assert!(!r.matches(&obj(json!({}), json!({}))));
    }

    #[test]
    fn one_matching_rule_of_several_selects() {
        let a = TargetRule::from_spec(
            0,
            &rule(json!({"apiVersion": "v1", "resource": "pods",
                "labelSelector": {"matchLabels": {"app": "web"}}})),
        )
        .expect("rule");
        let b = TargetRule::from_spec(
            1,
            &rule(json!({"apiVersion": "v1", "resource": "pods",
                "annotationSelector": {"matchAnnotations": {"team": "x"}}})),
        )
        .expect("rule");
        let rules = [a, b];
        assert!(selects(&rules, &obj(json!({"app": "web"}), json!({}))));
        assert!(selects(&rules, &obj(json!({}), json!({"team": "x"}))));
        assert!(!selects(
            &rules,
            &obj(json!({"app": "db"}), json!({"team": "y"}))
        ));
        assert!(!selects(&[], &obj(json!({}), json!({}))));
    }

    #[test]
    fn invalid_selectors_name_the_field() {
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        for (index, field) in [(2, "labelSelector"), (1, "annotationSelector")] {
            let mut r = json!({"apiVersion": "v1", "resource": "pods"});
            r[field] = bad.clone();
            let e = TargetRule::from_spec(index, &rule(r)).expect_err("invalid");
            let want = format!("spec.resources[{index}].{field}: ");
            assert!(e.to_string().starts_with(&want), "{e}");
        }
    }
}
