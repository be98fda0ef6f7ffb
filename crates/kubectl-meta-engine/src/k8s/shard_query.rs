//! KEP-5866 `shardSelector` on the wire: a [`kube::Client`] whose list and watch requests carry
//! a fixed `shardSelector` (so `kube::runtime::watcher`, with its bookmarks, re-lists and
//! backoff, lists and watches only one shard's objects), and the probe that tells whether a
//! server honours the parameter (a server without the `ShardedListAndWatch` gate ignores it).
//!
//! The probe lists one Lease of a namespace with a selector of the whole hash range: a server
//! that filters by it echoes `metadata.shardInfo` in a built-in resource's list (a custom
//! resource's list is filtered without the echo, so the probe uses Leases, which a sharded
//! member may list anyway).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Method, Request, Response, Uri};
use kube::client::Body;
use serde_json::Value;

/// The selector of every uid: what the probe asks for.
const WHOLE_RANGE: &str =
    "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";

/// `s` percent-encoded for a query value (everything but RFC 3986's unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `uri` with `shardSelector=<encoded>` added to its query.
fn with_param(uri: &Uri, encoded: &str) -> Option<Uri> {
    let pq = uri.path_and_query()?;
    let sep = if pq.query().is_some() { '&' } else { '?' };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = format!("{pq}{sep}shardSelector={encoded}").parse().ok();
    Uri::from_parts(parts).ok()
}

/// The service under a selecting client: adds the parameter to every GET (the informer's
/// client only lists and watches one resource) and passes the request on.
#[derive(Clone)]
struct AddShardSelector {
    inner: kube::Client,
    encoded: String,
}

impl tower_service::Service<Request<Body>> for AddShardSelector {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner client buffers: it is always ready to take a request.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        if req.method() == Method::GET
            && let Some(uri) = with_param(req.uri(), &self.encoded)
        {
            *req.uri_mut() = uri;
        }
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(req).await })
    }
}

/// A client sending `shardSelector=<selector>` with each list and watch (every GET) it makes
/// through `client`.
pub(crate) fn selecting(client: &kube::Client, selector: &str) -> kube::Client {
    kube::Client::new(
        AddShardSelector {
            inner: client.clone(),
            encoded: encode(selector),
        },
        client.default_namespace().to_string(),
    )
}

/// Whether the server behind `client` filters lists and watches by KEP-5866 `shardSelector`
/// (the `ShardedListAndWatch` feature gate is on): a list of at most one Lease of
/// `namespace` asked with a selector of the whole range answers `metadata.shardInfo`. An error
/// (no permission to list Leases there, no server) is returned as is: the caller falls back to
/// filtering on the client.
pub async fn server_filters_shards(
    client: &kube::Client,
    namespace: &str,
) -> Result<bool, kube::Error> {
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases?limit=1&shardSelector={}",
        encode(namespace),
        encode(WHOLE_RANGE)
    );
    let req = Request::get(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let list: Value = client.request(req).await?;
    Ok(list
        .pointer("/metadata/shardInfo/selector")
        .is_some_and(|s| s.as_str().is_some_and(|s| !s.is_empty())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parameter_is_encoded_and_appended() {
        let enc = encode("shardRange(object.metadata.uid, '0x0', '0x1') || x");
        assert_eq!(
            enc,
            "shardRange%28object.metadata.uid%2C%20%270x0%27%2C%20%270x1%27%29%20%7C%7C%20x"
        );
        let u: Uri = "/api/v1/configmaps?watch=true&resourceVersion=5"
            .parse()
            .expect("uri");
        assert_eq!(
            with_param(&u, "a%20b").map(|u| u.to_string()),
            Some("/api/v1/configmaps?watch=true&resourceVersion=5&shardSelector=a%20b".into())
        );
        let u: Uri = "/api/v1/configmaps".parse().expect("uri");
        assert_eq!(
            with_param(&u, "x").map(|u| u.to_string()),
            Some("/api/v1/configmaps?shardSelector=x".into())
        );
    }
}
