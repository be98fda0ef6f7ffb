//! Turning Metacontroller resource rules (`apiVersion` + plural `resource`) into kinds and scopes.
//!
//! [`Discovery`] asks the API server for one group-version at a time (`GET /api/v1`,
//! `GET /apis/<group>/<version>`) and caches the answer. A lookup that misses re-fetches its
//! group-version, at most once per second, so a CustomResourceDefinition created after the
//! first miss is found on a later try. Misses are explained: an unknown group-version, or an
//! unknown resource with a "did you mean" suggestion and the list of what is served.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::discovery::ApiResource;

/// A miss re-fetches its group-version at most this often.
const REFETCH_INTERVAL: Duration = Duration::from_secs(1);

/// Largest edit distance for a "did you mean" suggestion.
const MAX_SUGGESTION_DISTANCE: usize = 2;

/// One served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// Group, version, apiVersion, kind and plural.
    pub api_resource: ApiResource,
    /// Namespaced (true) or cluster-scoped (false).
    pub namespaced: bool,
    /// Has a `status` subresource.
    pub has_status: bool,
    /// Verbs the server allows (`get`, `list`, `watch`, ...).
    pub verbs: Vec<String>,
}

impl ResourceInfo {
    /// The hooks' map key for this type: `<Kind>.<apiVersion>` (`Pod.v1`, `StatefulSet.apps/v1`).
    pub fn key(&self) -> String {
        format!(
            "{}.{}",
            self.api_resource.kind, self.api_resource.api_version
        )
    }
}

/// Why a resource could not be resolved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DiscoveryError {
    /// The server does not serve this group-version at all.
    #[error(
        "the API server does not serve {api_version}; check apiVersion, or create the CRD first (kubectl meta dev --apply -f crd.yaml ...)"
    )]
    GroupVersionNotFound {
        /// The apiVersion asked for.
        api_version: String,
    },
    /// The group-version is served but has no resource of that plural name.
    #[error(
        "{api_version} has no resource {resource:?}{} (`resource` takes the lower-case plural name; {api_version} serves: {})",
        did_you_mean(suggestion),
        list_or_none(available)
    )]
    ResourceNotFound {
        /// The apiVersion asked for.
        api_version: String,
        /// The resource asked for.
        resource: String,
        /// Plural names the group-version serves.
        available: Vec<String>,
        /// The closest served plural, if one is close.
        suggestion: Option<String>,
    },
    /// The group-version is served but has no resource of that kind.
    #[error(
        "{api_version} has no kind {kind:?}{} ({api_version} serves kinds: {})",
        did_you_mean(suggestion),
        list_or_none(available)
    )]
    KindNotFound {
        /// The apiVersion asked for.
        api_version: String,
        /// The kind asked for.
        kind: String,
        /// Kinds the group-version serves.
        available: Vec<String>,
        /// The closest served kind, if one is close.
        suggestion: Option<String>,
    },
    /// Asking the API server failed.
    #[error("discovering {api_version} on the API server failed: {message}")]
    Api {
        /// The apiVersion asked for.
        api_version: String,
        /// The client's message.
        message: String,
    },
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!("; did you mean {s:?}?"))
        .unwrap_or_default()
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "nothing".to_string()
    } else {
        names.join(", ")
    }
}

/// What one fetch of a group-version found.
#[derive(Clone)]
struct Entry {
    fetched: Instant,
    /// `None`: the group-version is not served.
    resources: Option<Arc<Vec<ResourceInfo>>>,
}

/// Cached, refreshing resource discovery. Cloning is cheap and clones share the cache.
#[derive(Clone)]
pub struct Discovery {
    client: kube::Client,
    cache: Arc<RwLock<HashMap<String, Entry>>>,
}

impl Discovery {
    /// Discovery through `client`, with an empty cache.
    pub fn new(client: kube::Client) -> Self {
        Discovery {
            client,
            cache: Arc::new(RwLock::new(HashMap::new())),
        }
    }

    /// The resource `resource` (a plural, as in Metacontroller rules) of `api_version`.
    pub async fn resolve(
        &self,
        api_version: &str,
        resource: &str,
    ) -> Result<ResourceInfo, DiscoveryError> {
        let list = match self
            .find(api_version, |r| r.api_resource.plural == resource)
            .await?
        {
            Ok(found) => return Ok(found),
            Err(list) => list,
        };
        Err(DiscoveryError::ResourceNotFound {
            api_version: api_version.to_string(),
            resource: resource.to_string(),
            available: list.iter().map(|r| r.api_resource.plural.clone()).collect(),
            suggestion: suggest(resource, &list, |r| &r.api_resource.plural),
        })
    }

    /// The resource serving `kind` in `api_version` (hooks name objects by apiVersion + kind).
    pub async fn resolve_kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<ResourceInfo, DiscoveryError> {
        let list = match self
            .find(api_version, |r| r.api_resource.kind == kind)
            .await?
        {
            Ok(found) => return Ok(found),
            Err(list) => list,
        };
        Err(DiscoveryError::KindNotFound {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            available: list.iter().map(|r| r.api_resource.kind.clone()).collect(),
            suggestion: suggest(kind, &list, |r| &r.api_resource.kind),
        })
    }

    /// Forget everything, so the next lookups ask the server again (after applying CRDs).
    pub fn invalidate(&self) {
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The first resource of `api_version` matching `wanted`; `Ok(Err(list))` when the
    /// group-version is served but nothing matches.
    async fn find(
        &self,
        api_version: &str,
        wanted: impl Fn(&ResourceInfo) -> bool,
    ) -> Result<Result<ResourceInfo, Arc<Vec<ResourceInfo>>>, DiscoveryError> {
        let cached = self
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(api_version)
            .cloned();
        let entry = match cached {
            Some(e) if e.fetched.elapsed() < REFETCH_INTERVAL => e,
            Some(e) if e.resources.as_ref().is_some_and(|l| l.iter().any(&wanted)) => e,
            _ => self.fetch(api_version).await?,
        };
        let Some(list) = entry.resources else {
            return Err(DiscoveryError::GroupVersionNotFound {
                api_version: api_version.to_string(),
            });
        };
        Ok(match list.iter().find(|r| wanted(r)) {
            Some(found) => Ok(found.clone()),
            None => Err(list),
        })
    }

    /// Ask the server for `api_version` and cache the answer.
    async fn fetch(&self, api_version: &str) -> Result<Entry, DiscoveryError> {
        let resources = match split_api_version(api_version) {
            None => None,
            Some((group, version)) => {
                let answer = if group.is_empty() {
                    self.client.list_core_api_resources(version).await
                } else {
                    self.client.list_api_group_resources(api_version).await
                };
                match answer {
                    Ok(list) => Some(Arc::new(parse_list(group, version, api_version, list))),
                    Err(kube::Error::Api(s)) if s.code == 404 => None,
                    Err(e) => {
                        return Err(DiscoveryError::Api {
                            api_version: api_version.to_string(),
                            message: match e {
                                kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
                                other => other.to_string(),
                            },
                        });
                    }
                }
            }
        };
        let entry = Entry {
            fetched: Instant::now(),
            resources,
        };
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(api_version.to_string(), entry.clone());
        Ok(entry)
    }
}

/// `v1` -> `("", "v1")`, `apps/v1` -> `("apps", "v1")`; `None` for anything that cannot be
/// an apiVersion (so it never turns into a different URL).
fn split_api_version(api_version: &str) -> Option<(&str, &str)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let valid = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    (valid(version) && (group.is_empty() && !api_version.contains('/') || valid(group)))
        .then_some((group, version))
}

/// Top-level resources of a discovery answer; `<plural>/status` marks its parent `has_status`.
fn parse_list(
    group: &str,
    version: &str,
    api_version: &str,
    list: APIResourceList,
) -> Vec<ResourceInfo> {
    let (subresources, resources): (Vec<_>, Vec<_>) = list
        .resources
        .into_iter()
        .partition(|r| r.name.contains('/'));
    let mut out: Vec<ResourceInfo> = resources
        .into_iter()
        .map(|r| ResourceInfo {
            api_resource: ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: api_version.to_string(),
                kind: r.kind,
                plural: r.name,
            },
            namespaced: r.namespaced,
            has_status: false,
            verbs: r.verbs,
        })
        .collect();
    for sub in subresources {
        if let Some((parent, "status")) = sub.name.split_once('/')
            && let Some(info) = out.iter_mut().find(|i| i.api_resource.plural == parent)
        {
            info.has_status = true;
        }
    }
    out
}

/// The served name (`name_of`) closest to `wanted`: equal ignoring case, or the other naming
/// given (a kind for a plural, a plural for a kind), or within a small edit distance.
fn suggest(
    wanted: &str,
    list: &[ResourceInfo],
    name_of: impl Fn(&ResourceInfo) -> &String,
) -> Option<String> {
    let wanted = wanted.to_ascii_lowercase();
    let same = |r: &&ResourceInfo| {
        r.api_resource.plural.eq_ignore_ascii_case(&wanted)
            || r.api_resource.kind.eq_ignore_ascii_case(&wanted)
    };
    if let Some(r) = list.iter().find(same) {
        return Some(name_of(r).clone());
    }
    list.iter()
        .map(|r| {
            let d = edit_distance(&wanted, &name_of(r).to_ascii_lowercase());
            (d, r)
        })
        .filter(|(d, _)| *d <= MAX_SUGGESTION_DISTANCE)
        .min_by_key(|(d, _)| *d)
        .map(|(_, r)| name_of(r).clone())
}

/// Levenshtein distance over chars (also used by `inspect`'s "did you mean").
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur.push(substitute.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::client::connect;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::PostParams;
    use kube_sandbox::{Sandbox, SandboxConfig};
    use serde_json::json;

    async fn setup() -> (Sandbox, Discovery, tempfile::TempDir) {
        let sb = Sandbox::start(SandboxConfig::ephemeral()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, sb.kubeconfig_yaml()).unwrap();
        let conn = connect(Some(&path), Some("sandbox"), None).await.unwrap();
        (sb, Discovery::new(conn.client), dir)
    }

    async fn create_crd(client: &kube::Client, plural: &str, kind: &str, scope: &str) {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {
                "group": "example.com",
                "scope": scope,
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}
                }]
            }
        }))
        .unwrap();
        kube::Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }

    /// Poll `resolve` until it succeeds (30 s limit).
    async fn eventually(d: &Discovery, av: &str, plural: &str) -> ResourceInfo {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match d.resolve(av, plural).await {
                Ok(info) => return info,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("{e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{av} {plural} never appeared: {e}"),
            }
        }
    }

    #[tokio::test]
    async fn resolves_core_and_apps_resources() {
        let (sb, d, _dir) = setup().await;
        let pods = d.resolve("v1", "pods").await.unwrap();
        assert_eq!(pods.api_resource.kind, "Pod");
        assert_eq!(pods.api_resource.group, "");
        assert_eq!(pods.api_resource.version, "v1");
        assert_eq!(pods.api_resource.api_version, "v1");
        assert!(pods.namespaced && pods.has_status);
        assert!(pods.verbs.iter().any(|v| v == "watch"), "{:?}", pods.verbs);
        assert_eq!(pods.key(), "Pod.v1");

        let cm = d.resolve("v1", "configmaps").await.unwrap();
        assert!(cm.namespaced && !cm.has_status);
        let ns = d.resolve("v1", "namespaces").await.unwrap();
        assert!(!ns.namespaced);

        let sts = d.resolve("apps/v1", "statefulsets").await.unwrap();
        assert_eq!(sts.key(), "StatefulSet.apps/v1");
        assert_eq!(
            (
                sts.api_resource.group.as_str(),
                sts.api_resource.plural.as_str()
            ),
            ("apps", "statefulsets")
        );
        assert!(sts.namespaced && sts.has_status);

        let by_kind = d.resolve_kind("apps/v1", "Deployment").await.unwrap();
        assert_eq!(by_kind.api_resource.plural, "deployments");
        assert_eq!(
            d.resolve_kind("v1", "Namespace").await.unwrap(),
            ns,
            "by kind and by plural agree"
        );
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn unknown_resources_are_explained() {
        let (sb, d, _dir) = setup().await;
        for (asked, meant) in [
            ("deployment", "deployments"),
            ("Deployments", "deployments"),
            ("Deployment", "deployments"),
            ("deploymnts", "deployments"),
        ] {
            let err = d.resolve("apps/v1", asked).await.unwrap_err();
            match &err {
                DiscoveryError::ResourceNotFound {
                    api_version,
                    resource,
                    available,
                    suggestion,
                } => {
                    assert_eq!(
                        (api_version.as_str(), resource.as_str()),
                        ("apps/v1", asked)
                    );
                    assert!(
                        available.iter().any(|a| a == "statefulsets"),
                        "{available:?}"
                    );
                    assert_eq!(suggestion.as_deref(), Some(meant), "{asked}");
                }
                other => panic!("{other:?}"),
            }
            assert!(
                err.to_string().contains("did you mean \"deployments\"?"),
                "{err}"
            );
        }
        let err = d.resolve("apps/v1", "gizmos").await.unwrap_err();
        assert!(
            matches!(
                &err,
                DiscoveryError::ResourceNotFound {
                    suggestion: None,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!err.to_string().contains("did you mean"), "{err}");
        assert!(err.to_string().contains("daemonsets"), "{err}");

        let err = d.resolve_kind("v1", "configmap").await.unwrap_err();
        assert!(
            matches!(&err, DiscoveryError::KindNotFound { kind, suggestion: Some(s), .. }
                if kind == "configmap" && s == "ConfigMap"),
            "{err:?}"
        );

        for av in ["apps/v2", "example.com/v1", "apps/v1/x", "", "Apps/v1"] {
            let err = d.resolve(av, "deployments").await.unwrap_err();
            assert!(
                matches!(&err, DiscoveryError::GroupVersionNotFound { api_version } if api_version == av),
                "{av}: {err:?}"
            );
        }
        let msg = d.resolve("apps/v2", "x").await.unwrap_err().to_string();
        assert!(
            msg.contains("does not serve apps/v2") && msg.contains("create the CRD first"),
            "{msg}"
        );
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn custom_resources_created_later_are_found() {
        let (sb, d, _dir) = setup().await;
        let client = d.client.clone();
        let t0 = Instant::now();
        let miss = d.resolve("example.com/v1", "widgets").await.unwrap_err();
        assert!(
            matches!(miss, DiscoveryError::GroupVersionNotFound { .. }),
            "{miss:?}"
        );
        create_crd(&client, "widgets", "Widget", "Namespaced").await;
        // Within a second of the miss the cached answer stands (no re-fetch storm).
        let again = d.resolve("example.com/v1", "widgets").await;
        if t0.elapsed() < REFETCH_INTERVAL {
            assert!(
                matches!(again, Err(DiscoveryError::GroupVersionNotFound { .. })),
                "{again:?}"
            );
        }
        let widgets = eventually(&d, "example.com/v1", "widgets").await;
        assert_eq!(widgets.key(), "Widget.example.com/v1");
        assert!(widgets.namespaced && widgets.has_status);

        // A second CRD in the same, now cached, group-version: the miss re-fetches.
        let miss = d.resolve("example.com/v1", "gadgets").await.unwrap_err();
        assert!(
            matches!(&miss, DiscoveryError::ResourceNotFound { available, .. } if available == &["widgets"]),
            "{miss:?}"
        );
        create_crd(&client, "gadgets", "Gadget", "Cluster").await;
        let gadgets = eventually(&d, "example.com/v1", "gadgets").await;
        assert!(!gadgets.namespaced);
        assert_eq!(
            d.resolve_kind("example.com/v1", "Gadget").await.unwrap(),
            gadgets
        );

        // invalidate() makes the next lookup ask at once.
        let miss = d.resolve("example.com/v1", "doohickeys").await.unwrap_err();
        assert!(matches!(miss, DiscoveryError::ResourceNotFound { .. }));
        create_crd(&client, "doohickeys", "Doohickey", "Namespaced").await;
        d.invalidate();
        let found = d.resolve("example.com/v1", "doohickeys").await.unwrap();
        assert_eq!(found.api_resource.kind, "Doohickey");
        sb.shutdown().await;
    }

    #[tokio::test]
    async fn server_errors_are_reported_as_api_errors() {
        let (sb, d, _dir) = setup().await;
        sb.shutdown().await;
        let err = d.resolve("v1", "pods").await.unwrap_err();
        assert!(
            matches!(&err, DiscoveryError::Api { api_version, .. } if api_version == "v1"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("discovering v1 on the API server failed:")
        );
    }

    #[test]
    fn api_versions_and_distances() {
        assert_eq!(split_api_version("v1"), Some(("", "v1")));
        assert_eq!(split_api_version("apps/v1"), Some(("apps", "v1")));
        assert_eq!(
            split_api_version("ctl.example.com/v1beta1"),
            Some(("ctl.example.com", "v1beta1"))
        );
        for bad in ["", "/v1", "apps/", "a/b/c", "v1?watch=1", "apps /v1"] {
            assert_eq!(split_api_version(bad), None, "{bad:?}");
        }
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("pods", "pods"), 0);
        assert_eq!(edit_distance("pod", "pods"), 1);
        assert_eq!(edit_distance("secrest", "secrets"), 2);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
