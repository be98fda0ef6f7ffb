//! `kubectl meta deploy`: everything needed to run a set of definitions in a cluster with
//! `kubectl meta run`, as plain objects (pure: no I/O).
//!
//! [`render`] gives, in apply order: the Namespace, the CRDs `run` needs that Metacontroller does
//! not ship (`controllerrevisions.metacontroller.k8s.io` when a controller rolls out, so `run`
//! needs no right to create CRDs), the ServiceAccount, the least-privilege roles of [`rbac`]
//! and their bindings, the definitions as a ConfigMap (for `-f`; with `--from-cluster` they are
//! the cluster's objects already), the Deployment (replicas, probes, resources, non-root,
//! read-only root filesystem), a PodDisruptionBudget and the metrics Service; on request
//! ([`monitoring`]) a Grafana dashboard ConfigMap and a PrometheusRule of alerts.

pub mod monitoring;
pub mod rbac;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::spec::ControllerDef;

/// The name of every object (and the label value) of a deployment.
pub const APP: &str = "kubectl-meta";

/// The port of `/healthz`, `/readyz` and `/metrics`.
pub const HTTP_PORT: i32 = 9090;

/// The name of run's HTTP container port (what `kubectl meta flight dump` looks for).
pub const HTTP_PORT_NAME: &str = "http";

/// Where the definitions ConfigMap is mounted.
pub const DEFINITIONS_DIR: &str = "/etc/kubectl-meta/definitions";

/// What to render.
#[derive(Debug, Clone)]
pub struct DeployConfig {
    /// The namespace everything goes to (and the Leases).
    pub namespace: String,
    /// The container image.
    pub image: String,
    /// Replicas of the Deployment.
    pub replicas: i32,
    /// Whether the definitions come from files (rendered as a ConfigMap, `run -f`) or are the
    /// cluster's objects (`run` reads them).
    pub from_files: bool,
    /// `-l`, passed on to `run`.
    pub selector: Option<String>,
    /// Per controller: the (group, resource) its customize hook reads as related objects
    /// (`--related`).
    pub related: BTreeMap<String, Vec<(String, String)>>,
    /// Render the Grafana dashboard ConfigMap (`--grafana-dashboard`).
    pub grafana_dashboard: bool,
    /// Render the PrometheusRule of alerts (`--prometheus-rule`).
    pub prometheus_rule: bool,
    /// `--sharded`: the replicas share each controller's parents (`run --sharded`), their
    /// member Leases are also deleted (on SIGTERM), and the PodDisruptionBudget keeps a
    /// majority of the replicas.
    pub sharded: bool,
}

/// A `--related` value that is not `CONTROLLER=RESOURCE[.GROUP]`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--related {0:?}: expected CONTROLLER=RESOURCE[.GROUP] (e.g. my-controller=configmaps or my-controller=widgets.example.com)"
)]
pub struct RelatedError(pub String);

/// Parses `--related` values into controller -> (group, resource): `c=configmaps` is the core
/// group, `c=widgets.example.com` the group `example.com`, as kubectl names resources.
pub fn parse_related(
    values: &[String],
) -> Result<BTreeMap<String, Vec<(String, String)>>, RelatedError> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for v in values {
        let bad = || RelatedError(v.clone());
        let (controller, resource) = v.split_once('=').ok_or_else(bad)?;
        let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
        };
        if controller.trim().is_empty() || !valid(resource) || (!group.is_empty() && !valid(group))
        {
            return Err(bad());
        }
        let entry = out.entry(controller.to_string()).or_default();
        let rg = (group.to_string(), resource.to_string());
        if !entry.contains(&rg) {
            entry.push(rg);
        }
    }
    Ok(out)
}

/// Common labels.
fn labels() -> Value {
    json!({"app.kubernetes.io/name": APP, "app.kubernetes.io/managed-by": "kubectl-meta-deploy"})
}

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({"name": name, "labels": labels()});
    if let Some(ns) = namespace {
        m["namespace"] = Value::String(ns.into());
    }
    m
}

/// A ConfigMap key for a definition: `<kind>-<name>.json` with characters keys may not hold
/// replaced.
fn config_key(def: &ControllerDef) -> String {
    let raw = format!("{}-{}.json", def.kind().to_ascii_lowercase(), def.name());
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Everything to apply, in order.
pub fn render(defs: &[ControllerDef], cfg: &DeployConfig) -> Vec<Value> {
    let ns = cfg.namespace.as_str();
    let mut out = vec![json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": meta(ns, None),
    })];
    let rolls = defs.iter().any(|d| {
        rbac::controller_rules(d)
            .rules()
            .iter()
            .any(|r| r.resource == "controllerrevisions")
    });
    if rolls {
        out.push(crate::engine::plan::rollout::revision_crd());
    }
    out.push(json!({
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(APP, Some(ns)),
    }));
    out.extend(roles(defs, cfg));
    if cfg.from_files {
        let data: BTreeMap<String, String> = defs
            .iter()
            .map(|d| {
                (
                    config_key(d),
                    serde_json::to_string_pretty(d.raw()).unwrap_or_default(),
                )
            })
            .collect();
        out.push(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta(&format!("{APP}-definitions"), Some(ns)),
            "data": data,
        }));
    }
    out.push(deployment(cfg));
    out.push(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": meta(APP, Some(ns)),
        "spec": pdb_spec(cfg),
    }));
    out.push(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": format!("{APP}-metrics"), "namespace": ns, "labels": labels(),
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": HTTP_PORT.to_string(), "prometheus.io/path": "/metrics"},
        },
        "spec": {
            "selector": {"app.kubernetes.io/name": APP},
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http"}],
        },
    }));
    if cfg.grafana_dashboard {
        out.push(monitoring::dashboard_configmap(ns));
    }
    if cfg.prometheus_rule {
        out.push(monitoring::prometheus_rule(ns));
    }
    out
}

/// The roles and their bindings to the ServiceAccount.
fn roles(defs: &[ControllerDef], cfg: &DeployConfig) -> Vec<Value> {
    let ns = cfg.namespace.as_str();
    let subject = json!([{"kind": "ServiceAccount", "name": APP, "namespace": ns}]);
    let mut out = Vec::new();
    let mut cluster_role = |name: String, controller: Option<&str>, rules: &rbac::Rules| {
        out.push(rbac::role(
            "ClusterRole",
            &name,
            None,
            controller,
            rules,
            &labels(),
        ));
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta(&name, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject,
        }));
    };
    cluster_role(format!("{APP}:{ns}:runtime"), None, &rbac::runtime_rules());
    for d in defs {
        let mut rules = rbac::controller_rules(d);
        for (group, resource) in cfg.related.get(d.name()).into_iter().flatten() {
            rules.add_related(group, resource);
        }
        cluster_role(format!("{APP}:{ns}:{}", d.name()), Some(d.name()), &rules);
    }
    let mut namespaced = vec![(
        ns.to_string(),
        format!("{APP}-leases"),
        if cfg.sharded {
            rbac::shard_lease_rules()
        } else {
            rbac::lease_rules()
        },
    )];
    for (ref_ns, rules) in rbac::reference_rules(defs) {
        namespaced.push((ref_ns, format!("{APP}-{ns}-webhook-settings"), rules));
    }
    for (role_ns, name, rules) in namespaced {
        out.push(rbac::role(
            "Role",
            &name,
            Some(&role_ns),
            None,
            &rules,
            &labels(),
        ));
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": meta(&name, Some(&role_ns)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        }));
    }
    out
}

/// Active/standby: one replica at a time may go. Sharded: a majority stays (each replica
/// that goes hands its parents to the others, which must be able to carry them).
fn pdb_spec(cfg: &DeployConfig) -> Value {
    let selector = json!({"matchLabels": {"app.kubernetes.io/name": APP}});
    if cfg.sharded {
        json!({"minAvailable": cfg.replicas / 2 + 1, "selector": selector})
    } else {
        json!({"maxUnavailable": 1, "selector": selector})
    }
}

/// The Deployment running `kubectl meta run`.
fn deployment(cfg: &DeployConfig) -> Value {
    let mut args = vec![
        "run".to_string(),
        format!("--http-addr=0.0.0.0:{HTTP_PORT}"),
    ];
    if cfg.from_files {
        args.push(format!("--filename={DEFINITIONS_DIR}"));
    }
    if let Some(sel) = &cfg.selector {
        args.push(format!("--selector={sel}"));
    }
    if cfg.sharded {
        args.push("--sharded".to_string());
    }
    let mut mounts = vec![json!({"name": "tmp", "mountPath": "/tmp"})];
    let mut volumes = vec![json!({"name": "tmp", "emptyDir": {}})];
    if cfg.from_files {
        mounts.push(json!({"name": "definitions", "mountPath": DEFINITIONS_DIR, "readOnly": true}));
        volumes.push(
            json!({"name": "definitions", "configMap": {"name": format!("{APP}-definitions")}}),
        );
    }
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta(APP, Some(&cfg.namespace)),
        "spec": {
            "replicas": cfg.replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": APP}},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": APP,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": APP}},
                    }],
                    "containers": [{
                        "name": "engine",
                        "image": cfg.image,
                        "args": args,
                        "ports": [{"name": HTTP_PORT_NAME, "containerPort": HTTP_PORT}],
                        "livenessProbe": probe("/healthz"),
                        "readinessProbe": probe("/readyz"),
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"memory": "256Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs() -> Vec<ControllerDef> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut out = Vec::new();
        for ex in ["hello-world", "catset"] {
            let loaded =
                crate::spec::load_paths_with(&[dir.join(ex).join("10-controller.yaml")], false)
                    .unwrap();
            out.extend(loaded.controllers);
        }
        out
    }

    fn cfg(from_files: bool) -> DeployConfig {
        DeployConfig {
            namespace: "ops".into(),
            image: "example.com/kubectl-meta:1".into(),
            replicas: 2,
            from_files,
            selector: None,
            related: BTreeMap::new(),
            grafana_dashboard: false,
            prometheus_rule: false,
            sharded: false,
        }
    }

    #[test]
    fn sharded_passes_the_flag_deletes_member_leases_and_keeps_a_majority() {
        let defs = vec![];
        let plain = render(&defs, &cfg(true));
        let sharded = render(
            &defs,
            &DeployConfig {
                sharded: true,
                replicas: 5,
                ..cfg(true)
            },
        );
        let find =
            |objs: &[Value], kind: &str| objs.iter().find(|o| o["kind"] == kind).cloned().unwrap();
        let args = |objs: &[Value]| {
            find(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"].clone()
        };
        assert!(
            !args(&plain)
                .as_array()
                .unwrap()
                .contains(&json!("--sharded"))
        );
        assert!(
            args(&sharded)
                .as_array()
                .unwrap()
                .contains(&json!("--sharded"))
        );
        assert_eq!(find(&sharded, "Deployment")["spec"]["replicas"], 5);
        assert_eq!(
            find(&plain, "PodDisruptionBudget")["spec"]["maxUnavailable"],
            1
        );
        assert_eq!(
            find(&sharded, "PodDisruptionBudget")["spec"]["minAvailable"],
            3
        );
        let lease_verbs = |objs: &[Value]| {
            objs.iter()
                .filter(|o| o["kind"] == "Role")
                .flat_map(|o| o["rules"].as_array().cloned().unwrap_or_default())
                .filter(|r| r["resources"] == json!(["leases"]))
                .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
                .collect::<Vec<Value>>()
        };
        assert!(!lease_verbs(&plain).contains(&json!("delete")));
        assert!(lease_verbs(&sharded).contains(&json!("delete")));
        assert!(lease_verbs(&sharded).contains(&json!("list")));
    }

    #[test]
    fn monitoring_objects_only_on_request_and_last() {
        let defs = vec![];
        let plain = render(&defs, &cfg(true));
        assert!(plain.iter().all(
            |o| o["kind"] != "PrometheusRule" && o["metadata"]["name"] != monitoring::DASHBOARD
        ));
        let both = render(
            &defs,
            &DeployConfig {
                grafana_dashboard: true,
                prometheus_rule: true,
                ..cfg(true)
            },
        );
        let kinds: Vec<&str> = both[both.len() - 2..]
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["ConfigMap", "PrometheusRule"]);
        assert_eq!(both.len(), plain.len() + 2);
    }

    #[test]
    fn related_values_parse_as_kubectl_names_resources_and_bad_ones_say_the_form() {
        let parsed = parse_related(&[
            "c=configmaps".to_string(),
            "c=widgets.example.com".to_string(),
            "c=configmaps".to_string(),
            "d=leases.coordination.k8s.io".to_string(),
        ])
        .unwrap();
        assert_eq!(
            parsed["c"],
            [
                (String::new(), "configmaps".to_string()),
                ("example.com".to_string(), "widgets".to_string())
            ]
        );
        assert_eq!(
            parsed["d"],
            [("coordination.k8s.io".to_string(), "leases".to_string())]
        );
        for bad in [
            "configmaps",
            "=configmaps",
            "c=",
            "c=ConfigMaps",
            "c=.example.com",
            "c=a b",
        ] {
            let e = parse_related(&[bad.to_string()]).unwrap_err();
            assert_eq!(e, RelatedError(bad.to_string()));
            assert!(e.to_string().contains("CONTROLLER=RESOURCE[.GROUP]"), "{e}");
        }
    }

    #[test]
    fn related_resources_are_read_rules_of_that_controller_only() {
        let defs = defs();
        let mut cfg = cfg(true);
        let name = defs[0].name().to_string();
        cfg.related = parse_related(&[format!("{name}=widgets.example.com")]).unwrap();
        let objs = render(&defs, &cfg);
        let roles = of_kind(&objs, "ClusterRole");
        let with_widgets: Vec<&str> = roles
            .iter()
            .filter(|r| {
                r["rules"].as_array().unwrap().iter().any(|rule| {
                    rule["resources"] == serde_json::json!(["widgets"])
                        && rule["apiGroups"] == serde_json::json!(["example.com"])
                        && rule["verbs"] == serde_json::json!(["get", "list", "watch"])
                })
            })
            .map(|r| r["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(with_widgets, [format!("kubectl-meta:ops:{name}")]);
        let role = roles
            .iter()
            .find(|r| r["metadata"]["name"] == format!("kubectl-meta:ops:{name}"))
            .unwrap();
        let why = role["metadata"]["annotations"]["kubectl-meta.dev/rules"]
            .as_str()
            .unwrap();
        assert!(why.contains("customize hook asks for (--related)"), "{why}");
    }

    fn of_kind<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
        objs.iter().filter(|o| o["kind"] == kind).collect()
    }

    #[test]
    fn renders_everything_run_needs_in_apply_order() {
        let objs = render(&defs(), &cfg(true));
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds[0], "Namespace");
        assert_eq!(kinds[1], "CustomResourceDefinition", "catset rolls out");
        for k in [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
        ] {
            assert!(kinds.contains(&k), "{k} missing: {kinds:?}");
        }
        // One ClusterRole per controller, plus the runtime's.
        let roles = of_kind(&objs, "ClusterRole");
        assert_eq!(roles.len(), 3);
        let controllers: Vec<&str> = roles
            .iter()
            .filter_map(|r| r["metadata"]["annotations"][rbac::CONTROLLER_ANNOTATION].as_str())
            .collect();
        assert_eq!(controllers, ["hello-world-controller", "catset-controller"]);
        // No wildcard anywhere.
        for r in of_kind(&objs, "ClusterRole")
            .into_iter()
            .chain(of_kind(&objs, "Role"))
        {
            for rule in r["rules"].as_array().unwrap() {
                for f in ["apiGroups", "resources", "verbs"] {
                    assert!(
                        !rule[f].as_array().unwrap().iter().any(|v| v == "*"),
                        "{rule}"
                    );
                }
            }
        }
        let cm = of_kind(&objs, "ConfigMap")[0];
        assert!(cm["data"]["compositecontroller-catset-controller.json"].is_string());
    }

    #[test]
    fn the_deployment_is_hardened_and_probed() {
        let objs = render(&defs(), &cfg(true));
        let d = of_kind(&objs, "Deployment")[0];
        assert_eq!(d["spec"]["replicas"], 2);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "example.com/kubectl-meta:1");
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert!(c["resources"]["requests"]["memory"].is_string());
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "run",
                "--http-addr=0.0.0.0:9090",
                "--filename=/etc/kubectl-meta/definitions"
            ]
        );
        assert_eq!(pod["serviceAccountName"], APP);
        // From the cluster: no ConfigMap, no -f.
        let objs = render(&defs(), &cfg(false));
        assert!(of_kind(&objs, "ConfigMap").is_empty());
        let d = of_kind(&objs, "Deployment")[0];
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
}
