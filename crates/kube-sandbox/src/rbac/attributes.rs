//! What a request asks to do, in authorizer terms, as kube-apiserver's `RequestInfoFactory`
//! works it out: the verb (`get`/`list`/`watch` by whether a name is given and `watch` asked
//! for, `create`, `update`, `patch`, `delete`, `deletecollection`), the namespace (a
//! Namespace's own name for `/api/v1/namespaces/NAME`), resource, subresource and name (for a
//! list or watch, the name a `metadata.name=` field selector pins), or a non-resource path and
//! the HTTP verb.

use std::collections::HashMap;

use axum::http::Method;

use super::rules::Attributes;
use crate::request::{ResourcePath, Route};

/// The attributes of a request to `path` with `method` and query `params`.
pub fn of_request(
    route: &Route,
    path: &str,
    method: &Method,
    params: &HashMap<String, String>,
) -> Attributes {
    let Route::Resource(rp) = route else {
        return Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
            ..Default::default()
        };
    };
    of_resource(rp, method, params)
}

fn of_resource(rp: &ResourcePath, method: &Method, params: &HashMap<String, String>) -> Attributes {
    let watch =
        rp.watch_prefix || matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let named = rp.name.is_some();
    let verb = match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    };
    let mut name = rp.name.clone().unwrap_or_default();
    if matches!(verb, "list" | "watch")
        && name.is_empty()
        && let Some(fs) = params.get("fieldSelector")
        && let Some(pinned) = pinned_name(fs)
    {
        name = pinned;
    }
    let namespace = match (&rp.namespace, rp.group.as_str(), rp.resource.as_str()) {
        (Some(ns), _, _) => ns.clone(),
        (None, "", "namespaces") => rp.name.clone().unwrap_or_default(),
        (None, _, _) => String::new(),
    };
    Attributes {
        verb: verb.to_string(),
        namespace,
        api_group: rp.group.clone(),
        resource: rp.resource.clone(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        name,
        path: String::new(),
        resource_request: true,
    }
}

/// The name a field selector pins (`metadata.name=x` or `metadata.name==x`), as RequestInfo
/// reads it for list and watch requests.
fn pinned_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let t = term.trim();
        t.strip_prefix("metadata.name==")
            .or_else(|| t.strip_prefix("metadata.name="))
            .map(String::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request;

    fn attrs(method: Method, path: &str, query: &[(&str, &str)]) -> Attributes {
        let params = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        of_request(&request::parse(path), path, &method, &params)
    }

    #[test]
    fn verbs_namespaces_and_names_as_request_info_finds_them() {
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/configmaps", &[]);
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("list", "ns"));
        let a = attrs(Method::GET, "/api/v1/configmaps", &[("watch", "true")]);
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("watch", ""));
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/ns/configmaps",
            &[("fieldSelector", "metadata.name=one")],
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "one"));
        let a = attrs(Method::GET, "/api/v1/namespaces/team", &[]);
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.name.as_str()),
            ("get", "team", "team")
        );
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/pods/p/log", &[]);
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("pods", "log")
        );
        let a = attrs(
            Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments",
            &[],
        );
        assert_eq!(
            (a.verb.as_str(), a.api_group.as_str()),
            ("deletecollection", "apps")
        );
        let a = attrs(Method::GET, "/apis", &[]);
        assert_eq!(
            (a.verb.as_str(), a.path.as_str(), a.resource_request),
            ("get", "/apis", false)
        );
    }
}
