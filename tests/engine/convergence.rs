//! Convergence on what the API server stores (issue 12): Secret `stringData` and `cpu: "0.5"`
//! children converge on a sandbox that normalizes like kube-apiserver, with a second run writing
//! nothing; the hot-loop guard stops rewriting a field the server always rewrites (a CRD field
//! the sandbox prunes, for real), with client-side and server-side apply, in the engine and
//! through `dev --once`.

use crate::common;

use crate::common::cli;
use crate::common::engine::*;
use crate::common::{TIMEOUT, wait_for};

use kube::discovery::ApiResource;
use kubectl_meta::engine::ApplyStrategy;
use kubectl_meta::engine::EngineOptions;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent};
use kubectl_meta::engine::plan::hotloop;
use serde_json::{Value, json};

/// A structural schema: `spec.size` only, so the sandbox prunes any other `spec` field.
async fn install_widget_crd(client: &kube::Client) {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    install_crd_with_schema(client, "Widget", true, schema).await;
}

/// A Widget asking for a field its schema prunes, and a ConfigMap following `spec.value`.
fn pruned_field_hook(req: &Value) -> Value {
    let p = &req["parent"];
    let name = p["metadata"]["name"].as_str().unwrap();
    let value = p["spec"]["value"].as_str().unwrap_or("a");
    let labels = json!({"app": name});
    json!({"status": {"ok": true}, "children": [
        {"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
         "metadata": {"name": format!("{name}-w"), "labels": labels},
         "spec": {"size": 1, "unknownField": "x"}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": format!("{name}-c"), "labels": labels},
         "data": {"value": value}},
    ]})
}

fn hot_loops(engine: &Running) -> Vec<(String, String, Option<Value>, Option<Value>)> {
    engine
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::HotLoop {
                object,
                path,
                desired,
                server,
                ..
            } => Some((object, path, desired, server)),
            _ => None,
        })
        .collect()
}

/// Updates of `object` sent to the server (written or answered as no-ops).
fn rewrites(engine: &Running, object: &str) -> usize {
    engine
        .events()
        .iter()
        .filter(|e| {
            matches!(e, EngineEvent::Action { verb: ActionVerb::Update | ActionVerb::NoOp, object: o, error: None, .. } if o == object)
        })
        .count()
}

/// A sandbox with the Widget CRD, an engine running the [`pruned_field_hook`] controller with
/// `strategy`, and the parent `p`.
async fn pruned_field_world(strategy: ApplyStrategy) -> (World, Running) {
    let w = World::new("Parent", sync_fn(pruned_field_hook)).await;
    install_widget_crd(w.client()).await;
    let def = def(composite(
        "pruned",
        "Parent",
        json!([
            {"apiVersion": format!("{GROUP}/v1"), "resource": "widgets", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}},
        ]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    ));
    let options = EngineOptions {
        apply_strategy: strategy,
        ..EngineOptions::default()
    };
    let engine = Running::start_with(w.client(), vec![def], options).await;
    w.create(
        &parent_ar("Parent"),
        json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}, "value": "a"}}),
    )
    .await;
    (w, engine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_the_server_always_prunes_trips_the_hot_loop_guard_once() {
    let (w, engine) = pruned_field_world(ApplyStrategy::ClientSide).await;
    let par = parent_ar("Parent");

    // --once's verdict: the parent is reported, naming the field, the values and the cause.
    let rep = engine.converge().await;
    assert_eq!(rep.failed.len(), 1, "{rep:?}");
    let msg = &rep.failed[0].2;
    assert!(msg.contains("spec.unknownField"), "{msg}");
    assert!(msg.contains("\"x\""), "{msg}");
    assert!(msg.contains("prunes"), "{msg}");

    // One HotLoop event naming the Widget's field; the server returns nothing there.
    let loops = hot_loops(&engine);
    assert_eq!(loops.len(), 1, "{loops:?}");
    let (object, path, desired, server) = &loops[0];
    assert!(object.ends_with("/p-w"), "{object}");
    assert_eq!(path, "spec.unknownField");
    assert_eq!(desired, &Some(json!("x")));
    assert_eq!(server, &None);
    // A bounded number of rewrites, and nothing more once held. The sandbox stores the pruned
    // object unchanged, so each rewrite is answered with the same resourceVersion: a no-op,
    // not a write, and not waited for (three 10 s echo timeouts otherwise).
    assert_eq!(rewrites(&engine, object), hotloop::SYNCS);
    let noops = engine
        .events()
        .iter()
        .filter(|e| matches!(e, EngineEvent::Action { verb: ActionVerb::NoOp, object: o, .. } if o == object))
        .count();
    assert_eq!(noops, hotloop::SYNCS);
    assert!(
        !engine
            .writes()
            .iter()
            .any(|(v, o)| *v == ActionVerb::Update && o == object),
        "{:?}",
        engine.writes()
    );
    let rv = w.global_rv().await;
    engine.converge().await;
    assert_eq!(
        w.global_rv().await,
        rv,
        "something was written after the guard held"
    );
    // A Warning event on the parent says the same.
    let events = w.k8s_events("p").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "HotLoop" && m.contains("spec.unknownField")),
        "{events:?}"
    );

    // The parent's other children keep syncing; the held field stays held.
    w.patch(&par, "p", json!({"spec": {"value": "b"}})).await;
    w.wait_object(
        &core_ar("ConfigMap", "configmaps"),
        "p-c",
        "p-c updated",
        |o| o.is_some_and(|o| o["data"]["value"] == json!("b")),
    )
    .await;
    engine.converge().await;
    assert_eq!(rewrites(&engine, object), hotloop::SYNCS);
    assert_eq!(hot_loops(&engine).len(), 1);

    // A resync clears the guard: the field is tried again, and held again.
    engine.engine.resync_all();
    wait_for("the guard to trip again", TIMEOUT, || {
        let n = hot_loops(&engine).len();
        async move { (n == 2).then_some(()) }
    })
    .await;
    engine.converge().await;
    assert_eq!(rewrites(&engine, object), 2 * hotloop::SYNCS);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_of_a_pruned_field_is_guarded_too() {
    let (_w, engine) = pruned_field_world(ApplyStrategy::ServerSide).await;
    let rep = engine.converge().await;
    assert_eq!(rep.failed.len(), 1, "{rep:?}");
    assert!(rep.failed[0].2.contains("spec.unknownField"), "{rep:?}");
    let loops = hot_loops(&engine);
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert_eq!(rewrites(&engine, &loops[0].0), hotloop::SYNCS);
    engine.stop().await;
}

/// A Secret written with `stringData` and a Deployment with `cpu: "0.5"` / `memory: 1024Mi`.
fn normalized_children_hook(req: &Value) -> Value {
    let name = req["parent"]["metadata"]["name"].as_str().unwrap();
    let labels = json!({"app": name});
    json!({"children": [
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": format!("{name}-s"), "labels": labels, "annotations": {}},
         "stringData": {"password": "hunter2"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": format!("{name}-d"), "labels": labels},
         "spec": {"selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"containers": [{"name": "web", "image": "nginx", "env": [],
                                        "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"}}}]}}}},
    ]})
}

/// A sandbox with the parent `p` of [`normalized_children_hook`].
async fn normalized_world() -> World {
    let w = World::new("Parent", sync_fn(normalized_children_hook)).await;
    w.create(
        &parent_ar("Parent"),
        json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}}}),
    )
    .await;
    w
}

fn normalized_controller(w: &World) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        "normalized",
        "Parent",
        json!([
            {"apiVersion": "v1", "resource": "secrets", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "apps/v1", "resource": "deployments", "updateStrategy": {"method": "InPlace"}},
        ]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_data_and_non_canonical_quantities_converge_and_a_second_run_writes_nothing() {
    let w = normalized_world().await;
    // First run (as `dev --once`): converges, no hot loop.
    let engine = Running::start(w.client(), vec![normalized_controller(&w)]).await;
    let rep = engine.converge().await;
    assert!(rep.failed.is_empty(), "{rep:?}");
    assert!(hot_loops(&engine).is_empty());
    // The server normalized what it stored (this is what the sandbox must do like kube-apiserver).
    let secret = w
        .get(&core_ar("Secret", "secrets"), "p-s")
        .await
        .expect("secret");
    assert_eq!(secret["data"]["password"], json!("aHVudGVyMg=="));
    assert!(secret.get("stringData").is_none(), "{secret}");
    let deploy_ar = ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        plural: "deployments".into(),
    };
    let d = w.get(&deploy_ar, "p-d").await.expect("deployment");
    let limits = &d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
    assert_eq!(limits, &json!({"cpu": "500m", "memory": "1Gi"}));
    // Each child was written once (created), never updated.
    assert!(rewrites(&engine, "default/p-s") == 0 && rewrites(&engine, "default/p-d") == 0);
    engine.stop().await;

    // Second run: zero writes, the global resourceVersion does not move.
    let rv = w.global_rv().await;
    let engine = Running::start(w.client(), vec![normalized_controller(&w)]).await;
    let rep = engine.converge().await;
    assert!(rep.failed.is_empty(), "{rep:?}");
    assert!(engine.writes().is_empty(), "{:?}", engine.writes());
    assert_eq!(w.global_rv().await, rv, "the second run wrote something");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_once_exits_non_zero_naming_the_hot_loop() {
    let sb = common::start().await;
    let home = tempfile::tempdir().expect("home");
    let dir = tempfile::tempdir().expect("controller dir");
    cli::write_pruning_controller(dir.path());
    let kubeconfig = cli::kc(&sb);
    let controller_dir = dir.path().display().to_string();
    let args = [
        "--kubeconfig",
        &kubeconfig,
        "dev",
        "--apply",
        "-f",
        &controller_dir,
        "--once",
        "--timeout",
        "120",
        "-o",
        "json",
    ];
    let out = cli::run(cli::meta(home.path(), &args)).await;
    let stderr = cli::assert_fails(&out);
    assert!(
        stderr.contains("spec.unknownField") && stderr.contains("hot loop"),
        "{stderr}"
    );
    let (stdout, _) = cli::text(&out);
    let loops: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "hotLoop")
        .collect();
    assert_eq!(loops.len(), 1, "{stdout}");
    assert_eq!(loops[0]["path"], json!("spec.unknownField"));
    assert_eq!(loops[0]["desired"], json!("x"));
    assert!(loops[0]["server"].is_null(), "{}", loops[0]);
    assert!(
        loops[0]["cause"].as_str().unwrap_or("").contains("prunes"),
        "{}",
        loops[0]
    );
    // A bounded number of writes to the Widget.
    let updates = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["event"] == "action"
                && e["resource"] == json!("Widget.hot.kubectl-meta.dev/v1")
                && (e["verb"] == "update" || e["verb"] == "noOp")
        })
        .count();
    assert_eq!(updates, hotloop::SYNCS, "{stdout}");

    // The human output has a line for it too (a new run starts with a new guard).
    let out = cli::run(cli::meta(home.path(), &args[..args.len() - 2])).await;
    cli::assert_fails(&out);
    let (stdout, stderr) = cli::text(&out);
    assert!(
        format!("{stdout}{stderr}")
            .lines()
            .any(|l| l.contains("hot-loop") && l.contains("spec.unknownField")),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// A ConfigMap child whose `data.value` the hook sets to "ours".
fn fought_hook(req: &Value) -> Value {
    let name = req["parent"]["metadata"]["name"].as_str().unwrap();
    json!({"children": [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": format!("{name}-c"), "labels": {"app": name}},
         "data": {"value": "ours"}},
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fight_with_another_writer_is_a_hot_loop_naming_its_field_manager() {
    use kube::api::{Api, Patch, PatchParams};
    let w = World::new("Parent", sync_fn(fought_hook)).await;
    let def = def(composite(
        "fought",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    ));
    let engine = Running::start(w.client(), vec![def]).await;
    w.create(
        &parent_ar("Parent"),
        json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}}}),
    )
    .await;
    // Another client (field manager "fighter") sets the field back whenever it differs.
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(w.client().clone(), "default");
    let fighter = tokio::spawn(async move {
        let pp = PatchParams {
            field_manager: Some("fighter".into()),
            ..PatchParams::default()
        };
        loop {
            if let Ok(cm) = api.get("p-c").await
                && cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("value"))
                    .map(String::as_str)
                    != Some("theirs")
            {
                let _ = api
                    .patch(
                        "p-c",
                        &pp,
                        &Patch::Merge(json!({"data": {"value": "theirs"}})),
                    )
                    .await;
            }
            tokio::task::yield_now().await;
        }
    });
    let event = wait_for("a hotLoop event", TIMEOUT, || {
        let e = engine.events().into_iter().find_map(|e| match e {
            EngineEvent::HotLoop { path, cause, .. } => Some((path, cause)),
            _ => None,
        });
        async move { e }
    })
    .await;
    assert_eq!(event.0, "data.value");
    assert!(
        event.1.contains("field manager \"fighter\"") && event.1.contains("data.value"),
        "{}",
        event.1
    );
    // Held: the engine stops rewriting it, the other writer's value stays.
    let object = hot_loops(&engine)[0].0.clone();
    let n = rewrites(&engine, &object);
    assert!(n >= hotloop::SYNCS, "{n}");
    let rep = engine.converge().await;
    assert!(
        rep.failed.iter().any(|f| f.2.contains("fighter")),
        "{rep:?}"
    );
    assert_eq!(
        rewrites(&engine, &object),
        n,
        "rewritten after the guard held"
    );
    fighter.abort();
    engine.stop().await;
}
