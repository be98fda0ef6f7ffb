//! DecoratorController: labels/annotations merged into targets (null removes), label and
//! annotation selectors, attachments (controllerRef + decorator annotation, update strategies,
//! foreign objects never touched), status from the hook (`null` leaves it alone), built-in
//! targets, the finalize hook (delete and opt-out), failing hooks, v1/v2 attachment keys,
//! a restart that writes nothing, and paused mode holding the label merge with the plan.

use crate::common;

use crate::common::engine::*;

use crate::common::TIMEOUT;
use kube::discovery::ApiResource;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent};
use kubectl_meta::spec::ControllerDef;
use serde_json::{Value, json};

const ANNOTATION: &str = "metacontroller.k8s.io/decorator-controller";

fn cm_ar() -> ApiResource {
    core_ar("ConfigMap", "configmaps")
}

fn ns_ar() -> ApiResource {
    core_ar("Namespace", "namespaces")
}

/// A DecoratorController definition.
fn decorator(name: &str, resources: Value, attachments: Value, hooks: Value) -> ControllerDef {
    def(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
        "metadata": {"name": name},
        "spec": {"resources": resources, "attachments": attachments, "hooks": hooks}
    }))
}

/// Targets: `Parent` objects labelled `decorate: yes`.
fn parent_rule() -> Value {
    json!([{"apiVersion": format!("{GROUP}/v1"), "resource": "parents",
        "labelSelector": {"matchLabels": {"decorate": "yes"}}}])
}

/// The key of a Parent target in engine events (one target resource: `namespace/name`).
fn target_key(name: &str) -> String {
    format!("default/{name}")
}

/// Attachments from `object.spec.atts` (`[{name, value}]`), labels/annotations from
/// `object.spec.labels` / `object.spec.annotations` (given as is, nulls included), status from
/// `object.spec.status` (as is: null leaves it alone).
fn listed(req: &Value) -> Value {
    let o = &req["object"];
    let atts: Vec<Value> = o["spec"]["atts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|a| configmap(a["name"].as_str().unwrap(), json!({"value": a["value"]})))
        .collect();
    json!({
        "labels": o["spec"]["labels"],
        "annotations": o["spec"]["annotations"],
        "status": o["spec"]["status"],
        "attachments": atts,
    })
}

/// Names of the ConfigMaps in a request's attachments map, sorted.
fn seen(req: &Value) -> Vec<String> {
    let mut v: Vec<String> = req["attachments"]["ConfigMap.v1"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn uid_of(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_and_annotations_merge_with_null_removal_and_restart_writes_nothing() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let par = parent_ar("Parent");
    let cm = cm_ar();
    let mk = |w: &World| {
        decorator(
            "labeler",
            parent_rule(),
            json!([{"apiVersion": "v1", "resource": "configmaps"}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )
    };
    let engine = Running::start(w.client(), vec![mk(&w)]).await;
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"decorate": "yes", "remove-me": "1"},
            "annotations": {"keep": "k", "drop": "d"}},
            "spec": {"labels": {"added": "x", "remove-me": null, "never-there": null},
                "annotations": {"note": "hello", "drop": null},
                "atts": [{"name": "p-att", "value": "1"}]}}),
    )
    .await;
    // Not selected: never synced, never decorated.
    w.create(
        &par,
        json!({"metadata": {"name": "other", "labels": {"decorate": "no"}},
            "spec": {"labels": {"added": "x"}, "atts": [{"name": "other-att", "value": "1"}]}}),
    )
    .await;
    let p = w
        .wait_object(&par, "p", "p decorated", |o| {
            o.is_some_and(|o| o["metadata"]["labels"]["added"] == json!("x"))
        })
        .await
        .unwrap();
    w.wait_names(&cm, &["p-att"]).await;
    engine.converge().await;
    let p = w.get(&par, "p").await.unwrap_or(p);
    assert_eq!(
        p["metadata"]["labels"],
        json!({"decorate": "yes", "added": "x"})
    );
    assert_eq!(
        p["metadata"]["annotations"],
        json!({"keep": "k", "note": "hello"})
    );
    let att = w.get(&cm, "p-att").await.unwrap();
    assert_eq!(
        controller_ref(&att),
        Some(("Parent".into(), "p".into(), uid_of(&p)))
    );
    assert_eq!(att["metadata"]["annotations"][ANNOTATION], json!("labeler"));
    assert_eq!(
        att["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
        json!(true)
    );
    let other = w.get(&par, "other").await.unwrap();
    assert!(other["metadata"]["labels"]["added"].is_null());
    assert!(
        w.hook
            .calls_of("sync")
            .iter()
            .all(|c| c.parent_name() == "p")
    );
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;

    // A restart syncs the target again and writes nothing.
    let rv = w.global_rv().await;
    w.hook.clear();
    let engine = Running::start(w.client(), vec![mk(&w)]).await;
    engine.converge().await;
    assert!(
        w.hook
            .calls_of("sync")
            .iter()
            .any(|c| c.parent_name() == "p")
    );
    assert_eq!(engine.writes(), vec![]);
    assert_eq!(engine.failed_syncs(), vec![]);
    assert_eq!(
        w.global_rv().await,
        rv,
        "the restarted engine wrote something"
    );

    // A label change moves a target in and out of the selector.
    w.patch(
        &par,
        "other",
        json!({"metadata": {"labels": {"decorate": "yes"}}}),
    )
    .await;
    w.wait_names(&cm, &["other-att", "p-att"]).await;
    w.wait_object(&par, "other", "other decorated", |o| {
        o.is_some_and(|o| o["metadata"]["labels"]["added"] == json!("x"))
    })
    .await;
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotation_selector_on_builtin_namespaces_with_v1_keys() {
    let w = World::new(
        "Parent",
        sync_fn(|req| {
            let ns = req["object"]["metadata"]["name"].as_str().unwrap();
            json!({
                "labels": {"decorated": "true"},
                "attachments": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "ns-info", "namespace": ns},
                    "data": {"seen": seen(req).join(",")}}],
            })
        }),
    )
    .await;
    let ns = ns_ar();
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "ns-decorator",
            json!([{"apiVersion": "v1", "resource": "namespaces",
                "annotationSelector": {"matchAnnotations": {"decorate": "yes"}}}]),
            json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )],
    )
    .await;
    let nsapi = kube::Api::<kube::api::DynamicObject>::all_with(w.client().clone(), &ns);
    for (name, ann) in [("dec-a", json!({"decorate": "yes"})), ("dec-b", json!({}))] {
        let o: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "annotations": ann}}))
        .unwrap();
        nsapi.create(&Default::default(), &o).await.unwrap();
    }
    let cm_in = |n: &str| {
        kube::Api::<kube::api::DynamicObject>::namespaced_with(w.client().clone(), n, &cm_ar())
    };
    // The attachment exists, and a later sync saw it under the v1 key of a cluster-scoped
    // target (`namespace/name`), which the InPlace update writes into data.seen.
    common::wait_for("ns-info in dec-a listing itself", common::TIMEOUT, || {
        let api = cm_in("dec-a");
        async move {
            let o = api.get_opt("ns-info").await.ok()??;
            let v = serde_json::to_value(o).ok()?;
            (v["data"]["seen"] == json!("dec-a/ns-info")).then_some(v)
        }
    })
    .await;
    engine.converge().await;
    let a = serde_json::to_value(nsapi.get("dec-a").await.unwrap()).unwrap();
    assert_eq!(a["metadata"]["labels"]["decorated"], json!("true"));
    let att = serde_json::to_value(cm_in("dec-a").get("ns-info").await.unwrap()).unwrap();
    assert_eq!(
        controller_ref(&att),
        Some(("Namespace".into(), "dec-a".into(), uid_of(&a)))
    );
    let b = serde_json::to_value(nsapi.get("dec-b").await.unwrap()).unwrap();
    assert!(b["metadata"]["labels"]["decorated"].is_null());
    assert!(cm_in("dec-b").get_opt("ns-info").await.unwrap().is_none());
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_follow_strategy_foreign_objects_untouched_v2_keys() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let par = parent_ar("Parent");
    let cm = cm_ar();
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "att",
            parent_rule(),
            json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}, "version": "v2"}}),
        )],
    )
    .await;
    let p = w
        .create(
            &par,
            json!({"metadata": {"name": "p", "labels": {"decorate": "yes"}},
                "spec": {"atts": [{"name": "a", "value": "1"}, {"name": "b", "value": "1"}]}}),
        )
        .await;
    let uid = p.metadata.uid.clone().unwrap();
    w.wait_names(&cm, &["a", "b"]).await;
    // Controlled by the target but without our annotation: not an attachment.
    let oref = json!([{"apiVersion": format!("{GROUP}/v1"), "kind": "Parent", "name": "p",
        "uid": uid, "controller": true}]);
    w.create(
        &cm,
        json!({"metadata": {"name": "bystander", "ownerReferences": oref}, "data": {"v": "1"}}),
    )
    .await;
    // Our annotation, but controlled by someone else (a Parent the decorator does not select).
    let q = w
        .create(&par, json!({"metadata": {"name": "q"}, "spec": {}}))
        .await;
    w.create(
        &cm,
        json!({"metadata": {"name": "foreign", "annotations": {ANNOTATION: "att"},
            "ownerReferences": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Parent",
                "name": "q", "uid": q.metadata.uid.clone().unwrap(), "controller": true}]},
            "data": {"v": "1"}}),
    )
    .await;
    engine.converge().await;
    let before = w.objects(&cm).await;
    let uid_a = uid_of(&before["a"]);

    // InPlace update of a, b dropped.
    w.patch(
        &par,
        "p",
        json!({"spec": {"atts": [{"name": "a", "value": "2"}]}}),
    )
    .await;
    w.wait_names(&cm, &["a", "bystander", "foreign"]).await;
    w.wait_object(&cm, "a", "a updated in place", |o| {
        o.is_some_and(|o| o["data"]["value"] == json!("2"))
    })
    .await;
    engine.converge().await;
    let after = w.objects(&cm).await;
    assert_eq!(uid_of(&after["a"]), uid_a, "InPlace keeps the object");
    for n in ["bystander", "foreign"] {
        assert_eq!(after[n], before[n], "{n} was touched");
    }
    // v2 keys: namespace/name; the hook never saw the non-attachments.
    let last = w.hook.calls_of("sync").last().unwrap().request.clone();
    assert_eq!(seen(&last), vec!["default/a"]);

    // A desired attachment whose name is taken by a non-attachment fails the sync.
    w.patch(
        &par,
        "p",
        json!({"spec": {"atts": [{"name": "a", "value": "2"}, {"name": "bystander", "value": "x"}]}}),
    )
    .await;
    engine
        .wait_sync_error(&target_key("p"), "never taken over")
        .await;
    assert_eq!(w.objects(&cm).await["bystander"], before["bystander"]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_from_hook_and_null_leaves_it_alone() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let par = parent_ar("Parent");
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "st",
            parent_rule(),
            json!([]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )],
    )
    .await;
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"decorate": "yes"}},
            "spec": {"status": {"phase": "one"}}}),
    )
    .await;
    w.wait_object(&par, "p", "status written", |o| {
        o.is_some_and(|o| o["status"]["phase"] == json!("one"))
    })
    .await;
    engine.converge().await;
    let p = w.get(&par, "p").await.unwrap();
    assert_eq!(
        p["status"],
        json!({"phase": "one"}),
        "no observedGeneration"
    );

    // status: null -> left alone (even a status someone else wrote).
    w.patch(&par, "p", json!({"spec": {"status": null, "marker": 2}}))
        .await;
    w.patch_status(&par, "p", json!({"status": {"other": "x"}}))
        .await;
    common::wait_for("a sync with marker 2", common::TIMEOUT, || {
        let hit = w
            .hook
            .calls_of("sync")
            .iter()
            .any(|c| c.request["object"]["spec"]["marker"] == json!(2));
        async move { hit.then_some(()) }
    })
    .await;
    engine.converge().await;
    let p = w.get(&par, "p").await.unwrap();
    assert_eq!(p["status"], json!({"phase": "one", "other": "x"}));
    assert_eq!(engine.failed_syncs(), vec![]);

    // The handle: the last exchange is kept for replay, and a replay to the same hook finds
    // no change; a target can be resynced by name.
    let handle = engine.engine.started(Some("st")).pop().expect("handle");
    assert_eq!(handle.parent_count(), 1);
    let ex = handle.exchanges();
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0].subject.to_string(), "default/p");
    assert_eq!(ex[0].hook, "sync");
    assert_eq!(ex[0].request["object"]["metadata"]["name"], json!("p"));
    let replayed = engine.engine.replay(&["st".to_string()]).await;
    assert!(
        matches!(replayed.as_slice(), [kubectl_meta::engine::events::EngineEvent::Replay {
            subject, changes, error: None, ..
        }] if subject.parent == "default/p" && changes.is_empty()),
        "{replayed:?}"
    );
    assert_eq!(engine.engine.resync(Some("st"), Some("p")), 1);
    engine.converge().await;
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalize_on_delete_and_when_target_stops_matching() {
    let handler: Handler = std::sync::Arc::new(|hook, req| {
        if hook == "finalize" {
            assert_eq!(req["finalizing"], json!(true));
            // Done only once no attachment is left (the first call deletes them).
            let left = req["attachments"]["ConfigMap.v1"]
                .as_object()
                .map_or(0, |m| m.len());
            Reply::json(json!({"attachments": [], "finalized": left == 0}))
        } else {
            Reply::json(listed(req))
        }
    });
    let w = World::new("Parent", handler).await;
    let par = parent_ar("Parent");
    let cm = cm_ar();
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "fin",
            parent_rule(),
            json!([{"apiVersion": "v1", "resource": "configmaps"}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}},
                "finalize": {"webhook": {"url": w.hook.url("finalize")}}}),
        )],
    )
    .await;
    let finalizer = "metacontroller.io/decoratorcontroller-fin";
    for n in ["del", "opt"] {
        w.create(
            &par,
            json!({"metadata": {"name": n, "labels": {"decorate": "yes"}},
                "spec": {"atts": [{"name": format!("{n}-att"), "value": "1"}]}}),
        )
        .await;
    }
    w.wait_names(&cm, &["del-att", "opt-att"]).await;
    for n in ["del", "opt"] {
        w.wait_object(&par, n, "finalizer added", |o| {
            o.is_some_and(|o| o["metadata"]["finalizers"] == json!([finalizer]))
        })
        .await;
    }
    engine.converge().await;
    assert!(w.hook.calls_of("finalize").is_empty());

    // Delete: finalize is called, the finalizer removed, the target goes away.
    w.delete(&par, "del").await;
    w.wait_object(&par, "del", "del gone", |o| o.is_none())
        .await;
    assert!(
        w.hook
            .calls_of("finalize")
            .iter()
            .any(|c| c.parent_name() == "del")
    );

    // Opt-out: the label goes, finalize is called, attachments deleted, finalizer removed,
    // the target stays.
    w.patch(
        &par,
        "opt",
        json!({"metadata": {"labels": {"decorate": null}}}),
    )
    .await;
    w.wait_object(&par, "opt", "finalizer removed from opt", |o| {
        o.is_some_and(|o| {
            o["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
        })
    })
    .await;
    assert!(
        w.hook
            .calls_of("finalize")
            .iter()
            .any(|c| c.parent_name() == "opt")
    );
    w.wait_object(&cm, "opt-att", "opt-att deleted", |o| o.is_none())
        .await;
    engine.converge().await;
    // The finalizer outlived the first finalize call (which still saw opt-att and answered
    // finalized: false) and was removed after a later one saw no attachment.
    let opt_calls: Vec<Value> = w
        .hook
        .calls_of("finalize")
        .into_iter()
        .filter(|c| c.parent_name() == "opt")
        .map(|c| c.request)
        .collect();
    assert!(opt_calls.len() >= 2, "{opt_calls:?}");
    assert_eq!(
        opt_calls[0]["object"]["metadata"]["finalizers"],
        json!([finalizer])
    );
    assert_eq!(seen(&opt_calls[0]), vec!["opt-att"]);
    assert!(w.get(&par, "opt").await.is_some());
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_hook_records_sync_error_and_deletes_nothing() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let par = parent_ar("Parent");
    let cm = cm_ar();
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "failing",
            parent_rule(),
            json!([{"apiVersion": "v1", "resource": "configmaps"}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )],
    )
    .await;
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"decorate": "yes"}},
            "spec": {"atts": [{"name": "p-att", "value": "1"}]}}),
    )
    .await;
    w.wait_names(&cm, &["p-att"]).await;
    engine.converge().await;
    let before = w.objects(&cm).await;

    w.hook
        .set(std::sync::Arc::new(|_, _| Reply::status(500, "boom")));
    w.patch(&par, "p", json!({"spec": {"atts": []}})).await;
    let err = engine.wait_sync_error(&target_key("p"), "sync hook").await;
    assert!(err.contains("500"), "{err}");
    common::wait_for("a SyncError event on p", common::TIMEOUT, || async {
        w.k8s_events("p")
            .await
            .into_iter()
            .find(|(reason, _)| reason == "SyncError")
    })
    .await;
    assert_eq!(
        w.objects(&cm).await,
        before,
        "a failed hook changed attachments"
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_target_resources_are_decorated_by_one_controller() {
    let w = World::new(
        "Parent",
        sync_fn(|req| {
            let kind = req["object"]["kind"].as_str().unwrap_or("").to_lowercase();
            json!({"labels": {"decorated-as": kind}})
        }),
    )
    .await;
    let par = parent_ar("Parent");
    let secrets = core_ar("Secret", "secrets");
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "multi",
            json!([
                {"apiVersion": format!("{GROUP}/v1"), "resource": "parents",
                    "labelSelector": {"matchLabels": {"decorate": "yes"}}},
                {"apiVersion": "v1", "resource": "secrets",
                    "annotationSelector": {"matchExpressions": [{"key": "decorate", "operator": "Exists"}]}},
            ]),
            json!([]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )],
    )
    .await;
    // Same name in both resources: two distinct targets.
    w.create(
        &par,
        json!({"metadata": {"name": "same", "labels": {"decorate": "yes"}}}),
    )
    .await;
    w.create(
        &secrets,
        json!({"metadata": {"name": "same", "annotations": {"decorate": ""}}}),
    )
    .await;
    w.create(&secrets, json!({"metadata": {"name": "plain"}}))
        .await;
    w.wait_object(&par, "same", "parent decorated", |o| {
        o.is_some_and(|o| o["metadata"]["labels"]["decorated-as"] == json!("parent"))
    })
    .await;
    w.wait_object(&secrets, "same", "secret decorated", |o| {
        o.is_some_and(|o| o["metadata"]["labels"]["decorated-as"] == json!("secret"))
    })
    .await;
    engine.converge().await;
    let plain = w.get(&secrets, "plain").await.unwrap();
    assert!(plain["metadata"]["labels"]["decorated-as"].is_null());
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customize_related_objects_reach_the_hook_and_their_changes_resync() {
    let handler: Handler = std::sync::Arc::new(|hook, req| {
        if hook == "customize" {
            assert!(
                req["parent"].is_object(),
                "customize gets {{controller, parent}}"
            );
            return Reply::json(json!({"relatedResources": [
                {"apiVersion": "v1", "resource": "configmaps", "names": ["source"]}]}));
        }
        let value = req["related"]["ConfigMap.v1"]["source"]["data"]["k"].clone();
        Reply::json(json!({"annotations": {"copied": value}}))
    });
    let w = World::new("Parent", handler).await;
    let par = parent_ar("Parent");
    let cm = cm_ar();
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "rel",
            parent_rule(),
            json!([]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}},
                "customize": {"webhook": {"url": w.hook.url("customize")}}}),
        )],
    )
    .await;
    w.create(
        &cm,
        json!({"metadata": {"name": "source"}, "data": {"k": "one"}}),
    )
    .await;
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"decorate": "yes"}}}),
    )
    .await;
    w.wait_object(&par, "p", "copied one", |o| {
        o.is_some_and(|o| o["metadata"]["annotations"]["copied"] == json!("one"))
    })
    .await;
    // A change to the related object alone re-syncs the target.
    w.patch(&cm, "source", json!({"data": {"k": "two"}})).await;
    w.wait_object(&par, "p", "copied two", |o| {
        o.is_some_and(|o| o["metadata"]["annotations"]["copied"] == json!("two"))
    })
    .await;
    engine.converge().await;
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_leaves_attachments_and_recreate_replaces_them() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let par = parent_ar("Parent");
    let cm = cm_ar();
    let mk = |w: &World, strategy: Value| {
        decorator(
            "strat",
            parent_rule(),
            json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": strategy}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )
    };
    // No method given: OnDelete.
    let engine = Running::start(w.client(), vec![mk(&w, json!({}))]).await;
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"decorate": "yes"}},
            "spec": {"atts": [{"name": "a", "value": "1"}]}}),
    )
    .await;
    w.wait_names(&cm, &["a"]).await;
    engine.converge().await;
    let first = w.get(&cm, "a").await.unwrap();
    w.patch(
        &par,
        "p",
        json!({"spec": {"atts": [{"name": "a", "value": "2"}]}}),
    )
    .await;
    common::wait_for("a sync asking for value 2", common::TIMEOUT, || {
        let hit = w
            .hook
            .calls_of("sync")
            .iter()
            .any(|c| c.request["object"]["spec"]["atts"][0]["value"] == json!("2"));
        async move { hit.then_some(()) }
    })
    .await;
    engine.converge().await;
    assert_eq!(w.get(&cm, "a").await.unwrap(), first, "OnDelete updated");
    engine.stop().await;

    // Recreate: deleted, then created again with the new value.
    let engine = Running::start(w.client(), vec![mk(&w, json!({"method": "Recreate"}))]).await;
    let new = w
        .wait_object(&cm, "a", "a recreated with value 2", |o| {
            o.is_some_and(|o| o["data"]["value"] == json!("2"))
        })
        .await
        .unwrap();
    assert_ne!(uid_of(&new), uid_of(&first), "Recreate made a new object");
    assert_eq!(new["metadata"]["annotations"][ANNOTATION], json!("strat"));
    engine.converge().await;
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_mode_holds_the_label_merge_like_every_other_write() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let par = parent_ar("Parent");
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "held",
            parent_rule(),
            json!([{"apiVersion": "v1", "resource": "configmaps"}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )],
    )
    .await;
    engine.engine.set_paused(true);
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"decorate": "yes"}},
            "spec": {"labels": {"added": "x"}, "annotations": {"note": null},
                "atts": [{"name": "p-att", "value": "1"}]}}),
    )
    .await;
    let held = common::wait_for("the plan of p held", TIMEOUT, || {
        let held = engine.events().into_iter().find_map(|e| match e {
            EngineEvent::PlanHeld {
                subject, actions, ..
            } if subject.parent == target_key("p") => Some(actions),
            _ => None,
        });
        async move { held }
    })
    .await;
    let held: Vec<(ActionVerb, String, String, Option<String>)> = held
        .into_iter()
        .map(|a| (a.verb, a.resource, a.object, a.detail))
        .collect();
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(
        (held[0].0, held[0].2.as_str(), held[0].3.as_deref()),
        (
            ActionVerb::Update,
            target_key("p").as_str(),
            Some("labels/annotations: labels added=x")
        ),
        "the parent's labels first: {held:?}"
    );
    assert_eq!(
        (held[1].0, held[1].1.as_str(), held[1].2.as_str()),
        (ActionVerb::Create, "ConfigMap.v1", "default/p-att")
    );
    engine.converge().await;
    assert_eq!(engine.writes(), vec![], "paused, yet it wrote");
    let p = w.get(&par, "p").await.expect("p");
    assert!(p["metadata"]["labels"].get("added").is_none(), "{p:#}");
    assert!(w.names(&cm_ar()).await.is_empty());

    // Resuming carries the plan out: labels first, then the attachment.
    engine.engine.set_paused(false);
    w.wait_object(&par, "p", "p labelled", |o| {
        o.is_some_and(|o| o["metadata"]["labels"]["added"] == json!("x"))
    })
    .await;
    w.wait_names(&cm_ar(), &["p-att"]).await;
    engine.converge().await;
    let writes = engine.writes();
    assert_eq!(
        writes,
        vec![
            (ActionVerb::Update, "default/p".to_string()),
            (ActionVerb::Create, "default/p-att".to_string()),
        ]
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_crd_targets_get_cluster_scoped_attachments() {
    // For each CRD labelled decorate=yes: a label on the CRD, and a ClusterRole that can read
    // its resources, owned by the CRD.
    let w = World::new(
        "Parent",
        sync_fn(|req| {
            let crd = &req["object"];
            let name = crd["metadata"]["name"].as_str().unwrap();
            json!({
                "labels": {"viewer-role": format!("{name}-viewer")},
                "attachments": [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": format!("{name}-viewer")},
                    "rules": [{"apiGroups": [crd["spec"]["group"]],
                        "resources": [crd["spec"]["names"]["plural"]],
                        "verbs": ["get", "list", "watch"]}]}],
            })
        }),
    )
    .await;
    install_crd(w.client(), "Other", true).await;
    let crd_ar = kube::discovery::ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let role_ar = kube::discovery::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRole".into(),
        plural: "clusterroles".into(),
    };
    let crds = kube::Api::<kube::api::DynamicObject>::all_with(w.client().clone(), &crd_ar);
    let roles = kube::Api::<kube::api::DynamicObject>::all_with(w.client().clone(), &role_ar);
    let target = format!("parents.{GROUP}");
    crds.patch(
        &target,
        &Default::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"labels": {"decorate": "yes"}}})),
    )
    .await
    .unwrap();
    let engine = Running::start(
        w.client(),
        vec![decorator(
            "crd-viewers",
            json!([{"apiVersion": "apiextensions.k8s.io/v1", "resource": "customresourcedefinitions",
                "labelSelector": {"matchLabels": {"decorate": "yes"}}}]),
            json!([{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        )],
    )
    .await;
    engine.converge().await;
    let crd = serde_json::to_value(crds.get(&target).await.unwrap()).unwrap();
    assert_eq!(
        crd["metadata"]["labels"]["viewer-role"],
        json!(format!("{target}-viewer"))
    );
    let role = serde_json::to_value(roles.get(&format!("{target}-viewer")).await.unwrap()).unwrap();
    assert_eq!(
        controller_ref(&role),
        Some((
            "CustomResourceDefinition".into(),
            target.clone(),
            uid_of(&crd)
        ))
    );
    assert_eq!(
        role["metadata"]["annotations"][ANNOTATION],
        json!("crd-viewers")
    );
    assert_eq!(role["rules"][0]["resources"], json!(["parents"]));
    // The unlabelled CRD is not a target.
    let other = format!("others.{GROUP}");
    assert!(
        roles
            .get_opt(&format!("{other}-viewer"))
            .await
            .unwrap()
            .is_none()
    );
    let o = serde_json::to_value(crds.get(&other).await.unwrap()).unwrap();
    assert!(o["metadata"]["labels"]["viewer-role"].is_null());
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}
