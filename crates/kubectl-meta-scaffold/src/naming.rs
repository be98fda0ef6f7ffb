//! Names in a generated project: the parent's `KIND.GROUP`, plurals, the project name from the
//! directory, and the table of well-known resources a `--child`, `--target` or `--input` may
//! name (`RESOURCE[.GROUP]` -> kind, apiVersion, a minimal valid body).
//!
//! The table is honest rather than complete: an unknown `RESOURCE.GROUP` is an error naming the
//! accepted ones (init runs offline, so it cannot ask a cluster what a custom resource is).

use serde_json::{Value, json};

use super::error::ScaffoldError;

/// One resource type the generated project uses (parent, child, attachment, input or output).
#[derive(Debug, Clone, PartialEq)]
pub struct TypeRef {
    /// Plural resource name (`configmaps`).
    pub resource: String,
    /// API group (empty for core).
    pub group: String,
    /// Version (`v1`).
    pub version: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
}

impl TypeRef {
    /// `v1` or `GROUP/VERSION`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The key of this type in a hook request's children map: `Kind.version` for core,
    /// `Kind.group/version` otherwise (what the generated kits' `child_key` computes).
    pub fn child_key(&self) -> String {
        format!("{}.{}", self.kind, self.api_version())
    }

    /// `RESOURCE[.GROUP]` as a user types it.
    pub fn display(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// The well-known entry of this type, if it is one.
    pub fn builtin(&self) -> Option<&'static Builtin> {
        BUILTINS
            .iter()
            .find(|b| b.resource == self.resource && b.group == self.group)
    }
}

/// A well-known resource init can generate objects of.
#[derive(Debug)]
pub struct Builtin {
    /// Plural resource name.
    pub resource: &'static str,
    /// API group (empty for core).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Update strategy the generated controller declares for it (`InPlace`, or `Recreate` for
    /// kinds whose spec cannot be updated in place).
    pub update: &'static str,
}

/// The resources `--child`, `--target` and `--input` accept.
pub const BUILTINS: &[Builtin] = &[
    b("configmaps", "", "v1", "ConfigMap", "InPlace"),
    b("secrets", "", "v1", "Secret", "InPlace"),
    b("services", "", "v1", "Service", "InPlace"),
    b("serviceaccounts", "", "v1", "ServiceAccount", "InPlace"),
    b(
        "persistentvolumeclaims",
        "",
        "v1",
        "PersistentVolumeClaim",
        "InPlace",
    ),
    b("pods", "", "v1", "Pod", "Recreate"),
    b("deployments", "apps", "v1", "Deployment", "InPlace"),
    b("statefulsets", "apps", "v1", "StatefulSet", "InPlace"),
    b("daemonsets", "apps", "v1", "DaemonSet", "InPlace"),
    b("jobs", "batch", "v1", "Job", "Recreate"),
    b("cronjobs", "batch", "v1", "CronJob", "InPlace"),
    b("ingresses", "networking.k8s.io", "v1", "Ingress", "InPlace"),
];

const fn b(
    resource: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    update: &'static str,
) -> Builtin {
    Builtin {
        resource,
        group,
        version,
        kind,
        update,
    }
}

impl Builtin {
    /// As a [`TypeRef`].
    pub fn type_ref(&self) -> TypeRef {
        TypeRef {
            resource: self.resource.into(),
            group: self.group.into(),
            version: self.version.into(),
            kind: self.kind.into(),
        }
    }

    /// A minimal valid object of this kind, without `apiVersion`, `kind` and `metadata`.
    /// Two markers stand for what the hook computes: the string `$name` (the object's name;
    /// `$name-suffix` for a name built from it) and `$data` (the parent's string-valued spec
    /// fields, as a map).
    pub fn body(&self) -> Value {
        let labels = json!({"app": "$name"});
        let container = json!({"name": "main", "image": "registry.k8s.io/pause:3.10"});
        let pod_template =
            json!({"metadata": {"labels": labels}, "spec": {"containers": [container]}});
        let run_once = json!({"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox:1.36", "command": ["echo", "done"]}
        ]}});
        match self.resource {
            "configmaps" => json!({"data": "$data"}),
            "secrets" => json!({"stringData": "$data"}),
            "services" => json!({"spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}]
            }}),
            "persistentvolumeclaims" => json!({"spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}
            }}),
            "pods" => json!({"metadata": {"labels": labels}, "spec": {"containers": [container]}}),
            "deployments" => json!({"spec": {
                "replicas": 1, "selector": {"matchLabels": labels}, "template": pod_template
            }}),
            "statefulsets" => json!({"spec": {
                "replicas": 1, "serviceName": "$name",
                "selector": {"matchLabels": labels}, "template": pod_template
            }}),
            "daemonsets" => json!({"spec": {
                "selector": {"matchLabels": labels}, "template": pod_template
            }}),
            "jobs" => json!({"spec": {"template": run_once}}),
            "cronjobs" => json!({"spec": {
                "schedule": "*/30 * * * *", "jobTemplate": {"spec": {"template": run_once}}
            }}),
            "ingresses" => json!({"spec": {"rules": [{"http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "$name", "port": {"number": 80}}}
            }]}}]}}),
            // serviceaccounts: metadata only
            _ => json!({}),
        }
    }
}

/// `RESOURCE[.GROUP]` -> the well-known resource, or an error naming the accepted values.
pub fn resolve_resource(flag: &'static str, text: &str) -> Result<TypeRef, ScaffoldError> {
    let text = text.trim();
    let (resource, group) = text.split_once('.').unwrap_or((text, ""));
    let resource = resource.to_ascii_lowercase();
    if let Some(b) = BUILTINS
        .iter()
        .find(|b| b.resource == resource && b.group == group)
    {
        return Ok(b.type_ref());
    }
    let hint = match BUILTINS.iter().find(|b| b.resource == resource) {
        Some(b) => format!(" (did you mean {}?)", b.type_ref().display()),
        None => String::new(),
    };
    Err(ScaffoldError::UnknownResource {
        flag,
        value: text.to_string(),
        hint,
        accepted: accepted_resources(),
    })
}

/// The accepted `RESOURCE[.GROUP]` values, comma-separated.
pub fn accepted_resources() -> String {
    BUILTINS
        .iter()
        .map(|b| b.type_ref().display())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `Website.demo.example.com` -> (`Website`, `demo.example.com`), checked.
pub fn parse_parent(text: &str) -> Result<(String, String), ScaffoldError> {
    let bad = |why: &str| ScaffoldError::BadParent {
        value: text.to_string(),
        why: why.to_string(),
    };
    let (kind, group) = text
        .split_once('.')
        .ok_or_else(|| bad("expected KIND.GROUP, e.g. Website.demo.example.com"))?;
    check_kind(kind).map_err(|w| bad(&w))?;
    check_group(group).map_err(|w| bad(&w))?;
    Ok((kind.to_string(), group.to_string()))
}

/// A kind is UpperCamelCase: a capital ASCII letter, then letters and digits.
pub fn check_kind(kind: &str) -> Result<(), String> {
    let mut chars = kind.chars();
    match chars.next() {
        Some(c) if c.is_ascii_uppercase() => {}
        _ => {
            return Err(format!(
                "the kind {kind:?} must start with a capital letter (UpperCamelCase, e.g. Website)"
            ));
        }
    }
    if kind.len() > 63 || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "the kind {kind:?} must be letters and digits only, at most 63 (UpperCamelCase, e.g. Website)"
        ));
    }
    Ok(())
}

/// A CRD's group is a DNS subdomain with at least one dot (`example.com`).
pub fn check_group(group: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !group.contains('.') || group.len() > 253 || !group.split('.').all(label_ok) {
        return Err(format!(
            "the group {group:?} must be a lowercase DNS name with a dot, e.g. demo.example.com"
        ));
    }
    Ok(())
}

/// A version is a DNS label starting with `v` and a digit (`v1`, `v1alpha1`).
pub fn check_version(version: &str) -> Result<(), ScaffoldError> {
    let ok = version.starts_with('v')
        && version[1..].starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::BadVersion(version.to_string()))
    }
}

/// The kind a directory name suggests: `my-site` -> `MySite` (words split on `-`, `_`, `.`,
/// spaces; a leading digit is not allowed).
pub fn kind_from_dir(name: &str) -> Option<String> {
    let kind: String = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            cs.next()
                .map(|c| c.to_ascii_uppercase().to_string() + cs.as_str())
                .unwrap_or_default()
        })
        .collect();
    check_kind(&kind).ok().map(|()| kind)
}

/// The project name a directory name gives: a DNS label (`My Site` -> `my-site`).
pub fn project_name(dir_name: &str) -> String {
    let mut out = String::new();
    for c in dir_name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_matches('-').chars().take(50).collect();
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "controller".into()
    } else {
        out
    }
}

/// English plural of a lowercase kind, as Kubernetes names resources (`website` -> `websites`,
/// `policy` -> `policies`, `class` -> `classes`).
pub fn plural(lower: &str) -> String {
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with('z')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_resolve_and_unknown_ones_name_the_accepted() {
        let d = resolve_resource("--child", "deployments.apps").unwrap();
        assert_eq!(d.child_key(), "Deployment.apps/v1");
        assert_eq!(
            resolve_resource("--child", "configmaps")
                .unwrap()
                .child_key(),
            "ConfigMap.v1"
        );
        let e = resolve_resource("--child", "deployments")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean deployments.apps?"), "{e}");
        assert!(e.contains("ingresses.networking.k8s.io"), "{e}");
        let e = resolve_resource("--child", "widgets.acme.io")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("widgets.acme.io") && e.contains("configmaps"),
            "{e}"
        );
    }

    #[test]
    fn parent_kind_group_and_defaults_from_the_directory() {
        assert_eq!(
            parse_parent("Website.demo.example.com").unwrap(),
            ("Website".into(), "demo.example.com".into())
        );
        assert!(parse_parent("website.example.com").is_err());
        assert!(parse_parent("Website").is_err());
        assert!(parse_parent("Website.Example").is_err());
        assert_eq!(kind_from_dir("my-site").as_deref(), Some("MySite"));
        assert_eq!(kind_from_dir("9lives"), None);
        assert_eq!(project_name("My Site!"), "my-site");
        assert_eq!(plural("website"), "websites");
        assert_eq!(plural("policy"), "policies");
        assert_eq!(plural("gateway"), "gateways");
        assert_eq!(plural("class"), "classes");
        assert!(check_version("v1alpha1").is_ok());
        assert!(check_version("1").is_err());
    }
}
