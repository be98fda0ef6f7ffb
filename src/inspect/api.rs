//! What `inspect` asks the API server, and how much: full discovery (with short and singular
//! names, for kubectl's resource syntax), metadata-only lists, single full objects.
//!
//! Every request goes through [`Fetcher`], which counts requests and response bytes
//! ([`RequestStats`], what the bench reports) and bounds parallelism. Lists ask for
//! `application/json;as=PartialObjectMetadataList` and fall back to plain JSON when the server
//! refuses it (406 / 415), remembering that it did.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::StreamExt;
use kube::discovery::ApiResource;
use serde_json::Value;

use super::InspectError;

/// Requests in flight at once.
pub const PARALLEL_REQUESTS: usize = 16;

const METADATA_LIST_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// One served resource type (its preferred version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiType {
    /// Group, version, apiVersion, kind and plural.
    pub resource: ApiResource,
    /// `singularName` (lower-case kind when the server gives none).
    pub singular: String,
    /// `shortNames` (`po`, `deploy`).
    pub short_names: Vec<String>,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Verbs the server allows.
    pub verbs: Vec<String>,
    /// Has a `status` subresource.
    pub has_status: bool,
}

impl ApiType {
    /// Can be listed.
    pub fn listable(&self) -> bool {
        self.verbs.iter().any(|v| v == "list")
    }

    /// Can be watched.
    pub fn watchable(&self) -> bool {
        self.verbs.iter().any(|v| v == "watch")
    }

    /// kubectl's full name: `pods`, `deployments.apps`, `greetings.accept.example.com`.
    pub fn full_name(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.plural.clone()
        } else {
            format!("{}.{}", self.resource.plural, self.resource.group)
        }
    }

    /// The URL path of the collection, in `namespace` (None: every namespace, or
    /// cluster-scoped).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let base = if self.resource.group.is_empty() {
            format!("/api/{}", self.resource.version)
        } else {
            format!("/apis/{}", self.resource.api_version)
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("{base}/namespaces/{ns}/{}", self.resource.plural),
            None => format!("{base}/{}", self.resource.plural),
        }
    }

    fn matches_name(&self, name: &str) -> bool {
        self.resource.plural == name
            || self.singular == name
            || self.short_names.iter().any(|s| s == name)
            || self.resource.kind.eq_ignore_ascii_case(name)
    }
}

/// Requests made and response bytes read.
#[derive(Debug, Default)]
pub struct RequestStats {
    requests: AtomicU64,
    bytes: AtomicU64,
    full_lists: AtomicBool,
}

impl RequestStats {
    /// Requests made so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Response body bytes read so far (after decompression).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// True when the server refused metadata-only lists and full objects were listed instead.
    pub fn fell_back_to_full_lists(&self) -> bool {
        self.full_lists.load(Ordering::Relaxed)
    }
}

/// The outcome of listing one type.
#[derive(Debug)]
pub enum Listed {
    /// The objects (metadata only, or full when the server refused metadata-only lists), each
    /// with `apiVersion` and `kind` set.
    Items(Vec<Value>),
    /// RBAC forbids listing it (403).
    Forbidden(String),
    /// The type vanished or cannot be listed (404, 405).
    Gone,
}

/// Counting, bounded access to the API server.
#[derive(Clone)]
pub struct Fetcher {
    client: kube::Client,
    stats: Arc<RequestStats>,
}

/// A failed request: the HTTP status code (0 when there was no answer) and a message.
#[derive(Debug, Clone)]
pub struct RequestError {
    /// HTTP status code, 0 for transport errors.
    pub code: u16,
    /// What went wrong.
    pub message: String,
}

impl Fetcher {
    /// A fetcher on `client` with fresh counters.
    pub fn new(client: kube::Client) -> Self {
        Fetcher {
            client,
            stats: Arc::new(RequestStats::default()),
        }
    }

    /// The underlying client (for watches).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The counters.
    pub fn stats(&self) -> &RequestStats {
        &self.stats
    }

    async fn send(&self, req: http::Request<Vec<u8>>) -> Result<Value, RequestError> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        match self.client.request_text(req).await {
            Ok(text) => {
                self.stats
                    .bytes
                    .fetch_add(text.len() as u64, Ordering::Relaxed);
                serde_json::from_str(&text).map_err(|e| RequestError {
                    code: 0,
                    message: format!("the answer is not JSON: {e}"),
                })
            }
            Err(kube::Error::Api(s)) => Err(RequestError {
                code: s.code,
                message: s.message.clone(),
            }),
            Err(e) => Err(RequestError {
                code: 0,
                message: e.to_string(),
            }),
        }
    }

    async fn get_path(&self, path: &str, accept: &str) -> Result<Value, RequestError> {
        let req = http::Request::get(path)
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| RequestError {
                code: 0,
                message: e.to_string(),
            })?;
        self.send(req).await
    }

    /// One object, in full; `Ok(None)` when it does not exist.
    pub async fn get(
        &self,
        ty: &ApiType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, RequestError> {
        let path = format!(
            "{}/{}",
            ty.collection_path(namespace.filter(|_| ty.namespaced)),
            name
        );
        match self.get_path(&path, "application/json").await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The objects of `ty` in `namespace` (None: every namespace), metadata only when the server
    /// allows it.
    pub async fn list_metadata(&self, ty: &ApiType, namespace: Option<&str>) -> Listed {
        let path = ty.collection_path(namespace);
        let accept = if self.stats.full_lists.load(Ordering::Relaxed) {
            "application/json"
        } else {
            METADATA_LIST_ACCEPT
        };
        let mut answer = self.get_path(&path, accept).await;
        if let Err(e) = &answer
            && matches!(e.code, 406 | 415)
            && accept != "application/json"
        {
            self.stats.full_lists.store(true, Ordering::Relaxed);
            answer = self.get_path(&path, "application/json").await;
        }
        match answer {
            Ok(list) => {
                if list.get("kind").and_then(Value::as_str) != Some("PartialObjectMetadataList") {
                    self.stats.full_lists.store(true, Ordering::Relaxed);
                }
                Listed::Items(items_of(list, &ty.resource))
            }
            Err(e) if e.code == 403 => Listed::Forbidden(e.message),
            Err(e) if matches!(e.code, 404 | 405) => Listed::Gone,
            Err(e) => Listed::Forbidden(format!("error {}: {}", e.code, e.message)),
        }
    }

    /// The objects of `ty` in `namespace` (None: every namespace), full objects (what a tool
    /// that lists every type, as kubectl-tree does, reads; used by the bench to compare).
    pub async fn list_full(&self, ty: &ApiType, namespace: Option<&str>) -> Listed {
        match self
            .get_path(&ty.collection_path(namespace), "application/json")
            .await
        {
            Ok(list) => Listed::Items(items_of(list, &ty.resource)),
            Err(e) if e.code == 403 => Listed::Forbidden(e.message),
            Err(_) => Listed::Gone,
        }
    }

    /// List every `(type, namespace)` in parallel (at most [`PARALLEL_REQUESTS`] at once),
    /// metadata only ([`Fetcher::list_metadata`]) or, with `full`, full objects
    /// ([`Fetcher::list_full`]); results in the order asked.
    pub async fn list_many(
        &self,
        asks: Vec<(ApiType, Option<String>)>,
        full: bool,
    ) -> Vec<(ApiType, Listed)> {
        futures::stream::iter(asks)
            .map(|(ty, ns)| async move {
                let listed = if full {
                    self.list_full(&ty, ns.as_deref()).await
                } else {
                    self.list_metadata(&ty, ns.as_deref()).await
                };
                (ty, listed)
            })
            .buffered(PARALLEL_REQUESTS)
            .collect()
            .await
    }

    /// GET many objects in parallel ([`Fetcher::get`]); each answer in the order asked.
    pub async fn get_many(
        &self,
        asks: Vec<(ApiType, Option<String>, String)>,
    ) -> Vec<Result<Option<Value>, RequestError>> {
        futures::stream::iter(asks)
            .map(|(ty, ns, name)| async move { self.get(&ty, ns.as_deref(), &name).await })
            .buffered(PARALLEL_REQUESTS)
            .collect()
            .await
    }
}

/// The items of a list answer, each given the list's type (`PartialObjectMetadata` items carry
/// the meta.k8s.io type instead of their own).
fn items_of(list: Value, resource: &ApiResource) -> Vec<Value> {
    let Value::Object(mut list) = list else {
        return Vec::new();
    };
    let Some(Value::Array(items)) = list.remove("items") else {
        return Vec::new();
    };
    items
        .into_iter()
        .map(|mut item| {
            if let Some(o) = item.as_object_mut() {
                o.insert(
                    "apiVersion".into(),
                    Value::String(resource.api_version.clone()),
                );
                o.insert("kind".into(), Value::String(resource.kind.clone()));
            }
            item
        })
        .collect()
}

/// Every served type, preferred versions only, in discovery order (core first).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The types.
    pub types: Vec<ApiType>,
}

impl Catalog {
    /// Ask the server (`/api`, `/apis`, then each preferred group-version, in parallel).
    pub async fn discover(fetcher: &Fetcher) -> Result<Catalog, InspectError> {
        let api_err = |what: &str, e: RequestError| InspectError::Api {
            what: format!("discovering {what} on the API server failed"),
            message: e.message,
        };
        let core = fetcher
            .get_path("/api", "application/json")
            .await
            .map_err(|e| api_err("/api", e))?;
        let groups = fetcher
            .get_path("/apis", "application/json")
            .await
            .map_err(|e| api_err("/apis", e))?;
        let mut gvs: Vec<(String, String, String)> = Vec::new();
        for v in core
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .take(1)
        {
            gvs.push((String::new(), v.to_string(), format!("/api/{v}")));
        }
        for g in groups
            .get("groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = g.get("name").and_then(Value::as_str).unwrap_or_default();
            let preferred = g
                .pointer("/preferredVersion/version")
                .and_then(Value::as_str)
                .or_else(|| g.pointer("/versions/0/version").and_then(Value::as_str));
            if let Some(v) = preferred
                && !name.is_empty()
            {
                gvs.push((name.to_string(), v.to_string(), format!("/apis/{name}/{v}")));
            }
        }
        let lists: Vec<(String, String, Result<Value, RequestError>)> = futures::stream::iter(gvs)
            .map(|(g, v, path)| async move {
                let r = fetcher.get_path(&path, "application/json").await;
                (g, v, r)
            })
            .buffered(PARALLEL_REQUESTS)
            .collect()
            .await;
        let mut types = Vec::new();
        for (group, version, answer) in lists {
            let list = match answer {
                Ok(l) => l,
                // A group that vanished or is forbidden meanwhile: skip it, as kubectl does.
                Err(e) if e.code != 0 => continue,
                Err(e) => return Err(api_err(&format!("{group}/{version}"), e)),
            };
            types.extend(parse_resource_list(&group, &version, &list));
        }
        Ok(Catalog { types })
    }

    /// Resolve kubectl's resource syntax: plural, singular, short name or kind, optionally
    /// qualified with `.group` or `.version.group` (`deploy`, `deployments.apps`,
    /// `greetings.accept.example.com`, `Pod`).
    pub fn resolve(&self, asked: &str) -> Result<&ApiType, InspectError> {
        let lower = asked.to_ascii_lowercase();
        if let Some(t) = self.types.iter().find(|t| t.matches_name(&lower)) {
            return Ok(t);
        }
        // `resource.group` or `resource.version.group`.
        if let Some((name, rest)) = lower.split_once('.') {
            let by_group = self
                .types
                .iter()
                .find(|t| t.resource.group == rest && t.matches_name(name));
            if let Some(t) = by_group {
                return Ok(t);
            }
            if let Some((version, group)) = rest.split_once('.') {
                let by_version = self.types.iter().find(|t| {
                    t.resource.group == group
                        && t.resource.version == version
                        && t.matches_name(name)
                });
                if let Some(t) = by_version {
                    return Ok(t);
                }
            }
        }
        Err(InspectError::UnknownType {
            asked: asked.to_string(),
            suggestion: self.suggest(&lower),
        })
    }

    /// The type of an `apiVersion` + `kind` (an ownerReference), by group and kind.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ApiType> {
        let group = crate::k8s::object::group_of(api_version);
        self.types
            .iter()
            .find(|t| t.resource.group == group && t.resource.kind == kind)
    }

    /// The type of a Metacontroller resource rule (`apiVersion` + plural), by group and plural.
    pub fn by_rule(&self, api_version: &str, plural: &str) -> Option<&ApiType> {
        let group = crate::k8s::object::group_of(api_version);
        self.types
            .iter()
            .find(|t| t.resource.group == group && t.resource.plural == plural)
    }

    fn suggest(&self, asked: &str) -> Option<String> {
        self.types
            .iter()
            .flat_map(|t| {
                std::iter::once(&t.resource.plural)
                    .chain(std::iter::once(&t.singular))
                    .map(move |n| (n, t))
            })
            .map(|(n, t)| (crate::k8s::discovery::edit_distance(asked, n), t))
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, t)| t.full_name())
    }
}

fn parse_resource_list(group: &str, version: &str, list: &Value) -> Vec<ApiType> {
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<&Value> = list
        .get("resources")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let strings = |v: &Value, f: &str| -> Vec<String> {
        v.get(f)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out: Vec<ApiType> = Vec::new();
    for r in &resources {
        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() || name.contains('/') {
            continue;
        }
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
        let singular = r
            .get("singularName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(|| kind.to_ascii_lowercase(), str::to_string);
        out.push(ApiType {
            resource: ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: api_version.clone(),
                kind: kind.to_string(),
                plural: name.to_string(),
            },
            singular,
            short_names: strings(r, "shortNames"),
            namespaced: r.get("namespaced").and_then(Value::as_bool) == Some(true),
            verbs: strings(r, "verbs"),
            has_status: false,
        });
    }
    for r in &resources {
        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
        if let Some((parent, "status")) = name.split_once('/')
            && let Some(t) = out.iter_mut().find(|t| t.resource.plural == parent)
        {
            t.has_status = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        let core = json!({"resources": [
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": ["get", "list", "watch"], "shortNames": ["po"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
            {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
             "verbs": ["get", "list"], "shortNames": ["ns"]},
        ]});
        let apps = json!({"resources": [
            {"name": "deployments", "singularName": "deployment", "namespaced": true, "kind": "Deployment",
             "verbs": ["get", "list"], "shortNames": ["deploy"]},
        ]});
        let mut types = parse_resource_list("", "v1", &core);
        types.extend(parse_resource_list("apps", "v1", &apps));
        Catalog { types }
    }

    #[test]
    fn resolves_kubectl_resource_syntax() {
        let c = catalog();
        for (asked, full) in [
            ("po", "pods"),
            ("pod", "pods"),
            ("pods", "pods"),
            ("Pod", "pods"),
            ("ns", "namespaces"),
            ("deploy", "deployments.apps"),
            ("deployments.apps", "deployments.apps"),
            ("deployment.apps", "deployments.apps"),
            ("deploy.apps", "deployments.apps"),
            ("deployments.v1.apps", "deployments.apps"),
        ] {
            let t = c.resolve(asked).unwrap_or_else(|e| panic!("{asked}: {e}"));
            assert_eq!(t.full_name(), full, "{asked}");
        }
        let pods = c.resolve("pods").expect("pods");
        assert!(pods.has_status && pods.namespaced && pods.watchable());
        assert!(!c.resolve("ns").expect("ns").namespaced);
        assert_eq!(pods.collection_path(Some("a")), "/api/v1/namespaces/a/pods");
        assert_eq!(
            c.resolve("deploy").expect("deploy").collection_path(None),
            "/apis/apps/v1/deployments"
        );
        let e = c.resolve("deploymnts").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server doesn't have a resource type \"deploymnts\"; did you mean \"deployments.apps\"?"
        );
        assert!(c.resolve("deployments.batch").is_err());
        assert!(
            c.resolve("gizmos")
                .unwrap_err()
                .to_string()
                .ends_with("\"gizmos\"")
        );
    }
}
