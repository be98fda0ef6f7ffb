//! `x-kubernetes-list-type` lists of a custom resource, compared case by case with a real
//! kube-apiserver's answers (`fixtures/crd_lists`, captured by its `capture.py`): duplicates in
//! `set` and `map` lists refused with kube-apiserver's 422 (outer lists before inner ones, after
//! the schema's own errors), lists without a type (or `atomic`) free to repeat, and server-side
//! apply merging `map` lists by their `x-kubernetes-list-map-keys` and `set` lists by value
//! (conflicts per keyed field, an owner's dropped item removed, duplicate keys in an applied
//! configuration refused).

use crate::common;

use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/crd_lists");

async fn call(
    t: &common::TestSandbox,
    method: &str,
    path: &str,
    body: &Value,
    content_type: &str,
) -> (u16, Value) {
    common::admin_request(t, method, path, body, content_type).await
}

#[tokio::test]
async fn list_type_answers_match_the_real_server() {
    let spec: Value = common::fixture(FIXTURES, "cases.json");
    let expected: Value = common::fixture(FIXTURES, "expected.json");
    let t = common::start().await;
    let ns = spec["namespace"].as_str().expect("namespace");
    let crd = &spec["crd"];
    let json_ct = "application/json";
    let (code, body) = call(
        &t,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json_ct,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = call(
        &t,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
        json_ct,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let group = crd["spec"]["group"].as_str().expect("group");
    let plural = crd["spec"]["names"]["plural"].as_str().expect("plural");
    let path = format!("/apis/{group}/v1/namespaces/{ns}/{plural}");
    common::wait_for("the CRD served", common::TIMEOUT, || {
        let path = path.clone();
        let t = &t;
        async move {
            let (code, _) = call(t, "GET", &path, &Value::Null, json_ct).await;
            (code == 200).then_some(())
        }
    })
    .await;
    let mut differ = common::Differences::default();
    for case in spec["cases"].as_array().expect("cases") {
        let (mut code, mut body) = (0, Value::Null);
        if let Some(applies) = case["apply"].as_array() {
            for a in applies {
                let (manager, obj) = (a[0].as_str().expect("manager"), &a[1]);
                let name = obj["metadata"]["name"].as_str().expect("name");
                (code, body) = call(
                    &t,
                    "PATCH",
                    &format!("{path}/{name}?fieldManager={manager}"),
                    obj,
                    "application/apply-patch+yaml",
                )
                .await;
            }
        } else {
            let obj = &case["create"];
            (code, body) = call(&t, "POST", &path, obj, json_ct).await;
            if !case["update"].is_null() {
                assert_eq!(code, 201, "{}: {body}", case["name"]);
                let name = obj["metadata"]["name"].as_str().expect("name");
                (code, body) = call(
                    &t,
                    "PATCH",
                    &format!("{path}/{name}"),
                    &case["update"],
                    "application/merge-patch+json",
                )
                .await;
            }
        }
        if case["record"] == "spec" {
            body = body.get("spec").cloned().unwrap_or(body);
        }
        let got = json!({"code": code, "body": body});
        let name = case["name"].as_str().expect("name");
        differ.check(name, &expected[name], &got);
    }
    differ.assert_none();
}
