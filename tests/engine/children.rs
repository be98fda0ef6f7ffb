//! CompositeController children: create, update, delete; adoption and release of orphans;
//! objects controlled by others are never touched; restart converges without writes.

use crate::common;

use crate::common::engine::*;
use std::time::Duration;

use kubectl_meta::engine::events::{ActionVerb, EngineEvent};
use serde_json::{Value, json};

fn cm_ar() -> kube::discovery::ApiResource {
    core_ar("ConfigMap", "configmaps")
}

/// Children named `<parent>-<i>` for i in 0..spec.count, data from spec.value.
fn counted(req: &Value) -> Value {
    let kids = counted_children(req);
    let observed = req["children"]["ConfigMap.v1"]
        .as_object()
        .map_or(0, |m| m.len());
    json!({"status": {"observed": observed}, "children": kids})
}

fn controller(hook: &HookServer, method: &str) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        "counted",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": method}}]),
        json!({"sync": {"webhook": {"url": hook.url("sync")}}}),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_are_created_updated_and_deleted_with_owner_refs_and_status() {
    let w = World::new("Parent", sync_fn(counted)).await;
    let engine = Running::start(w.client(), vec![controller(&w.hook, "InPlace")]).await;
    let par = parent_ar("Parent");
    let p = w
        .create(&par, json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}, "count": 2, "value": "a"}}))
        .await;
    let uid = p.metadata.uid.clone().unwrap();
    w.wait_names(&cm_ar(), &["p-0", "p-1"]).await;
    engine.converge().await;
    let cms = w.objects(&cm_ar()).await;
    let c0 = &cms["p-0"];
    assert_eq!(
        controller_ref(c0),
        Some(("Parent".into(), "p".into(), uid.clone()))
    );
    let oref = &c0["metadata"]["ownerReferences"][0];
    assert_eq!(oref["blockOwnerDeletion"], json!(true));
    assert_eq!(c0["data"]["value"], json!("a"));
    assert!(
        c0["metadata"]["annotations"]["metacontroller.k8s.io/last-applied-configuration"]
            .is_string()
    );
    // Status: the hook's status plus observedGeneration, from the last sync (2 observed).
    let parent = w.get(&par, "p").await.unwrap();
    assert_eq!(parent["status"]["observed"], json!(2));
    assert_eq!(parent["status"]["observedGeneration"], json!(1));

    // Update (InPlace): value b, count 1 -> p-1 deleted, p-0 updated in place (same uid).
    let uid0 = c0["metadata"]["uid"].clone();
    w.patch(&par, "p", json!({"spec": {"count": 1, "value": "b"}}))
        .await;
    w.wait_names(&cm_ar(), &["p-0"]).await;
    w.wait_object(&cm_ar(), "p-0", "p-0 updated to b", |o| {
        o.is_some_and(|o| o["data"]["value"] == json!("b"))
    })
    .await;
    engine.converge().await;
    let c0 = w.get(&cm_ar(), "p-0").await.unwrap();
    assert_eq!(c0["metadata"]["uid"], uid0, "InPlace keeps the object");
    assert_eq!(
        w.get(&par, "p").await.unwrap()["status"]["observedGeneration"],
        json!(2)
    );

    // No children.
    w.patch(&par, "p", json!({"spec": {"count": 0}})).await;
    w.wait_names(&cm_ar(), &[]).await;
    engine.stop().await;
}

/// Children from `spec.children`, in that order: each `{name, value?, labels?}`; `value`
/// defaults to `spec.value` (or `v1`), `labels` to `{app: <parent name>}`. The status records
/// the names of the observed ConfigMaps the hook was shown.
fn listed(req: &Value) -> Value {
    let p = &req["parent"];
    let pname = p["metadata"]["name"].as_str().unwrap();
    let default_value = p["spec"]["value"].as_str().unwrap_or("v1");
    let kids: Vec<Value> = p["spec"]["children"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let value = c["value"].as_str().unwrap_or(default_value);
            let mut cm = configmap(c["name"].as_str().unwrap(), json!({"value": value}));
            cm["metadata"]["labels"] = if c["labels"].is_object() {
                c["labels"].clone()
            } else {
                json!({"app": pname})
            };
            cm
        })
        .collect();
    json!({"status": {"seen": seen(req)}, "children": kids})
}

/// As [`listed`], leaving out the children named in `skip`.
fn listed_except(skip: &'static [&'static str]) -> Handler {
    sync_fn(move |req| {
        let mut r = listed(req);
        r["children"]
            .as_array_mut()
            .unwrap()
            .retain(|c| !skip.contains(&c["metadata"]["name"].as_str().unwrap()));
        r
    })
}

/// Names of the ConfigMaps in a sync request's children map, sorted.
fn seen(req: &Value) -> Vec<String> {
    let mut v: Vec<String> = req["children"]["ConfigMap.v1"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// A CompositeController over `Parent` owning ConfigMaps with `method`, hook [`listed`]-style.
fn cm_controller(hook: &HookServer, method: &str) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        "listed",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": method}}]),
        json!({"sync": {"webhook": {"url": hook.url("sync")}}}),
    ))
}

/// A parent `name` selecting `app=<name>` with the given children list and value.
fn parent_obj(name: &str, children: Value, value: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"app": name}}, "children": children, "value": value}})
}

fn uid_of(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap().to_string()
}

fn rv_of(o: &Value) -> String {
    o["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Wait until the hook saw parent `name` with `spec.value == value` (the sync after a spec edit).
async fn wait_hook_saw_value(w: &World, name: &str, value: &str) {
    common::wait_for(
        &format!("a sync of {name} with spec.value {value}"),
        common::TIMEOUT,
        || {
            let hit = w.hook.calls_of("sync").iter().any(|c| {
                c.parent_name() == name && c.request["parent"]["spec"]["value"] == json!(value)
            });
            async move { hit.then_some(()) }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_orphans_are_adopted_listed_kept_and_unlisted_deleted() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let cm = cm_ar();
    // Orphans made before the parent: two match its selector, one does not.
    let keep = w
        .create(
            &cm,
            json!({"metadata": {"name": "keep", "labels": {"app": "p"}}, "data": {"value": "old"}}),
        )
        .await;
    w.create(
        &cm,
        json!({"metadata": {"name": "drop", "labels": {"app": "p"}}, "data": {"value": "old"}}),
    )
    .await;
    let other = w
        .create(&cm, json!({"metadata": {"name": "other", "labels": {"app": "q"}}, "data": {"value": "old"}}))
        .await;
    let keep_uid = keep.metadata.uid.clone().unwrap();
    let other_rv = other.metadata.resource_version.clone().unwrap();

    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    let par = parent_ar("Parent");
    let p = w
        .create(&par, parent_obj("p", json!([{"name": "keep"}]), "new"))
        .await;
    let puid = p.metadata.uid.clone().unwrap();

    w.wait_names(&cm, &["keep", "other"]).await;
    engine.converge().await;

    // `keep`: adopted (same object) with our ControllerRef, then updated in place.
    let k = w.get(&cm, "keep").await.unwrap();
    assert_eq!(uid_of(&k), keep_uid, "adopted, not recreated");
    assert_eq!(
        controller_ref(&k),
        Some(("Parent".into(), "p".into(), puid.clone()))
    );
    let refs = k["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!(refs[0]["controller"], json!(true));
    assert_eq!(refs[0]["blockOwnerDeletion"], json!(true));
    assert_eq!(refs[0]["apiVersion"], json!(format!("{GROUP}/v1")));
    assert_eq!(k["data"]["value"], json!("new"));

    // The hook was shown both adopted orphans on its first call (they are its children now).
    let first = w.hook.calls_of("sync")[0].clone();
    assert_eq!(seen(&first.request), vec!["drop", "keep"]);
    // ... as adopted objects: with our ControllerRef, as Metacontroller shows them.
    for name in ["drop", "keep"] {
        let shown = &first.request["children"]["ConfigMap.v1"][name];
        assert_eq!(
            controller_ref(shown),
            Some(("Parent".into(), "p".into(), puid.clone())),
            "{shown}"
        );
    }

    // `drop`: adopted first, then deleted because the hook did not list it.
    let writes = engine.writes();
    let adopt_drop = writes
        .iter()
        .position(|(v, o)| *v == ActionVerb::Adopt && o == "default/drop")
        .unwrap_or_else(|| panic!("drop was not adopted: {writes:?}"));
    let delete_drop = writes
        .iter()
        .position(|(v, o)| *v == ActionVerb::Delete && o == "default/drop")
        .unwrap_or_else(|| panic!("drop was not deleted: {writes:?}"));
    assert!(adopt_drop < delete_drop, "{writes:?}");
    assert!(
        writes
            .iter()
            .any(|(v, o)| *v == ActionVerb::Adopt && o == "default/keep"),
        "{writes:?}"
    );
    assert!(
        !writes
            .iter()
            .any(|(v, o)| *v == ActionVerb::Create && o == "default/keep"),
        "keep must not be recreated: {writes:?}"
    );
    assert!(w.get(&cm, "drop").await.is_none());

    // `other` (does not match) is untouched.
    let o = w.get(&cm, "other").await.unwrap();
    assert_eq!(rv_of(&o), other_rv);
    assert!(o["metadata"]["ownerReferences"].is_null());
    assert!(
        !writes.iter().any(|(_, o)| o == "default/other"),
        "{writes:?}"
    );

    // Adopting and updating an orphan is not an error, and no sync stalls waiting for a change
    // to an object it deleted itself.
    assert_eq!(engine.failed_syncs(), vec![], "no sync may fail");
    assert!(w.k8s_events("p").await.is_empty());
    let slowest = slowest_sync(&engine);
    assert!(slowest < Duration::from_secs(8), "a sync took {slowest:?}");
    engine.stop().await;
}

/// The longest sync so far.
fn slowest_sync(engine: &Running) -> Duration {
    engine
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::SyncFinished { duration, .. } => Some(duration),
            _ => None,
        })
        .max()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_stops_matching_is_released_not_deleted() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    let p = w
        .create(
            &par,
            parent_obj("p", json!([{"name": "a"}, {"name": "b"}]), "x"),
        )
        .await;
    let puid = p.metadata.uid.clone().unwrap();
    w.wait_names(&cm, &["a", "b"]).await;
    engine.converge().await;
    let b = w.get(&cm, "b").await.unwrap();
    assert_eq!(controller_ref(&b).map(|r| r.2), Some(puid.clone()));
    let a_rv = rv_of(&w.get(&cm, "a").await.unwrap());

    // The hook would delete `b` if it were still a child: it no longer lists it.
    w.hook.set(listed_except(&["b"]));
    engine.clear_events();
    w.hook.clear();
    // Someone relabels `b` so that the parent's selector no longer matches it.
    w.patch(
        &cm,
        "b",
        json!({"metadata": {"labels": {"app": "elsewhere"}}}),
    )
    .await;
    let released = w
        .wait_object(&cm, "b", "b released", |o| {
            o.is_some_and(|o| controller_ref(o).is_none())
        })
        .await
        .unwrap();
    engine.converge().await;

    assert_eq!(uid_of(&released), uid_of(&b), "released, not recreated");
    let b_now = w.get(&cm, "b").await.unwrap();
    assert_eq!(uid_of(&b_now), uid_of(&b));
    assert!(
        b_now["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|r| r.iter().all(|r| r["uid"] != json!(puid))),
        "no reference to the parent is left: {b_now}"
    );
    assert_eq!(b_now["data"]["value"], json!("x"));
    let writes = engine.writes();
    assert!(
        writes.contains(&(ActionVerb::Release, "default/b".into())),
        "{writes:?}"
    );
    assert!(
        !writes
            .iter()
            .any(|(v, o)| o == "default/b" && *v != ActionVerb::Release),
        "{writes:?}"
    );
    // The hook is no longer shown `b`; `a` is untouched.
    let calls = w.hook.calls_of("sync");
    assert!(!calls.is_empty());
    assert!(calls.iter().all(|c| seen(&c.request) == vec!["a"]));
    assert_eq!(rv_of(&w.get(&cm, "a").await.unwrap()), a_rv);
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_controlled_by_others_are_never_touched_or_shown() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    // `theirs` matches the parent's selector but is controlled by another object.
    let owner = w
        .create(
            &cm,
            json!({"metadata": {"name": "owner"}, "data": {"k": "v"}}),
        )
        .await;
    let theirs = w
        .create(
            &cm,
            json!({"metadata": {"name": "theirs", "labels": {"app": "p"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                    "uid": owner.metadata.uid.clone().unwrap(), "controller": true}]},
                "data": {"value": "theirs"}}),
        )
        .await;
    let theirs = serde_json::to_value(theirs).unwrap();
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    w.create(&par, parent_obj("p", json!([{"name": "a"}]), "x"))
        .await;
    w.wait_names(&cm, &["a", "owner", "theirs"]).await;
    engine.converge().await;
    let unchanged = |o: &Value| {
        assert_eq!(uid_of(o), uid_of(&theirs));
        assert_eq!(rv_of(o), rv_of(&theirs), "theirs was written: {o}");
    };
    unchanged(&w.get(&cm, "theirs").await.unwrap());
    let a_rv = rv_of(&w.get(&cm, "a").await.unwrap());

    // The hook now answers a child with the same name: the engine must not steal it.
    w.patch(
        &par,
        "p",
        json!({"spec": {"children": [{"name": "a"}, {"name": "theirs"}], "value": "y"}}),
    )
    .await;
    let err = engine.wait_sync_error("default/p", "theirs").await;
    assert!(
        err.contains("ConfigMap.v1 default/theirs is controlled by ConfigMap owner"),
        "{err}"
    );
    assert!(err.contains("never taken over"), "{err}");
    // The desired state is refused as a whole, before any write: `a` keeps its old value.
    engine.converge().await;
    unchanged(&w.get(&cm, "theirs").await.unwrap());
    let a = w.get(&cm, "a").await.unwrap();
    assert_eq!(rv_of(&a), a_rv);
    assert_eq!(a["data"]["value"], json!("x"));

    // The hook was never shown `theirs`, and nothing was tried on it.
    let calls = w.hook.calls_of("sync");
    assert!(calls.len() >= 2);
    for c in &calls {
        let s = seen(&c.request);
        assert!(s.is_empty() || s == vec!["a"], "{}", c.request["children"]);
    }
    assert_eq!(seen(&calls.last().unwrap().request), vec!["a"]);
    for e in engine.events() {
        if let EngineEvent::Action {
            verb,
            object,
            error,
            ..
        } = e
            && object == "default/theirs"
        {
            panic!("{verb:?} tried on theirs: {error:?}");
        }
    }
    let events = w.k8s_events("p").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "SyncError" && m.contains("theirs")),
        "{events:?}"
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_selector_labels_children_with_the_parent_uid() {
    let hook_fn = |req: &Value| {
        let mut kid = configmap("gen-a", json!({"value": "1"}));
        kid["metadata"]["labels"] = json!({"role": "x"});
        json!({"status": {"seen": seen(req)}, "children": [kid]})
    };
    let w = World::new("Parent", sync_fn(hook_fn)).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    // Orphans: one with the labels the hook uses (not enough without controller-uid), one
    // without labels at all.
    let stray = w
        .create(
            &cm,
            json!({"metadata": {"name": "stray", "labels": {"role": "x"}}}),
        )
        .await;
    let bare = w.create(&cm, json!({"metadata": {"name": "bare"}})).await;
    let mut d = composite(
        "gen",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
    );
    d["spec"]["generateSelector"] = json!(true);
    let engine = Running::start(w.client(), vec![def(d)]).await;
    // No spec.selector at all.
    let p = w
        .create(&par, json!({"metadata": {"name": "p"}, "spec": {}}))
        .await;
    let puid = p.metadata.uid.clone().unwrap();
    w.wait_names(&cm, &["bare", "gen-a", "stray"]).await;
    engine.converge().await;
    assert_eq!(engine.failed_syncs(), vec![]);
    let c = w.get(&cm, "gen-a").await.unwrap();
    assert_eq!(c["metadata"]["labels"]["controller-uid"], json!(puid));
    assert_eq!(c["metadata"]["labels"]["role"], json!("x"));
    assert_eq!(
        controller_ref(&c),
        Some(("Parent".into(), "p".into(), puid.clone()))
    );
    for o in [&stray, &bare] {
        let name = o.metadata.name.clone().unwrap();
        let now = w.get(&cm, &name).await.unwrap();
        assert_eq!(
            now["metadata"]["resourceVersion"],
            json!(o.metadata.resource_version),
            "{name} was touched"
        );
    }
    // The hook saw only its own child once it existed.
    let last = w.hook.calls_of("sync").last().unwrap().clone();
    assert_eq!(seen(&last.request), vec!["gen-a"]);
    assert_eq!(
        w.get(&par, "p").await.unwrap()["status"]["seen"],
        json!(["gen-a"])
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desired_child_outside_the_selector_fails_the_sync_before_any_write() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    w.create(
        &par,
        parent_obj("p", json!([{"name": "a"}, {"name": "b"}]), "v1"),
    )
    .await;
    w.wait_names(&cm, &["a", "b"]).await;
    engine.converge().await;
    let before = w.objects(&cm).await;
    let status_before = w.get(&par, "p").await.unwrap()["status"].clone();
    assert_eq!(status_before["observedGeneration"], json!(1));
    engine.clear_events();

    // a: new value (an update), b: dropped (a delete), c: labels outside the selector.
    w.patch(
        &par,
        "p",
        json!({"spec": {"value": "v2", "children": [{"name": "a"},
            {"name": "c", "labels": {"app": "other"}}]}}),
    )
    .await;
    let err = engine.wait_sync_error("default/p", "selector").await;
    assert!(err.contains("ConfigMap.v1 default/c"), "{err}");
    assert!(err.contains("do not match the parent's selector"), "{err}");
    engine.converge().await;

    assert_eq!(engine.writes(), vec![], "a failed plan writes nothing");
    let after = w.objects(&cm).await;
    assert_eq!(after.keys().collect::<Vec<_>>(), vec!["a", "b"]);
    for (name, o) in &before {
        assert_eq!(rv_of(&after[name]), rv_of(o), "{name} was written");
    }
    let parent = w.get(&par, "p").await.unwrap();
    assert_eq!(parent["status"], status_before, "no status write either");
    let events = w.k8s_events("p").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "SyncError" && m.contains("do not match the parent's selector")),
        "{events:?}"
    );
    engine.stop().await;
}

/// Start a `Parent` `p` with one child `c` (value v1), change the value to v2, and return the
/// world, the engine and `c` as it was before the change, once the hook has answered v2 and
/// the engine converged.
async fn strategy_setup(method: &str) -> (World, Running, Value) {
    let w = World::new("Parent", sync_fn(listed)).await;
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, method)]).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    w.create(&par, parent_obj("p", json!([{"name": "c"}]), "v1"))
        .await;
    let before = w
        .wait_object(&cm, "c", "c created", |o| o.is_some())
        .await
        .unwrap();
    assert_eq!(before["data"]["value"], json!("v1"));
    engine.converge().await;
    let before = w.get(&cm, "c").await.unwrap();
    engine.clear_events();
    w.patch(&par, "p", json!({"spec": {"value": "v2"}})).await;
    wait_hook_saw_value(&w, "p", "v2").await;
    (w, engine, before)
}

/// `(verb, object)` writes on children only (no status, no parent writes).
fn child_writes(engine: &Running) -> Vec<(ActionVerb, String)> {
    engine
        .writes()
        .into_iter()
        .filter(|(v, _)| !matches!(v, ActionVerb::Status))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_never_updates_but_recreates_a_deleted_child_with_new_content() {
    let (w, engine, before) = strategy_setup("OnDelete").await;
    let cm = cm_ar();
    engine.converge().await;
    let c = w.get(&cm, "c").await.unwrap();
    assert_eq!(c["data"]["value"], json!("v1"), "OnDelete never updates");
    assert_eq!(rv_of(&c), rv_of(&before), "not written at all");
    assert_eq!(child_writes(&engine), vec![]);
    assert_eq!(engine.failed_syncs(), vec![]);

    // Someone deletes it: it comes back with the new content.
    w.delete(&cm, "c").await;
    let c = w
        .wait_object(&cm, "c", "c recreated", |o| {
            o.is_some_and(|o| o["metadata"]["uid"] != before["metadata"]["uid"])
        })
        .await
        .unwrap();
    assert_eq!(c["data"]["value"], json!("v2"));
    engine.converge().await;
    assert_eq!(
        child_writes(&engine),
        vec![(ActionVerb::Create, "default/c".into())]
    );
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_deletes_then_creates_with_new_content() {
    let (w, engine, before) = strategy_setup("Recreate").await;
    let cm = cm_ar();
    let c = w
        .wait_object(&cm, "c", "c recreated with v2", |o| {
            o.is_some_and(|o| o["data"]["value"] == json!("v2"))
        })
        .await
        .unwrap();
    engine.converge().await;
    assert_ne!(uid_of(&c), uid_of(&before), "Recreate makes a new object");
    assert_eq!(
        child_writes(&engine),
        vec![
            (ActionVerb::Delete, "default/c".into()),
            (ActionVerb::Create, "default/c".into())
        ]
    );
    assert_eq!(controller_ref(&c).map(|r| r.1), Some("p".into()));
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_updates_the_same_object() {
    let (w, engine, before) = strategy_setup("InPlace").await;
    let cm = cm_ar();
    let c = w
        .wait_object(&cm, "c", "c updated to v2", |o| {
            o.is_some_and(|o| o["data"]["value"] == json!("v2"))
        })
        .await
        .unwrap();
    engine.converge().await;
    assert_eq!(uid_of(&c), uid_of(&before));
    assert_eq!(
        child_writes(&engine),
        vec![(ActionVerb::Update, "default/c".into())]
    );
    let last_applied: Value = serde_json::from_str(
        c["metadata"]["annotations"]["metacontroller.k8s.io/last-applied-configuration"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last_applied["data"]["value"], json!("v2"));
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_engine_converges_without_writes() {
    let w = World::new("Parent", sync_fn(listed)).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    // An orphan to adopt, so that the first engine does every kind of write.
    w.create(
        &cm,
        json!({"metadata": {"name": "q-0", "labels": {"app": "q"}}, "data": {"value": "old"}}),
    )
    .await;
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    w.create(
        &par,
        parent_obj("p", json!([{"name": "p-0"}, {"name": "p-1"}]), "x"),
    )
    .await;
    w.create(&par, parent_obj("q", json!([{"name": "q-0"}]), "y"))
        .await;
    w.wait_names(&cm, &["p-0", "p-1", "q-0"]).await;
    w.wait_object(&cm, "q-0", "q-0 adopted and updated", |o| {
        o.is_some_and(|o| o["data"]["value"] == json!("y") && controller_ref(o).is_some())
    })
    .await;
    engine.converge().await;
    assert!(!engine.writes().is_empty());
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;

    let rv = w.global_rv().await;
    let objects = w.objects(&cm).await;
    w.hook.clear();
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    engine.converge().await;
    // Both parents were really synced by the new engine (the hook was asked), yet nothing
    // was written.
    let mut synced: Vec<String> = w
        .hook
        .calls_of("sync")
        .iter()
        .map(Call::parent_name)
        .collect();
    synced.sort();
    synced.dedup();
    assert_eq!(synced, vec!["p", "q"]);
    assert_eq!(engine.writes(), vec![]);
    assert_eq!(engine.failed_syncs(), vec![]);
    assert_eq!(
        w.global_rv().await,
        rv,
        "the restarted engine wrote something"
    );
    assert_eq!(w.objects(&cm).await, objects);
    engine.stop().await;
}

/// A restart on converged parents syncs each parent exactly once (its `ParentAdded`), counted
/// from the restarted engine's own `SyncStarted` events: its routers hear nothing of the first
/// lists (children's initial `Added`, the `Relisted` after them), which used to reach a
/// controller that subscribed while the last informer was still publishing them and sync some
/// parents twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_converged_parents_syncs_each_parent_exactly_once() {
    const PARENTS: usize = 40;
    let w = World::new("Parent", sync_fn(listed)).await;
    let (cm, par) = (cm_ar(), parent_ar("Parent"));
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    let mut want: Vec<String> = Vec::new();
    for i in 0..PARENTS {
        let name = format!("r{i:02}");
        let kids = json!([{"name": format!("{name}-0")}, {"name": format!("{name}-1")},
            {"name": format!("{name}-2")}]);
        w.create(&par, parent_obj(&name, kids, "v")).await;
        want.push(format!("default/{name}"));
    }
    common::wait_for("every child created", common::TIMEOUT, || {
        let w = &w;
        let cm = &cm;
        async move { (w.names(cm).await.len() >= PARENTS * 3).then_some(()) }
    })
    .await;
    engine.converge().await;
    assert_eq!(engine.failed_syncs(), vec![]);
    engine.stop().await;

    let rv = w.global_rv().await;
    let engine = Running::start(w.client(), vec![cm_controller(&w.hook, "InPlace")]).await;
    engine.converge().await;
    let mut synced: Vec<String> = engine
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::SyncStarted { subject, .. } => Some(subject.parent),
            _ => None,
        })
        .collect();
    synced.sort();
    assert_eq!(
        synced, want,
        "each parent synced exactly once after the restart"
    );
    assert_eq!(engine.writes(), vec![]);
    assert_eq!(
        w.global_rv().await,
        rv,
        "the restarted engine wrote something"
    );
    engine.stop().await;
}

/// `--apply-strategy server-side`: children are created and updated by server-side apply as
/// field manager `kubectl-meta`, removed keys go away, and a restart writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_creates_updates_and_converges() {
    use kubectl_meta::engine::ApplyStrategy;
    use kubectl_meta::engine::EngineOptions;
    let w = World::new("Parent", sync_fn(counted)).await;
    let options = || EngineOptions {
        apply_strategy: ApplyStrategy::ServerSide,
        ..EngineOptions::default()
    };
    let engine =
        Running::start_with(w.client(), vec![controller(&w.hook, "InPlace")], options()).await;
    let par = parent_ar("Parent");
    w.create(
        &par,
        json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": {"app": "p"}}, "count": 1, "value": "a"}}),
    )
    .await;
    w.wait_names(&cm_ar(), &["p-0"]).await;
    engine.converge().await;
    let c0 = w.get(&cm_ar(), "p-0").await.unwrap();
    let managers: Vec<(String, String)> = c0["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["operation"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("kubectl-meta".to_string(), "Apply".to_string())),
        "{managers:?}"
    );
    assert_eq!(
        controller_ref(&c0).map(|r| r.1),
        Some("p".to_string()),
        "{c0}"
    );

    w.patch(&par, "p", json!({"spec": {"value": "b"}})).await;
    w.wait_object(&cm_ar(), "p-0", "p-0 applied with b", |o| {
        o.is_some_and(|o| o["data"]["value"] == json!("b"))
    })
    .await;
    engine.converge().await;
    assert_eq!(
        w.get(&cm_ar(), "p-0").await.unwrap()["metadata"]["uid"],
        c0["metadata"]["uid"]
    );
    engine.stop().await;

    let rv = w.global_rv().await;
    let engine =
        Running::start_with(w.client(), vec![controller(&w.hook, "InPlace")], options()).await;
    engine.converge().await;
    assert_eq!(engine.writes(), vec![]);
    assert_eq!(w.global_rv().await, rv);
    engine.stop().await;
}
