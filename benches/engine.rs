//! Engine benchmark: `cargo bench --bench engine [-- --parents N --children C --mix 0|1 --timeout S
//! --workers W --api-qps Q]`.
//!
//! Runs the CompositeController engine in-process against an in-process sandbox (no kubelet),
//! with a sync hook served over HTTP on 127.0.0.1 (a small Rust server, so the figures measure
//! the engine, not a hook's language), and prints:
//! - the time from the first parent creation until every parent has all its children
//!   (default 1,000 parents x 3 ConfigMap children, plus a Secret written with `stringData` and
//!   a Deployment with non-canonical quantities (`cpu: "0.5"`, `memory: 1024Mi`) and empty
//!   `labels: {}` / `env: []`, which a kube-apiserver normalizes; `--mix 0` leaves those two
//!   out), and the hook calls it took;
//! - for a full resync of all those parents with nothing changed: the time, the hook calls,
//!   and the number of API writes, counted twice: the engine's own write events, and the
//!   sandbox's global resourceVersion before and after (must both be 0); writes the server
//!   answered as no-ops are counted apart (must be 0 too);
//! - the floors, measured in the same run: the API server's (the creates convergence needs,
//!   parents plus ConfigMap children, from 8 keep-alive clients) and the hook's (as many calls
//!   as the engine made, at `--workers` concurrency), and the engine's time as a multiple of the
//!   larger; syncs and hook calls per parent.
//!
//! The engine's client is `dev`'s: built by `k8s::client::connect` with the default limits
//! (no fixed rate, the adaptive window); `--workers` (default 5, `dev`'s default) and
//! `--api-qps` (default 0) as `dev`'s flags.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube_sandbox::{Sandbox, SandboxConfig};
use kubectl_meta::engine::Engine;
use kubectl_meta::engine::events::{EngineEvent, EventBus};
use kubectl_meta::engine::{EngineContext, EngineOptions};
use kubectl_meta::spec::{self, Source};
use serde_json::{Value, json};

mod common;
use common::{arg, client_for};

/// The Secret and Deployment children a kube-apiserver stores differently from how they are
/// written (stringData folded into data, quantities canonicalized, empties dropped).
fn normalized_children(name: &str) -> [Value; 2] {
    let labels = json!({"app": name});
    [
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{name}-s"), "annotations": {}},
            "stringData": {"password": format!("pw-{name}")}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("{name}-d"), "labels": {}},
            "spec": {"selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": "nginx", "env": [],
                        "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"},
                                      "requests": {"cpu": 0.25}}}]}}}}),
    ]
}

async fn hook_server(children: usize, mix: bool, calls: Arc<AtomicUsize>) -> String {
    let app = axum::Router::new().route(
        "/sync",
        post(move |Json(req): Json<Value>| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::Relaxed);
                let name = req["parent"]["metadata"]["name"].as_str().unwrap_or("x");
                let mut kids: Vec<Value> = (0..children)
                    .map(|i| {
                        json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": format!("{name}-{i}")},
                            "data": {"index": i.to_string(), "parent": name}})
                    })
                    .collect();
                if mix {
                    kids.extend(normalized_children(name));
                }
                let ready = req["children"]["ConfigMap.v1"]
                    .as_object()
                    .map_or(0, |m| m.len());
                Json(json!({"status": {"children": ready}, "children": kids}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind hook server");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/sync")
}

async fn global_rv(client: &kube::Client) -> u64 {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::all(client.clone());
    let list = api
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list");
    list.metadata
        .resource_version
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The API server's floor: `n` ConfigMap creates into namespace `floor`, from 8 keep-alive
/// clients at once (no client-side limit). Returns the seconds it took.
async fn api_floor(sb: &Sandbox, n: usize) -> f64 {
    let admin = client_for(sb).await;
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin);
    let floor_ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "floor"}})).expect("namespace");
    ns.create(&PostParams::default(), &floor_ns)
        .await
        .expect("namespace floor");
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(client_for(sb).await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, client)| {
            tokio::spawn(async move {
                let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
                    Api::namespaced(client, "floor");
                for i in (c..n).step_by(8) {
                    let cm = serde_json::from_value(json!({
                        "metadata": {"name": format!("f{i:06}")},
                        "data": {"index": i.to_string()}
                    }))
                    .expect("configmap");
                    api.create(&PostParams::default(), &cm)
                        .await
                        .expect("floor create");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("floor task");
    }
    start.elapsed().as_secs_f64()
}

/// The hook's floor: `n` calls of a sync request like the engine's, `concurrency` at a time.
/// Returns the seconds it took.
async fn hook_floor(url: &str, n: usize, concurrency: usize) -> f64 {
    let http = reqwest::Client::new();
    let body = json!({
        "controller": {"metadata": {"name": "bench"}},
        "parent": {"apiVersion": "bench.kubectl-meta.dev/v1", "kind": "Bench",
            "metadata": {"name": "p00000", "namespace": "default", "uid": "u"}, "spec": {"n": 0}},
        "children": {"ConfigMap.v1": {}, "Secret.v1": {}, "Deployment.apps/v1": {}},
        "related": {}, "finalizing": false
    });
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (http, body, next, url) = (
                http.clone(),
                body.clone(),
                Arc::clone(&next),
                url.to_string(),
            );
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let resp = http.post(&url).json(&body).send().await.expect("hook call");
                    let _: Value = resp.json().await.expect("hook answer");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("hook floor task");
    }
    start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let parents = arg("--parents", 1000);
    let children = arg("--children", 3);
    let mix = arg("--mix", 1) != 0;
    // Seconds to wait for convergence in each phase (an engine that hot-loops never converges).
    let timeout = Duration::from_secs(arg("--timeout", 300) as u64);
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let workers = arg("--workers", 5);
    let qps = arg("--api-qps", 0) as f64;
    let sb = Sandbox::start(cfg).await.expect("sandbox");
    let dir = tempfile::tempdir().expect("tempdir");
    let client = common::dev_client(&sb, qps, dir.path()).await;
    // The API floor first, before the engine watches anything.
    let floor_creates = parents + parents * children;
    let api_floor_s = api_floor(&sb, floor_creates).await;

    // The parent CRD.
    let bench_ar = common::install_crd(&client, "Bench", "benches").await;

    let calls = Arc::new(AtomicUsize::new(0));
    let url = hook_server(children, mix, Arc::clone(&calls)).await;
    let def = spec::parse_controller(
        &json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
            "metadata": {"name": "bench"},
            "spec": {
                "parentResource": {"apiVersion": "bench.kubectl-meta.dev/v1", "resource": "benches"},
                "childResources": [
                    {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}},
                    {"apiVersion": "v1", "resource": "secrets", "updateStrategy": {"method": "InPlace"}},
                    {"apiVersion": "apps/v1", "resource": "deployments", "updateStrategy": {"method": "InPlace"}},
                ],
                "generateSelector": true,
                "hooks": {"sync": {"webhook": {"url": url}}}
            }
        }),
        Source::cluster("compositecontroller", "bench"),
    )
    .expect("definition");

    let bus = EventBus::new();
    let writes = Arc::new(AtomicUsize::new(0));
    let noops = Arc::new(AtomicUsize::new(0));
    let syncs = Arc::new(AtomicUsize::new(0));
    {
        let mut rx = bus.subscribe();
        let writes = Arc::clone(&writes);
        let noops = Arc::clone(&noops);
        let syncs = Arc::clone(&syncs);
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(EngineEvent::SyncStarted { .. }) => {
                        syncs.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(EngineEvent::Action {
                        error: None, verb, ..
                    }) => {
                        if verb.to_string() == "no-op" {
                            noops.fetch_add(1, Ordering::Relaxed);
                        } else {
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => break,
                }
            }
        });
    }
    let ctx = Arc::new(
        EngineContext::new(
            client.clone(),
            bus,
            EngineOptions {
                workers,
                ..EngineOptions::default()
            },
        )
        .expect("engine context"),
    );
    let mut engine = Engine::new(ctx);
    engine.start(def);
    let idle = engine.wait_converged(Duration::from_secs(60)).await;
    assert!(idle.converged, "engine did not start: {idle:?}");

    // 1. Parent creation to all children created.
    let papi: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &bench_ar);
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    // 8 at a time (as the API floor's clients), so that creating them is not the bottleneck.
    futures::stream::iter(0..parents)
        .map(|i| {
            let papi = papi.clone();
            async move {
                let p: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "bench.kubectl-meta.dev/v1", "kind": "Bench",
                    "metadata": {"name": format!("p{i:05}")}, "spec": {"n": i}
                }))
                .expect("parent");
                papi.create(&PostParams::default(), &p)
                    .await
                    .expect("create parent");
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let created = start.elapsed();
    let want = parents * children;
    loop {
        let n = cm
            .list_metadata(&ListParams::default())
            .await
            .expect("list")
            .items
            .len();
        if n >= want {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "only {n}/{want} children after 15 min"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all_children = start.elapsed();
    let conv = engine.wait_converged(timeout).await;
    let converged = start.elapsed();
    let start_calls = calls.load(Ordering::Relaxed);
    let start_syncs = syncs.load(Ordering::Relaxed);
    let children = children + if mix { 2 } else { 0 };
    println!(
        "{parents} parents x {children} children{}: parents created in {:.2}s; all {want} ConfigMap children created after {:.2}s ({:.0} ConfigMaps/s); converged (statuses written, confirmed) after {:.2}s; {} hook calls; {} writes{}",
        if mix {
            " (ConfigMaps, plus a Secret written with stringData and a Deployment with cpu 0.5 each)"
        } else {
            ""
        },
        created.as_secs_f64(),
        all_children.as_secs_f64(),
        want as f64 / all_children.as_secs_f64(),
        converged.as_secs_f64(),
        calls.load(Ordering::Relaxed),
        writes.load(Ordering::Relaxed),
        if conv.converged {
            ""
        } else {
            " (NOT converged)"
        }
    );

    // 2. No-op resync.
    let rv_before = global_rv(&client).await;
    let writes_before = writes.load(Ordering::Relaxed);
    let noops_before = noops.load(Ordering::Relaxed);
    let calls_before = calls.load(Ordering::Relaxed);
    let t = Instant::now();
    engine.resync_all();
    let conv = engine.wait_converged(timeout).await;
    let resync = t.elapsed();
    let rv_after = global_rv(&client).await;
    let resync_writes = writes.load(Ordering::Relaxed) - writes_before;
    let resync_noops = noops.load(Ordering::Relaxed) - noops_before;
    println!(
        "no-op resync of {parents} parents: {:.2}s (includes a 0.3s quiet period), {} hook calls, {} writes by the engine, {} no-op writes, resourceVersion {} -> {} ({} writes seen by the server){}",
        resync.as_secs_f64(),
        calls.load(Ordering::Relaxed) - calls_before,
        resync_writes,
        resync_noops,
        rv_before,
        rv_after,
        rv_after.saturating_sub(rv_before),
        if conv.converged {
            ""
        } else {
            " (NOT converged)"
        }
    );
    engine.shutdown().await;

    // 3. The floors: the API server's (measured first) and the hook's, for as many calls as
    //    the start-up made, at the same concurrency.
    let hook_floor_s = hook_floor(&url, start_calls, workers).await;
    let floor = api_floor_s.max(hook_floor_s);
    println!(
        "floors: API server {floor_creates} creates from 8 clients in {api_floor_s:.2}s ({:.0}/s); hook {start_calls} calls at concurrency {workers} in {hook_floor_s:.2}s ({:.0}/s). Engine (workers {workers}, api-qps {qps}): converged in {:.2}s = {:.1}x the floor; {:.2} syncs and {:.2} hook calls per parent",
        floor_creates as f64 / api_floor_s,
        start_calls as f64 / hook_floor_s,
        converged.as_secs_f64(),
        converged.as_secs_f64() / floor,
        start_syncs as f64 / parents as f64,
        start_calls as f64 / parents as f64,
    );
    sb.shutdown().await;
    if resync_writes != 0 || resync_noops != 0 || rv_after != rv_before {
        eprintln!("FAIL: a no-op resync must make 0 writes");
        std::process::exit(1);
    }
}
