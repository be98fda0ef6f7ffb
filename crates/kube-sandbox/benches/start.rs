//! Start-up bench: `cargo bench -p kube-sandbox --bench start [-- --runs N]`.
//!
//! Prints, over N runs (default 50) in one process, min / median / p90 of:
//! - `Sandbox::start()`: storage, bootstrap (namespaces, the default Node, a full controller
//!   pass), TLS material, listening;
//! - start to first answered request: `start()`, a `kube::Client` from its kubeconfig (as a test
//!   builds one) and `GET /version` answered;
//! - the same with a CRD seeded through `Sandbox::builder()` and a custom object read back.
//!
//! Goal (issue 32): under 50 ms to the first answered request, where envtest's etcd +
//! kube-apiserver take seconds.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube_sandbox::{Sandbox, SandboxConfig};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - {name: v1, served: true, storage: true,
     schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
"#;

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<48} min {:>7.2} ms   median {:>7.2} ms   p90 {:>7.2} ms   ({} runs)",
        ms(v[0]),
        ms(v[v.len() / 2]),
        ms(v[v.len() * 9 / 10]),
        v.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(50usize);
    // One warm-up: the first TLS provider and thread-pool set-up is paid once per process.
    drop(
        Sandbox::start(SandboxConfig::ephemeral())
            .await
            .expect("start"),
    );

    let mut start = Vec::new();
    let mut first = Vec::new();
    let mut seeded = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let sb = Sandbox::start(SandboxConfig::ephemeral())
            .await
            .expect("start");
        start.push(t.elapsed());
        drop(sb);

        let t = Instant::now();
        let sb = Sandbox::start(SandboxConfig::ephemeral())
            .await
            .expect("start");
        let client = sb.client().await.expect("client");
        client.apiserver_version().await.expect("GET /version");
        first.push(t.elapsed());
        drop(sb);

        let t = Instant::now();
        let sb = Sandbox::builder().yaml(CRD).start().await.expect("start");
        let client = sb.client().await.expect("client");
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", "v1", "Widget"),
            "widgets",
        );
        Api::<DynamicObject>::namespaced_with(client, "default", &ar)
            .get("w1")
            .await
            .expect("GET widget");
        seeded.push(t.elapsed());
        drop(sb);
    }
    summary("Sandbox::start()", start);
    summary("start -> first answered request (GET /version)", first);
    summary("builder + CRD + object -> object read back", seeded);
}
