//! Bad input never crashes the sandbox and never stores anything: garbage and non-object JSON,
//! wrong content types, oversized bodies, unknown resources and versions, invalid selectors and
//! paging parameters, missing or wrong credentials, mismatched kind/apiVersion/namespace. Each
//! gets a precise `Status` with the code and reason kube-apiserver uses.

use crate::common;

use axum::http;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

const CM_PATH: &str = "/api/v1/namespaces/default/configmaps";

/// A raw request through the sandbox's kube client (TLS + token), returning the status code and
/// the JSON body.
async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value) {
    let (code, bytes) = raw_bytes(client, method, uri, content_type, body).await;
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{method} {uri}: body is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (code, v)
}

/// Like [`raw`], without parsing the body.
async fn raw_bytes(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, bytes::Bytes) {
    let mut b = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", "application/json");
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    let req = b
        .body(kube::client::Body::from(body))
        .expect("request builds");
    let resp = client
        .send(req)
        .await
        .unwrap_or_else(|e| panic!("{method} {uri}: transport error {e}"));
    let code = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect_bytes()
        .await
        .unwrap_or_else(|e| panic!("{method} {uri}: reading body: {e}"));
    (code, bytes)
}

/// Assert `v` is a failure Status with `code` and `reason`; returns its message.
fn status(what: &str, got: &(u16, Value), code: u16, reason: &str) -> String {
    let (c, v) = got;
    assert_eq!(*c, code, "{what}: HTTP status; body {v}");
    assert_eq!(v["kind"], "Status", "{what}: body is a Status: {v}");
    assert_eq!(v["apiVersion"], "v1", "{what}: {v}");
    assert_eq!(v["status"], "Failure", "{what}: {v}");
    assert_eq!(v["code"], code, "{what}: {v}");
    assert_eq!(v["reason"], reason, "{what}: {v}");
    let msg = v["message"].as_str().unwrap_or_default().to_string();
    assert!(!msg.is_empty(), "{what}: Status has a message: {v}");
    msg
}

fn json_body(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// Nothing was stored in `default` (beyond the `kube-root-ca.crt` every namespace has), and the
/// server still answers normal requests.
async fn assert_nothing_stored_and_healthy(t: &common::TestSandbox) {
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut left = cms
        .list(&ListParams::default())
        .await
        .expect("list after bad input");
    left.items
        .retain(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"));
    assert!(
        left.items.is_empty(),
        "bad input stored objects: {:?}",
        left.items
            .iter()
            .map(|o| o.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("healthy".into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("a normal create still works");
    cms.get("healthy").await.expect("and is readable");
    let (code, _) = raw_bytes(&t.client, "GET", "/readyz", None, Vec::new()).await;
    assert_eq!(code, 200, "/readyz");
}

#[tokio::test]
async fn garbage_json_is_400_bad_request_and_stores_nothing() {
    let t = common::start().await;
    let bodies: [&[u8]; 5] = [
        br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trunc"#,
        b"this is not json",
        b"{\"metadata\": {\"name\": \"x\"},}",
        b"\xff\xfe\x00garbage",
        b"",
    ];
    for body in bodies {
        let got = raw(
            &t.client,
            "POST",
            CM_PATH,
            Some("application/json"),
            body.to_vec(),
        )
        .await;
        status(
            &format!("POST {:?}", String::from_utf8_lossy(body)),
            &got,
            400,
            "BadRequest",
        );
    }

    // Garbage on update and patch leaves the existing object alone.
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("existing".into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    let before = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let uri = format!("{CM_PATH}/existing");
    let got = raw(
        &t.client,
        "PUT",
        &uri,
        Some("application/json"),
        b"{not json".to_vec(),
    )
    .await;
    status("PUT garbage", &got, 400, "BadRequest");
    for ct in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ] {
        let got = raw(&t.client, "PATCH", &uri, Some(ct), b"{{{".to_vec()).await;
        status(&format!("PATCH garbage as {ct}"), &got, 400, "BadRequest");
    }
    let got = raw(
        &t.client,
        "PATCH",
        &format!("{uri}?fieldManager=m"),
        Some("application/apply-patch+yaml"),
        b"key: [unclosed".to_vec(),
    )
    .await;
    status("apply garbage YAML", &got, 400, "BadRequest");
    let after = cms.get("existing").await.expect("get");
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "garbage writes changed nothing"
    );
    cms.delete("existing", &Default::default())
        .await
        .expect("delete");
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn json_that_is_not_an_object_is_400() {
    let t = common::start().await;
    for body in [
        "[]",
        "[{\"kind\": \"ConfigMap\"}]",
        "\"a string\"",
        "42",
        "null",
        "true",
    ] {
        let got = raw(
            &t.client,
            "POST",
            CM_PATH,
            Some("application/json"),
            body.as_bytes().to_vec(),
        )
        .await;
        status(&format!("POST {body}"), &got, 400, "BadRequest");
    }
    // As a merge patch, too.
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("target".into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let got = raw(
        &t.client,
        "PATCH",
        &format!("{CM_PATH}/target"),
        Some("application/merge-patch+json"),
        b"[1, 2]".to_vec(),
    )
    .await;
    status("merge patch with an array", &got, 400, "BadRequest");
    cms.delete("target", &Default::default())
        .await
        .expect("delete");
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn wrong_content_types_are_415() {
    let t = common::start().await;
    let cm = json_body(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ct"}, "data": {"a": "b"}}),
    );
    for ct in [
        "text/plain",
        "application/xml",
        "application/x-www-form-urlencoded",
    ] {
        let got = raw(&t.client, "POST", CM_PATH, Some(ct), cm.clone()).await;
        let msg = status(&format!("POST as {ct}"), &got, 415, "UnsupportedMediaType");
        assert!(
            msg.contains("application/json"),
            "lists accepted types: {msg}"
        );
    }

    // Protobuf garbage: never stored (built-ins may accept protobuf, so 400 or 415 both fit).
    let got = raw(
        &t.client,
        "POST",
        CM_PATH,
        Some("application/vnd.kubernetes.protobuf"),
        b"\x00\x01\x02 definitely not protobuf".to_vec(),
    )
    .await;
    assert!(
        got.0 == 415 || got.0 == 400,
        "protobuf garbage for configmaps: {got:?}"
    );
    assert_eq!(got.1["kind"], "Status", "{got:?}");

    // A PATCH must say which patch it is: plain JSON is not a patch type.
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_slice::<ConfigMap>(&cm).expect("configmap"),
    )
    .await
    .expect("create");
    let got = raw(
        &t.client,
        "PATCH",
        &format!("{CM_PATH}/ct"),
        Some("application/json"),
        json_body(json!({"data": {"a": "changed"}})),
    )
    .await;
    status(
        "PATCH as application/json",
        &got,
        415,
        "UnsupportedMediaType",
    );
    let got = raw(
        &t.client,
        "PUT",
        &format!("{CM_PATH}/ct"),
        Some("text/plain"),
        cm.clone(),
    )
    .await;
    status("PUT as text/plain", &got, 415, "UnsupportedMediaType");
    assert_eq!(
        cms.get("ct")
            .await
            .expect("get")
            .data
            .and_then(|d| d.get("a").cloned())
            .as_deref(),
        Some("b")
    );
    cms.delete("ct", &Default::default()).await.expect("delete");
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn protobuf_for_a_custom_resource_is_415() {
    let t = common::start().await;
    create_widget_crd(&t.client).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let got = raw(
        &t.client,
        "POST",
        path,
        Some("application/vnd.kubernetes.protobuf"),
        b"k8s\x00\x0a\x02garbage".to_vec(),
    )
    .await;
    status(
        "protobuf custom resource",
        &got,
        415,
        "UnsupportedMediaType",
    );
    let ar = widget_resource();
    let widgets: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .expect("list widgets")
            .items
            .is_empty()
    );
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let t = common::start().await;
    let big = "x".repeat(4 * 1024 * 1024);
    let body = json_body(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"big": big}}),
    );
    assert!(body.len() > 3 * 1024 * 1024);
    let got = raw(
        &t.client,
        "POST",
        CM_PATH,
        Some("application/json"),
        body.clone(),
    )
    .await;
    status("4 MiB create", &got, 413, "RequestEntityTooLarge");

    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut small = ConfigMap::default();
    small.metadata.name = Some("big".into());
    let before = cms
        .create(&PostParams::default(), &small)
        .await
        .expect("small create works right after");
    let got = raw(
        &t.client,
        "PUT",
        &format!("{CM_PATH}/big"),
        Some("application/json"),
        body,
    )
    .await;
    status("4 MiB update", &got, 413, "RequestEntityTooLarge");
    let got = raw(
        &t.client,
        "PATCH",
        &format!("{CM_PATH}/big"),
        Some("application/merge-patch+json"),
        json_body(json!({"data": {"big": "y".repeat(4 * 1024 * 1024)}})),
    )
    .await;
    status("4 MiB patch", &got, 413, "RequestEntityTooLarge");
    assert_eq!(
        cms.get("big").await.expect("get").metadata.resource_version,
        before.metadata.resource_version
    );
    cms.delete("big", &Default::default())
        .await
        .expect("delete");
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn unknown_resources_groups_and_versions_are_404_status() {
    let t = common::start().await;
    for (method, path) in [
        ("GET", "/api/v1/namespaces/default/widgets"),
        ("GET", "/api/v1/widgets"),
        ("GET", "/api/v2/namespaces/default/configmaps"),
        ("GET", "/apis/apps/v9/namespaces/default/deployments"),
        ("GET", "/apis/apps/v9"),
        ("GET", "/apis/nope.example.com/v1/things"),
        ("GET", "/apis/nope.example.com"),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps/x/bogus-subresource",
        ),
        ("GET", "/definitely/not/an/api/path"),
        ("POST", "/api/v1/namespaces/default/widgets"),
        ("DELETE", "/apis/apps/v9/namespaces/default/deployments/x"),
    ] {
        let body = if method == "POST" {
            json_body(json!({"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}}))
        } else {
            Vec::new()
        };
        let got = raw(&t.client, method, path, Some("application/json"), body).await;
        status(&format!("{method} {path}"), &got, 404, "NotFound");
    }
    // Through kube-rs with a made-up resource.
    let ar = ApiResource {
        group: "apps".into(),
        version: "v9".into(),
        api_version: "apps/v9".into(),
        kind: "Deployment".into(),
        plural: "deployments".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    match api.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        other => panic!("list of apps/v9 deployments: {other:?}"),
    }
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn invalid_label_selectors_are_400_naming_the_problem() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    for (sel, mention) in [
        ("app in (", "expected: ',', ')' or identifier"),
        ("app=a=b", "found '='"),
        ("-bad-key=x", "Invalid value: \"-bad-key\""),
        ("app=", ""),
        ("app in (a,b", "expected: ',' or ')'"),
        ("app=has space", "found 'space'"),
        ("a/b/c=x", "Invalid value: \"a/b/c\""),
    ] {
        let r = cms.list(&ListParams::default().labels(sel)).await;
        if sel == "app=" {
            // An empty value is valid in kube-apiserver.
            r.unwrap_or_else(|e| panic!("labelSelector {sel:?} is valid: {e}"));
            continue;
        }
        match r {
            Err(kube::Error::Api(s)) => {
                assert_eq!(
                    (s.code, s.reason.as_str()),
                    (400, "BadRequest"),
                    "labelSelector {sel:?}: {s:?}"
                );
                assert!(
                    s.message.contains(mention),
                    "labelSelector {sel:?}: message names {mention:?}: {}",
                    s.message
                );
            }
            other => panic!("labelSelector {sel:?}: expected 400, got {other:?}"),
        }
    }
    // Watches validate it the same way.
    let got = raw(
        &t.client,
        "GET",
        &format!("{CM_PATH}?watch=true&labelSelector=app%20in%20("),
        None,
        Vec::new(),
    )
    .await;
    status("watch with a bad selector", &got, 400, "BadRequest");
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn invalid_field_selectors_are_400() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    for (sel, mention) in [
        ("spec.foo=bar", "spec.foo"),
        ("status.phase=Running", "status.phase"),
        ("metadata.labels=x", "metadata.labels"),
        ("metadata.name", "metadata.name"),
    ] {
        match cms.list(&ListParams::default().fields(sel)).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(
                    (s.code, s.reason.as_str()),
                    (400, "BadRequest"),
                    "fieldSelector {sel:?}: {s:?}"
                );
                assert!(
                    s.message.contains(mention),
                    "fieldSelector {sel:?}: message names {mention:?}: {}",
                    s.message
                );
            }
            other => panic!("fieldSelector {sel:?}: expected 400, got {other:?}"),
        }
    }
    // A per-type field that pods support is still rejected for configmaps, but fine for pods.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(t.client.clone(), "default");
    pods.list(&ListParams::default().fields("status.phase=Running"))
        .await
        .expect("pods support status.phase");
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn bad_limit_and_continue_are_400() {
    let t = common::start().await;
    for q in [
        "limit=abc",
        "limit=1.5",
        "continue=not-a-token",
        "continue=zz",
        "continue=abcd",
        "limit=2&continue=%00%01",
    ] {
        let got = raw(
            &t.client,
            "GET",
            &format!("{CM_PATH}?{q}"),
            None,
            Vec::new(),
        )
        .await;
        status(&format!("list with {q}"), &got, 400, "BadRequest");
    }
    // Non-positive limits mean "no limit", as in kube-apiserver.
    for q in ["limit=0", "limit=-1"] {
        let (code, v) = raw(
            &t.client,
            "GET",
            &format!("{CM_PATH}?{q}"),
            None,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200, "list with {q}: {v}");
        assert_eq!(v["kind"], "ConfigMapList", "{v}");
    }
    assert_nothing_stored_and_healthy(&t).await;
}

/// A client for `t` whose kubeconfig user is changed by `edit`.
async fn client_with_user(t: &common::TestSandbox, user_yaml: &str) -> kube::Client {
    let yaml = t.sandbox.kubeconfig_yaml();
    let token_line = format!("    token: {}\n", t.sandbox.token());
    assert!(yaml.contains(&token_line), "kubeconfig has the token line");
    let edited = yaml.replace(&format!("  user:\n{token_line}"), user_yaml);
    assert_ne!(edited, yaml, "kubeconfig edited");
    let kc = Kubeconfig::from_yaml(&edited).expect("edited kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    kube::Client::try_from(cfg).expect("client")
}

#[tokio::test]
async fn wrong_bearer_tokens_are_401_and_no_credentials_are_anonymous_403() {
    let t = common::start().await;
    let wrong_same_length = "x".repeat(t.sandbox.token().len());
    // Without credentials (basic auth is no credential to kube-apiserver) a request is
    // `system:anonymous`, which RBAC refuses; a token nobody knows is 401.
    let cases = [
        ("no token", "  user: {}\n".to_string(), 403, "Forbidden"),
        (
            "wrong token",
            "  user:\n    token: not-the-sandbox-token\n".to_string(),
            401,
            "Unauthorized",
        ),
        (
            "wrong token of the right length",
            format!("  user:\n    token: {wrong_same_length}\n"),
            401,
            "Unauthorized",
        ),
        (
            "basic auth instead",
            "  user:\n    username: admin\n    password: admin\n".to_string(),
            403,
            "Forbidden",
        ),
    ];
    for (what, user, code, reason) in cases {
        let c = client_with_user(&t, &user).await;
        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
        match cms.list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (code, reason), "{what}: {s:?}");
                if code == 403 {
                    assert_eq!(
                        s.message,
                        "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
                    );
                }
            }
            other => panic!("{what}: expected {code}, got {other:?}"),
        }
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("sneaky".into());
        match cms.create(&PostParams::default(), &cm).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, code, "{what}: create: {s:?}"),
            other => panic!("{what}: create expected {code}, got {other:?}"),
        }
        // Discovery is protected too.
        let got = raw(&c, "GET", "/api/v1", None, Vec::new()).await;
        status(&format!("{what}: discovery"), &got, code, reason);
    }
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn wrong_kind_or_api_version_in_the_body_is_400() {
    let t = common::start().await;
    for (what, body) in [
        (
            "kind Secret",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}}),
        ),
        (
            "apiVersion apps/v1",
            json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "k"}}),
        ),
        (
            "apiVersion v2",
            json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "k"}}),
        ),
        (
            "kind of another group",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "k"}}),
        ),
    ] {
        let got = raw(
            &t.client,
            "POST",
            CM_PATH,
            Some("application/json"),
            json_body(body.clone()),
        )
        .await;
        status(&format!("POST {what}"), &got, 400, "BadRequest");
    }
    // On update as well.
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("k".into());
    let before = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let got = raw(
        &t.client,
        "PUT",
        &format!("{CM_PATH}/k"),
        Some("application/json"),
        json_body(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}})),
    )
    .await;
    status("PUT kind Secret", &got, 400, "BadRequest");
    assert_eq!(
        cms.get("k").await.expect("get").metadata.resource_version,
        before.metadata.resource_version
    );
    cms.delete("k", &Default::default()).await.expect("delete");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(t.client.clone(), "default");
    assert!(
        secrets
            .list(&ListParams::default())
            .await
            .expect("list secrets")
            .items
            .is_empty(),
        "no secret was created through the configmaps endpoint"
    );
    assert_nothing_stored_and_healthy(&t).await;
}

#[tokio::test]
async fn body_namespace_must_match_the_url_namespace() {
    let t = common::start().await;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ns", "namespace": "kube-system"}});
    let got = raw(
        &t.client,
        "POST",
        CM_PATH,
        Some("application/json"),
        json_body(body.clone()),
    )
    .await;
    let msg = status("POST with another namespace", &got, 400, "BadRequest");
    assert!(msg.contains("namespace"), "{msg}");
    let other: Api<ConfigMap> = Api::namespaced(t.client.clone(), "kube-system");
    assert!(
        other.get_opt("ns").await.expect("get_opt").is_none(),
        "not created in the body's namespace either"
    );

    // Update with a mismatching namespace.
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("ns".into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let got = raw(
        &t.client,
        "PUT",
        &format!("{CM_PATH}/ns"),
        Some("application/json"),
        json_body(body),
    )
    .await;
    status("PUT with another namespace", &got, 400, "BadRequest");
    // And the name in the body must match the URL.
    let got = raw(
        &t.client,
        "PUT",
        &format!("{CM_PATH}/ns"),
        Some("application/json"),
        json_body(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}})),
    )
    .await;
    status("PUT with another name", &got, 400, "BadRequest");
    cms.delete("ns", &Default::default()).await.expect("delete");
    assert!(
        other.get_opt("ns").await.expect("get_opt").is_none(),
        "kube-system untouched"
    );
    assert_nothing_stored_and_healthy(&t).await;
}

fn widget_resource() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// Create the `widgets.example.com` CRD and wait until it is served.
async fn create_widget_crd(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    }))
    .expect("crd json");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource());
    common::wait_for("widgets to be served", common::TIMEOUT, || {
        let widgets = widgets.clone();
        async move { widgets.list(&ListParams::default()).await.ok() }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reports_unserved_kinds_and_invalid_objects_like_kube_apiserver() {
    let t = common::start().await;
    let out = t.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Nope\nmetadata: {name: x}\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no matches for kind \"Nope\" in version \"example.com/v1\""),
        "{err}"
    );
    let out = t.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {\"a b\": \"1\"}\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "The ConfigMap \"x\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key"
        ),
        "{err}"
    );
    let out = t.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}, {name: b, port: 81}]}\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("The Service \"s\" is invalid: spec.ports[0].name: Required value"),
        "{err}"
    );
}
