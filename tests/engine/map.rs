//! MapController: one map hook call and one output group per selected input; incremental
//! work (a change to one input calls the hook once, for that input only); detached outputs
//! (deleted without a tombstone hook, kept and later expired with one); the engine-computed
//! status; a restart that writes nothing; overlapping parents; a type that is both input and
//! output; output-name clashes; a failing hook that deletes nothing.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::engine::*;
use crate::common::{TIMEOUT, wait_for};

use kube::discovery::ApiResource;
use kubectl_meta::engine::events::{EngineEvent, EventParent};
use kubectl_meta::spec::ControllerDef;
use serde_json::{Value, json};

const KEY_LABEL: &str = "metacontroller.k8s.io/map-key";
const INPUT_ANNOTATION: &str = "metacontroller.k8s.io/map-input";

fn cm_ar() -> ApiResource {
    core_ar("ConfigMap", "configmaps")
}

/// Outputs: `Snap` objects (a CRD with a status subresource).
fn snap_ar() -> ApiResource {
    parent_ar("Snap")
}

fn sched_ar() -> ApiResource {
    parent_ar("Sched")
}

/// A MapController over `Sched` parents, ConfigMap inputs, `outputs` and `hooks`.
fn map_def(outputs: Value, hooks: Value, extra: Value) -> ControllerDef {
    let mut spec = json!({
        "parentResource": {"apiVersion": format!("{GROUP}/v1"), "resource": "scheds"},
        "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "outputResources": outputs,
        "hooks": hooks,
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    def(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "MapController",
        "metadata": {"name": "snapper"}, "spec": spec
    }))
}

fn snap_outputs() -> Value {
    json!([{"apiVersion": format!("{GROUP}/v1"), "resource": "snaps",
        "updateStrategy": {"method": "InPlace"}}])
}

/// Map hook: one Snap `<parent>-<input>` per input, carrying the input's `data.v`.
fn snap_for(req: &Value) -> Value {
    let parent = req["parent"]["metadata"]["name"].as_str().unwrap_or("");
    let input = req["input"]["metadata"]["name"].as_str().unwrap_or("");
    json!({"outputs": [{
        "apiVersion": format!("{GROUP}/v1"), "kind": "Snap",
        "metadata": {"name": format!("{parent}-{input}")},
        "spec": {"from": input, "v": req["input"]["data"]["v"]},
    }]})
}

fn input(name: &str, app: &str, v: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"v": v}})
}

fn sched(name: &str, selector: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"selector": selector}})
}

/// A world with `Sched` parents, `Snap` outputs and a hook server running `handler`.
async fn world(handler: Handler) -> World {
    let w = World::new("Sched", handler).await;
    install_crd(w.client(), "Snap", true).await;
    w
}

/// Run the `snapper` MapController (Snap outputs, InPlace) with the world's map hook.
async fn start_snapper(w: &World) -> Running {
    let url = w.hook.url("map");
    let d = map_def(
        snap_outputs(),
        json!({"map": {"webhook": {"url": url}}}),
        json!({}),
    );
    Running::start(w.client(), vec![d]).await
}

/// A world with ConfigMaps `names` (app=yes), a parent `s` selecting them, and `snapper`
/// running until it converged.
async fn converged_snapper(names: &[&str]) -> (World, Running) {
    let w = world(sync_fn(snap_for)).await;
    for n in names {
        w.create(&cm_ar(), input(n, "yes", "1")).await;
    }
    w.create(
        &sched_ar(),
        sched("s", json!({"matchLabels": {"app": "yes"}})),
    )
    .await;
    let run = start_snapper(&w).await;
    run.converge().await;
    (w, run)
}

/// Map calls so far, by input name.
fn map_inputs(w: &World) -> Vec<String> {
    let mut v: Vec<String> = w
        .hook
        .calls_of("map")
        .iter()
        .map(|c| {
            c.request["input"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    v.sort();
    v
}

async fn wait_status(w: &World, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let ar = sched_ar();
    wait_for(what, TIMEOUT, || {
        let (ar, pred) = (&ar, &pred);
        async move { w.get(ar, name).await.filter(|o| pred(&o["status"])) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_input_gets_one_call_and_its_own_tagged_outputs_and_status_counts_them() {
    let w = world(sync_fn(snap_for)).await;
    for (n, app) in [("a", "yes"), ("b", "yes"), ("c", "yes"), ("other", "no")] {
        w.create(&cm_ar(), input(n, app, "1")).await;
    }
    let parent = w
        .create(
            &sched_ar(),
            sched("s", json!({"matchLabels": {"app": "yes"}})),
        )
        .await;
    let puid = parent.metadata.uid.clone().unwrap();
    let run = start_snapper(&w).await;
    run.converge().await;

    assert_eq!(
        map_inputs(&w),
        ["a", "b", "c"],
        "one call per selected input"
    );
    let snaps = w.objects(&snap_ar()).await;
    assert_eq!(
        snaps.keys().collect::<Vec<_>>(),
        ["s-a", "s-b", "s-c"],
        "one output group per input"
    );
    for call in w.hook.calls_of("map") {
        let input = call.request["input"]["metadata"]["name"].as_str().unwrap();
        let key = call.request["mapKey"].as_str().unwrap();
        let out = &snaps[&format!("s-{input}")];
        assert_eq!(out["metadata"]["labels"][KEY_LABEL], key);
        assert_eq!(
            out["metadata"]["annotations"][INPUT_ANNOTATION],
            format!("v1/ConfigMap/default/{input}")
        );
        assert_eq!(
            controller_ref(out),
            Some(("Sched".into(), "s".into(), puid.clone()))
        );
        // The outputs map always has the output type's entry.
        assert!(call.request["outputs"][format!("Snap.{GROUP}/v1")].is_object());
    }
    let keys: std::collections::BTreeSet<&str> = snaps
        .values()
        .map(|o| o["metadata"]["labels"][KEY_LABEL].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 3, "distinct map keys");

    let st = wait_status(&w, "s", "status counts", |s| {
        s["inputs"]["configmaps"]["total"] == 3
    })
    .await;
    assert_eq!(st["status"]["outputs"]["snaps"]["total"], 3);
    assert_eq!(st["status"]["outputs"]["snaps"]["detached"], 0);
    assert_eq!(
        st["status"]["observedGeneration"],
        st["metadata"]["generation"]
    );
    let synced = condition(&st, "Synced").expect("Synced condition");
    assert_eq!(synced["status"], "True");

    // Conditions on outputs are counted per type (lower-cased), True only.
    w.patch_status(
        &snap_ar(),
        "s-a",
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await;
    w.patch_status(
        &snap_ar(),
        "s-b",
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    )
    .await;
    wait_status(&w, "s", "ready: 1", |s| s["outputs"]["snaps"]["ready"] == 1).await;
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_one_input_calls_the_hook_once_for_that_input_only() {
    let (w, run) = converged_snapper(&["a", "b", "c"]).await;
    assert_eq!(map_inputs(&w), ["a", "b", "c"]);

    // Update one input: one call, for it; its output follows (InPlace); our own write's echo
    // does not call the hook again.
    w.hook.clear();
    w.patch(&cm_ar(), "b", json!({"data": {"v": "2"}})).await;
    w.wait_object(&snap_ar(), "s-b", "s-b to follow", |o| {
        o.is_some_and(|o| o["spec"]["v"] == "2")
    })
    .await;
    run.converge().await;
    assert_eq!(map_inputs(&w), ["b"]);

    // A new input: one call.
    w.hook.clear();
    w.create(&cm_ar(), input("d", "yes", "1")).await;
    w.wait_names(&snap_ar(), &["s-a", "s-b", "s-c", "s-d"])
        .await;
    run.converge().await;
    assert_eq!(map_inputs(&w), ["d"]);

    // An input whose labels stop matching is gone for this parent: no map call, and without a
    // tombstone hook its outputs are deleted.
    w.hook.clear();
    w.patch(
        &cm_ar(),
        "a",
        json!({"metadata": {"labels": {"app": "no"}}}),
    )
    .await;
    w.wait_names(&snap_ar(), &["s-b", "s-c", "s-d"]).await;
    run.converge().await;
    assert_eq!(map_inputs(&w), Vec::<String>::new());

    // A deleted input: the same.
    w.delete(&cm_ar(), "c").await;
    w.wait_names(&snap_ar(), &["s-b", "s-d"]).await;
    run.converge().await;
    assert_eq!(map_inputs(&w), Vec::<String>::new());

    // Someone edits an output: only that key is re-mapped, and the edit is reverted.
    w.patch(&snap_ar(), "s-d", json!({"spec": {"v": "tampered"}}))
        .await;
    w.wait_object(&snap_ar(), "s-d", "s-d to follow", |o| {
        o.is_some_and(|o| o["spec"]["v"] == "1")
    })
    .await;
    run.converge().await;
    assert_eq!(map_inputs(&w), ["d"]);

    let st = wait_status(&w, "s", "2 inputs", |s| {
        s["inputs"]["configmaps"]["total"] == 2
    })
    .await;
    assert_eq!(st["status"]["outputs"]["snaps"]["total"], 2);

    // A parent change re-maps every key of that parent.
    w.hook.clear();
    w.patch(&sched_ar(), "s", json!({"spec": {"note": "changed"}}))
        .await;
    wait_for("both keys re-mapped", TIMEOUT, || {
        let n = map_inputs(&w);
        async move { (n == ["b", "d"]).then_some(()) }
    })
    .await;
    run.converge().await;
    assert_eq!(map_inputs(&w), ["b", "d"]);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstone_keeps_detached_outputs_until_it_lets_them_expire() {
    let keep = Arc::new(AtomicBool::new(true));
    let k = Arc::clone(&keep);
    let handler: Handler = Arc::new(move |hook, req| {
        if hook == "tombstone" {
            let kept: Vec<Value> = if k.load(Ordering::SeqCst) {
                req["outputs"][format!("Snap.{GROUP}/v1")]
                    .as_object()
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            Reply::json(json!({"outputs": kept}))
        } else {
            Reply::json(snap_for(req))
        }
    });
    let w = world(handler).await;
    for n in ["a", "b"] {
        w.create(&cm_ar(), input(n, "yes", "1")).await;
    }
    w.create(
        &sched_ar(),
        sched("s", json!({"matchLabels": {"app": "yes"}})),
    )
    .await;
    let (m, t) = (w.hook.url("map"), w.hook.url("tombstone"));
    let run = Running::start(
        w.client(),
        vec![map_def(
            snap_outputs(),
            json!({"map": {"webhook": {"url": m}}, "tombstone": {"webhook": {"url": t}}}),
            json!({"resyncPeriodSeconds": 1}),
        )],
    )
    .await;
    w.wait_names(&snap_ar(), &["s-a", "s-b"]).await;
    let a_key = w.get(&snap_ar(), "s-a").await.unwrap()["metadata"]["labels"][KEY_LABEL].clone();

    w.delete(&cm_ar(), "a").await;
    wait_for("the tombstone hook to be asked about a", TIMEOUT, || {
        let hit = w
            .hook
            .calls_of("tombstone")
            .into_iter()
            .find(|c| c.request["mapKey"] == a_key);
        async move { hit }
    })
    .await;
    let st = wait_status(&w, "s", "1 detached", |s| {
        s["outputs"]["snaps"]["detached"] == 1
    })
    .await;
    assert_eq!(st["status"]["inputs"]["configmaps"]["total"], 1);
    assert_eq!(st["status"]["outputs"]["snaps"]["total"], 2);
    // Asked again on resyncs, still kept.
    let asked = w.hook.calls_of("tombstone").len();
    wait_for("the tombstone hook to be asked again", TIMEOUT, || {
        let n = w.hook.calls_of("tombstone").len();
        async move { (n > asked).then_some(()) }
    })
    .await;
    assert_eq!(w.names(&snap_ar()).await, ["s-a", "s-b"]);

    // The hook lets it go: deleted on the next resync.
    keep.store(false, Ordering::SeqCst);
    w.wait_names(&snap_ar(), &["s-b"]).await;
    wait_status(&w, "s", "0 detached", |s| {
        s["outputs"]["snaps"]["detached"] == 0 && s["outputs"]["snaps"]["total"] == 1
    })
    .await;

    // The detached output and each tombstone decision are events of their own, naming the
    // parent and the map key as separate fields, and valid against the documented schema.
    let a_key = a_key.as_str().expect("key label").to_string();
    let events = run.events();
    let decisions: Vec<(Vec<String>, Vec<String>)> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Tombstone {
                parent,
                map_key,
                kept,
                deleted,
                ..
            } if parent == "default/s" && *map_key == a_key => {
                let names = |v: &[kubectl_meta::engine::plan::child::ChildId]| {
                    v.iter().map(|i| i.key.name.clone()).collect::<Vec<_>>()
                };
                Some((names(kept), names(deleted)))
            }
            _ => None,
        })
        .collect();
    assert!(
        decisions.contains(&(vec!["s-a".to_string()], vec![])),
        "kept: {decisions:?}"
    );
    assert_eq!(
        decisions.last(),
        Some(&(vec![], vec!["s-a".to_string()])),
        "then deleted"
    );
    assert!(events.iter().any(|e| matches!(e,
        EngineEvent::Detached { parent, map_key, outputs, .. }
            if parent == "default/s" && *map_key == a_key
                && outputs.iter().any(|o| o.key.name == "s-a"))));
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(common::cli::repo().join("docs/dev-events.schema.json"))
            .expect("schema"),
    )
    .expect("schema is JSON");
    for e in &events {
        let mut v = serde_json::to_value(e).expect("serializes");
        v["time"] = json!("2026-01-01T00:00:00.000Z");
        if let Err(why) = common::schema::validate(&schema, &schema, &v, "$") {
            panic!("{why}: {v}");
        }
        if let Some(p) = v["parent"].as_str() {
            assert!(
                !p.contains(&a_key),
                "the map key is not glued into parent: {v}"
            );
        }
    }
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_converges_without_writes_and_overlapping_parents_have_their_own_outputs() {
    let w = world(sync_fn(snap_for)).await;
    for n in ["a", "b"] {
        w.create(&cm_ar(), input(n, "yes", "1")).await;
    }
    let p1 = w
        .create(
            &sched_ar(),
            sched("s1", json!({"matchLabels": {"app": "yes"}})),
        )
        .await;
    let p2 = w.create(&sched_ar(), sched("s2", json!({}))).await;
    let url = w.hook.url("map");
    let definition = || {
        map_def(
            snap_outputs(),
            json!({"map": {"webhook": {"url": url.clone()}}}),
            json!({}),
        )
    };
    let run = Running::start(w.client(), vec![definition()]).await;
    run.converge().await;
    // s2 selects every ConfigMap, the namespace's CA bundle included (as on a real cluster).
    w.wait_names(
        &snap_ar(),
        &["s1-a", "s1-b", "s2-a", "s2-b", "s2-kube-root-ca.crt"],
    )
    .await;
    let snaps = w.objects(&snap_ar()).await;
    for (name, owner) in [("s1-a", &p1), ("s1-b", &p1), ("s2-a", &p2), ("s2-b", &p2)] {
        assert_eq!(
            controller_ref(&snaps[name]).map(|r| r.2),
            owner.metadata.uid.clone(),
            "{name}"
        );
    }
    // The same input has the same key under both parents; each parent has its own outputs.
    assert_eq!(
        snaps["s1-a"]["metadata"]["labels"][KEY_LABEL],
        snaps["s2-a"]["metadata"]["labels"][KEY_LABEL]
    );
    wait_status(&w, "s1", "s1 status", |s| {
        s["outputs"]["snaps"]["total"] == 2
    })
    .await;
    wait_status(&w, "s2", "s2 status", |s| {
        s["outputs"]["snaps"]["total"] == 3
    })
    .await;
    run.converge().await;
    run.stop().await;

    let rv = w.global_rv().await;
    let before = versions(&w.objects(&snap_ar()).await);
    w.hook.clear();
    let run = Running::start(w.client(), vec![definition()]).await;
    run.converge().await;
    assert_eq!(w.global_rv().await, rv, "a restarted engine writes nothing");
    assert_eq!(versions(&w.objects(&snap_ar()).await), before);
    assert_eq!(
        map_inputs(&w),
        ["a", "a", "b", "b", "kube-root-ca.crt"],
        "one call per key and parent"
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_type_that_is_also_an_output_is_not_mapped_recursively() {
    // Every ConfigMap (no selector) gets a copy; the copies are ConfigMaps controlled by the
    // parent, which are not inputs of that parent.
    let copy: Handler = sync_fn(|req| {
        let n = req["input"]["metadata"]["name"].as_str().unwrap_or("");
        json!({"outputs": [configmap(&format!("{n}-copy"), req["input"]["data"].clone())]})
    });
    let w = world(copy).await;
    for n in ["a", "b"] {
        w.create(&cm_ar(), input(n, "x", "1")).await;
    }
    w.create(&sched_ar(), json!({"metadata": {"name": "s"}, "spec": {}}))
        .await;
    let url = w.hook.url("map");
    let run = Running::start(
        w.client(),
        vec![map_def(
            json!([{"apiVersion": "v1", "resource": "configmaps"}]),
            json!({"map": {"webhook": {"url": url}}}),
            json!({}),
        )],
    )
    .await;
    run.converge().await;
    let names: Vec<String> = w
        .names(&cm_ar())
        .await
        .into_iter()
        // The namespace's own CA bundle is an input too (as on a real cluster), and so is mapped.
        .filter(|n| !n.starts_with("kube-root-ca.crt"))
        .collect();
    assert_eq!(names, ["a", "a-copy", "b", "b-copy"]);
    assert_eq!(map_inputs(&w), ["a", "b", "kube-root-ca.crt"]);
    let st = wait_status(&w, "s", "status", |s| {
        s["outputs"]["configmaps"]["total"] == 3
    })
    .await;
    assert_eq!(
        st["status"]["inputs"]["configmaps"]["total"],
        json!(names.len() - 1)
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_keys_claiming_one_output_name_is_a_sync_error_not_a_steal() {
    let same: Handler = sync_fn(|req| {
        json!({"outputs": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Snap",
            "metadata": {"name": "same"},
            "spec": {"from": req["input"]["metadata"]["name"]}}]})
    });
    let w = world(same).await;
    w.create(&cm_ar(), input("a", "yes", "1")).await;
    w.create(
        &sched_ar(),
        sched("s", json!({"matchLabels": {"app": "yes"}})),
    )
    .await;
    let run = start_snapper(&w).await;
    w.wait_object(&snap_ar(), "same", "same to follow", |o| {
        o.is_some_and(|o| o["spec"]["from"] == "a")
    })
    .await;
    run.converge().await;
    let owner_key =
        w.get(&snap_ar(), "same").await.unwrap()["metadata"]["labels"][KEY_LABEL].clone();

    w.create(&cm_ar(), input("b", "yes", "1")).await;
    let st = wait_status(&w, "s", "Synced False", |s| {
        s["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Synced" && c["status"] == "False")
        })
    })
    .await;
    let msg = condition(&st, "Synced").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("output name clash") && msg.contains("v1/ConfigMap/default/a"),
        "{msg}"
    );
    let events = w.k8s_events("s").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "SyncError" && m.contains("output name clash")),
        "{events:?}"
    );
    let same = w.get(&snap_ar(), "same").await.unwrap();
    assert_eq!(
        same["metadata"]["labels"][KEY_LABEL], owner_key,
        "not stolen"
    );
    assert_eq!(same["spec"]["from"], "a");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_map_hook_changes_and_deletes_nothing_and_recovers() {
    let (w, run) = converged_snapper(&["a", "b"]).await;
    let before = versions(&w.objects(&snap_ar()).await);

    w.hook.set(Arc::new(|_, _| Reply::status(500, "boom")));
    w.patch(&cm_ar(), "a", json!({"data": {"v": "2"}})).await;
    let st = wait_status(&w, "s", "Synced False", |s| {
        s["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Synced" && c["status"] == "False")
        })
    })
    .await;
    let msg = condition(&st, "Synced").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("map hook failed") && msg.contains("500"),
        "{msg}"
    );
    assert_eq!(
        versions(&w.objects(&snap_ar()).await),
        before,
        "nothing changed"
    );

    w.hook.set(sync_fn(snap_for));
    w.wait_object(&snap_ar(), "s-a", "s-a to follow", |o| {
        o.is_some_and(|o| o["spec"]["v"] == "2")
    })
    .await;
    wait_status(&w, "s", "Synced True", |s| {
        s["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Synced" && c["status"] == "True")
        })
    })
    .await;
    assert_eq!(w.names(&snap_ar()).await, ["s-a", "s-b"]);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_parent_maps_several_input_types_across_namespaces() {
    // One output per input, in the input's namespace, named after its kind and name.
    let per_input: Handler = sync_fn(|req| {
        let i = &req["input"];
        let kind = i["kind"].as_str().unwrap_or("").to_lowercase();
        let name = i["metadata"]["name"].as_str().unwrap_or("");
        json!({"outputs": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Snap",
            "metadata": {"name": format!("{kind}-{name}"),
                "namespace": i["metadata"]["namespace"]},
            "spec": {"keys": req["outputs"][format!("Snap.{GROUP}/v1")]
                .as_object().map(|m| m.keys().cloned().collect::<Vec<_>>())}}]})
    });
    let w = World::new("Unused", per_input).await;
    install_crd(w.client(), "Snap", true).await;
    install_crd(w.client(), "Csched", false).await;
    create_namespace(w.client(), "team-b").await;
    let secret_ar = core_ar("Secret", "secrets");
    for ns in ["default", "team-b"] {
        let cms: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(w.client().clone(), ns, &cm_ar());
        let o = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"app": "yes"}}}))
        .unwrap();
        cms.create(&Default::default(), &o).await.unwrap();
        let secrets: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(w.client().clone(), ns, &secret_ar);
        let o = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "labels": {"app": "yes"}}}))
        .unwrap();
        secrets.create(&Default::default(), &o).await.unwrap();
    }
    let parents: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(w.client().clone(), &parent_ar("Csched"));
    let p = serde_json::from_value(
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Csched",
        "metadata": {"name": "global"}, "spec": {"selector": {"matchLabels": {"app": "yes"}}}}),
    )
    .unwrap();
    parents.create(&Default::default(), &p).await.unwrap();
    let url = w.hook.url("map");
    let d = def(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "MapController",
        "metadata": {"name": "global"},
        "spec": {
            "parentResource": {"apiVersion": format!("{GROUP}/v1"), "resource": "cscheds"},
            "inputResources": [{"apiVersion": "v1", "resource": "configmaps"},
                {"apiVersion": "v1", "resource": "secrets"}],
            "outputResources": snap_outputs(),
            "hooks": {"map": {"webhook": {"url": url}}},
        }
    }));
    let run = Running::start(w.client(), vec![d]).await;
    run.converge().await;
    let snaps: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(w.client().clone(), &snap_ar());
    let mut got: Vec<String> = snaps
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o.metadata.namespace.as_deref().unwrap_or(""),
                o.metadata.name.as_deref().unwrap_or("")
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "default/configmap-c",
            "default/secret-s",
            "team-b/configmap-c",
            "team-b/secret-s"
        ]
    );
    assert_eq!(w.hook.calls_of("map").len(), 4);
    let parent = wait_for("status of the cluster-scoped parent", TIMEOUT, || {
        let parents = parents.clone();
        async move {
            let p = serde_json::to_value(parents.get("global").await.ok()?).ok()?;
            (p["status"]["outputs"]["snaps"]["total"] == 4).then_some(p)
        }
    })
    .await;
    assert_eq!(parent["status"]["inputs"]["configmaps"]["total"], 2);
    assert_eq!(parent["status"]["inputs"]["secrets"]["total"], 2);

    // A forced resync re-maps every key; the outputs map of a cluster-scoped parent (v1) keys
    // namespaced outputs by namespace/name.
    w.hook.clear();
    run.engine.resync(None, None);
    run.converge().await;
    let calls = w.hook.calls_of("map");
    assert_eq!(calls.len(), 4, "a resync calls the hook once per key");
    let c = calls
        .iter()
        .find(|c| {
            c.request["input"]["metadata"]["namespace"] == "team-b"
                && c.request["input"]["kind"] == "Secret"
        })
        .expect("call for team-b/s");
    assert!(
        c.request["outputs"][format!("Snap.{GROUP}/v1")]["team-b/secret-s"].is_object(),
        "{:#}",
        c.request["outputs"]
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_hook_re_maps_every_key_and_replay_compares_each_answer() {
    let (w, run) = converged_snapper(&["a", "b"]).await;

    // The new hook version writes a marker: replay shows it per key, the reload applies it.
    w.hook.set(sync_fn(|req| {
        let mut r = snap_for(req);
        r["outputs"][0]["spec"]["marker"] = json!("v2");
        r
    }));
    let replays = run.engine.replay(&["snapper".to_string()]).await;
    assert_eq!(replays.len(), 2, "{replays:?}");
    for r in &replays {
        let EngineEvent::Replay {
            subject: EventParent { parent, map_key },
            hook,
            changes,
            error,
            ..
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(hook, "map");
        // The map key is a field of its own, never glued into the parent.
        assert_eq!(parent, "default/s");
        assert!(
            map_key
                .as_deref()
                .is_some_and(|k| k.starts_with("configmap-")),
            "{map_key:?}"
        );
        assert_eq!(error, &None);
        assert!(
            changes.iter().any(|c| c.path.contains("marker")),
            "{changes:?}"
        );
    }
    assert_eq!(w.names(&snap_ar()).await, ["s-a", "s-b"]);
    w.hook.clear();
    run.engine.hook_reloaded(&["snapper".to_string()]);
    for n in ["s-a", "s-b"] {
        w.wait_object(&snap_ar(), n, "the marker", |o| {
            o.is_some_and(|o| o["spec"]["marker"] == "v2")
        })
        .await;
    }
    run.converge().await;
    assert_eq!(map_inputs(&w), ["a", "b"], "one call per key");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_map_syncs_show_their_plan_and_write_nothing_until_resumed() {
    let w = world(sync_fn(snap_for)).await;
    w.create(&cm_ar(), input("a", "yes", "1")).await;
    w.create(
        &sched_ar(),
        sched("s", json!({"matchLabels": {"app": "yes"}})),
    )
    .await;
    let run = start_snapper(&w).await;
    run.converge().await;
    let before = versions(&w.objects(&snap_ar()).await);

    run.engine.set_paused(true);
    w.patch(&cm_ar(), "a", json!({"data": {"v": "2"}})).await;
    w.create(&cm_ar(), input("b", "yes", "1")).await;
    let held = wait_for("held plans for both keys", TIMEOUT, || {
        let held: Vec<String> = run
            .events()
            .into_iter()
            .filter_map(|e| match e {
                EngineEvent::PlanHeld { actions, .. } => Some(
                    actions
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                _ => None,
            })
            .collect();
        let both = held
            .iter()
            .any(|a| a.contains("update") && a.contains("s-a"))
            && held
                .iter()
                .any(|a| a.contains("create") && a.contains("s-b"));
        async move { both.then_some(held) }
    })
    .await;
    assert!(!held.is_empty());
    assert_eq!(versions(&w.objects(&snap_ar()).await), before, "{held:?}");

    run.engine.set_paused(false);
    w.wait_names(&snap_ar(), &["s-a", "s-b"]).await;
    w.wait_object(&snap_ar(), "s-a", "s-a to follow", |o| {
        o.is_some_and(|o| o["spec"]["v"] == "2")
    })
    .await;
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_answers_and_a_bad_selector_fail_clearly_and_delete_nothing() {
    // The tombstone hook "keeps" an output that is not one of the key's: an error.
    let handler: Handler = Arc::new(|hook, req| {
        if hook == "tombstone" {
            Reply::json(
                json!({"outputs": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Snap",
                "metadata": {"name": "not-ours"}}]}),
            )
        } else {
            Reply::json(snap_for(req))
        }
    });
    let w = world(handler).await;
    for n in ["a", "b"] {
        w.create(&cm_ar(), input(n, "yes", "1")).await;
    }
    w.create(
        &sched_ar(),
        sched("s", json!({"matchLabels": {"app": "yes"}})),
    )
    .await;
    let (m, t) = (w.hook.url("map"), w.hook.url("tombstone"));
    let run = Running::start(
        w.client(),
        vec![map_def(
            snap_outputs(),
            json!({"map": {"webhook": {"url": m}}, "tombstone": {"webhook": {"url": t}}}),
            json!({}),
        )],
    )
    .await;
    run.converge().await;
    w.delete(&cm_ar(), "a").await;
    let e = wait_for("the tombstone answer to be refused", TIMEOUT, || {
        let hit = run
            .failed_syncs()
            .into_iter()
            .find(|(p, e)| {
                p.starts_with("default/s configmap-a-") && e.contains("not a detached output")
            })
            .map(|(_, e)| e);
        async move { hit }
    })
    .await;
    assert!(e.contains("can only keep existing outputs"), "{e}");
    assert_eq!(w.names(&snap_ar()).await, ["s-a", "s-b"], "nothing deleted");

    // An invalid spec.selector: the parent's sync fails with the reason; nothing is deleted.
    w.patch(
        &sched_ar(),
        "s",
        json!({"spec": {"selector": {"matchLabels": {"app": 3}}}}),
    )
    .await;
    let st = wait_status(&w, "s", "Synced False for the selector", |s| {
        s["conditions"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["type"] == "Synced"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("spec.selector is invalid"))
            })
        })
    })
    .await;
    assert_eq!(condition(&st, "Synced").unwrap()["status"], "False");
    assert_eq!(w.names(&snap_ar()).await, ["s-a", "s-b"], "nothing deleted");
    run.stop().await;
}
