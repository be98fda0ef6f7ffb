//! Controller lifecycle and parent scope: a parent CRD created after the engine started,
//! `resyncPeriodSeconds`, `ignoreStatusChanges`, the parent `labelSelector`, and `-n`.
//!
//! "Not synced" is asserted without sleeping: the watch delivers events in order, so once a
//! later marker (another parent) has been synced and the engine has converged, an earlier event
//! that would have queued a sync has been routed already.

use crate::common;

use crate::common::engine::*;
use kubectl_meta::engine::EngineOptions;
use kubectl_meta::engine::events::{EngineEvent, Trigger};
use serde_json::{Value, json};

fn cm_ar() -> kube::discovery::ApiResource {
    core_ar("ConfigMap", "configmaps")
}

/// One ConfigMap `<parent>-cm` per parent, with generateSelector.
fn one_child(req: &Value) -> Value {
    let name = req["parent"]["metadata"]["name"].as_str().unwrap();
    json!({"status": {"ok": true}, "children": [configmap(&format!("{name}-cm"), json!({"k": "v"}))]})
}

fn controller(hook: &HookServer, extra_parent: Value, extra_spec: Value) -> Value {
    let mut c = composite(
        "scope",
        "Widget",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": hook.url("sync")}}}),
    );
    c["spec"]["generateSelector"] = json!(true);
    for (k, v) in extra_parent.as_object().unwrap() {
        c["spec"]["parentResource"][k] = v.clone();
    }
    for (k, v) in extra_spec.as_object().unwrap() {
        c["spec"][k] = v.clone();
    }
    c
}

/// Triggers of every sync of `parent` (`namespace/name`) so far.
fn syncs_of(engine: &Running, parent: &str) -> Vec<Vec<Trigger>> {
    engine
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::SyncStarted {
                subject, triggers, ..
            } if subject.parent == parent => Some(triggers),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_crd_created_after_start_is_reported_then_picked_up() {
    let sb = common::start().await;
    let hook = HookServer::start(sync_fn(one_child)).await;
    // Start without waiting for ControllerStarted: the parent type does not exist yet.
    let bus = kubectl_meta::engine::events::EventBus::new();
    let mut rx = bus.subscribe();
    let ctx = std::sync::Arc::new(
        kubectl_meta::engine::EngineContext::new(sb.client.clone(), bus, EngineOptions::default())
            .unwrap(),
    );
    let mut engine = kubectl_meta::engine::Engine::new(ctx);
    engine.start(def(controller(&hook, json!({}), json!({}))));
    let first = tokio::time::timeout(common::TIMEOUT, async {
        loop {
            if let e @ (EngineEvent::Error { .. } | EngineEvent::ControllerStarted { .. }) =
                rx.recv().await.unwrap()
            {
                return e;
            }
        }
    })
    .await
    .expect("an event about the missing resource");
    let EngineEvent::Error { message, .. } = &first else {
        panic!("started although the parent resource does not exist: {first:?}");
    };
    assert!(
        message.contains(&format!("does not serve {GROUP}/v1")),
        "{message}"
    );
    assert!(message.contains("create the CRD first"), "{message}");
    // --once would not call this converged.
    let rep = engine
        .wait_converged(std::time::Duration::from_millis(500))
        .await;
    assert!(!rep.converged);
    assert!(
        rep.pending
            .iter()
            .any(|(_, w)| w.contains("waiting for its resources")),
        "{rep:?}"
    );

    install_crd(&sb.client, "Widget", true).await;
    let w = World {
        sb,
        hook: hook.clone(),
    };
    w.create(&parent_ar("Widget"), json!({"metadata": {"name": "late"}}))
        .await;
    w.wait_names(&cm_ar(), &["late-cm"]).await;
    let rep = engine.wait_converged(common::TIMEOUT).await;
    assert!(rep.converged, "{rep:?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_period_calls_the_hook_again_without_writing() {
    let w = World::new("Widget", sync_fn(one_child)).await;
    let engine = Running::start(
        w.client(),
        vec![def(controller(
            &w.hook,
            json!({}),
            json!({"resyncPeriodSeconds": 1}),
        ))],
    )
    .await;
    w.create(&parent_ar("Widget"), json!({"metadata": {"name": "p"}}))
        .await;
    w.wait_names(&cm_ar(), &["p-cm"]).await;
    engine.converge().await;
    engine.clear_events();
    let before = w.hook.calls_of("sync").len();
    common::wait_for("two periodic resyncs", common::TIMEOUT, || {
        let n = syncs_of(&engine, "default/p")
            .iter()
            .filter(|t| t.contains(&Trigger::ResyncPeriod))
            .count();
        async move { (n >= 2).then_some(()) }
    })
    .await;
    engine.converge().await;
    assert!(w.hook.calls_of("sync").len() >= before + 2);
    assert_eq!(engine.writes(), vec![], "a no-op resync wrote");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_changes_by_others_sync_unless_ignore_status_changes() {
    for ignore in [false, true] {
        let w = World::new("Widget", sync_fn(one_child)).await;
        let extra = if ignore {
            json!({"ignoreStatusChanges": true})
        } else {
            json!({})
        };
        let engine =
            Running::start(w.client(), vec![def(controller(&w.hook, extra, json!({})))]).await;
        let par = parent_ar("Widget");
        w.create(&par, json!({"metadata": {"name": "p"}})).await;
        w.wait_names(&cm_ar(), &["p-cm"]).await;
        engine.converge().await;
        engine.clear_events();

        // Someone else writes the parent's status, then a marker parent appears.
        w.patch_status(&par, "p", json!({"status": {"external": "x"}}))
            .await;
        w.create(&par, json!({"metadata": {"name": "marker"}}))
            .await;
        w.wait_names(&cm_ar(), &["marker-cm", "p-cm"]).await;
        engine.converge().await;
        let synced = !syncs_of(&engine, "default/p").is_empty();
        assert_eq!(synced, !ignore, "ignoreStatusChanges={ignore}");
        engine.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_label_selector_limits_which_parents_are_synced() {
    let w = World::new("Widget", sync_fn(one_child)).await;
    let engine = Running::start(
        w.client(),
        vec![def(controller(
            &w.hook,
            json!({"labelSelector": {"matchLabels": {"managed": "yes"}}}),
            json!({}),
        ))],
    )
    .await;
    let par = parent_ar("Widget");
    w.create(&par, json!({"metadata": {"name": "out"}})).await;
    w.create(
        &par,
        json!({"metadata": {"name": "in", "labels": {"managed": "yes"}}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["in-cm"]).await;
    engine.converge().await;
    assert!(syncs_of(&engine, "default/out").is_empty());
    assert!(w.hook.calls().iter().all(|c| c.parent_name() != "out"));

    // Labelled into scope: now it is synced.
    w.patch(
        &par,
        "out",
        json!({"metadata": {"labels": {"managed": "yes"}}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["in-cm", "out-cm"]).await;
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_option_only_syncs_parents_there() {
    let w = World::new("Widget", sync_fn(one_child)).await;
    let ns_api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(w.client().clone());
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    ns_api
        .create(&kube::api::PostParams::default(), &ns)
        .await
        .unwrap();
    let options = EngineOptions {
        namespace: Some("team".into()),
        ..EngineOptions::default()
    };
    let engine = Running::start_with(
        w.client(),
        vec![def(controller(&w.hook, json!({}), json!({})))],
        options,
    )
    .await;
    let par = parent_ar("Widget");
    w.create(&par, json!({"metadata": {"name": "elsewhere"}}))
        .await;
    let team: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(w.client().clone(), "team", &par);
    let p: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "here"}
    }))
    .unwrap();
    team.create(&kube::api::PostParams::default(), &p)
        .await
        .unwrap();
    let cms: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(w.client().clone(), "team", &cm_ar());
    common::wait_for("the child in team", common::TIMEOUT, || {
        let cms = cms.clone();
        async move { cms.get_opt("here-cm").await.unwrap().map(|_| ()) }
    })
    .await;
    engine.converge().await;
    assert!(syncs_of(&engine, "default/elsewhere").is_empty());
    assert_eq!(w.names(&cm_ar()).await, Vec::<String>::new());
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deselected_parent_keeps_the_finalizer_until_finalize_says_finalized() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let handler: Handler = Arc::new(move |hook, req| {
        if hook == "finalize" {
            // Tear every child down; finalized only once the test says so.
            return Reply::json(json!({"children": [], "finalized": flag.load(Ordering::SeqCst)}));
        }
        Reply::json(one_child(req))
    });
    let w = World::new("Widget", handler).await;
    let mut c = controller(
        &w.hook,
        json!({"labelSelector": {"matchLabels": {"managed": "yes"}}}),
        json!({}),
    );
    c["spec"]["hooks"]["finalize"] = json!({"webhook": {"url": w.hook.url("finalize")}});
    let engine = Running::start(w.client(), vec![def(c)]).await;
    let par = parent_ar("Widget");
    let finalizer = "metacontroller.io/compositecontroller-scope";
    w.create(
        &par,
        json!({"metadata": {"name": "p", "labels": {"managed": "yes"}}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["p-cm"]).await;
    w.wait_object(&par, "p", "the finalizer on p", |o| {
        o.is_some_and(|o| o["metadata"]["finalizers"] == json!([finalizer]))
    })
    .await;
    engine.converge().await;
    assert!(w.hook.calls_of("finalize").is_empty());

    // Labelled out of scope: finalize runs, answers finalized: false; the finalizer stays.
    w.patch(
        &par,
        "p",
        json!({"metadata": {"labels": {"managed": null}}}),
    )
    .await;
    w.wait_names(&cm_ar(), &[]).await;
    engine.converge().await;
    let calls = w.hook.calls_of("finalize");
    assert!(!calls.is_empty());
    assert!(calls.iter().all(|c| c.request["finalizing"] == json!(true)));
    let p = w.get(&par, "p").await.expect("parent p");
    assert_eq!(
        p["metadata"]["finalizers"],
        json!([finalizer]),
        "the finalizer must stay while finalize answers finalized: false"
    );

    // Finalize now answers finalized: true; any change of p syncs it again and the finalizer
    // goes.
    done.store(true, Ordering::SeqCst);
    w.patch(
        &par,
        "p",
        json!({"metadata": {"annotations": {"poke": "1"}}}),
    )
    .await;
    w.wait_object(&par, "p", "p without the finalizer", |o| {
        o.is_some_and(|o| {
            o["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty())
        })
    })
    .await;
    engine.converge().await;
    // Out of scope now: a later change does not sync it.
    let before = w.hook.calls_of("finalize").len();
    w.patch(
        &par,
        "p",
        json!({"metadata": {"annotations": {"poke": "2"}}}),
    )
    .await;
    w.create(
        &par,
        json!({"metadata": {"name": "marker", "labels": {"managed": "yes"}}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["marker-cm"]).await;
    engine.converge().await;
    assert_eq!(w.hook.calls_of("finalize").len(), before);
    engine.stop().await;
}

/// Three ConfigMaps `<parent>-<i>` per parent; the status counts the ConfigMaps the hook saw.
fn three_children(req: &Value) -> Value {
    let name = req["parent"]["metadata"]["name"].as_str().unwrap();
    let seen = req["children"]["ConfigMap.v1"]
        .as_object()
        .map_or(0, serde_json::Map::len);
    let kids: Vec<Value> = (0..3)
        .map(|i| configmap(&format!("{name}-{i}"), json!({"i": i.to_string()})))
        .collect();
    json!({"status": {"children": seen}, "children": kids})
}

/// By default a sync that wrote the parent's status is followed by one more on that write's
/// echo, as Metacontroller does (a hook may act on the status it wrote once it is committed): a
/// parent with three children takes 3 syncs, the third seeing the status the second wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_status_write_is_followed_by_the_sync_metacontroller_makes() {
    let w = World::new("Widget", sync_fn(three_children)).await;
    let engine = Running::start(
        w.client(),
        vec![def(controller(&w.hook, json!({}), json!({})))],
    )
    .await;
    let par = parent_ar("Widget");
    w.create(&par, json!({"metadata": {"name": "p0"}})).await;
    w.wait_object(&par, "p0", "status.children 3", |o| {
        o.is_some_and(|o| o["status"]["children"] == json!(3))
    })
    .await;
    common::wait_for("the sync on the status echo", common::TIMEOUT, || {
        let calls = w
            .hook
            .calls_of("sync")
            .into_iter()
            .filter(|c| {
                c.parent_name() == "p0" && c.request["parent"]["status"]["children"] == json!(3)
            })
            .count();
        async move { (calls > 0).then_some(()) }
    })
    .await;
    engine.converge().await;
    let syncs = syncs_of(&engine, "default/p0");
    assert_eq!(syncs.len(), 3, "{syncs:?}");
    engine.stop().await;
}

/// With `--status-echo skip` the engine does not re-sync a parent on the watch echo of its own
/// writes: a parent with three children converges in 2 syncs and 2 hook calls (create the
/// children; see them and write the status), where Metacontroller takes 3. Another writer's
/// change to a child or to the status still syncs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_converges_in_two_syncs_and_other_writers_still_sync_it() {
    let w = World::new("Widget", sync_fn(three_children)).await;
    let engine = Running::start_with(
        w.client(),
        vec![def(controller(&w.hook, json!({}), json!({})))],
        EngineOptions {
            confirm_status_writes: false,
            ..EngineOptions::default()
        },
    )
    .await;
    let par = parent_ar("Widget");
    let parents = ["p0", "p1", "p2", "p3"];
    for p in parents {
        w.create(&par, json!({"metadata": {"name": p}})).await;
    }
    for p in parents {
        w.wait_object(&par, p, "status.children 3", |o| {
            o.is_some_and(|o| o["status"]["children"] == json!(3))
        })
        .await;
    }
    engine.converge().await;
    // A marker parent synced after them: every echo of the writes above has been routed.
    w.create(&par, json!({"metadata": {"name": "marker"}}))
        .await;
    w.wait_object(&par, "marker", "status.children 3", |o| {
        o.is_some_and(|o| o["status"]["children"] == json!(3))
    })
    .await;
    engine.converge().await;
    for p in parents {
        let syncs = syncs_of(&engine, &format!("default/{p}"));
        assert_eq!(syncs.len(), 2, "{p}: {syncs:?}");
        assert_eq!(syncs[1], vec![Trigger::Converge], "{p}: {syncs:?}");
        let calls: Vec<_> = w
            .hook
            .calls_of("sync")
            .into_iter()
            .filter(|c| c.parent_name() == p)
            .collect();
        assert_eq!(calls.len(), 2, "{p}");
        let seen = |c: &common::engine::Call| {
            c.request["children"]["ConfigMap.v1"]
                .as_object()
                .map_or(0, serde_json::Map::len)
        };
        assert_eq!((seen(&calls[0]), seen(&calls[1])), (0, 3), "{p}");
    }

    // Another writer changes a child (OnDelete: it is left as they made it): the parent syncs,
    // and its hook sees the change.
    engine.clear_events();
    w.hook.clear();
    w.patch(&cm_ar(), "p0-0", json!({"data": {"i": "changed"}}))
        .await;
    common::wait_for(
        "p0 synced after another writer's change",
        common::TIMEOUT,
        || {
            let seen = w.hook.calls_of("sync").iter().any(|c| {
                c.parent_name() == "p0"
                    && c.request["children"]["ConfigMap.v1"]["p0-0"]["data"]["i"] == "changed"
            });
            async move { seen.then_some(()) }
        },
    )
    .await;
    engine.converge().await;
    assert!(!syncs_of(&engine, "default/p0").is_empty());
    // Another writer changes the status: the parent syncs and the status is put back.
    engine.clear_events();
    w.patch_status(&par, "p1", json!({"status": {"children": 7}}))
        .await;
    w.wait_object(&par, "p1", "the status put back", |o| {
        o.is_some_and(|o| o["status"]["children"] == json!(3))
    })
    .await;
    engine.converge().await;
    assert!(!syncs_of(&engine, "default/p1").is_empty());
    engine.stop().await;
}
