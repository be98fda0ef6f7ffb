//! CompositeController rolling updates (RollingInPlace, RollingRecreate) on Pods with status
//! checks: one child at a time in hook order, waiting for readiness, the `Updated` condition,
//! ControllerRevision progress, and a rollout that survives an engine restart.
//!
//! The sandbox runs without its simulated kubelet: the tests set the pods' `Ready` condition
//! themselves, so a rollout moves exactly when the test lets it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::common::engine::*;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::discovery::ApiResource;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent};
use serde_json::{Value, json};

const REPLICAS: u64 = 3;

fn pod_ar() -> ApiResource {
    core_ar("Pod", "pods")
}

fn rev_ar() -> ApiResource {
    ApiResource {
        group: "metacontroller.k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "metacontroller.k8s.io/v1alpha1".into(),
        kind: "ControllerRevision".into(),
        plural: "controllerrevisions".into(),
    }
}

/// Pods `<parent>-<i>` for i in 0..spec.replicas, listed in REVERSE order (so that hook order
/// differs from name order), image from spec.image.
fn pods(req: &Value) -> Value {
    let p = &req["parent"];
    let name = p["metadata"]["name"].as_str().unwrap();
    let n = p["spec"]["replicas"].as_u64().unwrap_or(0);
    let image = p["spec"]["image"].as_str().unwrap();
    let kids: Vec<Value> = (0..n)
        .rev()
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{name}-{i}"), "labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]}})
        })
        .collect();
    json!({"status": {"replicas": n}, "children": kids})
}

fn controller(hook: &HookServer, method: &str) -> kubectl_meta::spec::ControllerDef {
    def(composite(
        "rolling",
        "Parent",
        json!([{"apiVersion": "v1", "resource": "pods", "updateStrategy": {
            "method": method,
            "statusChecks": {"conditions": [{"type": "Ready", "status": "True"}]}}}]),
        json!({"sync": {"webhook": {"url": hook.url("sync")}}}),
    ))
}

/// Pod name -> (image, uid).
async fn pod_state(w: &World) -> BTreeMap<String, (String, String)> {
    w.objects(&pod_ar())
        .await
        .into_iter()
        .map(|(n, o)| {
            let image = o["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap()
                .to_string();
            let uid = o["metadata"]["uid"].as_str().unwrap().to_string();
            (n, (image, uid))
        })
        .collect()
}

/// Pod name -> image.
async fn images(w: &World) -> BTreeMap<String, String> {
    pod_state(w)
        .await
        .into_iter()
        .map(|(n, (i, _))| (n, i))
        .collect()
}

fn expect_images(want: &[(&str, &str)]) -> BTreeMap<String, String> {
    want.iter()
        .map(|(n, i)| (n.to_string(), i.to_string()))
        .collect()
}

/// ControllerRevisions in `default`: name -> (claimed Pod names, the revision object).
async fn revisions(w: &World) -> BTreeMap<String, (Vec<String>, Value)> {
    let api: Api<DynamicObject> = Api::namespaced_with(w.client().clone(), "default", &rev_ar());
    api.list(&ListParams::default())
        .await
        .expect("list revisions")
        .items
        .into_iter()
        .map(|o| {
            let v = serde_json::to_value(&o).unwrap();
            let mut names: Vec<String> = v["children"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["kind"] == json!("Pod") && c["apiGroup"] == json!(""))
                .flat_map(|c| c["names"].as_array().cloned().unwrap_or_default())
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            names.sort();
            (o.metadata.name.clone().unwrap(), (names, v))
        })
        .collect()
}

/// The claimed names of every revision, sorted by revision name, with the latest (the one
/// whose parentPatch has `image`) marked.
async fn claims_by_image(w: &World) -> BTreeMap<String, Vec<String>> {
    revisions(w)
        .await
        .into_values()
        .map(|(names, v)| {
            (
                v["parentPatch"]["spec"]["image"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                names,
            )
        })
        .collect()
}

/// Set (or clear) a pod's Ready condition through the status subresource.
async fn set_ready(w: &World, name: &str, ready: bool) {
    let s = if ready { "True" } else { "False" };
    w.patch_status(
        &pod_ar(),
        name,
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": s}]}}),
    )
    .await;
}

/// The parent's `Updated` condition.
async fn updated(w: &World) -> Value {
    let p = w.get(&parent_ar("Parent"), "p").await.unwrap();
    condition(&p, "Updated").cloned().unwrap_or(Value::Null)
}

/// Wait until the parent's `Updated` condition has `reason` and a message containing `text`.
async fn wait_updated(w: &World, reason: &str, text: &str) -> Value {
    let par = parent_ar("Parent");
    let p = w
        .wait_object(
            &par,
            "p",
            &format!("condition Updated {reason} mentioning {text:?}"),
            |o| {
                o.and_then(|o| condition(o, "Updated")).is_some_and(|c| {
                    c["reason"] == json!(reason) && c["message"].as_str().unwrap().contains(text)
                })
            },
        )
        .await
        .unwrap();
    condition(&p, "Updated").unwrap().clone()
}

/// Every `Updated` condition reason the parent `p` goes through from now on, in order
/// (consecutive repeats collapsed), from a watch: unlike polling, it sees every status write.
struct ReasonLog {
    reasons: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ReasonLog {
    async fn start(w: &World) -> ReasonLog {
        let api = w.api(&parent_ar("Parent"));
        let rv = api
            .get("p")
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let reasons = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&reasons);
        let mut stream = api
            .watch(&WatchParams::default().fields("metadata.name=p"), &rv)
            .await
            .unwrap()
            .boxed();
        let task = tokio::spawn(async move {
            while let Some(ev) = stream.next().await {
                if let Ok(WatchEvent::Modified(o)) = ev {
                    let v = serde_json::to_value(o).unwrap();
                    if let Some(r) = condition(&v, "Updated").and_then(|c| c["reason"].as_str()) {
                        let mut l = log.lock().unwrap();
                        if l.last().map(String::as_str) != Some(r) {
                            l.push(r.to_string());
                        }
                    }
                }
            }
        });
        ReasonLog { reasons, task }
    }

    fn reasons(&self) -> Vec<String> {
        self.reasons.lock().unwrap().clone()
    }
}

impl Drop for ReasonLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Writes of `verb` on pods, in order.
fn pod_writes(engine: &Running, verb: ActionVerb) -> Vec<String> {
    engine
        .writes()
        .into_iter()
        .filter(|(v, o)| *v == verb && o.starts_with("default/p-"))
        .map(|(_, o)| o)
        .collect()
}

/// Start a parent `p` (3 pods, image v1), converge, and check the starting point: every pod
/// on the only revision, `Updated` = OnLatestRevision.
async fn start_rollout_world(method: &str) -> (World, Running) {
    let w = World::without_kubelet("Parent", sync_fn(pods)).await;
    let engine = Running::start(w.client(), vec![controller(&w.hook, method)]).await;
    // The engine installed the ControllerRevision CRD it keeps rollout progress in.
    let crds: Api<DynamicObject> = Api::all_with(
        w.client().clone(),
        &ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    );
    assert!(
        crds.get_opt("controllerrevisions.metacontroller.k8s.io")
            .await
            .unwrap()
            .is_some()
    );
    // ... and said so, without an error while the new CRD became served.
    let events = engine.events();
    let errors: Vec<&EngineEvent> = events
        .iter()
        .filter(|e| matches!(e, EngineEvent::Error { .. }))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::Info { message, .. }
            if message.contains("installed CRD controllerrevisions.metacontroller.k8s.io"))),
        "{events:?}"
    );
    let p = w
        .create(
            &parent_ar("Parent"),
            json!({"metadata": {"name": "p"}, "spec": {
                "selector": {"matchLabels": {"app": "p"}}, "replicas": REPLICAS, "image": "img:v1"}}),
        )
        .await;
    let puid = p.metadata.uid.clone().unwrap();
    w.wait_names(&pod_ar(), &["p-0", "p-1", "p-2"]).await;
    engine.converge().await;
    assert_eq!(engine.failed_syncs(), vec![]);

    let c = updated(&w).await;
    assert_eq!(c["reason"], json!("OnLatestRevision"), "{c}");
    assert_eq!(c["status"], json!("True"), "{c}");
    let revs = revisions(&w).await;
    assert_eq!(revs.len(), 1, "{revs:?}");
    let (name, (claimed, rev)) = revs.into_iter().next().unwrap();
    assert!(name.starts_with("p-"), "{name}");
    assert_eq!(claimed, vec!["p-0", "p-1", "p-2"]);
    assert_eq!(
        controller_ref(&rev),
        Some(("Parent".into(), "p".into(), puid))
    );
    assert_eq!(rev["parentPatch"]["spec"]["image"], json!("img:v1"));
    // Nothing is Ready without a kubelet.
    for (_, pod) in w.objects(&pod_ar()).await {
        assert!(condition(&pod, "Ready").is_none(), "{pod}");
    }
    engine.clear_events();
    (w, engine)
}

/// After a rollout finished: a restarted engine writes nothing.
async fn assert_restart_writes_nothing(w: &World, method: &str) {
    let rv = w.global_rv().await;
    let pods_before = w.objects(&pod_ar()).await;
    w.hook.clear();
    let engine = Running::start(w.client(), vec![controller(&w.hook, method)]).await;
    engine.converge().await;
    assert!(!w.hook.calls_of("sync").is_empty(), "the parent was synced");
    assert_eq!(engine.writes(), vec![]);
    assert_eq!(engine.failed_syncs(), vec![]);
    assert_eq!(
        w.global_rv().await,
        rv,
        "a converged restart wrote something"
    );
    assert_eq!(w.objects(&pod_ar()).await, pods_before);
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_in_place_goes_one_pod_at_a_time_waits_for_ready_and_survives_a_restart() {
    let (w, engine) = start_rollout_world("RollingInPlace").await;
    let uids: BTreeMap<String, String> = pod_state(&w)
        .await
        .into_iter()
        .map(|(n, (_, u))| (n, u))
        .collect();

    // New template: the first pod in hook order (p-2) is updated, then the rollout waits for it.
    let log = ReasonLog::start(&w).await;
    w.patch(
        &parent_ar("Parent"),
        "p",
        json!({"spec": {"image": "img:v2"}}),
    )
    .await;
    let c = wait_updated(&w, "RolloutWaiting", "p-2 to pass status checks").await;
    assert_eq!(c["status"], json!("False"));
    engine.settle().await;
    assert_eq!(
        images(&w).await,
        expect_images(&[("p-0", "img:v1"), ("p-1", "img:v1"), ("p-2", "img:v2")])
    );
    assert_eq!(pod_writes(&engine, ActionVerb::Update), vec!["default/p-2"]);
    assert_eq!(
        claims_by_image(&w).await,
        BTreeMap::from([
            (
                "img:v1".to_string(),
                vec!["p-0".to_string(), "p-1".to_string()]
            ),
            ("img:v2".to_string(), vec!["p-2".to_string()]),
        ])
    );
    // The hook was asked for the old revision too (the parent as it was: image v1).
    assert!(
        w.hook
            .calls_of("sync")
            .iter()
            .any(|c| c.request["parent"]["spec"]["image"] == json!("img:v1")
                && c.request["parent"]["metadata"]["generation"] == json!(2))
    );
    // The parent's status went through each step.
    assert_eq!(
        log.reasons(),
        vec!["OnLatestRevision", "RolloutProgressing", "RolloutWaiting"],
        "Updated condition reasons so far (the first is the spec edit)"
    );

    // Still not Ready: nothing moves.
    set_ready(&w, "p-2", false).await;
    engine.settle().await;
    assert_eq!(pod_writes(&engine, ActionVerb::Update), vec!["default/p-2"]);

    // p-2 Ready -> p-1 is updated, and the rollout waits for it.
    set_ready(&w, "p-2", true).await;
    wait_updated(&w, "RolloutWaiting", "p-1 to pass status checks").await;
    engine.settle().await;
    assert_eq!(
        images(&w).await,
        expect_images(&[("p-0", "img:v1"), ("p-1", "img:v2"), ("p-2", "img:v2")])
    );
    assert_eq!(
        pod_writes(&engine, ActionVerb::Update),
        vec!["default/p-2", "default/p-1"]
    );
    assert_eq!(engine.failed_syncs(), vec![]);

    // Restart mid-rollout: the new engine picks up the progress from the ControllerRevisions;
    // it neither redoes p-2/p-1 nor moves on (p-1 is not Ready), and writes nothing at all.
    engine.stop().await;
    let rv = w.global_rv().await;
    w.hook.clear();
    let engine = Running::start(w.client(), vec![controller(&w.hook, "RollingInPlace")]).await;
    engine.settle().await;
    assert!(!w.hook.calls_of("sync").is_empty(), "the new engine synced");
    assert_eq!(
        engine.writes(),
        vec![],
        "a restart mid-rollout rewrote something"
    );
    assert_eq!(w.global_rv().await, rv);
    assert_eq!(updated(&w).await["reason"], json!("RolloutWaiting"));
    assert_eq!(
        images(&w).await,
        expect_images(&[("p-0", "img:v1"), ("p-1", "img:v2"), ("p-2", "img:v2")])
    );

    // p-1 Ready -> p-0, the last one; then every child is on the latest revision (the
    // condition says so at once: nothing is left to roll, whatever p-0's readiness).
    set_ready(&w, "p-1", true).await;
    let c = wait_updated(&w, "OnLatestRevision", "all 3 children").await;
    assert_eq!(c["status"], json!("True"));
    engine.converge().await;
    assert_eq!(
        log.reasons(),
        vec![
            "OnLatestRevision",
            "RolloutProgressing",
            "RolloutWaiting",
            "RolloutProgressing",
            "RolloutWaiting",
            "RolloutProgressing",
            "OnLatestRevision"
        ]
    );
    assert_eq!(pod_writes(&engine, ActionVerb::Update), vec!["default/p-0"]);
    assert_eq!(engine.failed_syncs(), vec![]);

    // All on v2, all the same objects (in place); one revision left, claiming everything.
    let state = pod_state(&w).await;
    for (n, (image, uid)) in &state {
        assert_eq!(image, "img:v2", "{n}");
        assert_eq!(uid, &uids[n], "{n} was recreated");
    }
    assert_eq!(
        claims_by_image(&w).await,
        BTreeMap::from([(
            "img:v2".to_string(),
            vec!["p-0".to_string(), "p-1".to_string(), "p-2".to_string()]
        )])
    );
    engine.stop().await;
    assert_restart_writes_nothing(&w, "RollingInPlace").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_recreate_replaces_one_pod_at_a_time_and_waits_for_ready() {
    let (w, engine) = start_rollout_world("RollingRecreate").await;
    let before = pod_state(&w).await;

    w.patch(
        &parent_ar("Parent"),
        "p",
        json!({"spec": {"image": "img:v2"}}),
    )
    .await;
    wait_updated(&w, "RolloutWaiting", "p-2 to pass status checks").await;
    engine.settle().await;
    let now = pod_state(&w).await;
    assert_eq!(now["p-2"].0, "img:v2");
    assert_ne!(now["p-2"].1, before["p-2"].1, "p-2 was recreated");
    assert_eq!(now["p-1"], before["p-1"], "p-1 untouched");
    assert_eq!(now["p-0"], before["p-0"], "p-0 untouched");
    assert_eq!(pod_writes(&engine, ActionVerb::Delete), vec!["default/p-2"]);
    assert_eq!(pod_writes(&engine, ActionVerb::Create), vec!["default/p-2"]);
    assert_eq!(
        pod_writes(&engine, ActionVerb::Update),
        Vec::<String>::new()
    );

    // Restart while waiting on the recreated p-2: nothing is redone.
    engine.stop().await;
    let rv = w.global_rv().await;
    let engine = Running::start(w.client(), vec![controller(&w.hook, "RollingRecreate")]).await;
    engine.settle().await;
    assert_eq!(engine.writes(), vec![]);
    assert_eq!(w.global_rv().await, rv);
    assert_eq!(pod_state(&w).await, now);

    set_ready(&w, "p-2", true).await;
    wait_updated(&w, "RolloutWaiting", "p-1 to pass status checks").await;
    engine.settle().await;
    let now = pod_state(&w).await;
    assert_eq!(now["p-1"].0, "img:v2");
    assert_ne!(now["p-1"].1, before["p-1"].1);
    assert_eq!(now["p-0"], before["p-0"], "p-0 untouched");

    set_ready(&w, "p-1", true).await;
    wait_updated(&w, "OnLatestRevision", "all 3 children").await;
    engine.converge().await;
    assert_eq!(
        pod_writes(&engine, ActionVerb::Delete),
        vec!["default/p-1", "default/p-0"]
    );
    assert_eq!(
        pod_writes(&engine, ActionVerb::Create),
        vec!["default/p-1", "default/p-0"]
    );
    assert_eq!(engine.failed_syncs(), vec![]);
    let now = pod_state(&w).await;
    for n in ["p-0", "p-1", "p-2"] {
        assert_eq!(now[n].0, "img:v2");
        assert_ne!(now[n].1, before[n].1, "{n} was not recreated");
    }
    assert_eq!(
        claims_by_image(&w).await,
        BTreeMap::from([(
            "img:v2".to_string(),
            vec!["p-0".to_string(), "p-1".to_string(), "p-2".to_string()]
        )])
    );
    engine.stop().await;
    assert_restart_writes_nothing(&w, "RollingRecreate").await;
}

// --- Template changes of every kind (issue 14: adding template annotations for the first time
// recreated every pod at once). The parent is StatefulSet-like: `spec.template` is the pod
// template, copied into each pod (metadata.annotations and spec).

/// Pods `<parent>-<i>` from `spec.template`, highest ordinal first (the RollingRecreate order).
fn template_pods(req: &Value) -> Value {
    let p = &req["parent"];
    let name = p["metadata"]["name"].as_str().unwrap();
    let n = p["spec"]["replicas"].as_u64().unwrap_or(0);
    let template = &p["spec"]["template"];
    let kids: Vec<Value> = (0..n)
        .rev()
        .map(|i| {
            let mut meta = json!({"name": format!("{name}-{i}"), "labels": {"app": name}});
            if let Some(a) = template["metadata"].get("annotations") {
                meta["annotations"] = a.clone();
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": template["spec"].clone()})
        })
        .collect();
    json!({"status": {"replicas": n}, "children": kids})
}

/// A pod template with image `image` and, when given, annotations.
fn template(image: &str, annotations: Option<Value>) -> Value {
    let mut t = json!({"metadata": {"labels": {"app": "p"}},
        "spec": {"containers": [{"name": "c", "image": image}]}});
    if let Some(a) = annotations {
        t["metadata"]["annotations"] = a;
    }
    t
}

/// A converged parent `p` with 3 pods from `template`, RollingRecreate, one revision.
async fn start_template_world(template: Value) -> (World, Running) {
    let w = World::without_kubelet("Parent", sync_fn(template_pods)).await;
    let engine = Running::start(w.client(), vec![controller(&w.hook, "RollingRecreate")]).await;
    w.create(
        &parent_ar("Parent"),
        json!({"metadata": {"name": "p"}, "spec": {
            "selector": {"matchLabels": {"app": "p"}}, "replicas": REPLICAS,
            "template": template}}),
    )
    .await;
    w.wait_names(&pod_ar(), &["p-0", "p-1", "p-2"]).await;
    engine.converge().await;
    assert_eq!(engine.failed_syncs(), vec![]);
    assert_eq!(updated(&w).await["reason"], json!("OnLatestRevision"));
    assert_eq!(revisions(&w).await.len(), 1);
    engine.clear_events();
    (w, engine)
}

/// Pod name -> uid.
async fn uids(w: &World) -> BTreeMap<String, String> {
    pod_state(w)
        .await
        .into_iter()
        .map(|(n, (_, u))| (n, u))
        .collect()
}

/// Walk a RollingRecreate rollout from pod `p-<first>` down to `p-0`: at each step exactly the
/// pods from `first` down to the current one are recreated with the new template (`is_new`),
/// the lower ones untouched (`before`: their uids before the rollout), and the next pod goes
/// only once the current one is Ready. `deletes` are the pod deletions made before the walk.
async fn walk_recreate(
    w: &World,
    engine: &Running,
    first: u64,
    before: &BTreeMap<String, String>,
    is_new: impl Fn(&Value) -> bool,
    mut deletes: Vec<String>,
) {
    for i in (0..=first).rev() {
        if i > 0 {
            wait_updated(w, "RolloutWaiting", &format!("p-{i} to pass status checks")).await;
            engine.settle().await;
        } else {
            wait_updated(w, "OnLatestRevision", "all 3 children").await;
            engine.converge().await;
            w.wait_names(&pod_ar(), &["p-0", "p-1", "p-2"]).await;
        }
        deletes.push(format!("default/p-{i}"));
        assert_eq!(
            pod_writes(engine, ActionVerb::Delete),
            deletes,
            "deletions when p-{i} is the pod being rolled"
        );
        let pods = w.objects(&pod_ar()).await;
        for (n, pod) in &pods {
            let ordinal: u64 = n.trim_start_matches("p-").parse().unwrap();
            let uid = pod["metadata"]["uid"].as_str().unwrap();
            if ordinal >= i {
                assert!(is_new(pod), "{n} has the new template: {pod}");
            } else {
                assert!(!is_new(pod), "{n} still has the old template: {pod}");
                assert_eq!(uid, before[n], "{n} is untouched");
            }
        }
        if i > 0 {
            // The rollout does not move while the rolled pod is not Ready.
            engine.settle().await;
            assert_eq!(pod_writes(engine, ActionVerb::Delete), deletes);
            set_ready(w, &format!("p-{i}"), true).await;
        }
    }
    assert_eq!(engine.failed_syncs(), vec![]);
    let revs = revisions(w).await;
    assert_eq!(revs.len(), 1, "only the latest revision is left: {revs:?}");
    let (_, (claimed, _)) = revs.into_iter().next().unwrap();
    assert_eq!(claimed, vec!["p-0", "p-1", "p-2"]);
}

fn annotation(pod: &Value, key: &str) -> Option<String> {
    pod["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_string)
}

/// From pods on `initial`'s template, `patch` the parent's template and walk the whole
/// rollout one pod at a time (`is_new` recognises a pod on the new template); a restart
/// afterwards writes nothing.
async fn template_change_rolls_one_at_a_time(
    initial: Option<Value>,
    patch: Value,
    is_new: impl Fn(&Value) -> bool,
) {
    let (w, engine) = start_template_world(template("img:v1", initial)).await;
    let before = uids(&w).await;
    w.patch(&parent_ar("Parent"), "p", patch).await;
    walk_recreate(&w, &engine, 2, &before, is_new, vec![]).await;
    engine.stop().await;
    assert_restart_writes_nothing(&w, "RollingRecreate").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_recreate_of_template_annotations_added_for_the_first_time_goes_one_at_a_time() {
    template_change_rolls_one_at_a_time(
        None,
        json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}}),
        |p| annotation(p, "rev").as_deref() == Some("2"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_recreate_of_a_changed_template_field_goes_one_at_a_time() {
    template_change_rolls_one_at_a_time(
        Some(json!({"rev": "1", "keep": "k"})),
        json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}}),
        |p| annotation(p, "rev").as_deref() == Some("2") && annotation(p, "keep").is_some(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_recreate_of_a_removed_template_field_goes_one_at_a_time() {
    template_change_rolls_one_at_a_time(
        Some(json!({"rev": "1"})),
        json!({"spec": {"template": {"metadata": {"annotations": null}}}}),
        |p| annotation(p, "rev").is_none(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_during_a_rollout_rerolls_the_moved_pod_then_continues_one_at_a_time() {
    let (w, engine) = start_template_world(template("img:v1", None)).await;
    let before = uids(&w).await;
    // First change (a field added): p-2 is recreated and the rollout waits for it.
    w.patch(
        &parent_ar("Parent"),
        "p",
        json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}}),
    )
    .await;
    wait_updated(&w, "RolloutWaiting", "p-2 to pass status checks").await;
    engine.settle().await;
    assert_eq!(pod_writes(&engine, ActionVerb::Delete), vec!["default/p-2"]);
    assert_eq!(revisions(&w).await.len(), 2);
    // Second change before p-2 is Ready (a field changed): p-2, the only pod that left the
    // first revision, is recreated again with the newest template; p-1 and p-0 still wait.
    w.patch(
        &parent_ar("Parent"),
        "p",
        json!({"spec": {"template": {"metadata": {"annotations": {"rev": "3"}},
            "spec": {"containers": [{"name": "c", "image": "img:v3"}]}}}}),
    )
    .await;
    let is_new = |p: &Value| {
        annotation(p, "rev").as_deref() == Some("3")
            && p["spec"]["containers"][0]["image"] == json!("img:v3")
    };
    w.wait_object(&pod_ar(), "p-2", "p-2 on the newest template", |o| {
        o.is_some_and(is_new)
    })
    .await;
    walk_recreate(
        &w,
        &engine,
        2,
        &before,
        is_new,
        vec!["default/p-2".to_string()],
    )
    .await;
    engine.stop().await;
    assert_restart_writes_nothing(&w, "RollingRecreate").await;
}
