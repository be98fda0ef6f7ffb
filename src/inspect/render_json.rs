//! The machine output: the graph as one JSON (or YAML) document, `{target, roots, nodes,
//! edges, skipped, governing, notes}`; each edge has a `kind` (`controller`, `owner`,
//! `attachment`, `adoption-candidate`, `map-input`). The shape is described by
//! `docs/inspect-graph.schema.json`, which the tests check the output against.

use serde_json::{Map, Value, json};

use super::graph::{Graph, Node};
use crate::k8s::object;

/// `apiVersion` of the document.
pub const API_VERSION: &str = "kubectl-meta.dev/v1alpha1";
/// `kind` of the document.
pub const KIND: &str = "InspectGraph";

/// The graph as a JSON value.
pub fn to_value(g: &Graph) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "target": g.target,
        "roots": g.roots,
        "nodes": g.nodes.values().map(|n| node(g, n)).collect::<Vec<_>>(),
        "edges": g.edges.iter().map(|e| json!({
            "from": e.from, "to": e.to, "kind": e.kind.as_str(),
        })).collect::<Vec<_>>(),
        "listed": g.listed.iter().map(|(t, ns)| json!({
            "type": t.full_name(), "namespace": ns,
        })).collect::<Vec<_>>(),
        "listedAllTypes": g.listed_all_types,
        "skipped": g.skipped.iter().map(|s| json!({
            "type": s.type_name, "namespace": s.namespace, "reason": s.reason,
        })).collect::<Vec<_>>(),
        "governing": g.governing,
        "notes": g.notes,
    })
}

fn node(g: &Graph, n: &Node) -> Value {
    let s = n.summary();
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("id", json!(n.id));
    put("apiVersion", json!(n.api_version));
    put("kind", json!(n.kind));
    put("namespace", json!(n.namespace));
    put("name", json!(n.name));
    put("uid", json!(object::uid(&n.object)));
    put("inspected", json!(n.id == g.target));
    put("relation", json!(n.relation.as_str()));
    put("ready", json!(s.ready));
    put("status", json!(s.status));
    put(
        "creationTimestamp",
        json!(n.object.pointer("/metadata/creationTimestamp")),
    );
    put(
        "deletionTimestamp",
        json!(n.object.pointer("/metadata/deletionTimestamp")),
    );
    put("finalizers", json!(object::finalizers(&n.object)));
    put("governedBy", json!(n.governed_by));
    put("group", json!(n.group));
    put("mapKey", json!(n.map_key));
    put("mapInput", json!(n.map_input));
    put("tombstone", json!(n.tombstone));
    put("missing", json!(n.missing));
    put("problem", json!(n.problem));
    put("generation", json!(object::generation(&n.object)));
    put(
        "observedGeneration",
        json!(n.object.pointer("/status/observedGeneration")),
    );
    put(
        "synced",
        json!(
            n.synced()
                .map(|(status, reason, message)| json!({"status": status, "reason": reason, "message": message}))
        ),
    );
    put("full", json!(n.full));
    Value::Object(m)
}
