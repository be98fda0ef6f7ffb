//! CompositeController hooks end to end: failure modes (timeout, HTTP 500, bad JSON, undeclared
//! child kind, selector mismatch) change nothing and record SyncError events; 429 is retried
//! after Retry-After without an error event; v1/v2 keys and decoding; customize and related
//! objects; finalize with ordered teardown; exec hooks as real processes; resyncAfterSeconds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::engine::*;
use crate::common::{TIMEOUT, wait_for};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent, Trigger};
use serde_json::{Value, json};

fn cm_ar() -> ApiResource {
    core_ar("ConfigMap", "configmaps")
}

/// A ConfigMap child labelled `app: <app>` with `data.value`.
fn labelled(name: &str, app: &str, value: &str) -> Value {
    let mut c = configmap(name, json!({"value": value}));
    c["metadata"]["labels"] = json!({"app": app});
    c
}

/// Good sync: children `<parent>-a` and `<parent>-b` (labels `app: <parent>`), data.value from
/// the parent's spec.value.
fn two_children(req: &Value) -> Value {
    let p = &req["parent"];
    let name = p["metadata"]["name"].as_str().unwrap();
    let value = p["spec"]["value"].as_str().unwrap_or("v1");
    json!({
        "status": {"seen": req["children"]["ConfigMap.v1"].as_object().map_or(0, |m| m.len())},
        "children": [labelled(&format!("{name}-a"), name, value), labelled(&format!("{name}-b"), name, value)],
    })
}

fn in_place_configmaps() -> Value {
    json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}])
}

/// Names of the observed children of type `ty` in a hook request, sorted.
fn observed_names(req: &Value, ty: &str) -> Vec<String> {
    let mut v: Vec<String> = req["children"][ty]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Wait until `n` syncs of `parent` failed (since the last `clear_events`).
async fn wait_failures(engine: &Running, parent: &str, n: usize) {
    wait_for(&format!("{n} failed syncs of {parent}"), TIMEOUT, || {
        let got = engine
            .failed_syncs()
            .iter()
            .filter(|(p, _)| p == parent)
            .count();
        async move { (got >= n).then_some(()) }
    })
    .await;
}

/// Wait for a Warning `SyncError` Event on `name` whose message contains `text`; returns
/// `(type, message)`.
async fn wait_sync_error_event(client: &kube::Client, name: &str, text: &str) -> (String, String) {
    wait_for(
        &format!("a SyncError event on {name} mentioning {text:?}"),
        TIMEOUT,
        move || {
            let client = client.clone();
            async move {
                k8s_events_typed(&client, name)
                    .await
                    .into_iter()
                    .find(|(_, reason, msg, _)| reason == "SyncError" && msg.contains(text))
                    .map(|(ty, _, msg, _)| (ty, msg))
            }
        },
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// 1. Hook failure modes: nothing is deleted or changed, a SyncError event is recorded, recovery.
// ---------------------------------------------------------------------------------------------

/// Start from a parent whose children the good hook created, switch to `bad`, change the parent
/// and check: the sync fails mentioning every word of `expect`, it is retried, a Warning
/// SyncError event is recorded, no child or status changes; then the good hook recovers.
async fn failing_hook_changes_nothing(bad: Handler, timeout: &str, expect: &[&str]) {
    let w = World::new("Parent", sync_fn(two_children)).await;
    let d = def(composite(
        "failing",
        "Parent",
        in_place_configmaps(),
        json!({"sync": {"webhook": {"url": w.hook.url("sync"), "timeout": timeout}}}),
    ));
    let engine = Running::start(w.client(), vec![d]).await;
    let par = parent_ar("Parent");
    w.create(
        &par,
        json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}, "value": "v1"}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["p-a", "p-b"]).await;
    engine.converge().await;
    let before = versions(&w.objects(&cm_ar()).await);
    let status_before = w.get(&par, "p").await.unwrap()["status"].clone();
    assert_eq!(status_before["seen"], json!(2), "{status_before}");

    w.hook.set(bad);
    engine.clear_events();
    w.patch(&par, "p", json!({"spec": {"value": "v2"}})).await;
    let err = engine.wait_sync_error("default/p", expect[0]).await;
    for word in expect {
        assert!(
            err.contains(word),
            "sync error should mention {word:?}: {err}"
        );
    }
    // Retried (with backoff), still failing.
    wait_failures(&engine, "default/p", 2).await;
    let (ty, msg) = wait_sync_error_event(w.client(), "p", expect[0]).await;
    assert_eq!(ty, "Warning");
    for word in expect {
        assert!(msg.contains(word), "event should mention {word:?}: {msg}");
    }

    // Nothing was written: same children (uid and resourceVersion), same status.
    assert_eq!(versions(&w.objects(&cm_ar()).await), before);
    assert_eq!(
        engine.writes(),
        Vec::<(ActionVerb, String)>::new(),
        "no write after a failed hook"
    );
    let parent = w.get(&par, "p").await.unwrap();
    assert_eq!(parent["status"], status_before);
    for c in w.objects(&cm_ar()).await.values() {
        assert_eq!(c["data"]["value"], json!("v1"), "{c}");
    }

    // The good hook again: the pending change goes through, in place.
    w.hook.set(sync_fn(two_children));
    for n in ["p-a", "p-b"] {
        w.wait_object(&cm_ar(), n, &format!("{n} updated to v2"), |o| {
            o.is_some_and(|o| o["data"]["value"] == json!("v2"))
        })
        .await;
    }
    engine.converge().await;
    let after = versions(&w.objects(&cm_ar()).await);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (n, (uid, _)) in &before {
        assert_eq!(&after[n].0, uid, "{n} was updated in place");
    }
    let parent = w.get(&par, "p").await.unwrap();
    assert_eq!(parent["status"]["observedGeneration"], json!(2));
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_timeout_is_a_sync_error_and_changes_nothing() {
    let slow: Handler = Arc::new(|_, req| {
        let mut r = Reply::json(two_children(req));
        r.delay = Duration::from_secs(3);
        r
    });
    failing_hook_changes_nothing(
        slow,
        "1s",
        &["did not answer within 1s", "webhook.timeout", "sync hook"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_http_500_is_a_sync_error_and_changes_nothing() {
    let broken: Handler = Arc::new(|_, _| Reply::status(500, "boom: database down"));
    failing_hook_changes_nothing(broken, "10s", &["answered HTTP 500", "boom: database down"])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_invalid_json_is_a_sync_error_and_changes_nothing() {
    let garbage: Handler = Arc::new(|_, _| Reply::status(200, "this is not json {"));
    failing_hook_changes_nothing(
        garbage,
        "10s",
        &["did not answer with a JSON object", "this is not json"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_child_kind_is_a_sync_error_and_changes_nothing() {
    // Also drops p-b and changes p-a: neither may happen.
    let undeclared = sync_fn(|req| {
        let name = req["parent"]["metadata"]["name"].as_str().unwrap();
        let mut secret = labelled("sneaky", name, "x");
        secret["kind"] = json!("Secret");
        json!({"children": [labelled(&format!("{name}-a"), name, "changed"), secret]})
    });
    failing_hook_changes_nothing(
        undeclared,
        "10s",
        &["does not declare that child resource", "Secret", "sneaky"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_outside_the_selector_is_a_sync_error_and_changes_nothing() {
    let mismatch = sync_fn(|req| {
        let name = req["parent"]["metadata"]["name"].as_str().unwrap();
        json!({"children": [
            labelled(&format!("{name}-a"), name, "changed"),
            labelled(&format!("{name}-c"), "someone-else", "x"),
        ]})
    });
    failing_hook_changes_nothing(
        mismatch,
        "10s",
        &["do not match the parent's selector", "p-c"],
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 2. 429 Too Many Requests.
// ---------------------------------------------------------------------------------------------

/// A handler answering 429 (with `retry_after` as Retry-After, if any) to the first `n` calls,
/// then `two_children`; it records when each call arrived.
fn busy_then_ok(n: usize, retry_after: Option<&str>) -> (Handler, Arc<Mutex<Vec<Instant>>>) {
    let times = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&times);
    let retry_after = retry_after.map(str::to_string);
    let h: Handler = Arc::new(move |_, req| {
        let mut t = log.lock().unwrap();
        t.push(Instant::now());
        if t.len() <= n {
            let mut r = Reply::status(429, "slow down");
            if let Some(ra) = &retry_after {
                r.headers.push(("Retry-After".into(), ra.clone()));
            }
            r
        } else {
            Reply::json(two_children(req))
        }
    });
    (h, times)
}

fn plain_controller(hook: &HookServer) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        "plain",
        "Parent",
        in_place_configmaps(),
        json!({"sync": {"webhook": {"url": hook.url("sync")}}}),
    ))
}

fn parent_p() -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}, "value": "v1"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_waits_for_retry_after_and_records_no_error() {
    let (h, times) = busy_then_ok(2, Some("1"));
    let w = World::new("Parent", h).await;
    let engine = Running::start(w.client(), vec![plain_controller(&w.hook)]).await;
    w.create(&parent_ar("Parent"), parent_p()).await;
    w.wait_names(&cm_ar(), &["p-a", "p-b"]).await;
    engine.converge().await;

    let t = times.lock().unwrap().clone();
    assert!(t.len() >= 3, "two 429s then success: {} calls", t.len());
    for i in 1..3 {
        let gap = t[i] - t[i - 1];
        assert!(
            gap >= Duration::from_millis(990),
            "call {i} came {gap:?} after the previous one; Retry-After asked for 1s"
        );
    }
    // The engine reported the 429s as retries after 1s, not as sync errors.
    let retries: Vec<Option<f64>> = engine
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::SyncFinished {
                error: Some(err),
                retry_in,
                ..
            } => {
                assert!(err.contains("429"), "{err}");
                Some(retry_in)
            }
            _ => None,
        })
        .collect();
    assert_eq!(retries, vec![Some(1.0), Some(1.0)]);
    let events = k8s_events_typed(w.client(), "p").await;
    assert!(
        events.iter().all(|(_, reason, _, _)| reason != "SyncError"),
        "429 is not a sync error: {events:?}"
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_without_retry_after_backs_off_without_hot_loop() {
    let (h, times) = busy_then_ok(usize::MAX, None);
    let w = World::new("Parent", h).await;
    let engine = Running::start(w.client(), vec![plain_controller(&w.hook)]).await;
    w.create(&parent_ar("Parent"), parent_p()).await;
    // Retried at all.
    let t0 = wait_for("two hook calls", TIMEOUT, || {
        let t = times.lock().unwrap().clone();
        async move { (t.len() >= 2).then(|| t[0]) }
    })
    .await;
    // Count the calls in the first two seconds (measuring a window, not waiting for a state).
    tokio::time::sleep_until((t0 + Duration::from_secs(2)).into()).await;
    let t = times.lock().unwrap().clone();
    let in_window = t
        .iter()
        .filter(|x| **x - t0 <= Duration::from_secs(2))
        .count();
    assert!(
        (2..20).contains(&in_window),
        "{in_window} calls in 2s: retried, but no hot loop"
    );
    for pair in t.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(100),
            "retries {gap:?} apart: a backoff was expected"
        );
    }
    assert!(engine.writes().is_empty(), "nothing written while 429");
    let events = k8s_events_typed(w.client(), "p").await;
    assert!(
        events.iter().all(|(_, reason, _, _)| reason != "SyncError"),
        "429 is not a sync error: {events:?}"
    );
    // The hook becomes available: the retries reach it.
    w.hook.set(sync_fn(two_children));
    w.wait_names(&cm_ar(), &["p-a", "p-b"]).await;
    engine.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Hook versions: keys of the observed maps, strict v2 decoding.
// ---------------------------------------------------------------------------------------------

/// Children for any parent: cluster-scoped parents get `<name>` in namespaces ns-a and ns-b,
/// namespaced ones `<name>-child` in their own. `spec.extra: true` adds an unknown top-level
/// field to the answer.
fn versioned(req: &Value) -> Value {
    let p = &req["parent"];
    let name = p["metadata"]["name"].as_str().unwrap();
    let value = p["spec"]["value"].as_str().unwrap_or("v1");
    let children: Vec<Value> = if p["metadata"]["namespace"].is_string() {
        vec![labelled(&format!("{name}-child"), name, value)]
    } else {
        ["ns-a", "ns-b"]
            .iter()
            .map(|ns| {
                let mut c = labelled(name, name, value);
                c["metadata"]["namespace"] = json!(ns);
                c
            })
            .collect()
    };
    let mut resp = json!({"children": children});
    if p["spec"]["extra"] == json!(true) {
        resp["unexpected"] = json!(true);
    }
    resp
}

fn versioned_controller(
    hook: &HookServer,
    name: &str,
    kind: &str,
    version: &str,
) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        name,
        kind,
        json!([
            {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}},
            {"apiVersion": "v1", "resource": "secrets"},
        ]),
        json!({"sync": {"webhook": {"url": hook.url(name)}, "version": version}}),
    ))
}

/// `namespace/name` of every ConfigMap in the cluster named `name`, with its data.value.
async fn configmaps_named(client: &kube::Client, name: &str) -> BTreeMap<String, String> {
    Api::<DynamicObject>::all_with(client.clone(), &cm_ar())
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter(|o| o.metadata.name.as_deref() == Some(name))
        .map(|o| {
            (
                format!(
                    "{}/{name}",
                    o.metadata.namespace.clone().unwrap_or_default()
                ),
                o.data["data"]["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Wait until the last request of `hook` observed `n` ConfigMaps; returns that request.
async fn wait_observed(w: &World, hook: &str, n: usize) -> Value {
    let server = w.hook.clone();
    wait_for(
        &format!("hook {hook} to observe {n} ConfigMaps"),
        TIMEOUT,
        move || {
            let last = server.calls_of(hook).last().map(|c| c.request.clone());
            async move {
                last.filter(|r| {
                    r["children"]["ConfigMap.v1"]
                        .as_object()
                        .is_some_and(|m| m.len() == n)
                })
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_versions_key_observed_objects_and_decode_answers() {
    let w = World::new("Parent", sync_fn(versioned)).await;
    let client = w.client().clone();
    install_crd(&client, "ParentTwo", true).await;
    install_crd(&client, "ClusterOne", false).await;
    install_crd(&client, "ClusterTwo", false).await;
    create_namespace(&client, "ns-a").await;
    create_namespace(&client, "ns-b").await;
    let engine = Running::start(
        &client,
        vec![
            versioned_controller(&w.hook, "v1-cluster", "ClusterOne", "v1"),
            versioned_controller(&w.hook, "v2-cluster", "ClusterTwo", "v2"),
            versioned_controller(&w.hook, "v1-ns", "Parent", "v1"),
            versioned_controller(&w.hook, "v2-ns", "ParentTwo", "v2"),
        ],
    )
    .await;
    let spec = |app: &str| json!({"selector": {"matchLabels": {"app": app}}, "value": "v1"});
    for (kind, name) in [("ClusterOne", "c1"), ("ClusterTwo", "c2")] {
        let ar = parent_ar(kind);
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": ar.api_version, "kind": kind,
            "metadata": {"name": name}, "spec": spec(name),
        }))
        .unwrap();
        Api::<DynamicObject>::all_with(client.clone(), &ar)
            .create(&PostParams::default(), &o)
            .await
            .unwrap();
    }
    w.create(
        &parent_ar("Parent"),
        json!({"metadata": {"name": "n1"}, "spec": spec("n1")}),
    )
    .await;
    w.create(
        &parent_ar("ParentTwo"),
        json!({"metadata": {"name": "n2"}, "spec": spec("n2")}),
    )
    .await;

    let c1 = wait_observed(&w, "v1-cluster", 2).await;
    let c2 = wait_observed(&w, "v2-cluster", 2).await;
    let n1 = wait_observed(&w, "v1-ns", 1).await;
    let n2 = wait_observed(&w, "v2-ns", 1).await;
    // v1, cluster-scoped parent: namespace/name for namespaced children.
    assert_eq!(
        observed_names(&c1, "ConfigMap.v1"),
        vec!["ns-a/c1", "ns-b/c1"]
    );
    // v2: namespace/name for every namespaced object, whatever the parent's scope.
    assert_eq!(
        observed_names(&c2, "ConfigMap.v1"),
        vec!["ns-a/c2", "ns-b/c2"]
    );
    assert_eq!(
        observed_names(&n2, "ConfigMap.v1"),
        vec!["default/n2-child"]
    );
    // v1, namespaced parent: plain names.
    assert_eq!(observed_names(&n1, "ConfigMap.v1"), vec!["n1-child"]);
    // The object under each key is the child itself.
    assert_eq!(
        c1["children"]["ConfigMap.v1"]["ns-b/c1"]["metadata"]["namespace"],
        json!("ns-b")
    );
    // Every declared type is present, even when empty, from the very first call.
    for (hook, req) in [
        ("v1-cluster", &c1),
        ("v2-cluster", &c2),
        ("v1-ns", &n1),
        ("v2-ns", &n2),
    ] {
        assert_eq!(req["children"]["Secret.v1"], json!({}), "{hook}");
        let first = &w.hook.calls_of(hook)[0].request;
        assert_eq!(
            first["children"],
            json!({"ConfigMap.v1": {}, "Secret.v1": {}}),
            "{hook}: first request"
        );
        assert_eq!(first["finalizing"], json!(false));
    }
    engine.converge().await;

    // An unknown top-level field in the answer: v1 ignores it, v2 rejects it.
    engine.clear_events();
    let change = json!({"spec": {"value": "v2", "extra": true}});
    for (kind, name) in [("ClusterOne", "c1"), ("ClusterTwo", "c2")] {
        Api::<DynamicObject>::all_with(client.clone(), &parent_ar(kind))
            .patch(name, &PatchParams::default(), &Patch::Merge(&change))
            .await
            .unwrap();
    }
    w.patch(&parent_ar("Parent"), "n1", change.clone()).await;
    w.patch(&parent_ar("ParentTwo"), "n2", change.clone()).await;
    let e = engine.wait_sync_error("c2", "unknown field").await;
    assert!(e.contains("unexpected"), "{e}");
    let e = engine.wait_sync_error("default/n2", "unknown field").await;
    assert!(e.contains("unexpected"), "{e}");
    wait_sync_error_event(&client, "c2", "unexpected").await;
    wait_for("v1 children updated to v2", TIMEOUT, || {
        let client = client.clone();
        async move {
            let c1 = configmaps_named(&client, "c1").await;
            let n1 = configmaps_named(&client, "n1-child").await;
            let want_c1: BTreeMap<String, String> = [
                ("ns-a/c1".to_string(), "v2".to_string()),
                ("ns-b/c1".to_string(), "v2".to_string()),
            ]
            .into();
            (c1 == want_c1 && n1.get("default/n1-child").map(String::as_str) == Some("v2"))
                .then_some(())
        }
    })
    .await;
    wait_failures(&engine, "c2", 2).await;
    wait_failures(&engine, "default/n2", 2).await;
    // The v2 controllers changed nothing.
    let c2 = configmaps_named(&client, "c2").await;
    assert_eq!(c2.values().collect::<Vec<_>>(), vec!["v1", "v1"], "{c2:?}");
    let n2 = configmaps_named(&client, "n2-child").await;
    assert_eq!(n2["default/n2-child"], "v1");
    assert!(
        engine
            .failed_syncs()
            .iter()
            .all(|(p, _)| p == "c2" || p == "default/n2"),
        "v1 hooks tolerate unknown fields: {:?}",
        engine.failed_syncs()
    );
    engine.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Customize and related objects.
// ---------------------------------------------------------------------------------------------

/// customize: ConfigMaps labelled `role: <spec.role>`, plus `named-1` by name.
/// sync: one child `<parent>-copy` whose data.seen lists `key=data.k` of every related object.
fn related_hooks(hook: &str, req: &Value) -> Reply {
    let p = &req["parent"];
    if hook == "customize" {
        return Reply::json(json!({"relatedResources": [
            {"apiVersion": "v1", "resource": "configmaps",
             "labelSelector": {"matchLabels": {"role": p["spec"]["role"]}}},
            {"apiVersion": "v1", "resource": "configmaps", "names": ["named-1"]},
        ]}));
    }
    let name = p["metadata"]["name"].as_str().unwrap();
    let mut child = labelled(&format!("{name}-copy"), name, "x");
    child["data"]["seen"] = json!(related_seen(req));
    Reply::json(json!({"children": [child]}))
}

fn related_controller(hook: &HookServer) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        "related",
        "Parent",
        in_place_configmaps(),
        json!({
            "sync": {"webhook": {"url": hook.url("sync")}},
            "customize": {"webhook": {"url": hook.url("customize")}},
        }),
    ))
}

/// A ConfigMap (not a child) with optional `role` label and data.k.
fn source(name: &str, role: Option<&str>, k: &str) -> Value {
    let mut c = json!({"metadata": {"name": name}, "data": {"k": k}});
    if let Some(r) = role {
        c["metadata"]["labels"] = json!({"role": r});
    }
    c
}

/// Wait until child `p-copy` shows `data.seen == want`; on timeout, say what it showed and
/// which syncs failed.
async fn wait_seen(w: &World, engine: &Running, want: &str) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let got = w
            .get(&cm_ar(), "p-copy")
            .await
            .map(|o| o["data"]["seen"].clone());
        if got == Some(json!(want)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "p-copy should see {want:?}; it shows {got:?}; failed syncs: {:?}",
            engine.failed_syncs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customize_related_objects_reach_the_sync_hook_and_retrigger_it() {
    let w = World::new("Parent", Arc::new(related_hooks)).await;
    let client = w.client().clone();
    let cm = cm_ar();
    w.create(&cm, source("src-1", Some("a"), "1")).await;
    w.create(&cm, source("named-1", None, "n")).await;
    w.create(&cm, source("unrelated", Some("zzz"), "z")).await;
    // Same label in another namespace: a v1 hook of a namespaced parent never sees it.
    create_namespace(&client, "elsewhere").await;
    let far: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "far", "namespace": "elsewhere", "labels": {"role": "a"}},
        "data": {"k": "far"},
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), "elsewhere", &cm)
        .create(&PostParams::default(), &far)
        .await
        .unwrap();

    let engine = Running::start(&client, vec![related_controller(&w.hook)]).await;
    let par = parent_ar("Parent");
    w.create(
        &par,
        json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}, "role": "a"}}),
    )
    .await;
    // Both rules (selector and names) of the same resource are in the one related map.
    wait_seen(&w, &engine, "named-1=n,src-1=1").await;
    engine.converge().await;
    let customize = w.hook.calls_of("customize");
    assert_eq!(customize.len(), 1, "customize is asked once per generation");
    assert_eq!(
        customize[0].request["parent"]["metadata"]["name"],
        json!("p")
    );
    assert!(customize[0].request["controller"].is_object());
    let last = w.hook.calls_of("sync").last().unwrap().request.clone();
    let related = &last["related"]["ConfigMap.v1"];
    let mut keys: Vec<&String> = related.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, vec!["named-1", "src-1"], "{related}");
    assert_eq!(related["src-1"]["data"]["k"], json!("1"));

    // A new related object re-triggers the sync.
    w.create(&cm, source("src-2", Some("a"), "2")).await;
    wait_seen(&w, &engine, "named-1=n,src-1=1,src-2=2").await;
    // A changed one too (the named rule).
    w.patch(&cm, "named-1", json!({"data": {"k": "n2"}})).await;
    wait_seen(&w, &engine, "named-1=n2,src-1=1,src-2=2").await;
    // A related object that stops matching re-triggers it as well.
    w.patch(
        &cm,
        "src-1",
        json!({"metadata": {"labels": {"role": "other"}}}),
    )
    .await;
    wait_seen(&w, &engine, "named-1=n2,src-2=2").await;
    engine.converge().await;
    assert_eq!(
        w.hook.calls_of("customize").len(),
        1,
        "related changes do not re-ask customize"
    );

    // A new generation re-asks customize, and its answer is used.
    w.create(&cm, source("src-b", Some("b"), "B")).await;
    w.patch(&par, "p", json!({"spec": {"role": "b"}})).await;
    wait_seen(&w, &engine, "named-1=n2,src-b=B").await;
    engine.converge().await;
    let customize = w.hook.calls_of("customize");
    assert_eq!(customize.len(), 2, "customize re-asked for generation 2");
    assert_eq!(customize[1].request["parent"]["spec"]["role"], json!("b"));
    assert_eq!(
        customize[1].request["parent"]["metadata"]["generation"],
        json!(2)
    );
    // Never the other namespace's object, and the sources are not adopted.
    for c in w.hook.calls_of("sync") {
        let keys: Vec<&String> = c.request["related"]["ConfigMap.v1"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert!(!keys.iter().any(|k| k.contains("far")), "{keys:?}");
    }
    for n in ["src-1", "src-2", "named-1", "src-b"] {
        let o = w.get(&cm, n).await.unwrap();
        assert_eq!(controller_ref(&o), None, "{n} is related, not a child");
    }
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customize_with_names_and_label_selector_is_a_sync_error() {
    let h: Handler = Arc::new(|hook, req| {
        if hook == "customize" {
            Reply::json(
                json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps",
                "names": ["x"], "labelSelector": {"matchLabels": {"role": "a"}}}]}),
            )
        } else {
            Reply::json(two_children(req))
        }
    });
    let w = World::new("Parent", h).await;
    let engine = Running::start(w.client(), vec![related_controller(&w.hook)]).await;
    w.create(&parent_ar("Parent"), parent_p()).await;
    let err = engine
        .wait_sync_error("default/p", "names cannot be combined with labelSelector")
        .await;
    assert!(err.contains("customize"), "{err}");
    wait_failures(&engine, "default/p", 2).await;
    let (ty, _) = wait_sync_error_event(w.client(), "p", "names cannot be combined").await;
    assert_eq!(ty, "Warning");
    assert!(
        w.hook.calls_of("customize").len() >= 2,
        "customize is asked again on retry"
    );
    assert!(
        w.hook.calls_of("sync").is_empty(),
        "no sync without related objects"
    );
    assert!(w.names(&cm_ar()).await.is_empty());
    engine.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Finalize: ordered teardown.
// ---------------------------------------------------------------------------------------------

/// sync: children p-a, p-b, p-c. finalize: keep all observed children but the last one (by
/// name); finalized once nothing is observed.
fn teardown(hook: &str, req: &Value) -> Reply {
    let name = req["parent"]["metadata"]["name"].as_str().unwrap();
    if hook == "sync" {
        let kids: Vec<Value> = ["a", "b", "c"]
            .iter()
            .map(|s| labelled(&format!("{name}-{s}"), name, "v"))
            .collect();
        return Reply::json(json!({"children": kids}));
    }
    let mut observed = observed_names(req, "ConfigMap.v1");
    let finalized = observed.is_empty();
    observed.pop();
    let kids: Vec<Value> = observed.iter().map(|n| labelled(n, name, "v")).collect();
    Reply::json(json!({"children": kids, "finalized": finalized}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalize_tears_children_down_in_order_then_releases_the_parent() {
    let w = World::new("Parent", Arc::new(teardown)).await;
    let d = def(composite(
        "teardown",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({
            "sync": {"webhook": {"url": w.hook.url("sync")}},
            "finalize": {"webhook": {"url": w.hook.url("finalize")}},
        }),
    ));
    let engine = Running::start(w.client(), vec![d]).await;
    let par = parent_ar("Parent");
    w.create(&par, parent_p()).await;
    w.wait_names(&cm_ar(), &["p-a", "p-b", "p-c"]).await;
    let finalizer = "metacontroller.io/compositecontroller-teardown";
    w.wait_object(&par, "p", "the finalizer on p", |o| {
        o.is_some_and(|o| o["metadata"]["finalizers"] == json!([finalizer]))
    })
    .await;
    engine.converge().await;
    assert!(w.hook.calls_of("finalize").is_empty());
    assert!(
        w.hook
            .calls_of("sync")
            .iter()
            .all(|c| c.request["finalizing"] == json!(false))
    );

    engine.clear_events();
    w.delete(&par, "p").await;
    // Watch the children vanish until the parent is gone.
    let mut snapshots: Vec<Vec<String>> = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let names = w.names(&cm_ar()).await;
        if snapshots.last() != Some(&names) {
            snapshots.push(names);
        }
        if w.get(&par, "p").await.is_none() {
            // The last children may have gone (and the finalizer with them) between the two
            // reads above: look once more now that the parent is gone.
            let names = w.names(&cm_ar()).await;
            if snapshots.last() != Some(&names) {
                snapshots.push(names);
            }
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "parent not gone; children seen: {snapshots:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all = ["p-a", "p-b", "p-c"].map(String::from);
    for s in &snapshots {
        assert_eq!(
            s[..],
            all[..s.len()],
            "children vanish c, b, a: {snapshots:?}"
        );
    }
    assert_eq!(snapshots.last().unwrap(), &Vec::<String>::new());

    // What finalize observed, call after call: one child fewer each time.
    let calls = w.hook.calls_of("finalize");
    assert!(calls.iter().all(|c| c.request["finalizing"] == json!(true)));
    let mut observed: Vec<Vec<String>> = Vec::new();
    for c in &calls {
        let o = observed_names(&c.request, "ConfigMap.v1");
        if observed.last() != Some(&o) {
            observed.push(o);
        }
    }
    assert_eq!(
        observed,
        vec![
            vec!["p-a", "p-b", "p-c"],
            vec!["p-a", "p-b"],
            vec!["p-a"],
            vec![],
        ]
    );
    // (Deleting bumps the parent's generation: a status write with observedGeneration is fine.)
    let writes: Vec<(ActionVerb, String)> = engine
        .writes()
        .into_iter()
        .filter(|(v, _)| *v != ActionVerb::Status)
        .collect();
    assert_eq!(
        writes,
        vec![
            (ActionVerb::Delete, "default/p-c".to_string()),
            (ActionVerb::Delete, "default/p-b".to_string()),
            (ActionVerb::Delete, "default/p-a".to_string()),
            (ActionVerb::RemoveFinalizer, "default/p".to_string()),
        ]
    );
    engine.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Exec hooks: real processes.
// ---------------------------------------------------------------------------------------------

const EXEC_HOOK: &str = r#"
import json, os, subprocess, sys, time

req = json.load(sys.stdin)
p = req["parent"]
name = p["metadata"]["name"]
mode = p.get("spec", {}).get("mode", "ok")
here = os.path.dirname(os.path.abspath(__file__))
if mode == "fail":
    for i in range(30):
        print(f"noise-{i:02d}", file=sys.stderr)
    print("fatal: something broke", file=sys.stderr)
    sys.exit(1)
if mode == "garbage":
    print("hello, not json")
    sys.exit(0)
if mode == "sleep":
    sleeper = subprocess.Popen(["sleep", "60"])
    path = os.path.join(here, name + ".pids")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {sleeper.pid}")
        os.rename(path + ".tmp", path)
    time.sleep(60)
env = {k: os.environ.get(k, "") for k in
       ["KUBECTL_META_HOOK", "KUBECTL_META_CONTROLLER", "KUBECTL_META_CONTROLLER_KIND",
        "KUBECTL_META_PARENT", "GREETING"]}
print("a log line on stderr", file=sys.stderr)
child = {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": name + "-child", "labels": {"app": name}}, "data": env}
print(json.dumps({"children": [child], "status": {"mode": mode}}))
"#;

/// Is process `pid` gone (absent, or a zombie nobody reaps)?
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_hooks_run_real_processes_and_clean_up_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hook.py");
    std::fs::write(&script, EXEC_HOOK).unwrap();
    let w = World::new("Parent", always(json!({}))).await;
    let d = def(composite(
        "exec-hooks",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"exec": {
            "command": ["python3", script.to_str().unwrap()],
            "timeout": "2s",
            "env": {"GREETING": "hi"},
        }}}),
    ));
    let engine = Running::start(w.client(), vec![d]).await;
    let par = parent_ar("Parent");
    for (name, mode) in [
        ("p-ok", "ok"),
        ("p-fail", "fail"),
        ("p-garbage", "garbage"),
        ("p-sleep", "sleep"),
    ] {
        w.create(
            &par,
            json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}}, "mode": mode}}),
        )
        .await;
    }

    // Success: the child carries what the program saw in its environment.
    let child = w
        .wait_object(&cm_ar(), "p-ok-child", "the exec hook's child", |o| {
            o.is_some()
        })
        .await
        .unwrap();
    assert_eq!(
        child["data"],
        json!({
            "KUBECTL_META_HOOK": "sync",
            "KUBECTL_META_CONTROLLER": "exec-hooks",
            "KUBECTL_META_CONTROLLER_KIND": "CompositeController",
            "KUBECTL_META_PARENT": "default/p-ok",
            "GREETING": "hi",
        })
    );
    w.wait_object(&par, "p-ok", "p-ok status", |o| {
        o.is_some_and(|o| o["status"]["mode"] == json!("ok"))
    })
    .await;
    // The successful call's event carries the request, the answer and what the program
    // wrote to stderr.
    let ok_call = engine.events().into_iter().find_map(|e| match e {
        EngineEvent::HookCalled {
            subject,
            error: None,
            request,
            response,
            stderr,
            ..
        } if subject.parent == "default/p-ok" => Some((request, response, stderr)),
        _ => None,
    });
    let (request, response, stderr) = ok_call.expect("a successful call of p-ok");
    assert_eq!(
        request.expect("request")["parent"]["metadata"]["name"],
        "p-ok"
    );
    assert_eq!(response.expect("response")["status"]["mode"], "ok");
    assert_eq!(stderr.as_deref(), Some("a log line on stderr\n"));

    // Exit 1: the error names the exit code and quotes the tail of stderr.
    let e = engine
        .wait_sync_error("default/p-fail", "exit code 1")
        .await;
    assert!(e.contains("fatal: something broke"), "{e}");
    assert!(e.contains("noise-29"), "{e}");
    assert!(!e.contains("noise-05"), "only the tail of stderr: {e}");
    assert!(e.contains("python3"), "names the command: {e}");
    let (ty, _) = wait_sync_error_event(w.client(), "p-fail", "fatal: something broke").await;
    assert_eq!(ty, "Warning");

    // Not JSON on stdout.
    let e = engine
        .wait_sync_error("default/p-garbage", "did not answer with a JSON object")
        .await;
    assert!(e.contains("hello, not json"), "{e}");

    // Too slow: killed at the timeout, with everything it started.
    engine
        .wait_sync_error("default/p-sleep", "did not answer within 2s (exec.timeout)")
        .await;
    let pid_file = dir.path().join("p-sleep.pids");
    let pids: Vec<u32> = wait_for("the sleeping hook's pid file", TIMEOUT, || {
        let text = std::fs::read_to_string(&pid_file).ok();
        async move { text.map(|t| t.split_whitespace().map(|p| p.parse().unwrap()).collect()) }
    })
    .await;
    assert_eq!(pids.len(), 2);
    for pid in pids {
        wait_for(
            &format!("process {pid} (hook or its `sleep 60`) to be killed"),
            TIMEOUT,
            || async move { process_gone(pid).then_some(()) },
        )
        .await;
    }
    // None of these children appeared.
    assert_eq!(w.names(&cm_ar()).await, vec!["p-ok-child"]);
    engine.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 7. resyncAfterSeconds.
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_after_seconds_calls_the_hook_again_without_changes() {
    let w = World::new(
        "Parent",
        always(json!({"status": {"ok": true}, "children": [], "resyncAfterSeconds": 0.5})),
    )
    .await;
    let engine = Running::start(w.client(), vec![plain_controller(&w.hook)]).await;
    w.create(&parent_ar("Parent"), parent_p()).await;
    let server = w.hook.clone();
    wait_for("six sync calls", TIMEOUT, move || {
        let n = server.calls_of("sync").len();
        async move { (n >= 6).then_some(()) }
    })
    .await;
    let resyncs = engine
        .events()
        .into_iter()
        .filter(|e| {
            matches!(e, EngineEvent::SyncStarted { triggers, .. }
                if triggers.contains(&Trigger::ResyncAfter))
        })
        .count();
    assert!(
        resyncs >= 3,
        "{resyncs} syncs triggered by resyncAfterSeconds"
    );
    // Only the first status write; every later sync was a no-op resync.
    let writes = engine.writes();
    assert_eq!(
        writes,
        vec![(ActionVerb::Status, "default/p".to_string())],
        "nothing changed between resyncs"
    );
    assert!(
        w.hook
            .calls_of("sync")
            .iter()
            .all(|c| c.request["parent"]["metadata"]["generation"] == json!(1)),
        "the parent never changed"
    );
    engine.stop().await;
}
