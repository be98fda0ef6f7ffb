//! `-l/--selector`: which controller definitions a command runs, by their `metadata.labels`.
//!
//! The equivalent of Metacontroller's `--target-label-selector`: the string syntax of kubectl's
//! `-l` (apimachinery `labels.Parse`: `key=value`, `key!=value`, `key in (a,b)`, `key notin
//! (a)`, `key`, `!key`, comma-separated, all must hold), matched against each definition's
//! labels; an empty selector selects everything. `dev` and `dryrun` parse the flag with
//! [`ControllerSelector::parse`] before anything starts and filter with
//! [`ControllerSelector::select`].

use std::fmt;

use serde_json::Value;

use super::types::ControllerDef;
use kube_apimachinery::selector::{LabelSelector, SelectorError};

/// A parsed `-l/--selector` over controller definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSelector {
    text: String,
    selector: LabelSelector,
}

/// Why `-l/--selector` was rejected, or selected nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerSelectorError {
    /// The flag's value is not a label selector.
    #[error(
        "-l/--selector {text:?} is not a valid label selector: {error}; write it as kubectl's -l: \
         key=value, key!=value, key in (a,b), key notin (a,b), key or !key, comma-separated \
         (all must hold), e.g. -l controller-group=cicd"
    )]
    Invalid {
        /// The flag's value.
        text: String,
        /// The parser's message (kube-apiserver's wording).
        error: SelectorError,
    },
    /// No definition matches.
    #[error(
        "-l/--selector {text:?} matches none of the {} controller definition(s): {}; change \
         the selector, or the definitions' metadata.labels",
        skipped.len(),
        skipped.join(", ")
    )]
    NothingSelected {
        /// The flag's value.
        text: String,
        /// Each definition left out, as `Kind name (labels k=v,...)`.
        skipped: Vec<String>,
    },
}

/// What [`ControllerSelector::select`] kept and left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// The definitions whose labels match, in their original order.
    pub selected: Vec<ControllerDef>,
    /// The definitions left out, as `Kind name (labels ...)` for messages.
    pub skipped: Vec<String>,
}

impl ControllerSelector {
    /// Parse the flag's value (kubectl's `-l` syntax). An empty or blank value selects every
    /// definition, as an empty `--target-label-selector` does.
    pub fn parse(text: &str) -> Result<Self, ControllerSelectorError> {
        let selector =
            LabelSelector::parse(text).map_err(|error| ControllerSelectorError::Invalid {
                text: text.to_string(),
                error,
            })?;
        Ok(ControllerSelector {
            text: text.to_string(),
            selector,
        })
    }

    /// The flag's value as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `def`'s `metadata.labels` match.
    pub fn matches(&self, def: &ControllerDef) -> bool {
        self.selector.matches_json(labels_of(def))
    }

    /// Keep the definitions that match. Selecting nothing is an error naming every definition
    /// and its labels (a typo in the selector, or a definition without its labels).
    pub fn select(&self, defs: Vec<ControllerDef>) -> Result<Selection, ControllerSelectorError> {
        let total = defs.len();
        let (selected, skipped): (Vec<_>, Vec<_>) = defs.into_iter().partition(|d| self.matches(d));
        let skipped: Vec<String> = skipped.iter().map(describe).collect();
        if selected.is_empty() && total > 0 {
            return Err(ControllerSelectorError::NothingSelected {
                text: self.text.clone(),
                skipped,
            });
        }
        Ok(Selection { selected, skipped })
    }
}

impl fmt::Display for ControllerSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn labels_of(def: &ControllerDef) -> Option<&Value> {
    def.raw().get("metadata").and_then(|m| m.get("labels"))
}

/// `CompositeController hello (labels app=a,tier=x)`, or `(no labels)`.
fn describe(def: &ControllerDef) -> String {
    let labels = match labels_of(def).and_then(Value::as_object) {
        Some(map) if !map.is_empty() => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            format!("labels {}", pairs.join(","))
        }
        _ => "no labels".to_string(),
    };
    format!("{} {} ({labels})", def.kind(), def.name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Source, parse_controller};
    use serde_json::json;

    fn def(name: &str, labels: Value) -> ControllerDef {
        let doc = json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
                "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:1/sync"}}}
            }
        });
        parse_controller(&doc, Source::file("c.yaml", 1, None)).unwrap()
    }

    fn names(s: &Selection) -> Vec<&str> {
        s.selected.iter().map(ControllerDef::name).collect()
    }

    #[test]
    fn selects_by_labels_with_kubectl_syntax() {
        let defs = vec![
            def("a", json!({"controller-group": "cicd", "tier": "x"})),
            def("b", json!({"controller-group": "web"})),
            def("c", Value::Null),
        ];
        let pick = |s: &str| {
            let sel = ControllerSelector::parse(s).unwrap();
            names(&sel.select(defs.clone()).unwrap())
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(pick("controller-group=cicd"), ["a"]);
        assert_eq!(pick("controller-group==web"), ["b"]);
        assert_eq!(pick("controller-group!=cicd"), ["b", "c"]);
        assert_eq!(pick("controller-group in (cicd, web)"), ["a", "b"]);
        assert_eq!(pick("controller-group notin (cicd)"), ["b", "c"]);
        assert_eq!(pick("tier"), ["a"]);
        assert_eq!(pick("!tier"), ["b", "c"]);
        assert_eq!(pick("controller-group=cicd,tier=x"), ["a"]);
        assert_eq!(pick(""), ["a", "b", "c"]);
    }

    #[test]
    fn nothing_selected_names_every_definition_and_its_labels() {
        let sel = ControllerSelector::parse("app=nope").unwrap();
        let e = sel
            .select(vec![def("a", json!({"app": "x"})), def("b", Value::Null)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("matches none of the 2 controller definition(s)"),
            "{e}"
        );
        assert!(e.contains("CompositeController a (labels app=x)"), "{e}");
        assert!(e.contains("CompositeController b (no labels)"), "{e}");
    }

    #[test]
    fn bad_selectors_are_rejected_with_the_syntax() {
        for bad in ["a in (b", "a=b=c", "x y", "-bad=x"] {
            let e = ControllerSelector::parse(bad).unwrap_err();
            assert!(
                matches!(e, ControllerSelectorError::Invalid { .. }),
                "{bad}"
            );
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("-l/--selector {bad:?}")), "{msg}");
            assert!(msg.contains("key in (a,b)"), "{msg}");
        }
    }
}
