//! The pure planner (`engine::planner`) and the live sync agree: a plan computed from plain API
//! reads, without informers or a running engine, lists exactly the writes the engine's first
//! sync of the same parent then makes, and the objects end as the plan's `after` says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::common::engine::*;
use kube_apimachinery::selector::LabelSelector;
use kubectl_meta::engine::events::{ActionVerb, EngineEvent};
use kubectl_meta::engine::plan::hookapi::{self, Version};
use kubectl_meta::engine::plan::planner::{self, ObjectAction};
use kubectl_meta::engine::plan::writes::ChildType;
use kubectl_meta::k8s::object;
use kubectl_meta::spec::UpdateMethod;
use serde_json::{Value, json};

/// Children from `spec.children` (`{name, value}`, labelled `app=<parent>`); status: the names
/// of the children the hook was shown.
fn hook(req: &Value) -> Value {
    let p = &req["parent"];
    let pname = p["metadata"]["name"].as_str().unwrap();
    let mut kids = Vec::new();
    for c in p["spec"]["children"].as_array().into_iter().flatten() {
        let mut cm = configmap(c["name"].as_str().unwrap(), json!({"value": c["value"]}));
        cm["metadata"]["labels"] = json!({"app": pname});
        kids.push(cm);
    }
    let mut seen: Vec<String> = req["children"]["ConfigMap.v1"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    seen.sort();
    json!({"status": {"seen": seen}, "children": kids})
}

fn verb_of(a: ObjectAction) -> Option<ActionVerb> {
    match a {
        ObjectAction::Create => Some(ActionVerb::Create),
        ObjectAction::Update => Some(ActionVerb::Update),
        ObjectAction::Delete | ObjectAction::Recreate => Some(ActionVerb::Delete),
        ObjectAction::Adopt => Some(ActionVerb::Adopt),
        ObjectAction::Release => Some(ActionVerb::Release),
        ObjectAction::InSync | ObjectAction::Skip | ObjectAction::Waiting | ObjectAction::Keep => {
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sync_does_exactly_what_the_pure_plan_says() {
    let w = World::new("Parent", sync_fn(hook)).await;
    let cm = core_ar("ConfigMap", "configmaps");
    let par = parent_ar("Parent");
    // Before any engine runs: an orphan to adopt and update, one to adopt and delete, one
    // that does not match (left alone), one already as desired except for our annotation.
    for (name, app, value) in [
        ("keep", "p", "old"),
        ("drop", "p", "old"),
        ("other", "q", "old"),
    ] {
        w.create(
            &cm,
            json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"value": value}}),
        )
        .await;
    }
    w.create(
        &par,
        json!({"metadata": {"name": "p"}, "spec": {
            "selector": {"matchLabels": {"app": "p"}},
            "children": [{"name": "keep", "value": "new"}, {"name": "fresh", "value": "v"}]}}),
    )
    .await;

    // The pure plan, from plain reads.
    let parent = w.get(&par, "p").await.expect("parent");
    let puid = object::uid(&parent).unwrap().to_string();
    let mut owned = Vec::new();
    let mut orphans = Vec::new();
    for (_, o) in w.objects(&cm).await {
        match object::controller_ref(&o) {
            Some(r) if r.uid == puid => owned.push(Arc::new(o)),
            Some(_) => {}
            None => orphans.push(Arc::new(o)),
        }
    }
    let selector = LabelSelector::from_label_selector(&parent["spec"]["selector"]).unwrap();
    let claimed = planner::claim(
        &parent,
        &selector,
        [planner::Candidates {
            type_key: "ConfigMap.v1",
            owned,
            orphans,
        }],
    );
    let types = vec![ChildType {
        key: "ConfigMap.v1".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespaced: true,
        method: UpdateMethod::InPlace,
    }];
    let groups: Vec<(String, Vec<Arc<Value>>)> = claimed.observed.clone().into_iter().collect();
    let request = hookapi::composite_request(
        &json!({}),
        &parent,
        hookapi::object_map(Version::V1, true, &groups),
        json!({}),
        false,
    );
    let resp = hookapi::decode_sync("sync", Version::V1, &hook(&request)).unwrap();
    let desired =
        planner::normalize_desired(&parent, &types, &selector, false, resp.children.clone())
            .unwrap();
    let plan = planner::plan_composite(&planner::CompositeInput {
        parent: &parent,
        types: &types,
        claimed: &claimed,
        answer: Some(planner::Answer {
            desired: &desired,
            status: resp.status.as_ref(),
            finalized: false,
            resync_after_seconds: None,
        }),
        rollout: None,
        finalizer: planner::FinalizerInput {
            name: "metacontroller.io/compositecontroller-planned",
            has_finalize_hook: false,
            finalizing: false,
        },
        held: &BTreeMap::new(),
        now: "2026-01-01T00:00:00Z",
    });
    let mut planned: Vec<(ActionVerb, String)> = plan
        .objects
        .iter()
        .filter_map(|o| Some((verb_of(o.action)?, o.id.object())))
        .collect();
    if plan.status.is_some() {
        planned.push((ActionVerb::Status, "default/p".into()));
    }
    planned.sort_by_key(|(v, o)| (v.to_string(), o.clone()));
    let expected: Vec<(ActionVerb, String)> = vec![
        (ActionVerb::Adopt, "default/drop".into()),
        (ActionVerb::Adopt, "default/keep".into()),
        (ActionVerb::Create, "default/fresh".into()),
        (ActionVerb::Delete, "default/drop".into()),
        (ActionVerb::Status, "default/p".into()),
        (ActionVerb::Update, "default/keep".into()),
    ];
    assert_eq!(planned, expected, "the pure plan");

    // The live sync of the same parent.
    let engine = Running::start(
        w.client(),
        vec![def(composite(
            "planned",
            "Parent",
            json!([{"apiVersion": "v1", "resource": "configmaps",
                "updateStrategy": {"method": "InPlace"}}]),
            json!({"sync": {"webhook": {"url": w.hook.url("sync")}}}),
        ))],
    )
    .await;
    engine.converge().await;
    let events = engine.events();
    let start = events
        .iter()
        .position(|e| matches!(e, EngineEvent::SyncStarted { subject, .. } if subject.parent == "default/p"))
        .expect("a sync of p");
    let end = start
        + events[start..]
            .iter()
            .position(
                |e| matches!(e, EngineEvent::SyncFinished { subject, .. } if subject.parent == "default/p"),
            )
            .expect("the sync ended");
    let mut done: Vec<(ActionVerb, String)> = events[start..end]
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Action {
                verb,
                object,
                error: None,
                ..
            } if *verb != ActionVerb::NoOp => Some((*verb, object.clone())),
            _ => None,
        })
        .collect();
    done.sort_by_key(|(v, o)| (v.to_string(), o.clone()));
    assert_eq!(done, planned, "the live sync did what the plan said");

    // The live sync published the same per-object plan.
    let live: BTreeSet<(String, String)> = events[start..end]
        .iter()
        .find_map(|e| match e {
            EngineEvent::Planned { objects, .. } => Some(
                objects
                    .iter()
                    .map(|o| (format!("{:?}", o.action), o.id.object()))
                    .collect(),
            ),
            _ => None,
        })
        .expect("a planned event");
    let pure: BTreeSet<(String, String)> = plan
        .objects
        .iter()
        .map(|o| (format!("{:?}", o.action), o.id.object()))
        .collect();
    assert_eq!(live, pure);

    // Created and updated objects are as the plan's `after` said (data and labels).
    let now = w.objects(&cm).await;
    for o in plan
        .objects
        .iter()
        .filter(|o| matches!(o.action, ObjectAction::Create | ObjectAction::Update))
    {
        let after = o.after.as_ref().expect("after");
        let got = &now[&o.id.key.name];
        assert_eq!(got["data"], after["data"], "{}", o.id);
        assert_eq!(
            got["metadata"]["labels"], after["metadata"]["labels"],
            "{}",
            o.id
        );
        assert_eq!(
            object::controller_ref(got).map(|r| r.uid.clone()),
            Some(puid.clone())
        );
    }
    // Adoptions: before without an owner, after with ours.
    for o in plan
        .objects
        .iter()
        .filter(|o| o.action == ObjectAction::Adopt)
    {
        assert!(object::controller_ref(o.before.as_ref().unwrap()).is_none());
        assert_eq!(
            object::controller_ref(o.after.as_ref().unwrap()).map(|r| r.uid.clone()),
            Some(puid.clone())
        );
    }
    assert!(!now.contains_key("drop"));
    assert_eq!(now["other"]["data"]["value"], "old");
    engine.stop().await;
}
