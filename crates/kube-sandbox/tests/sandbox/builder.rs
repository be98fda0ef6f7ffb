//! `Sandbox::builder()`: seeds created before the first request, errors that name the seed,
//! many sandboxes in one process, and stopping on drop.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_sandbox::{Sandbox, SandboxError};
use serde_json::json;

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"#;

fn widgets(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

#[tokio::test]
async fn seeds_are_served_on_the_first_request_crds_first_whatever_the_order() {
    // The custom resource comes before its CRD and its namespace in the documents.
    let sandbox = Sandbox::builder()
        .yaml(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: team-a}\nspec: {size: 3}\n",
        )
        .yaml(WIDGET_CRD)
        .namespace("team-a")
        .yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: team-a}\ndata: {k: v}\n")
        .kubelet(false)
        .start()
        .await
        .expect("sandbox starts");
    let client = sandbox.client().await.expect("client");
    let w = widgets(&client, "team-a")
        .get("w1")
        .await
        .expect("the widget is served");
    assert_eq!(w.data["spec"]["size"], 3);
    let cm: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    assert_eq!(
        cm.get("settings").await.expect("configmap").data.unwrap()["k"],
        "v"
    );
    // The namespace was populated as kube-controller-manager does.
    assert!(cm.get("kube-root-ca.crt").await.is_ok());
    let ns: Api<Namespace> = Api::all(client.clone());
    assert!(ns.get("team-a").await.is_ok());
    // kubelet(false): a Pod stays Pending.
    let pods: Api<Pod> = Api::namespaced(client, "team-a");
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let got = pods.get("p").await.expect("pod");
    assert_eq!(
        got.status.and_then(|s| s.phase).as_deref(),
        Some("Pending"),
        "no kubelet: the pod is never started"
    );
}

#[tokio::test]
async fn a_seed_the_server_rejects_is_an_error_naming_the_document() {
    let err = Sandbox::builder()
        .yaml(WIDGET_CRD)
        .yaml("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: big}\n")
        .start()
        .await
        .err()
        .expect("an invalid widget is refused");
    match &err {
        SandboxError::Seed { origin, message } => {
            assert_eq!(origin, "yaml #2, document 1");
            assert!(message.contains("spec.size"), "{message}");
        }
        other => panic!("unexpected error: {other}"),
    }
    let err = Sandbox::builder()
        .yaml("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
        .start()
        .await
        .err()
        .expect("an unknown kind is refused");
    assert!(
        err.to_string()
            .contains("no resource of kind Gadget in example.com/v1 is served"),
        "{err}"
    );
    let err = Sandbox::builder()
        .file("/nonexistent/crds.yaml")
        .start()
        .await
        .err()
        .expect("a missing file is refused");
    assert!(
        err.to_string().starts_with("/nonexistent/crds.yaml: "),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_sandboxes_run_in_parallel_in_one_process_each_with_its_own_objects() {
    let started = Instant::now();
    let sandboxes = futures::future::join_all((0..8).map(|_| Sandbox::builder().start())).await;
    let sandboxes: Vec<Sandbox> = sandboxes
        .into_iter()
        .map(|s| s.expect("sandbox starts"))
        .collect();
    let start_time = started.elapsed();
    let mut ports: Vec<u16> = sandboxes.iter().map(|s| s.addr().port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 8, "each sandbox listens on its own port");
    let work = sandboxes.iter().enumerate().map(|(i, sb)| async move {
        let client = sb.client().await.expect("client");
        let cms: Api<ConfigMap> = Api::namespaced(client, "default");
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("only-in-{i}")}, "data": {"i": i.to_string()}}),
        )
        .unwrap();
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
        let names: Vec<String> = cms
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n.starts_with("only-in-"))
            .collect();
        assert_eq!(
            names,
            vec![format!("only-in-{i}")],
            "sandbox {i} sees only its own"
        );
    });
    futures::future::join_all(work).await;
    eprintln!("8 sandboxes started in {start_time:?}");
}

#[tokio::test]
async fn dropping_a_sandbox_stops_it() {
    let sandbox = Sandbox::builder().start().await.expect("sandbox starts");
    let addr = sandbox.addr();
    assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
    drop(sandbox);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still listening on {addr} after drop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
