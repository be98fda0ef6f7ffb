//! DecoratorController benchmark: `cargo bench --bench decorator [-- --targets N --workers W
//! --api-qps Q --kubeconfig PATH --namespace-prefix P]` (a real API server with `--kubeconfig`:
//! namespace `<P>decorator`, deleted at the end).
//! The engine's client is `dev`'s (`k8s::client::connect_limited`, default: no fixed rate).
//!
//! A DecoratorController whose targets are N ConfigMaps labelled `decorate: "yes"` (default
//! 5,000) in an in-process sandbox, each given a label and one attachment Secret by a sync
//! hook served over HTTP on 127.0.0.1 by a small Rust server (so the figures measure the
//! engine, not a hook's language). Prints:
//! - initial convergence: from engine start until every target is labelled and every
//!   attachment exists, with the hook calls it took;
//! - a restart on the converged targets and the DecoratorController's whole working set per
//!   cached object: the live heap (counted by the bench's allocator, `common::heap_bytes`) the
//!   new engine grew by until it converged (its caches of the targets and the attachments,
//!   their indexes, per target its routing and replay memory), and what it gave back when
//!   stopped. Two sizes (`--targets`) give the slope. Exits 1 when the restart wrote anything
//!   or a phase did not converge.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams};
use kubectl_meta::spec::{self, Source};
use serde_json::json;

mod common;
use common::{Server, arg, work_ended};

/// The sync hook: label the target, attach one Secret `<target>-att` holding its name.
async fn hook_server(calls: Arc<AtomicUsize>) -> String {
    common::counting_hook("/sync", calls, |req| {
        let name = req["object"]["metadata"]["name"].as_str().unwrap_or("x");
        json!({"labels": {"decorated": "yes"},
            "attachments": [{"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-att")},
                "stringData": {"from": name}}]})
    })
    .await
}

/// The resourceVersion of a list of `api` (on the sandbox, its global one: any write moves it).
async fn list_rv<K>(api: &Api<K>) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
}

#[tokio::main]
async fn main() {
    let targets = arg("--targets", 5000);
    let (server, client, engine_client, ns, workers, qps, _dir) = common::setup("decorator").await;

    // The targets, before the engine starts.
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    common::create_configmaps(&cm, targets, 16, |i| {
        json!({"metadata": {"name": format!("t-{i:05}"), "labels": {"decorate": "yes"}},
            "data": {"v": "1"}})
    })
    .await;

    let calls = Arc::new(AtomicUsize::new(0));
    let url = hook_server(Arc::clone(&calls)).await;
    let def = spec::parse_controller(
        &json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
            "metadata": {"name": "bench"},
            "spec": {
                "resources": [{"apiVersion": "v1", "resource": "configmaps",
                    "labelSelector": {"matchLabels": {"decorate": "yes"}}}],
                "attachments": [{"apiVersion": "v1", "resource": "secrets",
                    "updateStrategy": {"method": "InPlace"}}],
                "hooks": {"sync": {"webhook": {"url": url}}}
            }
        }),
        Source::cluster("decoratorcontroller", "bench"),
    )
    .expect("definition");

    // 1. Initial convergence: every target labelled, every attachment there.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let start = Instant::now();
    let engine = common::start_engine(&engine_client, def.clone(), workers, &ns);
    let decorated = ListParams::default().labels("decorated=yes");
    loop {
        let labelled = cm.list_metadata(&decorated).await.expect("list targets");
        let atts = secrets
            .list_metadata(&ListParams::default())
            .await
            .expect("list attachments")
            .items
            .iter()
            .filter(|s| {
                s.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.ends_with("-att"))
            })
            .count();
        if labelled.items.len() >= targets && atts >= targets {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "{}/{targets} targets labelled, {atts} attachments after 15 min",
            labelled.items.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let conv = engine.wait_converged(Duration::from_secs(300)).await;
    let converged = work_ended(&conv, start);
    let initial_calls = calls.load(Ordering::Relaxed);
    println!(
        "{targets} targets ({workers} workers, api-qps {qps}): initial convergence (every target labelled, its attachment created) {:.2}s ({:.0} targets/s); {initial_calls} hook calls ({:.2} per target){}",
        converged.as_secs_f64(),
        targets as f64 / converged.as_secs_f64(),
        initial_calls as f64 / targets as f64,
        common::converged_note(conv.converged)
    );
    engine.shutdown().await;

    // 2. The DecoratorController's whole working set: a new engine on the converged targets.
    let heap_before = common::settled_heap().await;
    let rv_before = list_rv(&cm).await;
    let calls_before = calls.load(Ordering::Relaxed);
    let t = Instant::now();
    let engine = common::start_engine(&engine_client, def, workers, &ns);
    let conv = engine.wait_converged(Duration::from_secs(300)).await;
    let restart = work_ended(&conv, t);
    let heap_after = common::heap_bytes();
    let rv_after = list_rv(&cm).await;
    let restart_calls = calls.load(Ordering::Relaxed) - calls_before;
    // The targets and their attachments (a namespace's own ConfigMap, if any, is also cached).
    let cached = 2 * targets;
    let grown = heap_after.saturating_sub(heap_before);
    println!(
        "restart on {targets} converged targets: steady after {:.2}s, {restart_calls} hook calls, resourceVersion {} -> {}{}",
        restart.as_secs_f64(),
        rv_before.as_deref().unwrap_or("?"),
        rv_after.as_deref().unwrap_or("?"),
        common::converged_note(conv.converged)
    );
    common::print_working_set(
        "DecoratorController",
        grown,
        cached,
        &format!("{targets} targets, {targets} attachments; per target its replay memory"),
        "--targets",
    );
    engine.shutdown().await;
    common::print_released(heap_after, cached).await;
    // On a real server others' writes move its resourceVersion too: checked on the sandbox.
    let on_sandbox = matches!(server, Server::Sandbox(_));
    server.cleanup(&[], &[&ns]).await;
    let wrote = matches!((&rv_before, &rv_after), (Some(a), Some(b)) if a != b);
    if !conv.converged || (wrote && on_sandbox) {
        eprintln!("FAIL: the restart must converge and write nothing");
        std::process::exit(1);
    }
}
