//! The least privilege `kubectl meta run` needs for a set of definitions: one ClusterRole per
//! controller (what its parents, children, inputs, outputs and revisions need), one for the
//! runtime (reading the definitions, recording Events), a Role for the Leases in the deploy
//! namespace, and a Role per namespace of the webhooks' Secrets and ConfigMaps (by name).
//! No wildcard; every rule says why (annotation `kubectl-meta.dev/rules`, one line per rule, in
//! the rules' order) and which controller needs it (the role's `kubectl-meta.dev/controller`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::hooks::endpoint::{self, RefKind};
use crate::spec::{ChildResourceRule, ControllerDef, ParentResourceRule};

/// The annotation naming the controller a role serves.
pub const CONTROLLER_ANNOTATION: &str = "kubectl-meta.dev/controller";

/// The annotation giving each rule's reason, one line per rule.
pub const RULES_ANNOTATION: &str = "kubectl-meta.dev/rules";

/// Read verbs.
const READ: [&str; 3] = ["get", "list", "watch"];

/// What children and outputs need: read, and every write an update strategy or a deletion
/// makes (create, update and patch for the three-way merge, server-side apply, adoption and
/// release; delete for removed children and Recreate/rolling strategies).
const WRITE_CHILDREN: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// One RBAC rule and why it is there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource (plural, or `plural/subresource`).
    pub resource: String,
    /// Verbs, sorted.
    pub verbs: BTreeSet<String>,
    /// Object names the rule is limited to (empty: any).
    pub names: BTreeSet<String>,
    /// Why, for people.
    pub why: String,
}

/// What a rule applies to: (group, resource, resource names).
type RuleKey = (String, String, BTreeSet<String>);

/// A set of rules, merged by (group, resource, names): their verbs and reasons.
#[derive(Debug, Default, Clone)]
pub struct Rules(BTreeMap<RuleKey, (BTreeSet<String>, Vec<String>)>);

impl Rules {
    fn add(&mut self, api_version: &str, resource: &str, verbs: &[&str], why: String) {
        let group = api_version
            .rsplit_once('/')
            .map_or("", |(g, _)| g)
            .to_string();
        self.add_group(&group, resource, verbs, BTreeSet::new(), why);
    }

    fn add_group(
        &mut self,
        group: &str,
        resource: &str,
        verbs: &[&str],
        names: BTreeSet<String>,
        why: String,
    ) {
        let e = self
            .0
            .entry((group.to_string(), resource.to_string(), names))
            .or_default();
        e.0.extend(verbs.iter().map(|v| v.to_string()));
        if !e.1.contains(&why) {
            e.1.push(why);
        }
    }

    /// Read access to a resource a customize hook asks for as related objects (`--related`).
    pub fn add_related(&mut self, group: &str, resource: &str) {
        self.add_group(
            group,
            resource,
            &READ,
            BTreeSet::new(),
            "related objects the customize hook asks for (--related)".to_string(),
        );
    }

    /// The rules, in a stable order.
    pub fn rules(&self) -> Vec<Rule> {
        self.0
            .iter()
            .map(|((group, resource, names), (verbs, why))| Rule {
                group: group.clone(),
                resource: resource.clone(),
                verbs: verbs.clone(),
                names: names.clone(),
                why: why.join("; "),
            })
            .collect()
    }
}

fn children(rules: &mut Rules, list: &[ChildResourceRule], what: &str) {
    for c in list {
        rules.add(
            &c.api_version,
            &c.resource,
            &WRITE_CHILDREN,
            format!(
                "{what} {} ({}): created, updated, adopted, released and deleted",
                c.resource, c.api_version
            ),
        );
    }
}

fn rolling(list: &[ChildResourceRule]) -> bool {
    list.iter().any(|c| c.method().is_rolling())
}

/// What parents need: read, status written, and the finalizer with a finalize hook.
fn parent(r: &mut Rules, p: &ParentResourceRule, status_why: &str, finalize: bool) {
    r.add(
        &p.api_version,
        &p.resource,
        &READ,
        "parents: watched".into(),
    );
    r.add(
        &p.api_version,
        &format!("{}/status", p.resource),
        &["update"],
        status_why.into(),
    );
    if finalize {
        r.add(
            &p.api_version,
            &p.resource,
            &["update", "patch"],
            "parents: the finalizer added and removed (finalize hook)".into(),
        );
    }
}

/// What one controller needs.
pub fn controller_rules(def: &ControllerDef) -> Rules {
    let mut r = Rules::default();
    let revisions = |r: &mut Rules| {
        r.add_group(
            "metacontroller.k8s.io",
            "controllerrevisions",
            &WRITE_CHILDREN,
            BTreeSet::new(),
            "rolling updates keep their progress in ControllerRevisions".into(),
        );
    };
    match def {
        ControllerDef::Composite(c) => {
            let p = &c.spec.parent_resource;
            parent(
                &mut r,
                p,
                "parents: status written from the sync hook's answer",
                c.spec.hooks.finalize.is_some(),
            );
            children(&mut r, &c.spec.child_resources, "children");
            if rolling(&c.spec.child_resources) || p.revision_history.is_some() {
                revisions(&mut r);
            }
        }
        ControllerDef::Decorator(d) => {
            for t in &d.spec.resources {
                r.add(
                    &t.api_version,
                    &t.resource,
                    &READ,
                    "targets: watched".into(),
                );
                r.add(
                    &t.api_version,
                    &t.resource,
                    &["update", "patch"],
                    "targets: the decorator annotation and finalizer written".into(),
                );
                r.add(
                    &t.api_version,
                    &format!("{}/status", t.resource),
                    &["update"],
                    "targets: status written from the sync hook's answer".into(),
                );
            }
            children(&mut r, &d.spec.attachments, "attachments");
            if rolling(&d.spec.attachments) {
                revisions(&mut r);
            }
        }
        ControllerDef::Map(m) => {
            parent(
                &mut r,
                &m.spec.parent_resource,
                "parents: status computed from the map keys",
                m.spec.hooks.finalize.is_some(),
            );
            for i in &m.spec.input_resources {
                r.add(
                    &i.api_version,
                    &i.resource,
                    &READ,
                    format!("inputs {}: watched", i.resource),
                );
            }
            children(&mut r, &m.spec.output_resources, "outputs");
            if rolling(&m.spec.output_resources) {
                revisions(&mut r);
            }
        }
    }
    r
}

/// Whether a controller has a customize hook (its related resources are chosen at run time
/// and cannot be computed here).
pub fn has_customize(def: &ControllerDef) -> bool {
    def.hooks().iter().any(|(name, _)| *name == "customize")
}

/// What the runtime needs whatever the controllers: reading the definitions, recording
/// Events on parents.
pub fn runtime_rules() -> Rules {
    let mut r = Rules::default();
    for plural in [
        "compositecontrollers",
        "decoratorcontrollers",
        "mapcontrollers",
    ] {
        r.add_group(
            "metacontroller.k8s.io",
            plural,
            &READ,
            BTreeSet::new(),
            "the definitions: read and watched (run without -f)".into(),
        );
    }
    r.add_group(
        "",
        "events",
        &["create", "patch"],
        BTreeSet::new(),
        "SyncError and hot-loop Events recorded on parents".into(),
    );
    r
}

/// The Leases (in the deploy namespace).
pub fn lease_rules() -> Rules {
    let mut r = Rules::default();
    r.add_group(
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "update"],
        BTreeSet::new(),
        "one Lease per controller: taken, renewed, released, watched by the standby replicas"
            .into(),
    );
    r
}

/// The Leases of `run --sharded` (in the deploy namespace): each replica's member Lease per
/// controller, created, renewed, listed (the ring's members) and deleted when it leaves.
pub fn shard_lease_rules() -> Rules {
    let mut r = Rules::default();
    r.add_group(
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "update", "delete"],
        BTreeSet::new(),
        "one member Lease per controller and replica (run --sharded): created, renewed, listed by the ring's members, deleted on leaving"
            .into(),
    );
    r
}

/// The webhooks' Secrets and ConfigMaps (`endpointConfigs`), by namespace, read by name.
pub fn reference_rules(defs: &[ControllerDef]) -> BTreeMap<String, Rules> {
    let mut by_ns: BTreeMap<String, Rules> = BTreeMap::new();
    for def in defs {
        for key in endpoint::references(std::slice::from_ref(def)) {
            let resource = match key.kind {
                RefKind::Secret => "secrets",
                RefKind::ConfigMap => "configmaps",
            };
            by_ns.entry(key.namespace.clone()).or_default().add_group(
                "",
                resource,
                &["get"],
                [key.name.clone()].into(),
                format!(
                    "{}: webhook connection settings (endpointConfigs)",
                    def.name()
                ),
            );
        }
    }
    by_ns
}

/// A role object (`ClusterRole`, or `Role` in `namespace`) holding `rules`, annotated with each
/// rule's reason and `controller` (when it serves one).
pub fn role(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    controller: Option<&str>,
    rules: &Rules,
    labels: &Value,
) -> Value {
    let list = rules.rules();
    let why: Vec<String> = list
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{i}: {}/{}: {}", display_group(&r.group), r.resource, r.why))
        .collect();
    let mut annotations = serde_json::Map::new();
    annotations.insert(RULES_ANNOTATION.into(), Value::String(why.join("\n")));
    if let Some(c) = controller {
        annotations.insert(CONTROLLER_ANNOTATION.into(), Value::String(c.into()));
    }
    let mut meta = json!({"name": name, "labels": labels, "annotations": annotations});
    if let Some(ns) = namespace {
        meta["namespace"] = Value::String(ns.into());
    }
    let rules: Vec<Value> = list
        .iter()
        .map(|r| {
            let mut v = json!({
                "apiGroups": [r.group],
                "resources": [r.resource],
                "verbs": r.verbs.iter().collect::<Vec<_>>(),
            });
            if !r.names.is_empty() {
                v["resourceNames"] = json!(r.names.iter().collect::<Vec<_>>());
            }
            v
        })
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "rules": rules,
    })
}

fn display_group(g: &str) -> &str {
    if g.is_empty() { "core" } else { g }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(yaml: &str) -> ControllerDef {
        let v: Value = serde_saphyr::from_str(yaml).unwrap();
        crate::spec::parse_controller(&v, crate::spec::Source::cluster("x", "x")).unwrap()
    }

    fn find<'a>(rules: &'a [Rule], group: &str, resource: &str) -> Option<&'a Rule> {
        rules
            .iter()
            .find(|r| r.group == group && r.resource == resource)
    }

    fn verbs(r: &Rule) -> Vec<&str> {
        r.verbs.iter().map(String::as_str).collect()
    }

    #[test]
    fn composite_with_rolling_children_and_finalizer() {
        let d = def("apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: catset}
spec:
  parentResource: {apiVersion: example.com/v1, resource: catsets}
  childResources:
  - {apiVersion: v1, resource: pods, updateStrategy: {method: RollingRecreate}}
  - {apiVersion: apps/v1, resource: deployments}
  hooks:
    sync: {webhook: {url: 'http://h/sync'}}
    finalize: {webhook: {url: 'http://h/finalize'}}
");
        let rules = controller_rules(&d).rules();
        let parent = find(&rules, "example.com", "catsets").unwrap();
        assert_eq!(verbs(parent), ["get", "list", "patch", "update", "watch"]);
        assert!(parent.why.contains("finalizer"), "{}", parent.why);
        assert_eq!(
            verbs(find(&rules, "example.com", "catsets/status").unwrap()),
            ["update"]
        );
        let pods = find(&rules, "", "pods").unwrap();
        assert_eq!(
            verbs(pods),
            [
                "create", "delete", "get", "list", "patch", "update", "watch"
            ]
        );
        assert!(find(&rules, "apps", "deployments").is_some());
        assert!(find(&rules, "metacontroller.k8s.io", "controllerrevisions").is_some());
        assert_eq!(rules.len(), 5, "{rules:#?}");
        for r in &rules {
            assert!(
                !r.verbs.contains("*") && r.resource != "*" && r.group != "*",
                "{r:?}"
            );
        }
    }

    #[test]
    fn without_finalize_or_rolling_nothing_more_is_granted() {
        let d = def("apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: hello}
spec:
  parentResource: {apiVersion: example.com/v1, resource: hellos}
  childResources: [{apiVersion: v1, resource: pods}]
  hooks: {sync: {webhook: {url: 'http://h/sync'}}}
");
        let rules = controller_rules(&d).rules();
        assert_eq!(
            verbs(find(&rules, "example.com", "hellos").unwrap()),
            ["get", "list", "watch"]
        );
        assert!(find(&rules, "metacontroller.k8s.io", "controllerrevisions").is_none());
        assert_eq!(rules.len(), 3);
    }

    #[test]
    fn map_inputs_are_read_only_and_outputs_written() {
        let d = def("apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: {name: snap}
spec:
  parentResource: {apiVersion: example.com/v1, resource: schedules}
  inputResources: [{apiVersion: v1, resource: persistentvolumeclaims}]
  outputResources: [{apiVersion: snapshot.storage.k8s.io/v1, resource: volumesnapshots}]
  hooks: {map: {webhook: {url: 'http://h/map'}}}
");
        let rules = controller_rules(&d).rules();
        assert_eq!(
            verbs(find(&rules, "", "persistentvolumeclaims").unwrap()),
            ["get", "list", "watch"]
        );
        assert!(
            find(&rules, "snapshot.storage.k8s.io", "volumesnapshots")
                .unwrap()
                .verbs
                .contains("delete")
        );
    }

    #[test]
    fn roles_carry_each_rules_reason_and_the_controller() {
        let r = role(
            "ClusterRole",
            "kubectl-meta:x",
            None,
            Some("catset"),
            &runtime_rules(),
            &json!({}),
        );
        assert_eq!(
            r["metadata"]["annotations"][CONTROLLER_ANNOTATION],
            "catset"
        );
        let why = r["metadata"]["annotations"][RULES_ANNOTATION]
            .as_str()
            .unwrap();
        assert_eq!(why.lines().count(), r["rules"].as_array().unwrap().len());
        assert!(why.contains("core/events: SyncError"), "{why}");
    }
}
