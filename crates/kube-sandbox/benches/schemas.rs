//! Schema benchmark: `cargo bench -p kube-sandbox --bench schemas [-- --objects N]`.
//!
//! In-process sandbox, driven with kube-rs over HTTPS, printing:
//! - sandbox start to first answered request (the OpenAPI definitions are not parsed then);
//! - the first and a later `GET /openapi/v3/apis/apps/v1` (the first parses the generated
//!   built-in definitions) and `GET /openapi/v2`;
//! - creates/s of N (default 2,000) custom resources with one client, for a CRD without rules and
//!   for the same CRD with CEL rules, a `pattern` and a `format` (the cost of validation).

use std::time::Instant;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

fn crd(plural: &str, kind: &str, rules: bool) -> Value {
    let mut spec = json!({"type": "object", "properties": {
        "replicas": {"type": "integer"}, "max": {"type": "integer"},
        "name": {"type": "string"}, "contact": {"type": "string"}}});
    if rules {
        spec["x-kubernetes-validations"] = json!([
            {"rule": "self.replicas <= self.max", "message": "too many"},
            {"rule": "self.name.startsWith('w')", "messageExpression": "'bad name ' + self.name"}]);
        spec["properties"]["name"]["pattern"] = json!("^[a-z0-9-]+$");
        spec["properties"]["contact"]["format"] = json!("email");
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}})
}

async fn get(client: &kube::Client, path: &str) -> usize {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    client.request_text(req).await.expect("GET").len()
}

async fn creates(client: &kube::Client, plural: &str, kind: &str, n: usize) -> f64 {
    let gvk = GroupVersionKind::gvk("bench.example.com", "v1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    // Wait until the CRD is served.
    loop {
        if api.list(&Default::default()).await.is_ok() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let start = Instant::now();
    for i in 0..n {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "bench.example.com/v1", "kind": kind,
            "metadata": {"name": format!("w{i}")},
            "spec": {"replicas": 1, "max": 3, "name": format!("w-{i}"), "contact": "a@b.c"}}))
        .expect("object");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create");
    }
    n as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .iter()
        .position(|a| a == "--objects")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000usize);

    let t0 = Instant::now();
    let sandbox = Sandbox::start(SandboxConfig::ephemeral())
        .await
        .expect("start");
    println!("Sandbox::start returned: {:?}", t0.elapsed());
    let kc = kube::config::Kubeconfig::from_yaml(&sandbox.kubeconfig_yaml()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(cfg).expect("client");
    let t1 = Instant::now();
    get(&client, "/version").await;
    println!(
        "start to first answered request: {:?} (the first request, TLS handshake included: {:?})",
        t0.elapsed(),
        t1.elapsed()
    );

    for label in ["first", "second"] {
        let t = Instant::now();
        let bytes = get(&client, "/openapi/v3/apis/apps/v1").await;
        println!(
            "GET /openapi/v3/apis/apps/v1 ({label}): {:?}, {bytes} bytes",
            t.elapsed()
        );
    }
    let t = Instant::now();
    let bytes = get(&client, "/openapi/v2").await;
    println!("GET /openapi/v2: {:?}, {bytes} bytes", t.elapsed());

    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    // The first series warms the server up and is not reported.
    for (plural, kind, rules) in [
        ("warms", "Warm", false),
        ("plains", "Plain", false),
        ("ruleds", "Ruled", true),
    ] {
        let c: DynamicObject = serde_json::from_value(crd(plural, kind, rules)).expect("crd");
        crds.create(&PostParams::default(), &c)
            .await
            .expect("crd create");
        let rate = creates(&client, plural, kind, n).await;
        if plural == "warms" {
            continue;
        }
        println!(
            "creates/s, {n} custom resources, 1 client, {}: {rate:.0}",
            if rules {
                "CEL rules + pattern + format"
            } else {
                "no rules"
            }
        );
    }
    sandbox.shutdown().await;
}
