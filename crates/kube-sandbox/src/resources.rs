//! The resource registry: which group/version/resources the sandbox serves, and discovery.
//!
//! Built-in types are a static table; CustomResourceDefinitions add and remove entries at run
//! time. Discovery documents (legacy `APIResourceList`/`APIGroupList` and aggregated
//! `APIGroupDiscoveryList` v2) are all rendered from this one registry, so what is served and
//! what is advertised cannot drift apart.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::crd::Schema;

/// Where a resource definition comes from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Compiled into the sandbox.
    Builtin,
    /// Served because of a CustomResourceDefinition.
    Crd {
        /// CRD object name (`plural.group`).
        crd: String,
        /// Structural schema of this version, if declared.
        schema: Option<Arc<Schema>>,
        /// `additionalPrinterColumns` of this version.
        printer_columns: Vec<Value>,
        /// The storage version of the CRD (objects are stored with this apiVersion).
        storage_version: String,
        /// `subresources.scale` of this version (`specReplicasPath`, ...), if declared.
        scale: Option<Value>,
        /// `schema.openAPIV3Schema` of this version as written (published under /openapi).
        openapi: Option<Arc<Value>>,
    },
}

/// One served resource at one group/version.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group, "" for core.
    pub group: String,
    /// Version ("v1").
    pub version: String,
    /// Plural resource name ("configmaps").
    pub plural: String,
    /// Singular name ("configmap").
    pub singular: String,
    /// Kind ("ConfigMap").
    pub kind: String,
    /// List kind ("ConfigMapList").
    pub list_kind: String,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Has a `/status` subresource.
    pub status_subresource: bool,
    /// Where it comes from.
    pub origin: Origin,
}

impl ResourceDef {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key shared by every version of this resource (`apps/deployments`, `/configmaps`).
    pub fn group_resource(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// The apiVersion objects are stored with.
    pub fn storage_api_version(&self) -> String {
        match &self.origin {
            Origin::Crd {
                storage_version, ..
            } => format!("{}/{}", self.group, storage_version),
            Origin::Builtin => self.api_version(),
        }
    }

    /// Whether this resource serves `<plural>/scale`: Deployments, ReplicaSets and
    /// StatefulSets, and a CRD version whose `subresources.scale` names its replicas paths
    /// (the subresource itself is served by [`crate::scale`]).
    pub fn has_scale(&self) -> bool {
        match &self.origin {
            Origin::Builtin => matches!(
                self.group_resource().as_str(),
                "apps/deployments" | "apps/replicasets" | "apps/statefulsets"
            ),
            Origin::Crd { scale, .. } => scale.as_ref().is_some_and(|s| {
                ["specReplicasPath", "statusReplicasPath"].iter().all(|k| {
                    s.get(*k)
                        .and_then(Value::as_str)
                        .is_some_and(|p| !p.is_empty())
                })
            }),
        }
    }

    /// Is this a custom resource?
    pub fn is_custom(&self) -> bool {
        matches!(self.origin, Origin::Crd { .. })
    }

    /// The CRD's structural schema, if any.
    pub fn schema(&self) -> Option<&Schema> {
        match &self.origin {
            Origin::Crd { schema, .. } => schema.as_deref(),
            Origin::Builtin => None,
        }
    }

    fn verbs(&self) -> Vec<&'static str> {
        let mut v = vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        if self.group.is_empty() && self.plural == "namespaces" {
            v.retain(|x| *x != "deletecollection");
        }
        v
    }
}

struct Builtin(
    &'static str,            // group
    &'static str,            // version
    &'static str,            // plural
    &'static str,            // kind
    bool,                    // namespaced
    &'static [&'static str], // short names
    bool,                    // in category "all"
    bool,                    // status subresource
);

const BUILTINS: &[Builtin] = &[
    Builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        &["ns"],
        false,
        true,
    ),
    Builtin(
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        true,
        &["cm"],
        false,
        false,
    ),
    Builtin("", "v1", "secrets", "Secret", true, &[], false, false),
    Builtin("", "v1", "services", "Service", true, &["svc"], true, true),
    Builtin(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        false,
        false,
    ),
    Builtin("", "v1", "pods", "Pod", true, &["po"], true, true),
    Builtin(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        false,
        true,
    ),
    Builtin(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        &["pv"],
        false,
        true,
    ),
    Builtin("", "v1", "events", "Event", true, &["ev"], false, false),
    Builtin(
        "",
        "v1",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        false,
        false,
    ),
    Builtin("", "v1", "nodes", "Node", false, &["no"], false, true),
    Builtin(
        "",
        "v1",
        "limitranges",
        "LimitRange",
        true,
        &["limits"],
        false,
        false,
    ),
    Builtin(
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        true,
        &["quota"],
        false,
        true,
    ),
    Builtin(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        true,
        &["rc"],
        true,
        true,
    ),
    Builtin(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        &["ev"],
        false,
        false,
    ),
    Builtin(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        true,
        true,
    ),
    Builtin(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        true,
        true,
    ),
    Builtin(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        true,
        true,
    ),
    Builtin(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        true,
        &["ds"],
        true,
        true,
    ),
    Builtin(
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        true,
        &[],
        false,
        false,
    ),
    Builtin("batch", "v1", "jobs", "Job", true, &[], true, true),
    Builtin(
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        true,
        &["cj"],
        true,
        true,
    ),
    Builtin(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        &[],
        false,
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        &[],
        false,
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        &[],
        false,
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        &[],
        false,
        false,
    ),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        false,
        false,
    ),
    Builtin(
        "",
        "v1",
        "podtemplates",
        "PodTemplate",
        true,
        &[],
        false,
        false,
    ),
    Builtin(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        true,
        true,
    ),
    Builtin(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        false,
        true,
    ),
    Builtin(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        true,
        &["ing"],
        false,
        true,
    ),
    Builtin(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
        &[],
        false,
        false,
    ),
    Builtin(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        &["netpol"],
        false,
        false,
    ),
    Builtin(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
        &[],
        false,
        false,
    ),
    Builtin(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false,
        &["pc"],
        false,
        false,
    ),
    Builtin(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        &["sc"],
        false,
        false,
    ),
    Builtin(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        &[],
        false,
        false,
    ),
    Builtin(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
        &[],
        false,
        false,
    ),
    Builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        false,
        true,
    ),
];

/// Preferred order of groups in discovery (built-ins first, as kube-apiserver lists them).
const GROUP_ORDER: &[&str] = &[
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "policy",
    "networking.k8s.io",
    "discovery.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "coordination.k8s.io",
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
];

/// The create-only review resources `auth::endpoints` serves (nothing is stored), listed in
/// discovery as kube-apiserver lists them (group, plural, kind, namespaced; by plural).
const REVIEWS: &[(&str, &str, &str, bool)] = &[
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "tokenreviews",
        "TokenReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
];

/// The review resources of `group`/`version`.
fn reviews_of(
    group: &str,
    version: &str,
) -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str, bool)> {
    REVIEWS
        .iter()
        .filter(move |r| r.0 == group && version == "v1")
}

/// All served resources, indexed by group/version/plural.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceDef>>,
}

impl Registry {
    /// The built-in resources.
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        for b in BUILTINS {
            let categories = if b.6 { vec!["all".to_string()] } else { vec![] };
            r.insert(ResourceDef {
                group: b.0.into(),
                version: b.1.into(),
                plural: b.2.into(),
                singular: b.3.to_lowercase(),
                kind: b.3.into(),
                list_kind: format!("{}List", b.3),
                namespaced: b.4,
                short_names: b.5.iter().map(|s| s.to_string()).collect(),
                categories,
                status_subresource: b.7,
                origin: Origin::Builtin,
            });
        }
        r
    }

    /// Add or replace one resource version.
    pub fn insert(&mut self, def: ResourceDef) {
        self.by_gvr.insert(
            (def.group.clone(), def.version.clone(), def.plural.clone()),
            Arc::new(def),
        );
    }

    /// Stop serving every version that came from the named CRD.
    pub fn remove_crd(&mut self, crd: &str) {
        self.by_gvr
            .retain(|_, d| !matches!(&d.origin, Origin::Crd { crd: c, .. } if c == crd));
    }

    /// Look up a served resource.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Every served resource.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_gvr.values()
    }

    /// Does some other served resource already use this group + plural (for CRD name conflicts)?
    pub fn group_plural_taken(&self, group: &str, plural: &str, except_crd: &str) -> bool {
        self.by_gvr.values().any(|d| {
            d.group == group
                && d.plural == plural
                && !matches!(&d.origin, Origin::Crd { crd, .. } if crd == except_crd)
        })
    }

    /// Groups in discovery order, each with its versions (preferred first).
    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in REVIEWS {
            groups.insert(r.0.to_string(), vec!["v1".to_string()]);
        }
        for (g, v, _) in self.by_gvr.keys() {
            if g.is_empty() {
                continue;
            }
            let vs = groups.entry(g.clone()).or_default();
            if !vs.contains(v) {
                vs.push(v.clone());
            }
        }
        let mut out: Vec<(String, Vec<String>)> = groups.into_iter().collect();
        for (_, vs) in &mut out {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out.sort_by_key(|(g, _)| {
            (
                GROUP_ORDER
                    .iter()
                    .position(|x| x == g)
                    .unwrap_or(GROUP_ORDER.len()),
                g.clone(),
            )
        });
        out
    }

    fn resources_of(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.by_gvr
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, d)| d.clone())
            .collect()
    }

    /// `GET /api`.
    pub fn api_versions(&self) -> Value {
        json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
    }

    /// `GET /apis` (legacy APIGroupList).
    pub fn api_group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .into_iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                    .collect();
                json!({"name": g, "versions": versions, "preferredVersion": versions[0].clone()})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /apis/<group>` (APIGroup), None if the group is not served.
    pub fn api_group(&self, group: &str) -> Option<Value> {
        let (g, vs) = self.groups().into_iter().find(|(g, _)| g == group)?;
        let versions: Vec<Value> = vs
            .iter()
            .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
            .collect();
        Some(json!({"kind": "APIGroup", "apiVersion": "v1", "name": g,
            "versions": versions, "preferredVersion": versions[0].clone()}))
    }

    /// `GET /api/v1` or `/apis/<g>/<v>` (APIResourceList), None if not served.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let defs = self.resources_of(group, version);
        let mut resources: Vec<Value> = reviews_of(group, version)
            .map(|(_, plural, kind, namespaced)| {
                json!({"name": plural, "singularName": kind.to_lowercase(),
                    "namespaced": namespaced, "kind": kind, "verbs": ["create"]})
            })
            .collect();
        if defs.is_empty() && resources.is_empty() {
            return None;
        }
        for d in &defs {
            let mut r = json!({
                "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced,
                "kind": d.kind, "verbs": d.verbs(),
            });
            if !d.short_names.is_empty() {
                r["shortNames"] = json!(d.short_names);
            }
            if !d.categories.is_empty() {
                r["categories"] = json!(d.categories);
            }
            resources.push(r);
            if d.status_subresource {
                resources.push(json!({"name": format!("{}/status", d.plural), "singularName": "",
                    "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}));
            }
            if d.has_scale() {
                resources.push(
                    json!({"name": format!("{}/scale", d.plural), "singularName": "",
                    "namespaced": d.namespaced, "group": "autoscaling", "version": "v1",
                    "kind": "Scale", "verbs": ["get", "patch", "update"]}),
                );
            }
            if group.is_empty() && d.plural == "namespaces" {
                resources.push(json!({"name": "namespaces/finalize", "singularName": "",
                    "namespaced": false, "kind": "Namespace", "verbs": ["update"]}));
            }
        }
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
        )
    }

    /// Aggregated discovery (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) for `/api` (core) or `/apis`.
    pub fn aggregated(&self, core: bool) -> Value {
        let groups: Vec<(String, Vec<String>)> = if core {
            vec![(String::new(), vec!["v1".to_string()])]
        } else {
            self.groups()
        };
        let items: Vec<Value> = groups
            .into_iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| {
                        let mut resources = Self::aggregated_reviews(&g, v);
                        resources.extend(self
                            .resources_of(&g, v)
                            .iter()
                            .map(|d| {
                                let mut r = json!({
                                    "resource": d.plural,
                                    "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
                                    "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": d.singular,
                                    "verbs": d.verbs(),
                                });
                                if !d.short_names.is_empty() {
                                    r["shortNames"] = json!(d.short_names);
                                }
                                if !d.categories.is_empty() {
                                    r["categories"] = json!(d.categories);
                                }
                                let mut subs = Vec::new();
                                if d.has_scale() {
                                    subs.push(json!({"subresource": "scale",
                                        "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                                        "verbs": ["get", "patch", "update"]}));
                                }
                                if d.status_subresource {
                                    subs.push(json!({"subresource": "status",
                                        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
                                        "verbs": ["get", "patch", "update"]}));
                                }
                                if !subs.is_empty() {
                                    r["subresources"] = Value::Array(subs);
                                }
                                r
                            }));
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items})
    }

    /// The aggregated-discovery entries of the review resources of `group`/`version`.
    fn aggregated_reviews(group: &str, version: &str) -> Vec<Value> {
        reviews_of(group, version)
            .map(|(_, plural, kind, namespaced)| {
                json!({"resource": plural,
                    "responseKind": {"group": "", "version": "", "kind": kind},
                    "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                    "singularResource": kind.to_lowercase(), "verbs": ["create"]})
            })
            .collect()
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other).
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    match num.parse::<u32>() {
        Ok(n) => (level, major, n),
        Err(_) => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_served_and_discoverable() {
        let r = Registry::builtin();
        let cm = r.get("", "v1", "configmaps").expect("configmaps");
        assert_eq!(cm.kind, "ConfigMap");
        assert!(cm.namespaced);
        let list = r.api_resource_list("apps", "v1").expect("apps/v1");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"deployments") && names.contains(&"deployments/status"));
        assert!(r.api_resource_list("nope", "v1").is_none());
        let groups = r.api_group_list();
        assert_eq!(groups["groups"][0]["name"], "apps");
    }

    #[test]
    fn version_priority_orders_like_kubernetes() {
        let mut vs = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2", "foo"];
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(vs, ["v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]);
    }

    #[test]
    fn aggregated_discovery_lists_scope_and_subresources() {
        let r = Registry::builtin();
        let core = r.aggregated(true);
        let res = &core["items"][0]["versions"][0]["resources"];
        let pods = res
            .as_array()
            .expect("array")
            .iter()
            .find(|r| r["resource"] == "pods")
            .expect("pods");
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["subresources"][0]["subresource"], "status");
    }
}
