//! The real kubectl against the sandbox's CRD validation beyond types (CEL rules in
//! `x-kubernetes-validations`, `pattern`, `format`, `oneOf`) and the `scale` subresource
//! (`kubectl scale` of a Deployment and of a custom resource declaring `subresources.scale`), and
//! the OpenAPI schemas behind `kubectl explain`.

use crate::common;

use std::process::Output;

use http::Request;
use serde_json::{Value, json};

use crate::common::{TIMEOUT, TestSandbox, ok_stdout, wait_for};

/// kubectl with `stdin`, run where blocking is allowed (the sandbox serves on other workers).
fn kubectl(t: &TestSandbox, args: &[&str], stdin: Option<&str>) -> Output {
    let mut all = vec![
        "--cache-dir".to_string(),
        t.dir.path().join("kc").display().to_string(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    tokio::task::block_in_place(|| common::kubectl(&t.kubeconfig(), &refs, stdin))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

/// A CRD `Widget` (example.com/v1) whose spec carries CEL rules (one a transition rule, one
/// with `messageExpression`, `reason` and `fieldPath`), a `pattern`, a `format`, a `oneOf`, and
/// the scale subresource on `spec.replicas`.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.replicas <= self.maxReplicas",
                             "message": "replicas must not exceed maxReplicas"},
                            {"rule": "!has(self.owner) || self.owner.endsWith('@example.com')",
                             "messageExpression": "'owner ' + self.owner + ' is not from example.com'",
                             "reason": "FieldValueForbidden", "fieldPath": ".owner"}],
                        "oneOf": [{"required": ["image"]}, {"required": ["chart"]}],
                        "properties": {
                            "replicas": {"type": "integer"},
                            "maxReplicas": {"type": "integer"},
                            "owner": {"type": "string"},
                            "image": {"type": "string"},
                            "chart": {"type": "string"},
                            "mode": {"type": "string",
                                "x-kubernetes-validations": [
                                    {"rule": "self == oldSelf", "message": "mode is immutable"}]},
                            "name": {"type": "string", "pattern": "^[a-z]+$"},
                            "contact": {"type": "string", "format": "email"}}},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"}, "selector": {"type": "string"}}}}}}}]
        }
    })
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

async fn install_crd(t: &TestSandbox) {
    ok_stdout(&kubectl(
        t,
        &["create", "-f", "-"],
        Some(&widget_crd().to_string()),
    ));
    ok_stdout(&kubectl(
        t,
        &[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=30s",
        ],
        None,
    ));
}

/// POST a Widget and return the HTTP status and the response body.
async fn post_widget(t: &TestSandbox, w: &Value) -> (u16, Value) {
    let req = Request::post("/apis/example.com/v1/namespaces/default/widgets")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(w).expect("json"))
        .expect("request");
    let resp = t.client.send(req.map(Into::into)).await.expect("sent");
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    (code, serde_json::from_slice(&body).expect("json body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_rules_reject_with_the_real_servers_422() {
    let t = common::start().await;
    install_crd(&t).await;

    // A failing rule on an object: the value is omitted, the message is the rule's.
    let bad = widget("w1", json!({"replicas": 5, "maxReplicas": 3, "image": "x"}));
    let (code, body) = post_widget(&t, &bad).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Widget.example.com \"w1\" is invalid: spec: Invalid value: replicas must not exceed maxReplicas",
            "reason": "Invalid",
            "details": {"name": "w1", "group": "example.com", "kind": "Widget",
                "causes": [{"reason": "FieldValueInvalid",
                    "message": "Invalid value: replicas must not exceed maxReplicas",
                    "field": "spec"}]},
            "code": 422})
    );
    let out = kubectl(&t, &["create", "-f", "-"], Some(&bad.to_string()));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "The Widget \"w1\" is invalid: spec: Invalid value: replicas must not exceed maxReplicas"
    );

    // messageExpression, reason and fieldPath.
    let bad = widget(
        "w2",
        json!({"replicas": 1, "maxReplicas": 3, "image": "x", "owner": "bob@evil.test"}),
    );
    let (code, body) = post_widget(&t, &bad).await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "Widget.example.com \"w2\" is invalid: spec.owner: Forbidden: owner bob@evil.test is not from example.com"
    );
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "FieldValueForbidden",
                "message": "Forbidden: owner bob@evil.test is not from example.com",
                "field": "spec.owner"}])
    );

    // A transition rule runs on update only.
    let good = widget(
        "w3",
        json!({"replicas": 1, "maxReplicas": 3, "image": "x", "mode": "fast"}),
    );
    ok_stdout(&kubectl(
        &t,
        &["create", "-f", "-"],
        Some(&good.to_string()),
    ));
    let out = kubectl(
        &t,
        &[
            "patch",
            "widget",
            "w3",
            "--type=merge",
            "-p",
            r#"{"spec":{"mode":"slow"}}"#,
        ],
        None,
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "The Widget \"w3\" is invalid: spec.mode: Invalid value: \"slow\": mode is immutable"
    );
    let got = ok_stdout(&kubectl(
        &t,
        &["get", "widget", "w3", "-o", "jsonpath={.spec.mode}"],
        None,
    ));
    assert_eq!(got, "fast");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_format_and_one_of_reject_as_kube_openapi_words_them() {
    let t = common::start().await;
    install_crd(&t).await;

    let (code, body) = post_widget(
        &t,
        &widget(
            "p1",
            json!({"replicas": 1, "maxReplicas": 1, "image": "x", "name": "Bad1"}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "Widget.example.com \"p1\" is invalid: spec.name: Invalid value: \"Bad1\": spec.name in body should match '^[a-z]+$'"
    );

    let (code, body) = post_widget(
        &t,
        &widget(
            "f1",
            json!({"replicas": 1, "maxReplicas": 1, "image": "x", "contact": "nobody"}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        // A type/format error blocks the CEL rules, as the CRD strategy's hasBlockingErr does.
        "Widget.example.com \"f1\" is invalid: [spec.contact: Invalid value: \"nobody\": spec.contact in body must be of type email: \"nobody\", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );

    let both = widget(
        "o1",
        json!({"replicas": 1, "maxReplicas": 1, "image": "x", "chart": "y"}),
    );
    let out = kubectl(&t, &["create", "-f", "-"], Some(&both.to_string()));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "The Widget \"o1\" is invalid: <nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found 2 valid alternatives"
    );
    let fine = widget(
        "o2",
        json!({"replicas": 1, "maxReplicas": 1, "chart": "y",
                                   "name": "abc", "contact": "a@example.com"}),
    );
    ok_stdout(&kubectl(
        &t,
        &["create", "-f", "-"],
        Some(&fine.to_string()),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_with_a_rule_that_does_not_compile_is_rejected() {
    let t = common::start().await;
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        json!([{"rule": "self.replicas <"}]);
    let out = kubectl(&t, &["create", "-f", "-"], Some(&crd.to_string()));
    assert!(!out.status.success());
    let err = stderr(&out);
    // As kube-apiserver 1.36 answers (tests/fixtures/crd_validation/expected.json).
    assert_eq!(
        err,
        "The CustomResourceDefinition \"widgets.example.com\" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: {\"Rule\":\"self.replicas \\u003c\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.replicas <\n | ...............^"
    );
    let out = kubectl(&t, &["get", "crd", "widgets.example.com"], None);
    assert!(!out.status.success(), "the CRD was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_a_deployment_and_a_custom_resource() {
    let t = common::start().await;
    ok_stdout(&kubectl(
        &t,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=1",
        ],
        None,
    ));
    let out = ok_stdout(&kubectl(
        &t,
        &["scale", "deployment", "web", "--replicas=3"],
        None,
    ));
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let replicas = ok_stdout(&kubectl(
        &t,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
        None,
    ));
    assert_eq!(replicas, "3");
    let scale: Value = serde_json::from_str(&ok_stdout(&kubectl(
        &t,
        &[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ],
        None,
    )))
    .expect("scale json");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=web");
    // The deployment controller follows: status.replicas reaches 3 on the Scale too.
    wait_for("status.replicas 3 on the scale", TIMEOUT, || async {
        let out = kubectl(
            &t,
            &[
                "get",
                "--raw",
                "/apis/apps/v1/namespaces/default/deployments/web/scale",
            ],
            None,
        );
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["status"]["replicas"] == 3).then_some(())
    })
    .await;
    // A Scale written with a stale resourceVersion is a conflict on the deployment.
    let mut stale = scale.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["spec"]["replicas"] = json!(2);
    let out = kubectl(
        &t,
        &[
            "replace",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
            "-f",
            "-",
        ],
        Some(&stale.to_string()),
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "Error from server (Conflict): Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let disc = ok_stdout(&kubectl(&t, &["get", "--raw", "/apis/apps/v1"], None));
    let disc: Value = serde_json::from_str(&disc).expect("discovery");
    let names: Vec<&str> = disc["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for n in [
        "deployments/scale",
        "replicasets/scale",
        "statefulsets/scale",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }

    install_crd(&t).await;
    let w = widget("s1", json!({"replicas": 1, "maxReplicas": 5, "image": "x"}));
    ok_stdout(&kubectl(&t, &["create", "-f", "-"], Some(&w.to_string())));
    let out = ok_stdout(&kubectl(
        &t,
        &["scale", "widget", "s1", "--replicas=4"],
        None,
    ));
    assert_eq!(out.trim(), "widget.example.com/s1 scaled");
    let got = ok_stdout(&kubectl(
        &t,
        &["get", "widget", "s1", "-o", "jsonpath={.spec.replicas}"],
        None,
    ));
    assert_eq!(got, "4");
    // The CEL rules still apply to a write through /scale.
    let out = kubectl(&t, &["scale", "widget", "s1", "--replicas=9"], None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("spec: Invalid value: replicas must not exceed maxReplicas"),
        "{}",
        stderr(&out)
    );
    let out = kubectl(&t, &["scale", "configmap", "x", "--replicas=1"], None);
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_a_built_in_field_and_a_custom_resource() {
    let t = common::start().await;
    let out = ok_stdout(&kubectl(&t, &["explain", "deployment.spec.replicas"], None));
    for want in [
        "GROUP:      apps",
        "KIND:       Deployment",
        "VERSION:    v1",
        "FIELD: replicas <integer>",
        "Number of desired pods.",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    let out = ok_stdout(&kubectl(
        &t,
        &["explain", "pod.spec.containers.resources"],
        None,
    ));
    assert!(
        out.contains("FIELD: resources <ResourceRequirements>"),
        "{out}"
    );
    assert!(out.contains("limits\t<map[string]Quantity>"), "{out}");

    install_crd(&t).await;
    let out = ok_stdout(&kubectl(&t, &["explain", "widget.spec"], None));
    for want in [
        "GROUP:      example.com",
        "KIND:       Widget",
        "FIELD: spec <Object>",
        "maxReplicas\t<integer>",
        "contact\t<string>",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    let out = ok_stdout(&kubectl(&t, &["explain", "widget.metadata.name"], None));
    assert!(out.contains("FIELD: name <string>"), "{out}");

    // Unknown fields with --validate=strict are refused as on a real server (which checks
    // them itself: kubectl sends fieldValidation=Strict).
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"bogus": 1, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let out = kubectl(
        &t,
        &["apply", "--validate=strict", "-f", "-"],
        Some(&bad.to_string()),
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "Error from server (BadRequest): error when creating \"STDIN\": Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.bogus\""
    );
}
