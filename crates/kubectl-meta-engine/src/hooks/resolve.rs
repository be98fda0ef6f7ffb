//! Webhook addresses: `webhook.url`, or `webhook.service` + `webhook.path`, seen from a laptop.
//!
//! A definition written for a cluster names hooks by in-cluster addresses (a Service, or a URL
//! with a cluster DNS name). `--hook-base-url http://127.0.0.1:PORT` maps them to a local server:
//! scheme, host and port come from the base (and its path prefix, if any, is prepended), path and
//! query come from the definition. A Service address without a base URL is an error, since a
//! cluster Service is not reachable from outside the cluster.

use reqwest::Url;

/// `webhook.service` of a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAddr {
    /// Service name.
    pub name: String,
    /// Service namespace.
    pub namespace: String,
    /// Port (80 when absent).
    pub port: Option<i32>,
    /// `http` (default) or `https`.
    pub protocol: Option<String>,
}

impl ServiceAddr {
    /// `name.namespace:port`, as Metacontroller would address it.
    pub fn host_port(&self) -> String {
        format!(
            "{}.{}:{}",
            self.name,
            self.namespace,
            self.port.unwrap_or(80)
        )
    }
}

/// A webhook address that cannot be turned into a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A Service address, and no base URL to map it to.
    #[error(
        "webhook.service {service} is a cluster Service, which cannot be reached from this \
         machine; pass --hook-base-url http://127.0.0.1:PORT (where your local hook server \
         listens, or a `kubectl port-forward -n {namespace} svc/{name} PORT:{port}`) and the \
         hook is called at http://127.0.0.1:PORT{path}"
    )]
    ServiceNeedsBaseUrl {
        /// `name.namespace:port`.
        service: String,
        /// Service name.
        name: String,
        /// Service namespace.
        namespace: String,
        /// Service port.
        port: i32,
        /// The webhook path (`/` when none).
        path: String,
    },
    /// Neither `url` nor `service`.
    #[error("webhook needs either `url`, or `service` (with `path`)")]
    Missing,
    /// `webhook.url` is not a usable URL.
    #[error(
        "webhook.url {url:?} is not a valid http(s) URL ({error}); write it like http://127.0.0.1:8080/sync"
    )]
    InvalidUrl {
        /// The URL as written.
        url: String,
        /// Why.
        error: String,
    },
    /// `--hook-base-url` is not a usable URL.
    #[error(
        "--hook-base-url {base:?} is not a valid base URL ({error}); write it like http://127.0.0.1:9000"
    )]
    InvalidBaseUrl {
        /// The flag's value.
        base: String,
        /// Why.
        error: String,
    },
}

/// The URL to call for a webhook: from `url`, or `service` + `path`, mapped onto `base_url`
/// (`--hook-base-url`) when given.
pub fn webhook_url(
    url: Option<&str>,
    service: Option<&ServiceAddr>,
    path: Option<&str>,
    base_url: Option<&str>,
) -> Result<String, ResolveError> {
    let base = base_url.map(parse_base).transpose()?;
    match (url, service) {
        (Some(url), _) => {
            let parsed = parse_http(url).map_err(|error| ResolveError::InvalidUrl {
                url: url.to_string(),
                error,
            })?;
            match base {
                Some(base) => Ok(rebase(&base, parsed.path(), parsed.query())),
                None => Ok(url.to_string()),
            }
        }
        (None, Some(service)) => {
            let path = normalize_path(path.unwrap_or("/"));
            let Some(base) = base else {
                return Err(ResolveError::ServiceNeedsBaseUrl {
                    service: service.host_port(),
                    name: service.name.clone(),
                    namespace: service.namespace.clone(),
                    port: service.port.unwrap_or(80),
                    path,
                });
            };
            let (path, query) = match path.split_once('?') {
                Some((p, q)) => (p.to_string(), Some(q)),
                None => (path.clone(), None),
            };
            Ok(rebase(&base, &path, query))
        }
        (None, None) => Err(ResolveError::Missing),
    }
}

/// A `service` webhook's address in a cluster, as Metacontroller builds it:
/// `protocol://name.namespace:port/path` (protocol `http`, port 80 by default).
pub fn service_dns_url(service: &ServiceAddr, path: Option<&str>) -> String {
    let protocol = service.protocol.as_deref().unwrap_or("http");
    format!(
        "{protocol}://{}{}",
        service.host_port(),
        normalize_path(path.unwrap_or("/"))
    )
}

/// Parse an absolute http(s) URL with a host.
fn parse_http(text: &str) -> Result<Url, String> {
    let url = Url::parse(text.trim()).map_err(|e| e.to_string())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "scheme {:?} is not supported, use http or https",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("it has no host".into());
    }
    Ok(url)
}

fn parse_base(base: &str) -> Result<Url, ResolveError> {
    let invalid = |error: String| ResolveError::InvalidBaseUrl {
        base: base.to_string(),
        error,
    };
    let url = parse_http(base).map_err(invalid)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(
            "a base URL is scheme://host:port with an optional path prefix, without ?query or \
             #fragment"
                .into(),
        ));
    }
    Ok(url)
}

/// `base`'s scheme, host, port and path prefix, followed by `path` and `query`.
fn rebase(base: &Url, path: &str, query: Option<&str>) -> String {
    let mut out = base.clone();
    let prefix = base.path().trim_end_matches('/');
    out.set_path(&format!("{prefix}{}", normalize_path(path)));
    out.set_query(query);
    out.to_string()
}

/// A path with a leading `/`.
fn normalize_path(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(port: Option<i32>) -> ServiceAddr {
        ServiceAddr {
            name: "hello-hooks".into(),
            namespace: "hello".into(),
            port,
            protocol: None,
        }
    }

    #[test]
    fn url_without_base_is_kept_as_written() {
        let u = "http://hello.hello.svc:8080/sync";
        assert_eq!(webhook_url(Some(u), None, None, None).unwrap(), u);
    }

    #[test]
    fn url_with_base_keeps_path_and_query() {
        let base = Some("http://127.0.0.1:9000");
        let u = webhook_url(
            Some("https://hooks.hello.svc.cluster.local:443/v1/sync?x=1&y=2"),
            None,
            None,
            base,
        );
        assert_eq!(u.unwrap(), "http://127.0.0.1:9000/v1/sync?x=1&y=2");
        let u = webhook_url(
            Some("http://hooks/sync"),
            None,
            None,
            Some("https://localhost:8443/"),
        );
        assert_eq!(u.unwrap(), "https://localhost:8443/sync");
    }

    #[test]
    fn base_path_prefix_is_prepended() {
        let u = webhook_url(
            Some("http://hooks/sync"),
            None,
            None,
            Some("http://127.0.0.1:9000/hello/"),
        );
        assert_eq!(u.unwrap(), "http://127.0.0.1:9000/hello/sync");
        let svc = svc(None);
        let u = webhook_url(
            None,
            Some(&svc),
            Some("finalize"),
            Some("http://127.0.0.1:9000/hello"),
        );
        assert_eq!(u.unwrap(), "http://127.0.0.1:9000/hello/finalize");
    }

    #[test]
    fn service_with_base_uses_path() {
        let svc = svc(Some(8080));
        let base = Some("http://127.0.0.1:9000");
        assert_eq!(
            webhook_url(None, Some(&svc), Some("/sync"), base).unwrap(),
            "http://127.0.0.1:9000/sync"
        );
        assert_eq!(
            webhook_url(None, Some(&svc), Some("/sync?v=2"), base).unwrap(),
            "http://127.0.0.1:9000/sync?v=2"
        );
        assert_eq!(
            webhook_url(None, Some(&svc), None, base).unwrap(),
            "http://127.0.0.1:9000/"
        );
    }

    #[test]
    fn url_wins_over_service() {
        let svc = svc(None);
        let u = webhook_url(Some("http://127.0.0.1:1/a"), Some(&svc), Some("/b"), None);
        assert_eq!(u.unwrap(), "http://127.0.0.1:1/a");
    }

    #[test]
    fn service_without_base_explains_the_flag() {
        let e = webhook_url(None, Some(&svc(None)), Some("/sync"), None).unwrap_err();
        assert!(
            matches!(&e, ResolveError::ServiceNeedsBaseUrl { service, .. } if service == "hello-hooks.hello:80")
        );
        let msg = e.to_string();
        assert!(msg.contains("hello-hooks.hello:80"), "{msg}");
        assert!(
            msg.contains("--hook-base-url http://127.0.0.1:PORT"),
            "{msg}"
        );
        assert!(
            msg.contains("kubectl port-forward -n hello svc/hello-hooks PORT:80"),
            "{msg}"
        );
        assert!(msg.contains("http://127.0.0.1:PORT/sync"), "{msg}");
    }

    #[test]
    fn missing_address_is_an_error() {
        assert_eq!(
            webhook_url(None, None, Some("/sync"), Some("http://127.0.0.1:9000")),
            Err(ResolveError::Missing)
        );
    }

    #[test]
    fn bad_urls_name_the_field_or_flag() {
        for base in [
            "127.0.0.1:9000",
            "not a url",
            "ftp://x:1",
            "http://x:1/?a=b",
        ] {
            let e = webhook_url(Some("http://h/sync"), None, None, Some(base)).unwrap_err();
            assert!(
                matches!(e, ResolveError::InvalidBaseUrl { .. }),
                "{base}: {e:?}"
            );
            assert!(e.to_string().starts_with("--hook-base-url"), "{e}");
        }
        for url in ["/sync", "hooks:8080/sync", "file:///tmp/x"] {
            let e = webhook_url(Some(url), None, None, None).unwrap_err();
            assert!(matches!(e, ResolveError::InvalidUrl { .. }), "{url}: {e:?}");
            assert!(e.to_string().starts_with("webhook.url"), "{e}");
        }
    }

    #[test]
    fn service_webhooks_in_a_cluster_use_the_service_dns_name() {
        let svc = ServiceAddr {
            name: "hooks".into(),
            namespace: "ops".into(),
            port: None,
            protocol: None,
        };
        assert_eq!(
            service_dns_url(&svc, Some("/sync")),
            "http://hooks.ops:80/sync"
        );
        let tls = ServiceAddr {
            port: Some(8443),
            protocol: Some("https".into()),
            ..svc
        };
        assert_eq!(service_dns_url(&tls, None), "https://hooks.ops:8443/");
    }
}
