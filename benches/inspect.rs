//! `kubectl meta inspect` against a busy sandbox: 10,000 unrelated objects in 50 custom types
//! (all in the inspected object's namespace, each ~600 bytes) plus one 3-level tree
//! (Tree -> 3 ConfigMaps -> 2 Secrets each), inspected from a leaf Secret.
//!
//! Reports requests made, response bytes read and wall time (median of `--runs`) of:
//! - inspect with the governing CompositeController known (`-f`): only its types are listed;
//! - inspect without it: every listable type in the namespace plus cluster-scoped ones, metadata
//!   only;
//! - the list-every-type approach (what kubectl-tree does): discovery, then every listable type
//!   in the namespace plus cluster-scoped ones as full objects, and the tree built in memory.
//!
//! `cargo bench --bench inspect [-- --objects N --types T --runs R]`

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{arg, client_for};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use kubectl_meta::inspect::api::Listed;
use kubectl_meta::inspect::{Catalog, ControllerSource, Direction, Fetcher, InspectRequest, graph};
use kubectl_meta::k8s::object;
use serde_json::{Value, json};

struct Measure {
    metadata_only: bool,
    requests: u64,
    bytes: u64,
    wall: Duration,
    nodes: usize,
}

fn median(mut v: Vec<Measure>) -> Measure {
    v.sort_by_key(|m| m.wall);
    let mid = v.len() / 2;
    v.swap_remove(mid)
}

async fn create(client: &kube::Client, ar: &kube::discovery::ApiResource, obj: Value) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", ar);
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    let created = api
        .create(&PostParams::default(), &o)
        .await
        .expect("create");
    serde_json::to_value(created).expect("json")
}

fn owner(o: &Value) -> Value {
    json!({"apiVersion": object::api_version(o), "kind": object::kind(o),
        "name": object::name(o), "uid": object::uid(o), "controller": true})
}

/// The list-every-type approach: discovery, then full lists of every listable type (in
/// `default` plus cluster-scoped), and the subtree of the root found in memory.
async fn list_every_type(client: &kube::Client, root_uid: &str) -> Measure {
    let start = Instant::now();
    let fetcher = Fetcher::new(client.clone());
    let catalog = Catalog::discover(&fetcher).await.expect("discovery");
    let asks = catalog
        .types
        .iter()
        .filter(|t| t.listable())
        .map(|t| (t.clone(), t.namespaced.then(|| "default".to_string())))
        .collect();
    let mut by_owner: HashMap<String, Vec<String>> = HashMap::new();
    for (_, listed) in fetcher.list_many(asks, true).await {
        if let Listed::Items(items) = listed {
            for o in items {
                for r in object::owner_refs(&o) {
                    by_owner
                        .entry(r.uid)
                        .or_default()
                        .push(object::uid(&o).unwrap_or_default().to_string());
                }
            }
        }
    }
    let mut stack = vec![root_uid.to_string()];
    let mut nodes = 0;
    while let Some(u) = stack.pop() {
        nodes += 1;
        stack.extend(by_owner.get(&u).cloned().unwrap_or_default());
    }
    Measure {
        metadata_only: false,
        requests: fetcher.stats().requests(),
        bytes: fetcher.stats().bytes(),
        wall: start.elapsed(),
        nodes,
    }
}

async fn inspect(client: &kube::Client, controllers: ControllerSource) -> Measure {
    let start = Instant::now();
    let fetcher = Fetcher::new(client.clone());
    let catalog = Catalog::discover(&fetcher).await.expect("discovery");
    let req = InspectRequest {
        type_name: "secret".into(),
        name: "leaf-1-1".into(),
        namespace: "default".into(),
        direction: Direction::Both,
        depth: None,
        controllers,
        all_types: false,
    };
    let g = graph::build(&fetcher, &catalog, &req)
        .await
        .expect("inspect");
    Measure {
        metadata_only: !fetcher.stats().fell_back_to_full_lists(),
        requests: fetcher.stats().requests(),
        bytes: fetcher.stats().bytes(),
        wall: start.elapsed(),
        nodes: g.nodes.len(),
    }
}

fn report(name: &str, m: &Measure) {
    println!(
        "{name:<46} {:>4} requests {:>10} bytes {:>9.1} ms  ({} nodes{})",
        m.requests,
        m.bytes,
        m.wall.as_secs_f64() * 1000.0,
        m.nodes,
        if m.metadata_only {
            ", metadata-only lists"
        } else {
            ""
        }
    );
}

#[tokio::main]
async fn main() {
    let objects = arg("--objects", 10_000);
    let types = arg("--types", 50).max(1);
    let runs = arg("--runs", 3).max(1);
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let sb = Sandbox::start(cfg).await.expect("sandbox");
    let client = client_for(&sb).await;

    // Noise: `objects` objects in `types` CRDs, all in `default`.
    let t0 = Instant::now();
    let mut ars = Vec::new();
    for i in 0..types {
        ars.push(
            common::install_crd(&client, &format!("Noise{i:02}"), &format!("noise{i:02}s")).await,
        );
    }
    let filler = "x".repeat(400);
    futures::stream::iter(0..objects)
        .map(|i| {
            let ar = ars[i % types].clone();
            let client = client.clone();
            let filler = filler.clone();
            async move {
                create(&client, &ar, json!({
                    "apiVersion": ar.api_version, "kind": ar.kind,
                    "metadata": {"name": format!("n-{i:05}"), "labels": {"app": "noise", "i": format!("{}", i % 97)}},
                    "spec": {"payload": filler, "replicas": i % 5, "owner": "nobody"}
                }))
                .await;
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    // The tree: Tree -> 3 ConfigMaps -> 2 Secrets each.
    let tree_ar = common::install_crd(&client, "Tree", "trees").await;
    let root = create(
        &client,
        &tree_ar,
        json!({"apiVersion": tree_ar.api_version, "kind": "Tree",
        "metadata": {"name": "root"}, "spec": {"selector": {"matchLabels": {"tree": "root"}}}}),
    )
    .await;
    let cm_ar = common::ar("", "v1", "ConfigMap", "configmaps");
    let secret_ar = common::ar("", "v1", "Secret", "secrets");
    for c in 0..3 {
        let cm = create(
            &client,
            &cm_ar,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("mid-{c}"), "labels": {"tree": "root"},
                "ownerReferences": [owner(&root)]}}),
        )
        .await;
        for s in 0..2 {
            create(
                &client,
                &secret_ar,
                json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("leaf-{c}-{s}"), "labels": {"tree": "root"},
                    "ownerReferences": [owner(&cm)]}}),
            )
            .await;
        }
    }
    println!(
        "setup: {objects} objects in {types} types + a 3-level tree (10 objects) in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let ctl = dir.path().join("tree.yaml");
    std::fs::write(
        &ctl,
        "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nmetadata: {name: tree}\n\
         spec:\n  parentResource: {apiVersion: bench.kubectl-meta.dev/v1, resource: trees}\n  \
         childResources:\n  - {apiVersion: v1, resource: configmaps}\n  - {apiVersion: v1, resource: secrets}\n  \
         hooks: {sync: {webhook: {url: 'http://127.0.0.1:1/sync'}}}\n",
    )
    .expect("write controller");

    let root_uid = object::uid(&root).unwrap_or_default().to_string();
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    let mut every = Vec::new();
    for _ in 0..runs {
        known.push(inspect(&client, ControllerSource::Files(vec![ctl.clone()])).await);
        unknown.push(inspect(&client, ControllerSource::Cluster).await);
        every.push(list_every_type(&client, &root_uid).await);
    }
    let (known, unknown, every) = (median(known), median(unknown), median(every));
    println!("median of {runs} runs:");
    report("inspect, governing controller known (-f)", &known);
    report("inspect, no controller (metadata-only lists)", &unknown);
    report("list every type, full objects (kubectl-tree)", &every);
    println!(
        "inspect (-f) vs list-every-type: {:.1}x fewer requests, {:.1}x fewer bytes, {:.1}x faster",
        every.requests as f64 / known.requests.max(1) as f64,
        every.bytes as f64 / known.bytes.max(1) as f64,
        every.wall.as_secs_f64() / known.wall.as_secs_f64().max(1e-9)
    );
    println!(
        "inspect (no controller) vs list-every-type: {:.1}x fewer bytes, {:.1}x faster",
        every.bytes as f64 / unknown.bytes.max(1) as f64,
        every.wall.as_secs_f64() / unknown.wall.as_secs_f64().max(1e-9)
    );
    sb.shutdown().await;
}
