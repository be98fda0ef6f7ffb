//! Admission webhooks against real HTTPS servers on 127.0.0.1 (their own CA, given to the
//! configurations as `caBundle`), driven with the real kubectl: a validating webhook denies,
//! a mutating one patches, selectors and rules pick what they see, `failurePolicy` decides
//! what an unreachable webhook means.

use crate::common;

use std::sync::{Arc, Mutex};

use base64::Engine;
use rcgen::{CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::common::{TestSandbox, ok_stdout};

/// What a webhook server answers for one AdmissionReview request.
type Handler = fn(&str, &Value) -> Value;

/// A webhook server: HTTPS on 127.0.0.1 with a certificate of its own CA; records requests.
struct Server {
    url: String,
    ca_bundle: String,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
}

async fn serve(handler: Handler) -> Server {
    serve_as(handler, "127.0.0.1").await
}

/// [`serve`] with a certificate for `name` (an IP address or a DNS name).
async fn serve_as(handler: Handler, name: &str) -> Server {
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec![name.to_string()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    let acceptor = common::tls_acceptor(&cert, &key);
    let (listener, port) = common::listen_local().await;
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Some((head, body)) = common::read_http_request(&mut tls).await else {
                    return;
                };
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                log.lock()
                    .expect("log")
                    .push((path.clone(), review.clone()));
                let mut response = handler(&path, &review["request"]);
                response["uid"] = review["request"]["uid"].clone();
                let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": response})
                .to_string();
                let msg = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = tls.write_all(msg.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Server {
        url: format!("https://127.0.0.1:{port}"),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_cert.pem()),
        seen,
    }
}

/// Deny ConfigMaps labelled `forbidden`; add the label `mutated` (and keep a warning).
fn handler(path: &str, req: &Value) -> Value {
    let labels = &req["object"]["metadata"]["labels"];
    if path.starts_with("/validate") {
        if labels["forbidden"].is_string() {
            return json!({"allowed": false,
                "status": {"code": 403, "reason": "Forbidden", "message": "forbidden ConfigMaps are not welcome"}});
        }
        return json!({"allowed": true, "warnings": ["validated by the test webhook"]});
    }
    let op = if labels.is_object() {
        json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
    } else {
        json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
    };
    let patch = base64::engine::general_purpose::STANDARD.encode(op.to_string());
    json!({"allowed": true, "patchType": "JSONPatch", "patch": patch})
}

/// `/record`: note the labels the object has when called (a reinvoked webhook sees later
/// webhooks' changes); `/keep`: refuse to delete objects labelled `keep`.
fn recording_handler(path: &str, req: &Value) -> Value {
    if path.starts_with("/keep") {
        let allowed = !req["oldObject"]["metadata"]["labels"]["keep"].is_string();
        return json!({"allowed": allowed, "status": {"message": "kept objects stay"}});
    }
    if path.starts_with("/record") {
        let mut seen: Vec<String> = req["object"]["metadata"]["labels"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        seen.sort();
        let op = json!([{"op": "add", "path": "/metadata/annotations",
            "value": {"seen-labels": seen.join(",")}}]);
        let patch = base64::engine::general_purpose::STANDARD.encode(op.to_string());
        return json!({"allowed": true, "patchType": "JSONPatch", "patch": patch});
    }
    handler(path, req)
}

fn configuration(kind: &str, name: &str, server: &Server, path: &str, extra: Value) -> Value {
    let mut hook = json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"url": format!("{}{path}", server.url), "caBundle": server.ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"]}],
        "namespaceSelector": {"matchLabels": {"webhooks": "on"}}});
    if let (Some(h), Some(more)) = (hook.as_object_mut(), extra.as_object()) {
        h.extend(more.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": [hook]})
}

fn cm(ns: &str, name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": "v"}})
    .to_string()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn labels(t: &TestSandbox, ns: &str, name: &str) -> Value {
    let o: Value = serde_json::from_str(&ok_stdout(
        &t.kubectl(&["get", "cm", name, "-n", ns, "-o", "json"]),
    ))
    .expect("JSON");
    o["metadata"]["labels"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_deny_and_patch_what_their_rules_and_selectors_select() {
    let t = common::start().await;
    let server = serve(handler).await;
    ok_stdout(&t.kubectl(&["create", "namespace", "guarded"]));
    ok_stdout(&t.kubectl(&["label", "namespace", "guarded", "webhooks=on"]));
    ok_stdout(&t.kubectl(&["create", "namespace", "free"]));
    let validating = configuration(
        "ValidatingWebhookConfiguration",
        "deny.example.com",
        &server,
        "/validate",
        json!({}),
    );
    let mutating = configuration(
        "MutatingWebhookConfiguration",
        "label.example.com",
        &server,
        "/mutate",
        json!({"objectSelector": {"matchExpressions": [{"key": "skip-mutation", "operator": "DoesNotExist"}]}}),
    );
    for c in [&validating, &mutating] {
        ok_stdout(&t.kubectl_stdin(&["apply", "-f", "-"], &c.to_string()));
    }
    // Stored with upstream's defaults.
    let stored: Value = serde_json::from_str(&ok_stdout(&t.kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        "deny.example.com",
        "-o",
        "json",
    ])))
    .expect("JSON");
    assert_eq!(stored["webhooks"][0]["failurePolicy"], "Fail");
    assert_eq!(stored["webhooks"][0]["timeoutSeconds"], 10);
    assert_eq!(stored["metadata"]["generation"], 1);

    // The validating webhook denies, worded as kube-apiserver words it.
    let denied = t.kubectl_stdin(
        &["create", "-f", "-"],
        &cm("guarded", "bad", json!({"forbidden": "yes"})),
    );
    assert!(!denied.status.success());
    assert!(
        stderr(&denied).contains(r#"admission webhook "deny.example.com" denied the request: forbidden ConfigMaps are not welcome"#),
        "{}",
        stderr(&denied)
    );
    // Outside the selected namespace nobody is called.
    ok_stdout(&t.kubectl_stdin(
        &["create", "-f", "-"],
        &cm("free", "bad", json!({"forbidden": "yes"})),
    ));
    assert_eq!(labels(&t, "free", "bad"), json!({"forbidden": "yes"}));

    // The mutating webhook's JSONPatch is stored; its objectSelector skips opted-out objects.
    let out = t.kubectl_stdin(
        &["create", "-f", "-"],
        &cm("guarded", "good", json!({"app": "x"})),
    );
    ok_stdout(&out);
    assert!(
        stderr(&out).contains("validated by the test webhook"),
        "warning shown: {}",
        stderr(&out)
    );
    assert_eq!(
        labels(&t, "guarded", "good"),
        json!({"app": "x", "mutated": "yes"})
    );
    ok_stdout(&t.kubectl_stdin(
        &["create", "-f", "-"],
        &cm("guarded", "opted-out", json!({"skip-mutation": "1"})),
    ));
    assert_eq!(
        labels(&t, "guarded", "opted-out"),
        json!({"skip-mutation": "1"})
    );

    // What the webhooks were sent: AdmissionReview v1 requests with the object and operation.
    let seen = server.seen.lock().expect("log").clone();
    let (path, review) = seen
        .iter()
        .find(|(p, r)| p.starts_with("/mutate") && r["request"]["name"] == "good")
        .expect("the mutating webhook saw the create");
    assert!(path.ends_with("?timeout=10s"), "{path}");
    let req = &review["request"];
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(req["resource"]["resource"], "configmaps");
    assert_eq!(req["namespace"], "guarded");
    assert_eq!(req["object"]["data"], json!({"k": "v"}));
    // The validating webhook saw the mutated object.
    assert!(seen.iter().any(|(p, r)| p.starts_with("/validate")
        && r["request"]["name"] == "good"
        && r["request"]["object"]["metadata"]["labels"]["mutated"] == "yes"));
    // An update goes through too (UPDATE, with the old object).
    let upd = t.kubectl(&["label", "cm", "good", "-n", "guarded", "forbidden=now"]);
    assert!(!upd.status.success());
    assert!(
        stderr(&upd).contains("denied the request"),
        "{}",
        stderr(&upd)
    );
    let seen = server.seen.lock().expect("log").clone();
    assert!(
        seen.iter()
            .any(|(_, r)| r["request"]["operation"] == "UPDATE"
                && r["request"]["oldObject"]["metadata"]["name"] == "good")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_webhook_fails_or_is_ignored_by_its_failure_policy() {
    let t = common::start().await;
    let server = serve(handler).await;
    ok_stdout(&t.kubectl(&["create", "namespace", "guarded"]));
    ok_stdout(&t.kubectl(&["label", "namespace", "guarded", "webhooks=on"]));
    // Nothing listens there (a port just closed).
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let down = Server {
        url: format!("https://127.0.0.1:{closed}"),
        ca_bundle: server.ca_bundle.clone(),
        seen: Arc::default(),
    };
    let ignore = configuration(
        "ValidatingWebhookConfiguration",
        "down.example.com",
        &down,
        "/validate",
        json!({"failurePolicy": "Ignore"}),
    );
    ok_stdout(&t.kubectl_stdin(&["apply", "-f", "-"], &ignore.to_string()));
    ok_stdout(&t.kubectl_stdin(&["create", "-f", "-"], &cm("guarded", "a", json!({}))));
    let fail = configuration(
        "ValidatingWebhookConfiguration",
        "down.example.com",
        &down,
        "/validate",
        json!({"failurePolicy": "Fail"}),
    );
    ok_stdout(&t.kubectl_stdin(&["apply", "-f", "-"], &fail.to_string()));
    let out = t.kubectl_stdin(&["create", "-f", "-"], &cm("guarded", "b", json!({})));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            r#"Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:{closed}/validate?timeout=10s": dial tcp 127.0.0.1:{closed}: connect: connection refused"#
        )),
        "{err}"
    );
    // A webhook whose CA is not the server's: the TLS handshake fails, the write is refused.
    let other = serve(handler).await;
    let wrong_ca = Server {
        url: server.url.clone(),
        ca_bundle: other.ca_bundle.clone(),
        seen: Arc::default(),
    };
    let mistrusted = configuration(
        "ValidatingWebhookConfiguration",
        "down.example.com",
        &wrong_ca,
        "/validate",
        json!({"failurePolicy": "Fail"}),
    );
    ok_stdout(&t.kubectl_stdin(&["apply", "-f", "-"], &mistrusted.to_string()));
    let out = t.kubectl_stdin(&["create", "-f", "-"], &cm("guarded", "c", json!({})));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(r#"failed calling webhook "down.example.com""#)
            && err.contains("x509: certificate signed by unknown authority"),
        "{err}"
    );
    assert!(
        server.seen.lock().expect("log").is_empty(),
        "an untrusted server gets no review"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_webhooks_are_reinvoked_if_needed_and_deletes_are_validated() {
    let t = common::start().await;
    let server = serve(recording_handler).await;
    ok_stdout(&t.kubectl(&["create", "namespace", "guarded"]));
    ok_stdout(&t.kubectl(&["label", "namespace", "guarded", "webhooks=on"]));
    // "a-record" runs before "b-label" (configurations in name order); IfNeeded calls it again
    // after "b-label" added its label.
    let record = configuration(
        "MutatingWebhookConfiguration",
        "a-record",
        &server,
        "/record",
        json!({"reinvocationPolicy": "IfNeeded"}),
    );
    let label = configuration(
        "MutatingWebhookConfiguration",
        "b-label",
        &server,
        "/mutate",
        json!({}),
    );
    let mut keep = configuration(
        "ValidatingWebhookConfiguration",
        "keep",
        &server,
        "/keep",
        json!({}),
    );
    keep["webhooks"][0]["rules"][0]["operations"] = json!(["DELETE"]);
    for c in [&record, &label, &keep] {
        ok_stdout(&t.kubectl_stdin(&["apply", "-f", "-"], &c.to_string()));
    }
    ok_stdout(&t.kubectl_stdin(
        &["create", "-f", "-"],
        &cm("guarded", "x", json!({"keep": "1"})),
    ));
    let o: Value = serde_json::from_str(&ok_stdout(
        &t.kubectl(&["get", "cm", "x", "-n", "guarded", "-o", "json"]),
    ))
    .expect("JSON");
    assert_eq!(o["metadata"]["labels"]["mutated"], "yes");
    assert_eq!(
        o["metadata"]["annotations"]["seen-labels"], "keep,mutated",
        "the reinvoked webhook saw the later webhook's label"
    );
    let calls = server
        .seen
        .lock()
        .expect("log")
        .iter()
        .filter(|(p, _)| p.starts_with("/record"))
        .count();
    assert_eq!(calls, 2, "called once, then once more");
    let out = t.kubectl(&["delete", "cm", "x", "-n", "guarded"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"admission webhook "keep" denied the request: kept objects stay"#),
        "{}",
        stderr(&out)
    );
    ok_stdout(&t.kubectl(&["label", "cm", "x", "-n", "guarded", "keep-"]));
    ok_stdout(&t.kubectl(&["delete", "cm", "x", "-n", "guarded"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_configuration_that_cannot_be_called_is_rejected() {
    let t = common::start().await;
    let server = serve(handler).await;
    let mut bad = configuration(
        "ValidatingWebhookConfiguration",
        "bad.example.com",
        &server,
        "/validate",
        json!({}),
    );
    bad["webhooks"][0]["sideEffects"] = json!("Some");
    let out = t.kubectl_stdin(&["create", "-f", "-"], &bad.to_string());
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"The ValidatingWebhookConfiguration "bad.example.com" is invalid: webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun""#),
        "{}",
        stderr(&out)
    );
}

/// `matchConditions` decide as on a real kube-apiserver (`fixtures/match_conditions`, captured
/// by its `capture.py`): a false condition skips the webhook (a create passes although nothing
/// listens at its URL), true ones call it (the call fails), an evaluation error is a 403 under
/// `failurePolicy: Fail` and a skip under `Ignore`, a false condition wins over an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_conditions_answers_match_the_real_server() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/match_conditions"
    );
    let spec = common::fixture(dir, "cases.json");
    let expected = common::fixture(dir, "expected.json");
    let t = common::start().await;
    let ns = spec["namespace"].as_str().expect("namespace");
    let json_ct = "application/json";
    let (code, body) = common::admin_request(
        &t,
        "POST",
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"sandbox3-match-conditions": "on"}}}),
        json_ct,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let vwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let mut differ = common::Differences::default();
    for case in spec["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let config = format!("sandbox3-{name}");
        let (code, body) = common::admin_request(
            &t,
            "POST",
            vwc,
            &json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": config}, "webhooks": case["hooks"]}),
            json_ct,
        )
        .await;
        assert_eq!(code, 201, "{name}: {body}");
        let (code, body) = common::admin_request(
            &t,
            "POST",
            &format!("/api/v1/namespaces/{ns}/configmaps?dryRun=All"),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": case["create"]}}),
            json_ct,
        )
        .await;
        let got = if code == 201 {
            json!({"code": code})
        } else {
            json!({"code": code, "body": body})
        };
        differ.check(name, &expected[name], &got);
        let (code, body) = common::admin_request(
            &t,
            "DELETE",
            &format!("{vwc}/{config}"),
            &Value::Null,
            json_ct,
        )
        .await;
        assert_eq!(code, 200, "{name}: {body}");
    }
    differ.assert_none();
}

/// A `clientConfig.service` webhook is called at `https://NAME.NAMESPACE.svc:PORT/PATH` (its
/// certificate is for that name) on the address the Service's Endpoints list, the Service's
/// port mapped to the endpoint port of the same name; without endpoints the call fails and the
/// failure policy decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_webhook_is_reached_through_the_endpoints_of_its_service() {
    let t = common::start().await;
    let server = serve_as(handler, "hooks.webhooks.svc").await;
    let port = server.url.rsplit(':').next().expect("port").to_string();
    ok_stdout(&t.kubectl(&["create", "namespace", "guarded"]));
    ok_stdout(&t.kubectl(&["label", "namespace", "guarded", "webhooks=on"]));
    ok_stdout(&t.kubectl(&["create", "namespace", "webhooks"]));
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "hooks", "namespace": "webhooks"},
        "spec": {"ports": [{"name": "https", "port": 8443, "targetPort": "webhook"}]}});
    ok_stdout(&t.kubectl_stdin(&["create", "-f", "-"], &service.to_string()));
    let mut config = configuration(
        "ValidatingWebhookConfiguration",
        "svc.example.com",
        &server,
        "/validate",
        json!({"failurePolicy": "Fail"}),
    );
    config["webhooks"][0]["clientConfig"] = json!({"caBundle": server.ca_bundle,
        "service": {"namespace": "webhooks", "name": "hooks", "port": 8443, "path": "/validate"}});
    ok_stdout(&t.kubectl_stdin(&["create", "-f", "-"], &config.to_string()));
    // No endpoints yet: the call fails, and failurePolicy Fail refuses the write.
    let out = t.kubectl_stdin(&["create", "-f", "-"], &cm("guarded", "a", json!({})));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            r#"failed calling webhook "svc.example.com": failed to call webhook: service webhooks/hooks: no endpoints available"#
        ),
        "{}",
        stderr(&out)
    );
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "hooks", "namespace": "webhooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port.parse::<u16>().expect("port")}]}]});
    ok_stdout(&t.kubectl_stdin(&["create", "-f", "-"], &endpoints.to_string()));
    ok_stdout(&t.kubectl_stdin(&["create", "-f", "-"], &cm("guarded", "b", json!({}))));
    let out = t.kubectl_stdin(
        &["create", "-f", "-"],
        &cm("guarded", "c", json!({"forbidden": "yes"})),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("forbidden ConfigMaps are not welcome"),
        "{}",
        stderr(&out)
    );
    let seen = server.seen.lock().expect("log");
    assert_eq!(seen.len(), 2, "the webhook saw b and c: {seen:?}");
    assert!(
        seen[0].0.starts_with("/validate?timeout=10s"),
        "{:?}",
        seen[0].0
    );
}
