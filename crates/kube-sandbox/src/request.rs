//! Turning a request path into what it addresses, the way kube-apiserver's RequestInfoFactory does.
//!
//! `/api/v1/namespaces/default/pods/web-0/status` becomes a [`ResourcePath`] with group "",
//! version v1, namespace default, resource pods, name web-0, subresource status. Non-resource
//! paths (discovery, health, OpenAPI) become their own [`Route`] variants.

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`
    Version,
    /// `/healthz`, `/readyz`, `/livez` (and their `/...` sub-checks)
    Health,
    /// `/api`
    Api,
    /// `/apis`
    Apis,
    /// `/apis/<group>`
    ApiGroup(String),
    /// `/api/v1` or `/apis/<group>/<version>`
    ApiResources {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// `/openapi/v2`
    OpenApiV2,
    /// `/openapi/v3` (index) or `/openapi/v3/<path>` (one group/version)
    OpenApiV3(Option<String>),
    /// A resource or object.
    Resource(ResourcePath),
    /// Anything else.
    Unknown,
}

/// A resource request path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourcePath {
    /// Group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Resource plural.
    pub resource: String,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource (`status`, `finalize`), if any.
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix was used.
    pub watch_prefix: bool,
}

/// Parse a path (without the query string).
pub fn parse(path: &str) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        ["version"] => Route::Version,
        [h, ..] if matches!(*h, "healthz" | "readyz" | "livez") => Route::Health,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3(None),
        ["openapi", "v3", rest @ ..] => Route::OpenApiV3(Some(rest.join("/"))),
        ["apis", group] => Route::ApiGroup(group.to_string()),
        ["api", version] => Route::ApiResources {
            group: String::new(),
            version: version.to_string(),
        },
        ["apis", group, version] => Route::ApiResources {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let mut parts = rest;
    let mut r = ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        ..Default::default()
    };
    if parts.first() == Some(&"watch") {
        r.watch_prefix = true;
        parts = &parts[1..];
    }
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        r.namespace = Some(parts[1].to_string());
        // `namespaces/<name>/status|finalize` is the namespace object itself.
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts = &parts[2..];
        } else {
            r.namespace = None;
        }
    }
    match parts {
        [res] => r.resource = res.to_string(),
        [res, name] => {
            r.resource = res.to_string();
            r.name = Some(name.to_string());
        }
        [res, name, sub] => {
            r.resource = res.to_string();
            r.name = Some(name.to_string());
            r.subresource = Some(sub.to_string());
        }
        // `pods/NAME/proxy/PATH...`: the path after `proxy` is the proxied request's.
        [res, name, "proxy", ..] => {
            r.resource = res.to_string();
            r.name = Some(name.to_string());
            r.subresource = Some("proxy".to_string());
        }
        _ => return Route::Unknown,
    }
    Route::Resource(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse("/api"), Route::Api);
        assert_eq!(parse("/apis/"), Route::Apis);
        assert_eq!(parse("/apis/apps"), Route::ApiGroup("apps".into()));
        assert_eq!(
            parse("/apis/apps/v1"),
            Route::ApiResources {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/readyz/ping"), Route::Health);
        assert_eq!(
            parse("/openapi/v3/apis/apps/v1"),
            Route::OpenApiV3(Some("apis/apps/v1".into()))
        );
        assert_eq!(parse("/nope"), Route::Unknown);
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let r = res("/api/v1/namespaces/default/pods/web-0/status");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (Some("default"), "pods", Some("web-0"), Some("status"))
        );
        let r = res("/api/v1/namespaces/default");
        assert_eq!(
            (r.namespace, r.resource.as_str(), r.name.as_deref()),
            (None, "namespaces", Some("default"))
        );
        let r = res("/api/v1/namespaces/ns1/finalize");
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("namespaces", Some("ns1"), Some("finalize"))
        );
        let r = res("/api/v1/namespaces");
        assert_eq!(
            (r.namespace, r.resource.as_str(), r.name),
            (None, "namespaces", None)
        );
        let r = res("/apis/apps/v1/deployments");
        assert_eq!((r.namespace, r.resource.as_str()), (None, "deployments"));
        let r = res("/apis/conf.example.com/v1/namespaces/x/widgets");
        assert_eq!(
            (r.group.as_str(), r.namespace.as_deref(), r.name),
            ("conf.example.com", Some("x"), None)
        );
        let r = res("/api/v1/watch/namespaces/x/configmaps");
        assert!(r.watch_prefix);
        assert_eq!(r.resource, "configmaps");
        assert_eq!(parse("/api/v1/namespaces/x/a/b/c/d"), Route::Unknown);
    }
}
