//! MapController benchmark: `cargo bench --bench map [-- --inputs N --workers W --api-qps Q
//! --kubeconfig PATH --namespace-prefix P]` (a real API server with `--kubeconfig`: namespace
//! `<P>map` and a CRD named after `P`, deleted at the end).
//! The engine's client is `dev`'s (`k8s::client::connect_limited`, default: no fixed rate).
//!
//! One MapController parent selecting N ConfigMap inputs (default 5,000) in an in-process
//! sandbox, with the map hook served over HTTP on 127.0.0.1 by a small Rust server (so the
//! figures measure the engine, not a hook's language). Each input maps to one output ConfigMap.
//! Prints:
//! - initial convergence: from engine start until every output exists and the parent's status
//!   counts them all, with the hook calls it took (must be N) and the process's peak RSS;
//! - reacting to a change of one input: the time until its output shows the change and the
//!   engine is idle again, and the hook calls it took (must be exactly 1; exits 1 otherwise);
//! - a restart on the converged map and the MapController's whole working set per cached
//!   object: the live heap (counted by the bench's allocator, `common::heap_bytes`) the new
//!   engine grew by until it converged (caches, indexes, per map key its routing and replay
//!   memory), and what it gave back when stopped. Two sizes give the slope.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kubectl_meta::spec::{self, Source};
use serde_json::json;

mod common;
use common::{arg, work_ended};

/// The map hook: input `in-N` -> output ConfigMap `out-N` with the input's data.
async fn hook_server(calls: Arc<AtomicUsize>) -> String {
    common::counting_hook("/map", calls, |req| {
        let name = req["input"]["metadata"]["name"].as_str().unwrap_or("x");
        let out = name.replacen("in-", "out-", 1);
        json!({"outputs": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": out, "labels": {"role": "out"}},
            "data": req["input"]["data"]}]})
    })
    .await
}

/// Peak resident set size of this process (engine, sandbox and hook server together), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[tokio::main]
async fn main() {
    let inputs = arg("--inputs", 5000);
    let (server, client, engine_client, ns, workers, qps, _dir) = common::setup("map").await;

    let (kind, plural) = server.crd_names("Map", "maps");
    let map_ar = common::install_crd(&client, &kind, &plural).await;
    let papi: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &map_ar);

    // The inputs and the parent, before the engine starts.
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    common::create_configmaps(&cm, inputs, 16, |i| {
        json!({"metadata": {"name": format!("in-{i:05}"), "labels": {"role": "in"}},
            "data": {"v": "1"}})
    })
    .await;
    let created = t.elapsed();
    let parent: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "bench.kubectl-meta.dev/v1", "kind": kind,
        "metadata": {"name": "all"}, "spec": {"selector": {"matchLabels": {"role": "in"}}}
    }))
    .expect("parent");
    papi.create(&PostParams::default(), &parent)
        .await
        .expect("create parent");

    let calls = Arc::new(AtomicUsize::new(0));
    let url = hook_server(Arc::clone(&calls)).await;
    let def = spec::parse_controller(
        &json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "MapController",
            "metadata": {"name": "bench"},
            "spec": {
                "parentResource": {"apiVersion": "bench.kubectl-meta.dev/v1", "resource": plural},
                "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                "outputResources": [{"apiVersion": "v1", "resource": "configmaps",
                    "updateStrategy": {"method": "InPlace"}}],
                "hooks": {"map": {"webhook": {"url": url}}}
            }
        }),
        Source::cluster("mapcontroller", "bench"),
    )
    .expect("definition");
    // 1. Initial convergence.
    let start = Instant::now();
    let engine = common::start_engine(&engine_client, def.clone(), workers, &ns);
    let mut status_ok = false;
    while start.elapsed() < Duration::from_secs(900) {
        let p = papi.get("all").await.expect("get parent");
        let st = serde_json::to_value(&p).expect("json");
        if st["status"]["outputs"]["configmaps"]["total"] == json!(inputs)
            && st["status"]["inputs"]["configmaps"]["total"] == json!(inputs)
        {
            status_ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let conv = engine.wait_converged(Duration::from_secs(300)).await;
    let converged = work_ended(&conv, start);
    let initial_calls = calls.load(Ordering::Relaxed);
    println!(
        "{inputs} inputs ({workers} workers, api-qps {qps}): inputs created in {:.2}s (the API floor: 16 creates at a time); initial convergence (all outputs created, status counts {inputs}/{inputs}) {:.2}s ({:.0} inputs/s, {:.1}x the floor); {initial_calls} hook calls; peak RSS {:.0} MiB{}",
        created.as_secs_f64(),
        converged.as_secs_f64(),
        inputs as f64 / converged.as_secs_f64(),
        converged.as_secs_f64() / created.as_secs_f64(),
        peak_rss_mib().unwrap_or(0.0),
        if conv.converged && status_ok {
            ""
        } else {
            " (NOT converged)"
        }
    );

    // 2. One input changes.
    let before = calls.load(Ordering::Relaxed);
    let target = format!("in-{:05}", inputs / 2);
    let out = format!("out-{:05}", inputs / 2);
    let t = Instant::now();
    cm.patch(
        &target,
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch input");
    loop {
        let o = cm.get(&out).await.expect("get output");
        if o.data.and_then(|d| d.get("v").cloned()).as_deref() == Some("2") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the output did not follow in 60s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let followed = t.elapsed();
    let conv = engine.wait_converged(Duration::from_secs(60)).await;
    let idle = work_ended(&conv, t);
    let change_calls = calls.load(Ordering::Relaxed) - before;
    println!(
        "one input changed: output updated after {:.1}ms; engine idle again after {:.0}ms; {change_calls} hook call(s){}",
        followed.as_secs_f64() * 1000.0,
        idle.as_secs_f64() * 1000.0,
        common::converged_note(conv.converged)
    );
    engine.shutdown().await;

    // 3. The MapController's whole working set: a new engine on the converged map. What the
    //    process's live heap grew by from before it started (the first engine's memory freed:
    //    the heap settled) until it converged: its caches (the parent; the inputs and outputs,
    //    one ConfigMap informer), their indexes, and per map key its routing and replay memory.
    let heap_before = common::settled_heap().await;
    let calls_before = calls.load(Ordering::Relaxed);
    let t = Instant::now();
    let engine = common::start_engine(&engine_client, def, workers, &ns);
    let conv = engine.wait_converged(Duration::from_secs(300)).await;
    let restart = work_ended(&conv, t);
    let heap_after = common::heap_bytes();
    let cached = 2 * inputs + 1;
    let grown = heap_after.saturating_sub(heap_before);
    println!(
        "restart on the converged map: steady after {:.2}s, {} hook calls{}",
        restart.as_secs_f64(),
        calls.load(Ordering::Relaxed) - calls_before,
        common::converged_note(conv.converged)
    );
    common::print_working_set(
        "MapController",
        grown,
        cached,
        &format!(
            "the parent, {inputs} inputs, {inputs} outputs; {inputs} map keys with their replay memory"
        ),
        "--inputs",
    );
    engine.shutdown().await;
    common::print_released(heap_after, cached).await;
    server.cleanup(&[plural.as_str()], &[&ns]).await;
    if initial_calls != inputs || change_calls != 1 {
        eprintln!(
            "FAIL: initial convergence must take {inputs} hook calls (took {initial_calls}) and one changed input exactly 1 (took {change_calls})"
        );
        std::process::exit(1);
    }
}
