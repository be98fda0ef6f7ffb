//! Flight recordings made up in a test (no `kubectl meta run` needed), for `kubectl meta
//! replay`: a CompositeController `stepped` over HelloWorlds (example.kubectl-meta.dev/v1) whose
//! recorded sync answers give each parent `P` a ConfigMap `P-c` with `data.value` set to the
//! given values in turn. Every call's request observes what the answer before asked for, so
//! the recording holds no other writer; its first state is the parents alone.

use serde_json::{Value, json};

/// The definition the recordings carry (its webhook is never called: answers are recorded).
pub fn definition() -> Value {
    json!({"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
        "metadata": {"name": "stepped"},
        "spec": {"generateSelector": true,
            "parentResource": {"apiVersion": "example.kubectl-meta.dev/v1", "resource": "helloworlds"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps",
                "updateStrategy": {"method": "InPlace"}}],
            "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:9/sync"}}}}})
}

/// The HelloWorld `name` in `default`, as a hook request shows it.
pub fn parent(name: &str) -> Value {
    json!({"apiVersion": "example.kubectl-meta.dev/v1", "kind": "HelloWorld",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "resourceVersion": "1"},
        "spec": {"who": name}})
}

/// The ConfigMap `PARENT-c` with `data.value` `value`, as observed (`observed`: with the
/// server's metadata) or as an answer asks for it.
pub fn child(parent: &str, value: &str, observed: bool) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{parent}-c")}, "data": {"value": value}});
    if observed {
        c["metadata"] = json!({"name": format!("{parent}-c"), "namespace": "default",
            "uid": format!("uid-{parent}-c"), "resourceVersion": "2",
            "labels": {"controller-uid": format!("uid-{parent}")},
            "ownerReferences": [{"apiVersion": "example.kubectl-meta.dev/v1",
                "kind": "HelloWorld", "name": parent, "uid": format!("uid-{parent}"),
                "controller": true, "blockOwnerDeletion": true}]});
    }
    c
}

/// A recorded `hookCalled` of `parent`'s sync hook observing `children` (name -> object) and
/// answering `answer`'s ConfigMaps.
pub fn sync_call(parent_obj: &Value, children: Value, answer: &[Value]) -> Value {
    let name = parent_obj["metadata"]["name"].as_str().unwrap_or_default();
    json!({"event": "hookCalled", "controller": "stepped", "parent": format!("default/{name}"),
        "hook": "sync", "status": 200, "latencyMs": 1.0, "error": null,
        "request": {"controller": definition(), "parent": parent_obj,
            "children": {"ConfigMap.v1": children}, "related": {}, "finalizing": false},
        "response": {"children": answer}})
}

/// A recording document of `events` (each an event object) with the definition.
pub fn document(events: &[Value]) -> String {
    let events: Vec<Value> = events
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"seq": i, "timeMs": 1_700_000_000_000_u64 + i as u64, "event": e}))
        .collect();
    json!({"apiVersion": "flight.kubectl-meta.io/v1", "kind": "FlightRecording",
        "limitBytes": 8_388_608, "bytes": 1, "evicted": 0, "lost": 0,
        "events": events, "controllers": [definition()]})
    .to_string()
}

/// The recording of `parents`' syncs, round after round: in round `i` each parent's call
/// observes `values[i - 1]` (nothing in round 0) and answers `values[i]`.
pub fn recording(parents: &[&str], values: &[&str]) -> String {
    let mut events = Vec::new();
    for (i, value) in values.iter().enumerate() {
        for p in parents {
            let observed = match i {
                0 => json!({}),
                _ => json!({format!("{p}-c"): child(p, values[i - 1], true)}),
            };
            events.push(sync_call(&parent(p), observed, &[child(p, value, false)]));
        }
    }
    document(&events)
}
