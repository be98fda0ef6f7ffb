//! The sandbox answers CRD validation cases (CEL rules, transition rules, `pattern`, `format`,
//! `oneOf`, the CEL libraries, the scale subresource, a rule that does not compile) with the same
//! status code and body as a real kube-apiserver 1.36. The real answers are in
//! `fixtures/crd_validation/expected.json`, captured by `fixtures/crd_validation/capture.py` from
//! the cases in `cases.json`.

mod common;

use http::Request;
use serde_json::{Value, json};

use common::{TIMEOUT, TestSandbox, wait_for};

const CASES: &str = include_str!("fixtures/crd_validation/cases.json");
const EXPECTED: &str = include_str!("fixtures/crd_validation/expected.json");

async fn call(
    t: &TestSandbox,
    method: &str,
    path: &str,
    body: &Value,
    ctype: &str,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ctype)
        .header("accept", "application/json")
        .body(if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).expect("json")
        })
        .expect("request");
    let resp = t.client.send(req.map(Into::into)).await.expect("sent");
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_validation_answers_match_the_real_server() {
    let t = common::start().await;
    let cases: Value = serde_json::from_str(CASES).expect("cases.json");
    let expected: Value = serde_json::from_str(EXPECTED).expect("expected.json");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let mut got = serde_json::Map::new();

    let mut bad = cases["crd"].clone();
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        json!([{"rule": "self.replicas <"}]);
    let (code, body) = call(&t, "POST", crds, &bad, "application/json").await;
    got.insert(
        "crd-compile-error".into(),
        json!({"code": code, "body": body}),
    );

    let (code, body) = call(&t, "POST", crds, &cases["crd"], "application/json").await;
    assert_eq!(code, 201, "{body}");
    let path = "/apis/fidelity.example.com/v1/namespaces/default/gadgets";
    wait_for("the CRD served", TIMEOUT, || async {
        (call(&t, "GET", path, &Value::Null, "application/json")
            .await
            .0
            == 200)
            .then_some(())
    })
    .await;
    for case in cases["cases"].as_array().expect("cases") {
        let name = case["create"]["metadata"]["name"].as_str().expect("name");
        let (mut code, mut body) =
            call(&t, "POST", path, &case["create"], "application/json").await;
        for (key, sub) in [("update", ""), ("scale", "/scale")] {
            if !case[key].is_null() {
                assert_eq!(code, 201, "{}: {body}", case["name"]);
                (code, body) = call(
                    &t,
                    "PATCH",
                    &format!("{path}/{name}{sub}"),
                    &case[key],
                    "application/merge-patch+json",
                )
                .await;
            }
        }
        got.insert(
            case["name"].as_str().expect("case name").into(),
            json!({"code": code, "body": body}),
        );
    }
    let mut differ = Vec::new();
    for (name, want) in expected.as_object().expect("expected") {
        if got.get(name) != Some(want) {
            differ.push(format!(
                "{name}:\n  real:    {want}\n  sandbox: {}",
                got.get(name).unwrap_or(&Value::Null)
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} case(s) differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
