//! The sandbox answers CRD validation cases (CEL rules, transition rules, `pattern`, `format`,
//! `oneOf`, the CEL libraries, the scale subresource, a rule that does not compile) with the same
//! status code and body as a real kube-apiserver 1.36, and `kubectl explain` prints the same for a
//! built-in field and the custom resource. The real answers are in
//! `fixtures/crd_validation/expected.json`, captured by `fixtures/crd_validation/capture.py` from
//! the cases in `cases.json`.

use crate::common;

use http::Request;
use serde_json::{Value, json};

use crate::common::{TIMEOUT, TestSandbox, wait_for};

const CASES: &str = include_str!("../fixtures/crd_validation/cases.json");
const EXPECTED: &str = include_str!("../fixtures/crd_validation/expected.json");

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

/// An answer with its errors in a canonical order: kube-openapi validates an object's properties
/// in Go map order, so the real server lists several errors in any order. The causes are
/// sorted, and the message's bracketed list is checked to hold exactly the causes (each as
/// `field: message`) and then replaced by them in sorted order.
fn unordered(answer: &Value) -> Value {
    let mut a = answer.clone();
    let Some(causes) = a["body"]["details"]["causes"].as_array_mut() else {
        return a;
    };
    causes.sort_by_key(|c| (c["field"].to_string(), c["message"].to_string()));
    let items: Vec<String> = causes
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    let Some(message) = a["body"]["message"].as_str().map(str::to_string) else {
        return a;
    };
    if items.len() > 1
        && let Some((head, list)) = message.split_once(" is invalid: [")
    {
        let mut rest = list.trim_end_matches(']').to_string();
        for item in &items {
            if let Some(at) = rest.find(item.as_str()) {
                rest.replace_range(at..at + item.len(), "");
            }
        }
        if rest == ", ".repeat(items.len() - 1) {
            let mut sorted = items.clone();
            sorted.sort();
            a["body"]["message"] = json!(format!("{head} is invalid: [{}]", sorted.join(", ")));
        }
    }
    a
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
    for target in cases["explain"].as_array().expect("explain targets") {
        let target = target.as_str().expect("target");
        let cache = t.dir.path().join("kc").display().to_string();
        let out =
            tokio::task::block_in_place(|| t.kubectl(&["--cache-dir", &cache, "explain", target]));
        got.insert(
            format!("explain {target}"),
            json!({"stdout": String::from_utf8_lossy(&out.stdout)}),
        );
    }
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
        if got.get(name).map(unordered) != Some(unordered(want)) {
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
