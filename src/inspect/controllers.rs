//! Which Composite-, Decorator- and MapControllers govern an object, and which types they
//! touch.
//!
//! Definitions come from the cluster (the Metacontroller CRDs' objects, when served) or from
//! `-f` files loaded with [`crate::spec::load_paths`], as `kubectl meta dev` takes them. A
//! definition governs an object when the object's type is its parent (Composite, Map) or a
//! target (Decorator) type and it passes the definition's `labelSelector` /
//! `annotationSelector`.

use serde_json::Value;

use super::api::{ApiType, Catalog, Fetcher, Listed};
use super::{ControllerSource, InspectError};
use crate::k8s::object;
use crate::spec::{self, ControllerDef, Source};
use kube_apimachinery::selector::LabelSelector;

/// Built-in workload types whose dependents Kubernetes' own controllers make, as
/// `(group, parent plural, dependent plurals)`: listed when the parent type is in the tree, so a
/// Composite child Deployment still shows its ReplicaSets and Pods.
const BUILTIN_DEPENDENTS: &[(&str, &str, &[&str])] = &[
    ("apps", "deployments", &["replicasets"]),
    ("apps", "replicasets", &["pods"]),
    ("apps", "statefulsets", &["pods", "controllerrevisions"]),
    ("apps", "daemonsets", &["pods", "controllerrevisions"]),
    ("batch", "cronjobs", &["jobs"]),
    ("batch", "jobs", &["pods"]),
    ("", "services", &["endpoints", "endpointslices"]),
];

/// The Metacontroller types read from the cluster: `(kind, plural)`.
const CLUSTER_KINDS: [(&str, &str); 3] = [
    (spec::COMPOSITE_KIND, "compositecontrollers"),
    (spec::DECORATOR_KIND, "decoratorcontrollers"),
    (spec::MAP_KIND, "mapcontrollers"),
];

/// The controller definitions `inspect` knows, and what went wrong reading them.
#[derive(Debug, Default, Clone)]
pub struct Known {
    /// The definitions.
    pub defs: Vec<ControllerDef>,
    /// Problems that did not stop the inspection (an unparseable object in the cluster, a
    /// forbidden controller type).
    pub notes: Vec<String>,
}

/// Load the definitions from `source`.
pub async fn load(
    source: &ControllerSource,
    fetcher: &Fetcher,
    catalog: &Catalog,
) -> Result<Known, InspectError> {
    match source {
        ControllerSource::Files(paths) => Ok(Known {
            defs: spec::load_paths(paths)?.controllers,
            notes: Vec::new(),
        }),
        ControllerSource::Cluster => {
            let mut known = Known::default();
            let types: Vec<(ApiType, Option<String>)> = CLUSTER_KINDS
                .iter()
                .filter_map(|(_, plural)| catalog.by_rule(spec::API_VERSION, plural))
                .map(|t| (t.clone(), None))
                .collect();
            for (ty, listed) in fetcher.list_many(types, true).await {
                match listed {
                    Listed::Items(items) => {
                        for item in items {
                            let name = object::name(&item).unwrap_or_default().to_string();
                            let kind = ty.resource.kind.to_ascii_lowercase();
                            match spec::parse_controller(&item, Source::cluster(&kind, &name)) {
                                Ok(def) => known.defs.push(def),
                                Err(e) => known.notes.push(format!(
                                    "{kind}/{name} is ignored (invalid definition): {e}"
                                )),
                            }
                        }
                    }
                    Listed::Forbidden(m) => known.notes.push(format!(
                        "cannot list {} ({m}); controllers of that kind are not taken into account",
                        ty.full_name()
                    )),
                    Listed::Gone => {}
                }
            }
            Ok(known)
        }
    }
}

/// What a definition does to objects of a governed type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Parent of a CompositeController.
    CompositeParent,
    /// Parent of a MapController.
    MapParent,
    /// Target of a DecoratorController.
    DecoratorTarget,
}

/// `Kind/name` of a definition, as shown to people.
pub fn label(def: &ControllerDef) -> String {
    format!("{}/{}", def.kind(), def.name())
}

/// Does `def` govern `obj` (of type `ty`), and in which role?
pub fn governs(def: &ControllerDef, catalog: &Catalog, ty: &ApiType, obj: &Value) -> Option<Role> {
    let same = |api_version: &str, plural: &str| {
        catalog
            .by_rule(api_version, plural)
            .is_some_and(|t| t.resource == ty.resource)
    };
    let selected = |sel: &Option<Value>| match sel {
        None => true,
        Some(s) => {
            LabelSelector::from_label_selector(s).is_ok_and(|s| s.matches(&object::labels(obj)))
        }
    };
    match def {
        ControllerDef::Composite(c) => {
            let p = &c.spec.parent_resource;
            (same(&p.api_version, &p.resource) && selected(&p.label_selector))
                .then_some(Role::CompositeParent)
        }
        ControllerDef::Map(c) => {
            let p = &c.spec.parent_resource;
            (same(&p.api_version, &p.resource) && selected(&p.label_selector))
                .then_some(Role::MapParent)
        }
        ControllerDef::Decorator(c) => c
            .spec
            .resources
            .iter()
            .any(|r| {
                same(&r.api_version, &r.resource)
                    && selected(&r.label_selector)
                    && r.annotation_selector.as_ref().is_none_or(|a| {
                        a.selector()
                            .is_ok_and(|s| s.matches(&object::annotations(obj)))
                    })
            })
            .then_some(Role::DecoratorTarget),
    }
}

/// The types `def` reads or writes below a governed object: children (Composite), inputs and
/// outputs (Map), attachments (Decorator). Types the server does not serve are left out.
pub fn dependent_types(def: &ControllerDef, catalog: &Catalog) -> Vec<ApiType> {
    let rules: Vec<(&str, &str)> = match def {
        ControllerDef::Composite(c) => c
            .spec
            .child_resources
            .iter()
            .map(|r| (r.api_version.as_str(), r.resource.as_str()))
            .collect(),
        ControllerDef::Map(c) => c
            .spec
            .input_resources
            .iter()
            .map(|r| (r.api_version.as_str(), r.resource.as_str()))
            .chain(
                c.spec
                    .output_resources
                    .iter()
                    .map(|r| (r.api_version.as_str(), r.resource.as_str())),
            )
            .collect(),
        ControllerDef::Decorator(c) => c
            .spec
            .attachments
            .iter()
            .map(|r| (r.api_version.as_str(), r.resource.as_str()))
            .collect(),
    };
    served(catalog, rules)
}

fn rule_of(p: &spec::ParentResourceRule) -> (&str, &str) {
    (p.api_version.as_str(), p.resource.as_str())
}

/// The served types of `(apiVersion, plural)` rules (unserved ones left out).
fn served(catalog: &Catalog, rules: Vec<(&str, &str)>) -> Vec<ApiType> {
    rules
        .into_iter()
        .filter_map(|(av, plural)| catalog.by_rule(av, plural).cloned())
        .collect()
}

/// The parent / target types of `def`.
pub fn governed_types(def: &ControllerDef, catalog: &Catalog) -> Vec<ApiType> {
    let rules: Vec<(&str, &str)> = match def {
        ControllerDef::Composite(c) => vec![rule_of(&c.spec.parent_resource)],
        ControllerDef::Map(c) => vec![rule_of(&c.spec.parent_resource)],
        ControllerDef::Decorator(c) => c
            .spec
            .resources
            .iter()
            .map(|r| (r.api_version.as_str(), r.resource.as_str()))
            .collect(),
    };
    served(catalog, rules)
}

/// Types whose objects Kubernetes' built-in controllers make below an object of type `ty`.
pub fn builtin_dependents(ty: &ApiType, catalog: &Catalog) -> Vec<ApiType> {
    BUILTIN_DEPENDENTS
        .iter()
        .filter(|(g, p, _)| *g == ty.resource.group && *p == ty.resource.plural)
        .flat_map(|(_, _, deps)| deps.iter())
        .filter_map(|d| {
            catalog.types.iter().find(|t| {
                t.resource.plural == *d
                    && ["", "apps", "batch", "discovery.k8s.io"]
                        .contains(&t.resource.group.as_str())
            })
        })
        .cloned()
        .collect()
}
